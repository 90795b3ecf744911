package quant

import (
	"math"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

func TestByte(t *testing.T) {
	for _, tt := range []struct {
		v    float64
		want byte
	}{{-3, 0}, {-0.5, 0}, {0.49, 0}, {0.5, 1}, {127.5, 128}, {254.4, 254}, {254.5, 255}, {300, 255}, {math.NaN(), 0}, {math.Inf(1), 255}} {
		if got := Byte(tt.v); got != tt.want {
			t.Errorf("Byte(%v) = %d, want %d", tt.v, got, tt.want)
		}
	}
}

// Every alpha byte decodes to a finite logit that encodes back to the same byte, and a
// logit comes back within half a byte step of its opacity.
func TestAlpha(t *testing.T) {
	for b := 0; b < 256; b++ {
		l := AlphaLogit(byte(b))
		if math.IsInf(float64(l), 0) || math.IsNaN(float64(l)) {
			t.Fatalf("AlphaLogit(%d) = %v", b, l)
		}
		if got := AlphaByte(l); got != byte(b) {
			t.Fatalf("AlphaByte(AlphaLogit(%d)) = %d", b, got)
		}
	}
	for l := float32(-8); l <= 8; l += 0.37 {
		if d := math.Abs(float64(splat.Sigmoid(AlphaLogit(AlphaByte(l))) - splat.Sigmoid(l))); d > 0.5/255+1e-6 {
			t.Errorf("logit %v: opacity off by %g after a round trip", l, d)
		}
	}
}

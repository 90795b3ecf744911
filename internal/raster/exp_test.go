package raster

import (
	"math"
	"testing"
)

// TestExp32 compares exp32 with math.Exp over float32's normal results
// (within one float32 ulp of the exact value), and checks the edges: 0 at and
// below −87 and for NaN, exact at 0, math.Exp's value from 88 on.
func TestExp32(t *testing.T) {
	worst, worstX := 0.0, float32(0)
	for x := math.Nextafter32(-87, 0); x < 88; x += 0.000731 {
		got := float64(exp32(x))
		want := math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want))
		if u := math.Abs(got-want) / ulp; u > worst {
			worst, worstX = u, x
		}
	}
	if worst > 1 {
		t.Errorf("worst error %.3g float32 ulps at x = %v, want ≤ 1", worst, worstX)
	}
	for _, tt := range []struct {
		x, want float32
	}{
		{0, 1},
		{-87, 0},
		{-100.5, 0},
		{-1e30, 0},
		{float32(math.Inf(-1)), 0},
		{float32(math.NaN()), 0},
		{88, float32(math.Exp(88))},
		{89, float32(math.Inf(1))},
		{float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := exp32(tt.x); got != tt.want {
			t.Errorf("exp32(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
}

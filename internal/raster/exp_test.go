package raster

import (
	"math"
	"testing"
)

// TestExp32 compares exp32 with math.Exp over the normal float32 range (at
// most one float32 ulp apart) and the subnormal one (at most one subnormal
// step), and checks 0 below e^−100 and for NaN.
func TestExp32(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x <= 5; x += 0.000731 {
		got := float64(exp32(x))
		want := math.Exp(float64(x))
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
	}
	for x := float32(-99.9); x < -87; x += 0.01 {
		if d := math.Abs(float64(exp32(x)) - math.Exp(float64(x))); d > 1.5e-45 {
			t.Errorf("exp32(%v) off by %g", x, d)
		}
	}
	if worst > 1.2e-7 {
		t.Errorf("worst relative error %.3g, want ≤ 1.2e-7 (one float32 ulp)", worst)
	}
	for _, x := range []float32{-100.5, -1e30, float32(math.Inf(-1)), float32(math.NaN())} {
		if g := exp32(x); g != 0 {
			t.Errorf("exp32(%v) = %v, want 0", x, g)
		}
	}
	if g := exp32(0); g != 1 {
		t.Errorf("exp32(0) = %v, want 1", g)
	}
}

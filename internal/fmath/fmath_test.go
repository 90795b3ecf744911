package fmath

import (
	"math"
	"testing"
)

// ulps is |got − want| in float32 ulps of want (rounded to float32).
func ulps(got float32, want float64) float64 {
	w := float32(want)
	ulp := float64(math.Nextafter32(w, float32(math.Inf(1)))) - float64(w)
	return math.Abs(float64(got)-want) / ulp
}

// TestExp compares Exp with math.Exp over float32's normal results (within one float32 ulp of
// the exact value, up to the largest finite result), and checks the edges: 0 at and below −87
// and for NaN, exact at 0, +Inf from 89 on and where e^x overflows.
func TestExp(t *testing.T) {
	worst, worstX := 0.0, float32(0)
	for x := math.Nextafter32(-87, 0); x < 88.72; x += 0.000731 {
		if u := ulps(Exp(x), math.Exp(float64(x))); u > worst {
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
		{88.73, float32(math.Inf(1))}, // e^88.73 > MaxFloat32: n = 128's path overflows
		{89, float32(math.Inf(1))},
		{float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := Exp(tt.x); got != tt.want {
			t.Errorf("Exp(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
	// n = 128 with a finite result: e^88.72 ≈ 3.4e38.
	if got := Exp(88.72); math.IsInf(float64(got), 0) || ulps(got, math.Exp(float64(float32(88.72)))) > 1 {
		t.Errorf("Exp(88.72) = %v, want %v", got, math.Exp(float64(float32(88.72))))
	}
}

// TestLog compares Log with math.Log over normal and subnormal inputs (within 1 float32 ulp,
// or 2e-8 absolute near x = 1 where the result is tiny), and checks the edges.
func TestLog(t *testing.T) {
	worst, worstX := 0.0, float32(0)
	check := func(x float32) {
		want := math.Log(float64(x))
		got := Log(x)
		u := ulps(got, want)
		if math.Abs(float64(got)-want) <= 2e-8*math.Abs(want) {
			u = 0 // within 2e-8 relative: not worth an ulp count near log(1) = 0
		}
		if u > worst {
			worst, worstX = u, x
		}
	}
	// Subnormals step by their bits (a product by 1.0001 would not move them).
	for b := uint32(1); b < 0x00800000; b += 997 {
		check(math.Float32frombits(b))
	}
	for x := float32(1.2e-38); x < math.MaxFloat32/1.0001; x *= 1.0001 {
		check(x)
	}
	for x := float32(0.5); x < 2; x += 1.0 / 65536 {
		check(x)
	}
	if worst > 1 {
		t.Errorf("worst error %.3g float32 ulps at x = %v, want ≤ 1", worst, worstX)
	}
	nan := float32(math.NaN())
	for _, tt := range []struct {
		x, want float32
	}{
		{1, 0},
		{0, float32(math.Inf(-1))},
		{float32(math.Copysign(0, -1)), float32(math.Inf(-1))},
		{float32(math.Inf(1)), float32(math.Inf(1))},
	} {
		if got := Log(tt.x); got != tt.want {
			t.Errorf("Log(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
	for _, x := range []float32{-1, -1e-40, float32(math.Inf(-1)), nan} {
		if got := Log(x); got == got {
			t.Errorf("Log(%v) = %v, want NaN", x, got)
		}
	}
}

// TestSigmoid checks Sigmoid against float64 within 3 float32 ulps (Exp's ulp, 1 + e^−x's
// rounding and the division's) and its saturation.
func TestSigmoid(t *testing.T) {
	worst, worstX := 0.0, float32(0)
	for x := float32(-80); x < 80; x += 0.00113 {
		if u := ulps(Sigmoid(x), 1/(1+math.Exp(-float64(x)))); u > worst {
			worst, worstX = u, x
		}
	}
	if worst > 3 {
		t.Errorf("worst error %.3g float32 ulps at x = %v, want ≤ 3", worst, worstX)
	}
	for _, tt := range []struct{ x, want float32 }{{0, 0.5}, {100, 1}, {-100, 0}, {float32(math.Inf(1)), 1}, {float32(math.Inf(-1)), 0}} {
		if got := Sigmoid(tt.x); got != tt.want {
			t.Errorf("Sigmoid(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
}

package fmath

import (
	"math"
	"sort"
	"testing"
)

// TestNormalDistribution checks that Normal's samples over many keys have the standard normal's
// mean, variance and CDF (Kolmogorov–Smirnov distance), and that the coordinates each change the
// sample.
func TestNormalDistribution(t *testing.T) {
	const n = 200000
	xs := make([]float64, 0, n)
	var sum, sq float64
	for i := uint32(0); i < n/4; i++ {
		for axis := uint32(0); axis < 4; axis++ {
			x := float64(Normal(NormalKey(42, 7, i, axis)))
			xs = append(xs, x)
			sum += x
			sq += x * x
		}
	}
	mean := sum / n
	variance := sq/n - mean*mean
	// Standard errors: 1/√n ≈ 0.0022 for the mean, √(2/n) ≈ 0.0032 for the variance.
	if math.Abs(mean) > 0.01 {
		t.Errorf("mean %v, want 0 ± 0.01", mean)
	}
	if math.Abs(variance-1) > 0.015 {
		t.Errorf("variance %v, want 1 ± 0.015", variance)
	}
	sort.Float64s(xs)
	ks := 0.0
	for i, x := range xs {
		c := 0.5 * math.Erfc(-x/math.Sqrt2)
		ks = max(ks, math.Abs(c-float64(i)/n), math.Abs(c-float64(i+1)/n))
	}
	// The 0.1% critical value of the KS distance is 1.95/√n ≈ 0.0044.
	if ks > 0.0044 {
		t.Errorf("Kolmogorov–Smirnov distance %v to N(0,1), want < 0.0044", ks)
	}
}

func TestNormalKeyCoordinates(t *testing.T) {
	base := NormalKey(1, 2, 3, 0)
	for _, tc := range []struct {
		name string
		key  uint32
	}{
		{"seed low", NormalKey(2, 2, 3, 0)},
		{"seed high", NormalKey(1|1<<32, 2, 3, 0)},
		{"step", NormalKey(1, 3, 3, 0)},
		{"splat", NormalKey(1, 2, 4, 0)},
		{"axis", NormalKey(1, 2, 3, 1)},
	} {
		if tc.key == base {
			t.Errorf("changing the %s leaves the key %#x", tc.name, base)
		}
		if Normal(tc.key) == Normal(base) {
			t.Errorf("changing the %s leaves the sample %v", tc.name, Normal(base))
		}
	}
}

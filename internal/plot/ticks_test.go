package plot

import (
	"math"
	"testing"
)

func TestLinearTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 1000, []float64{0, 200, 400, 600, 800, 1000}},
		{0, 300, []float64{0, 100, 200, 300}},
		{0, 30000, []float64{0, 10000, 20000, 30000}},
		{12.3, 31.7, []float64{10, 15, 20, 25, 30, 35}},
		{-0.3, 0.45, []float64{-0.4, -0.2, 0, 0.2, 0.4, 0.6}},
		{7, 7, []float64{6, 6.5, 7, 7.5, 8}},
		{0, 7, []float64{0, 2, 4, 6, 8}},
	} {
		got := linearTicks(c.lo, c.hi)
		if !closeAll(got, c.want) {
			t.Errorf("[%g, %g]: %v, want %v", c.lo, c.hi, got, c.want)
		}
		// Every step is 1, 2 or 5 × 10^k and the ticks cover the range.
		if got[0] > c.lo || got[len(got)-1] < c.hi {
			t.Errorf("[%g, %g]: ticks %v do not cover it", c.lo, c.hi, got)
		}
	}
}

func TestLogTicks(t *testing.T) {
	l := math.Log10
	for _, c := range []struct {
		name   string
		lo, hi float64 // values, not logs
		want   []float64
	}{
		{"under a decade: linear round values", 0.032, 0.081, []float64{0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09}},
		{"one or two decades: 1, 2, 5", 0.013, 0.9, []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}},
		{"many decades: the decades", 2e-5, 0.3, []float64{1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1}},
		{"a demo run's loss: 1, 2, 5 around it", 0.0062, 0.17, []float64{0.005, 0.01, 0.02, 0.05, 0.1, 0.2}},
		{"linear reaching 0: the decades", 0.0011, 0.0089, []float64{0.001, 0.002, 0.005, 0.01}},
	} {
		got := logTicks(l(c.lo), l(c.hi))
		vals := make([]float64, len(got))
		for i, g := range got {
			vals[i] = math.Pow(10, g)
		}
		if !closeAll(vals, c.want) {
			t.Errorf("%s: %v, want %v", c.name, vals, c.want)
		}
	}
}

func TestTickLabels(t *testing.T) {
	for _, c := range []struct {
		v     float64
		ticks []float64
		want  string
	}{
		{200, []float64{0, 200}, "200"},
		{0.4, []float64{0.2, 0.4}, "0.4"},
		{0.05, []float64{0.04, 0.05}, "0.05"},
		{25, []float64{20, 25}, "25"},
	} {
		if got := tickLabel(c.v, c.ticks); got != c.want {
			t.Errorf("tickLabel(%g): %q, want %q", c.v, got, c.want)
		}
	}
	for v, want := range map[float64]string{0.2: "0.2", 1e-4: "0.0001", 50: "50"} {
		if got := logTickLabel(math.Log10(v)); got != want {
			t.Errorf("logTickLabel(%g): %q, want %q", v, got, want)
		}
	}
}

func closeAll(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9*math.Max(1, math.Abs(b[i])) {
			return false
		}
	}
	return true
}

package train

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The smoothed line follows the data on short runs: no start-up bias, and a lag that is a
// fixed small fraction of the run whatever its length.
func TestSmooth(t *testing.T) {
	for _, n := range []int{10, 60, 300, 6000} {
		span := smoothSpan(n)
		if want := math.Max(1, float64(n)/40); span != want {
			t.Errorf("%d points: span %g, want %g", n, span, want)
		}
		// A constant is its own average from the first point on (no bias toward 0).
		c := make([]float64, n)
		for i := range c {
			c[i] = 25
		}
		for i, v := range smooth(c, span) {
			if math.Abs(v-25) > 1e-9 {
				t.Fatalf("%d points: constant 25 smoothed to %g at %d", n, v, i)
			}
		}
		// A ramp: the lag behind the data stays under one window, so under 2.5% of the run
		// (and zero where the window is one point).
		r := make([]float64, n)
		for i := range r {
			r[i] = float64(i)
		}
		s := smooth(r, span)
		lag := r[n-1] - s[n-1]
		if lag < 0 || lag > span-1+1e-9 {
			t.Errorf("%d points: lag %g behind a ramp, want 0..%g", n, lag, span-1)
		}
		// A step half-way: within 5% of the new level three windows later.
		st := make([]float64, n)
		for i := n / 2; i < n; i++ {
			st[i] = 1
		}
		s = smooth(st, span)
		if at := n/2 + int(math.Ceil(3*span)); at < n && s[at] < 0.95 {
			t.Errorf("%d points: %g of a unit step %d points after it", n, s[at], at-n/2)
		}
	}
	// NaNs stay gaps and do not disturb the average.
	s := smooth([]float64{math.NaN(), 2, math.NaN(), 2}, 2)
	if !math.IsNaN(s[0]) || !math.IsNaN(s[2]) || s[1] != 2 || math.Abs(s[3]-2) > 1e-12 {
		t.Errorf("with gaps: %v", s)
	}
}

// The curve of a short run is a PNG of the two panels.
func TestWriteCurve(t *testing.T) {
	var pts []curvePoint
	for s := 10; s <= 300; s += 10 {
		test := math.NaN()
		if s%100 == 0 {
			test = 20 + float64(s)/100
		}
		pts = append(pts, curvePoint{Step: s, Loss: 0.1 / float64(s), PSNR: 15 + float64(s)/30, TestPSNR: test})
	}
	path := filepath.Join(t.TempDir(), "curve.png")
	if err := writeCurve(path, pts); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.DecodeConfig(f); err != nil {
		t.Fatal(err)
	}
}

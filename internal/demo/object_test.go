package demo

import (
	"math"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
)

// TestObjectRoundTrip writes the object scene as a NeRF-synthetic capture and loads it back:
// the loader must see the same split, cameras (to rounding) and targets (to 8-bit levels,
// over a white background as well as black), and the views must have real coverage edges.
func TestObjectRoundTrip(t *testing.T) {
	ds, err := Object(Options{Views: 12, Width: 40, Height: 40, TestEvery: 4, Seed: 2, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Train) != 9 || len(ds.Test) != 3 || ds.Points != nil {
		t.Fatalf("%d train / %d test views and %d points, want 9 / 3 and none", len(ds.Train), len(ds.Test), len(ds.Points)/3)
	}
	for _, v := range append(ds.Train, ds.Test...) {
		var empty, partial, full int
		for _, a := range v.Alpha {
			switch {
			case a < 1e-3:
				empty++
			case a > 0.999:
				full++
			default:
				partial++
			}
		}
		if empty < len(v.Alpha)/10 || full < len(v.Alpha)/10 || partial == 0 {
			t.Fatalf("view %s: coverage %d empty, %d partial, %d full pixels: not an object over nothing", v.Name, empty, partial, full)
		}
	}
	dir := t.TempDir()
	if err := WriteNeRF(dir, ds); err != nil {
		t.Fatal(err)
	}
	for _, bg := range [][3]float32{{0, 0, 0}, {1, 1, 1}} {
		opt := dataset.DefaultOptions()
		opt.Background = bg
		opt.Workers = 2
		got, err := dataset.Load(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Train) != len(ds.Train) || len(got.Test) != len(ds.Test) {
			t.Fatalf("loaded %d train / %d test views, wrote %d / %d", len(got.Train), len(got.Test), len(ds.Train), len(ds.Test))
		}
		for k, want := range append(ds.Train, ds.Test...) {
			v := append(got.Train, got.Test...)[k]
			if math.Abs(v.Camera.Fx-want.Camera.Fx) > 1e-9*want.Camera.Fx {
				t.Fatalf("view %s: fx %v, wrote %v", v.Name, v.Camera.Fx, want.Camera.Fx)
			}
			for i := 0; i < 3; i++ {
				if math.Abs(v.Camera.T[i]-want.Camera.T[i]) > 1e-6 {
					t.Fatalf("view %s: T %v, wrote %v", v.Name, v.Camera.T, want.Camera.T)
				}
				for j := 0; j < 3; j++ {
					if math.Abs(v.Camera.R[i][j]-want.Camera.R[i][j]) > 1e-6 {
						t.Fatalf("view %s: R %v, wrote %v", v.Name, v.Camera.R, want.Camera.R)
					}
				}
			}
			for i, c := range want.Image.RGB {
				a := want.Alpha[i/3]
				over := c + (1-a)*bg[i%3] // the premultiplied colour over bg
				// Straight colour and coverage are each rounded to 1/255; their product
				// and the composite carry both errors.
				if d := math.Abs(float64(v.Image.RGB[i] - over)); d > 2.5/255 {
					t.Fatalf("view %s, value %d over %v: loaded %v, want %v", v.Name, i, bg, v.Image.RGB[i], over)
				}
			}
		}
	}
}

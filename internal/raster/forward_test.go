package raster

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// Seeds of the random test scenes.
const (
	seedReference   = 20240601
	seedDeterminism = 77
	seedBadInput    = 5
)

// TestRenderMatchesReference checks Render, in float64 and float32, against
// the brute-force reference over many scene shapes: both models, tight and
// whole-image binning, partial tiles, several tile sizes, worker counts,
// caps and cutoffs.
func TestRenderMatchesReference(t *testing.T) {
	cases := []struct {
		name     string
		o        genOpts
		maxSteps int
		workers  int
	}{
		{"ewa/tight/16", genOpts{model: prep.EWA, n: 300, w: 61, h: 47, tile: 16, opMin: 0.05, opMax: 0.99, sigMin: 0.8, sigMax: 6, tight: true, alphaMin: prep.AlphaMin, invalid: 7}, 0, 1},
		{"ewa/tight/8/workers3", genOpts{model: prep.EWA, n: 300, w: 61, h: 47, tile: 8, opMin: 0.05, opMax: 0.99, sigMin: 0.8, sigMax: 6, tight: true, alphaMin: prep.AlphaMin, invalid: 7}, 0, 3},
		{"ewa/full/tiny-cutoff", genOpts{model: prep.EWA, n: 60, w: 40, h: 30, tile: 16, opMin: 0.05, opMax: 0.95, sigMin: 1, sigMax: 5, alphaMin: 1e-12}, 0, 2},
		{"ewa/cap4", genOpts{model: prep.EWA, n: 300, w: 61, h: 47, tile: 16, opMin: 0.05, opMax: 0.99, sigMin: 0.8, sigMax: 6, tight: true, alphaMin: prep.AlphaMin}, 4, 2},
		{"ewa/opaque", genOpts{model: prep.EWA, n: 200, w: 50, h: 40, tile: 16, opMin: 0.9, opMax: 1, sigMin: 3, sigMax: 10, tight: true, alphaMin: prep.AlphaMin}, 0, 1},
		{"ray/tight/16", genOpts{model: prep.Ray, n: 300, w: 61, h: 47, tile: 16, opMin: 0.05, opMax: 0.99, sigMin: 0.8, sigMax: 6, tight: true, alphaMin: prep.AlphaMin, invalid: 7}, 0, 1},
		{"ray/tight/8/workers3", genOpts{model: prep.Ray, n: 300, w: 61, h: 47, tile: 8, opMin: 0.05, opMax: 0.99, sigMin: 0.8, sigMax: 6, tight: true, alphaMin: prep.AlphaMin}, 0, 3},
		{"ray/full/tiny-cutoff", genOpts{model: prep.Ray, n: 60, w: 40, h: 30, tile: 16, opMin: 0.05, opMax: 0.95, sigMin: 1, sigMax: 5, alphaMin: 1e-12}, 0, 2},
		{"ray/cap4", genOpts{model: prep.Ray, n: 300, w: 61, h: 47, tile: 16, opMin: 0.05, opMax: 0.99, sigMin: 0.8, sigMax: 6, tight: true, alphaMin: prep.AlphaMin}, 4, 2},
		{"ray/opaque", genOpts{model: prep.Ray, n: 200, w: 50, h: 40, tile: 16, opMin: 0.9, opMax: 1, sigMin: 3, sigMax: 10, tight: true, alphaMin: prep.AlphaMin}, 0, 1},
		// Lists of four segments, faint wide splats: walks go on into the later segments, and
		// many cross TerminateT inside one, where the fold differs from a single walk.
		{"ewa/full/segments", genOpts{model: prep.EWA, n: 1800, w: 40, h: 30, tile: 16, opMin: 0.008, opMax: 0.02, sigMin: 10, sigMax: 30, alphaMin: prep.AlphaMin}, 0, 2},
		// The same lists for the ray model, which walks them whole: the segmented reference
		// renders them otherwise, Render must not.
		{"ray/full/whole", genOpts{model: prep.Ray, n: 1800, w: 40, h: 30, tile: 16, opMin: 0.008, opMax: 0.02, sigMin: 10, sigMax: 30, alphaMin: prep.AlphaMin}, 0, 1},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := genScene(seedReference+uint64(ci), c.o)
			seg := SegmentEntries
			if c.o.model == prep.Ray {
				seg = 0 // whole lists (raster.h)
				if strings.HasSuffix(c.name, "/whole") {
					segmented := reference(s.proj, s.rays, s.w, s.h, s.bg, c.o.alphaMin, c.maxSteps, SegmentEntries)
					if segmented.segmented < s.w*s.h/4 || relL2(segmented.img, reference(s.proj, s.rays, s.w, s.h, s.bg, c.o.alphaMin, c.maxSteps, 0).img) < 1e-6 {
						t.Fatal("segments would not change this scene's render: the case cannot tell a whole walk")
					}
				}
			}
			ref := reference(s.proj, s.rays, s.w, s.h, s.bg, c.o.alphaMin, c.maxSteps, seg)
			if got := sumHits(ref.hits); got == 0 {
				t.Fatal("test scene renders nothing")
			}
			if strings.HasSuffix(c.name, "/segments") {
				if ref.segmented < s.w*s.h/4 {
					t.Fatalf("%d pixels' walks reach a second segment: the case hardly tests them", ref.segmented)
				}
				// The fold's rule, not only its rounding: one walk renders measurably otherwise.
				if e := relL2(ref.img, reference(s.proj, s.rays, s.w, s.h, s.bg, c.o.alphaMin, c.maxSteps, 0).img); e < 1e-6 {
					t.Fatalf("the segmented walk is the single walk (rel. L2 %.3g): no pixel crosses TerminateT inside a segment", e)
				}
			}

			var f64 Forward[float64]
			if err := Render(frameOf[float64](s, c.o.alphaMin, c.maxSteps, c.workers), &f64); err != nil {
				t.Fatal(err)
			}
			if e := relL2(f64.Image, ref.img); e > 1e-6 {
				t.Errorf("float64 image: rel. L2 error %.3g > 1e-6", e)
			}
			if e := relL2(f64.FinalT, ref.finalT); e > 1e-6 {
				t.Errorf("float64 final T: rel. L2 error %.3g > 1e-6", e)
			}

			var f32 Forward[float32]
			if err := Render(frameOf[float32](s, c.o.alphaMin, c.maxSteps, c.workers), &f32); err != nil {
				t.Fatal(err)
			}
			if e := relL2(f32.Image, ref.img); e > 1e-5 {
				t.Errorf("float32 image: rel. L2 error %.3g > 1e-5", e)
			}
			if c.maxSteps > 0 {
				capped := 0
				for _, b := range ref.blend {
					if int(b) == c.maxSteps {
						capped++
					}
				}
				if capped == 0 {
					t.Errorf("no pixel reached the cap %d: the case does not test it", c.maxSteps)
				}
			}
		})
	}
}

func sumHits(h []int32) int {
	n := 0
	for _, v := range h {
		n += int(v)
	}
	return n
}

// TestMaxSplatSteps checks that the cap limits the splats blended per pixel
// (Count and Stats agree with the reference's counts) and changes the image.
func TestMaxSplatSteps(t *testing.T) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			o := genOpts{model: m, n: 120, w: 40, h: 32, tile: 8, opMin: 0.1, opMax: 0.6, sigMin: 2, sigMax: 6, tight: true, alphaMin: prep.AlphaMin}
			s := genScene(seedReference, o)
			const maxSteps = 2
			var capped, free Forward[float64]
			fc := frameOf[float64](s, prep.AlphaMin, maxSteps, 2)
			if err := Render(fc, &capped); err != nil {
				t.Fatal(err)
			}
			if err := Render(frameOf[float64](s, prep.AlphaMin, 0, 2), &free); err != nil {
				t.Fatal(err)
			}
			if slices.Equal(capped.Image, free.Image) {
				t.Fatal("the cap did not change the image")
			}
			ref := reference(s.proj, s.rays, s.w, s.h, s.bg, prep.AlphaMin, maxSteps, SegmentEntries)
			g := prep.NewPrepGrads[float64](m, s.proj.N)
			var st Stats[float64]
			if err := Backward(fc, &capped, make([]float64, 3*s.w*s.h), g, &st); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(st.Hits, ref.hits) {
				t.Errorf("Stats.Hits %v, reference %v", st.Hits, ref.hits)
			}
			for p, b := range ref.blend {
				if b > maxSteps {
					t.Fatalf("reference blended %d > %d at pixel %d", b, maxSteps, p)
				}
				if b > 0 && capped.Count[p] == 0 || b == 0 && capped.Count[p] != 0 {
					t.Fatalf("pixel %d: Count %d but the reference blended %d splats", p, capped.Count[p], b)
				}
			}
		})
	}
}

// TestEarlyTermination renders a stack of opaque splats: the pixels under
// it stop after three (0.95, 0.9, 0.9 leave T = 5e-4, and the fourth would
// take it to 5e-5 < 1e-4), so Count stops at 3 and FinalT stays ≥ 1e-4.
func TestEarlyTermination(t *testing.T) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			s := stackScene(m)
			ref := reference(s.proj, s.rays, s.w, s.h, s.bg, 1e-12, 0, SegmentEntries)
			var fw Forward[float64]
			if err := Render(frameOf[float64](s, 1e-12, 0, 1), &fw); err != nil {
				t.Fatal(err)
			}
			if e := relL2(fw.Image, ref.img); e > 1e-9 {
				t.Errorf("image: rel. L2 error %.3g", e)
			}
			centre := (s.h/2)*s.w + s.w/2
			if fw.Count[centre] != 3 || ref.blend[centre] != 3 {
				t.Errorf("centre pixel: Count %d, reference blended %d, want 3 and 3", fw.Count[centre], ref.blend[centre])
			}
			for p, tr := range fw.FinalT {
				if tr < TerminateT {
					t.Fatalf("pixel %d: final T %g < %g", p, tr, TerminateT)
				}
			}
		})
	}
}

// stackScene is 6 large splats centred on the image at increasing depths,
// opacities 0.95, 0.9, 0.9, 0.9, 0.8, 0.8.
func stackScene(m prep.Model) *testScene {
	const w, h, n = 24, 20, 6
	ops := []float64{0.95, 0.9, 0.9, 0.9, 0.8, 0.8}
	s := &testScene{proj: prep.NewProjected[float64](m, n), w: w, h: h, bg: [3]float64{0.3, 0.5, 0.7}, focal: 20}
	p := s.proj
	if m == prep.Ray {
		s.rays = make([]float64, w*h*3)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				d := normalize([3]float64{(float64(x) + 0.5 - s.cx()) / s.focal, (float64(y) + 0.5 - s.cy()) / s.focal, 1})
				copy(s.rays[3*(y*w+x):], d[:])
			}
		}
	}
	for i := 0; i < n; i++ {
		p.Valid[i] = true
		p.Opacity[i] = ops[i]
		p.Depth[i] = 2 + float64(i)
		p.Color[3*i], p.Color[3*i+1], p.Color[3*i+2] = 0.1*float64(i), 1-0.15*float64(i), 0.5
		// Centres a little off the pixel grid so no pixel sits on the
		// termination boundary.
		mx, my := s.cx()+0.13*float64(i)+0.21, s.cy()-0.07*float64(i)+0.17
		p.Mean2D[2*i], p.Mean2D[2*i+1] = mx, my
		sig := 5.0 + float64(i)
		p.Conic[3*i], p.Conic[3*i+1], p.Conic[3*i+2] = 1/(sig*sig), 0.2/(sig*sig), 1.3/(sig*sig)
		if m == prep.Ray {
			z := p.Depth[i]
			mu := [3]float64{z * (mx - s.cx()) / s.focal, z * (my - s.cy()) / s.focal, z}
			sg := [3]float64{sig * z / s.focal, 1.2 * sig * z / s.focal, 0.5 * z / s.focal}
			for k := 0; k < 3; k++ {
				p.RayA[9*i+4*k] = 1 / sg[k] // axis-aligned: R = I
				p.RayU[3*i+k] = -mu[k] / sg[k]
			}
		}
		p.Rect[4*i+2], p.Rect[4*i+3] = 3, 3
	}
	s.lists = binNaive(p, w, h, 8)
	return s
}

// TestZeroSplats: no splats (or only invalid, unbinned ones) renders the
// background with T = 1, and gives zero gradients and stats.
func TestZeroSplats(t *testing.T) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		for _, invalid := range []int{0, 5} {
			t.Run(fmt.Sprintf("%v/invalid%d", m, invalid), func(t *testing.T) {
				s := genScene(1, genOpts{model: m, n: 0, invalid: invalid, w: 19, h: 13, tile: 8, opMin: 0.5, opMax: 0.5, sigMin: 2, sigMax: 2, alphaMin: prep.AlphaMin})
				f := frameOf[float32](s, 0, 0, 2)
				var fw Forward[float32]
				if err := Render(f, &fw); err != nil {
					t.Fatal(err)
				}
				for p := 0; p < s.w*s.h; p++ {
					for c := 0; c < 3; c++ {
						if fw.Image[3*p+c] != f.Background[c] {
							t.Fatalf("pixel %d channel %d = %v, want background %v", p, c, fw.Image[3*p+c], f.Background[c])
						}
					}
					if fw.FinalT[p] != 1 || fw.Count[p] != 0 {
						t.Fatalf("pixel %d: T %v, Count %d, want 1 and 0", p, fw.FinalT[p], fw.Count[p])
					}
				}
				g := prep.NewPrepGrads[float32](m, s.proj.N)
				for i := range g.Color {
					g.Color[i] = 7 // must be overwritten
				}
				dImage := make([]float32, 3*s.w*s.h)
				for i := range dImage {
					dImage[i] = 1
				}
				var st Stats[float32]
				if err := Backward(f, &fw, dImage, g, &st); err != nil {
					t.Fatal(err)
				}
				for _, grp := range [][]float32{g.Color, g.Opacity, g.Mean2D, g.Conic, g.RayU, g.RayA, st.AbsMean2D} {
					for i, v := range grp {
						if v != 0 {
							t.Fatalf("gradient %d = %v, want 0", i, v)
						}
					}
				}
				for i, v := range st.Hits {
					if v != 0 {
						t.Fatalf("Hits[%d] = %d, want 0", i, v)
					}
				}
			})
		}
	}
}

// TestRenderIndependentOfWorkers: the forward is per pixel, so any worker
// count gives the same bits.
func TestRenderIndependentOfWorkers(t *testing.T) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			s := genScene(seedDeterminism, genOpts{model: m, n: 400, w: 70, h: 50, tile: 16, opMin: 0.05, opMax: 0.99, sigMin: 1, sigMax: 8, tight: true, alphaMin: prep.AlphaMin})
			var r Rasterizer[float32]
			var base Forward[float32]
			if err := r.Render(frameOf[float32](s, 0, 0, 1), &base); err != nil {
				t.Fatal(err)
			}
			for _, workers := range []int{1, 2, 5} {
				var fw Forward[float32]
				if err := r.Render(frameOf[float32](s, 0, 0, workers), &fw); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(fw.Image, base.Image) || !slices.Equal(fw.FinalT, base.FinalT) || !slices.Equal(fw.Count, base.Count) {
					t.Errorf("Workers=%d: forward differs from Workers=1", workers)
				}
			}
		})
	}
}

// TestRayCrop: with prep's footprint (BoundQ) the ray model visits fewer
// pixels but renders the same bits as without it (a zero BoundQ disables
// the crop).
func TestRayCrop(t *testing.T) {
	s := genScene(seedDeterminism, genOpts{model: prep.Ray, n: 300, w: 61, h: 47, tile: 16, opMin: 0.05, opMax: 0.99, sigMin: 1, sigMax: 6, tight: true, alphaMin: prep.AlphaMin})
	f := frameOf[float32](s, 0, 0, 1)
	var cropped, plain Forward[float32]
	if err := Render(f, &cropped); err != nil {
		t.Fatal(err)
	}
	nocrop := *f.Proj
	nocrop.BoundQ = make([]float32, len(f.Proj.BoundQ))
	f.Proj = &nocrop
	if err := Render(f, &plain); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cropped.Image, plain.Image) || !slices.Equal(cropped.Count, plain.Count) {
		t.Fatal("the footprint crop changed the ray-model image")
	}
}

// TestBadInput: broken frames give an error that names the problem, never
// a panic.
func TestBadInput(t *testing.T) {
	cases := []struct {
		name  string
		model prep.Model
		edit  func(f *Frame[float32], fw *Forward[float32], dImage *[]float32, g *prep.PrepGradsOf[float32])
		want  string
	}{
		{"nil proj", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) { f.Proj = nil }, "Proj is nil"},
		{"nil lists", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Lists = nil
		}, "Lists is nil"},
		{"zero size", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) { f.Width = 0 }, "image size"},
		{"short conic", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Proj.Conic = f.Proj.Conic[:5]
		}, "Proj.Conic"},
		{"id out of range", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Lists.IDs[3] = int32(f.Proj.N)
		}, "IDs[3]"},
		{"negative id", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Lists.IDs[0] = -1
		}, "IDs[0]"},
		{"invalid splat listed", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Proj.Valid[f.Lists.IDs[2]] = false
		}, "not valid"},
		{"offsets decreasing", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Lists.Offsets[2] = f.Lists.Offsets[1] - 1
		}, "Offsets[2]"},
		{"offsets past ids", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Lists.IDs = f.Lists.IDs[:len(f.Lists.IDs)-1]
		}, "past the"},
		{"offsets length", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Lists.Offsets = f.Lists.Offsets[:3]
		}, "Offsets has"},
		{"tile grid", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Lists.TilesX++
		}, "tiles"},
		{"tile size", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Lists.TileSize = 0
		}, "TileSize"},
		{"alpha min", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.AlphaMin = -1
		}, "AlphaMin"},
		{"alpha min NaN", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.AlphaMin = float32(math.NaN())
		}, "AlphaMin"},
		{"max steps", prep.EWA, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.MaxSplatSteps = -2
		}, "MaxSplatSteps"},
		{"rays", prep.Ray, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Rays = f.Rays[:10]
		}, "Rays"},
		{"short rayA", prep.Ray, func(f *Frame[float32], _ *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			f.Proj.RayA = f.Proj.RayA[:9]
		}, "Proj.RayA"},
		{"count too large", prep.EWA, func(_ *Frame[float32], fw *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			fw.Count[17] = 1 << 20
		}, "Count of pixel (17, 0)"},
		{"count negative", prep.Ray, func(_ *Frame[float32], fw *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			fw.Count[0] = -1
		}, "Count of pixel (0, 0)"},
		{"short final T", prep.EWA, func(_ *Frame[float32], fw *Forward[float32], _ *[]float32, _ *prep.PrepGradsOf[float32]) {
			fw.FinalT = fw.FinalT[:1]
		}, "FinalT"},
		{"dImage", prep.EWA, func(_ *Frame[float32], _ *Forward[float32], d *[]float32, _ *prep.PrepGradsOf[float32]) {
			*d = (*d)[:7]
		}, "dImage"},
		{"gradient shape", prep.EWA, func(_ *Frame[float32], _ *Forward[float32], _ *[]float32, g *prep.PrepGradsOf[float32]) {
			g.Conic = g.Conic[:1]
		}, "gradient Conic"},
		{"gradient of the other model", prep.Ray, func(_ *Frame[float32], _ *Forward[float32], _ *[]float32, g *prep.PrepGradsOf[float32]) {
			g.RayU = nil
		}, "gradient RayU"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := genScene(seedBadInput, genOpts{model: c.model, n: 40, w: 33, h: 21, tile: 8, opMin: 0.2, opMax: 0.9, sigMin: 1, sigMax: 4, tight: true, alphaMin: prep.AlphaMin})
			f := frameOf[float32](s, 0, 0, 2)
			f.Lists = cloneLists(s.lists)
			var fw Forward[float32]
			if err := Render(f, &fw); err != nil {
				t.Fatalf("good frame: %v", err)
			}
			dImage := make([]float32, 3*s.w*s.h)
			g := prep.NewPrepGrads[float32](c.model, s.proj.N)
			c.edit(f, &fw, &dImage, g)
			// A fresh Forward, so that a frame error shows here and fw keeps
			// its edits for the backward.
			err := Render(f, &Forward[float32]{})
			if err == nil {
				err = Backward(f, &fw, dImage, g, nil)
			}
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", c.want)
			}
			if !strings.HasPrefix(err.Error(), "raster: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want the prefix \"raster: \" and %q", err, c.want)
			}
		})
	}
}

func cloneLists(l *prep.TileLists) *prep.TileLists {
	c := *l
	c.Keys = slices.Clone(l.Keys)
	c.IDs = slices.Clone(l.IDs)
	c.Offsets = slices.Clone(l.Offsets)
	return &c
}

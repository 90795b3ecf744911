package raster

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// Seeds of the gradient tests.
const (
	seedFD     = 4242
	seedDImage = 99
)

// fdStep is the central-difference step for every prepared value.
const fdStep = 1e-6

// fdTol is the largest accepted ‖analytic − fd‖/‖fd‖ per group.
const fdTol = 1e-3

// group is one prepared-data array and its analytic gradient.
type group struct {
	name        string
	param, grad []float64
}

func groupsOf(p *prep.ProjectedOf[float64], g *prep.PrepGradsOf[float64]) []group {
	gs := []group{{"Color", p.Color, g.Color}, {"Opacity", p.Opacity, g.Opacity}}
	if p.Model == prep.EWA {
		return append(gs, group{"Mean2D", p.Mean2D, g.Mean2D}, group{"Conic", p.Conic, g.Conic})
	}
	return append(gs, group{"RayU", p.RayU, g.RayU}, group{"RayA", p.RayA, g.RayA})
}

// lossOf renders f and returns L = Σ dImage·image.
func lossOf(t *testing.T, r *Rasterizer[float64], f *Frame[float64], dImage []float64) float64 {
	var fw Forward[float64]
	if err := r.Render(f, &fw); err != nil {
		t.Fatal(err)
	}
	var l float64
	for i, v := range fw.Image {
		l += dImage[i] * v
	}
	return l
}

// finiteDiff returns the central differences of lossOf with respect to
// every value of param (an array of f.Proj).
func finiteDiff(t *testing.T, f *Frame[float64], dImage, param []float64) []float64 {
	var r Rasterizer[float64]
	fd := make([]float64, len(param))
	for i := range param {
		v := param[i]
		param[i] = v + fdStep
		lp := lossOf(t, &r, f, dImage)
		param[i] = v - fdStep
		lm := lossOf(t, &r, f, dImage)
		param[i] = v
		fd[i] = (lp - lm) / (2 * fdStep)
	}
	return fd
}

// compareGrad returns an error when ‖analytic − fd‖/‖fd‖ exceeds tol (or,
// for a zero fd, when the analytic gradient is not tiny), naming the worst
// element.
func compareGrad(name string, analytic, fd []float64, tol float64) error {
	if len(analytic) != len(fd) {
		return fmt.Errorf("%s: %d analytic values, %d finite differences", name, len(analytic), len(fd))
	}
	var num, den, worst float64
	wi := -1
	for i := range fd {
		d := analytic[i] - fd[i]
		num += d * d
		den += fd[i] * fd[i]
		if math.Abs(d) > worst || math.IsNaN(d) {
			worst, wi = math.Abs(d), i
		}
	}
	num, den = math.Sqrt(num), math.Sqrt(den)
	if den == 0 {
		if num > 1e-12 || math.IsNaN(num) {
			return fmt.Errorf("%s: finite differences are zero, analytic norm %.3g (worst element %d: %g)", name, num, wi, analytic[wi])
		}
		return nil
	}
	if e := num / den; !(e <= tol) {
		return fmt.Errorf("%s: rel. error %.3g > %.3g (worst element %d: analytic %.6g, fd %.6g)", name, e, tol, wi, analytic[wi], fd[wi])
	}
	return nil
}

// fdCase is one scene for the finite-difference checks.
type fdCase struct {
	name     string
	o        genOpts
	maxSteps int
	workers  int
	stack    bool // use stackScene (early termination) instead of a random scene
	clamp    bool // the scene must hit the 0.99 clamp
}

func fdCases() []fdCase {
	base := func(m prep.Model) genOpts {
		return genOpts{model: m, n: 20, w: 24, h: 20, tile: 8, opMin: 0.1, opMax: 0.9, sigMin: 1.5, sigMax: 5, alphaMin: 1e-12}
	}
	var cs []fdCase
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		clamp := base(m)
		// Opacities near 1 and wide splats, so that pixel centres near a
		// splat's centre get o·G > 0.99.
		clamp.opMin, clamp.opMax, clamp.sigMin, clamp.sigMax = 0.97, 1, 3, 6
		tight := base(m)
		tight.tight = true
		cs = append(cs,
			fdCase{name: m.String() + "/plain", o: base(m), workers: 1},
			fdCase{name: m.String() + "/cap3", o: base(m), maxSteps: 3, workers: 2},
			fdCase{name: m.String() + "/clamp", o: clamp, workers: 1, clamp: true},
			fdCase{name: m.String() + "/tight/workers3", o: tight, workers: 3},
			fdCase{name: m.String() + "/early-termination", o: genOpts{model: m}, workers: 1, stack: true},
		)
	}
	return cs
}

// fdScene builds the case's scene, trying seeds until the scene stays clear
// of the places where the image is not differentiable (the termination
// threshold, the clamp, the ray model's u·v = 0), so that finite
// differences are meaningful.
func fdScene(t *testing.T, c fdCase) *testScene {
	if c.stack {
		s := stackScene(c.o.model)
		ref := reference(s.proj, s.rays, s.w, s.h, s.bg, 1e-12, c.maxSteps, SegmentEntries)
		if ref.termMargin < 1e-3 {
			t.Fatalf("stack scene too close to the termination threshold (margin %g)", ref.termMargin)
		}
		return s
	}
	for seed := uint64(seedFD); seed < seedFD+100; seed++ {
		s := genScene(seed, c.o)
		ref := reference(s.proj, s.rays, s.w, s.h, s.bg, c.o.alphaMin, c.maxSteps, SegmentEntries)
		if ref.termMargin < 1e-3 || ref.clampMargin < 1e-4 || ref.rayMargin < 1e-3 {
			continue
		}
		if c.clamp && ref.clamped < 3 {
			continue
		}
		return s
	}
	t.Fatal("no finite-difference-safe scene found")
	return nil
}

func randomDImage(n int) []float64 {
	rng := rand.New(rand.NewPCG(seedDImage, 1))
	d := make([]float64, n)
	for i := range d {
		d[i] = rng.Float64()*2 - 1
	}
	return d
}

// TestBackwardMatchesFiniteDifferences checks every gradient group of both
// models against central differences of Render in float64, with a cap,
// with the clamp, with several workers and with early termination.
func TestBackwardMatchesFiniteDifferences(t *testing.T) {
	for _, c := range fdCases() {
		t.Run(c.name, func(t *testing.T) {
			s := fdScene(t, c)
			f := frameOf[float64](s, 1e-12, c.maxSteps, c.workers)
			dImage := randomDImage(3 * s.w * s.h)
			g := analytic(t, f, dImage)
			for _, gr := range groupsOf(f.Proj, g) {
				fd := finiteDiff(t, f, dImage, gr.param)
				if err := compareGrad(gr.name, gr.grad, fd, fdTol); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// analytic runs Render and Backward.
func analytic(t *testing.T, f *Frame[float64], dImage []float64) *prep.PrepGradsOf[float64] {
	var fw Forward[float64]
	if err := Render(f, &fw); err != nil {
		t.Fatal(err)
	}
	g := prep.NewPrepGrads[float64](f.Proj.Model, f.Proj.N)
	if err := Backward(f, &fw, dImage, g, nil); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGradCheckCatchesBrokenGradients proves the check can fail: typical
// backward mistakes, applied to correct gradients, are caught.
func TestGradCheckCatchesBrokenGradients(t *testing.T) {
	cases := []struct {
		name  string
		model prep.Model
		group string
		// breakIt spoils the gradients; it may re-run the backward.
		breakIt func(t *testing.T, f *Frame[float64], g *prep.PrepGradsOf[float64], dImage []float64)
	}{
		{"opacity off by 1%", prep.EWA, "Opacity", func(_ *testing.T, _ *Frame[float64], g *prep.PrepGradsOf[float64], _ []float64) {
			for i := range g.Opacity {
				g.Opacity[i] *= 1.01
			}
		}},
		{"mean2D with d = mean − pixel", prep.EWA, "Mean2D", func(_ *testing.T, _ *Frame[float64], g *prep.PrepGradsOf[float64], _ []float64) {
			for i := range g.Mean2D {
				g.Mean2D[i] = -g.Mean2D[i]
			}
		}},
		{"conic b with ∂power/∂b = −½dx·dy", prep.EWA, "Conic", func(_ *testing.T, _ *Frame[float64], g *prep.PrepGradsOf[float64], _ []float64) {
			for i := 1; i < len(g.Conic); i += 3 {
				g.Conic[i] /= 2
			}
		}},
		{"background term left out of dL/dα", prep.EWA, "Opacity", func(t *testing.T, f *Frame[float64], g *prep.PrepGradsOf[float64], dImage []float64) {
			// Forward with the background, backward without it.
			var fw Forward[float64]
			if err := Render(f, &fw); err != nil {
				t.Fatal(err)
			}
			nb := *f
			nb.Background = [3]float64{}
			if err := Backward(&nb, &fw, dImage, g, nil); err != nil {
				t.Fatal(err)
			}
		}},
		{"rayA transposed", prep.Ray, "RayA", func(_ *testing.T, _ *Frame[float64], g *prep.PrepGradsOf[float64], _ []float64) {
			for j := 0; j < len(g.RayA); j += 9 {
				a := g.RayA[j : j+9]
				a[1], a[3] = a[3], a[1]
				a[2], a[6] = a[6], a[2]
				a[5], a[7] = a[7], a[5]
			}
		}},
		{"rayU sign", prep.Ray, "RayU", func(_ *testing.T, _ *Frame[float64], g *prep.PrepGradsOf[float64], _ []float64) {
			for i := range g.RayU {
				g.RayU[i] = -g.RayU[i]
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fc := fdCase{o: genOpts{model: c.model, n: 20, w: 24, h: 20, tile: 8, opMin: 0.1, opMax: 0.9, sigMin: 1.5, sigMax: 5, alphaMin: 1e-12}, workers: 1}
			s := fdScene(t, fc)
			f := frameOf[float64](s, 1e-12, 0, 1)
			dImage := randomDImage(3 * s.w * s.h)
			g := analytic(t, f, dImage)
			var target group
			for _, gr := range groupsOf(f.Proj, g) {
				if gr.name == c.group {
					target = gr
				}
			}
			fd := finiteDiff(t, f, dImage, target.param)
			if err := compareGrad(c.group, target.grad, fd, fdTol); err != nil {
				t.Fatalf("correct gradient rejected: %v", err)
			}
			c.breakIt(t, f, g, dImage)
			for _, gr := range groupsOf(f.Proj, g) {
				if gr.name == c.group {
					target = gr
				}
			}
			if err := compareGrad(c.group, target.grad, fd, fdTol); err == nil {
				t.Fatal("broken gradient passed the check")
			} else {
				t.Logf("caught: %v", err)
			}
		})
	}
}

// TestBackwardDeterministic: Workers=1 repeated and float32 Workers=2
// repeated give the same bits (fresh or reused Rasterizer); different
// worker counts agree closely.
func TestBackwardDeterministic(t *testing.T) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			s := genScene(seedDeterminism, genOpts{model: m, n: 400, w: 70, h: 50, tile: 16, opMin: 0.05, opMax: 0.99, sigMin: 1, sigMax: 8, tight: true, alphaMin: prep.AlphaMin})
			dImage := convert[float32](randomDImage(3 * s.w * s.h))
			var reused Rasterizer[float32]
			run := func(r *Rasterizer[float32], workers int) (*prep.PrepGradsOf[float32], *Stats[float32]) {
				f := frameOf[float32](s, 0, 0, workers)
				var fw Forward[float32]
				if err := r.Render(f, &fw); err != nil {
					t.Fatal(err)
				}
				g := prep.NewPrepGrads[float32](m, s.proj.N)
				st := &Stats[float32]{}
				if err := r.Backward(f, &fw, dImage, g, st); err != nil {
					t.Fatal(err)
				}
				return g, st
			}
			same := func(a, b *prep.PrepGradsOf[float32], sa, sb *Stats[float32]) bool {
				return slices.Equal(a.Color, b.Color) && slices.Equal(a.Opacity, b.Opacity) &&
					slices.Equal(a.Mean2D, b.Mean2D) && slices.Equal(a.Conic, b.Conic) &&
					slices.Equal(a.RayU, b.RayU) && slices.Equal(a.RayA, b.RayA) &&
					slices.Equal(sa.Hits, sb.Hits) && slices.Equal(sa.AbsMean2D, sb.AbsMean2D)
			}
			for _, workers := range []int{1, 2} {
				g1, s1 := run(&Rasterizer[float32]{}, workers)
				g2, s2 := run(&reused, workers)
				g3, s3 := run(&reused, workers)
				if !same(g1, g2, s1, s2) || !same(g2, g3, s2, s3) {
					t.Errorf("Workers=%d: gradients differ between runs", workers)
				}
			}
			g1, _ := run(&reused, 1)
			g2, _ := run(&reused, 2)
			for _, p := range [][2][]float32{{g1.Color, g2.Color}, {g1.Opacity, g2.Opacity}, {g1.Mean2D, g2.Mean2D}, {g1.RayA, g2.RayA}} {
				if e := relL2(p[0], toF64(p[1])); e > 1e-5 {
					t.Errorf("Workers 1 vs 2: rel. difference %.3g", e)
				}
			}
		})
	}
}

func toF64(s []float32) []float64 {
	o := make([]float64, len(s))
	for i, v := range s {
		o[i] = float64(v)
	}
	return o
}

// TestStats: Hits match the reference's per-splat counts; AbsMean2D is the
// sum over pixels of |per-pixel ∂L/∂Mean2D|, checked by running the
// backward once per pixel with a one-pixel dImage.
func TestStats(t *testing.T) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		t.Run(m.String(), func(t *testing.T) {
			s := genScene(seedFD, genOpts{model: m, n: 30, w: 24, h: 20, tile: 8, opMin: 0.1, opMax: 0.9, sigMin: 1, sigMax: 4, tight: true, alphaMin: prep.AlphaMin})
			f := frameOf[float64](s, 0, 0, 2)
			var fw Forward[float64]
			if err := Render(f, &fw); err != nil {
				t.Fatal(err)
			}
			dImage := randomDImage(3 * s.w * s.h)
			g := prep.NewPrepGrads[float64](m, s.proj.N)
			var st Stats[float64]
			if err := Backward(f, &fw, dImage, g, &st); err != nil {
				t.Fatal(err)
			}
			ref := reference(s.proj, s.rays, s.w, s.h, s.bg, prep.AlphaMin, 0, SegmentEntries)
			if !slices.Equal(st.Hits, ref.hits) {
				t.Errorf("Hits %v, reference %v", st.Hits, ref.hits)
			}
			if m == prep.Ray {
				if st.AbsMean2D != nil {
					t.Error("AbsMean2D set for the ray model")
				}
				return
			}
			want := make([]float64, 2*s.proj.N)
			one := make([]float64, len(dImage))
			gp := prep.NewPrepGrads[float64](m, s.proj.N)
			var r Rasterizer[float64]
			for p := 0; p < s.w*s.h; p++ {
				clear(one)
				copy(one[3*p:3*p+3], dImage[3*p:3*p+3])
				if err := r.Backward(f, &fw, one, gp, nil); err != nil {
					t.Fatal(err)
				}
				for i, v := range gp.Mean2D {
					want[i] += math.Abs(v)
				}
			}
			if e := relL2(st.AbsMean2D, want); e > 1e-12 {
				t.Errorf("AbsMean2D: rel. error %.3g", e)
			}
			for i, v := range g.Mean2D {
				if math.Abs(v) > st.AbsMean2D[i]*(1+1e-12) {
					t.Fatalf("|Mean2D grad %d| = %g above AbsMean2D %g", i, math.Abs(v), st.AbsMean2D[i])
				}
			}
			// The same sums in the prepared gradients' Mean2DAbs (the AbsGrad statistic's
			// input), alone and with the stats asked for too.
			for _, withStats := range []bool{false, true} {
				ga := prep.NewPrepGrads[float64](m, s.proj.N)
				ga.Mean2DAbs = make([]float64, 2*s.proj.N)
				var sa *Stats[float64]
				if withStats {
					sa = &Stats[float64]{}
				}
				if err := Backward(f, &fw, dImage, ga, sa); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ga.Mean2DAbs, st.AbsMean2D) || (withStats && !slices.Equal(sa.AbsMean2D, st.AbsMean2D)) {
					t.Fatalf("Mean2DAbs (stats asked for: %v) differs from the stats' AbsMean2D", withStats)
				}
			}
		})
	}
}

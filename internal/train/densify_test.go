package train

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/splattest"
)

// around returns x and its float32 neighbours up to k steps either side, and
// values a little further off, so that the tests probe each side of a cutoff.
func around(x float64, k int) []float32 {
	c := float32(x)
	out := []float32{c}
	up, down := c, c
	for range k {
		up = math.Nextafter32(up, float32(math.Inf(1)))
		down = math.Nextafter32(down, float32(math.Inf(-1)))
		out = append(out, up, down)
	}
	for _, d := range []float64{1e-7, 1e-6, 1e-5, 1e-4, 1e-3} {
		out = append(out, float32(x+d), float32(x-d), float32(x*(1+d)), float32(x*(1-d)))
	}
	return out
}

func special() []float32 {
	return []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.MaxFloat32, -math.MaxFloat32, 88, -88, 104, -104}
}

// pruneMaskExact is pruneMask as the original states it, every exp evaluated.
func pruneMaskExact(g engine.Shapes, st engine.Stats, d *DensifyOptions, extent float64, big bool) []bool {
	remove := make([]bool, g.Len())
	for i := range remove {
		r := float64(splat.Sigmoid(g.OpacityLogits[i])) < d.PruneOpacity
		if big && !r {
			r = (d.MaxScreenSize > 0 && float64(st.MaxRadius[i]) > d.MaxScreenSize) ||
				(d.MaxWorldScale > 0 && maxScale(g, i) > d.MaxWorldScale*extent)
		}
		remove[i] = r
	}
	return remove
}

// TestPruneMask checks the fast prune test against the exact one at thresholds
// across (0,1) and outside it, with logits and log-scales at and around each
// cutoff, far from it and special (NaN, ±Inf, ±0), with and without the size
// tests.
func TestPruneMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const extent = 2.5
	for _, th := range []float64{0.005, 0.5, 0.999999, 1e-30, 0, 1, math.NaN()} {
		for _, world := range []float64{0.1, 1e-30, 0, -1, math.Inf(1), math.NaN()} {
			xs := special()
			if th > 0 && th < 1 {
				xs = append(xs, around(logit(th), 64)...)
			}
			ls := special()
			if l := world * extent; l > 0 && !math.IsInf(l, 1) {
				ls = append(ls, around(math.Log(l), 64)...)
			}
			n := max(len(xs), len(ls)) + 5000
			g := engine.Shapes{LogScales: make([]float32, 3*n), OpacityLogits: make([]float32, n)}
			st := engine.Stats{MaxRadius: make([]float32, n)}
			for i := range n {
				g.OpacityLogits[i] = float32(rng.NormFloat64() * 8)
				if i < len(xs) {
					g.OpacityLogits[i] = xs[i]
				}
				for k := range 3 {
					g.LogScales[3*i+k] = float32(rng.NormFloat64()*3 - 3)
				}
				if i < len(ls) {
					g.LogScales[3*i+i%3] = ls[i] // the largest, in each position in turn
					g.LogScales[3*i+(i+1)%3] = -80
					g.LogScales[3*i+(i+2)%3] = -90
				}
				st.MaxRadius[i] = float32(rng.ExpFloat64() * 20)
			}
			for _, screen := range []float64{20, 0} {
				d := &DensifyOptions{PruneOpacity: th, MaxScreenSize: screen, MaxWorldScale: world}
				for _, big := range []bool{true, false} {
					got, count := pruneMask(g, st, d, extent, big, 3)
					want := pruneMaskExact(g, st, d, extent, big)
					c := 0
					for i := range want {
						if got[i] != want[i] {
							t.Fatalf("opacity %v, world %v, screen %v, big %v: splat %d (logit %v, log-scales %v, radius %v): %v, exact %v",
								th, world, screen, big, i, g.OpacityLogits[i], g.LogScales[3*i:3*i+3], st.MaxRadius[i], got[i], want[i])
						}
						if want[i] {
							c++
						}
					}
					if count != c {
						t.Fatalf("opacity %v, world %v: count %d, want %d", th, world, count, c)
					}
					// Statistics zeroed by a growth carry no radii: the screen test prunes nothing.
					d0 := *d
					d0.MaxScreenSize = 0
					if noRadii, _ := pruneMask(g, engine.Stats{}, d, extent, big, 3); !slices.Equal(noRadii, pruneMaskExact(g, st, &d0, extent, big)) {
						t.Fatalf("opacity %v, world %v, screen %v, big %v: without radii the mask is not the one without the screen test", th, world, screen, big)
					}
				}
			}
		}
	}
}

// TestGrownVerdicts checks the prune after a growth, judged on the splats before it
// (grownVerdicts), against pruneMask on the grown splats themselves (engine.ApplyEdit, the CPU
// engine's edit), with splats near both cutoffs cloned and split into 2 and 3 children, and
// with and without the size tests.
func TestGrownVerdicts(t *testing.T) {
	const n, extent = 3000, 2.5
	rng := rand.New(rand.NewPCG(5, 6))
	g := splattest.RandomScene(11, n, 0, 0.5)
	for i := range n {
		// Opacities around the floor and largest scales around the world limit, where a split
		// child (its scales divided by 0.8·SplitN) lands on the other side of it.
		g.OpacityLogits[i] = float32(logit(0.005) + rng.NormFloat64()*0.3)
		for k := range 3 {
			g.LogScales[3*i+k] = float32(math.Log(0.1*extent) + rng.NormFloat64()*0.4)
		}
	}
	sh := engine.Shapes{LogScales: g.LogScales, OpacityLogits: g.OpacityLogits}
	for _, splitN := range []int{2, 3} {
		e := engine.Edit{SplitN: splitN, SplitScaleDiv: float32(0.8 * float64(splitN))}
		for i := range n {
			switch i % 7 {
			case 1, 4:
				e.Clone = append(e.Clone, int32(i))
			case 2:
				e.Split = append(e.Split, int32(i))
			}
		}
		e.SplitSamples = make([]float32, len(e.Split)*splitN*3)
		p, err := engine.PlanEdit(e, n)
		if err != nil {
			t.Fatal(err)
		}
		grown := engine.ApplyEdit(g, e, p)
		gs := engine.Shapes{LogScales: grown.LogScales, OpacityLogits: grown.OpacityLogits}
		for _, big := range []bool{true, false} {
			d := &DensifyOptions{PruneOpacity: 0.005, MaxScreenSize: 20, MaxWorldScale: 0.1}
			want, wantN := pruneMask(gs, engine.Stats{}, d, extent, big, 2)
			before, _ := pruneMask(sh, engine.Stats{}, d, extent, big, 2)
			kids, _ := pruneMask(engine.ChildShapes(sh, e), engine.Stats{}, d, extent, big, 2)
			got, gotN := grownVerdicts(before, p, kids)
			if !slices.Equal(got, want) || gotN != wantN {
				t.Fatalf("split into %d, big %v: %d of %d removed, on the grown splats %d", splitN, big, gotN, len(got), wantN)
			}
			// The case must hold both verdicts among the copies and among the children.
			if c := countTrue(want[:p.Children]); c == 0 || c == p.Children {
				t.Fatalf("split into %d, big %v: %d of %d copies removed: the case checks little", splitN, big, c, p.Children)
			}
			if c := countTrue(want[p.Children:]); big && (c == 0 || c == len(want)-p.Children) {
				t.Fatalf("split into %d: %d of %d children removed: the case checks little", splitN, c, len(want)-p.Children)
			}
		}
	}
}

// BenchmarkGrowthPrune times the host's prune after a growth at 900k splats: the verdicts on
// the splats before it carried through a growth of 10k clones and 5k splits.
func BenchmarkGrowthPrune(b *testing.B) {
	const n = 900_000
	rng := rand.New(rand.NewPCG(1, 2))
	g := engine.Shapes{LogScales: make([]float32, 3*n), OpacityLogits: make([]float32, n)}
	for i := range g.LogScales {
		g.LogScales[i] = float32(rng.NormFloat64() - 4)
	}
	for i := range g.OpacityLogits {
		g.OpacityLogits[i] = float32(rng.NormFloat64() * 3)
	}
	e := engine.Edit{SplitN: 2, SplitScaleDiv: 1.6}
	for i := 0; i < n; i += 90 {
		e.Clone = append(e.Clone, int32(i))
	}
	for i := 45; i < n; i += 180 {
		e.Split = append(e.Split, int32(i))
	}
	e.SplitSamples = make([]float32, len(e.Split)*6)
	d := &DensifyOptions{PruneOpacity: 0.005, MaxScreenSize: 20, MaxWorldScale: 0.1}
	workers := runtime.GOMAXPROCS(0)
	for b.Loop() {
		p, err := engine.PlanEdit(e, n)
		if err != nil {
			b.Fatal(err)
		}
		before, _ := pruneMask(g, engine.Stats{}, d, 5, true, workers)
		kids, _ := pruneMask(engine.ChildShapes(g, e), engine.Stats{}, d, 5, true, workers)
		grownVerdicts(before, p, kids)
	}
}

func countTrue(b []bool) int {
	c := 0
	for _, x := range b {
		if x {
			c++
		}
	}
	return c
}

// TestScaleAbove does the same for the world-size test on log-scales.
func TestScaleAbove(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, limit := range []float64{0.0123, 1, 37.5, 1e-30, 1e30, 0, -1, math.Inf(1), math.NaN()} {
		ls := special()
		if limit > 0 && !math.IsInf(limit, 1) {
			ls = append(ls, around(math.Log(limit), 64)...)
		}
		for range 20000 {
			ls = append(ls, float32(rng.NormFloat64()*4-3))
		}
		s := newScaleAbove(limit)
		for _, l := range ls {
			// The largest of three, in every position.
			for k := range 3 {
				g := engine.Shapes{LogScales: []float32{-50, -60, -70}, OpacityLogits: []float32{0}}
				g.LogScales[k] = l
				if got, want := s.test(g, 0), maxScale(g, 0) > limit; got != want {
					t.Fatalf("limit %v, log-scale %v at %d: %v, exact %v", limit, l, k, got, want)
				}
			}
		}
	}
}

// BenchmarkPruneMask: a bonsai-sized densification's prune test, against the
// same loop evaluating every exp.
func BenchmarkPruneMask(b *testing.B) {
	const n = 900_000
	rng := rand.New(rand.NewPCG(7, 8))
	g := engine.Shapes{LogScales: make([]float32, 3*n), OpacityLogits: make([]float32, n)}
	st := engine.Stats{GradAccum: make([]float32, n), Count: make([]int32, n), MaxRadius: make([]float32, n)}
	for i := range g.OpacityLogits {
		g.OpacityLogits[i] = float32(rng.NormFloat64() * 3)
		st.MaxRadius[i] = float32(rng.ExpFloat64() * 20)
	}
	for i := range g.LogScales {
		g.LogScales[i] = float32(rng.NormFloat64() - 5)
	}
	d := &DensifyOptions{PruneOpacity: 0.005, MaxScreenSize: 20, MaxWorldScale: 0.1}
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			pruneMask(g, st, d, 4, true, 1)
		}
	})
	b.Run("fast-all-cores", func(b *testing.B) {
		for b.Loop() {
			pruneMask(g, st, d, 4, true, runtime.GOMAXPROCS(0))
		}
	})
	b.Run("exact", func(b *testing.B) {
		for b.Loop() {
			pruneMaskExact(g, st, d, 4, true)
		}
	})
}

// TestGrowEditWorkers: the clone and split lists are the same, in index order, however many
// ranges the splats are cut into, and are those of the plain loop.
func TestGrowEditWorkers(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 50_000
	g := engine.Shapes{LogScales: make([]float32, 3*n), OpacityLogits: make([]float32, n)}
	st := engine.Stats{GradAccum: make([]float32, n), Count: make([]int32, n), MaxRadius: make([]float32, n)}
	for i := range n {
		for k := range 3 {
			g.LogScales[3*i+k] = float32(rng.NormFloat64() - 4)
		}
		st.Count[i] = int32(rng.IntN(4)) // a quarter never seen
		st.GradAccum[i] = float32(rng.ExpFloat64() * 2e-4 * float64(st.Count[i]))
	}
	d := &DensifyOptions{GradThreshold: 2e-4, PercentDense: 0.01, SplitN: 2}
	const extent = 3.0
	var clone, split []int32
	for i := range n {
		if st.Count[i] == 0 || float64(st.GradAccum[i])/float64(st.Count[i]) < d.GradThreshold {
			continue
		}
		if maxScale(g, i) > d.PercentDense*extent {
			split = append(split, int32(i))
		} else {
			clone = append(clone, int32(i))
		}
	}
	if len(clone) < 1000 || len(split) < 1000 {
		t.Fatalf("%d clones and %d splits: the scene does not exercise both lists", len(clone), len(split))
	}
	for _, workers := range []int{1, 2, 7, 64} {
		e := growEdit(g, st, d, extent, workers)
		if !slices.Equal(e.Clone, clone) || !slices.Equal(e.Split, split) {
			t.Fatalf("%d workers: %d clones, %d splits; the plain loop: %d, %d (or another order)",
				workers, len(e.Clone), len(e.Split), len(clone), len(split))
		}
	}
}

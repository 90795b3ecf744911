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

// TestGrowAndPrune checks the growth and the prune of the grown set folded into one edit
// (growAndPrune, on verdicts judged before the growth) against the growth, then pruneMask on
// the grown splats themselves and their removal (engine.ApplyEdit, the CPU engine's edit): the
// same splats, bit for bit, in the same order, copied from the same sources, with the same
// fresh rows; with splats near both cutoffs cloned and split into 2 and 3 children, random
// split samples, and with and without the size tests.
func TestGrowAndPrune(t *testing.T) {
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
		for i := range e.SplitSamples {
			e.SplitSamples[i] = float32(rng.NormFloat64())
		}
		p1, err := engine.PlanEdit(e, n)
		if err != nil {
			t.Fatal(err)
		}
		grown := engine.ApplyEdit(g, e, p1)
		gs := engine.Shapes{LogScales: grown.LogScales, OpacityLogits: grown.OpacityLogits}
		for _, big := range []bool{true, false} {
			d := &DensifyOptions{PruneOpacity: 0.005, MaxScreenSize: 20, MaxWorldScale: 0.1}
			// Two edits: the growth, then the prune judged on the grown splats.
			want, wantN := pruneMask(gs, engine.Stats{}, d, extent, big, 2)
			p2, err := engine.PlanEdit(engine.Edit{Remove: want}, len(want))
			if err != nil {
				t.Fatal(err)
			}
			two := engine.ApplyEdit(grown, engine.Edit{Remove: want}, p2)
			// One edit.
			before, beforeN := pruneMask(sh, engine.Stats{}, d, extent, big, 2)
			kids, _ := pruneMask(engine.ChildShapes(sh, e), engine.Stats{}, d, extent, big, 2)
			for k := 0; k < len(kids); k += splitN {
				for c := 1; c < splitN; c++ {
					if kids[k+c] != kids[k] {
						t.Fatalf("split %d: its children's verdicts differ", k/splitN)
					}
				}
			}
			merged, pruned, kept := growAndPrune(e, before, beforeN, kids)
			pm, err := engine.PlanEdit(merged, n)
			if err != nil {
				t.Fatal(err)
			}
			one := engine.ApplyEdit(g, merged, pm)
			if pruned != wantN || kept != len(want)-wantN || one.Len() != two.Len() {
				t.Fatalf("split into %d, big %v: %d pruned and %d kept (%d splats), want %d and %d (%d)",
					splitN, big, pruned, kept, one.Len(), wantN, len(want)-wantN, two.Len())
			}
			for fi, f := range one.Fields() {
				w := two.Fields()[fi]
				for j := range f.Data {
					if math.Float32bits(f.Data[j]) != math.Float32bits(w.Data[j]) {
						t.Fatalf("split into %d, big %v: %s value %d is %v, after two edits %v", splitN, big, f.Name, j, f.Data[j], w.Data[j])
					}
				}
			}
			for j, src := range p2.Src {
				if pm.Src[j] != p1.Src[src] || (j >= pm.Fresh) != (int(src) >= p1.Fresh) {
					t.Fatalf("split into %d, big %v: splat %d comes from %d (fresh %v), after two edits from %d (fresh %v)",
						splitN, big, j, pm.Src[j], j >= pm.Fresh, p1.Src[src], int(src) >= p1.Fresh)
				}
			}
			// The case must hold both verdicts among the copies and among the children.
			if c := countTrue(want[:p1.Children]); c == 0 || c == p1.Children {
				t.Fatalf("split into %d, big %v: %d of %d copies removed: the case checks little", splitN, big, c, p1.Children)
			}
			if c := countTrue(want[p1.Children:]); big && (c == 0 || c == len(want)-p1.Children) {
				t.Fatalf("split into %d: %d of %d children removed: the case checks little", splitN, c, len(want)-p1.Children)
			}
		}
	}
}

// BenchmarkGrowthPrune times the host's share of a growth with its prune at 900k splats (10k
// clones, 5k splits), from the verdicts to the plans the engine gathers by: "one edit" as
// densify runs it (growAndPrune, then the engine's PlanEdit of the merged edit); "two edits"
// as it ran before (the growth's plan, planned again by the engine's Apply, the verdicts carried
// through it by grownVerdicts, and the prune's plan), for the ratio.
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
	plan := func(e engine.Edit, n int) engine.EditPlan {
		p, err := engine.PlanEdit(e, n)
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	b.Run("one edit", func(b *testing.B) {
		for b.Loop() {
			before, beforeN := pruneMask(g, engine.Stats{}, d, 5, true, workers)
			kids, _ := pruneMask(engine.ChildShapes(g, e), engine.Stats{}, d, 5, true, workers)
			merged, _, _ := growAndPrune(e, before, beforeN, kids)
			plan(merged, n)
		}
	})
	b.Run("two edits", func(b *testing.B) {
		for b.Loop() {
			p := plan(e, n)
			plan(e, n)
			before, _ := pruneMask(g, engine.Stats{}, d, 5, true, workers)
			kids, _ := pruneMask(engine.ChildShapes(g, e), engine.Stats{}, d, 5, true, workers)
			remove, _ := grownVerdicts(before, p, kids)
			plan(engine.Edit{Remove: remove}, len(remove))
		}
	})
}

// grownVerdicts carries prune verdicts through a growth (plan p), as densify did when it pruned
// in a second edit: a kept or cloned splat takes the verdict of its source in before, the split
// children kids' (in the same order). It returns the verdicts and how many remove.
func grownVerdicts(before []bool, p engine.EditPlan, kids []bool) ([]bool, int) {
	remove := make([]bool, len(p.Src))
	n := 0
	for j, i := range p.Src[:p.Children] {
		remove[j] = before[i]
		n += int(b2u(before[i]))
	}
	for k, r := range kids {
		remove[p.Children+k] = r
		n += int(b2u(r))
	}
	return remove, n
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

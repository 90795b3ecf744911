package cpu

import (
	"math"
	"math/rand/v2"
	"runtime/debug"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/adam"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// TestStepBatchIsMeanOfViews checks a batch step against its definition built from the pieces:
// each view's pipeline gradients summed in view order, times 1/B, the optimizer applied once to
// the splats some view saw (visible-only) or to all, and the statistics accumulated view by view.
func TestStepBatchIsMeanOfViews(t *testing.T) {
	for _, c := range []struct {
		name        string
		views       int
		visibleOnly bool
	}{{"1 view", 1, false}, {"3 views", 3, false}, {"2 views visible-only", 2, true}} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(testSeed, uint64(c.views)))
			g := randomGaussians(rng, 400, 0.03)
			set := engine.DefaultSettings()
			set.Workers = 2
			set.Adam.VisibleOnly = c.visibleOnly
			var vs []*engine.View
			for j := 0; j < c.views; j++ {
				cam := lookAt([3]float64{0.6*float64(j) - 0.5, -1, -3}, 64, 48)
				target := make([]float32, 64*48*3)
				for i := range target {
					target[i] = rng.Float32()
				}
				vs = append(vs, &engine.View{Index: j, Camera: cam, Target: target})
			}
			o := engine.StepOptions{SHDegree: 2, LR: testLR(), AccumulateStats: true}
			e, err := New(set, g)
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.StepBatch(vs, o)
			if err != nil {
				t.Fatal(err)
			}

			// The definition.
			n := g.Len()
			sum := splat.Zeros[float32](n)
			seen := make([]bool, n)
			count := make([]int32, n)
			accum := make([]float32, n)
			var lossSum float64
			p := NewPipeline[float32](set)
			for _, v := range vs {
				if err := p.Forward(&v.Camera, g, o.SHDegree, o.Background); err != nil {
					t.Fatal(err)
				}
				lr, err := p.Loss(v.Target)
				if err != nil {
					t.Fatal(err)
				}
				lossSum += lr.Loss
				if err := p.Backward(g); err != nil {
					t.Fatal(err)
				}
				sf, gf := sum.Fields(), p.Grads.Fields()
				for k := range sf {
					for i := range sf[k].Data {
						sf[k].Data[i] += gf[k].Data[i]
					}
				}
				for i, ok := range p.Proj.Valid {
					if ok {
						seen[i] = true
						count[i]++
						accum[i] += p.Grad2D[i]
					}
				}
			}
			scale := engine.BatchScale(c.views)
			for _, f := range sum.Fields() {
				for i := range f.Data {
					f.Data[i] *= scale
				}
			}
			opt, err := adam.New(set.Adam.Optimizer(), n)
			if err != nil {
				t.Fatal(err)
			}
			want := g.Clone()
			var mask []bool
			if c.visibleOnly {
				mask = seen
			}
			if _, err := opt.Step(want, sum, lrArray(o.LR), mask); err != nil {
				t.Fatal(err)
			}
			got, _ := e.Gaussians()
			gf, wf := got.Fields(), want.Fields()
			for k := range gf {
				for i := range gf[k].Data {
					if math.Float32bits(gf[k].Data[i]) != math.Float32bits(wf[k].Data[i]) {
						t.Fatalf("%s[%d] = %v, want %v", gf[k].Name, i, gf[k].Data[i], wf[k].Data[i])
					}
				}
			}
			st, _ := e.Stats()
			for i := range count {
				if st.Count[i] != count[i] || st.GradAccum[i] != accum[i] {
					t.Fatalf("statistics of splat %d: count %d, accum %v; want %d, %v", i, st.Count[i], st.GradAccum[i], count[i], accum[i])
				}
			}
			if d := math.Abs(res.Loss - lossSum/float64(c.views)); d > 1e-12 {
				t.Errorf("loss %v, want the views' mean %v", res.Loss, lossSum/float64(c.views))
			}
			if c.views > 1 && len(vs) > 0 {
				// A batch differs from its first view alone: the other views count.
				e1, _ := New(set, g)
				if _, err := e1.Step(vs[0], o); err != nil {
					t.Fatal(err)
				}
				one, _ := e1.Gaussians()
				if same := countSame(one.Means, got.Means); same == len(got.Means) {
					t.Error("the batch step moved the means exactly as its first view alone")
				}
			}
		})
	}
}

func countSame(a, b []float32) int {
	s := 0
	for i := range a {
		if a[i] == b[i] {
			s++
		}
	}
	return s
}

// BenchmarkReadBack reads a 900k-splat engine's shapes and statistics the way a refinement
// does: into fresh arrays (Shapes, Stats) and into the arrays of the last read (engine.Reader).
func BenchmarkReadBack(b *testing.B) {
	g := splat.New(900_000)
	for i := range g.Quats {
		if i%4 == 0 {
			g.Quats[i] = 1
		}
	}
	e, err := New(engine.DefaultSettings(), g)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Shapes(); err != nil {
				b.Fatal(err)
			}
			if _, err := e.Stats(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reused", func(b *testing.B) {
		var sh engine.Shapes
		var st engine.Stats
		for b.Loop() {
			if err := e.ShapesInto(&sh); err != nil {
				b.Fatal(err)
			}
			if err := e.StatsInto(&st); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStateRead reads a 900k-splat engine's whole state the way a checkpoint does: into
// fresh arrays (State), the memory of the last read returned to the system first (as Go's
// scavenger may return a dropped checkpoint's pages in the thousands of steps until the
// next: the case where each read maps new pages); and into the arrays of an earlier read
// (engine.StateReader).
func BenchmarkStateRead(b *testing.B) {
	g := splat.New(900_000)
	e, err := New(engine.DefaultSettings(), g)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			debug.FreeOSMemory()
			b.StartTimer()
			if _, err := e.State(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reused", func(b *testing.B) {
		var st engine.State
		for b.Loop() {
			if err := e.StateInto(&st); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

const testSeed = 42

// lookAt returns a camera at eye looking at the origin (y down).
func lookAt(eye [3]float64, w, h int) camera.Camera {
	R, t := camera.LookAt(eye, [3]float64{}, [3]float64{0, 1, 0})
	return camera.Camera{Width: w, Height: h, Fx: float64(w), Fy: float64(w), Cx: float64(w) / 2, Cy: float64(h) / 2, R: R, T: t}
}

// randomGaussians makes n splats in a unit ball with small scales.
func randomGaussians(rng *rand.Rand, n int, scale float64) *splat.Gaussians {
	g := splat.New(n)
	for i := 0; i < n; i++ {
		for a := 0; a < 3; a++ {
			g.Means[i*3+a] = float32(rng.NormFloat64() * 0.5)
			g.LogScales[i*3+a] = float32(math.Log(scale * (0.5 + rng.Float64())))
			g.SH[i*48+a] = float32(rng.NormFloat64())
		}
		for k := 0; k < 4; k++ {
			g.Quats[i*4+k] = float32(rng.NormFloat64())
		}
		g.OpacityLogits[i] = float32(rng.NormFloat64())
	}
	return g
}

func BenchmarkStep(b *testing.B) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		b.Run(m.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(testSeed, 1))
			g := randomGaussians(rng, 50000, 0.01)
			set := engine.DefaultSettings()
			set.Render = m
			set.Workers = 2
			e, err := New(set, g)
			if err != nil {
				b.Fatal(err)
			}
			cam := lookAt([3]float64{0, -1, -3}, 200, 200)
			target := make([]float32, 200*200*3)
			for i := range target {
				target[i] = rng.Float32()
			}
			v := &engine.View{Camera: cam, Target: target}
			o := engine.StepOptions{SHDegree: 3, LR: engine.LR{Means: 1e-4, LogScales: 5e-3, Quats: 1e-3, Opacity: 5e-2, SHDC: 2.5e-3, SHRest: 1.25e-4}}
			var last engine.StepResult
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				last, err = e.Step(v, o)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			for k, d := range last.Timings {
				b.ReportMetric(float64(d.Microseconds())/1000, k+"_ms")
			}
			b.ReportMetric(float64(last.Entries), "entries")
		})
	}
}

func testLR() engine.LR {
	return engine.LR{Means: 1e-3, LogScales: 5e-3, Quats: 1e-3, Opacity: 5e-2, SHDC: 2.5e-3, SHRest: 1.25e-4}
}

// newTestEngine returns an engine on 300 random splats and a target made by
// rendering a different random scene, for models ewa and ray.
func newTestEngine(t *testing.T, m prep.Model, workers int) (*Engine, *engine.View) {
	t.Helper()
	rng := rand.New(rand.NewPCG(testSeed, uint64(m)))
	set := engine.DefaultSettings()
	set.Render = m
	set.Workers = workers
	truth, err := New(set, randomGaussians(rng, 300, 0.05))
	if err != nil {
		t.Fatal(err)
	}
	cam := lookAt([3]float64{0.5, -1, -3}, 64, 48)
	target, err := truth.Render(&cam, 0, [3]float32{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(set, randomGaussians(rng, 300, 0.05))
	if err != nil {
		t.Fatal(err)
	}
	return e, &engine.View{Camera: cam, Target: target}
}

func TestStepsReduceTheLoss(t *testing.T) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		e, v := newTestEngine(t, m, 2)
		o := engine.StepOptions{SHDegree: 0, LR: testLR()}
		first, err := e.Step(v, o)
		if err != nil {
			t.Fatal(err)
		}
		var last engine.StepResult
		for i := 0; i < 150; i++ {
			if last, err = e.Step(v, o); err != nil {
				t.Fatal(err)
			}
		}
		if !(last.Loss < 0.6*first.Loss) {
			t.Errorf("%v: loss went from %.4f to %.4f in 150 steps", m, first.Loss, last.Loss)
		}
		if first.Visible == 0 || first.Entries == 0 {
			t.Errorf("%v: nothing visible (visible %d, entries %d)", m, first.Visible, first.Entries)
		}
	}
}

// Saving the state and restoring it into a fresh engine continues the run
// bit for bit (the basis of checkpoint resume).
func TestStateRoundTripIsExact(t *testing.T) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		a, v := newTestEngine(t, m, 2)
		o := engine.StepOptions{SHDegree: 1, LR: testLR(), AccumulateStats: true}
		for i := 0; i < 5; i++ {
			if _, err := a.Step(v, o); err != nil {
				t.Fatal(err)
			}
		}
		st, err := a.State()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := newTestEngine(t, m, 2)
		if err := b.SetState(st); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			ra, err := a.Step(v, o)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := b.Step(v, o)
			if err != nil {
				t.Fatal(err)
			}
			if ra.Loss != rb.Loss {
				t.Fatalf("%v step %d: loss %v vs %v after restore", m, i, ra.Loss, rb.Loss)
			}
		}
		ga, _ := a.Gaussians()
		gb, _ := b.Gaussians()
		for fi, f := range ga.Fields() {
			for j, x := range f.Data {
				if x != gb.Fields()[fi].Data[j] {
					t.Fatalf("%v: %s[%d] differs after restore: %v vs %v", m, f.Name, j, x, gb.Fields()[fi].Data[j])
				}
			}
		}
	}
}

func TestApplyEdit(t *testing.T) {
	e, v := newTestEngine(t, prep.EWA, 1)
	if _, err := e.Step(v, engine.StepOptions{LR: testLR(), AccumulateStats: true}); err != nil {
		t.Fatal(err)
	}
	before, _ := e.Gaussians()
	n := before.Len()
	remove := make([]bool, n)
	remove[0], remove[5] = true, true
	samples := make([]float32, 2*2*3)
	for i := range samples {
		samples[i] = float32(i%5) - 2
	}
	ed := engine.Edit{Clone: []int32{3, 3, 7}, Split: []int32{1, 9}, SplitN: 2, SplitSamples: samples, SplitScaleDiv: 1.6, Remove: remove}
	if err := e.Apply(ed); err != nil {
		t.Fatal(err)
	}
	after, _ := e.Gaussians()
	// Kept: n − 2 removed − 2 split; then 3 clones, then 4 children.
	if want := n - 4 + 3 + 4; after.Len() != want {
		t.Fatalf("%d splats after the edit, want %d", after.Len(), want)
	}
	if after.Means[0] != before.Means[2*3] {
		t.Error("first kept splat is not old splat 2")
	}
	kept := n - 4
	for c, src := range []int{3, 3, 7} {
		for a := 0; a < 3; a++ {
			if after.Means[(kept+c)*3+a] != before.Means[src*3+a] {
				t.Fatalf("clone %d is not a copy of splat %d", c, src)
			}
		}
	}
	child := kept + 3
	for a := 0; a < 3; a++ {
		want := float32(math.Log(math.Exp(float64(before.LogScales[1*3+a])) / 1.6))
		if d := after.LogScales[child*3+a] - want; d > 1e-6 || d < -1e-6 {
			t.Fatalf("split child scale %v, want %v", after.LogScales[child*3+a], want)
		}
	}
	st, _ := e.State()
	for j := kept; j < after.Len(); j++ {
		for a := 0; a < 3; a++ {
			if st.AdamM.Means[j*3+a] != 0 || st.AdamV.Means[j*3+a] != 0 {
				t.Fatalf("new splat %d has non-zero moments", j)
			}
		}
	}
	if st.AdamM.Means[0] == 0 && st.AdamM.Means[1] == 0 && st.AdamM.Means[2] == 0 {
		t.Error("kept splat lost its moments")
	}
	for _, c := range st.Stats.Count {
		if c != 0 {
			t.Fatal("statistics not reset by the edit")
		}
	}
	// Bad edits are errors, not panics.
	for _, bad := range []engine.Edit{
		{Clone: []int32{int32(after.Len())}},
		{Split: []int32{0, 0}, SplitN: 2, SplitSamples: make([]float32, 12), SplitScaleDiv: 1.6},
		{Split: []int32{0}, SplitN: 2, SplitSamples: make([]float32, 5), SplitScaleDiv: 1.6},
		{Remove: make([]bool, 3)},
	} {
		if err := e.Apply(bad); err == nil {
			t.Errorf("edit %+v accepted", bad)
		}
	}
}

// A view where nothing is visible renders the background and trains
// without error.
func TestNothingVisibleRendersBackground(t *testing.T) {
	e, v := newTestEngine(t, prep.EWA, 2)
	cam := lookAt([3]float64{0, 0, 50}, 32, 24)
	cam.R[2] = [3]float64{0, 0, 1} // looking away from the scene
	cam.R[0] = [3]float64{1, 0, 0}
	cam.R[1] = [3]float64{0, 1, 0}
	cam.T = [3]float64{0, 0, -50}
	bg := [3]float32{0.2, 0.4, 0.6}
	img, err := e.Render(&cam, 0, bg)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range img {
		if x != bg[i%3] {
			t.Fatalf("pixel value %v at %d, want background %v", x, i, bg[i%3])
		}
	}
	v2 := &engine.View{Camera: cam, Target: make([]float32, 32*24*3)}
	res, err := e.Step(v2, engine.StepOptions{LR: testLR(), Background: bg})
	if err != nil {
		t.Fatal(err)
	}
	if res.Visible != 0 || res.Entries != 0 {
		t.Fatalf("visible %d entries %d, want 0", res.Visible, res.Entries)
	}
	_ = v
}

func TestResetOpacity(t *testing.T) {
	e, _ := newTestEngine(t, prep.EWA, 1)
	if err := e.ResetOpacity(0.01); err != nil {
		t.Fatal(err)
	}
	g, _ := e.Gaussians()
	for i, l := range g.OpacityLogits {
		if splat.Sigmoid(l) > 0.01+1e-6 {
			t.Fatalf("opacity %d is %v after reset", i, splat.Sigmoid(l))
		}
	}
	if err := e.ResetOpacity(1.5); err == nil {
		t.Fatal("reset to 1.5 accepted")
	}
}

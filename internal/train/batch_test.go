package train

import (
	"context"
	"reflect"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
)

// batchRecorder records the views of every step it is given.
type batchRecorder struct {
	engine.Engine
	steps [][]int
	lr    []engine.LR
}

func (b *batchRecorder) StepBatch(vs []*engine.View, o engine.StepOptions) (engine.StepResult, error) {
	ids := make([]int, len(vs))
	for j, v := range vs {
		ids[j] = v.Index
	}
	b.steps = append(b.steps, ids)
	b.lr = append(b.lr, o.LR)
	return b.Engine.StepBatch(vs, o)
}

func (b *batchRecorder) Step(v *engine.View, o engine.StepOptions) (engine.StepResult, error) {
	return b.StepBatch([]*engine.View{v}, o)
}

// A run with train.batch_size B hands the engine B views a step, drawn from the shuffled epochs
// in order (every view once an epoch), at learning rates √B times the single view's.
func TestBatchDrawsViewsAndScalesRates(t *testing.T) {
	ds := smallDemo(t)
	const b = 3
	opt := testOptions(t.TempDir())
	opt.Iterations, opt.EvalSteps, opt.Densify.Enabled = 7, nil, false
	opt.BatchSize = b
	tr := newTrainer(t, ds, opt)
	rec := &batchRecorder{Engine: tr.eng}
	tr.eng = rec
	if err := tr.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.steps) != opt.Iterations {
		t.Fatalf("%d steps, want %d", len(rec.steps), opt.Iterations)
	}
	var all []int
	for s, ids := range rec.steps {
		if len(ids) != b {
			t.Fatalf("step %d took %d views, want %d", s+1, len(ids), b)
		}
		all = append(all, ids...)
	}
	nv := len(ds.Train)
	for e := 0; (e+1)*nv <= len(all); e++ {
		seen := map[int]bool{}
		for _, id := range all[e*nv : (e+1)*nv] {
			if seen[id] {
				t.Fatalf("epoch %d draws view %d twice: %v", e, id, all[e*nv:(e+1)*nv])
			}
			seen[id] = true
		}
	}

	one := testOptions(t.TempDir())
	one.Iterations, one.EvalSteps, one.Densify.Enabled = opt.Iterations, nil, false
	tr1 := newTrainer(t, ds, one)
	want := tr1.lr(1)
	got := rec.lr[0]
	for _, x := range [][2]float32{{got.Means, want.Means}, {got.LogScales, want.LogScales}, {got.SHRest, want.SHRest}} {
		if r := float64(x[0] / x[1]); r < 1.7320 || r > 1.7321 {
			t.Errorf("learning rate %v at batch 3 against %v at batch 1: ratio %v, want √3", x[0], x[1], r)
		}
	}
}

func TestScaleSteps(t *testing.T) {
	o := Options{Iterations: 30000, EvalSteps: []int{7000, 30000}, PreviewEvery: 1000, CheckpointEvery: 0, SHInterval: 1000,
		MeansLRSteps: 30000, CoarseUntil: 15000, Densify: DensifyOptions{From: 500, Until: 15000, Every: 100, ResetEvery: 3000,
			MCMC: MCMCOptions{From: 500, Until: 25000, Every: 100}}}
	evals := o.EvalSteps
	o.ScaleSteps(0.25)
	want := Options{Iterations: 7500, EvalSteps: []int{1750, 7500}, PreviewEvery: 250, CheckpointEvery: 0, SHInterval: 250,
		MeansLRSteps: 7500, CoarseUntil: 3750, Densify: DensifyOptions{From: 125, Until: 3750, Every: 25, ResetEvery: 750,
			MCMC: MCMCOptions{From: 125, Until: 6250, Every: 25}}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("scaled by 1/4:\n got %+v\nwant %+v", o, want)
	}
	if evals[0] != 7000 {
		t.Error("ScaleSteps changed the caller's evaluation steps in place")
	}
	o = Options{Iterations: 3, SHInterval: 1, Densify: DensifyOptions{Every: 1}}
	o.ScaleSteps(0.1)
	if o.Iterations != 1 || o.SHInterval != 1 || o.Densify.Every != 1 {
		t.Errorf("tiny schedule scaled to %+v: intervals and iterations must stay >= 1", o)
	}
}

// A batch run resumed from its checkpoint ends with the Gaussians of the run that was not
// interrupted: the views a step draws come from the saved epoch order.
func TestBatchResumeIsExact(t *testing.T) {
	ds := smallDemo(t)
	opts := func(dir string) Options {
		o := testOptions(dir)
		o.BatchSize = 3
		return o
	}
	dirA := t.TempDir()
	a := newTrainer(t, ds, opts(dirA))
	if err := a.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	want, _ := a.eng.Gaussians()
	equalGaussians(t, resumedRun(t, ds, opts(t.TempDir()), dirA), want)
}

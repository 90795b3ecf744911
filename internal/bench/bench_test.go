package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/demo"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
)

// TestRunCPU times a step of the CPU engine on the demo scene: every stage the engine times
// has a median, the step's wall time covers them (one step: the medians are its own times),
// and the GPU-only parts stay empty.
func TestRunCPU(t *testing.T) {
	ds, err := demo.Generate(demo.Options{Views: 6, Width: 40, Height: 30, TestEvery: 3, Seed: 1, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	set := engine.DefaultSettings()
	set.Workers = 2
	g := Resample(demo.Truth(1), 500, 3)
	eng, err := cpu.New(set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	profiled, stopped := false, false
	o := Options{Steps: 1, Warmup: 1, Kernels: true, Roofline: true,
		Profile: func() (func(), error) { profiled = true; return func() { stopped = true }, nil }}
	r, err := Run(context.Background(), eng, ds.Train, engine.StepOptions{SHDegree: 1, LR: engine.LR{Means: 1e-4}}, set, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Gaussians != 500 || r.Steps != 1 || r.Width != 40 || r.Height != 30 {
		t.Fatalf("result %+v: want 500 Gaussians, 1 step, 40×30 px", r)
	}
	var sum float64
	for _, st := range []string{engine.StageProject, engine.StageRasterFwd, engine.StageRasterBwd, engine.StageAdam} {
		ms, ok := r.StageMs[st]
		if !ok || !(ms >= 0) {
			t.Fatalf("stage %s: median %v (present %t)", st, ms, ok)
		}
		sum += ms
	}
	if !(r.StepMs > 0) || r.StepMs < 0.9*sum || r.StepsPerSec != 1000/r.StepMs {
		t.Fatalf("step %v ms for stages summing to %v ms, %v steps/s", r.StepMs, sum, r.StepsPerSec)
	}
	if r.GraphDeviceMs != 0 || r.PeakDeviceBytes != 0 || r.Launches != nil || r.Roofline != nil {
		t.Fatalf("GPU-only figures on the CPU engine: %+v", r)
	}
	if !profiled || !stopped {
		t.Fatalf("profile started %t, stopped %t: want both", profiled, stopped)
	}
}

// TestResample: fewer splats are drawn from the scene; more repeat it, the repeats moved off
// their originals, so that no two coincide.
func TestResample(t *testing.T) {
	g := demo.Truth(2)
	small := Resample(g, 100, 1)
	if small.Len() != 100 {
		t.Fatalf("%d splats, want 100", small.Len())
	}
	big := Resample(g, 2*g.Len()+7, 1)
	if big.Len() != 2*g.Len()+7 {
		t.Fatalf("%d splats, want %d", big.Len(), 2*g.Len()+7)
	}
	for i := g.Len(); i < big.Len(); i++ {
		src := i % g.Len()
		if big.Means[i*3] == g.Means[src*3] && big.Means[i*3+1] == g.Means[src*3+1] && big.Means[i*3+2] == g.Means[src*3+2] {
			t.Fatalf("repeat %d sits on splat %d", i, src)
		}
	}
	if err := big.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRunStopsWhenCancelled: an interrupted run returns the context's error before a step.
func TestRunStopsWhenCancelled(t *testing.T) {
	ds, err := demo.Generate(demo.Options{Views: 3, Width: 24, Height: 16, Seed: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	set := engine.DefaultSettings()
	eng, err := cpu.New(set, Resample(demo.Truth(1), 50, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, eng, ds.Train, engine.StepOptions{}, set, Options{Steps: 3}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v, want context.Canceled", err)
	}
}

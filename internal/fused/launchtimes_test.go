package fused

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// TestLaunchTimes times every launch of two steps and checks that each step's launches name
// the step's kernels in pipeline order, the same both times, and that the timing can be
// switched off again.
func TestLaunchTimes(t *testing.T) {
	dev, _ := testDevice(t)
	n, w, h := 300, 48, 40
	g, _ := RandomScene(21, n, w, h)
	rng := rand.New(rand.NewPCG(seedTarget, 79))
	v := &engine.View{Camera: lookAt([3]float64{0.1, -0.8, -3.2}, w, h), Target: randomImage(rng, w, h)}
	fe, err := newOnDevice(dev, engine.DefaultSettings(), g)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	if _, err := fe.LaunchTimes(); err == nil {
		t.Fatal("LaunchTimes with timing off: no error")
	}
	fe.SetGraphs(true)
	if err := fe.TimeLaunches(true); err == nil {
		t.Fatal("TimeLaunches with graphs on: no error")
	}
	fe.SetGraphs(false)
	if err := fe.TimeLaunches(true); err != nil {
		t.Fatal(err)
	}
	var runs [2][]string
	for i := range runs {
		if _, err := fe.Step(v, engine.StepOptions{SHDegree: 1, LR: testLR()}); err != nil {
			t.Fatal(err)
		}
		lt, err := fe.LaunchTimes()
		if err != nil {
			t.Fatal(err)
		}
		for j, l := range lt {
			if l.Index != j || !(l.Ms >= 0) || l.Block < 1 || l.Block > 1024 {
				t.Fatalf("launch %d: %+v", j, l)
			}
			// Backends that report resources report some registers and room for a block.
			if r := l.Resources; r != (gpu.KernelResources{}) && (r.Registers < 1 || r.BlocksPerSM < 1) {
				t.Fatalf("launch %d (%s): resources %+v", j, l.Kernel, r)
			}
			runs[i] = append(runs[i], l.Kernel)
		}
	}
	if !slices.Equal(runs[0], runs[1]) {
		t.Fatalf("the two steps launched different kernels:\n%v\n%v", runs[0], runs[1])
	}
	// The stages' first kernels, in pipeline order.
	at := 0
	for _, k := range []string{"project", "bin_count", "bin_total", "tile_ranges", "raster_fwd_ewa", "loss_map", "raster_bwd_ewa", "project_bwd", "adam_step"} {
		i := slices.Index(runs[0][at:], k)
		if i < 0 {
			t.Fatalf("no %s launch after launch %d: %v", k, at, runs[0])
		}
		at += i
	}
	if err := fe.TimeLaunches(false); err != nil {
		t.Fatal(err)
	}
	if _, err := fe.LaunchTimes(); err == nil {
		t.Fatal("LaunchTimes after switching timing off: no error")
	}
	if _, err := fe.Step(v, engine.StepOptions{SHDegree: 1, LR: testLR()}); err != nil {
		t.Fatal(err)
	}
}

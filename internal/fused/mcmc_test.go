package fused

import (
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// TestMCMCStepHooks runs the same training step from the same state three times on the fused
// engine: plain, with the MCMC regularisers, and with the MCMC noise. The regularised step's
// gradients must be the plain step's plus engine.RegularizerGrads, and the noisy step's
// parameters the plain step's moved by engine.PerturbMeans, bit for bit: the kernels run where
// the CPU engine adds them (before Adam, after Adam).
func TestMCMCStepHooks(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 3000, 128, 96
	if emu {
		n, w, h = 200, 40, 32
	}
	g, v := RandomScene(91, n, w, h)
	for i := 0; i < n; i += 3 {
		g.OpacityLogits[i] = -6 // nearly transparent: the noise's gate lets them move
	}
	set := engine.DefaultSettings()
	set.Workers = 2
	base := engine.StepOptions{SHDegree: 2, LR: testLR(), AccumulateStats: true}
	run := func(m engine.MCMCStep) (params, grads []float32) {
		t.Helper()
		fe, err := newOnDevice(dev, set, g)
		if err != nil {
			t.Fatal(err)
		}
		defer fe.Close()
		o := base
		o.MCMC = m
		if _, err := fe.Step(v, o); err != nil {
			t.Fatal(err)
		}
		grads = make([]float32, n*paramFloats)
		if err := gpu.DownloadF32(dev, grads, fe.grads); err != nil {
			t.Fatal(err)
		}
		p, err := fe.Gaussians()
		if err != nil {
			t.Fatal(err)
		}
		return pack(p), grads
	}
	plainP, plainG := run(engine.MCMCStep{})

	reg := engine.MCMCStep{OpacityReg: 0.01, ScaleReg: 0.05}
	_, regG := run(reg)
	want := unpack(append([]float32(nil), plainG...), n)
	engine.RegularizerGrads(want, g, reg, 0, n)
	if d := countDiff(regG, pack(want)); d > 0 {
		t.Errorf("regularised step: %d of %d gradient values differ from the plain step's plus RegularizerGrads", d, len(regG))
	}

	noise := engine.MCMCStep{NoiseScale: 50, NoiseSeed: 3, NoiseStep: 12}
	noisyP, _ := run(noise)
	wantP := unpack(append([]float32(nil), plainP...), n)
	engine.PerturbMeans(wantP, noise, 0, n)
	if d := countDiff(noisyP, pack(wantP)); d > 0 {
		t.Errorf("noisy step: %d of %d parameter values differ from the plain step's moved by PerturbMeans", d, len(noisyP))
	}
	if countDiff(noisyP, plainP) == 0 {
		t.Error("the noise moved nothing: the test checks nothing")
	}
}

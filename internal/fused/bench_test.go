package fused

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// BenchmarkStep times the whole fused step (forward, loss, backward, Adam) at 1M random
// Gaussians on a 799×532 view (bonsai's training size), for both render models, and at 3M for
// ewa, reporting
// each stage's device milliseconds from the step's events. It runs on a CUDA device only (the
// emulator is far too slow for this size), and checks the step's output before timing it.
func BenchmarkStep(b *testing.B) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		b.Run(m.String()+"/1M", func(b *testing.B) { benchStep(b, m, 1_000_000, 799, 532) })
	}
	b.Run("ewa/3M", func(b *testing.B) { benchStep(b, prep.EWA, 3_000_000, 799, 532) })
}

func benchStep(b *testing.B, m prep.Model, n, w, h int) {
	dev, emu := testDevice(b)
	if emu {
		b.Skip("the emulator is too slow for a 1M-Gaussian benchmark")
	}
	rng := rand.New(rand.NewPCG(seedScene, 1000))
	g := randomScene(rng, n, 0.006)
	set := engine.DefaultSettings()
	set.Render = m
	fe, err := newOnDevice(dev, set, g)
	if err != nil {
		b.Fatal(err)
	}
	defer fe.Close()
	cam := lookAt([3]float64{0.3, -0.8, -3}, w, h)
	v := &engine.View{Camera: cam, Target: randomImage(rng, w, h)}
	o := engine.StepOptions{SHDegree: 3, LR: testLR(), AccumulateStats: true, WantTimings: true}
	res, err := fe.Step(v, o) // warm-up: kernel loads, list growth
	if err != nil {
		b.Fatal(err)
	}
	if math.IsNaN(res.Loss) || res.Entries == 0 || res.Visible == 0 || res.NonFinite != 0 {
		b.Fatalf("warm-up step: loss %v, %d entries, %d visible, %d non-finite", res.Loss, res.Entries, res.Visible, res.NonFinite)
	}
	sum := map[string]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err = fe.Step(v, o)
		if err != nil {
			b.Fatal(err)
		}
		for k, d := range res.Timings {
			sum[k] += d
		}
	}
	b.StopTimer()
	var total time.Duration
	for _, k := range engine.Stages {
		b.ReportMetric(float64(sum[k].Microseconds())/1000/float64(b.N), k+"_ms")
		total += sum[k]
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "device_ms")
	b.ReportMetric(float64(res.Entries), "entries")
	b.ReportMetric(float64(res.Visible), "visible")
}

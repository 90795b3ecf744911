package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
)

// With AbsGrad the position statistic is AbsGS's, ‖(W/2·Σ|gx|, H/2·Σ|gy|)‖ over the pixels'
// contributions to the 2D mean's gradient (the rasterizer's Mean2DAbs), which no cancellation
// lowers: it is at least the plain statistic's ‖(W/2·|Σgx|, H/2·|Σgy|)‖ for every splat, above
// it for most, and the other gradients are those of the plain run, bit for bit.
func TestAbsGradStatistic(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed, 11))
	g := randomGaussians(rng, 1500, 0.1)
	const w, h = 96, 72
	cam := lookAt([3]float64{0.3, -0.2, -2.5}, w, h)
	target := make([]float32, w*h*3)
	for i := range target {
		target[i] = float32(rng.Float64())
	}
	run := func(abs bool) *Pipeline[float32] {
		set := engine.DefaultSettings()
		set.AbsGrad = abs
		set.Workers = 2
		p := NewPipeline[float32](set)
		if err := p.Forward(&cam, g, 2, [3]float32{}); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Loss(target); err != nil {
			t.Fatal(err)
		}
		if err := p.Backward(g); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain, abs := run(false), run(true)
	if plain.PG.Mean2DAbs != nil || abs.PG.Mean2DAbs == nil {
		t.Fatalf("Mean2DAbs allocated %v without AbsGrad, %v with it", plain.PG.Mean2DAbs != nil, abs.PG.Mean2DAbs != nil)
	}
	above := 0
	for i := range g.Len() {
		ax, ay := float64(abs.PG.Mean2DAbs[2*i])*w/2, float64(abs.PG.Mean2DAbs[2*i+1])*h/2
		want := math.Sqrt(ax*ax + ay*ay)
		got := float64(abs.Grad2D[i])
		if math.Abs(got-want) > 1e-6*want {
			t.Fatalf("splat %d: statistic %g, want %g from its absolute sums", i, got, want)
		}
		if p := float64(plain.Grad2D[i]); got < p*(1-1e-6) {
			t.Fatalf("splat %d: absolute statistic %g below the plain one %g", i, got, p)
		} else if got > p*1.01 {
			above++
		}
	}
	if above < g.Len()/10 {
		t.Fatalf("the absolute statistic is clearly above the plain one for %d of %d splats: want cancellations", above, g.Len())
	}
	for i, v := range plain.Grads.Means {
		if math.Float32bits(v) != math.Float32bits(abs.Grads.Means[i]) {
			t.Fatalf("mean gradient %d: %v plain, %v with AbsGrad", i, v, abs.Grads.Means[i])
		}
	}
	t.Logf("statistic clearly above the plain one for %d of %d splats", above, g.Len())
}

package train

import (
	"math"
	"math/rand/v2"
	"testing"
)

// init.scale multiplies every initial scale (gsplat's init_scale): the log-scales shift by
// log(scale), and a factor of 1 is the original's initialisation exactly.
func TestFromPointsScale(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	xyz, rgb := RandomPoints(rng, 200, [3]float64{1, 2, 3}, 0.5)
	one := FromPoints(xyz, rgb, 0.1, 1, 2)
	for _, s := range []float64{0.1, 3} {
		g := FromPoints(xyz, rgb, 0.1, s, 2)
		for i, ls := range g.LogScales {
			if want := float64(one.LogScales[i]) + math.Log(s); math.Abs(float64(ls)-want) > 1e-6 {
				t.Fatalf("scale %v: log-scale[%d] = %v, want %v", s, i, ls, want)
			}
		}
	}
}

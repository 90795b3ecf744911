package train

import (
	"math"
	"math/rand/v2"

	"github.com/rlxsplat/rlxsplat/internal/par"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// FromPoints builds the initial Gaussians from points with colours in
// [0,1] (design.md §6, the original's create_from_pcd): isotropic scale =
// sqrt of the mean squared distance to the 3 nearest neighbours (at least
// 1e-7 squared) times scale (1 in the original, 0.1 in gsplat's MCMC
// preset), identity rotation, the given opacity, SH DC from the colour.
func FromPoints(xyz, rgb []float32, opacity float32, scale float64, workers int) *splat.Gaussians {
	n := len(xyz) / 3
	g := splat.New(n)
	copy(g.Means, xyz)
	tree := newKDTree(xyz)
	logit := splat.Logit(opacity)
	par.For(n, workers, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			d2 := math.Max(tree.knnMeanSq(i, 3), 1e-7)
			ls := float32(math.Log(math.Sqrt(d2) * scale))
			g.LogScales[i*3], g.LogScales[i*3+1], g.LogScales[i*3+2] = ls, ls, ls
		}
	})
	for i := 0; i < n; i++ {
		g.OpacityLogits[i] = logit
		for c := 0; c < 3; c++ {
			g.SH[i*splat.SHCoeffs*3+c] = splat.RGBToDC(rgb[i*3+c])
		}
	}
	return g
}

// RandomPoints draws n points uniformly in the cube of half-size half
// around centre, with uniform random colours (the original's NeRF-synthetic
// initialisation uses 100 000 points in a cube).
func RandomPoints(rng *rand.Rand, n int, centre [3]float64, half float64) (xyz, rgb []float32) {
	xyz = make([]float32, n*3)
	rgb = make([]float32, n*3)
	for i := 0; i < n*3; i++ {
		xyz[i] = float32(centre[i%3] + (rng.Float64()*2-1)*half)
		rgb[i] = float32(rng.Float64())
	}
	return xyz, rgb
}

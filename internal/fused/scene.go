package fused

import (
	"math"
	"math/rand/v2"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// RandomScene is the synthetic scene of the stage-parity test, for `rlxsplat parity`: n
// random splats in front of a w×h camera and a smooth random target, all drawn from seed, so
// that the command and the test compare the same kind of scene.
func RandomScene(seed uint64, n, w, h int) (*splat.Gaussians, *engine.View) {
	rng := rand.New(rand.NewPCG(seedScene, seed))
	g := randomScene(rng, n, 0.05)
	cam := lookAt([3]float64{0.3 + 0.4*rng.Float64(), -0.9, -3.2}, w, h)
	return g, &engine.View{Index: int(seed), Camera: cam, Target: randomImage(rand.New(rand.NewPCG(seedTarget, seed)), w, h)}
}

// RandomBatch is RandomScene's scene seen by views cameras (the first RandomScene's, the others
// from eyes around it), each with its own random target: a batch for CompareBatch.
func RandomBatch(seed uint64, n, w, h, views int) (*splat.Gaussians, []*engine.View) {
	g, v := RandomScene(seed, n, w, h)
	vs := []*engine.View{v}
	rng := rand.New(rand.NewPCG(seedBatch, seed))
	for j := 1; j < views; j++ {
		cam := lookAt([3]float64{-0.8 + 1.6*rng.Float64(), -1.2 + 0.6*rng.Float64(), -3.4 + 0.4*rng.Float64()}, w, h)
		vs = append(vs, &engine.View{Index: int(seed) + j, Camera: cam,
			Target: randomImage(rand.New(rand.NewPCG(seedTarget, seed+uint64(j)<<32)), w, h)})
	}
	return g, vs
}

// Seeds of the random scenes; each check draws its own stream from them.
const (
	seedScene  = 7
	seedTarget = 11
	seedEdit   = 13
	seedBatch  = 17
)

// lookAt returns a pinhole camera at eye looking at the origin, y down (COLMAP axes).
func lookAt(eye [3]float64, w, h int) camera.Camera {
	R, t := camera.LookAt(eye, [3]float64{}, [3]float64{0, 1, 0})
	return camera.Camera{Width: w, Height: h, Fx: 0.9 * float64(w), Fy: 0.95 * float64(w),
		Cx: 0.52 * float64(w), Cy: 0.47 * float64(h), R: R, T: t}
}

// randomScene makes n splats in a ball of radius about 1 around the origin with scales around
// scale, random rotations, opacities and SH of every degree; a few are behind the camera, huge,
// or nearly transparent, so that the culling paths run too.
func randomScene(rng *rand.Rand, n int, scale float64) *splat.Gaussians {
	g := splat.New(n)
	for i := 0; i < n; i++ {
		for a := 0; a < 3; a++ {
			g.Means[i*3+a] = float32(rng.NormFloat64() * 0.6)
			g.LogScales[i*3+a] = float32(math.Log(scale * (0.3 + 1.4*rng.Float64())))
		}
		for k := 0; k < 4; k++ {
			g.Quats[i*4+k] = float32(rng.NormFloat64())
		}
		g.OpacityLogits[i] = float32(rng.NormFloat64() * 1.5)
		for k := 0; k < splat.SHCoeffs*3; k++ {
			s := 0.6
			if k >= 3 {
				s = 0.15
			}
			g.SH[i*splat.SHCoeffs*3+k] = float32(rng.NormFloat64() * s)
		}
		switch rng.IntN(40) {
		case 0: // far behind the camera or at it
			g.Means[i*3+2] = -6
		case 1: // large
			for a := 0; a < 3; a++ {
				g.LogScales[i*3+a] += 2
			}
		case 2: // nearly transparent
			g.OpacityLogits[i] = -7
		}
	}
	return g
}

// randomImage is a smooth random image in [0,1] (so that SSIM sees structure).
func randomImage(rng *rand.Rand, w, h int) []float32 {
	img := make([]float32, w*h*3)
	var fx, fy, ph [3]float64
	for c := 0; c < 3; c++ {
		fx[c], fy[c], ph[c] = 0.05+0.2*rng.Float64(), 0.05+0.2*rng.Float64(), 6*rng.Float64()
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for c := 0; c < 3; c++ {
				v := 0.5 + 0.35*math.Sin(fx[c]*float64(x)+fy[c]*float64(y)+ph[c]) + 0.1*rng.NormFloat64()
				img[(y*w+x)*3+c] = float32(min(max(v, 0), 1))
			}
		}
	}
	return img
}

// RandomEdit draws a densification edit of n splats: each splat is removed, cloned or split in
// two with probability 1/10 each; split samples are standard normal.
func RandomEdit(rng *rand.Rand, n int) engine.Edit {
	var ed engine.Edit
	ed.Remove = make([]bool, n)
	for i := 0; i < n; i++ {
		switch rng.IntN(10) {
		case 0:
			ed.Remove[i] = true
		case 1:
			ed.Clone = append(ed.Clone, int32(i))
		case 2:
			ed.Split = append(ed.Split, int32(i))
		}
	}
	ed.SplitN, ed.SplitScaleDiv = 2, 1.6
	for range len(ed.Split) * ed.SplitN * 3 {
		ed.SplitSamples = append(ed.SplitSamples, float32(rng.NormFloat64()))
	}
	return ed
}

// RandomRelocation draws an MCMC move of n splats (engine.Relocation): about a fifth of them
// overwritten by copies of others, a tenth appended as copies, and every source given random
// corrected values, as the trainer's relocation and growth do.
func RandomRelocation(rng *rand.Rand, n int) engine.Relocation {
	var r engine.Relocation
	role := make([]uint8, n) // 1: destination, 2: source
	for i := 0; i < n; i++ {
		if rng.IntN(5) == 0 {
			role[i] = 1
			r.Dst = append(r.Dst, int32(i))
		}
	}
	pick := func() int32 {
		for {
			if i := int32(rng.IntN(n)); role[i] != 1 {
				role[i] = 2
				return i
			}
		}
	}
	if len(r.Dst) == n { // no source left: keep one splat in place
		role[0] = 0
		r.Dst = r.Dst[1:]
	}
	for range r.Dst {
		r.Src = append(r.Src, pick())
	}
	for range n/10 + 1 {
		r.Append = append(r.Append, pick())
	}
	for i, x := range role {
		if x == 2 {
			r.Rows = append(r.Rows, int32(i))
			r.OpacityLogits = append(r.OpacityLogits, float32(rng.NormFloat64()))
			for range 3 {
				r.LogScales = append(r.LogScales, float32(rng.NormFloat64()-3))
			}
		}
	}
	return r
}

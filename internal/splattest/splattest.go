// Package splattest holds what the tests of the splat file formats (internal/io/spz,
// gltfsplat, dotsplat) share: seeded random scenes inside the range every format
// represents, and the check that an axis change moves a splat's view-dependent colour and
// its rotation with the axes. Tests only; nothing outside _test files imports it.
package splattest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// RandomScene returns n splats from seed: means within ±100, log scales in [−8, 4], DC
// coefficients in ±dc, coefficients above DC in ±0.9 up to degree deg (zero above), opacity
// logits in ±6 and random unnormalised quaternions (as training leaves them).
func RandomScene(seed uint64, n, deg int, dc float64) *splat.Gaussians {
	rng := rand.New(rand.NewPCG(seed, 1))
	u := func(lo, hi float64) float32 { return float32(lo + (hi-lo)*rng.Float64()) }
	g := splat.New(n)
	for i := 0; i < n; i++ {
		for c := 0; c < 3; c++ {
			g.Means[3*i+c] = u(-100, 100)
			g.LogScales[3*i+c] = u(-8, 4)
			g.SH[i*splat.SHCoeffs*3+c] = u(-dc, dc)
		}
		for j := 1; j < splat.NumCoeffs(deg); j++ {
			for c := 0; c < 3; c++ {
				g.SH[(i*splat.SHCoeffs+j)*3+c] = u(-0.9, 0.9)
			}
		}
		for c := 0; c < 4; c++ {
			g.Quats[4*i+c] = float32(rng.NormFloat64() * 3)
		}
		g.OpacityLogits[i] = u(-6, 6)
	}
	return g
}

// AxisFlip is a change of axes F = diag(Pos) (each ±1, two of them −1: a half turn) as a
// format applies it: SHSign[k] multiplies SH coefficient k, and Quat maps a splat's
// quaternion (w,x,y,z) to the format's, returned as (w,x,y,z) (ok false when it refuses).
type AxisFlip struct {
	Pos    [3]float32
	SHSign [splat.SHCoeffs]float32
	Quat   func(w, x, y, z float32) (wxyz [4]float64, ok bool)
}

// CheckAxisFlip checks f on a random degree-3 scene, in float64: a splat's colour in
// direction d equals the mapped splat's colour (coefficients times SHSign) in F·d, for every
// coefficient and with the trainer's SH basis; and the mapped quaternion's rotation is
// F·R·F, so the covariance R·S²·Rᵀ maps to F·Σ·F.
func CheckAxisFlip(t *testing.T, seed uint64, f AxisFlip) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 2))
	g := RandomScene(seed, 20, splat.MaxSHDegree, 3)
	for i := 0; i < g.Len(); i++ {
		sh := g.SH[i*splat.SHCoeffs*3 : (i+1)*splat.SHCoeffs*3]
		mapped := make([]float32, len(sh))
		for k := 0; k < splat.SHCoeffs; k++ {
			for c := 0; c < 3; c++ {
				mapped[k*3+c] = f.SHSign[k] * sh[k*3+c]
			}
		}
		for trial := 0; trial < 10; trial++ {
			d := [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			n := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
			d = [3]float64{d[0] / n, d[1] / n, d[2] / n}
			fd := [3]float64{d[0] * float64(f.Pos[0]), d[1] * float64(f.Pos[1]), d[2] * float64(f.Pos[2])}
			for c := 0; c < 3; c++ {
				if a, b := colour(sh, c, d), colour(mapped, c, fd); math.Abs(a-b) > 1e-9*(1+math.Abs(a)) {
					t.Fatalf("splat %d channel %d: colour %g in d=%v, mapped %g in F·d", i, c, a, d, b)
				}
			}
		}
		q := g.Quats[4*i : 4*i+4]
		m, ok := f.Quat(q[0], q[1], q[2], q[3])
		if !ok {
			t.Fatalf("splat %d: the map refused quaternion %v", i, q)
		}
		r := rotation([4]float64{float64(q[0]), float64(q[1]), float64(q[2]), float64(q[3])})
		rm := rotation(m)
		for a := 0; a < 3; a++ {
			for b := 0; b < 3; b++ {
				want := float64(f.Pos[a]) * r[a][b] * float64(f.Pos[b])
				if math.Abs(rm[a][b]-want) > 1e-6 {
					t.Fatalf("splat %d: mapped rotation[%d][%d] = %g, want F·R·F = %g", i, a, b, rm[a][b], want)
				}
			}
		}
	}
}

// colour evaluates Σ_k Y_k(d)·c_k for one channel of one splat's SH.
func colour(sh []float32, c int, d [3]float64) float64 {
	var basis [splat.SHCoeffs]float64
	splat.SHBasis(splat.MaxSHDegree, d[0], d[1], d[2], &basis)
	s := 0.0
	for k := 0; k < splat.SHCoeffs; k++ {
		s += basis[k] * float64(sh[k*3+c])
	}
	return s
}

// rotation returns the rotation matrix of quaternion (w,x,y,z), normalised first.
func rotation(q [4]float64) [3][3]float64 {
	w, x, y, z := q[0], q[1], q[2], q[3]
	n := math.Sqrt(w*w + x*x + y*y + z*z)
	w, x, y, z = w/n, x/n, y/n, z/n
	return [3][3]float64{
		{1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y)},
		{2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x)},
		{2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y)},
	}
}

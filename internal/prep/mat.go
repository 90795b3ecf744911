package prep

import (
	"math"

	"github.com/rlxsplat/rlxsplat/internal/fmath"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Small fixed-size linear algebra for the per-splat maths. Matrices are
// row-major [3][3]; everything is generic so the float64 checks run the
// same code.

type vec3[F splat.Float] = [3]F
type mat3[F splat.Float] = [3][3]F

// exp, log and sigmoid are fmath's float32 functions in the engine's float32
// instantiation, bit for bit what the kernels compute (shaders/common.h), and
// math's in float64 for the finite-difference checks. sqrt is correctly
// rounded either way (float64 has more than 2·24+2 bits, so the float32
// rounding of math.Sqrt is IEEE's float32 square root, the kernels' sqrt_rn).
func exp[F splat.Float](x F) F {
	if isF32[F]() {
		return F(fmath.Exp(float32(x)))
	}
	return F(math.Exp(float64(x)))
}

func sqrt[F splat.Float](x F) F { return F(math.Sqrt(float64(x))) }

func log[F splat.Float](x F) F {
	if isF32[F]() {
		return F(fmath.Log(float32(x)))
	}
	return F(math.Log(float64(x)))
}

func sigmoid[F splat.Float](x F) F {
	if isF32[F]() {
		return F(fmath.Sigmoid(float32(x)))
	}
	return F(1 / (1 + math.Exp(-float64(x))))
}

// isF32 reports whether F is float32 (which cannot tell 1 from 1+1e-9).
func isF32[F splat.Float]() bool { return F(1+1e-9) == 1 }

func mulMV[F splat.Float](m *mat3[F], v vec3[F]) vec3[F] {
	return vec3[F]{
		m[0][0]*v[0] + m[0][1]*v[1] + m[0][2]*v[2],
		m[1][0]*v[0] + m[1][1]*v[1] + m[1][2]*v[2],
		m[2][0]*v[0] + m[2][1]*v[1] + m[2][2]*v[2],
	}
}

// mulMTV is mᵀ·v.
func mulMTV[F splat.Float](m *mat3[F], v vec3[F]) vec3[F] {
	return vec3[F]{
		m[0][0]*v[0] + m[1][0]*v[1] + m[2][0]*v[2],
		m[0][1]*v[0] + m[1][1]*v[1] + m[2][1]*v[2],
		m[0][2]*v[0] + m[1][2]*v[1] + m[2][2]*v[2],
	}
}

func mulMM[F splat.Float](a, b *mat3[F]) mat3[F] {
	var c mat3[F]
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			c[i][j] = a[i][0]*b[0][j] + a[i][1]*b[1][j] + a[i][2]*b[2][j]
		}
	}
	return c
}

func transpose[F splat.Float](a *mat3[F]) mat3[F] {
	return mat3[F]{
		{a[0][0], a[1][0], a[2][0]},
		{a[0][1], a[1][1], a[2][1]},
		{a[0][2], a[1][2], a[2][2]},
	}
}

func dot3[F splat.Float](a, b vec3[F]) F { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }

// quatToMat returns the rotation of the normalised quaternion q̂ = q/‖q‖
// (w,x,y,z) and q̂ itself. A zero quaternion maps to the identity.
func quatToMat[F splat.Float](q [4]F) (mat3[F], [4]F, F) {
	n := sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
	if n == 0 {
		return mat3[F]{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, [4]F{1, 0, 0, 0}, 0
	}
	w, x, y, z := q[0]/n, q[1]/n, q[2]/n, q[3]/n
	return mat3[F]{
		{1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y)},
		{2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x)},
		{2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y)},
	}, [4]F{w, x, y, z}, n
}

// quatMatVJP maps dL/dR (R = rotation of q/‖q‖) back to dL/dq for the
// unnormalised q, through the normalisation (design.md §3).
func quatMatVJP[F splat.Float](qh [4]F, n F, dR *mat3[F]) [4]F {
	if n == 0 {
		return [4]F{}
	}
	w, x, y, z := qh[0], qh[1], qh[2], qh[3]
	g := dR
	dw := 2 * (-z*g[0][1] + y*g[0][2] + z*g[1][0] - x*g[1][2] - y*g[2][0] + x*g[2][1])
	dx := 2 * (y*g[0][1] + z*g[0][2] + y*g[1][0] - 2*x*g[1][1] - w*g[1][2] + z*g[2][0] + w*g[2][1] - 2*x*g[2][2])
	dy := 2 * (-2*y*g[0][0] + x*g[0][1] + w*g[0][2] + x*g[1][0] + z*g[1][2] - w*g[2][0] + z*g[2][1] - 2*y*g[2][2])
	dz := 2 * (-2*z*g[0][0] - w*g[0][1] + x*g[0][2] + w*g[1][0] - 2*z*g[1][1] + y*g[1][2] + x*g[2][0] + y*g[2][1])
	// Through q̂ = q/n: dq = (dq̂ − q̂(q̂·dq̂))/n.
	d := dw*w + dx*x + dy*y + dz*z
	return [4]F{(dw - w*d) / n, (dx - x*d) / n, (dy - y*d) / n, (dz - z*d) / n}
}

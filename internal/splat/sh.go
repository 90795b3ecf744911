package splat

// Real spherical-harmonics basis constants in the ordering and sign
// convention of the original 3DGS code (so INRIA PLYs render correctly, and
// seed defect 10 — a flipped degree-1 direction — cannot return).
const (
	shC1 = 0.4886025119029199
)

var shC2 = [5]float64{1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396}
var shC3 = [7]float64{-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658, 1.445305721320277, -0.5900435899266435}

// NumCoeffs is the number of SH coefficients used at degree deg (0..3).
func NumCoeffs(deg int) int { return (deg + 1) * (deg + 1) }

// SHBasis writes the basis values for unit direction (x,y,z) up to degree deg
// into out[0:NumCoeffs(deg)]. The direction is d = normalize(μ − camera centre).
func SHBasis[F Float](deg int, x, y, z F, out *[SHCoeffs]F) {
	c2 := [5]F{F(shC2[0]), F(shC2[1]), F(shC2[2]), F(shC2[3]), F(shC2[4])}
	c3 := [7]F{F(shC3[0]), F(shC3[1]), F(shC3[2]), F(shC3[3]), F(shC3[4]), F(shC3[5]), F(shC3[6])}
	out[0] = F(SHC0)
	if deg < 1 {
		return
	}
	out[1] = -F(shC1) * y
	out[2] = F(shC1) * z
	out[3] = -F(shC1) * x
	if deg < 2 {
		return
	}
	xx, yy, zz := x*x, y*y, z*z
	xy, yz, xz := x*y, y*z, x*z
	out[4] = c2[0] * xy
	out[5] = c2[1] * yz
	out[6] = c2[2] * (2*zz - xx - yy)
	out[7] = c2[3] * xz
	out[8] = c2[4] * (xx - yy)
	if deg < 3 {
		return
	}
	out[9] = c3[0] * y * (3*xx - yy)
	out[10] = c3[1] * xy * z
	out[11] = c3[2] * y * (4*zz - xx - yy)
	out[12] = c3[3] * z * (2*zz - 3*xx - 3*yy)
	out[13] = c3[4] * x * (4*zz - xx - yy)
	out[14] = c3[5] * z * (xx - yy)
	out[15] = c3[6] * x * (xx - 3*yy)
}

// SHBasisGrad writes the basis values (as SHBasis) and their partial
// derivatives with respect to x, y and z of the (unit) direction.
func SHBasisGrad[F Float](deg int, x, y, z F, out, dx, dy, dz *[SHCoeffs]F) {
	c2 := [5]F{F(shC2[0]), F(shC2[1]), F(shC2[2]), F(shC2[3]), F(shC2[4])}
	c3 := [7]F{F(shC3[0]), F(shC3[1]), F(shC3[2]), F(shC3[3]), F(shC3[4]), F(shC3[5]), F(shC3[6])}
	SHBasis(deg, x, y, z, out)
	*dx, *dy, *dz = [SHCoeffs]F{}, [SHCoeffs]F{}, [SHCoeffs]F{}
	if deg < 1 {
		return
	}
	dy[1] = -F(shC1)
	dz[2] = F(shC1)
	dx[3] = -F(shC1)
	if deg < 2 {
		return
	}
	dx[4], dy[4] = c2[0]*y, c2[0]*x
	dy[5], dz[5] = c2[1]*z, c2[1]*y
	dx[6], dy[6], dz[6] = c2[2]*(-2*x), c2[2]*(-2*y), c2[2]*(4*z)
	dx[7], dz[7] = c2[3]*z, c2[3]*x
	dx[8], dy[8] = c2[4]*(2*x), c2[4]*(-2*y)
	if deg < 3 {
		return
	}
	xx, yy, zz := x*x, y*y, z*z
	dx[9], dy[9] = c3[0]*6*x*y, c3[0]*(3*xx-3*yy)
	dx[10], dy[10], dz[10] = c3[1]*y*z, c3[1]*x*z, c3[1]*x*y
	dx[11], dy[11], dz[11] = c3[2]*(-2*x*y), c3[2]*(4*zz-xx-3*yy), c3[2]*8*y*z
	dx[12], dy[12], dz[12] = c3[3]*(-6*x*z), c3[3]*(-6*y*z), c3[3]*(6*zz-3*xx-3*yy)
	dx[13], dy[13], dz[13] = c3[4]*(4*zz-3*xx-yy), c3[4]*(-2*x*y), c3[4]*8*x*z
	dx[14], dy[14], dz[14] = c3[5]*2*x*z, c3[5]*(-2*y*z), c3[5]*(xx-yy)
	dx[15], dy[15] = c3[6]*(3*xx-3*yy), c3[6]*(-6*x*y)
}

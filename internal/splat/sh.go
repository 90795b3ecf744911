package splat

// Real spherical-harmonics basis constants in the ordering and sign
// convention of the original 3DGS code (so INRIA PLYs render correctly, and
// seed defect 10 — a flipped degree-1 direction — cannot return).
const (
	shC1 = 0.4886025119029199
)

var shC2 = [5]float32{1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396}
var shC3 = [7]float32{-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658, 1.445305721320277, -0.5900435899266435}

// NumCoeffs is the number of SH coefficients used at degree deg (0..3).
func NumCoeffs(deg int) int { return (deg + 1) * (deg + 1) }

// SHBasis writes the basis values for unit direction (x,y,z) up to degree deg
// into out[0:NumCoeffs(deg)]. The direction is d = normalize(μ − camera centre).
func SHBasis(deg int, x, y, z float32, out *[SHCoeffs]float32) {
	out[0] = SHC0
	if deg < 1 {
		return
	}
	out[1] = -shC1 * y
	out[2] = shC1 * z
	out[3] = -shC1 * x
	if deg < 2 {
		return
	}
	xx, yy, zz := x*x, y*y, z*z
	xy, yz, xz := x*y, y*z, x*z
	out[4] = shC2[0] * xy
	out[5] = shC2[1] * yz
	out[6] = shC2[2] * (2*zz - xx - yy)
	out[7] = shC2[3] * xz
	out[8] = shC2[4] * (xx - yy)
	if deg < 3 {
		return
	}
	out[9] = shC3[0] * y * (3*xx - yy)
	out[10] = shC3[1] * xy * z
	out[11] = shC3[2] * y * (4*zz - xx - yy)
	out[12] = shC3[3] * z * (2*zz - 3*xx - 3*yy)
	out[13] = shC3[4] * x * (4*zz - xx - yy)
	out[14] = shC3[5] * z * (xx - yy)
	out[15] = shC3[6] * x * (xx - 3*yy)
}

// SHBasisGrad writes the basis values (as SHBasis) and their partial
// derivatives with respect to x, y and z of the (unit) direction.
func SHBasisGrad(deg int, x, y, z float32, out, dx, dy, dz *[SHCoeffs]float32) {
	SHBasis(deg, x, y, z, out)
	*dx, *dy, *dz = [SHCoeffs]float32{}, [SHCoeffs]float32{}, [SHCoeffs]float32{}
	if deg < 1 {
		return
	}
	dy[1] = -shC1
	dz[2] = shC1
	dx[3] = -shC1
	if deg < 2 {
		return
	}
	dx[4], dy[4] = shC2[0]*y, shC2[0]*x
	dy[5], dz[5] = shC2[1]*z, shC2[1]*y
	dx[6], dy[6], dz[6] = shC2[2]*(-2*x), shC2[2]*(-2*y), shC2[2]*(4*z)
	dx[7], dz[7] = shC2[3]*z, shC2[3]*x
	dx[8], dy[8] = shC2[4]*(2*x), shC2[4]*(-2*y)
	if deg < 3 {
		return
	}
	xx, yy, zz := x*x, y*y, z*z
	dx[9], dy[9] = shC3[0]*6*x*y, shC3[0]*(3*xx-3*yy)
	dx[10], dy[10], dz[10] = shC3[1]*y*z, shC3[1]*x*z, shC3[1]*x*y
	dx[11], dy[11], dz[11] = shC3[2]*(-2*x*y), shC3[2]*(4*zz-xx-3*yy), shC3[2]*8*y*z
	dx[12], dy[12], dz[12] = shC3[3]*(-6*x*z), shC3[3]*(-6*y*z), shC3[3]*(6*zz-3*xx-3*yy)
	dx[13], dy[13], dz[13] = shC3[4]*(4*zz-3*xx-yy), shC3[4]*(-2*x*y), shC3[4]*8*x*z
	dx[14], dy[14], dz[14] = shC3[5]*2*x*z, shC3[5]*(-2*y*z), shC3[5]*(xx-yy)
	dx[15], dy[15] = shC3[6]*(3*xx-3*yy), shC3[6]*(-6*x*y)
}

package camera

import (
	"fmt"
	"math"
)

// Model is a COLMAP camera model name ("PINHOLE", "OPENCV", ...).
type Model string

// COLMAP camera model names. The comment after each gives the distortion
// parameters that Distortion.Params holds, in COLMAP's order (the focal
// lengths and principal point are not part of them).
const (
	SimplePinhole          Model = "SIMPLE_PINHOLE"             // none
	Pinhole                Model = "PINHOLE"                    // none
	SimpleRadial           Model = "SIMPLE_RADIAL"              // k
	Radial                 Model = "RADIAL"                     // k1 k2
	OpenCV                 Model = "OPENCV"                     // k1 k2 p1 p2
	OpenCVFisheye          Model = "OPENCV_FISHEYE"             // k1 k2 k3 k4
	FullOpenCV             Model = "FULL_OPENCV"                // k1 k2 p1 p2 k3 k4 k5 k6
	FOV                    Model = "FOV"                        // omega
	SimpleRadialFisheye    Model = "SIMPLE_RADIAL_FISHEYE"      // k
	RadialFisheye          Model = "RADIAL_FISHEYE"             // k1 k2
	ThinPrismFisheye       Model = "THIN_PRISM_FISHEYE"         // k1 k2 p1 p2 k3 k4 sx1 sy1
	RadTanThinPrismFisheye Model = "RAD_TAN_THIN_PRISM_FISHEYE" // k0..k5 p0 p1 s0 s1 s2 s3
	SimpleDivision         Model = "SIMPLE_DIVISION"            // k
	Division               Model = "DIVISION"                   // k
	SimpleFisheye          Model = "SIMPLE_FISHEYE"             // none (equidistant)
	Fisheye                Model = "FISHEYE"                    // none (equidistant)
	EUCM                   Model = "EUCM"                       // alpha beta
)

// Distortion is a lens distortion in normalised image coordinates
// (x = X/Z, y = Y/Z), in one of COLMAP's models. Params holds the model's
// parameters after the focal lengths and principal point, in COLMAP's order
// (for OPENCV: k1 k2 p1 p2).
//
// Distort maps the normalised coordinates of a ray (its pinhole projection)
// to the normalised coordinates where the lens images it, i.e. the pixel is
// (fx·xd + cx, fy·yd + cy). For the fisheye models this includes the
// equidistant mapping θ = atan(r), as COLMAP does.
type Distortion struct {
	Model  Model
	Params []float64
}

// family groups the models by the shape of their maths.
type family int

const (
	famPinhole  family = iota // identity
	famRadTan                 // radial polynomial (+ tangential) on the pinhole plane
	famFisheye                // equidistant mapping, then a radial/tangential polynomial
	famFOV                    // Devernay–Faugeras field-of-view model
	famDivision               // Fitzgibbon's one-parameter division model
	famEUCM                   // enhanced unified camera model
)

// modelInfo returns the family and the number of distortion parameters of
// a model; ok is false for a name COLMAP does not define (or one that has
// no normalised image plane, such as EQUIRECTANGULAR).
func modelInfo(m Model) (fam family, n int, ok bool) {
	switch m {
	case "", SimplePinhole, Pinhole:
		return famPinhole, 0, true
	case SimpleRadial:
		return famRadTan, 1, true
	case Radial:
		return famRadTan, 2, true
	case OpenCV:
		return famRadTan, 4, true
	case FullOpenCV:
		return famRadTan, 8, true
	case OpenCVFisheye:
		return famFisheye, 4, true
	case SimpleRadialFisheye:
		return famFisheye, 1, true
	case RadialFisheye:
		return famFisheye, 2, true
	case ThinPrismFisheye:
		return famFisheye, 8, true
	case RadTanThinPrismFisheye:
		return famFisheye, 12, true
	case SimpleFisheye, Fisheye:
		return famFisheye, 0, true
	case FOV:
		return famFOV, 1, true
	case SimpleDivision, Division:
		return famDivision, 1, true
	case EUCM:
		return famEUCM, 2, true
	}
	return 0, 0, false
}

// ParamCount returns how many distortion parameters (Params) the model
// takes; the empty model is an ideal pinhole with none.
func (d Distortion) ParamCount() (int, error) {
	_, n, ok := modelInfo(d.Model)
	if !ok {
		return 0, fmt.Errorf("camera: unknown distortion model %q", string(d.Model))
	}
	return n, nil
}

// Validate reports whether the model is known and Params has its length.
// Distort and Undistort need a valid Distortion; on an invalid one they
// return NaN and ok=false rather than guess.
func (d Distortion) Validate() error {
	n, err := d.ParamCount()
	if err != nil {
		return err
	}
	if len(d.Params) != n {
		return fmt.Errorf("camera: distortion model %s: want %d parameters, got %d", d.Model, n, len(d.Params))
	}
	return nil
}

// IsPinhole reports whether the distortion is the identity. The fisheye
// models are never the identity, even with all parameters zero, because
// their equidistant mapping is part of the model; an invalid Distortion is
// not the identity either, so that PixelRay reports it instead of ignoring
// it.
func (d Distortion) IsPinhole() bool {
	fam, n, ok := modelInfo(d.Model)
	if !ok {
		return false
	}
	if fam == famPinhole {
		return true
	}
	if fam == famFisheye || len(d.Params) != n {
		return false
	}
	for _, p := range d.Params {
		if p != 0 {
			return false
		}
	}
	return true
}

// Distort maps undistorted normalised coordinates to distorted ones. It
// returns NaN for an invalid Distortion (see Validate) and where the model
// cannot image the point (the division model beyond its fold, EUCM outside
// its domain).
func (d Distortion) Distort(xu, yu float64) (xd, yd float64) {
	fam, n, ok := modelInfo(d.Model)
	if !ok || len(d.Params) != n {
		return math.NaN(), math.NaN()
	}
	switch fam {
	case famPinhole:
		return xu, yu
	case famRadTan:
		xd, yd, _ = d.core(xu, yu)
		return xd, yd
	case famFisheye:
		uu, vv := fisheyeFromNormal(xu, yu)
		xd, yd, _ = d.core(uu, vv)
		return xd, yd
	case famFOV:
		return fovDistort(d.Params[0], xu, yu)
	case famDivision:
		return divisionDistort(d.Params[0], xu, yu)
	case famEUCM:
		return eucmDistort(d.Params[0], d.Params[1], xu, yu)
	}
	return math.NaN(), math.NaN()
}

// Undistort inverts Distort; ok is false when it does not converge, when
// the input lies outside the image of Distort (beyond a fold of the
// polynomial, or a fisheye ray at or past 90° from the axis, which has no
// normalised coordinates) or when the Distortion is invalid.
//
// The polynomial models are inverted by Newton iteration with the analytic
// Jacobian and a backtracking line search; FOV, the division model and EUCM
// have closed-form inverses.
func (d Distortion) Undistort(xd, yd float64) (xu, yu float64, ok bool) {
	fam, n, known := modelInfo(d.Model)
	if !known || len(d.Params) != n || !finite(xd) || !finite(yd) {
		return math.NaN(), math.NaN(), false
	}
	switch fam {
	case famPinhole:
		return xd, yd, true
	case famRadTan:
		return d.invertCore(xd, yd)
	case famFisheye:
		uu, vv, ok := d.invertCore(xd, yd)
		if !ok {
			return math.NaN(), math.NaN(), false
		}
		return normalFromFisheye(uu, vv)
	}
	return d.undistortClosedForm(fam, xd, yd)
}

// undistortClosedForm inverts the FOV, division and EUCM models.
func (d Distortion) undistortClosedForm(fam family, xd, yd float64) (xu, yu float64, ok bool) {
	switch fam {
	case famFOV:
		xu, yu, ok = fovUndistort(d.Params[0], xd, yd)
	case famDivision:
		xu, yu, ok = divisionUndistort(d.Params[0], xd, yd)
	case famEUCM:
		xu, yu, ok = eucmUndistort(d.Params[0], d.Params[1], xd, yd)
	}
	if !ok {
		return math.NaN(), math.NaN(), false
	}
	// The closed forms are exact inverses only inside each model's valid
	// parameter range (EUCM wants 0 ≤ α ≤ 1 and β > 0, for example);
	// checking the result keeps Undistort from returning a wrong ray with
	// ok=true outside it, as the residual check does for Newton's method.
	x2, y2 := d.Distort(xu, yu)
	if r := math.Hypot(x2-xd, y2-yd); !(r <= residualTol*math.Max(1, math.Hypot(xd, yd))) {
		return math.NaN(), math.NaN(), false
	}
	return xu, yu, true
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Newton settings: the step tolerance is the ~1e-10 the trainer needs for
// sub-micropixel rays; 100 iterations is far more than a converging
// iteration takes (quadratic convergence from x0 = xd needs < 10 for
// realistic lenses), so hitting the cap means it is not converging.
const (
	newtonTol      = 1e-10
	newtonMaxIter  = 100
	newtonMaxHalve = 40
	// residualTol is the largest |Distort(xu) − xd| accepted at the end: a
	// converged step with a large residual means the iteration stalled at a
	// fold of the distortion (singular Jacobian), not at a solution.
	residualTol = 1e-9
)

// invertCore solves core(u, v) = (xd, yd) for the radial/tangential
// families by damped Newton iteration started at (xd, yd).
func (d Distortion) invertCore(xd, yd float64) (u, v float64, ok bool) {
	u, v = xd, yd
	fx, fy, j := d.core(u, v)
	rx, ry := fx-xd, fy-yd
	res := rx*rx + ry*ry
	scale := math.Max(1, math.Hypot(xd, yd))
	for it := 0; it < newtonMaxIter; it++ {
		if !finite(res) {
			return math.NaN(), math.NaN(), false
		}
		if res == 0 {
			return u, v, true
		}
		det := j[0][0]*j[1][1] - j[0][1]*j[1][0]
		if det == 0 || !finite(det) {
			return math.NaN(), math.NaN(), false
		}
		sx := (j[1][1]*rx - j[0][1]*ry) / det
		sy := (j[0][0]*ry - j[1][0]*rx) / det
		if math.Hypot(sx, sy) <= newtonTol*scale {
			// Converged: take the last (tiny) step and accept the point only
			// if it really solves the equation; a stall at a fold of the
			// polynomial (singular Jacobian) leaves a large residual.
			u, v = u-sx, v-sy
			fx, fy, _ = d.core(u, v)
			rx, ry = fx-xd, fy-yd
			if r := math.Hypot(rx, ry); finite(r) && r <= residualTol*scale {
				return u, v, true
			}
			return math.NaN(), math.NaN(), false
		}
		// Backtrack until the residual falls: a full Newton step can jump
		// across a fold of a strong polynomial onto the wrong branch.
		t := 1.0
		for k := 0; ; k++ {
			nu, nv := u-t*sx, v-t*sy
			nfx, nfy, nj := d.core(nu, nv)
			nrx, nry := nfx-xd, nfy-yd
			nres := nrx*nrx + nry*nry
			if nres < res {
				u, v, j, rx, ry, res = nu, nv, nj, nrx, nry, nres
				break
			}
			if k == newtonMaxHalve {
				// No descent along the Newton direction: at a fold, or at
				// the rounding floor with a step still above tolerance.
				if math.Sqrt(res) <= residualTol*scale*1e-3 {
					return u, v, true
				}
				return math.NaN(), math.NaN(), false
			}
			t *= 0.5
		}
	}
	return math.NaN(), math.NaN(), false
}

// core evaluates the radial(/tangential/thin-prism) polynomial of the
// famRadTan and famFisheye models at (u, v) — on the pinhole plane for the
// former, on the equidistant fisheye plane for the latter — and its
// Jacobian j[row][col] = ∂out_row/∂in_col.
//
// With ρ = u²+v² the radial part is a(ρ)·(u, v). The tangential and thin
// prism part T (see tangential) is added at (u, v) itself for OPENCV,
// FULL_OPENCV and THIN_PRISM_FISHEYE, and at the radially distorted point
// for RAD_TAN_THIN_PRISM_FISHEYE (Project Aria's Fisheye624).
func (d Distortion) core(u, v float64) (x, y float64, j [2][2]float64) {
	rho := u*u + v*v
	a, da := d.radial(rho)
	rx, ry := a*u, a*v
	// ∂(a·u)/∂u = a + a'(ρ)·2u², ∂(a·u)/∂v = a'(ρ)·2uv, and symmetrically.
	jr := [2][2]float64{
		{a + 2*da*u*u, 2 * da * u * v},
		{2 * da * u * v, a + 2*da*v*v},
	}
	tp := d.tangential()
	if tp.zero() {
		return rx, ry, jr
	}
	if tp.composed {
		tx, ty, jt := tp.eval(rx, ry)
		// (I + Jt)·Jr
		for r := 0; r < 2; r++ {
			for c := 0; c < 2; c++ {
				j[r][c] = jr[r][c] + jt[r][0]*jr[0][c] + jt[r][1]*jr[1][c]
			}
		}
		return rx + tx, ry + ty, j
	}
	tx, ty, jt := tp.eval(u, v)
	for r := 0; r < 2; r++ {
		for c := 0; c < 2; c++ {
			j[r][c] = jr[r][c] + jt[r][c]
		}
	}
	return rx + tx, ry + ty, j
}

// radial returns the radial factor a(ρ) and its derivative da/dρ, where ρ
// is r² on the pinhole plane or θ² on the fisheye plane.
func (d Distortion) radial(rho float64) (a, da float64) {
	p := d.Params
	switch d.Model {
	case SimpleRadial, SimpleRadialFisheye:
		return polyEval(rho, 1, p[0])
	case Radial, RadialFisheye, OpenCV:
		return polyEval(rho, 1, p[0], p[1])
	case OpenCVFisheye:
		return polyEval(rho, 1, p[0], p[1], p[2], p[3])
	case ThinPrismFisheye:
		return polyEval(rho, 1, p[0], p[1], p[4], p[5])
	case RadTanThinPrismFisheye:
		return polyEval(rho, 1, p[0], p[1], p[2], p[3], p[4], p[5])
	case FullOpenCV:
		// The rational model: (1 + k1ρ + k2ρ² + k3ρ³) / (1 + k4ρ + k5ρ² + k6ρ³).
		num, dnum := polyEval(rho, 1, p[0], p[1], p[4])
		den, dden := polyEval(rho, 1, p[5], p[6], p[7])
		return num / den, (dnum*den - num*dden) / (den * den)
	}
	// SIMPLE_FISHEYE, FISHEYE: the equidistant mapping alone.
	return 1, 0
}

// polyEval returns Σ c[i]·ρ^i and its derivative, by Horner's scheme.
func polyEval(rho float64, c ...float64) (val, deriv float64) {
	for i := len(c) - 1; i >= 0; i-- {
		deriv = deriv*rho + val
		val = val*rho + c[i]
	}
	return val, deriv
}

// tanPrism holds the tangential and thin-prism coefficients in one common
// form, with r² = x²+y²:
//
//	Tx = 2·pb·x·y + pa·(r² + 2x²) + s0·r² + s1·r⁴
//	Ty = 2·pa·x·y + pb·(r² + 2y²) + s2·r² + s3·r⁴
//
// OPENCV's (p1, p2) are (pb, pa); Aria's (p0, p1) are (pa, pb).
type tanPrism struct {
	pa, pb, s0, s1, s2, s3 float64
	composed               bool
}

func (t tanPrism) zero() bool {
	return t.pa == 0 && t.pb == 0 && t.s0 == 0 && t.s1 == 0 && t.s2 == 0 && t.s3 == 0
}

func (d Distortion) tangential() tanPrism {
	p := d.Params
	switch d.Model {
	case OpenCV, FullOpenCV:
		return tanPrism{pb: p[2], pa: p[3]}
	case ThinPrismFisheye:
		return tanPrism{pb: p[2], pa: p[3], s0: p[6], s2: p[7]}
	case RadTanThinPrismFisheye:
		return tanPrism{pa: p[6], pb: p[7], s0: p[8], s1: p[9], s2: p[10], s3: p[11], composed: true}
	}
	return tanPrism{}
}

// eval returns T(x, y) and its Jacobian.
func (t tanPrism) eval(x, y float64) (tx, ty float64, j [2][2]float64) {
	r2 := x*x + y*y
	tx = 2*t.pb*x*y + t.pa*(r2+2*x*x) + t.s0*r2 + t.s1*r2*r2
	ty = 2*t.pa*x*y + t.pb*(r2+2*y*y) + t.s2*r2 + t.s3*r2*r2
	// d(s·r² + s'·r⁴)/dx = 2x·(s + 2s'·r²).
	gx := t.s0 + 2*t.s1*r2
	gy := t.s2 + 2*t.s3*r2
	j[0][0] = 2*t.pb*y + 6*t.pa*x + 2*x*gx
	j[0][1] = 2*t.pb*x + 2*t.pa*y + 2*y*gx
	j[1][0] = 2*t.pa*y + 2*t.pb*x + 2*x*gy
	j[1][1] = 2*t.pa*x + 6*t.pb*y + 2*y*gy
	return tx, ty, j
}

// fisheyeFromNormal maps pinhole-plane coordinates to the equidistant
// fisheye plane: same direction, length θ = atan(r).
func fisheyeFromNormal(u, v float64) (uu, vv float64) {
	r := math.Hypot(u, v)
	if r == 0 {
		return u, v
	}
	s := math.Atan(r) / r
	return u * s, v * s
}

// normalFromFisheye inverts fisheyeFromNormal; a ray at θ ≥ 90° has no
// pinhole-plane coordinates.
func normalFromFisheye(uu, vv float64) (u, v float64, ok bool) {
	theta := math.Hypot(uu, vv)
	if theta >= math.Pi/2 || !finite(theta) {
		return math.NaN(), math.NaN(), false
	}
	if theta < 1e-8 {
		// tan θ/θ = 1 + θ²/3 + …; the θ² term is below double precision.
		return uu, vv, true
	}
	s := math.Tan(theta) / theta
	return uu * s, vv * s, true
}

// fovDistort applies the FOV model (Devernay & Faugeras 2001):
// r_d = atan(2·r·tan(ω/2)) / ω.
func fovDistort(omega, u, v float64) (float64, float64) {
	if omega == 0 {
		return u, v
	}
	if math.Abs(omega) >= math.Pi {
		return math.NaN(), math.NaN()
	}
	k := 2 * math.Tan(omega/2)
	r := math.Hypot(u, v)
	var f float64
	if r < 1e-12 {
		// atan(k·r)/(ω·r) → k/ω; the next term, −k³r²/(3ω), is below
		// double precision here.
		f = k / omega
	} else {
		f = math.Atan(k*r) / (omega * r)
	}
	return u * f, v * f
}

// fovUndistort inverts fovDistort in closed form:
// r = tan(ω·r_d) / (2·tan(ω/2)), defined while |ω·r_d| < π/2.
func fovUndistort(omega, x, y float64) (float64, float64, bool) {
	if omega == 0 {
		return x, y, true
	}
	if math.Abs(omega) >= math.Pi {
		return math.NaN(), math.NaN(), false
	}
	k := 2 * math.Tan(omega/2)
	rd := math.Hypot(x, y)
	if math.Abs(omega*rd) >= math.Pi/2 {
		return math.NaN(), math.NaN(), false
	}
	var f float64
	if rd < 1e-12 {
		f = omega / k
	} else {
		f = math.Tan(omega*rd) / (k * rd)
	}
	return x * f, y * f, true
}

// divisionDistort applies the division model (Fitzgibbon 2001), whose
// inverse is the defining one: x_u = x_d / (1 + k·r_d²). Solving for r_d
// gives r_d = 2·r_u / (1 + √(1 − 4k·r_u²)), the root that tends to r_u as
// k → 0; there is none when 4k·r_u² > 1.
func divisionDistort(k, u, v float64) (float64, float64) {
	disc := 1 - 4*k*(u*u+v*v)
	if disc < 0 {
		return math.NaN(), math.NaN()
	}
	s := 2 / (1 + math.Sqrt(disc))
	return u * s, v * s
}

// divisionUndistort is the model's defining map, restricted to the branch
// that divisionDistort produces (k·r_d² ≤ 1, where 1 + k·r_d² > 0).
func divisionUndistort(k, x, y float64) (float64, float64, bool) {
	kr2 := k * (x*x + y*y)
	if kr2 > 1 || 1+kr2 <= 0 {
		return math.NaN(), math.NaN(), false
	}
	return x / (1 + kr2), y / (1 + kr2), true
}

// eucmEps rejects denominators that would send a point to infinity.
const eucmEps = 1e-12

// eucmDistort applies the enhanced unified camera model (Khomutenko et
// al. 2016) to the ray (u, v, 1): x = u / (α·√(β(u²+v²) + 1) + 1 − α).
func eucmDistort(alpha, beta, u, v float64) (float64, float64) {
	q := beta*(u*u+v*v) + 1
	if q < 0 {
		return math.NaN(), math.NaN()
	}
	den := alpha*math.Sqrt(q) + 1 - alpha
	if den < eucmEps {
		return math.NaN(), math.NaN()
	}
	return u / den, v / den
}

// eucmUndistort is EUCM's closed-form unprojection: the ray is
// (x, y, m_z) with m_z = (1 − β·α²·r²) / (α·√(1 − (2α − 1)·β·r²) + 1 − α),
// scaled to z = 1.
func eucmUndistort(alpha, beta, x, y float64) (float64, float64, bool) {
	r2 := x*x + y*y
	q := 1 - (2*alpha-1)*beta*r2
	if q < 0 {
		return math.NaN(), math.NaN(), false
	}
	den := alpha*math.Sqrt(q) + 1 - alpha
	if den < eucmEps {
		return math.NaN(), math.NaN(), false
	}
	mz := (1 - beta*alpha*alpha*r2) / den
	if mz < eucmEps {
		return math.NaN(), math.NaN(), false
	}
	return x / mz, y / mz, true
}

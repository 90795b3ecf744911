package prep

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/par"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Settings are the per-view projection options.
type Settings struct {
	Model       Model
	SHDegree    int     // active SH degree, 0..3
	Near        float64 // cull splats with camera z below this (design.md §4.1: 0.01)
	RadiusScale float64 // ray model: σ = RadiusScale·exp(log_scale)
	Antialiased bool    // EWA: Mip-Splatting 2D filter on the opacity
	TileSize    int
	// AbsGrad: EWA's position statistic (ProjectBackward's grad2D) is AbsGS's, from
	// PrepGradsOf.Mean2DAbs, not the norm of the mean's own gradient.
	AbsGrad bool
	// AlphaMin is the cutoff the footprint is computed for; 0 means the
	// rasterizer's AlphaMin. The finite-difference checks pass a tiny value
	// so that footprints never cut a splat off where the check looks.
	AlphaMin float64
}

func (s *Settings) alphaMin() float64 {
	if s.AlphaMin > 0 {
		return s.AlphaMin
	}
	return AlphaMin
}

// Validate reports settings the projection cannot run with.
func (s *Settings) Validate() error {
	switch {
	case s.SHDegree < 0 || s.SHDegree > splat.MaxSHDegree:
		return fmt.Errorf("prep: SH degree %d outside 0..%d", s.SHDegree, splat.MaxSHDegree)
	case s.Near <= 0:
		return fmt.Errorf("prep: near plane %v must be > 0", s.Near)
	case s.TileSize <= 0:
		return fmt.Errorf("prep: tile size %d must be > 0", s.TileSize)
	case s.Model == Ray && s.RadiusScale <= 0:
		return fmt.Errorf("prep: radius scale %v must be > 0", s.RadiusScale)
	}
	return nil
}

// Cam is a camera converted to F for the per-splat maths.
type Cam[F splat.Float] struct {
	W, H           int
	R              mat3[F]
	T              vec3[F]
	Fx, Fy, Cx, Cy F
	Center         vec3[F]
	// Frustum limits for the EWA Jacobian: x/z and y/z are clamped to the
	// image plus a 30% margin (as gsplat does) so that splats far off-screen
	// do not get huge 2D covariances.
	limXNeg, limXPos, limYNeg, limYPos F
	Dist                               camera.Distortion
}

// NewCam converts a camera.
func NewCam[F splat.Float](c *camera.Camera) *Cam[F] {
	k := &Cam[F]{W: c.Width, H: c.Height, Fx: F(c.Fx), Fy: F(c.Fy), Cx: F(c.Cx), Cy: F(c.Cy), Dist: c.Distortion}
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			k.R[i][j] = F(c.R[i][j])
		}
		k.T[i] = F(c.T[i])
	}
	ctr := c.Center()
	k.Center = vec3[F]{F(ctr[0]), F(ctr[1]), F(ctr[2])}
	tanX := 0.5 * float64(c.Width) / c.Fx
	tanY := 0.5 * float64(c.Height) / c.Fy
	k.limXPos = F((float64(c.Width)-c.Cx)/c.Fx + 0.3*tanX)
	k.limXNeg = F(c.Cx/c.Fx + 0.3*tanX)
	k.limYPos = F((float64(c.Height)-c.Cy)/c.Fy + 0.3*tanY)
	k.limYNeg = F(c.Cy/c.Fy + 0.3*tanY)
	return k
}

// TilesX is the number of tile columns for tile size ts.
func (k *Cam[F]) TilesX(ts int) int { return (k.W + ts - 1) / ts }

// TilesY is the number of tile rows for tile size ts.
func (k *Cam[F]) TilesY(ts int) int { return (k.H + ts - 1) / ts }

// Project fills out for every splat of g seen from cam (design.md §5 step 1).
// It runs on workers goroutines; the result does not depend on workers.
func Project[F splat.Float](cam *Cam[F], set *Settings, g *splat.GaussiansOf[F], out *ProjectedOf[F], workers int) {
	n := g.Len()
	out.Model = set.Model
	out.Resize(n)
	par.For(n, workers, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			projectOne(cam, set, g, i, out)
		}
	})
}

// splatGeom holds the intermediates of one splat's geometry that both the
// forward and the backward need; the backward recomputes it rather than
// storing it per splat.
type splatGeom[F splat.Float] struct {
	mean   vec3[F]
	p      vec3[F] // camera-space mean
	rq     mat3[F] // rotation of the normalised quaternion
	qh     [4]F
	qn     F
	s      vec3[F] // exp(log_scale) (times radius scale for the ray model)
	opac0  F       // sigmoid(logit)
	finite bool
}

func loadGeom[F splat.Float](cam *Cam[F], g *splat.GaussiansOf[F], i int, sigmaScale F) splatGeom[F] {
	var st splatGeom[F]
	st.mean = vec3[F]{g.Means[i*3], g.Means[i*3+1], g.Means[i*3+2]}
	st.p = mulMV(&cam.R, st.mean)
	st.p[0] += cam.T[0]
	st.p[1] += cam.T[1]
	st.p[2] += cam.T[2]
	st.rq, st.qh, st.qn = quatToMat([4]F{g.Quats[i*4], g.Quats[i*4+1], g.Quats[i*4+2], g.Quats[i*4+3]})
	for k := 0; k < 3; k++ {
		st.s[k] = sigmaScale * exp(g.LogScales[i*3+k])
	}
	st.opac0 = sigmoid(g.OpacityLogits[i])
	st.finite = st.qn > 0 && finite3(st.p) && finite3(st.s) && !isNaN(st.opac0)
	return st
}

func isNaN[F splat.Float](x F) bool { return x != x }

func finite3[F splat.Float](v vec3[F]) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

func projectOne[F splat.Float](cam *Cam[F], set *Settings, g *splat.GaussiansOf[F], i int, out *ProjectedOf[F]) {
	out.Valid[i] = false
	sigmaScale := F(1)
	if set.Model == Ray {
		sigmaScale = F(set.RadiusScale)
	}
	st := loadGeom(cam, g, i, sigmaScale)
	if !st.finite || st.p[2] < F(set.Near) {
		return
	}
	out.Depth[i] = st.p[2]
	// The footprint before the colour: the 48 SH values are read for the splats on the image
	// alone. A splat is valid when both succeed, in either order; the other entries of an
	// invalid one are never read.
	var ok bool
	if set.Model == Ray {
		ok = projectRay(cam, set, &st, i, out)
	} else {
		ok = projectEWA(cam, set, &st, i, out)
	}
	out.Valid[i] = ok && shColor(cam, set.SHDegree, g, i, st.mean, out.Color[i*3:i*3+3])
}

// shColor evaluates rgb = max(0, 0.5 + Σ_k SH_k(d)·c_k) with d the unit
// direction from the camera centre to the mean (the INRIA convention).
func shColor[F splat.Float](cam *Cam[F], deg int, g *splat.GaussiansOf[F], i int, mean vec3[F], rgb []F) bool {
	d := vec3[F]{mean[0] - cam.Center[0], mean[1] - cam.Center[1], mean[2] - cam.Center[2]}
	n := sqrt(dot3(d, d))
	if n == 0 {
		return false
	}
	var b [splat.SHCoeffs]F
	splat.SHBasis(deg, d[0]/n, d[1]/n, d[2]/n, &b)
	sh := g.SH[i*splat.SHCoeffs*3:]
	nc := splat.NumCoeffs(deg)
	for c := 0; c < 3; c++ {
		v := F(0.5)
		for k := 0; k < nc; k++ {
			v += b[k] * sh[k*3+c]
		}
		rgb[c] = max(v, 0)
	}
	return true
}

// ewaJacobian returns the rows of the perspective Jacobian at p with the
// frustum clamp, and which coordinates were clamped.
func ewaJacobian[F splat.Float](cam *Cam[F], p vec3[F]) (j [2][3]F, tx, ty F, clampX, clampY bool) {
	z := p[2]
	ux, uy := p[0]/z, p[1]/z
	cx := min(cam.limXPos, max(-cam.limXNeg, ux))
	cy := min(cam.limYPos, max(-cam.limYNeg, uy))
	clampX, clampY = cx != ux, cy != uy
	tx, ty = cx*z, cy*z
	j = [2][3]F{
		{cam.Fx / z, 0, -cam.Fx * tx / (z * z)},
		{0, cam.Fy / z, -cam.Fy * ty / (z * z)},
	}
	return
}

// ewaCov returns Σc = W·M·Mᵀ·Wᵀ with M = R(q̂)·diag(s), the camera-space
// covariance, and M·Mᵀ's factor M.
func ewaCov[F splat.Float](cam *Cam[F], st *splatGeom[F]) (sc mat3[F], m mat3[F]) {
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			m[r][c] = st.rq[r][c] * st.s[c]
		}
	}
	var sigma mat3[F]
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			sigma[r][c] = m[r][0]*m[c][0] + m[r][1]*m[c][1] + m[r][2]*m[c][2]
		}
	}
	wt := transpose(&cam.R)
	t := mulMM(&cam.R, &sigma)
	sc = mulMM(&t, &wt)
	return sc, m
}

// cov2D is J·Σc·Jᵀ (without the dilation).
func cov2D[F splat.Float](j *[2][3]F, sc *mat3[F]) (a, b, c F) {
	var js [2][3]F
	for r := 0; r < 2; r++ {
		for k := 0; k < 3; k++ {
			js[r][k] = j[r][0]*sc[0][k] + j[r][1]*sc[1][k] + j[r][2]*sc[2][k]
		}
	}
	a = js[0][0]*j[0][0] + js[0][1]*j[0][1] + js[0][2]*j[0][2]
	b = js[0][0]*j[1][0] + js[0][1]*j[1][1] + js[0][2]*j[1][2]
	c = js[1][0]*j[1][0] + js[1][1]*j[1][1] + js[1][2]*j[1][2]
	return
}

// Dilation is the 0.3 px² added to every 2D covariance (the original's
// low-pass filter, design.md §4.1).
const Dilation = 0.3

func projectEWA[F splat.Float](cam *Cam[F], set *Settings, st *splatGeom[F], i int, out *ProjectedOf[F]) bool {
	sc, _ := ewaCov(cam, st)
	jac, _, _, _, _ := ewaJacobian(cam, st.p)
	a0, b, c0 := cov2D(&jac, &sc)
	a, c := a0+Dilation, c0+Dilation
	det := a*c - b*b
	if !(det > 0) {
		return false
	}
	opac := st.opac0
	if set.Antialiased {
		det0 := a0*c0 - b*b
		opac *= sqrt(max(det0/det, 0))
	}
	amin := F(set.alphaMin())
	if !(opac > amin) {
		return false
	}
	z := st.p[2]
	mx := cam.Fx*st.p[0]/z + cam.Cx
	my := cam.Fy*st.p[1]/z + cam.Cy
	ca, cb, cc := c/det, -b/det, a/det
	out.Mean2D[i*2], out.Mean2D[i*2+1] = mx, my
	out.Conic[i*3], out.Conic[i*3+1], out.Conic[i*3+2] = ca, cb, cc
	out.Opacity[i] = opac
	// Footprint: o·exp(−½dᵀCd) ≥ AlphaMin  ⇔  dᵀ(C/r²)d ≤ 1, r² = 2 ln(o/AlphaMin).
	r2 := 2 * log(opac/amin)
	out.BoundCenter[i*2], out.BoundCenter[i*2+1] = mx, my
	out.BoundQ[i*3], out.BoundQ[i*3+1], out.BoundQ[i*3+2] = ca/r2, cb/r2, cc/r2
	// 3σ radius of the largest axis, the statistic the original prunes on.
	mid := 0.5 * (a + c)
	lmax := mid + sqrt(max(mid*mid-det, 0.1))
	out.Radius[i] = 3 * sqrt(lmax)
	return setRect(cam, set.TileSize, mx, my, sqrt(a*r2), sqrt(c*r2), i, out)
}

// setRect writes the tile box of a footprint centred at (mx, my) with half
// extents (ex, ey) in pixels, and reports whether it touches the image.
// A pixel x is covered when its centre x+0.5 lies in [mx−ex, mx+ex], so the
// box is the tiles floor((v − 0.5)/ts) of its ends v (tileIndex), without
// float64: the kernel twin (project.cu's set_rect) must run where there is none.
// A box with a NaN end, or reaching −∞ on one side and +∞ on another, touches
// nothing.
func setRect[F splat.Float](cam *Cam[F], ts int, mx, my, ex, ey F, i int, out *ProjectedOf[F]) bool {
	tx, ty := cam.TilesX(ts), cam.TilesY(ts)
	vx0, vx1, vy0, vy1 := mx-ex, mx+ex, my-ey, my+ey
	if !boxEndsOK(vx0, vx1, vy0, vy1) {
		return false
	}
	qx0, qx1 := tileIndex(vx0, ts, tx), tileIndex(vx1, ts, tx)
	qy0, qy1 := tileIndex(vy0, ts, ty), tileIndex(vy1, ts, ty)
	if qx1 < 0 || qy1 < 0 || qx0 >= tx || qy0 >= ty {
		return false
	}
	x0, x1 := int32(max(qx0, 0)), int32(min(qx1+1, tx))
	y0, y1 := int32(max(qy0, 0)), int32(min(qy1+1, ty))
	if x0 >= x1 || y0 >= y1 {
		return false
	}
	out.Rect[i*4], out.Rect[i*4+1], out.Rect[i*4+2], out.Rect[i*4+3] = x0, y0, x1, y1
	return true
}

// boxEndsOK is false when an end is NaN or the ends reach both −∞ and +∞: the
// cases where the sum of the four tile indices, taken in real arithmetic,
// would be undefined (as the box's float64 evaluation rejects exactly these).
func boxEndsOK[F splat.Float](v0, v1, v2, v3 F) bool {
	inf, ninf := F(math.Inf(1)), F(math.Inf(-1))
	pos := v0 == inf || v1 == inf || v2 == inf || v3 == inf
	neg := v0 == ninf || v1 == ninf || v2 == ninf || v3 == ninf
	return !isNaN(v0) && !isNaN(v1) && !isNaN(v2) && !isNaN(v3) && !(pos && neg)
}

// tileIndex is floor((v − 0.5)/ts) clamped to [−1, tiles], computed exactly
// in F's own precision and integers (v not NaN; ts ≥ 1; tiles·ts + 1 ≤ 2²³,
// images up to about 8 million pixels a side).
//
// Why it is exact: outside (−1, tiles·ts + 1) the clamp decides (v ≤ −1 gives
// (v−0.5)/ts ≤ −1.5/ts, whose floor is ≤ −1; v ≥ tiles·ts + 1 gives a
// quotient ≥ tiles + 0.5/ts). Inside, f = floor(v) is an integer of magnitude
// below 2²³ (truncation, corrected by one comparison), so f and f + 0.5 are
// exact in float32 and the comparison
// v < f + 0.5 decides floor(v − 0.5) ∈ {f − 1, f} with no rounding; the
// division is then integer floor division, and floor(floor(x)/ts) =
// floor(x/ts) for a positive integer ts.
func tileIndex[F splat.Float](v F, ts, tiles int) int {
	if v <= -1 {
		return -1
	}
	if v >= F(tiles*ts+1) {
		return tiles
	}
	g := int(v) // truncation toward zero
	if v < F(g) {
		g-- // floor(v)
	}
	if v < F(g)+0.5 {
		g-- // floor(v − 0.5)
	}
	// g ≥ −2 here, so floor division needs only the one correction.
	q := g / ts
	if g < 0 && q*ts != g {
		q--
	}
	return min(max(q, -1), tiles)
}

func projectRay[F splat.Float](cam *Cam[F], set *Settings, st *splatGeom[F], i int, out *ProjectedOf[F]) bool {
	opac := st.opac0
	amin := F(set.alphaMin())
	if !(opac > amin) {
		return false
	}
	// A = diag(1/σ)·R(q̂)ᵀ: row k is column k of R(q̂) over σ_k.
	var a mat3[F]
	for k := 0; k < 3; k++ {
		for j := 0; j < 3; j++ {
			a[k][j] = st.rq[j][k] / st.s[k]
		}
	}
	rel := vec3[F]{cam.Center[0] - st.mean[0], cam.Center[1] - st.mean[1], cam.Center[2] - st.mean[2]}
	u := mulMV(&a, rel)
	copy(out.RayU[i*3:i*3+3], u[:])
	for k := 0; k < 3; k++ {
		copy(out.RayA[i*9+k*3:i*9+k*3+3], a[k][:])
	}
	out.Opacity[i] = opac
	z := st.p[2]
	mx, my := cam.pixel(st.p[0]/z, st.p[1]/z)
	out.Mean2D[i*2], out.Mean2D[i*2+1] = mx, my
	rayHalf(cam, &a, u, i, out)
	r2 := 2 * log(opac/amin)
	return rayFootprint(cam, set, st, r2, i, out)
}

// rayHalf writes splat i's RayHalf. With h = Aᵀu, a pixel's u·v = h·d for its world direction
// d, and under a pinhole d is a positive multiple of Rᵀ·(xn, yn, 1) with xn = (px − cx)/fx,
// yn = (py − cy)/fy: u·v has the sign of g·(xn, yn, 1), g = R·h. That is linear in the pixel,
// so a tile is wholly on the skipped side when its four corner pixel centres are. The margin
// τ = 10⁻⁴·|u|·‖A‖·dmax (dmax the longest (xn, yn, 1) of the image) is far above the
// rasterizer's rounding of u·v (a few 2⁻²⁴ of |u|·‖A‖·|d|) and this test's own. Every product
// is rounded on its own (F(…)), as the kernel twin (project.cu's ray_half) computes it.
func rayHalf[F splat.Float](cam *Cam[F], a *mat3[F], u vec3[F], i int, out *ProjectedOf[F]) {
	if !cam.Dist.IsPinhole() {
		out.RayHalf[i*3], out.RayHalf[i*3+1], out.RayHalf[i*3+2] = 0, 0, -1
		return
	}
	var h, g vec3[F]
	var aa F
	for j := 0; j < 3; j++ {
		h[j] = (F(a[0][j]*u[0]) + F(a[1][j]*u[1])) + F(a[2][j]*u[2])
		aa = ((aa + F(a[j][0]*a[j][0])) + F(a[j][1]*a[j][1])) + F(a[j][2]*a[j][2])
	}
	for r := 0; r < 3; r++ {
		g[r] = (F(cam.R[r][0]*h[0]) + F(cam.R[r][1]*h[1])) + F(cam.R[r][2]*h[2])
	}
	uu := (F(u[0]*u[0]) + F(u[1]*u[1])) + F(u[2]*u[2])
	xm := max(cam.Cx, F(cam.W)-cam.Cx) / cam.Fx
	ym := max(cam.Cy, F(cam.H)-cam.Cy) / cam.Fy
	dmax2 := (F(xm*xm) + F(ym*ym)) + 1
	tau := F(F(1e-4) * sqrt(F(F(uu*aa)*dmax2)))
	ga, gb := g[0]/cam.Fx, g[1]/cam.Fy
	out.RayHalf[i*3], out.RayHalf[i*3+1] = ga, gb
	out.RayHalf[i*3+2] = ((g[2] - F(ga*cam.Cx)) - F(gb*cam.Cy)) - tau
}

// pixel maps normalised camera coordinates to pixels through the lens.
func (k *Cam[F]) pixel(x, y F) (F, F) {
	if !k.Dist.IsPinhole() {
		xd, yd := k.Dist.Distort(float64(x), float64(y))
		x, y = F(xd), F(yd)
	}
	return k.Fx*x + k.Cx, k.Fy*y + k.Cy
}

// rayFootprint bounds the pixels whose ray passes the splat's iso-ellipsoid
// ‖A(x−μ)‖² = r², the set where the ray model's alpha reaches AlphaMin.
// Under a pinhole the silhouette of an ellipsoid is exactly a conic: with the
// ellipsoid (y−m)ᵀK(y−m) ≤ 1 in camera space, a ray y = t·w meets it iff
// (wᵀKm)² − (wᵀKw)(mᵀKm − 1) ≥ 0, a quadratic form wᵀ·M·w ≥ 0 in the ray
// w = (x_n, y_n, 1) (design.md §4.2; this is the dual-quadric projection).
// With lens distortion the conic's boundary is pushed through the lens and
// bounded by its box, conservatively. A splat whose ellipsoid reaches behind
// the camera plane has an unbounded silhouette, the insides of a hyperbola's
// branches: its box is that of the tiles the hyperbola reaches on the image
// (HyperbolaRect; none, and the splat is off the image), and its conic goes to
// the tile test (TileHit), which drops the tiles in the box it misses (a
// splat just beside the camera misses most of the image); degenerate
// silhouettes, and the camera inside the ellipsoid, keep the whole image. The conic comes from rayConic,
// in df arithmetic and a form without cancellation: against the formula in
// 256-bit arithmetic every float32 output (centre, Q, radius) is within 2⁻²³
// relative and the tile box the same, from near splats to 10⁶ and more of
// their smallest axis away (TestRayFootprintDFAgainstExact), where a float64
// evaluation of the quadric form above loses up to all its digits.
func rayFootprint[F splat.Float](cam *Cam[F], set *Settings, st *splatGeom[F], r2 F, i int, out *ProjectedOf[F]) bool {
	whole := func() bool {
		out.BoundCenter[i*2], out.BoundCenter[i*2+1] = F(cam.W)/2, F(cam.H)/2
		out.BoundQ[i*3], out.BoundQ[i*3+1], out.BoundQ[i*3+2] = 0, 0, 0
		out.Radius[i] = F(max(cam.W, cam.H))
		return setRect(cam, set.TileSize, F(cam.W)/2, F(cam.H)/2, F(cam.W), F(cam.H), i, out)
	}
	c, state := rayConic(cam, st, r2)
	switch state {
	case coneWhole:
		return whole() // the footprint reaches the camera plane (or the camera is inside it)
	case coneNone:
		return false
	case coneHyperbola:
		if !cam.Dist.IsPinhole() {
			return whole()
		}
	}
	if cam.Dist.IsPinhole() {
		// Pixels p = f·x_n + c: the conic scales by 1/f².
		fx, fy := dfOf(cam.Fx), dfOf(cam.Fy)
		fxx, fxy, fyy := fx.mul(fx), fx.mul(fy), fy.mul(fy)
		cx, cy := fx.mul(c.c0x).add(dfOf(cam.Cx)), fy.mul(c.c0y).add(dfOf(cam.Cy))
		pa, pb, pc := c.qa.div(fxx), c.qb.div(fxy), c.qc.div(fyy)
		if state == coneHyperbola {
			// The whole image's radius; the hyperbola for TileHit where its float32 Q is
			// clearly indefinite, with the tiles it reaches as the box (none: the splat is off
			// the image), else the whole box.
			ok := whole()
			if ok && Hyperbolic(pa.hi, pb.hi, pc.hi) && finiteF(cx.hi) && finiteF(cy.hi) {
				out.BoundCenter[i*2], out.BoundCenter[i*2+1] = cx.hi, cy.hi
				out.BoundQ[i*3], out.BoundQ[i*3+1], out.BoundQ[i*3+2] = pa.hi, pb.hi, pc.hi
				r, hit := HyperbolaRect(cx.hi, cy.hi, pa.hi, pb.hi, pc.hi, set.TileSize, cam.TilesX(set.TileSize), cam.TilesY(set.TileSize), cam.W, cam.H)
				if !hit {
					return false
				}
				copy(out.Rect[i*4:i*4+4], r[:])
			}
			return ok
		}
		out.BoundCenter[i*2], out.BoundCenter[i*2+1] = cx.hi, cy.hi
		out.BoundQ[i*3], out.BoundQ[i*3+1], out.BoundQ[i*3+2] = pa.hi, pb.hi, pc.hi
		ex, ey := fx.mul(c.exn), fy.mul(c.eyn)
		// 3/r times the longest semi-axis, 1/sqrt of the smaller eigenvalue of
		// [[pa,pb],[pb,pc]], taken as det/(larger one) = det/(mid + d) with
		// d = sqrt(¼(pa−pc)² + pb²), so that thin ellipses lose nothing.
		mid := dfOf(F(0.5)).mul(pa.add(pc))
		dd := dfOf(F(0.25)).mul(pa.sub(pc)).mul(pa.sub(pc)).add(pb.mul(pb))
		// det(Qn)/(fx²fy²) = det/(kk·fx²)/(kk·fy²): in this order every step stays in range.
		pdet := c.det.div(c.kk.mul(fxx)).div(c.kk.mul(fyy))
		semi := mid.add(dd.sqrt()).div(pdet).sqrt()
		out.Radius[i] = dfOf(F(3)).div(dfOf(r2).sqrt()).mul(semi).hi
		return setRect(cam, set.TileSize, cx.hi, cy.hi, ex.hi, ey.hi, i, out)
	}
	c0x, c0y := c.c0x.f64(), c.c0y.f64()
	fx, fy := float64(cam.Fx), float64(cam.Fy)
	// Distorted lens: sample the ellipse boundary, push it through the lens,
	// take the box with a margin, and let every tile in the box test in.
	x0, y0, x1, y1 := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	// Principal axes of Qn for a parametrisation of the boundary.
	l1, l2, v1x, v1y := eigSym2(c.qa.f64(), c.qb.f64(), c.qc.f64())
	const samples = 64
	for s := 0; s < samples; s++ {
		t := 2 * math.Pi * float64(s) / samples
		ca, sa := math.Cos(t)/math.Sqrt(l1), math.Sin(t)/math.Sqrt(l2)
		px := c0x + ca*v1x - sa*v1y
		py := c0y + ca*v1y + sa*v1x
		xd, yd := cam.Dist.Distort(px, py)
		u, v := fx*xd+float64(cam.Cx), fy*yd+float64(cam.Cy)
		x0, x1 = math.Min(x0, u), math.Max(x1, u)
		y0, y1 = math.Min(y0, v), math.Max(y1, v)
	}
	const margin = 2
	cx, cy := 0.5*(x0+x1), 0.5*(y0+y1)
	ex, ey := 0.5*(x1-x0)+margin, 0.5*(y1-y0)+margin
	out.BoundCenter[i*2], out.BoundCenter[i*2+1] = F(cx), F(cy)
	out.BoundQ[i*3], out.BoundQ[i*3+1], out.BoundQ[i*3+2] = 0, 0, 0
	out.Radius[i] = F(3 / math.Sqrt(float64(r2)) * math.Max(ex, ey))
	return setRect(cam, set.TileSize, F(cx), F(cy), F(ex), F(ey), i, out)
}

// rayCone is the silhouette of rayFootprint in normalised coordinates: the
// ellipse (p−c0)ᵀ·Qn·(p−c0) ≤ 1, Qn = [[qa, qb], [qb, qc]] = A/kk with
// det = det(A), and its half extents exn, eyn (the square roots of Qn⁻¹'s
// diagonal).
type rayCone[F splat.Float] struct {
	c0x, c0y, qa, qb, qc, det, kk, exn, eyn df[F]
}

// rayConic's outcomes: an ellipse, a hyperbola (the silhouette of a footprint
// reaching behind the camera plane: unbounded, its box that of the tiles it
// reaches on the image, HyperbolaRect, and its conic decides the tiles in it,
// TileHit), no conic (the camera is inside
// the footprint ellipsoid, or a degenerate silhouette: the whole image), or
// nothing (out of range).
const (
	coneEllipse = iota
	coneHyperbola
	coneWhole
	coneNone
)

// rayConic computes rayCone in df arithmetic, in a form free of the
// cancellation that the quadric form of the silhouette suffers for distant
// and thin splats.
//
// With the ellipsoid {y : |B(y − m)|² ≤ 1}, B = diag(1/(σⱼr))·(W·R)ᵀ, and
// c = Bm, a ray t·w meets it iff, splitting u = Bw along ĉ = c/|c| as
// u = αĉ + u⊥, α² ≥ (|c|² − 1)·|u⊥|² (the cone tangent to the ellipsoid;
// |c| ≤ 1: the camera is inside). Through w = w₀ + δ with w₀ = m/m_z (the
// centre's image, where u = c/m_z is along ĉ) and δ = (δx, δy, 0), and with B
// scaled by λ = σmin·r (which leaves the condition alone) and the condition
// divided by h² = |c|² − 1:
//
//	(a₀ + g′ᵀδ)² ≥ |Q⊥δ|²,  a₀ = |c̃|/(m_z·h), g′ = B̃ₓᵧᵀĉ/h, Q⊥ = (I − ĉĉᵀ)B̃ₓᵧ,
//
// where B̃ = λB = diag(σmin/σⱼ)·(W·R)ᵀ, c̃ = B̃m and 1/h = λ/sqrt(|c̃|² − λ²).
// With A = Q⊥ᵀQ⊥ − g′g′ᵀ this is (δ − δ₀)ᵀA(δ − δ₀) ≤ kk with δ₀ = a₀A⁻¹g′
// and kk = a₀²(1 + g′ᵀA⁻¹g′): an ellipse iff A is positive definite, and then
// kk is a sum of positive terms. Every quantity is of order one or a₀ (about
// σ/z), so nothing leaves float32's range for σ/z above about 10⁻¹⁹.
func rayConic[F splat.Float](cam *Cam[F], st *splatGeom[F], r2 F) (c rayCone[F], state int) {
	var wr [3][3]F
	for r := 0; r < 3; r++ {
		for k := 0; k < 3; k++ {
			wr[r][k] = F(cam.R[r][0]*st.rq[0][k]) + F(cam.R[r][1]*st.rq[1][k]) + F(cam.R[r][2]*st.rq[2][k])
		}
	}
	smin := min(st.s[0], st.s[1], st.s[2])
	if !(smin > 0) || !(r2 > 0) || !(st.p[2] > 0) {
		return c, coneWhole
	}
	lam := dfOf(smin).mul(dfOf(r2).sqrt())
	// B̃ row j = (σmin/σⱼ)·(column j of W·R); c̃ = B̃m.
	var bt [3][3]df[F]
	var ct [3]df[F]
	for j := 0; j < 3; j++ {
		t := dfOf(smin).div(dfOf(st.s[j]))
		for k := 0; k < 3; k++ {
			bt[j][k] = t.mul(dfOf(wr[k][j]))
		}
		ct[j] = bt[j][0].mul(dfOf(st.p[0])).add(bt[j][1].mul(dfOf(st.p[1]))).add(bt[j][2].mul(dfOf(st.p[2])))
	}
	cn2 := ct[0].mul(ct[0]).add(ct[1].mul(ct[1])).add(ct[2].mul(ct[2]))
	h2 := cn2.sub(lam.mul(lam))
	if !(h2.hi > 0) {
		return c, coneWhole // the camera is inside the footprint ellipsoid (NaN: out of range)
	}
	cn := cn2.sqrt()
	ih := lam.div(h2.sqrt()) // 1/h
	var chat [3]df[F]
	for j := 0; j < 3; j++ {
		chat[j] = ct[j].div(cn)
	}
	var g [2]df[F]
	var qp [3][2]df[F]
	for k := 0; k < 2; k++ {
		g[k] = bt[0][k].mul(chat[0]).add(bt[1][k].mul(chat[1])).add(bt[2][k].mul(chat[2]))
		for j := 0; j < 3; j++ {
			qp[j][k] = bt[j][k].sub(chat[j].mul(g[k]))
		}
		g[k] = g[k].mul(ih)
	}
	a0 := cn.div(dfOf(st.p[2])).mul(ih)
	gram := func(k, l int) df[F] {
		return qp[0][k].mul(qp[0][l]).add(qp[1][k].mul(qp[1][l])).add(qp[2][k].mul(qp[2][l])).sub(g[k].mul(g[l]))
	}
	a00, a01, a11 := gram(0, 0), gram(0, 1), gram(1, 1)
	det := a00.mul(a11).sub(a01.mul(a01))
	ellipse := det.hi > 0 && a00.hi > 0
	// det < 0: the footprint reaches behind the camera plane, and the plane of the image cuts
	// both nappes of the cone of lines meeting it: the completed square below holds as it is,
	// with kk < 0, and the footprint is (δ−δ₀)ᵀ(A/kk)(δ−δ₀) ≥ 1, the insides of a hyperbola's
	// branches, often far from the image (a splat just beside the camera).
	if !(ellipse || det.hi < 0) || math.IsInf(float64(det.hi), 0) {
		return c, coneWhole // a degenerate silhouette that reaches the camera plane
	}
	v0 := a11.mul(g[0]).sub(a01.mul(g[1])).div(det)
	v1 := a00.mul(g[1]).sub(a01.mul(g[0])).div(det)
	kk := a0.mul(a0).mul(dfOf(F(1)).add(g[0].mul(v0)).add(g[1].mul(v1)))
	if ellipse && !(kk.hi > 0) {
		return c, coneNone
	}
	if !ellipse && !(kk.hi < 0) {
		return c, coneWhole
	}
	c.c0x = dfOf(st.p[0]).div(dfOf(st.p[2])).add(a0.mul(v0))
	c.c0y = dfOf(st.p[1]).div(dfOf(st.p[2])).add(a0.mul(v1))
	c.qa, c.qb, c.qc = a00.div(kk), a01.div(kk), a11.div(kk)
	c.det, c.kk = det, kk
	if !ellipse {
		return c, coneHyperbola
	}
	// Qn⁻¹'s diagonal: qc/qdet = a11·kk/det, qa/qdet = a00·kk/det.
	c.exn, c.eyn = a11.mul(kk).div(det).sqrt(), a00.mul(kk).div(det).sqrt()
	return c, coneEllipse
}

// eigSym2 returns the eigenvalues of [[a,b],[b,c]] and the unit eigenvector
// of the first.
func eigSym2(a, b, c float64) (l1, l2, vx, vy float64) {
	mid := 0.5 * (a + c)
	d := math.Sqrt(math.Max(0.25*(a-c)*(a-c)+b*b, 0))
	l1, l2 = mid+d, mid-d
	if b != 0 {
		vx, vy = l1-c, b
	} else if a >= c {
		vx, vy = 1, 0
	} else {
		vx, vy = 0, 1
	}
	n := math.Hypot(vx, vy)
	return l1, l2, vx / n, vy / n
}

// df is the unevaluated sum hi + lo of two F values with |lo| ≤ ½ulp(hi): about
// twice F's significand from F arithmetic alone (Dekker's double-length
// arithmetic). The ray model's silhouette and the pixel rays need more than
// float32 and the kernels cannot have float64 (Metal has none), so the float32
// instance of these operations is what project.cu's df_* helpers do, operation
// for operation. Every product is rounded on its own (F(…)), so that no
// compiler fuses it into a multiply-add, which would change the error terms.
type df[F splat.Float] struct{ hi, lo F }

func dfOf[F splat.Float](x F) df[F] { return df[F]{x, 0} }

// dfSplitter is Veltkamp's 2^⌈p/2⌉ + 1 for F's p-bit significand.
func dfSplitter[F splat.Float]() F {
	if F(0x1p-30) != F(0x1p-30)+F(0x1p-60) { // F keeps more than 30 bits: float64
		return 134217729
	}
	return 4097
}

// twoSum returns a + b rounded and its exact rounding error (Knuth).
func twoSum[F splat.Float](a, b F) (s, e F) {
	s = a + b
	bb := s - a
	e = (a - (s - bb)) + (b - bb)
	return s, e
}

// twoProd returns a·b rounded and its exact rounding error (Dekker's product
// with Veltkamp's split; exact unless a product underflows or overflows).
func twoProd[F splat.Float](a, b F) (p, e F) {
	c := dfSplitter[F]()
	p = F(a * b)
	ca, cb := F(c*a), F(c*b)
	ah, bh := ca-(ca-a), cb-(cb-b)
	al, bl := a-ah, b-bh
	e = ((F(ah*bh) - p) + F(ah*bl) + F(al*bh)) + F(al*bl)
	return p, e
}

// dfNorm renormalises s + e (|e| small against s).
func dfNorm[F splat.Float](s, e F) df[F] {
	hi := s + e
	return df[F]{hi, e - (hi - s)}
}

func (a df[F]) add(b df[F]) df[F] {
	s, e := twoSum(a.hi, b.hi)
	return dfNorm(s, e+(a.lo+b.lo))
}

func (a df[F]) neg() df[F] { return df[F]{-a.hi, -a.lo} }

func (a df[F]) sub(b df[F]) df[F] { return a.add(b.neg()) }

func (a df[F]) mul(b df[F]) df[F] {
	p, e := twoProd(a.hi, b.hi)
	return dfNorm(p, e+(F(a.hi*b.lo)+F(a.lo*b.hi)))
}

// div: q1 = a/b in F, then one correction from the remainder a − b·q1.
func (a df[F]) div(b df[F]) df[F] {
	q1 := a.hi / b.hi
	r := a.sub(b.mul(dfOf(q1)))
	q2 := r.hi / b.hi
	return dfNorm(q1, q2)
}

// sqrt: x = √hi in F (correctly rounded), then one Newton correction; a value
// that is not positive gives F's √hi (0, or NaN for a negative one).
func (a df[F]) sqrt() df[F] {
	x := F(math.Sqrt(float64(a.hi)))
	if !(a.hi > 0) || math.IsInf(float64(a.hi), 1) {
		return dfOf(x)
	}
	p, e := twoProd(x, x)
	r := a.sub(df[F]{p, e})
	return dfNorm(x, r.hi/F(2*x))
}

// f64 is the value in float64, for the host-only distorted-lens bound.
func (a df[F]) f64() float64 { return float64(a.hi) + float64(a.lo) }

// RayCam is a pinhole camera as the ray model's pixel rays need it: every
// float64 parameter as a float32 pair hi + lo (hi = float32(x), lo the rest
// rounded), which keeps about 48 bits of it without float64 (project.cu's
// pixel_rays, on devices without it, takes this very struct).
type RayCam struct {
	R, RLo [9]float32 // world-to-camera rotation, row-major
	F, FLo [4]float32 // fx, fy, cx, cy
	W, H   int
}

// NewRayCam splits cam's rotation and intrinsics into float32 pairs.
func NewRayCam(cam *camera.Camera) RayCam {
	split := func(x float64) (float32, float32) {
		hi := float32(x)
		return hi, float32(x - float64(hi))
	}
	rc := RayCam{W: cam.Width, H: cam.Height}
	for i := 0; i < 9; i++ {
		rc.R[i], rc.RLo[i] = split(cam.R[i/3][i%3])
	}
	for i, v := range [4]float64{cam.Fx, cam.Fy, cam.Cx, cam.Cy} {
		rc.F[i], rc.FLo[i] = split(v)
	}
	return rc
}

// Ray is the unit world direction through the centre of pixel (x, y), in
// df arithmetic: with d = ((x+½ − cx)/fx, (y+½ − cy)/fy, 1), Rᵀd/|d| rounded
// once to float32 (the float64 evaluation's bits but where the exact value lies
// within about 2⁻⁴⁴ of a float32 rounding boundary).
func (rc *RayCam) Ray(x, y int) [3]float32 {
	p := func(k int) df[float32] { return df[float32]{rc.F[k], rc.FLo[k]} }
	xu := dfOf(float32(x) + 0.5).sub(p(2)).div(p(0))
	yu := dfOf(float32(y) + 0.5).sub(p(3)).div(p(1))
	nrm := xu.mul(xu).add(yu.mul(yu)).add(dfOf[float32](1)).sqrt()
	v0, v1, v2 := xu.div(nrm), yu.div(nrm), dfOf[float32](1).div(nrm)
	var d [3]float32
	for k := 0; k < 3; k++ {
		r := func(row int) df[float32] { return df[float32]{rc.R[row*3+k], rc.RLo[row*3+k]} }
		d[k] = r(0).mul(v0).add(r(1).mul(v1)).add(r(2).mul(v2)).hi
	}
	return d
}

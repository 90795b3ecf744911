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
	if !shColor(cam, set.SHDegree, g, i, st.mean, out.Color[i*3:i*3+3]) {
		return
	}
	var ok bool
	if set.Model == Ray {
		ok = projectRay(cam, set, &st, i, out)
	} else {
		ok = projectEWA(cam, set, &st, i, out)
	}
	out.Valid[i] = ok
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
// would be undefined (the box's earlier float64 form rejected exactly these).
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
	r2 := 2 * log(opac/amin)
	return rayFootprint(cam, set, st, r2, i, out)
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
// bounded by its box, conservatively; so is a splat whose ellipsoid reaches
// the camera plane, which may cover any pixel.
func rayFootprint[F splat.Float](cam *Cam[F], set *Settings, st *splatGeom[F], r2 F, i int, out *ProjectedOf[F]) bool {
	// K = (W·R)·diag(1/(σ²r²))·(W·R)ᵀ in float64: the silhouette is
	// ill-conditioned for thin splats and only bounds, never renders.
	var wr [3][3]float64
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			wr[r][c] = float64(cam.R[r][0]*st.rq[0][c] + cam.R[r][1]*st.rq[1][c] + cam.R[r][2]*st.rq[2][c])
		}
	}
	var k [3][3]float64
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			var v float64
			for j := 0; j < 3; j++ {
				s := float64(st.s[j])
				v += wr[r][j] * wr[c][j] / (s * s * float64(r2))
			}
			k[r][c] = v
		}
	}
	m := [3]float64{float64(st.p[0]), float64(st.p[1]), float64(st.p[2])}
	var km [3]float64
	for r := 0; r < 3; r++ {
		km[r] = k[r][0]*m[0] + k[r][1]*m[1] + k[r][2]*m[2]
	}
	mkm := km[0]*m[0] + km[1]*m[1] + km[2]*m[2]
	whole := func() bool {
		out.BoundCenter[i*2], out.BoundCenter[i*2+1] = F(cam.W)/2, F(cam.H)/2
		out.BoundQ[i*3], out.BoundQ[i*3+1], out.BoundQ[i*3+2] = 0, 0, 0
		out.Radius[i] = F(max(cam.W, cam.H))
		return setRect(cam, set.TileSize, F(cam.W)/2, F(cam.H)/2, F(cam.W), F(cam.H), i, out)
	}
	if mkm <= 1 {
		return whole() // the camera is inside the footprint ellipsoid
	}
	var mm [3][3]float64
	for r := 0; r < 3; r++ {
		for c := 0; c < 3; c++ {
			mm[r][c] = km[r]*km[c] - (mkm-1)*k[r][c]
		}
	}
	// In normalised coordinates (x_n, y_n): value = [x y 1]·mm·[x y 1]ᵀ ≥ 0.
	// Centre form: c0 = −N2⁻¹n, Q = −N2/kk with kk = n33 − nᵀN2⁻¹n.
	n2a, n2b, n2c := mm[0][0], mm[0][1], mm[1][1]
	det := n2a*n2c - n2b*n2b
	if !(det > 0) || !(n2a < 0) {
		return whole() // not an ellipse: the footprint reaches the camera plane
	}
	nx, ny := mm[0][2], mm[1][2]
	c0x := -(n2c*nx - n2b*ny) / det
	c0y := -(-n2b*nx + n2a*ny) / det
	kk := mm[2][2] + nx*c0x + ny*c0y
	if !(kk > 0) {
		return false
	}
	// Normalised-coordinate ellipse (p−c0)ᵀ·Qn·(p−c0) ≤ 1 with Qn = −N2/kk.
	qa, qb, qc := -n2a/kk, -n2b/kk, -n2c/kk
	qdet := qa*qc - qb*qb
	// Half extents: sqrt of the diagonal of Qn⁻¹.
	exn, eyn := math.Sqrt(qc/qdet), math.Sqrt(qa/qdet)
	fx, fy := float64(cam.Fx), float64(cam.Fy)
	if cam.Dist.IsPinhole() {
		// Pixels p = f·x_n + c: the conic scales by 1/f².
		cx, cy := fx*c0x+float64(cam.Cx), fy*c0y+float64(cam.Cy)
		pa, pb, pc := qa/(fx*fx), qb/(fx*fy), qc/(fy*fy)
		out.BoundCenter[i*2], out.BoundCenter[i*2+1] = F(cx), F(cy)
		out.BoundQ[i*3], out.BoundQ[i*3+1], out.BoundQ[i*3+2] = F(pa), F(pb), F(pc)
		ex, ey := fx*exn, fy*eyn
		out.Radius[i] = F(3 / math.Sqrt(float64(r2)) * semiMajor(pa, pb, pc))
		return setRect(cam, set.TileSize, F(cx), F(cy), F(ex), F(ey), i, out)
	}
	// Distorted lens: sample the ellipse boundary, push it through the lens,
	// take the box with a margin, and let every tile in the box test in.
	x0, y0, x1, y1 := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	// Principal axes of Qn for a parametrisation of the boundary.
	l1, l2, v1x, v1y := eigSym2(qa, qb, qc)
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

// semiMajor is the longest semi-axis of the ellipse dᵀ[[a,b],[b,c]]d ≤ 1.
func semiMajor(a, b, c float64) float64 {
	l1, l2, _, _ := eigSym2(a, b, c)
	return 1 / math.Sqrt(math.Min(l1, l2))
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

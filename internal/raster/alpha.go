package raster

import (
	"math"

	"github.com/rlxsplat/rlxsplat/internal/fmath"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// The per-model alpha functions of design.md §4 and the footprint crop, shared
// by the forward and the backward. Both passes must take the very same
// skip/blend decision at every pixel (the backward recomputes alpha instead
// of storing hits), so every expression that feeds a decision lives here, once.

// PowerSlack (shaders/common.h POWER_SLACK) widens the cheap "exponent below the cutoff" test (and the
// footprint crop built on it) beyond the exact alpha < AlphaMin rule, so that
// rounding in the cheap test never skips a pixel the exact rule would blend:
// a pixel it skips has alpha below AlphaMin·e^(−0.001).
const PowerSlack = 1e-3

// cropInflate widens prep's ray-model footprint (BoundQ) a little, so that
// rounding in prep's float32 silhouette never drops a pixel at its edge.
const cropInflate = 1.01

// powerCut returns the exponent below which o·exp(power) is certainly below
// amin; +Inf when the splat can never reach it (o ≤ 0 or NaN). The engine's
// float32 instantiation computes it in float32 (fmath.Log), as the kernels
// do (shaders/raster.h power_cut), so the result is a float32 value; the
// float64 checks keep math.Log.
func powerCut[F splat.Float](o, amin F) float64 {
	if !(o > 0) {
		return math.Inf(1)
	}
	if F(1+1e-9) == 1 {
		return float64(fmath.Log(float32(amin)/float32(o)) - float32(PowerSlack))
	}
	return math.Log(float64(amin)/float64(o)) - PowerSlack
}

// alphaOf returns alpha = min(AlphaMax, o·G) with G = exp(power), and whether
// the clamp is active (then alpha has no gradient to o or power).
func alphaOf[F splat.Float](o, power F) (alpha, g F, clamped bool) {
	// float32 cannot tell 1 from 1+1e-9: the engine's instantiation takes
	// the cheaper exponential, the float64 checks keep math.Exp.
	if F(1+1e-9) == 1 {
		g = F(exp32(float32(power)))
	} else {
		g = F(math.Exp(float64(power)))
	}
	alpha = o * g
	if alpha > F(prep.AlphaMax) {
		return F(prep.AlphaMax), g, true
	}
	return alpha, g, false
}

// expF is e^x: exp32 for the engine's float32, math.Exp for the float64
// checks.
func expF[F splat.Float](x F) F {
	if F(1+1e-9) == 1 {
		return F(exp32(float32(x)))
	}
	return F(math.Exp(float64(x)))
}

// alphaOfG is alphaOf for a known g = exp(power).
func alphaOfG[F splat.Float](o, g F) (alpha F, clamped bool) {
	alpha = o * g
	if alpha > F(prep.AlphaMax) {
		return F(prep.AlphaMax), true
	}
	return alpha, false
}

// ewaRowStart starts the walk along one footprint row at pixel x: it returns
// dx = (x+½) − mx, g = exp(power(x)) and the ratio r = g(x+1)/g(x).
//
// Along a row the exponent is quadratic in x, so its exponential advances by
// multiplication alone: g(x+1) = g(x)·r(x) and r(x+1) = r(x)·e^(−a), with
// e^(−a) loaded once per splat (ewaSplat.ka). One exponential per row instead
// of one per pixel; over a row of a tile the float32 drift stays near 1e-6
// relative. Forward and backward walk the same rows from the same start with
// the same operations, so they see bit-identical alphas.
func ewaRowStart[F splat.Float](s *ewaSplat[F], hb, hc F, x int) (dx, g, r F) {
	dx, power := ewaPower(s, hb, hc, x)
	return dx, expF(power), expF(-(s.ha*(2*dx+1) + hb))
}

// exp32 returns e^x to float32 accuracy, in float32 arithmetic alone
// (fmath.Exp; shaders/common.h's exp32 gives the same bits). It is the
// rasterizer's hottest operation (one per pixel a splat can blend into), and
// on a GPU float64 runs at half the float32 rate at best, its conversions
// slower still.
func exp32(x float32) float32 { return fmath.Exp(x) }

// ewaSplat is one splat's EWA data, loaded once per tile.
type ewaSplat[F splat.Float] struct {
	mx, my  F
	a, b, c F    // conic as stored
	ha, hc  F    // a/2 and c/2
	o       F    // opacity
	col     [3]F // colour
	ka      F    // e^(−a): the ratio of successive row steps (ewaRowStart)
	crop    ellipse
}

// loadEWA reads splat id; ok is false when it can reach AlphaMin nowhere.
func loadEWA[F splat.Float](p *prep.ProjectedOf[F], id int32, amin F) (s ewaSplat[F], ok bool) {
	i := int(id)
	s.o = p.Opacity[i]
	cut := powerCut(s.o, amin)
	// The exponent is ≤ 0 wherever a pixel can blend, so alpha ≤ o there.
	if !(cut <= 0) {
		return s, false
	}
	s.mx, s.my = p.Mean2D[2*i], p.Mean2D[2*i+1]
	s.a, s.b, s.c = p.Conic[3*i], p.Conic[3*i+1], p.Conic[3*i+2]
	s.ha, s.hc = s.a/2, s.c/2
	s.ka = expF(-s.a)
	s.col = [3]F{p.Color[3*i], p.Color[3*i+1], p.Color[3*i+2]}
	// −½dᵀCd ≥ cut ⇔ dᵀCd ≤ −2·cut: the pixels that can blend lie in that ellipse.
	s.crop = newEllipse(float64(s.mx), float64(s.my), float64(s.a), float64(s.b), float64(s.c), -2*cut)
	return s, true
}

// ewaRow returns, for pixel row y, dy = (y+½) − my and the exponent's row
// terms b·dy and (c/2)·dy².
func ewaRow[F splat.Float](s *ewaSplat[F], y int) (dy, hb, hc F) {
	dy = F(y) + 0.5 - s.my
	return dy, s.b * dy, s.hc * dy * dy
}

// ewaPower returns dx = (x+½) − mx and the exponent
// −½(a·dx² + c·dy²) − b·dx·dy for a pixel of the row of ewaRow.
func ewaPower[F splat.Float](s *ewaSplat[F], hb, hc F, x int) (dx, power F) {
	dx = F(x) + 0.5 - s.mx
	return dx, -(dx*(s.ha*dx+hb) + hc)
}

// raySplat is one splat's ray-model data, loaded once per tile.
type raySplat[F splat.Float] struct {
	u    [3]F // A·(c − μ)
	a    [9]F // A = diag(1/σ)·R(q̂)ᵀ, row-major
	uu   F    // ‖u‖²
	o    F
	col  [3]F
	qcut F // fast cutoff on ‖w‖² (−2·powerCut)
	crop ellipse
}

// loadRay reads splat id; ok is false when it can reach AlphaMin nowhere.
// With crop set, pixels outside prep's footprint are not evaluated.
func loadRay[F splat.Float](p *prep.ProjectedOf[F], id int32, amin F, crop bool) (s raySplat[F], ok bool) {
	i := int(id)
	s.o = p.Opacity[i]
	cut := powerCut(s.o, amin)
	if !(cut <= 0) {
		return s, false
	}
	s.qcut = F(-2 * cut)
	copy(s.u[:], p.RayU[3*i:3*i+3])
	copy(s.a[:], p.RayA[9*i:9*i+9])
	s.uu = s.u[0]*s.u[0] + s.u[1]*s.u[1] + s.u[2]*s.u[2]
	s.col = [3]F{p.Color[3*i], p.Color[3*i+1], p.Color[3*i+2]}
	if crop {
		q := p.BoundQ[3*i : 3*i+3]
		s.crop = newEllipse(float64(p.BoundCenter[2*i]), float64(p.BoundCenter[2*i+1]),
			float64(q[0]), float64(q[1]), float64(q[2]), cropInflate)
	}
	return s, true
}

// rayPerp evaluates the ray with unit direction d against the splat: with
// v = A·d and sc = (u·v)/‖v‖², w = u − sc·v is the offset, in the splat's
// normalised frame, of the ray's closest approach to the centre, so that
// alpha = o·exp(−½‖w‖²). ok is false when the closest approach is behind
// the camera (u·v ≥ 0: alpha is 0) or certainly too far to reach AlphaMin.
func rayPerp[F splat.Float](s *raySplat[F], dx, dy, dz F) (w0, w1, w2, sc F, ok bool) {
	v0 := s.a[0]*dx + s.a[1]*dy + s.a[2]*dz
	v1 := s.a[3]*dx + s.a[4]*dy + s.a[5]*dz
	v2 := s.a[6]*dx + s.a[7]*dy + s.a[8]*dz
	uv := s.u[0]*v0 + s.u[1]*v1 + s.u[2]*v2
	if !(uv < 0) {
		return
	}
	vv := v0*v0 + v1*v1 + v2*v2
	// ‖w‖² = ‖u‖² − (u·v)²/‖v‖²; compared without the division.
	if !(s.uu*vv-uv*uv <= s.qcut*vv) {
		return
	}
	sc = uv / vv
	return s.u[0] - sc*v0, s.u[1] - sc*v1, s.u[2] - sc*v2, sc, true
}

// rayPower is the exponent −½‖w‖² of rayPerp's offset w.
func rayPower[F splat.Float](w0, w1, w2 F) F {
	return -(w0*w0 + w1*w1 + w2*w2) / 2
}

// ellipse is the pixel region (p − c)ᵀ·Q·(p − c) ≤ r2 with
// Q = [[qa, qb], [qb, qc]], used to visit only the pixels of a tile where a
// splat can blend. When it is not a proper ellipse (ok false), the whole
// tile is visited and the per-pixel tests decide.
type ellipse struct {
	cx, cy, qa, qb, qc, r2 float64
	hy                     float64 // half height
	ok                     bool
}

func newEllipse(cx, cy, qa, qb, qc, r2 float64) ellipse {
	e := ellipse{cx: cx, cy: cy, qa: qa, qb: qb, qc: qc, r2: r2}
	det := qa*qc - qb*qb
	if qa > 0 && det > 0 && r2 >= 0 && finite(cx) && finite(cy) && finite(qa) && finite(qc) && finite(det) && finite(r2) {
		e.hy = math.Sqrt(r2 * qa / det)
		e.ok = finite(e.hy)
	}
	return e
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// rows returns the pixel rows [lo, hi) of [y0, y1) the ellipse can touch.
func (e *ellipse) rows(y0, y1 int) (int, int) {
	if !e.ok {
		return y0, y1
	}
	return pixelRange(e.cy-e.hy, e.cy+e.hy, y0, y1)
}

// span returns the pixels [lo, hi) of row y within [x0, x1) whose centres
// lie inside the ellipse.
func (e *ellipse) span(y, x0, x1 int) (int, int) {
	if !e.ok {
		return x0, x1
	}
	dy := float64(y) + 0.5 - e.cy
	bq := e.qb * dy
	disc := bq*bq - e.qa*(e.qc*dy*dy-e.r2)
	if !(disc >= 0) {
		return x0, x0
	}
	r := math.Sqrt(disc)
	return pixelRange(e.cx+(-bq-r)/e.qa, e.cx+(-bq+r)/e.qa, x0, x1)
}

// pixelRange returns the pixels [lo, hi) whose centres i+½ lie in [a, b],
// clipped to [i0, i1); empty for NaN bounds.
func pixelRange(a, b float64, i0, i1 int) (int, int) {
	lo := math.Ceil(a - 0.5)
	hi := math.Floor(b-0.5) + 1
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return i0, i0
	}
	// Clamp in floating point first: converting an out-of-range float to int
	// is implementation-defined in Go.
	lo = max(lo, float64(i0))
	hi = min(hi, float64(i1))
	if hi <= lo {
		return i0, i0
	}
	return int(lo), int(hi)
}

// RayAlpha is the forward's alpha of splat id for the pixel whose unit world direction is d,
// in the engine's float32 arithmetic (the ray model; prep's footprint crop left out, as it
// only spares pixels the tests below reject): ok is false where the forward skips the splat
// before its alpha (it can reach AlphaMin nowhere, the closest approach is behind the camera
// or certainly too far). The caller compares alpha with AlphaMin, as the forward does. Parity
// uses it to explain a last contributor that a device's exponential decided the other way.
func RayAlpha(p *prep.ProjectedOf[float32], id int32, d [3]float32) (alpha float32, ok bool) {
	s, ok := loadRay(p, id, float32(prep.AlphaMin), false)
	if !ok {
		return 0, false
	}
	w0, w1, w2, _, ok := rayPerp(&s, d[0], d[1], d[2])
	if !ok {
		return 0, false
	}
	alpha, _, _ = alphaOf(s.o, rayPower(w0, w1, w2))
	return alpha, true
}

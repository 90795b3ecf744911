package fused

import (
	"math"

	"github.com/rlxsplat/rlxsplat/internal/fmath"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/raster"
)

// borderTol is how close, relative to its threshold, a decision of a pixel's walk must come to
// explain a count that differs from the CPU's: the CPU rasterizer advances exp(power) along a
// footprint row by a recurrence (internal/raster's ewaRowStart; about 1e-6 relative from the
// per-pixel exponential over a tile's row) and crops the footprint by an ellipse in float64,
// where raster_fwd takes exp32 of each pixel's exponent. A skip, blend or termination whose
// quantity lies that close to its threshold can go either way.
const borderTol = 1e-5

// walkEWA walks pixel (x, y) through ids (one tile's list, one segment, no blend cap) with
// raster_fwd.cu's float32 arithmetic for EWA: the exponent from a/2 and c/2, its cut, exp32 of
// each pixel's exponent, the alpha clamp and cut-off, and the termination at TERMINATE_T.
// It returns the count (entries up to and including the last blended) and whether some
// decision on the way came within borderTol of its threshold. Each product is converted
// explicitly, so that no compiler fuses it into a multiply-add.
func walkEWA(p *prep.ProjectedOf[float32], ids []int32, x, y int) (count int, near bool) {
	terminate := float32(raster.TerminateT)
	amin := float32(prep.AlphaMin)
	within := func(v, thr float32) bool {
		return math.Abs(float64(v)-float64(thr)) <= borderTol*math.Max(math.Abs(float64(thr)), 1e-30)
	}
	t := float32(1)
	for k, id := range ids {
		i := int(id)
		o := p.Opacity[i]
		if !(o > 0) {
			continue
		}
		cut := fmath.Log(amin/o) - float32(raster.PowerSlack)
		if !(cut <= 0) {
			continue
		}
		mx, my := p.Mean2D[2*i], p.Mean2D[2*i+1]
		ha, b, hc := p.Conic[3*i]/2, p.Conic[3*i+1], p.Conic[3*i+2]/2
		dy := (float32(y) + 0.5) - my
		hb := float32(b * dy)
		hcy := float32(float32(hc*dy) * dy)
		dx := (float32(x) + 0.5) - mx
		power := -(float32(dx*(float32(ha*dx)+hb)) + hcy)
		near = near || within(power, cut)
		if !(power >= cut) || power > 0 {
			continue
		}
		alpha := float32(o * fmath.Exp(power))
		if alpha > float32(prep.AlphaMax) {
			alpha = float32(prep.AlphaMax)
		}
		near = near || within(alpha, amin)
		if !(alpha >= amin) {
			continue
		}
		tn := float32(t * (1 - alpha))
		near = near || within(tn, terminate)
		if tn < terminate {
			break
		}
		t = tn
		count = k + 1
	}
	return count, near
}

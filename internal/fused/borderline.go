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
// and raster_fwd takes exp32 of each pixel's exponent, or on CUDA the hardware's exponential
// (about 2⁻²² relative; shaders/prelude_cuda.h exp_alpha). A skip, blend or termination whose
// quantity lies that close to its threshold can go either way.
const borderTol = 1e-5

// maxForks bounds the decisions walkEWA and walkRay follow both ways in one walk (the rest take
// exp32's side): each fork adds at most one end, and a pixel with more than a few near
// decisions is rare enough (TestWalkFollowsTheCPU) that the bound never decides a parity row.
const maxForks = 8

// walkEWA walks pixel (x, y) through ids (one tile's list, one segment, no blend cap) with
// raster_fwd.cu's float32 arithmetic for EWA: the exponent from a/2 and c/2, its cut, exp32 of
// each pixel's exponent, the alpha clamp and cut-off, and the termination at TERMINATE_T.
// It returns the counts (entries up to and including the last blended) the walk can end at
// when each decision within borderTol of its threshold may go either way: first the count of
// exp32's decisions, then the others, each once. One count means no decision came that close.
// Each product is converted explicitly, so that no compiler fuses it into a multiply-add.
func walkEWA(p *prep.ProjectedOf[float32], ids []int32, x, y int) []int {
	amin := float32(prep.AlphaMin)
	w := listWalk{entries: make([]walkEntry, len(ids))}
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
		if power > 0 {
			continue
		}
		alpha := float32(o * fmath.Exp(power))
		if alpha > float32(prep.AlphaMax) {
			alpha = float32(prep.AlphaMax)
		}
		w.entries[k] = walkEntry{
			blend:  power >= cut && alpha >= amin,
			either: nearThreshold(power, cut) || nearThreshold(alpha, amin),
			alpha:  alpha,
		}
	}
	w.from(0, 1, 0)
	return w.ends
}

// walkRay is walkEWA for the ray model, the pixel's unit world direction d: the CPU's alphas
// (raster.RayAlpha) are raster_fwd's with exp32, and only the exponential's decisions (alpha
// against its cut-off, and the termination) can differ; the ray model walks every list whole.
func walkRay(p *prep.ProjectedOf[float32], ids []int32, d [3]float32) []int {
	amin := float32(prep.AlphaMin)
	w := listWalk{entries: make([]walkEntry, len(ids))}
	for k, id := range ids {
		if alpha, ok := raster.RayAlpha(p, id, d); ok {
			w.entries[k] = walkEntry{blend: alpha >= amin, either: nearThreshold(alpha, amin), alpha: alpha}
		}
	}
	w.from(0, 1, 0)
	return w.ends
}

// walkEntry is one list entry of a pixel's walk: whether exp32's arithmetic blends it, whether
// that decision came within borderTol of its threshold, and its alpha. The zero entry is
// skipped for certain (no opacity to reach the cut-off, or an exponent no arithmetic blends).
type walkEntry struct {
	blend, either bool
	alpha         float32
}

// listWalk follows a walk's decisions, exp32's side of each fork first.
type listWalk struct {
	entries []walkEntry
	forks   int
	ends    []int
}

func nearThreshold(v, thr float32) bool {
	return math.Abs(float64(v)-float64(thr)) <= borderTol*math.Max(math.Abs(float64(thr)), 1e-30)
}

func (w *listWalk) end(count int) {
	for _, c := range w.ends {
		if c == count {
			return
		}
	}
	w.ends = append(w.ends, count)
}

// from walks entries k… with transmittance t, count entries blended so far.
func (w *listWalk) from(k int, t float32, count int) {
	for ; k < len(w.entries); k++ {
		e := w.entries[k]
		if e.either && w.forks < maxForks {
			w.forks++
			w.take(k, t, count, e.blend)
			w.take(k, t, count, !e.blend)
			return
		}
		if e.blend {
			w.take(k, t, count, true)
			return
		}
	}
	w.end(count)
}

// take decides entry k: skipped, or blended, and then the termination test (which may fork).
func (w *listWalk) take(k int, t float32, count int, blend bool) {
	if !blend {
		w.from(k+1, t, count)
		return
	}
	terminate := float32(raster.TerminateT)
	tn := float32(t * (1 - w.entries[k].alpha))
	stop := tn < terminate
	if nearThreshold(tn, terminate) && w.forks < maxForks {
		w.forks++
		if stop {
			w.end(count)
			w.from(k+1, tn, k+1)
		} else {
			w.from(k+1, tn, k+1)
			w.end(count)
		}
		return
	}
	if stop {
		w.end(count)
		return
	}
	w.from(k+1, tn, k+1)
}

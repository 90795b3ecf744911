package raster

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

var errNilOut = errors.New("raster: nil output")

// Backward turns dImage ([H*W*3], dL/dpixel) into the loss gradient with
// respect to every splat's prepared data (design.md §5 step 6), overwriting
// g. fwd must be Render's output for the same Frame. stats, when not nil, is
// resized and overwritten with this view's per-splat readouts.
//
// Per pixel, it walks the tile list back to front from the last contributor
// (fwd.Count), recomputing each alpha from the prepared data and recovering
// the transmittance in front of splat j from the one behind it,
// Tⱼ = Tⱼ₊₁/(1−αⱼ), starting from fwd.FinalT. With Bⱼ = Σ_{i>j} cᵢαᵢTᵢ +
// T_final·background (the colour behind j) the pixel is
// C = Σ_{i<j} cᵢαᵢTᵢ + cⱼαⱼTⱼ + Bⱼ, where every Tᵢ with i > j, and so Bⱼ,
// carries the factor (1−αⱼ); hence
//
//	∂C/∂cⱼ = αⱼTⱼ,   ∂C/∂αⱼ = cⱼTⱼ − Bⱼ/(1−αⱼ)
//
// (seed defect 2 divided by (1−αⱼ) once more). Where the 0.99 clamp is
// active alpha has no gradient to opacity or geometry.
//
// Gradients are summed per splat within a tile in pixel order, per worker in
// tile order, and over workers in worker order: bit-identical run to run for
// a given Frame.Workers.
func (r *Rasterizer[F]) Backward(f *Frame[F], fwd *Forward[F], dImage []F, g *prep.PrepGradsOf[F], stats *Stats[F]) error {
	pl, err := check(f)
	if err != nil {
		return err
	}
	if fwd == nil || g == nil {
		return errNilOut
	}
	if err := checkBackward(f, fwd, dImage); err != nil {
		return err
	}
	p := f.Proj
	n := p.N
	ray := p.Model == prep.Ray
	type group struct {
		name  string
		s     []F
		width int
	}
	need := []group{{"Color", g.Color, 3}, {"Opacity", g.Opacity, 1}}
	out := grads[F]{color: g.Color, opacity: g.Opacity}
	if ray {
		need = append(need, group{"RayU", g.RayU, 3}, group{"RayA", g.RayA, 9})
		out.rayU, out.rayA = g.RayU, g.RayA
	} else {
		need = append(need, group{"Mean2D", g.Mean2D, 2}, group{"Conic", g.Conic, 3})
		out.mean2D, out.conic = g.Mean2D, g.Conic
	}
	for _, c := range need {
		if len(c.s) != n*c.width {
			return fmt.Errorf("raster: gradient %s has %d values, want %d (N=%d × %d)", c.name, len(c.s), n*c.width, n, c.width)
		}
	}
	// The absolute sums go to g.Mean2DAbs when it is there (the projection's statistic reads
	// them), else to the stats; the stats get a copy when both want them.
	if !ray && g.Mean2DAbs != nil {
		if len(g.Mean2DAbs) != 2*n {
			return fmt.Errorf("raster: gradient Mean2DAbs has %d values, want %d (N=%d × 2)", len(g.Mean2DAbs), 2*n, n)
		}
		out.abs = g.Mean2DAbs
	}
	if stats != nil {
		stats.Hits = resize(stats.Hits, n)
		out.hits = stats.Hits
		if ray {
			stats.AbsMean2D = nil
		} else if out.abs == nil {
			stats.AbsMean2D = resize(stats.AbsMean2D, 2*n)
			out.abs = stats.AbsMean2D
		}
	}

	for len(r.workers) < pl.workers {
		r.workers = append(r.workers, &worker[F]{})
	}
	out.zero()
	for _, w := range r.workers[1:pl.workers] {
		w.grad.shapeLike(&out)
		w.grad.zero()
	}
	r.run(f, pl.workers, func(w *worker[F], wi int, t int) {
		dst := &out
		if wi > 0 {
			dst = &w.grad
		}
		if ray {
			w.backwardRay(f, &pl, t, fwd, dImage, dst)
		} else {
			w.backwardEWA(f, &pl, t, fwd, dImage, dst)
		}
	})
	r.reduce(&out, pl.workers)
	if stats != nil && !ray && g.Mean2DAbs != nil {
		stats.AbsMean2D = append(stats.AbsMean2D[:0], g.Mean2DAbs...)
	}
	return nil
}

// checkBackward validates the forward outputs and dImage, in particular
// every Count against its tile list's length (the backward indexes by it).
func checkBackward[F splat.Float](f *Frame[F], fwd *Forward[F], dImage []F) error {
	npx := f.Width * f.Height
	if len(fwd.FinalT) != npx || len(fwd.Count) != npx {
		return fmt.Errorf("raster: Forward has %d FinalT and %d Count values, want %d (%d×%d pixels)", len(fwd.FinalT), len(fwd.Count), npx, f.Width, f.Height)
	}
	if len(dImage) != 3*npx {
		return fmt.Errorf("raster: dImage has %d values, want %d (%d×%d pixels × 3)", len(dImage), 3*npx, f.Width, f.Height)
	}
	l := f.Lists
	for t := 0; t < l.TilesX*l.TilesY; t++ {
		x0, y0, x1, y1 := tileRect(l, f.Width, f.Height, t)
		n := l.Offsets[t+1] - l.Offsets[t]
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				if c := fwd.Count[y*f.Width+x]; c < 0 || c > n {
					return fmt.Errorf("raster: Forward.Count of pixel (%d, %d) is %d, want 0..%d (its tile's list length)", x, y, c, n)
				}
			}
		}
	}
	return nil
}

func (g *grads[F]) zero() {
	clear(g.color)
	clear(g.opacity)
	clear(g.mean2D)
	clear(g.conic)
	clear(g.rayU)
	clear(g.rayA)
	clear(g.hits)
	clear(g.abs)
}

// shapeLike sizes g's buffers like o's (nil where o's are nil).
func (g *grads[F]) shapeLike(o *grads[F]) {
	like := func(s, ref []F) []F {
		if ref == nil {
			return nil
		}
		return resize(s, len(ref))
	}
	g.color = like(g.color, o.color)
	g.opacity = like(g.opacity, o.opacity)
	g.mean2D = like(g.mean2D, o.mean2D)
	g.conic = like(g.conic, o.conic)
	g.rayU = like(g.rayU, o.rayU)
	g.rayA = like(g.rayA, o.rayA)
	g.abs = like(g.abs, o.abs)
	if o.hits == nil {
		g.hits = nil
	} else {
		g.hits = resize(g.hits, len(o.hits))
	}
}

// reduce adds workers 1.. partial sums into out, in worker order for every
// element (so the result does not depend on how the elements are split).
func (r *Rasterizer[F]) reduce(out *grads[F], workers int) {
	if workers <= 1 {
		return
	}
	parts := r.workers[1:workers]
	addRange := func(lo, hi int, dst []F, src func(w *worker[F]) []F) {
		for _, w := range parts {
			s := src(w)[lo:hi]
			d := dst[lo:hi]
			for i := range d {
				d[i] += s[i]
			}
		}
	}
	n := len(out.opacity)
	var wg sync.WaitGroup
	for c := 0; c < workers; c++ {
		lo, hi := n*c/workers, n*(c+1)/workers
		wg.Go(func() {
			addRange(3*lo, 3*hi, out.color, func(w *worker[F]) []F { return w.grad.color })
			addRange(lo, hi, out.opacity, func(w *worker[F]) []F { return w.grad.opacity })
			if out.mean2D != nil {
				addRange(2*lo, 2*hi, out.mean2D, func(w *worker[F]) []F { return w.grad.mean2D })
				addRange(3*lo, 3*hi, out.conic, func(w *worker[F]) []F { return w.grad.conic })
			}
			if out.rayU != nil {
				addRange(3*lo, 3*hi, out.rayU, func(w *worker[F]) []F { return w.grad.rayU })
				addRange(9*lo, 9*hi, out.rayA, func(w *worker[F]) []F { return w.grad.rayA })
			}
			if out.abs != nil {
				addRange(2*lo, 2*hi, out.abs, func(w *worker[F]) []F { return w.grad.abs })
			}
			if out.hits != nil {
				for _, w := range parts {
					s, d := w.grad.hits[lo:hi], out.hits[lo:hi]
					for i := range d {
						d[i] += s[i]
					}
				}
			}
		})
	}
	wg.Wait()
}

// startBackTile loads a tile's per-pixel backward state: T = FinalT, the
// colour behind = T·background, dL/dpixel, and the last contributor. It
// returns the longest walk of the tile.
func (w *worker[F]) startBackTile(f *Frame[F], x0, y0, x1, y1 int, fwd *Forward[F], dImage []F) int32 {
	tw := x1 - x0
	bg := f.Background
	var longest int32
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			i := (y-y0)*tw + x - x0
			o := y*f.Width + x
			t := fwd.FinalT[o]
			w.t[i] = t
			w.cr[i], w.cg[i], w.cb[i] = t*bg[0], t*bg[1], t*bg[2]
			w.gr[i], w.gg[i], w.gb[i] = dImage[3*o], dImage[3*o+1], dImage[3*o+2]
			c := fwd.Count[o]
			w.cnt[i] = c
			longest = max(longest, c)
		}
	}
	return longest
}

// unblend undoes splat j (colour col, the given alpha) at tile pixel i: it
// restores Tⱼ, adds j's colour to the colour behind, and returns ∂L/∂αⱼ
// and αⱼTⱼ (= ∂C/∂cⱼ).
func (w *worker[F]) unblend(i int, alpha F, col *[3]F) (dLdA, wt F) {
	inv := 1 / (1 - alpha)
	tj := w.t[i] * inv
	wt = alpha * tj
	gr, gg, gb := w.gr[i], w.gg[i], w.gb[i]
	dLdA = gr*(col[0]*tj-w.cr[i]*inv) + gg*(col[1]*tj-w.cg[i]*inv) + gb*(col[2]*tj-w.cb[i]*inv)
	w.cr[i] += col[0] * wt
	w.cg[i] += col[1] * wt
	w.cb[i] += col[2] * wt
	w.t[i] = tj
	return dLdA, wt
}

func (w *worker[F]) backwardEWA(f *Frame[F], pl *plan[F], tile int, fwd *Forward[F], dImage []F, dst *grads[F]) {
	x0, y0, x1, y1 := tileRect(f.Lists, f.Width, f.Height, tile)
	tw := x1 - x0
	np := tw * (y1 - y0)
	longest := w.startBackTile(f, x0, y0, x1, y1, fwd, dImage)
	cnt := w.cnt[:np]
	gr, gg, gb := w.gr[:np], w.gg[:np], w.gb[:np]
	amin := pl.amin
	wantHits, wantAbs := dst.hits != nil, dst.abs != nil
	ids := f.Lists.IDs[f.Lists.Offsets[tile]:f.Lists.Offsets[tile+1]]
	for k := int(longest) - 1; k >= 0; k-- {
		id := ids[k]
		s, ok := loadEWA(f.Proj, id, amin)
		if !ok {
			continue
		}
		var dr, dg, db, dop, dmx, dmy, da, dbb, dc, ax, ay F
		var hits int32
		k32 := int32(k)
		ylo, yhi := s.crop.rows(y0, y1)
		for y := ylo; y < yhi; y++ {
			xlo, xhi := s.crop.span(y, x0, x1)
			if xlo >= xhi {
				continue
			}
			dy, hb, hc := ewaRow(&s, y)
			row := (y-y0)*tw - x0
			dx, gauss, r := ewaRowStart(&s, hb, hc, xlo)
			for x := xlo; x < xhi; x, dx, gauss, r = x+1, dx+1, gauss*r, r*s.ka {
				i := row + x
				if k32 >= cnt[i] {
					continue
				}
				alpha, clamped := alphaOfG(s.o, gauss)
				if !(alpha >= amin) {
					continue
				}
				dLdA, wt := w.unblend(i, alpha, &s.col)
				dr += gr[i] * wt
				dg += gg[i] * wt
				db += gb[i] * wt
				hits++
				if clamped {
					continue
				}
				dop += dLdA * gauss
				// ∂alpha/∂power = alpha; d = pixel − mean, so ∂power/∂mean = C·d.
				dp := dLdA * alpha
				gx := dp * (s.a*dx + s.b*dy)
				gy := dp * (s.b*dx + s.c*dy)
				dmx += gx
				dmy += gy
				da -= dp * dx * dx / 2
				dbb -= dp * dx * dy
				dc -= dp * dy * dy / 2
				if wantAbs {
					ax += abs(gx)
					ay += abs(gy)
				}
			}
		}
		if hits == 0 {
			continue
		}
		j := int(id)
		dst.color[3*j] += dr
		dst.color[3*j+1] += dg
		dst.color[3*j+2] += db
		dst.opacity[j] += dop
		dst.mean2D[2*j] += dmx
		dst.mean2D[2*j+1] += dmy
		dst.conic[3*j] += da
		dst.conic[3*j+1] += dbb
		dst.conic[3*j+2] += dc
		if wantHits {
			dst.hits[j] += hits
		}
		if wantAbs {
			dst.abs[2*j] += ax
			dst.abs[2*j+1] += ay
		}
	}
}

func (w *worker[F]) backwardRay(f *Frame[F], pl *plan[F], tile int, fwd *Forward[F], dImage []F, dst *grads[F]) {
	x0, y0, x1, y1 := tileRect(f.Lists, f.Width, f.Height, tile)
	tw := x1 - x0
	np := tw * (y1 - y0)
	longest := w.startBackTile(f, x0, y0, x1, y1, fwd, dImage)
	w.loadRays(f, x0, y0, x1, y1)
	cnt := w.cnt[:np]
	gr, gg, gb := w.gr[:np], w.gg[:np], w.gb[:np]
	rx, ry, rz := w.rx[:np], w.ry[:np], w.rz[:np]
	amin := pl.amin
	wantStats := dst.hits != nil
	ids := f.Lists.IDs[f.Lists.Offsets[tile]:f.Lists.Offsets[tile+1]]
	for k := int(longest) - 1; k >= 0; k-- {
		id := ids[k]
		s, ok := loadRay(f.Proj, id, amin, pl.crop)
		if !ok {
			continue
		}
		var dr, dg, db, dop F
		var du [3]F
		var dA [9]F
		var hits int32
		k32 := int32(k)
		ylo, yhi := s.crop.rows(y0, y1)
		for y := ylo; y < yhi; y++ {
			xlo, xhi := s.crop.span(y, x0, x1)
			row := (y-y0)*tw - x0
			for x := xlo; x < xhi; x++ {
				i := row + x
				if k32 >= cnt[i] {
					continue
				}
				dx, dy, dz := rx[i], ry[i], rz[i]
				w0, w1, w2, sc, ok := rayPerp(&s, dx, dy, dz)
				if !ok {
					continue
				}
				alpha, gauss, clamped := alphaOf(s.o, rayPower(w0, w1, w2))
				if !(alpha >= amin) {
					continue
				}
				dLdA, wt := w.unblend(i, alpha, &s.col)
				dr += gr[i] * wt
				dg += gg[i] * wt
				db += gb[i] * wt
				hits++
				if clamped {
					continue
				}
				dop += dLdA * gauss
				// power = −½‖w‖² with w = u − sc·v at the optimal sc, so
				// ∂power/∂u = −w and ∂power/∂v = sc·w; v = A·d.
				dp := dLdA * alpha
				du[0] -= dp * w0
				du[1] -= dp * w1
				du[2] -= dp * w2
				q := dp * sc
				v0, v1, v2 := q*w0, q*w1, q*w2
				dA[0] += v0 * dx
				dA[1] += v0 * dy
				dA[2] += v0 * dz
				dA[3] += v1 * dx
				dA[4] += v1 * dy
				dA[5] += v1 * dz
				dA[6] += v2 * dx
				dA[7] += v2 * dy
				dA[8] += v2 * dz
			}
		}
		if hits == 0 {
			continue
		}
		j := int(id)
		dst.color[3*j] += dr
		dst.color[3*j+1] += dg
		dst.color[3*j+2] += db
		dst.opacity[j] += dop
		for c := 0; c < 3; c++ {
			dst.rayU[3*j+c] += du[c]
		}
		for c := 0; c < 9; c++ {
			dst.rayA[9*j+c] += dA[c]
		}
		if wantStats {
			dst.hits[j] += hits
		}
	}
}

func abs[F splat.Float](v F) F {
	if v < 0 {
		return -v
	}
	return v
}

package raster

import "github.com/rlxsplat/rlxsplat/internal/prep"

// SegmentEntries is how many entries of a tile's list the GPU forward walks in one block
// (raster.h's SEGMENT): a list of more is walked a segment at a time from T = 1 and the
// segments folded in order, and Render folds at the same entries, so that both engines
// compute every pixel alike.
const SegmentEntries = 512

// Render blends every tile's splats front to back (design.md §5 step 4) into
// out, resizing out's slices as needed. Per pixel (centre (x+½, y+½)) and per
// list entry: a splat whose alpha is below AlphaMin is skipped; one whose
// blending would take the transmittance T below TerminateT is not blended
// and the pixel is finished; otherwise it adds colour·alpha·T and T becomes
// T·(1−alpha). The pixel's value is Σ cᵢαᵢTᵢ + T·Background.
//
// Unless MaxSteps caps the blends, an EWA list is walked in segments of SegmentEntries entries
// (the ray model walks every list whole, as its GPU forward does: raster.h says why):
// each from T = 1 and colour 0 with the rule above, then folded into the walk's C ← C + T·c,
// T ← T·t, the walk ending at a segment that finished a pixel or after which T < TerminateT.
// A list of one segment is the plain walk to the bit; a longer one differs only where T
// crosses TerminateT inside a segment, which walks on, blending splats of weight below 1e-4,
// until its own T falls that low.
//
// The loops run splat-outer, pixel-inner over one tile at a time, so a
// splat's data is loaded once per tile and the tile's pixel state stays in
// cache; each splat visits only the pixels of its footprint: for EWA the
// ellipse where its alpha can reach AlphaMin, computed here from the conic;
// for the ray model, when AlphaMin ≥ prep.AlphaMin, prep's footprint
// (BoundCenter, BoundQ: where alpha can reach prep.AlphaMin — the same
// footprint the binning trusts; a zero BoundQ means "no footprint, visit the
// whole tile").
func (r *Rasterizer[F]) Render(f *Frame[F], out *Forward[F]) error {
	pl, err := check(f)
	if err != nil {
		return err
	}
	if out == nil {
		return errNilOut
	}
	npx := f.Width * f.Height
	out.Image = resize(out.Image, npx*3)
	out.FinalT = resize(out.FinalT, npx)
	out.Count = resize(out.Count, npx)
	ray := f.Proj.Model == prep.Ray
	r.run(f, pl.workers, func(w *worker[F], _ int, t int) {
		if ray {
			w.renderRay(f, &pl, t, out)
		} else {
			w.renderEWA(f, &pl, t, out)
		}
	})
	return nil
}

// startTile resets the per-pixel forward state of a tile with np pixels.
func (w *worker[F]) startTile(np int) {
	t, cr, cg, cb := w.t[:np], w.cr[:np], w.cg[:np], w.cb[:np]
	st, sr, sg, sb, fin := w.st[:np], w.sr[:np], w.sg[:np], w.sb[:np], w.fin[:np]
	cnt, hits, done := w.cnt[:np], w.hits[:np], w.done[:np]
	for i := range t {
		t[i], st[i] = 1, 1
		cr[i], cg[i], cb[i] = 0, 0, 0
		sr[i], sg[i], sb[i] = 0, 0, 0
		cnt[i], hits[i] = 0, 0
		done[i], fin[i] = false, false
	}
}

// fold ends a segment for the tile's np pixels whose walk goes on: its colour and T join the
// walk's (C ← C + T·c, T ← T·t, as raster_fwd_join), and the next segment starts from T = 1;
// a pixel that finished in the segment, or whose walk's T is now below TerminateT, is over.
// It returns how many pixels it finished that blend had not.
func (w *worker[F]) fold(np int) int {
	t, cr, cg, cb := w.t[:np], w.cr[:np], w.cg[:np], w.cb[:np]
	st, sr, sg, sb, fin, done := w.st[:np], w.sr[:np], w.sg[:np], w.sb[:np], w.fin[:np], w.done[:np]
	ended := 0
	for i := range t {
		if fin[i] {
			continue
		}
		sr[i] += st[i] * cr[i]
		sg[i] += st[i] * cg[i]
		sb[i] += st[i] * cb[i]
		st[i] *= t[i]
		t[i], cr[i], cg[i], cb[i] = 1, 0, 0, 0
		if done[i] || st[i] < TerminateT {
			fin[i] = true
			if !done[i] {
				done[i] = true
				ended++
			}
		}
	}
	return ended
}

// blend applies a splat with the given alpha to tile pixel i, the k-th entry
// of the tile's list, and reports whether the pixel is now finished.
func (w *worker[F]) blend(i int, alpha F, col *[3]F, k int, maxHits int32) bool {
	t := w.t[i]
	tn := t * (1 - alpha)
	if tn < TerminateT {
		w.done[i] = true
		return true
	}
	wt := alpha * t
	w.cr[i] += wt * col[0]
	w.cg[i] += wt * col[1]
	w.cb[i] += wt * col[2]
	w.t[i] = tn
	w.cnt[i] = int32(k + 1)
	w.hits[i]++
	if w.hits[i] == maxHits {
		w.done[i] = true
		return true
	}
	return false
}

// finishTile folds the tile's last segment and writes its pixels to out.
func (w *worker[F]) finishTile(f *Frame[F], x0, y0, x1, y1 int, out *Forward[F]) {
	tw := x1 - x0
	w.fold(tw * (y1 - y0))
	bg := f.Background
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			i := (y-y0)*tw + x - x0
			o := y*f.Width + x
			t := w.st[i]
			out.Image[3*o] = w.sr[i] + t*bg[0]
			out.Image[3*o+1] = w.sg[i] + t*bg[1]
			out.Image[3*o+2] = w.sb[i] + t*bg[2]
			out.FinalT[o] = t
			out.Count[o] = w.cnt[i]
		}
	}
}

func (w *worker[F]) renderEWA(f *Frame[F], pl *plan[F], tile int, out *Forward[F]) {
	x0, y0, x1, y1 := tileRect(f.Lists, f.Width, f.Height, tile)
	tw := x1 - x0
	np := tw * (y1 - y0)
	w.startTile(np)
	alive := np
	done := w.done[:np]
	amin := pl.amin
	ids := f.Lists.IDs[f.Lists.Offsets[tile]:f.Lists.Offsets[tile+1]]
	segs := pl.cap == 0 && len(ids) > SegmentEntries
	for k, id := range ids {
		if segs && k > 0 && k%SegmentEntries == 0 {
			if alive -= w.fold(np); alive == 0 {
				break
			}
		}
		s, ok := loadEWA(f.Proj, id, amin)
		if !ok {
			continue
		}
		ylo, yhi := s.crop.rows(y0, y1)
		for y := ylo; y < yhi; y++ {
			xlo, xhi := s.crop.span(y, x0, x1)
			if xlo >= xhi {
				continue
			}
			_, hb, hc := ewaRow(&s, y)
			row := (y-y0)*tw - x0
			_, g, r := ewaRowStart(&s, hb, hc, xlo)
			for x := xlo; x < xhi; x, g, r = x+1, g*r, r*s.ka {
				i := row + x
				if done[i] {
					continue
				}
				alpha, _ := alphaOfG(s.o, g)
				if !(alpha >= amin) {
					continue
				}
				if w.blend(i, alpha, &s.col, k, pl.cap) {
					alive--
				}
			}
		}
		if alive == 0 {
			break
		}
	}
	w.finishTile(f, x0, y0, x1, y1, out)
}

// loadRays gathers the tile's ray directions into the worker's scratch.
func (w *worker[F]) loadRays(f *Frame[F], x0, y0, x1, y1 int) {
	tw := x1 - x0
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			i := (y-y0)*tw + x - x0
			o := 3 * (y*f.Width + x)
			w.rx[i], w.ry[i], w.rz[i] = f.Rays[o], f.Rays[o+1], f.Rays[o+2]
		}
	}
}

func (w *worker[F]) renderRay(f *Frame[F], pl *plan[F], tile int, out *Forward[F]) {
	x0, y0, x1, y1 := tileRect(f.Lists, f.Width, f.Height, tile)
	tw := x1 - x0
	np := tw * (y1 - y0)
	w.startTile(np)
	w.loadRays(f, x0, y0, x1, y1)
	alive := np
	done := w.done[:np]
	rx, ry, rz := w.rx[:np], w.ry[:np], w.rz[:np]
	amin := pl.amin
	ids := f.Lists.IDs[f.Lists.Offsets[tile]:f.Lists.Offsets[tile+1]]
	// The ray model walks every list whole (raster.h, segments): no fold before finishTile's.
	for k, id := range ids {
		s, ok := loadRay(f.Proj, id, amin, pl.crop)
		if !ok {
			continue
		}
		ylo, yhi := s.crop.rows(y0, y1)
		for y := ylo; y < yhi; y++ {
			xlo, xhi := s.crop.span(y, x0, x1)
			row := (y-y0)*tw - x0
			for x := xlo; x < xhi; x++ {
				i := row + x
				if done[i] {
					continue
				}
				w0, w1, w2, _, ok := rayPerp(&s, rx[i], ry[i], rz[i])
				if !ok {
					continue
				}
				alpha, _, _ := alphaOf(s.o, rayPower(w0, w1, w2))
				if !(alpha >= amin) {
					continue
				}
				if w.blend(i, alpha, &s.col, k, pl.cap) {
					alive--
				}
			}
		}
		if alive == 0 {
			break
		}
	}
	w.finishTile(f, x0, y0, x1, y1, out)
}

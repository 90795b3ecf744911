package raster

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// TerminateT is the transmittance below which a pixel is finished: a splat
// whose blending would take T·(1−α) below it is not blended, and the pixel
// stops there (the original 3DGS rule, design.md §5).
const TerminateT = 1e-4

// Frame is one view to rasterize: the image size, the prepared splats, their
// sorted tile lists and the rasterization settings. Render and Backward only
// read it.
type Frame[F splat.Float] struct {
	Width, Height int
	// Background is the colour behind all splats: out = Σ cᵢαᵢTᵢ + T·Background.
	Background [3]F
	// Proj holds the prepared data of every splat for this view; its Model
	// selects the alpha function.
	Proj *prep.ProjectedOf[F]
	// Lists are the tiles' splat ids, front to back (TileSize, TilesX, TilesY,
	// IDs and Offsets are read; Keys are not).
	Lists *prep.TileLists
	// Rays is [H*W*3]: the unit world direction of each pixel's ray, row-major
	// (pixel (x, y) at index y*Width+x). Ray model only; ignored for EWA.
	Rays []F
	// MaxSplatSteps caps the number of splats blended into one pixel (the
	// seed's max_splat_steps); after that many the pixel is finished. 0 means
	// unlimited. Forward and backward honour it alike because the backward
	// starts from the forward's last contributor.
	MaxSplatSteps int
	// AlphaMin is the alpha below which a splat is skipped at a pixel; 0 means
	// prep.AlphaMin. The finite-difference checks pass a tiny value so that the
	// cutoff does not make the image jump.
	AlphaMin F
	// Workers is the number of goroutines; values below 1 mean 1 (not
	// GOMAXPROCS, so that an unset value gives the same gradients on every
	// machine). Gradients are bit-identical run to run for a given Workers;
	// the forward does not depend on it at all.
	Workers int
}

// Forward holds the forward pass's outputs. Render resizes the slices as
// needed, so a Forward can be reused across calls.
type Forward[F splat.Float] struct {
	Image  []F     // [H*W*3] RGB, row-major
	FinalT []F     // [H*W] transmittance left after the last blended splat
	Count  []int32 // [H*W] entries of the pixel's tile list walked up to and including its last contributor
}

// Stats holds optional per-splat readouts of the backward pass. Backward
// resizes and overwrites them (they describe one view).
type Stats[F splat.Float] struct {
	// Hits is [N]: the number of pixels the splat was blended into.
	Hits []int32
	// AbsMean2D is [N,2], EWA model only (nil for Ray): Σ over pixels of the
	// absolute value of each pixel's contribution to ∂L/∂Mean2D, per
	// component — the "absgrad" densification statistic of AbsGS and gsplat,
	// which cannot be recovered from the summed gradient.
	AbsMean2D []F
}

// Rasterizer owns the scratch memory of Render and Backward (per-worker tile
// state and partial gradient sums), so that repeated calls reuse it. The
// zero value is ready to use. A Rasterizer is not
// safe for concurrent use; use one per goroutine.
type Rasterizer[F splat.Float] struct {
	workers []*worker[F]
}

// Render runs the forward pass with a temporary Rasterizer.
func Render[F splat.Float](f *Frame[F], out *Forward[F]) error {
	var r Rasterizer[F]
	return r.Render(f, out)
}

// Backward runs the backward pass with a temporary Rasterizer.
func Backward[F splat.Float](f *Frame[F], fwd *Forward[F], dImage []F, g *prep.PrepGradsOf[F], stats *Stats[F]) error {
	var r Rasterizer[F]
	return r.Backward(f, fwd, dImage, g, stats)
}

// plan is a validated Frame's resolved settings.
type plan[F splat.Float] struct {
	amin    F
	cap     int32 // 0 = unlimited
	workers int
	// crop is set when the Ray model may skip pixels outside a splat's
	// footprint (BoundCenter/BoundQ): prep defines that footprint as where
	// alpha can reach prep.AlphaMin, so it is only valid for AlphaMin at or
	// above that. The binning already trusts the same footprint.
	crop bool
}

// check validates everything the inner loops index, so that bad input (for
// example a broken tile list) gives an error instead of a panic.
func check[F splat.Float](f *Frame[F]) (plan[F], error) {
	var pl plan[F]
	if f == nil {
		return pl, errors.New("raster: nil Frame")
	}
	if f.Width <= 0 || f.Height <= 0 {
		return pl, fmt.Errorf("raster: image size %d×%d, want both > 0", f.Width, f.Height)
	}
	p := f.Proj
	if p == nil {
		return pl, errors.New("raster: Frame.Proj is nil")
	}
	if p.Model != prep.EWA && p.Model != prep.Ray {
		return pl, fmt.Errorf("raster: Proj.Model %d is not a known render model", int(p.Model))
	}
	n := p.N
	if n < 0 {
		return pl, fmt.Errorf("raster: Proj.N = %d, want ≥ 0", n)
	}
	type field struct {
		name  string
		have  int
		width int
	}
	fields := []field{
		{"Valid", len(p.Valid), 1},
		{"Opacity", len(p.Opacity), 1},
		{"Color", len(p.Color), 3},
	}
	if p.Model == prep.EWA {
		fields = append(fields, field{"Mean2D", len(p.Mean2D), 2}, field{"Conic", len(p.Conic), 3})
	} else {
		fields = append(fields, field{"RayU", len(p.RayU), 3}, field{"RayA", len(p.RayA), 9})
	}
	for _, fl := range fields {
		if fl.have < n*fl.width {
			return pl, fmt.Errorf("raster: Proj.%s has %d values, want %d (N=%d × %d)", fl.name, fl.have, n*fl.width, n, fl.width)
		}
	}

	amin := f.AlphaMin
	if amin == 0 {
		amin = F(prep.AlphaMin)
	}
	if !(amin > 0 && amin <= F(prep.AlphaMax)) {
		return pl, fmt.Errorf("raster: AlphaMin %v out of range (0, %v]", f.AlphaMin, prep.AlphaMax)
	}
	pl.amin = amin
	if f.MaxSplatSteps < 0 || f.MaxSplatSteps > math.MaxInt32 {
		return pl, fmt.Errorf("raster: MaxSplatSteps %d, want ≥ 0 (0 = unlimited)", f.MaxSplatSteps)
	}
	pl.cap = int32(f.MaxSplatSteps)

	if p.Model == prep.Ray {
		if want := f.Width * f.Height * 3; len(f.Rays) != want {
			return pl, fmt.Errorf("raster: Rays has %d values, want %d (%d×%d pixels × 3) for the ray model", len(f.Rays), want, f.Width, f.Height)
		}
		if amin >= F(prep.AlphaMin) && len(p.BoundCenter) >= 2*n && len(p.BoundQ) >= 3*n {
			pl.crop = true
		}
	}

	l := f.Lists
	if l == nil {
		return pl, errors.New("raster: Frame.Lists is nil")
	}
	if l.TileSize <= 0 {
		return pl, fmt.Errorf("raster: Lists.TileSize %d, want > 0", l.TileSize)
	}
	tx := (f.Width + l.TileSize - 1) / l.TileSize
	ty := (f.Height + l.TileSize - 1) / l.TileSize
	if l.TilesX != tx || l.TilesY != ty {
		return pl, fmt.Errorf("raster: Lists has %d×%d tiles, want %d×%d for a %d×%d image with tile size %d", l.TilesX, l.TilesY, tx, ty, f.Width, f.Height, l.TileSize)
	}
	tiles := tx * ty
	if len(l.Offsets) != tiles+1 {
		return pl, fmt.Errorf("raster: Lists.Offsets has %d entries, want %d (tiles+1)", len(l.Offsets), tiles+1)
	}
	if l.Offsets[0] != 0 {
		return pl, fmt.Errorf("raster: Lists.Offsets[0] = %d, want 0", l.Offsets[0])
	}
	for t := 0; t < tiles; t++ {
		if l.Offsets[t+1] < l.Offsets[t] {
			return pl, fmt.Errorf("raster: Lists.Offsets[%d] = %d is below Offsets[%d] = %d", t+1, l.Offsets[t+1], t, l.Offsets[t])
		}
	}
	if int(l.Offsets[tiles]) > len(l.IDs) {
		return pl, fmt.Errorf("raster: Lists.Offsets[%d] = %d is past the %d IDs", tiles, l.Offsets[tiles], len(l.IDs))
	}
	for i, id := range l.IDs[:l.Offsets[tiles]] {
		if id < 0 || int(id) >= n {
			return pl, fmt.Errorf("raster: Lists.IDs[%d] = %d is not a splat id (N=%d)", i, id, n)
		}
		if !p.Valid[id] {
			return pl, fmt.Errorf("raster: Lists.IDs[%d] names splat %d, which is not valid", i, id)
		}
	}

	pl.workers = max(1, min(f.Workers, tiles))
	return pl, nil
}

// worker is one goroutine's scratch: per-pixel state of the tile in hand
// (structure of arrays, one entry per pixel of a tile) and, for the backward, its partial
// gradient sums.
type worker[F splat.Float] struct {
	t, cr, cg, cb []F // transmittance and accumulated colour (forward: the segment's), or colour behind (backward)
	gr, gg, gb    []F // backward: dL/dpixel
	// forward: the walk's transmittance and colour in front of the current segment, and
	// whether the pixel's walk is over (folded, see fold).
	st, sr, sg, sb []F
	fin            []bool
	rx, ry, rz     []F // ray model: the tile's ray directions
	cnt, hits      []int32
	done           []bool

	grad grads[F] // partial sums; unused by worker 0, which writes the output directly
}

// grads is one set of per-splat gradient accumulators.
type grads[F splat.Float] struct {
	color, opacity, mean2D, conic, rayU, rayA []F
	hits                                      []int32 // nil unless stats are wanted
	abs                                       []F     // nil unless stats are wanted (EWA)
}

func (w *worker[F]) ensure(px int) {
	if len(w.t) >= px {
		return
	}
	w.t, w.cr, w.cg, w.cb = make([]F, px), make([]F, px), make([]F, px), make([]F, px)
	w.gr, w.gg, w.gb = make([]F, px), make([]F, px), make([]F, px)
	w.st, w.sr, w.sg, w.sb = make([]F, px), make([]F, px), make([]F, px), make([]F, px)
	w.fin = make([]bool, px)
	w.rx, w.ry, w.rz = make([]F, px), make([]F, px), make([]F, px)
	w.cnt, w.hits = make([]int32, px), make([]int32, px)
	w.done = make([]bool, px)
}

// run calls fn(w, tile) for every tile, tile t on worker t % workers, each
// worker taking its tiles in increasing order.
func (r *Rasterizer[F]) run(f *Frame[F], workers int, fn func(w *worker[F], wi, tile int)) {
	// The largest tile clipped to the image (not TileSize², which a bad
	// TileSize could make huge).
	px := min(f.Lists.TileSize, f.Width) * min(f.Lists.TileSize, f.Height)
	for len(r.workers) < workers {
		r.workers = append(r.workers, &worker[F]{})
	}
	for _, w := range r.workers[:workers] {
		w.ensure(px)
	}
	tiles := f.Lists.TilesX * f.Lists.TilesY
	if workers == 1 {
		for t := 0; t < tiles; t++ {
			fn(r.workers[0], 0, t)
		}
		return
	}
	var wg sync.WaitGroup
	for wi := 0; wi < workers; wi++ {
		w := r.workers[wi]
		wg.Go(func() {
			for t := wi; t < tiles; t += workers {
				fn(w, wi, t)
			}
		})
	}
	wg.Wait()
}

// resize returns s with length n, reusing its memory when it can. The
// contents are unspecified.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// tileRect is the pixel rectangle [x0,x1)×[y0,y1) of tile t, clipped to
// the image.
func tileRect(l *prep.TileLists, w, h, t int) (x0, y0, x1, y1 int) {
	x0 = (t % l.TilesX) * l.TileSize
	y0 = (t / l.TilesX) * l.TileSize
	return x0, y0, min(x0+l.TileSize, w), min(y0+l.TileSize, h)
}

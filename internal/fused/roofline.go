package fused

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// The traffic and work model of the roofline (`rlxsplat bench --roofline`): for every stage of
// a training step, the fewest bytes it must move through device memory and the fewest
// floating-point operations it must do, from the step's size (and, for the rasterizer, how far
// it walked its lists). It is a lower bound, not a simulation; a stage's measured time against
// it says how far the stage is from each roof.
//
// What counts as traffic. The buffers between stages are this pipeline's (the packed
// parameters, project's per-splat outputs, the 32-bit tile keys and ids of the tile lists,
// the per-pixel image, final transmittance and count, raster_fwd's chunk states, ...): a stage
// must read what it consumes
// of them and write what later stages consume, and the model counts each such datum once, as
// if every re-read hit the cache. Scratch a stage writes and reads back itself is not counted,
// because a fused kernel could keep it on chip: bin's counts and their scan, sort's histograms
// and the reads ranges makes of the sorted keys, the loss's filtered SSIM maps, the zeroing of
// raster_bwd's gradient accumulators. Bytes are useful bytes (a 12-byte read that the memory
// system serves as a 32-byte sector counts 12).
//
// What counts as work. Floating-point operations of the cheapest evaluation of the stage's
// maths: a fused multiply-add is 2, an add, multiply, division, square root or transcendental
// 1, comparisons and integer work nothing (so sort has none). The per-splat counts are
// rounded tallies of the expressions in shaders/*.cu with symmetric products counted once;
// they are estimates to about ±25%, which is all a roofline needs.

// Workload is the size of one training step as the model sees it.
type Workload struct {
	Gaussians       int  // N: splats in the scene
	Visible         int  // splats valid for the view (engine.StepResult.Visible)
	Entries         int  // tile-list entries (engine.StepResult.Entries)
	Width, Height   int  // the view in pixels
	TileSize        int  // tile edge in pixels
	SHDegree        int  // SH degree in use, 0..3
	Ray             bool // the ray render model (else EWA)
	ConicBin        bool // bin tests each tile against the footprint (gpu-conic); else it keeps the whole box
	SSIM            bool // the loss has an SSIM term
	AccumulateStats bool // project_bwd updates the densification statistics
	AdamVisibleOnly bool // Adam updates only the visible splats
	AdamVisibleSH   bool // Adam updates the SH rest (45 values a splat) of the visible splats only

	// Walk is how far the rasterizer had to walk the lists (Engine.RasterWalk). The zero
	// value means not measured: the model then takes every entry, every pixel of its tile
	// (each tile's list taken as E/T entries long for the chunk boundaries) and min(V, E)
	// splats, which is no lower bound when pixels saturate before the end of their lists
	// (the usual case on real views).
	Walk Walk
}

// Pixels is Width·Height.
func (w Workload) Pixels() int { return w.Width * w.Height }

// Tiles is the number of tiles of the view.
func (w Workload) Tiles() int {
	return ((w.Width + w.TileSize - 1) / w.TileSize) * ((w.Height + w.TileSize - 1) / w.TileSize)
}

// SortPasses is the number of 8-bit radix passes over the entries' tile keys, as sort.go
// runs them: enough for the largest tile id, at least one. (bin sorts the splats' 32-bit
// depths first, depthSortPasses passes over the visible splats.)
func (w Workload) SortPasses() int { return tileSortPasses(w.Tiles()) }

// StageCost is the least one stage must do.
type StageCost struct {
	Stage string
	Bytes int64 // device-memory bytes read plus written
	Flops int64 // floating-point operations
}

const word = 4 // bytes of a float32, i32 or u32

// Words per splat of the pipeline's buffers (shaders/common.h, project.cu, raster.h).
const (
	geomWords      = 11 // packed parameters other than SH: mean 3, log-scale 3, quaternion 4, opacity logit 1
	keyIDWords     = 2  // a tile-list entry: u32 tile key and u32 splat id; also a depth-sort element
	footprintWords = 10 // bin's input: boundCenter 2, boundQ 3, rect 4, depth 1
	rasterEWA      = 9  // staged per splat by the rasterizer: opacity 1, colour 3, mean2d 2, conic 3
	rasterRay      = 16 // opacity 1, colour 3, rayU 3, rayA 9
	pixelOutWords  = 5  // raster_fwd per pixel: image 3, final T 1, count 1
	pixelBwdWords  = 5  // raster_bwd per pixel: final T 1, count 1, image gradient 3
	chunkWords     = 4  // a chunk state per pixel and boundary: T 1, front colour 3
	lossWords      = 9  // loss per pixel: image 3, target 3, image gradient 3
	statWords      = 3  // statAccum, statCount, statMaxRadius
)

// projectOut is project's output words per visible splat beyond the footprint bin reads:
// EWA opacity 1, colour 3, mean2d 2, conic 3, radius 1; ray the same with rayU 3 and rayA 9
// in place of the conic.
func projectOut(ray bool) int64 {
	if ray {
		return 1 + 3 + 2 + 3 + 9 + 1
	}
	return 1 + 3 + 2 + 3 + 1
}

// Operation tallies (see the package comment above for the rules).
const (
	// project: every splat's camera-space mean (R·μ + T) decides whether it is in front.
	flopsCull = 18
	// project, EWA, per visible splat: quaternion to rotation ≈ 40, scales and opacity
	// (exp, sigmoid) ≈ 6, M = R·S 9, Σ = M·Mᵀ (6 entries) 30, W·Σ·Wᵀ 90, Jacobian 10,
	// J·Σc·Jᵀ 45, determinant, conic, footprint and radius ≈ 25, pixel centre 6.
	flopsProjectEWA = 260
	// project, ray model: A = diag(1/σ)·Rᵀ and u = A·(c − μ) ≈ 30 on top of the rotation, and
	// the silhouette quadric (K, K·μ, the 3×3 dual conic, its 2×2 inverse) ≈ 230.
	flopsProjectRay = 300
	// project_bwd per visible splat: the chain rule back through the forward's geometry,
	// about 2.5 times the forward's operations.
	flopsProjectBwdEWA = 650
	flopsProjectBwdRay = 750
	// tile_hit (bin.cu): per tested tile, four edges of the tile's pixel-centre box, each
	// 14 operations (the closest point on the edge and the quadratic form there).
	flopsTileTest = 56
	// Per (tile-list entry, pixel of its tile): the exponent the skip test needs. EWA
	// −½(a·dx² + c·dy²) − b·dx·dy with a/2, c/2 staged per splat: dx, dy 2, then 1 multiply,
	// 1 FMA, 1 multiply, 1 multiply, 1 FMA = 9. Ray: v = A·d 15, u·v 5, v·v 5, the
	// closest-approach test 4 = 29. A pixel that blends the splat does more (alpha, exp,
	// colour, and in the backward the gradient terms), but how many pairs blend is not
	// known here, so none is counted.
	flopsPairEWA = 9
	flopsPairRay = 29
	// loss per pixel: L1 and squared error per value (difference, absolute value and sum,
	// square and sum, gradient) 6 × 3 = 18.
	flopsLossPointwise = 18
	// SSIM per pixel: the five quantities x, y, x², y², xy of 3 channels (9 products), the
	// separable 11-tap window over those 15 maps (15 × 2 passes × 11 taps × 2 = 660), the
	// SSIM map and its partials (≈ 45 per channel, 135), the window over the 9 partial maps
	// (9 × 2 × 11 × 2 = 396) and the gradient's combination (8 per channel, 24).
	flopsLossSSIM = 9 + 660 + 135 + 396 + 24
	// Adam per element: m (3), v (4), the update −s·m/(√v·k + ε) (5), the new value (1).
	flopsAdam = 13
)

// shFlops is the SH colour of one splat: the view direction (12), the basis (about 3 per
// coefficient) and three channels of (d+1)² multiply-adds.
func shFlops(deg int) int64 {
	k := int64((deg + 1) * (deg + 1))
	return 12 + 3*k + 6*k
}

// shBwdFlops is the SH colour's backward: per channel the colour again, the coefficients'
// gradients and the direction's, about 9 per coefficient, plus the basis' derivatives.
func shBwdFlops(deg int) int64 {
	k := int64((deg + 1) * (deg + 1))
	return 12 + 12*k + 27*k
}

// MinimalCosts returns the lower-bound cost of every stage of engine.Stages, in that order.
//
// Per stage (N splats, V visible, E entries, P pixels, T tiles, K = (d+1)² SH coefficients;
// sizes in 4-byte words unless said otherwise):
//
//	project     reads N·11 geometry (whether a splat is on the image takes its whole footprint)
//	            and V·3K SH; writes N valid flags, V·(10 footprint + 10 EWA / 19 ray) outputs.
//	            Work N·18 + V·(260 EWA / 300 ray + SH colour).
//	bin         reads N valid flags and V·10 footprint words; sorts the visible splats by
//	            depth (4 passes, each reading and writing a 4-byte key and id per splat);
//	            writes E entries (4-byte tile key, 4-byte id). Work: one tile test per entry
//	            with gpu-conic (a tighter enumeration than the box would skip the tiles it
//	            rejects), none otherwise.
//	sort        ⌈bits(T−1)/8⌉ passes (at least one), each reading and writing every key and
//	            id (16 bytes an entry); the T+1 tile offsets. No floating-point work.
//	raster_fwd  reads T+1 offsets, the walked entries' ids (all E when the walk is not
//	            measured), and the staged data (9 EWA / 16 ray words) of each distinct splat
//	            they name once (min(V, E) splats when not measured; a tile-based rasterizer
//	            re-reads a splat for each of its tiles, but those re-reads may hit the L2 and
//	            are not counted); the ray model's 3 words of direction per pixel; writes 5
//	            words per pixel, each tile's walk (T words) and 4 words of chunk state per
//	            chunk boundary inside a pixel's walk (Walk.Boundaries). Work: the exponent of
//	            every walked (entry, pixel) pair (E·P/T pairs when the walk is not measured).
//	loss        reads image and target, writes the image gradient: 9 words per pixel. Work 18
//	            per pixel, plus 1224 with SSIM.
//	raster_bwd  reads what raster_fwd read, plus final T, count and the 3-word image gradient
//	            per pixel, the tiles' walks and the chunk states raster_fwd wrote, and the
//	            3-word image of each pixel whose walk passes a chunk boundary (Walk.Spanning;
//	            the chunk numbering it makes from the walks is its own scratch); writes each
//	            splat's prepared-data gradient once (9 EWA / 16 ray).
//	            Work: the same pairs' exponent (the hits' gradient terms are not counted).
//	project_bwd reads N valid flags, the V-entry list of the visible splats, V·(11 + 3K)
//	            parameters and V prepared-data gradients;
//	            writes the 59·V gradients of the visible splats (an invalid splat's are zero
//	            and not stored) and V 2D-gradient norms; with statistics, reads the radius and
//	            reads and writes 3 words of statistics per visible splat more.
//	            Work V·(650 EWA / 750 ray + SH backward).
//	adam        reads the N valid flags and the 59·V gradients; per element of 59·N (59·V with
//	            visible-only updates) reads parameter, m and v and writes them back, 24
//	            bytes; work 13.
func MinimalCosts(w Workload) ([]StageCost, error) {
	if w.Gaussians < 0 || w.Visible < 0 || w.Visible > w.Gaussians || w.Entries < 0 || w.Width < 1 || w.Height < 1 ||
		w.TileSize < 1 || w.SHDegree < 0 || w.SHDegree > splat.MaxSHDegree ||
		w.Walk.Entries < 0 || w.Walk.Entries > int64(w.Entries) || w.Walk.Pairs < 0 ||
		w.Walk.Splats < 0 || w.Walk.Splats > min(int64(w.Visible), w.Walk.Entries) ||
		w.Walk.Spanning < 0 || w.Walk.Spanning > min(w.Walk.Boundaries, int64(w.Pixels())) ||
		w.Walk.Boundaries*chunkEntries > w.Walk.Pairs {
		return nil, fmt.Errorf("fused: roofline: workload %+v out of range", w)
	}
	n, v, e := int64(w.Gaussians), int64(w.Visible), int64(w.Entries)
	px, tiles := int64(w.Pixels()), int64(w.Tiles())
	k := int64((w.SHDegree + 1) * (w.SHDegree + 1))
	// The rasterizer's walk: entries read, (entry, pixel) pairs evaluated, splats read.
	walked, pairs, touched := e, e*px/tiles, min(v, e) // not measured: everything, every pixel of the tile
	// Chunk boundaries inside the pixels' walks and the pixels that pass one; not measured,
	// every pixel walks a list of the mean length.
	boundaries, spanning := int64(0), int64(0)
	if mean := e / tiles; mean > chunkEntries {
		boundaries, spanning = px*((mean-1)/chunkEntries), px
	}
	if w.Walk != (Walk{}) {
		walked, pairs, touched = w.Walk.Entries, w.Walk.Pairs, w.Walk.Splats
		boundaries, spanning = w.Walk.Boundaries, w.Walk.Spanning
	}
	// raster_fwd writes the tiles' walks and the chunk states, raster_bwd reads them (and the
	// image of the pixels it starts from a state).
	chunkFwd := word * (tiles + chunkWords*boundaries)
	chunkBwd := chunkFwd + word*3*spanning
	// The render model's sizes: words staged per splat by the rasterizer (also the words of
	// its prepared-data gradient), per-pair and per-splat work, direction words per pixel.
	staged, pairFlops, projFlops, projBwdFlops, rayPx := int64(rasterEWA), int64(flopsPairEWA), int64(flopsProjectEWA), int64(flopsProjectBwdEWA), int64(0)
	if w.Ray {
		staged, pairFlops, projFlops, projBwdFlops, rayPx = rasterRay, flopsPairRay, flopsProjectRay, flopsProjectBwdRay, 3
	}
	rasterIn := word * ((tiles + 1) + walked + touched*staged + px*rayPx)

	binFlops := int64(0)
	if w.ConicBin {
		binFlops = e * flopsTileTest
	}
	lossFlops := px * flopsLossPointwise
	if w.SSIM {
		lossFlops += px * flopsLossSSIM
	}
	projBwdWords := n + v + v*(geomWords+3*k+staged) + v*paramFloats + v
	if w.AccumulateStats {
		projBwdWords += v * (1 + 2*statWords) // radius, and the statistics read and written
	}
	// Values Adam updates, reading and writing each with its two moments.
	updated := n * paramFloats
	switch {
	case w.AdamVisibleOnly:
		updated = v * paramFloats
	case w.AdamVisibleSH:
		updated = n*(paramFloats-shRestFloats) + v*shRestFloats
	}
	adamWords := n + v*paramFloats // the flags, and the visible splats' gradients
	projBwd := StageCost{engine.StageProjectBwd, word * projBwdWords, v * (projBwdFlops + shBwdFlops(w.SHDegree))}
	adam := StageCost{engine.StageAdam, word * (adamWords + updated*6), updated * flopsAdam}
	return []StageCost{
		{engine.StageProject, word * (n*geomWords + v*3*k + n + v*(footprintWords+projectOut(w.Ray))),
			n*flopsCull + v*(projFlops+shFlops(w.SHDegree))},
		{engine.StageBin, word * (n + v*footprintWords + depthSortPasses*v*2*keyIDWords + e*keyIDWords), binFlops},
		{engine.StageSort, int64(w.SortPasses())*e*2*keyIDWords*word + word*(tiles+1), 0},
		{engine.StageRasterFwd, rasterIn + word*px*pixelOutWords + chunkFwd, pairs * pairFlops},
		{engine.StageLoss, word * px * lossWords, lossFlops},
		{engine.StageRasterBwd, rasterIn + word*(px*pixelBwdWords+touched*staged) + chunkBwd, pairs * pairFlops},
		projBwd,
		adam,
	}, nil
}

// Bounds a stage can be classified as.
const (
	BoundMemory     = "memory"
	BoundCompute    = "compute"
	BoundLatency    = "latency/other" // neither roof is approached: launch gaps, serial work, atomics, divergence, waste
	BoundUnmeasured = "unmeasured"    // no positive time to divide by
	BoundFused      = "fused"         // no cost of its own: its kernel runs in the stage before
)

// boundFraction is the share of a ceiling below which neither roof is said to bound a stage.
const boundFraction = 0.25

// StageRoofline is one stage's place under the two roofs.
type StageRoofline struct {
	StageCost
	Ms              float64 // the stage's measured time
	GBs             float64 // achieved bandwidth: minimal bytes / time, / 1e9
	GFlops          float64 // achieved arithmetic rate: minimal flops / time, / 1e9
	MemoryFraction  float64 // GBs / the copy ceiling
	ComputeFraction float64 // GFlops / the FP32 ceiling
	Bound           string  // BoundMemory, BoundCompute, BoundLatency or BoundUnmeasured
}

// Roofline places a stage that took ms milliseconds under the ceilings: the roof it is closer
// to bounds it, unless it reaches less than a quarter of both, when the time goes to something
// neither roof describes.
func Roofline(c StageCost, ms float64, ceil Ceilings) StageRoofline {
	r := StageRoofline{StageCost: c, Ms: ms, Bound: BoundUnmeasured}
	if c.Bytes == 0 && c.Flops == 0 {
		r.Bound = BoundFused
		return r
	}
	if !(ms > 0) {
		return r
	}
	s := ms * 1e-3
	r.GBs = float64(c.Bytes) / s / 1e9
	r.GFlops = float64(c.Flops) / s / 1e9
	if ceil.CopyGBs > 0 {
		r.MemoryFraction = r.GBs / ceil.CopyGBs
	}
	if ceil.FP32GFlops > 0 {
		r.ComputeFraction = r.GFlops / ceil.FP32GFlops
	}
	switch {
	case max(r.MemoryFraction, r.ComputeFraction) < boundFraction:
		r.Bound = BoundLatency
	case r.MemoryFraction >= r.ComputeFraction:
		r.Bound = BoundMemory
	default:
		r.Bound = BoundCompute
	}
	return r
}

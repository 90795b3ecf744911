package fused

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// paramFloats is the number of floats per splat in the packed layout (shaders/common.h).
const paramFloats = abi.ParamFloats

// shRestFloats is the SH rest's share of a splat's packed floats (bands 1–3, after the DC's 3).
const shRestFloats = splat.SHCoeffs*3 - 3

// pgFloats is the number of floats per splat of the prepared-data gradients: colour 3,
// opacity 1, mean2d 2, conic 3, rayU 3, rayA 9, at these offsets (× capV, pgAt).
const (
	pgColor   = 0
	pgOpacity = 3
	pgMean2D  = 4
	pgConic   = 6
	pgRayU    = 9
	pgRayA    = 12
	pgFloats  = 21
	// pgMean2DAbs is the EWA model's absolute sums (engine.Settings.AbsGrad), in the words the
	// ray model's u takes.
	pgMean2DAbs = pgRayU
)

// maxTileSize bounds the tile size: a tile is one thread block of at most 1024 threads.
const maxTileSize = 32

// Engine implements engine.Engine on a GPU.
type Engine struct {
	set   engine.Settings
	dev   gpu.Device
	owned bool // the engine closes dev (OwnDevice)
	k     *abi.EngineKernels

	n    int // splats
	capN int // capacity of the per-splat buffers, in splats
	// capV is the capacity, in splats, of the buffers a forward and its backward read and write
	// (the projection, the footprint, bin.cu's, the prepared-data gradients): room for the
	// engine's own splats, and for a renderer's records where they outnumber them
	// (RenderRecords, RenderRecordsBackward).
	capV int

	// Per splat. The packed buffers hold 59·n floats in the layout of shaders/common.h.
	params, grads, adamM, adamV                             gpu.Buffer
	valid, depth, opacity, color, mean2d, conic, rayU, rayA gpu.Buffer
	rayHalf                                                 gpu.Buffer // ray model: prep's RayHalf, for bin
	boundCenter, boundQ, rect, radius                       gpu.Buffer
	pg                                                      gpu.Buffer // [pgFloats·capV]
	grad2d, statAccum, statCount, statMaxRadius, counts     gpu.Buffer
	bigList                                                 gpu.Buffer // bin.cu: splats queued for a warp each
	bigOff                                                  gpu.Buffer // bin.cu: where each queued splat's hit bits start
	// bin.cu: the queued splats' hit bits, bigBitsCap words (bigBitsWant: what the last step
	// asked for); noBigBits hands out none (compare checks the re-testing path with it).
	bigBits                 gpu.Buffer
	bigBitsCap, bigBitsWant int
	noBigBits               bool
	// bin.cu's depth sort of the visible splats (their flags, scanned into places: n+1
	// words; keys, ids and their ping-pong pair), the tile counts in depth order (scanned
	// into offsets: n+1 words) and each splat's rank in that order.
	visFlags, depthKeys, order, depthKeysTmp, orderTmp, ranked, rankOf gpu.Buffer
	// vis: the visible splats in id order (bin_compact), the threads of project_bwd.
	vis      gpu.Buffer
	hitMask  gpu.Buffer // bin.cu: each small box's tiles hit
	editSrc  gpu.Buffer // edit.cu: the plan's source splat per new splat
	recs     gpu.Buffer // shard.cu: the records PackVisible wrote
	rowBlock gpu.Buffer // rows.go: the row block ExportRows wrote
	gradRecs gpu.Buffer // shard.cu: the gradient records RenderRecordsBackward wrote
	// packed is the view the last PackVisible projected and packed, while the projection it
	// left (valid, radius, the scanned flags) and the splats are still those it packed; nil
	// once anything else projects, reallocates them or changes the splats. StepFromGradients
	// maps a view's gradients back through it.
	packed *packedView
	// summed is the views whose gradients BackwardFromGradients has summed in grads (and seen)
	// since the last update, for UpdateFromGradients; nil when none, or once a step, an edit,
	// a relocation, a state upload or an opacity reset has overwritten grads or changed the
	// splats.
	summed   *gradSum
	adamStep int64
	// shUsed is the highest SH degree a step has used since the moments were last set from
	// outside (an uploaded state counts as degree 3): adam_step leaves the SH floats above it
	// alone (shLiveFloats).
	shUsed int

	// Tile lists, capacity listCap entries: u32 tile keys and splat ids; sortedKeys/IDs name
	// the pair that holds the sorted lists after the last sort. hist serves both sorts.
	listCap                          int
	bigArea                          int // bin.cu: boxes of more tiles get a warp each
	keys, ids, keysTmp, idsTmp, hist gpu.Buffer
	sortedKeys, sortedIDs            gpu.Buffer
	scanSums                         []gpu.Buffer
	scanCap                          int // elements the scan levels are sized for
	scanDirect                       int // most block sums scan_add_sums takes (scan.go)
	tileOffsets                      gpu.Buffer
	tileOrder                        gpu.Buffer // tile_order: the tiles in raster_fwd's order
	tileCap                          int
	// The lists' segments of segmentEntries entries (chunks.go, raster.h): which tiles
	// raster_fwd's first pass queued more segments for, the queued (tile, segment) pairs, and
	// the per-pixel states at each segment's end for raster_fwd_join; room for segCap
	// segments.
	segCont, segItems, segState, segCount gpu.Buffer
	segCap                                int
	// The tiles' chunks of chunkEntries entries (chunks.go): raster_fwd's walk per tile and
	// per-pixel states at the chunks' ends, raster_bwd's first chunk per tile and tile per
	// chunk; room for chunkCap chunks.
	tileWalk, chunkStart, chunkTile, chunkState gpu.Buffer
	chunkCap                                    int
	bwdMaxBlocks                                int // raster_bwd's grid cap (chunks.go)

	// Per pixel, for images of up to pxCap pixels.
	pxCap                                    int
	image, finalT, count, dImage, rays, dmap gpu.Buffer
	partAbs, partSq, partSSIM                gpu.Buffer
	raysFor                                  *camera.Camera // the camera rays holds, nil if none

	dummy   gpu.Buffer // bound to pointer arguments a mode does not use
	targets map[int]*target
	// Readout blocks and stage events for each of the two steps that can be queued at once
	// (Submit), and an event recorded at the end of every step, which its readouts wait for.
	// A slot's buffer holds a block for each view of a batch (view j's at j·roWords words; room
	// for batchCap views). ro and events are those of the view (or render) being enqueued;
	// prevRo is the readout of the view enqueued before it (in its batch, or the last of the
	// step queued before it), or ro when there is none: bin_total carries an overflow on.
	readouts   [2]gpu.Buffer
	batchCap   int
	slotEvents [2][9]gpu.Event // stage boundaries: engine.Stages has 8 stages
	ends       [2]gpu.Event
	ro, prevRo abi.Buf
	events     []gpu.Event
	queue      []*inflight // submitted steps not yet collected, oldest first
	// seen marks, per splat, that some view of the batch under way has written its gradients
	// (project_bwd); adam_step takes it as the batch's valid.
	seen gpu.Buffer

	// Steps as graphs (graphStep) when graphs is set (SetGraphs) and the device has them;
	// graph is the replayed step, capturing true while a step is being captured.
	graphs    bool
	graph     gpu.Graph
	capturing bool
	// timed: the step under way records its stage events (StepOptions.WantTimings).
	timed bool
	// gradsOnly stops steps before the update, their gradients left in grads (CompareBatch).
	gradsOnly bool
	// reduce, when set, makes steps ranks' shares of a data-parallel step (SetReduce);
	// batchViews is the whole batch's size during StepPart.
	reduce     func(Reduction) error
	batchViews int
	// The reduced gradients and seen flags of a data-parallel step (Reduction's outputs).
	gradsSum, seenSum gpu.Buffer
	// noEvents: the device has no timing events (gpu.ErrUnsupported); notes are the features
	// found missing, each said once through notice.
	noEvents bool
	notes    []string
	notice   func(string)

	// cpu-conic: the host's projection and lists.
	binner    prep.Binner
	hostProj  *prep.Projected
	hostLists prep.TileLists
	hostTiles []uint32 // hostLists' tile ids, as the device's lists hold them
	hostG     *splat.Gaussians

	// Device memory held in buffers that ensure allocated (every buffer that scales with the
	// scene, the image or the lists; not the few fixed words setup allocates): now and at
	// the most, in bytes.
	devBytes, devPeak int64
	// The image size of the last forward, whose per-pixel counts RasterWalk reads, and its
	// splats (the engine's own, or a renderer's records).
	lastW, lastH, lastN int
}

// target is a view's target image kept resident on the device.
type target struct {
	src []float32 // the slice it was uploaded from (kept, so that its address stays unique)
	buf gpu.Buffer
}

var (
	_ engine.Pipeliner   = (*Engine)(nil)
	_ engine.StateReader = (*Engine)(nil)
)

// Option configures New.
type Option func(*Engine)

// OwnDevice makes the engine close its device when it is closed (or when New fails).
func OwnDevice() Option { return func(e *Engine) { e.owned = true } }

// WithNotice passes the engine's one-line notes (what the device lacks and the engine skips
// for it: graph capture, timing events) to notice, each once.
func WithNotice(notice func(string)) Option { return func(e *Engine) { e.notice = notice } }

// New returns an engine training a copy of g on dev, a device of any backend (cuda, metal,
// emu) that the caller opened. dev stays open when the engine closes unless OwnDevice is
// given; with OwnDevice it is closed also when New fails. A device without graph capture or
// timing events (gpu.ErrUnsupported) runs steps launch by launch or without per-stage
// timings, and the engine says so through WithNotice's callback and Notes.
func New(dev gpu.Device, set engine.Settings, g *splat.Gaussians, opts ...Option) (*Engine, error) {
	var o Engine
	for _, f := range opts {
		f(&o)
	}
	e, err := newOnDevice(dev, set, g, opts...)
	if err != nil {
		if o.owned && dev != nil {
			err = errors.Join(err, dev.Close())
		}
		return nil, err
	}
	return e, nil
}

func checkSettings(set *engine.Settings, g *splat.Gaussians) error {
	if err := set.Validate(); err != nil {
		return err
	}
	if g.Len() == 0 {
		return engine.ErrEmpty
	}
	if err := g.Validate(); err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	if set.TileSize > maxTileSize {
		return fmt.Errorf("fused: tile size %d: the GPU engine supports tile sizes up to %d (a tile is one thread block)", set.TileSize, maxTileSize)
	}
	if l := set.SSIMLambda; !(l >= 0 && l <= 1) {
		return fmt.Errorf("fused: SSIM lambda %v, want a value in [0,1]", l)
	}
	a := set.Adam
	if !(a.Beta1 >= 0 && a.Beta1 < 1) || !(a.Beta2 >= 0 && a.Beta2 < 1) || !(a.Eps > 0) || !(a.GradClip >= 0) {
		return fmt.Errorf("fused: Adam settings β1 %v, β2 %v, ε %v, clip %v out of range", a.Beta1, a.Beta2, a.Eps, a.GradClip)
	}
	return nil
}

// defaultBigArea is the box size, in tiles, above which bin.cu tests a splat's tiles with a
// whole warp rather than one thread. At most 32: bin_count keeps a small box's hits in a u32.
const defaultBigArea = 16

// newOnDevice builds an engine on an open device, which it leaves open on failure.
func newOnDevice(dev gpu.Device, set engine.Settings, g *splat.Gaussians, opts ...Option) (*Engine, error) {
	if dev == nil {
		return nil, errors.New("fused: no device")
	}
	if err := checkSettings(&set, g); err != nil {
		return nil, err
	}
	k, err := abi.LoadEngineKernels(dev)
	if err != nil {
		return nil, err
	}
	e := &Engine{set: set, dev: dev, k: k, targets: map[int]*target{}, bigArea: defaultBigArea, bwdMaxBlocks: defaultBwdMaxBlocks,
		scanDirect: maxDirectSums}
	for _, f := range opts {
		f(e)
	}
	if err := e.setup(); err != nil {
		e.release()
		return nil, err
	}
	if err := e.upload(g, nil, nil, 0, nil); err != nil {
		e.release()
		return nil, err
	}
	return e, nil
}

func (e *Engine) setup() error {
	if err := e.growBatch(1); err != nil {
		return err
	}
	if err := e.newEvents(); err != nil {
		return err
	}
	var err error
	if e.dummy, err = e.dev.Alloc(256); err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	e.useView(0, 0, nil)
	return nil
}

// growBatch makes room in both slots' readouts for batches of b views; no step may be queued.
func (e *Engine) growBatch(b int) error {
	if b <= e.batchCap {
		return nil
	}
	for slot := range e.readouts {
		if e.readouts[slot] != nil {
			if err := e.dev.Free(e.readouts[slot]); err != nil {
				return fmt.Errorf("fused: %w", err)
			}
			e.readouts[slot] = nil
		}
		var err error
		if e.readouts[slot], err = e.dev.Alloc(b * roWords * 4); err != nil {
			return fmt.Errorf("fused: readouts for batches of %d views: %w", b, err)
		}
	}
	e.batchCap = b
	return nil
}

// newEvents creates the stage and end events of both slots; on a device without events
// (gpu.ErrUnsupported) the engine goes without: readouts wait for all queued work and steps
// report no device timings.
func (e *Engine) newEvents() error {
	for slot := range e.slotEvents {
		for i := range e.slotEvents[slot] {
			ev, err := e.dev.NewEvent()
			if errors.Is(err, gpu.ErrUnsupported) {
				e.noEvents = true
				e.skip("timing events", "steps report no per-stage device times and each readout waits for all queued work")
				return nil
			}
			if err != nil {
				return fmt.Errorf("fused: %w", err)
			}
			e.slotEvents[slot][i] = ev
		}
		ev, err := e.dev.NewEvent()
		if err != nil {
			return fmt.Errorf("fused: %w", err)
		}
		e.ends[slot] = ev
	}
	return nil
}

// skip notes, once per feature, that the device lacks it and what the engine does instead.
func (e *Engine) skip(feature, instead string) {
	note := fmt.Sprintf("%s device has no %s: %s", e.dev.Info().Backend, feature, instead)
	if slices.Contains(e.notes, note) {
		return
	}
	e.notes = append(e.notes, note)
	if e.notice != nil {
		e.notice(note)
	}
}

// Notes are the engine's one-line notes so far: each feature the device lacks and what the
// engine skips for it (graph capture is found missing at the first step that asks for it).
func (e *Engine) Notes() []string { return slices.Clone(e.notes) }

// HasEvents reports whether the device has timing events: without them steps carry no
// Timings and TimeLaunches and Ceilings are unavailable.
func (e *Engine) HasEvents() bool { return !e.noEvents }

// Name says which engine and device this is.
func (e *Engine) Name() string {
	in := e.dev.Info()
	return fmt.Sprintf("fused %s (%s, %s)", in.Backend, in.Name, in.Arch)
}

// Len is the number of Gaussians.
func (e *Engine) Len() int { return e.n }

// ensure makes *b hold at least bytes bytes; the contents are not kept.
func (e *Engine) ensure(b *gpu.Buffer, bytes int) error {
	if *b != nil && (*b).Size() >= bytes {
		return nil
	}
	if *b != nil {
		size := (*b).Size()
		if err := e.dev.Free(*b); err != nil {
			return err
		}
		*b = nil
		e.devBytes -= int64(size)
	}
	nb, err := e.dev.Alloc(max(bytes, 16))
	if err != nil {
		return err
	}
	*b = nb
	e.devBytes += int64(nb.Size())
	e.devPeak = max(e.devPeak, e.devBytes)
	return nil
}

// growSplats sizes the per-splat buffers for n splats (with room to grow by a quarter, so that
// densification does not reallocate every time). Contents are not kept: callers upload.
func (e *Engine) growSplats(n int) error {
	if n <= e.capN {
		return nil
	}
	c := n + n/4
	for _, x := range []struct {
		b     *gpu.Buffer
		width int
	}{
		{&e.params, paramFloats}, {&e.grads, paramFloats}, {&e.adamM, paramFloats}, {&e.adamV, paramFloats},
		{&e.seen, 1}, {&e.grad2d, 1}, {&e.statAccum, 1}, {&e.statCount, 1}, {&e.statMaxRadius, 1},
	} {
		if err := e.ensure(x.b, c*x.width*4); err != nil {
			return fmt.Errorf("fused: buffers for %d Gaussians: %w", c, err)
		}
	}
	e.capN = c
	return e.growView(n)
}

// growView sizes the buffers of a forward and backward over n splats (the projection, the
// footprint, bin.cu's per-splat buffers and the prepared-data gradients; with room to grow by
// a quarter): a renderer's records (RenderRecords) may outnumber its own splats, whose
// parameters and moments stay as they are. Contents are not kept, PackVisible's projection
// among them.
func (e *Engine) growView(n int) error {
	if n <= e.capV {
		return nil
	}
	e.packed = nil
	c := n + n/4
	f := 4 // bytes per float or word
	bufs := []struct {
		b     *gpu.Buffer
		width int
	}{
		{&e.valid, 1}, {&e.depth, 1}, {&e.opacity, 1}, {&e.color, 3}, {&e.mean2d, 2}, {&e.conic, 3},
		{&e.boundCenter, 2}, {&e.boundQ, 3}, {&e.rect, 4}, {&e.radius, 1},
		{&e.bigList, 1}, {&e.bigOff, 1},
		{&e.depthKeys, 1}, {&e.order, 1}, {&e.depthKeysTmp, 1}, {&e.orderTmp, 1}, {&e.rankOf, 1},
		{&e.hitMask, 1}, {&e.vis, 1}, {&e.pg, pgFloats},
	}
	if e.set.Render == prep.Ray {
		bufs = append(bufs, struct {
			b     *gpu.Buffer
			width int
		}{&e.rayU, 3}, struct {
			b     *gpu.Buffer
			width int
		}{&e.rayA, 9}, struct {
			b     *gpu.Buffer
			width int
		}{&e.rayHalf, 3})
	}
	for _, x := range bufs {
		if err := e.ensure(x.b, c*x.width*f); err != nil {
			return fmt.Errorf("fused: buffers for %d Gaussians: %w", c, err)
		}
	}
	for _, b := range []*gpu.Buffer{&e.counts, &e.ranked, &e.visFlags} {
		if err := e.ensure(b, (c+1)*f); err != nil {
			return fmt.Errorf("fused: buffers for %d Gaussians: %w", c, err)
		}
	}
	e.capV = c
	if err := e.ensureHist(c); err != nil {
		return err
	}
	return e.ensureScan(c + 1)
}

// ensureHist sizes the sort histograms (and the scan over them) for sorting elements keys.
func (e *Engine) ensureHist(elements int) error {
	nb := sortBlocks(elements)
	if err := e.ensure(&e.hist, 256*nb*4); err != nil {
		return fmt.Errorf("fused: sort histograms: %w", err)
	}
	return e.ensureScan(256 * nb)
}

// ensureScan sizes the scan's per-level block sums for arrays of up to n elements.
func (e *Engine) ensureScan(n int) error {
	if n <= e.scanCap {
		return nil
	}
	level := 0
	for m := n; ; level++ {
		nb := (m + scanBlock - 1) / scanBlock
		if level == len(e.scanSums) {
			e.scanSums = append(e.scanSums, nil)
		}
		if err := e.ensure(&e.scanSums[level], nb*4); err != nil {
			return fmt.Errorf("fused: scan buffers for %d elements: %w", n, err)
		}
		if nb <= 1 {
			break
		}
		m = nb
	}
	e.scanCap = n
	return nil
}

// growLists makes room for entries tile-list entries.
func (e *Engine) growLists(entries int) error {
	if entries <= e.listCap && e.keys != nil {
		return nil
	}
	c := max(entries+entries/4, 1024)
	for _, b := range []*gpu.Buffer{&e.keys, &e.keysTmp, &e.ids, &e.idsTmp} {
		if err := e.ensure(b, c*4); err != nil {
			return fmt.Errorf("fused: tile lists of %d entries (%d Gaussians): %w", c, e.n, err)
		}
	}
	e.listCap = c
	if err := e.ensureChunks(); err != nil {
		return err
	}
	return e.ensureHist(max(c, e.capV))
}

// growPixels sizes the per-pixel buffers for a w×h image and its tiles.
func (e *Engine) growPixels(w, h int) error {
	npx := w * h
	ts := e.set.TileSize
	tiles := ((w + ts - 1) / ts) * ((h + ts - 1) / ts)
	if tiles+1 > e.tileCap {
		if err := e.ensure(&e.tileOffsets, (tiles+1)*4); err != nil {
			return fmt.Errorf("fused: tile offsets for %d×%d px: %w", w, h, err)
		}
		for _, b := range []*gpu.Buffer{&e.tileOrder, &e.segCont} {
			if err := e.ensure(b, (tiles+1)*4); err != nil {
				return fmt.Errorf("fused: tile order for %d×%d px: %w", w, h, err)
			}
		}
		e.tileCap = tiles + 1
		if err := e.ensureChunks(); err != nil {
			return err
		}
	}
	if npx <= e.pxCap {
		return nil
	}
	e.raysFor = nil
	parts := maxLossTiles(npx) // loss.cu's per-tile partial sums, whatever the image's shape
	bufs := []struct {
		b     *gpu.Buffer
		bytes int
	}{
		{&e.image, npx * 12}, {&e.finalT, npx * 4}, {&e.count, npx * 4}, {&e.dImage, npx * 12},
		{&e.dmap, npx * 9 * 4},
		{&e.partAbs, parts * 8}, {&e.partSq, parts * 8}, {&e.partSSIM, parts * 8},
	}
	if e.set.Render == prep.Ray {
		bufs = append(bufs, struct {
			b     *gpu.Buffer
			bytes int
		}{&e.rays, npx * 12})
	}
	for _, x := range bufs {
		if err := e.ensure(x.b, x.bytes); err != nil {
			return fmt.Errorf("fused: image buffers for %d×%d px (%d Gaussians): %w", w, h, e.n, err)
		}
	}
	e.pxCap = npx
	return nil
}

// or returns b, or the dummy buffer when b was never allocated (a pointer the mode ignores).
func (e *Engine) or(b gpu.Buffer) gpu.Buffer {
	if b == nil {
		return e.dummy
	}
	return b
}

// upload replaces the scene: parameters g, moments m and v (nil: zero), the Adam step and the
// statistics (nil: zero).
func (e *Engine) upload(g, m, v *splat.Gaussians, step int64, st *engine.Stats) error {
	e.packed, e.summed = nil, nil
	n := g.Len()
	if err := checkSplats("upload", n); err != nil {
		return err
	}
	if err := e.growSplats(n); err != nil {
		return err
	}
	e.n = n
	if err := gpu.UploadF32(e.dev, e.params, pack(g)); err != nil {
		return fmt.Errorf("fused: upload parameters: %w", err)
	}
	for _, x := range []struct {
		buf gpu.Buffer
		g   *splat.Gaussians
	}{{e.adamM, m}, {e.adamV, v}} {
		var err error
		if x.g == nil {
			err = e.dev.Memset(x.buf, 0, n*paramFloats*4, 0)
		} else {
			err = gpu.UploadF32(e.dev, x.buf, pack(x.g))
		}
		if err != nil {
			return fmt.Errorf("fused: upload moments: %w", err)
		}
	}
	e.adamStep = step
	e.shUsed = 0
	if m != nil || v != nil {
		e.shUsed = shAll // moments from elsewhere may be non-zero in any band
	}
	if st == nil {
		return e.ResetStats()
	}
	if err := e.uploadStats(st); err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	return nil
}

// uploadStats writes st over the statistics of splats 0..len(st.Count)−1.
func (e *Engine) uploadStats(st *engine.Stats) error {
	if err := gpu.UploadF32(e.dev, e.statAccum, st.GradAccum); err != nil {
		return fmt.Errorf("upload statistics: %w", err)
	}
	if err := gpu.UploadSlice(e.dev, e.statCount, 0, st.Count); err != nil {
		return fmt.Errorf("upload statistics: %w", err)
	}
	if err := gpu.UploadF32(e.dev, e.statMaxRadius, st.MaxRadius); err != nil {
		return fmt.Errorf("upload statistics: %w", err)
	}
	return nil
}

// pack lays g out in the packed order: every field in splat.Gaussians.Fields order.
func pack(g *splat.Gaussians) []float32 {
	out := make([]float32, 0, g.Len()*paramFloats)
	for _, f := range g.Fields() {
		out = append(out, f.Data...)
	}
	return out
}

// unpack is the inverse of pack.
func unpack(p []float32, n int) *splat.Gaussians {
	g := splat.New(n)
	off := 0
	for _, f := range g.Fields() {
		copy(f.Data, p[off:off+n*f.Width])
		off += n * f.Width
	}
	return g
}

// downloadPacked reads one packed buffer back, each field straight into its slice: a
// checkpoint reads three of them (parameters and both moments, 640 MB at 900k splats), and a
// packed copy unpacked on the host doubled the memory touched.
func (e *Engine) downloadPacked(b gpu.Buffer) (*splat.Gaussians, error) {
	g := &splat.Gaussians{}
	return g, e.downloadPackedInto(b, g)
}

// downloadPackedInto is downloadPacked into g's arrays, resized to the engine's splats.
func (e *Engine) downloadPackedInto(b gpu.Buffer, g *splat.Gaussians) error {
	g.Resize(e.n)
	off := 0
	for _, f := range g.Fields() {
		if err := gpu.DownloadSlice(e.dev, f.Data, b, off); err != nil {
			return fmt.Errorf("fused: download %s: %w", f.Name, err)
		}
		off += len(f.Data)
	}
	return nil
}

// Gaussians reads the parameters back.
func (e *Engine) Gaussians() (*splat.Gaussians, error) {
	if err := e.idle("gaussians"); err != nil {
		return nil, err
	}
	return e.downloadPacked(e.params)
}

// Shapes reads back the log-scales and opacity logits alone (4 of the 59 packed floats).
func (e *Engine) Shapes() (engine.Shapes, error) {
	var s engine.Shapes
	err := e.ShapesInto(&s)
	return s, err
}

// ShapesInto reads the shapes into dst's arrays (engine.Reader).
func (e *Engine) ShapesInto(dst *engine.Shapes) error {
	if err := e.idle("shapes"); err != nil {
		return err
	}
	n := e.n
	dst.LogScales, dst.OpacityLogits = engine.Resize(dst.LogScales, 3*n), engine.Resize(dst.OpacityLogits, n)
	if err := gpu.DownloadSlice(e.dev, dst.LogScales, e.params, 3*n); err != nil {
		return fmt.Errorf("fused: download scales: %w", err)
	}
	if err := gpu.DownloadSlice(e.dev, dst.OpacityLogits, e.params, 10*n); err != nil {
		return fmt.Errorf("fused: download opacities: %w", err)
	}
	return nil
}

// Stats reads the densification statistics back.
func (e *Engine) Stats() (engine.Stats, error) {
	var st engine.Stats
	err := e.StatsInto(&st)
	return st, err
}

// StatsInto reads the densification statistics into dst's arrays (engine.Reader).
func (e *Engine) StatsInto(dst *engine.Stats) error {
	if err := e.idle("stats"); err != nil {
		return err
	}
	if err := e.downloadStats(dst); err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	return nil
}

// downloadStats reads the statistics of the engine's splats into dst's arrays.
func (e *Engine) downloadStats(dst *engine.Stats) error {
	n := e.n
	dst.GradAccum, dst.Count, dst.MaxRadius = engine.Resize(dst.GradAccum, n), engine.Resize(dst.Count, n), engine.Resize(dst.MaxRadius, n)
	if err := gpu.DownloadF32(e.dev, dst.GradAccum, e.statAccum); err != nil {
		return fmt.Errorf("download statistics: %w", err)
	}
	if err := gpu.DownloadSlice(e.dev, dst.Count, e.statCount, 0); err != nil {
		return fmt.Errorf("download statistics: %w", err)
	}
	if err := gpu.DownloadF32(e.dev, dst.MaxRadius, e.statMaxRadius); err != nil {
		return fmt.Errorf("download statistics: %w", err)
	}
	return nil
}

// ResetStats zeroes the statistics.
func (e *Engine) ResetStats() error {
	if err := e.idle("reset stats"); err != nil {
		return err
	}
	for _, b := range []gpu.Buffer{e.statAccum, e.statCount, e.statMaxRadius} {
		if err := e.dev.Memset(b, 0, e.n*4, 0); err != nil {
			return fmt.Errorf("fused: reset statistics: %w", err)
		}
	}
	return nil
}

// Apply performs a densification edit (see engine.Edit) on the device: the plan (which row each
// new row copies) goes up, gather_rows moves the parameters and both moments, and only split
// parents' geometry comes to the host, which places their children (splitChildren).
func (e *Engine) Apply(ed engine.Edit) error {
	if err := e.idle("apply"); err != nil {
		return err
	}
	plan, err := engine.PlanEdit(ed, e.n)
	if err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	oldN, newN := e.n, len(plan.Src)
	if newN == 0 {
		return fmt.Errorf("fused: edit: %w", engine.ErrEmpty)
	}
	if err := checkSplats("edit", newN); err != nil {
		return err
	}
	// Split children: the parents' geometry (the first 10 floats of the packed layout per
	// splat: means, log-scales, quaternions) comes to the host, which places the children.
	var childMeans, childScales []float32
	if len(ed.Split) > 0 {
		var err error
		if childMeans, childScales, err = e.splitChildren(ed); err != nil {
			return err
		}
	}
	if err := e.ensure(&e.editSrc, newN*4); err != nil {
		return fmt.Errorf("fused: edit of %d Gaussians: %w", newN, err)
	}
	if err := gpu.UploadSlice(e.dev, e.editSrc, 0, plan.Src); err != nil {
		return fmt.Errorf("fused: edit: %w", err)
	}
	if err := e.gatherRows(oldN, newN, plan.Fresh, "edit"); err != nil {
		return err
	}
	e.n = newN
	if len(childMeans) > 0 {
		if err := gpu.UploadSlice(e.dev, e.params, 3*plan.Children, childMeans); err != nil {
			return fmt.Errorf("fused: edit: upload split children: %w", err)
		}
		if err := gpu.UploadSlice(e.dev, e.params, 3*newN+3*plan.Children, childScales); err != nil {
			return fmt.Errorf("fused: edit: upload split children: %w", err)
		}
	}
	return e.ResetStats()
}

// splitChildren places the children of ed's split parents (engine.SplitChildren): the
// parents' rows are gathered on the device into the gradient buffer (scratch between steps) and
// only their geometry is read back, not every splat's (36 MB at 900k splats, each event).
// gatherRows makes the splats newN rows where row j copies row editSrc[j] of the current
// parameters and Adam moments, the moments of rows from fresh on zeroed: each is gathered into
// the gradient buffer (scratch between steps) and swapped in. Growing, the scratch is
// reallocated at the new capacity before each gather, so at most one extra buffer is held at a
// time. The other per-splat buffers are grown as scratch; e.n is left to the caller.
func (e *Engine) gatherRows(oldN, newN, fresh int, what string) error {
	e.packed, e.summed = nil, nil
	need := newN * paramFloats * 4
	if newN > e.capN {
		need = (newN + newN/4) * paramFloats * 4
	}
	for _, x := range []struct {
		buf  *gpu.Buffer
		zero uint32
	}{{&e.params, 0}, {&e.adamM, 1}, {&e.adamV, 1}} {
		if err := e.ensure(&e.grads, need); err != nil {
			return fmt.Errorf("fused: %s to %d Gaussians: %w", what, newN, err)
		}
		if err := e.k.GatherRows(gpu.BlocksFor(uint32(newN*paramFloats), 256), gpu.Dim3{256}, abi.GatherRowsArgs{
			Src: abi.B(*x.buf), Dst: abi.B(e.grads), SrcIdx: abi.B(e.editSrc), OldN: uint32(oldN), NewN: uint32(newN),
			Fresh: uint32(fresh), ZeroFresh: x.zero}); err != nil {
			return fmt.Errorf("fused: %s: %w", what, err)
		}
		*x.buf, e.grads = e.grads, *x.buf
	}
	if err := e.ensure(&e.grads, need); err != nil {
		return fmt.Errorf("fused: %s to %d Gaussians: %w", what, newN, err)
	}
	return e.growSplats(newN)
}

func (e *Engine) splitChildren(ed engine.Edit) (means, logScales []float32, err error) {
	e.summed = nil // the parents' rows are gathered into grads
	k := len(ed.Split)
	if err := e.ensure(&e.editSrc, max(k, e.n)*4); err != nil {
		return nil, nil, fmt.Errorf("fused: edit: %w", err)
	}
	if err := gpu.UploadSlice(e.dev, e.editSrc, 0, ed.Split); err != nil {
		return nil, nil, fmt.Errorf("fused: edit: %w", err)
	}
	if err := e.k.GatherRows(gpu.BlocksFor(uint32(k*paramFloats), 256), gpu.Dim3{256}, abi.GatherRowsArgs{
		Src: abi.B(e.params), Dst: abi.B(e.grads), SrcIdx: abi.B(e.editSrc), OldN: uint32(e.n), NewN: uint32(k),
		Fresh: uint32(k)}); err != nil {
		return nil, nil, fmt.Errorf("fused: edit: %w", err)
	}
	geo := make([]float32, 10*k)
	if err := gpu.DownloadF32(e.dev, geo, e.grads); err != nil {
		return nil, nil, fmt.Errorf("fused: edit: download the split splats' geometry: %w", err)
	}
	// The gathered parents are splats 0..k−1 of the scratch layout.
	local := ed
	local.Split = make([]int32, k)
	for i := range local.Split {
		local.Split[i] = int32(i)
	}
	kids := k * ed.SplitN
	means, logScales = make([]float32, 3*kids), make([]float32, 3*kids)
	engine.SplitChildren(geo[:3*k], geo[3*k:6*k], geo[6*k:], local, func(p, c int, mean, logScale [3]float32) {
		j := p*ed.SplitN + c
		copy(means[3*j:], mean[:])
		copy(logScales[3*j:], logScale[:])
	})
	return means, logScales, nil
}

// ResetOpacity clamps every opacity to at most maxOpacity and zeroes the opacity moments.
func (e *Engine) ResetOpacity(maxOpacity float32) error {
	if err := e.idle("reset opacity"); err != nil {
		return err
	}
	if !(maxOpacity > 0 && maxOpacity < 1) {
		return fmt.Errorf("fused: opacity reset value %v outside (0,1)", maxOpacity)
	}
	e.packed, e.summed = nil, nil
	n := e.n
	if err := e.k.OpacityReset(gpu.BlocksFor(uint32(n), 256), gpu.Dim3{256}, abi.OpacityResetArgs{
		Params: abi.B(e.params), N: uint32(n), MaxLogit: splat.Logit(maxOpacity)}); err != nil {
		return fmt.Errorf("fused: %w", err)
	}
	for _, b := range []gpu.Buffer{e.adamM, e.adamV} {
		if err := e.dev.Memset(b, 10*n*4, n*4, 0); err != nil {
			return fmt.Errorf("fused: reset opacity moments: %w", err)
		}
	}
	return nil
}

// State reads the whole training state back.
func (e *Engine) State() (*engine.State, error) {
	st := &engine.State{}
	if err := e.StateInto(st); err != nil {
		return nil, err
	}
	return st, nil
}

// StateInto reads the whole training state back into dst's arrays (engine.StateReader).
func (e *Engine) StateInto(dst *engine.State) error {
	if err := e.idle("state"); err != nil {
		return err
	}
	for _, x := range []struct {
		b gpu.Buffer
		g **splat.Gaussians
	}{{e.params, &dst.Params}, {e.adamM, &dst.AdamM}, {e.adamV, &dst.AdamV}} {
		if *x.g == nil {
			*x.g = &splat.Gaussians{}
		}
		if err := e.downloadPackedInto(x.b, *x.g); err != nil {
			return err
		}
	}
	dst.AdamStep = e.adamStep
	return e.StatsInto(&dst.Stats)
}

// SetState restores a state saved by State (of this or any engine).
func (e *Engine) SetState(s *engine.State) error {
	if err := e.idle("set state"); err != nil {
		return err
	}
	n := s.Params.Len()
	if n == 0 {
		return engine.ErrEmpty
	}
	if err := s.Params.Validate(); err != nil {
		return fmt.Errorf("fused: restoring state: %w", err)
	}
	if s.AdamM.Len() != n || s.AdamV.Len() != n || len(s.Stats.GradAccum) != n || len(s.Stats.Count) != n || len(s.Stats.MaxRadius) != n {
		return fmt.Errorf("fused: restoring state: the moments or statistics do not have %d entries", n)
	}
	for _, m := range []*splat.Gaussians{s.AdamM, s.AdamV} {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("fused: restoring state: moments: %w", err)
		}
	}
	if s.AdamStep < 0 {
		return fmt.Errorf("fused: restoring state: Adam step %d < 0", s.AdamStep)
	}
	return e.upload(s.Params, s.AdamM, s.AdamV, s.AdamStep, &s.Stats)
}

// release frees everything; the device stays open.
func (e *Engine) release() error {
	var errs []error
	for _, t := range e.targets {
		errs = append(errs, e.dev.Free(t.buf))
	}
	e.targets = nil
	bufs := []gpu.Buffer{e.params, e.grads, e.adamM, e.adamV, e.valid, e.depth, e.opacity, e.color, e.mean2d,
		e.conic, e.rayU, e.rayA, e.rayHalf, e.boundCenter, e.boundQ, e.rect, e.radius, e.pg, e.grad2d, e.bigList, e.bigOff, e.bigBits, e.editSrc, e.statAccum,
		e.statCount, e.statMaxRadius, e.counts, e.visFlags, e.depthKeys, e.order, e.depthKeysTmp, e.orderTmp, e.ranked, e.rankOf, e.hitMask, e.recs, e.rowBlock, e.gradRecs, e.keys, e.ids, e.keysTmp, e.idsTmp, e.hist, e.tileOffsets, e.tileOrder, e.segCont, e.segItems, e.segState, e.segCount,
		e.tileWalk, e.chunkStart, e.chunkTile, e.chunkState,
		e.image, e.finalT, e.count, e.dImage, e.rays, e.dmap, e.partAbs, e.partSq, e.partSSIM,
		e.readouts[0], e.readouts[1], e.dummy, e.vis, e.seen, e.gradsSum, e.seenSum}
	bufs = append(bufs, e.scanSums...)
	for _, b := range bufs {
		if b != nil {
			errs = append(errs, e.dev.Free(b))
		}
	}
	events := append(e.slotEvents[0][:], e.slotEvents[1][:]...)
	for _, ev := range append(events, e.ends[:]...) {
		if ev != nil {
			errs = append(errs, ev.Close())
		}
	}
	if e.graph != nil {
		errs = append(errs, e.graph.Close())
		e.graph = nil
	}
	if e.k != nil {
		errs = append(errs, e.k.Close())
	}
	e.devBytes = 0 // every buffer ensure allocated is freed above (devPeak is kept)
	return errors.Join(errs...)
}

// SetGraphs switches steps between launch-by-launch enqueueing with an event between stages
// (off, the default) and one graph replay each, whose StepResult.Timings hold only the step's
// device time. A graph step is captured anew and the replayed graph updated from it (its
// arguments change every step). With the launches posted to the owner thread
// (internal/gpu/cuda) the host keeps ahead of the device either way: training bonsai for 30k
// steps on the H200, a step's wall time exceeded its device time by 0.4 ms launch by launch
// and by 0.5 ms as graphs (steps 140 s and 142 s). So graphs serve to time the device's
// share of a step without the host in it (rlxsplat bench).
func (e *Engine) SetGraphs(on bool) { e.graphs = on }

// Close frees the engine's device memory and, when New opened the device, closes it.
func (e *Engine) Close() error {
	if e.dev == nil {
		return nil
	}
	err := e.TimeLaunches(false)
	if len(e.queue) > 0 { // steps never collected: let them end before their buffers go
		err = errors.Join(err, e.dev.Sync())
		e.queue = nil
	}
	err = errors.Join(err, e.release())
	if e.owned {
		err = errors.Join(err, e.dev.Close())
	}
	e.dev = nil
	if err != nil {
		return fmt.Errorf("fused: close: %w", err)
	}
	return nil
}

// targetBuffer returns the device copy of the view's target, uploading it when the view is new
// or its Target is a different slice than last time (a target changed in place under the same
// slice is not noticed).
func (e *Engine) targetBuffer(v *engine.View) (gpu.Buffer, error) {
	t := e.targets[v.Index]
	if t != nil && len(t.src) == len(v.Target) && unsafe.SliceData(t.src) == unsafe.SliceData(v.Target) {
		return t.buf, nil
	}
	if t == nil {
		t = &target{}
		e.targets[v.Index] = t
	}
	if err := e.ensure(&t.buf, len(v.Target)*4); err != nil {
		return nil, fmt.Errorf("fused: target of view %d: %w", v.Index, err)
	}
	if err := gpu.UploadF32(e.dev, t.buf, v.Target); err != nil {
		return nil, fmt.Errorf("fused: target of view %d: %w", v.Index, err)
	}
	t.src = v.Target
	return t.buf, nil
}

// checkView reports a camera or SH degree the device cannot render.
func (e *Engine) checkView(cam *camera.Camera, shDegree int) error {
	if shDegree < 0 || shDegree > splat.MaxSHDegree {
		return fmt.Errorf("fused: SH degree %d outside 0..%d", shDegree, splat.MaxSHDegree)
	}
	if cam.Width <= 0 || cam.Height <= 0 {
		return fmt.Errorf("fused: image size %d×%d", cam.Width, cam.Height)
	}
	if !cam.Distortion.IsPinhole() {
		if e.set.Render == prep.EWA {
			return fmt.Errorf("fused: the ewa render model needs undistorted images (camera model %s): undistort them with COLMAP's image_undistorter or use model.render: ray", cam.Distortion.Model)
		}
		return fmt.Errorf("fused: lens distortion (camera model %s) is not supported by the GPU engine yet; undistort the images or use the CPU engine", cam.Distortion.Model)
	}
	if !(cam.Fx > 0 && cam.Fy > 0) || math.IsInf(cam.Fx, 0) || math.IsInf(cam.Fy, 0) {
		return fmt.Errorf("fused: focal lengths %v, %v must be positive and finite", cam.Fx, cam.Fy)
	}
	return nil
}

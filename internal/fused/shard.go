package fused

import (
	"fmt"
	"math"
	"slices"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// Gaussian sharding's records (docs/sharding.md): an owner packs the splats of its share that
// a view sees (PackVisible), the words go to the view's renderer (multi.Exchanger), and the
// renderer draws them as the owner's own engine would have (RenderRecords). A record is a
// splat's global id and every projected value that binning and the forward rasterizer read,
// copied bit for bit (shaders/shard.cu; the layout is abi's Rec* constants). For a training
// step the renderer also runs the loss and raster_bwd over them and packs each record's
// gradients back in record order (RenderRecordsBackward; abi's GradRec* constants), and each
// owner maps its share back to its splats' parameters and updates them (StepFromGradients).

// RecordWords is the 32-bit words of one record of render model m.
func RecordWords(m prep.Model) int {
	if m == prep.Ray {
		return abi.RecRayWords
	}
	return abi.RecEWAWords
}

// GradRecordWords is the floats of one gradient record of render model m: with absGrad
// (engine.Settings.AbsGrad, EWA only) the record carries raster_bwd's absolute sums too, from
// which project_bwd draws the densification statistic.
func GradRecordWords(m prep.Model, absGrad bool) int {
	switch {
	case m == prep.Ray:
		return abi.GradRecRayWords
	case absGrad:
		return abi.GradRecEWAAbsWords
	}
	return abi.GradRecEWAWords
}

// gradWords is GradRecordWords of the engine's settings.
func (e *Engine) gradWords() int { return GradRecordWords(e.set.Render, e.set.AbsGrad) }

// packedView is what a PackVisible projected and packed for (Engine.packed).
type packedView struct {
	cam      camera.Camera
	shDegree int
	count    int
}

// records is a renderer's input to a forward: count records in buf.
type records struct {
	buf   gpu.Buffer
	count int
}

// rayFlag is shard.cu's ray argument: which layout the records have.
func (e *Engine) rayFlag() uint32 {
	if e.set.Render == prep.Ray {
		return 1
	}
	return 0
}

// PackVisible projects the engine's splats for cam and writes a record for each one visible,
// in id order, local id i going out as global id base+i: an owner's share of a view for its
// renderer. It returns the engine's record buffer, which holds the records back to back
// (RecordWords each) until the next PackVisible or Close, and their count. The count is read
// back before the records are packed (the exchange sends the counts first, and the buffer is
// sized by it); the packing is queued on the device, in order with whatever reads the buffer
// next. The projection stays for the owner's share of the step's backward (StepFromGradients)
// until the engine projects, reallocates or changes its splats again.
func (e *Engine) PackVisible(cam *camera.Camera, shDegree int, base uint32) (gpu.Buffer, int, error) {
	if err := e.idle("pack visible"); err != nil {
		return nil, 0, err
	}
	if err := e.checkView(cam, shDegree); err != nil {
		return nil, 0, err
	}
	n := e.n
	if uint64(base)+uint64(n) > 1<<32 {
		return nil, 0, fmt.Errorf("fused: pack visible: global ids from %d for %d Gaussians pass 2³²", base, n)
	}
	e.packed = nil
	e.useView(0, 0, nil)
	e.timed = false
	if err := e.dev.Memset(e.ro.B, e.ro.Off, roWords*4, 0); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	if err := e.project(cam, shDegree); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: project: %w", err)
	}
	ro, err := e.readout()
	if err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	count := int(ro[roVisible])
	words := RecordWords(e.set.Render)
	if e.recs == nil || e.recs.Size() < count*words*4 {
		if err := e.ensure(&e.recs, (count+count/4)*words*4); err != nil {
			return nil, 0, fmt.Errorf("fused: pack visible: records of %d splats: %w", count, err)
		}
	}
	if err := e.k.PackFlags(gpu.BlocksFor(uint32(n+1), 256), gpu.Dim3{256}, abi.PackFlagsArgs{
		Valid: abi.B(e.valid), N: uint32(n), Flags: abi.B(e.visFlags)}); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	if err := e.scan(e.visFlags, n+1); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	if err := e.k.PackVisible(gpu.BlocksFor(uint32(n), 256), gpu.Dim3{256}, abi.PackVisibleArgs{
		Valid: abi.B(e.valid), Flags: abi.B(e.visFlags), N: uint32(n), Base: base, Ray: e.rayFlag(),
		Depth: abi.B(e.depth), Opacity: abi.B(e.opacity), Color: abi.B(e.color), Mean2d: abi.B(e.mean2d),
		Conic: abi.B(e.conic), RayU: abi.B(e.or(e.rayU)), RayA: abi.B(e.or(e.rayA)), RayHalf: abi.B(e.or(e.rayHalf)),
		BoundCenter: abi.B(e.boundCenter), BoundQ: abi.B(e.boundQ), Rect: abi.B(e.rect), Radius: abi.B(e.radius),
		Recs: abi.B(e.recs)}); err != nil {
		return nil, 0, fmt.Errorf("fused: pack visible: %w", err)
	}
	e.packed = &packedView{cam: *cam, shDegree: shDegree, count: count}
	e.packed.cam.Distortion.Params = slices.Clone(cam.Distortion.Params)
	return e.recs, count, nil
}

// RenderRecords draws count records (RecordWords each, back to back in recs, a buffer on the
// engine's device) for cam, as Render draws the engine's own splats: record k becomes local
// splat k (unpack), and bin, the depth sort and the forward rasterizer run on them. The depth
// sort breaks ties by local id; with the records in the order the exchange delivers (owners in
// rank order, each owner's in id order) and owners holding contiguous ranges of global ids,
// local ids follow global ids, so the image is the one an engine holding the whole scene
// renders, to the bit. The engine's own splats, parameters and state stay as they are; its
// per-view buffers grow to the count. Records are binned on the device: cpu-conic binning,
// which projects on the host, has nothing to bin them with.
func (e *Engine) RenderRecords(cam *camera.Camera, recs gpu.Buffer, count int, bg [3]float32) ([]float32, error) {
	if err := e.checkRecords("render records", cam, recs, count); err != nil {
		return nil, err
	}
	return e.render(cam, 0, bg, &records{buf: recs, count: count}, "render records")
}

// checkRecords checks a renderer's operation what on count records in recs for cam, and sizes
// the per-view buffers for them.
func (e *Engine) checkRecords(what string, cam *camera.Camera, recs gpu.Buffer, count int) error {
	if err := e.idle(what); err != nil {
		return err
	}
	if err := e.checkView(cam, 0); err != nil {
		return err
	}
	if e.set.BinMode == engine.BinCPUConic {
		return fmt.Errorf("fused: %s: cpu-conic binning projects on the host and cannot bin records; use gpu-conic or gpu-radius-aabb", what)
	}
	words := RecordWords(e.set.Render)
	switch {
	case count < 0:
		return fmt.Errorf("fused: %s: %d records", what, count)
	case count > 0 && recs == nil:
		return fmt.Errorf("fused: %s: %d records and no buffer", what, count)
	case count > 0 && recs.Size() < count*words*4:
		return fmt.Errorf("fused: %s: %d records of %d words, the buffer holds %d bytes", what, count, words, recs.Size())
	case uint64(count) >= 1<<32:
		return fmt.Errorf("fused: %s: %d records pass the u32 splat ids", what, count)
	}
	return e.growView(count)
}

// RenderRecordsBackward is a renderer's share of a sharded training step over count records
// (as RenderRecords takes them) for view v: the forward RenderRecords runs, the loss against
// v.Target, and raster_bwd, whose gradients of the records' prepared data it packs in record
// order: GradRecordWords floats a record (abi's GradRec*: colour, opacity, then EWA's mean2d,
// conic and, with engine.Settings.AbsGrad, mean2d's absolute sums, or the ray model's u and
// A), record k's from float k·GradRecordWords. So the first owner's records' gradients come
// first, each owner's in the order it sent them, and go back to it without ids. It returns
// the engine's buffer of them, which holds them until the next RenderRecordsBackward or
// Close, and the view's result: the loss and its terms, the records drawn (Visible), the
// tile-list entries, and the image when o.WantImage. The records carry no parameters, so
// nothing is updated: o's learning rates, SH degree and statistics are the owners' (their
// StepFromGradients), and no stage is timed.
func (e *Engine) RenderRecordsBackward(v *engine.View, recs gpu.Buffer, count int, o engine.StepOptions) (gpu.Buffer, engine.StepResult, error) {
	const what = "render records backward"
	cam := &v.Camera
	if err := e.checkRecords(what, cam, recs, count); err != nil {
		return nil, engine.StepResult{}, err
	}
	if w, h := cam.Width, cam.Height; len(v.Target) != w*h*3 {
		return nil, engine.StepResult{}, fmt.Errorf("fused: %s: target of view %d has %d values, want %d×%d×3", what, v.Index, len(v.Target), w, h)
	}
	if err := e.growPixels(cam.Width, cam.Height); err != nil {
		return nil, engine.StepResult{}, err
	}
	target, err := e.targetBuffer(v)
	if err != nil {
		return nil, engine.StepResult{}, err
	}
	words := e.gradWords()
	if e.gradRecs == nil || e.gradRecs.Size() < count*words*4 {
		if err := e.ensure(&e.gradRecs, (count+count/4)*words*4); err != nil {
			return nil, engine.StepResult{}, fmt.Errorf("fused: %s: gradients of %d records: %w", what, count, err)
		}
	}
	r := &records{buf: recs, count: count}
	ro, err := e.forwardFits(cam, 0, o.Background, r, what, func(p *pass) error {
		if err := e.rasterBackward(p, target, o.Background); err != nil {
			return err
		}
		return e.packGrads(count)
	})
	if err != nil {
		return nil, engine.StepResult{}, err
	}
	res := engine.StepResult{Visible: int(ro[roVisible]), Entries: int(ro[roEntries])}
	res.Loss, res.L1, res.MSE, res.SSIM = lossResult(e.set.Loss, e.set.SSIMLambda, &ro, cam.Width*cam.Height*3)
	if o.WantImage {
		if res.Image, err = e.downloadImage(cam.Width, cam.Height); err != nil {
			return nil, engine.StepResult{}, err
		}
	}
	return e.gradRecs, res, nil
}

// gradSum is what an owner's grads hold between its backwards from gradients and its update:
// the sum of views views' gradients, of SH degree shDegree (Engine.summed).
type gradSum struct {
	views    int
	shDegree int
}

// StepFromGradients is an owner's share of a sharded training step of one view, after its
// PackVisible for the view: BackwardFromGradients, then UpdateFromGradients. grads holds the
// gradients of the count records that PackVisible packed, as RenderRecordsBackward packs them
// (GradRecordWords floats each, in the records' order; a buffer on the engine's device). They go
// to the splats the records came from (scatter_grads), and project_bwd and Adam run on them as
// Step runs them after its own raster_bwd: the parameter gradients, the densification
// statistics when o.AccumulateStats, and the update, Adam's step count one further. The
// refusals are BackwardFromGradients' and UpdateFromGradients'. o's background and image go
// unused (the renderer drew the view, and its RenderRecordsBackward reports the loss, which is
// NaN here); the result's Visible is count and NonFinite Adam's dropped elements, and no stage
// is timed.
func (e *Engine) StepFromGradients(cam *camera.Camera, grads gpu.Buffer, count int, o engine.StepOptions) (engine.StepResult, error) {
	if err := e.BackwardFromGradients(cam, grads, count, o, false); err != nil {
		return engine.StepResult{}, err
	}
	res, err := e.UpdateFromGradients(o)
	res.Visible = count
	return res, err
}

// BackwardFromGradients is an owner's backward of one view of a sharded step, after its
// PackVisible for the view: grads holds the gradients of the count records that PackVisible
// packed (as StepFromGradients takes them). They go to the splats the records came from
// (scatter_grads) and project_bwd maps them to the parameter gradients, as a step's view does
// after its raster_bwd: with later, added to the gradients of the batch's earlier views since
// the last update (a batch's view j > 0, as StepBatch sums them), without, replacing them (the
// batch's first view). The densification statistics accumulate per view when
// o.AccumulateStats. UpdateFromGradients then takes the sum once. The gradients are mapped
// back through the projection PackVisible left, so PackVisible(cam, o.SHDegree, …) must be the
// engine's last projection, with the splats unchanged since: a render, step, edit, state
// upload or opacity reset in between, another camera or SH degree, or a count other than the
// records packed is refused (pack again). One PackVisible serves one backward: another would
// sum the same view twice. A later view is refused when no earlier view's gradients are summed
// (or a step, edit, state upload or opacity reset overwrote them) or its SH degree is not
// theirs. With MCMC, o.MCMC's Scene and Base must place the engine's share in the scene (the
// regularisers' means are over the scene, the noise keyed by global id). Nothing is read back.
func (e *Engine) BackwardFromGradients(cam *camera.Camera, grads gpu.Buffer, count int, o engine.StepOptions, later bool) error {
	const what = "backward from gradients"
	if err := e.idle(what); err != nil {
		return err
	}
	if err := e.checkView(cam, o.SHDegree); err != nil {
		return err
	}
	if err := e.checkShardStep(what, o); err != nil {
		return err
	}
	words := e.gradWords()
	pk := e.packed
	switch {
	case pk == nil:
		return fmt.Errorf("fused: %s: no PackVisible since the engine last projected, reallocated or changed its splats: pack the view first", what)
	case !identicalCamera(&pk.cam, cam):
		return fmt.Errorf("fused: %s: the last PackVisible was for another camera", what)
	case pk.shDegree != o.SHDegree:
		return fmt.Errorf("fused: %s: the last PackVisible was for SH degree %d, the step's is %d", what, pk.shDegree, o.SHDegree)
	case count != pk.count:
		return fmt.Errorf("fused: %s: gradients of %d records, PackVisible packed %d", what, count, pk.count)
	case count > 0 && grads == nil:
		return fmt.Errorf("fused: %s: %d records and no buffer", what, count)
	case count > 0 && grads.Size() < count*words*4:
		return fmt.Errorf("fused: %s: %d gradient records of %d floats, the buffer holds %d bytes", what, count, words, grads.Size())
	case later && e.summed == nil:
		return fmt.Errorf("fused: %s: a later view of a batch, and no earlier view's gradients to add to since the last update", what)
	case later && e.summed.shDegree != o.SHDegree:
		return fmt.Errorf("fused: %s: a later view of SH degree %d, the batch's earlier views' is %d", what, o.SHDegree, e.summed.shDegree)
	}
	prev := e.summed
	e.packed = nil // one backward per projection: a second would sum the view twice
	e.summed = nil // until project_bwd is queued, grads hold no whole sum
	e.useView(0, 0, nil)
	e.timed = false
	if err := e.dev.Memset(e.ro.B, e.ro.Off, roWords*4, 0); err != nil {
		return fmt.Errorf("fused: %s: %w", what, err)
	}
	if err := e.scatterGrads(grads, count); err != nil {
		return fmt.Errorf("fused: %s: %w", what, err)
	}
	if err := e.projectBwd(cam, o.SHDegree, o.AccumulateStats, later); err != nil {
		return fmt.Errorf("fused: %s: %w", what, err)
	}
	views := 1
	if later {
		views = prev.views + 1
	}
	e.summed = &gradSum{views: views, shDegree: o.SHDegree}
	return nil
}

// UpdateFromGradients is an owner's update of a sharded step, after the BackwardFromGradients
// of each of the batch's views: Adam runs once on the summed gradients with the batch's
// settings, as StepBatch's update does (the factor engine.BatchScale of the views summed, the
// moments and bias corrections of Adam's next step, the splats some view saw), and Adam's step
// count moves one further. o must be the backwards' options (its SH degree is checked); its
// learning rates are the step's. Without summed gradients (none since the last update, or a
// step, edit, state upload or opacity reset since) it is refused. The result's NonFinite is
// Adam's dropped elements and the loss NaN (the renderers report it); nothing is timed.
func (e *Engine) UpdateFromGradients(o engine.StepOptions) (engine.StepResult, error) {
	const what = "update from gradients"
	if err := e.idle(what); err != nil {
		return engine.StepResult{}, err
	}
	if err := e.checkShardStep(what, o); err != nil {
		return engine.StepResult{}, err
	}
	sum := e.summed
	switch {
	case sum == nil:
		return engine.StepResult{}, fmt.Errorf("fused: %s: no gradients summed since the last update (BackwardFromGradients first)", what)
	case sum.shDegree != o.SHDegree:
		return engine.StepResult{}, fmt.Errorf("fused: %s: SH degree %d, the gradients' is %d", what, o.SHDegree, sum.shDegree)
	}
	t := e.adamStep + 1
	shUsed := max(e.shUsed, o.SHDegree)
	ap, err := adamArgs(e.set.Adam, o.LR, t, e.n, o.MCMC, sum.views, shUsed)
	if err != nil {
		return engine.StepResult{}, err
	}
	e.shUsed = shUsed
	e.packed = nil // the update changes the splats the projection was of
	e.summed = nil
	e.useView(0, 0, nil)
	e.timed = false
	if err := e.dev.Memset(e.ro.B, e.ro.Off, roWords*4, 0); err != nil {
		return engine.StepResult{}, fmt.Errorf("fused: %s: %w", what, err)
	}
	if !e.gradsOnly {
		if err := e.update(o, ap); err != nil {
			return engine.StepResult{}, fmt.Errorf("fused: %s: %w", what, err)
		}
	}
	ro, err := e.readout()
	if err != nil {
		return engine.StepResult{}, fmt.Errorf("fused: %s: %w", what, err)
	}
	if !e.gradsOnly {
		e.adamStep = t
	}
	nan := math.NaN()
	return engine.StepResult{Loss: nan, L1: nan, MSE: nan, SSIM: nan, NonFinite: int(ro[roNonFinite])}, nil
}

// checkShardStep refuses an owner's backward or update (what) on an engine taking
// data-parallel steps, or with learning rates Adam cannot take, or with MCMC terms for a scene
// smaller than the engine's share: checked at the backward too, so that the update a backward
// leads to does not fail on them.
func (e *Engine) checkShardStep(what string, o engine.StepOptions) error {
	switch {
	case e.reduce != nil:
		return fmt.Errorf("fused: %s: the engine takes data-parallel steps (SetReduce)", what)
	case o.MCMC.Active() && o.MCMC.Scene != 0 && o.MCMC.Scene < e.n:
		return fmt.Errorf("fused: %s: MCMC over a scene of %d splats, the engine's share holds %d", what, o.MCMC.Scene, e.n)
	}
	if _, err := adamArgs(e.set.Adam, o.LR, e.adamStep+1, e.n, o.MCMC, 1, e.shUsed); err != nil {
		return fmt.Errorf("fused: %s: %w", what, err)
	}
	return nil
}

// identicalCamera reports whether a and b are the same camera in every parameter, pose and
// lens included.
func identicalCamera(a, b *camera.Camera) bool {
	return a.Width == b.Width && a.Height == b.Height && a.Fx == b.Fx && a.Fy == b.Fy && a.Cx == b.Cx && a.Cy == b.Cy &&
		a.R == b.R && a.T == b.T && a.Distortion.Model == b.Distortion.Model && slices.Equal(a.Distortion.Params, b.Distortion.Params)
}

// packGrads launches shard.cu's pack_grads: the prepared-data gradients of a renderer's count
// records, in record order, into gradRecs.
func (e *Engine) packGrads(count int) error {
	return e.k.PackGrads(gpu.BlocksFor(uint32(max(count, 1)), 256), gpu.Dim3{256}, abi.PackGradsArgs{
		Count: uint32(count), Ray: e.rayFlag(), AbsGrad: e.absGrad(), GColor: e.pgAt(pgColor), GOpacity: e.pgAt(pgOpacity),
		GMean2d: e.pgAt(pgMean2D), GConic: e.pgAt(pgConic), GRayU: e.pgAt(pgRayU), GRayA: e.pgAt(pgRayA),
		GMean2dAbs: e.pgAt(pgMean2DAbs), Grecs: abi.B(e.gradRecs)})
}

// scatterGrads zeroes pg's fields in use and launches shard.cu's scatter_grads: count
// gradient records in grads, in PackVisible's order, into pg at the splats they came from,
// those splats into vis in id order, and count into the readout's visible count, as
// project_bwd reads them.
func (e *Engine) scatterGrads(grads gpu.Buffer, count int) error {
	if err := e.zeroPG(); err != nil {
		return err
	}
	n := e.n
	return e.k.ScatterGrads(gpu.BlocksFor(uint32(n), 256), gpu.Dim3{256}, abi.ScatterGradsArgs{
		Grecs: abi.B(e.or(grads)), Valid: abi.B(e.valid), Flags: abi.B(e.visFlags), N: uint32(n), Count: uint32(count),
		Ray: e.rayFlag(), AbsGrad: e.absGrad(), GColor: e.pgAt(pgColor), GOpacity: e.pgAt(pgOpacity),
		GMean2d: e.pgAt(pgMean2D), GConic: e.pgAt(pgConic), GRayU: e.pgAt(pgRayU), GRayA: e.pgAt(pgRayA),
		GMean2dAbs: e.pgAt(pgMean2DAbs), Vis: abi.B(e.vis), Readout: e.ro})
}

// unpack launches shard.cu's unpack: r's records become the forward's splats 0 … count−1,
// valid, and the readout's visible count.
func (e *Engine) unpack(r *records) error {
	return e.k.Unpack(gpu.BlocksFor(uint32(max(r.count, 1)), 256), gpu.Dim3{256}, abi.UnpackArgs{
		Recs: abi.B(e.or(r.buf)), Count: uint32(r.count), Ray: e.rayFlag(), Valid: abi.B(e.valid), Depth: abi.B(e.depth),
		Opacity: abi.B(e.opacity), Color: abi.B(e.color), Mean2d: abi.B(e.mean2d), Conic: abi.B(e.conic),
		RayU: abi.B(e.or(e.rayU)), RayA: abi.B(e.or(e.rayA)), RayHalf: abi.B(e.or(e.rayHalf)),
		BoundCenter: abi.B(e.boundCenter), BoundQ: abi.B(e.boundQ), Rect: abi.B(e.rect), Radius: abi.B(e.radius),
		Readout: e.ro})
}

package fused

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/loss"
)

// maxAttempts bounds the reruns of a step whose tile lists overflowed (each rerun has room for
// the count the last attempt measured, so a second rerun means the count moved).
const maxAttempts = 3

// pass is one enqueued forward (and, for a step, backward) with what it measured on the host.
type pass struct {
	cam      *camera.Camera
	tiles    int
	hostTime map[string]time.Duration // cpu-conic: the host's stages
	// whole: only events 0 and 8 were recorded (a replayed graph, or a batch of views), and
	// the step reports its whole time.
	whole bool
}

// enqueueStep queues q's work behind prev (or nil): launch by launch with an event between
// stages, or as one graph replay when graphs are on (SetGraphs) and the device has them.
func (e *Engine) enqueueStep(q, prev *inflight) (*pass, error) {
	// cpu-conic uploads mid-step: not capturable; a batch resumed after an overflow runs eagerly
	// rather than replace the graph of whole batches for once.
	if e.graphs && e.set.BinMode != engine.BinCPUConic && q.start == 0 && e.reduce == nil {
		p, err := e.graphStep(q, prev)
		if !errors.Is(err, gpu.ErrUnsupported) {
			return p, err
		}
		e.graphs = false // the device has no graphs: eager from now on
		e.skip("graph capture", "steps run launch by launch")
	}
	return e.stepWork(q, prev)
}

// stepWork enqueues q's views from q.start on, each forward and backward, then the update: the
// views' gradients summed in grads (project_bwd, seen marking the splats written) and adam_step
// on their mean. One view records every stage event; a batch records events 0 and 8 only.
func (e *Engine) stepWork(q, prev *inflight) (*pass, error) {
	// A data-parallel step (SetReduce) takes the batch path whatever its views: the
	// reduction goes between the gradients and the update.
	batch := len(q.views) > 1 || e.reduce != nil
	timed := e.timed
	if batch {
		if err := e.record(0); err != nil {
			return nil, err
		}
		e.timed = false
		defer func() { e.timed = timed }()
	}
	p := &pass{cam: &q.views[len(q.views)-1]}
	e.summed = nil // the step's project_bwd writes grads and seen over an owner's sums
	if e.reduce != nil && q.start == 0 {
		// The ranks sum whole gradient buffers: a splat this rank's views did not see must
		// hold zeros, not a stale step's gradients.
		if err := e.dev.Memset(e.grads, 0, e.n*paramFloats*4, 0); err != nil {
			return nil, err
		}
	}
	for j := q.start; j < len(q.views); j++ {
		e.useView(q.slot, j, prev)
		var err error
		if p, err = e.forward(&q.views[j], q.o.SHDegree, q.o.Background, nil); err != nil {
			return nil, err
		}
		if err := e.viewBackward(p, q.tgts[j], q.o, j > 0); err != nil {
			return nil, err
		}
	}
	if e.gradsOnly {
		return p, nil
	}
	if e.reduce != nil {
		last := len(q.views) - 1
		e.useView(q.slot, last, prev)
		if err := e.ensure(&e.gradsSum, e.capN*paramFloats*4); err != nil {
			return nil, err
		}
		if err := e.ensure(&e.seenSum, e.capN*4); err != nil {
			return nil, err
		}
		rd := Reduction{Grads: e.grads, Seen: e.seen, GradsOut: e.gradsSum, SeenOut: e.seenSum, N: e.n, Readout: e.ro.B,
			AbortOff: e.ro.Off + roAbort*4, PeerOff: e.ro.Off + roPeer*4}
		if err := e.reduce(rd); err != nil {
			return nil, fmt.Errorf("fused: reducing the gradients across the ranks: %w", err)
		}
	}
	if err := e.update(q.o, q.ap); err != nil {
		return nil, err
	}
	if batch {
		e.timed = timed
		p.whole = true
		return p, e.record(8)
	}
	return p, nil
}

// graphStep captures q's work, folds the capture into e.graph and replays it between events 0
// and 8.
func (e *Engine) graphStep(q, prev *inflight) (*pass, error) {
	if e.keys == nil { // allocate outside the capture
		if err := e.growLists(4 * e.n); err != nil {
			return nil, err
		}
	}
	if err := e.dev.BeginCapture(); err != nil {
		return nil, err
	}
	e.capturing = true
	p, err := e.stepWork(q, prev)
	e.capturing = false
	g, endErr := e.dev.EndCapture()
	if err = errors.Join(err, endErr); err != nil {
		if g != nil {
			err = errors.Join(err, g.Close())
		}
		return nil, err
	}
	switch {
	case e.graph == nil:
		e.graph = g
	default:
		uerr := e.graph.Update(g)
		if errors.Is(uerr, gpu.ErrGraphChanged) {
			// Another shape (the first step after a change of the SH degree or the image
			// size, say): replace the graph; the next instantiation happens at its launch.
			uerr = e.graph.Close()
			e.graph = g
		} else if uerr != nil {
			uerr = errors.Join(uerr, g.Close())
		}
		if uerr != nil {
			return nil, uerr
		}
	}
	p.whole = true
	if !e.timed {
		return p, e.graph.Launch()
	}
	if err := e.dev.Record(e.events[0]); err != nil {
		return nil, err
	}
	if err := e.graph.Launch(); err != nil {
		return nil, err
	}
	return p, e.dev.Record(e.events[len(e.events)-1])
}

// inflight is a step queued on the device: what it needs to be enqueued again (after its lists
// overflowed) and, once read back, its result.
type inflight struct {
	views []camera.Camera // the batch's cameras
	tgts  []gpu.Buffer    // and targets
	o     engine.StepOptions
	ap    abi.AdamP // Adam's arguments for step t
	t     int64     // its Adam step
	slot  int       // its readout blocks and events
	// start is the first view to enqueue: 0, or after an overflow the view that overflowed
	// (the views before it have summed their gradients and statistics, which stay).
	start     int
	p         *pass
	overflows int
	done      bool
	res       engine.StepResult
}

// Step runs one training step (design.md §5) as one submission on the device's queue and
// reads back the readout block (and the image when o.WantImage).
func (e *Engine) Step(v *engine.View, o engine.StepOptions) (engine.StepResult, error) {
	return e.StepBatch([]*engine.View{v}, o)
}

// StepBatch runs one training step over a batch of views (engine.Engine), as Step does one.
func (e *Engine) StepBatch(vs []*engine.View, o engine.StepOptions) (engine.StepResult, error) {
	if err := e.idle("step"); err != nil {
		return engine.StepResult{}, err
	}
	if err := e.SubmitBatch(vs, o); err != nil {
		return engine.StepResult{}, err
	}
	return e.Collect()
}

// Submit queues a training step for one view (SubmitBatch).
func (e *Engine) Submit(v *engine.View, o engine.StepOptions) error {
	return e.SubmitBatch([]*engine.View{v}, o)
}

// Reduction is what a data-parallel step hands its reduction (SetReduce) between the views'
// gradients and the update, to be combined across the ranks on the device's queue, in order
// with the step's work: Grads [59·N] f32 summed into GradsOut, Seen [N] u32 maxed into
// SeenOut, and the u32 word at AbortOff of Readout maxed into the word at PeerOff (some rank's
// views overflowed: no rank updates, and each runs the step again). The inputs must stay as
// they are: a rank that runs the step again from a later view, or only its reduction, sums
// into them on from where they were.
type Reduction struct {
	Grads, Seen       gpu.Buffer
	GradsOut, SeenOut gpu.Buffer
	N                 int
	Readout           gpu.Buffer
	AbortOff, PeerOff int // byte offsets into Readout
}

// SetReduce makes every later step a rank's share of a data-parallel step: its gradients
// start from zero, reduce is called between the views' gradients and the update (on the
// goroutine enqueuing the step; every rank calls its own at the same point), and the update
// takes the reduced gradients as the batch's (StepPart gives the batch's size). Steps run
// launch by launch. nil turns it off.
func (e *Engine) SetReduce(reduce func(Reduction) error) { e.reduce = reduce }

// StepPart runs this rank's share vs of a data-parallel step over a batch of total views
// (SetReduce): the update scales the reduced gradients by engine.BatchScale(total).
func (e *Engine) StepPart(vs []*engine.View, total int, o engine.StepOptions) (engine.StepResult, error) {
	if e.reduce == nil {
		return engine.StepResult{}, errors.New("fused: a step's share needs a reduction (SetReduce)")
	}
	if total < len(vs) {
		return engine.StepResult{}, fmt.Errorf("fused: a share of %d views of a batch of %d", len(vs), total)
	}
	if err := e.idle("step"); err != nil {
		return engine.StepResult{}, err
	}
	e.batchViews = total
	defer func() { e.batchViews = 0 }()
	if err := e.SubmitBatch(vs, o); err != nil {
		return engine.StepResult{}, err
	}
	return e.Collect()
}

// SubmitBatch queues a training step over the views vs and returns without waiting for it;
// Collect returns the results in submission order, each as StepBatch would have. A step
// submitted while another is still queued goes on the device right behind it, so that the
// device runs from one step to the next while the host reads the first one's readout (the
// host's turn between steps is ~0.25 ms, 7% of a bonsai step on the H200). At most two steps
// are outstanding.
//
// The second step is enqueued before the first is known to have fitted its tile lists. If a
// view of the first overflows, its bin_total flag makes every later view skip, the second
// step's as well (bin.cu), and Collect runs both again in order once the lists have grown,
// the first from the view that overflowed, so the results are those of one step after the
// other. A step whose predecessor asked for its image, or that needs buffers in use
// reallocated, or cpu-conic binning (host work mid-step), waits for its predecessor first.
func (e *Engine) SubmitBatch(vs []*engine.View, o engine.StepOptions) error {
	if len(e.queue) == 2 {
		return errors.New("fused: submit: two steps already queued; collect one first")
	}
	if len(vs) == 0 {
		return errors.New("fused: submit: a step needs at least one view")
	}
	cams := make([]camera.Camera, len(vs))
	for j, v := range vs {
		cams[j] = v.Camera
		if err := e.checkView(&cams[j], o.SHDegree); err != nil {
			return err
		}
		if w, h := cams[j].Width, cams[j].Height; len(v.Target) != w*h*3 {
			return fmt.Errorf("fused: target of view %d has %d values, want %d×%d×3", v.Index, len(v.Target), w, h)
		}
	}
	var prev *inflight
	if len(e.queue) == 1 && !e.queue[0].done {
		prev = e.queue[0]
		if prev.o.WantImage || e.set.BinMode == engine.BinCPUConic || !e.fits(vs) {
			if err := e.finish(prev); err != nil {
				return e.fail(err)
			}
			prev = nil
		}
	}
	// No step runs now whose readouts are still to be read (fits leaves prev only with room).
	if err := e.growBatch(len(vs)); err != nil {
		return err
	}
	if err := e.growBigBits(); err != nil { // a no-op while prev runs (fits)
		return err
	}
	t := e.adamStep + 1
	if prev != nil {
		t++
	}
	views := len(vs)
	if e.batchViews > 0 {
		views = e.batchViews
	}
	e.shUsed = max(e.shUsed, o.SHDegree)
	ap, err := adamArgs(e.set.Adam, o.LR, t, e.n, o.MCMC, views, e.shUsed)
	if err != nil {
		return err
	}
	q := &inflight{views: cams, tgts: make([]gpu.Buffer, len(vs)), o: o, ap: ap, t: t}
	for j, v := range vs {
		if err := e.growPixels(cams[j].Width, cams[j].Height); err != nil {
			return err
		}
		if q.tgts[j], err = e.targetBuffer(v); err != nil {
			return err
		}
	}
	if len(e.queue) == 1 {
		q.slot = 1 - e.queue[0].slot
	}
	if err := e.enqueue(q, prev); err != nil {
		return e.fail(fmt.Errorf("fused: step: %w", err))
	}
	e.queue = append(e.queue, q)
	return nil
}

// Collect waits for the oldest submitted step and returns its result.
func (e *Engine) Collect() (engine.StepResult, error) {
	if len(e.queue) == 0 {
		return engine.StepResult{}, errors.New("fused: collect: no step submitted")
	}
	q := e.queue[0]
	if !q.done {
		if err := e.finish(q); err != nil {
			return engine.StepResult{}, e.fail(err)
		}
	}
	e.queue = append(e.queue[:0], e.queue[1:]...)
	return q.res, nil
}

// fits says whether a step for vs needs no buffer reallocated that a queued step may still use.
func (e *Engine) fits(vs []*engine.View) bool {
	if len(vs) > e.batchCap || e.keys == nil || e.bigBits == nil || max(e.bigBitsWant, minBigBits) > e.bigBitsCap {
		return false
	}
	for _, v := range vs {
		w, h, ts := v.Camera.Width, v.Camera.Height, e.set.TileSize
		tiles := ((w + ts - 1) / ts) * ((h + ts - 1) / ts)
		if w*h > e.pxCap || tiles+1 > e.tileCap {
			return false
		}
		if t := e.targets[v.Index]; t != nil && t.buf.Size() < len(v.Target)*4 {
			return false
		}
	}
	return true
}

// fail drops the queued steps after a failure (their results are lost, and the device state
// they leave is whatever got done) and returns err.
func (e *Engine) fail(err error) error {
	e.queue = nil
	return err
}

// idle reports the steps submitted and not collected, which every other operation waits for
// the caller to collect first.
func (e *Engine) idle(op string) error {
	if len(e.queue) > 0 {
		return fmt.Errorf("fused: %s: %d submitted steps not collected", op, len(e.queue))
	}
	return nil
}

// useView points the launches at view j's readout block of slot and the slot's events; prev is
// the step queued before (whose last view's readout bin_total reads for its abort flag) or nil.
func (e *Engine) useView(slot, j int, prev *inflight) {
	e.ro = abi.At(e.readouts[slot], j*roWords*4)
	e.events = e.slotEvents[slot][:]
	switch {
	case j > 0:
		e.prevRo = abi.At(e.readouts[slot], (j-1)*roWords*4)
	case prev != nil:
		e.prevRo = abi.At(e.readouts[prev.slot], (len(prev.views)-1)*roWords*4)
	default:
		e.prevRo = e.ro
	}
}

// enqueue queues q's work behind prev (or nil) and the event its readouts wait for.
func (e *Engine) enqueue(q, prev *inflight) error {
	e.timed = q.o.WantTimings && !e.noEvents
	e.useView(q.slot, q.start, prev)
	p, err := e.enqueueStep(q, prev)
	if err != nil {
		return err
	}
	q.p = p
	if e.noEvents {
		return nil // readSlot waits for all queued work instead
	}
	return e.dev.Record(e.ends[q.slot])
}

// finish reads the oldest queued step's readouts, running it again from the view that
// overflowed (and the step queued behind it, which skipped) while its lists overflow, and
// completes its result.
func (e *Engine) finish(q *inflight) error {
	for {
		ros, err := e.readSlot(q.slot, len(q.views))
		if err != nil {
			return fmt.Errorf("fused: step: %w", err)
		}
		k := slices.IndexFunc(ros, func(ro readout) bool { return ro[roAbort] != 0 })
		peer := k < 0 && ros[len(ros)-1][roPeer] != 0
		if k < 0 && !peer {
			return e.complete(q, ros)
		}
		q.overflows++
		if q.overflows == maxAttempts {
			if peer {
				return fmt.Errorf("fused: step: another rank's tile lists overflowed %d times", q.overflows)
			}
			return fmt.Errorf("fused: step: the tile lists overflowed %d times (last count %d entries)", q.overflows, ros[k][roEntries])
		}
		if peer {
			// Every view here ran and summed its gradients; another rank's overflowed, and no
			// rank updated. Run the reduction and the update again with the other ranks.
			k = len(q.views)
		} else {
			// The step behind q skipped its work; let it end before the lists it was given
			// are reallocated.
			if err := e.dev.Sync(); err != nil {
				return fmt.Errorf("fused: step: %w", err)
			}
			if err := e.growLists(int(ros[k][roEntries])); err != nil {
				return err
			}
		}
		q.start = k
		if err := e.enqueue(q, nil); err != nil {
			return fmt.Errorf("fused: step: %w", err)
		}
		if len(e.queue) == 2 && e.queue[0] == q {
			if err := e.enqueue(e.queue[1], q); err != nil {
				return fmt.Errorf("fused: step: %w", err)
			}
		}
	}
}

// readSlot downloads the readout blocks of slot's first views views once the step that wrote
// them has ended, while any step queued behind it runs on.
func (e *Engine) readSlot(slot, views int) ([]readout, error) {
	b := make([]byte, views*roWords*4)
	if e.noEvents {
		// No end event to wait for: wait for everything queued, the step behind included.
		if err := e.dev.Download(b, e.readouts[slot], 0); err != nil {
			return nil, err
		}
	} else if err := e.dev.DownloadAfter(b, e.readouts[slot], 0, e.ends[slot]); err != nil {
		return nil, err
	}
	ros := make([]readout, views)
	for j := range ros {
		ros[j] = readoutFromBytes(b[j*roWords*4 : (j+1)*roWords*4])
	}
	return ros, nil
}

// complete fills the result of q, whose readouts ros say every view ran: the loss and the
// counts are the means over its views.
func (e *Engine) complete(q *inflight, ros []readout) error {
	e.adamStep = q.t
	var res engine.StepResult
	e.bigBitsWant = 0
	var visible, entries int
	for j := range ros {
		ro := &ros[j]
		w, h := q.views[j].Width, q.views[j].Height
		e.bigBitsWant = max(e.bigBitsWant, int(ro[roBigBits]))
		visible += int(ro[roVisible])
		entries += int(ro[roEntries])
		res.NonFinite += int(ro[roNonFinite])
		l, l1, mse, ssim := lossResult(e.set.Loss, e.set.SSIMLambda, ro, w*h*3)
		res.Loss += l
		res.L1 += l1
		res.MSE += mse
		res.SSIM += ssim
	}
	nv := len(ros)
	res.MeanOver(nv, visible, entries)
	ev := e.slotEvents[q.slot][:]
	switch {
	case !q.o.WantTimings, e.noEvents: // without events there is nothing to time with
	case q.p.whole:
		ms, err := e.dev.ElapsedMs(ev[0], ev[len(ev)-1])
		if err != nil {
			return fmt.Errorf("fused: timing the step: %w", err)
		}
		res.Timings = map[string]time.Duration{engine.StageStep: time.Duration(float64(ms) * float64(time.Millisecond))}
	default:
		var err error
		if res.Timings, err = e.timings(q.p, ev, true); err != nil {
			return err
		}
	}
	if q.o.WantImage { // nothing is queued behind a step that wants its image (Submit)
		last := q.views[len(q.views)-1]
		var err error
		if res.Image, err = e.downloadImage(last.Width, last.Height); err != nil {
			return err
		}
	}
	q.res, q.done = res, true
	return nil
}

// lossResult turns the readout's sums into the loss and its components (internal/loss's Loss).
func lossResult(kind loss.Kind, lambda float32, ro *readout, values int) (l, l1, mse, ssim float64) {
	n := float64(values)
	l1, mse = ro.sum(roL1)/n, ro.sum(roSq)/n
	ssim = math.NaN()
	lam := float64(lambda)
	if kind.UsesSSIM() {
		ssim = ro.sum(roSSIM) / n
	}
	switch kind {
	case loss.L1SSIM:
		l = (1-lam)*l1 + lam*(1-ssim)
	case loss.MSE:
		l = mse
	case loss.MSESSIM:
		l = (1-lam)*mse + lam*(1-ssim)
	}
	return l, l1, mse, ssim
}

// Render draws the current Gaussians for a camera.
func (e *Engine) Render(cam *camera.Camera, shDegree int, bg [3]float32) ([]float32, error) {
	if err := e.idle("render"); err != nil {
		return nil, err
	}
	if err := e.checkView(cam, shDegree); err != nil {
		return nil, err
	}
	return e.render(cam, shDegree, bg, nil, "render")
}

// render runs a forward (of the engine's splats, or of recs: RenderRecords) until its tile
// lists fit, and downloads the image; what names the operation in errors.
func (e *Engine) render(cam *camera.Camera, shDegree int, bg [3]float32, recs *records, what string) ([]float32, error) {
	if _, err := e.forwardFits(cam, shDegree, bg, recs, what, nil); err != nil {
		return nil, err
	}
	return e.downloadImage(cam.Width, cam.Height)
}

// forwardFits enqueues a forward (of the engine's splats, or of recs), then whatever then
// enqueues behind it (nil: nothing), and reads the readout, again with longer tile lists while
// they overflow; what names the operation in errors. The stages behind the forward must do
// nothing while readout[RO_ABORT] is set, or be run again whole, as then is.
func (e *Engine) forwardFits(cam *camera.Camera, shDegree int, bg [3]float32, recs *records, what string, then func(*pass) error) (readout, error) {
	if err := e.growPixels(cam.Width, cam.Height); err != nil {
		return readout{}, err
	}
	if err := e.growBigBits(); err != nil {
		return readout{}, err
	}
	e.useView(0, 0, nil)
	e.timed = false
	for attempt := 1; ; attempt++ {
		p, err := e.forward(cam, shDegree, bg, recs)
		if err != nil {
			return readout{}, fmt.Errorf("fused: %s: %w", what, err)
		}
		if then != nil {
			if err := then(p); err != nil {
				return readout{}, fmt.Errorf("fused: %s: %w", what, err)
			}
		}
		ro, err := e.readout()
		if err != nil {
			return readout{}, fmt.Errorf("fused: %s: %w", what, err)
		}
		e.bigBitsWant = int(ro[roBigBits])
		if ro[roAbort] == 0 {
			return ro, nil
		}
		if attempt == maxAttempts {
			return readout{}, fmt.Errorf("fused: %s: the tile lists overflowed %d times", what, attempt)
		}
		if err := e.growLists(int(ro[roEntries])); err != nil {
			return readout{}, err
		}
	}
}

func (e *Engine) downloadImage(w, h int) ([]float32, error) {
	img := make([]float32, w*h*3)
	if err := gpu.DownloadF32(e.dev, img, e.image); err != nil {
		return nil, fmt.Errorf("fused: download image: %w", err)
	}
	return img, nil
}

// readout downloads the readout block (waiting for the queued work).
func (e *Engine) readout() (readout, error) {
	b := make([]byte, roWords*4)
	if err := e.dev.Download(b, e.ro.B, e.ro.Off); err != nil {
		return readout{}, err
	}
	return readoutFromBytes(b), nil
}

// record queues the timing event of stage boundary i (0 = before the first stage) when the
// step is timed; while a step is being captured there are no stage boundaries to time
// (graphStep times the replay).
func (e *Engine) record(i int) error {
	if e.capturing || !e.timed {
		return nil
	}
	return e.dev.Record(e.events[i])
}

// forward enqueues project, bin, sort (with ranges) and the forward rasterization for the
// view ro points at, recording events 0..4 around them. With recs (a renderer's records,
// RenderRecords), unpack takes project's place and the forward covers the records' splats.
func (e *Engine) forward(cam *camera.Camera, shDegree int, bg [3]float32, recs *records) (*pass, error) {
	ts := e.set.TileSize
	tiles := ((cam.Width + ts - 1) / ts) * ((cam.Height + ts - 1) / ts)
	p := &pass{cam: cam, tiles: tiles}
	n := e.n
	if recs != nil {
		n = recs.count
	}
	e.packed = nil // project or unpack overwrites PackVisible's projection
	e.lastW, e.lastH, e.lastN = cam.Width, cam.Height, n
	if e.keys == nil {
		if err := e.growLists(4 * n); err != nil {
			return nil, err
		}
	}
	if err := e.dev.Memset(e.ro.B, e.ro.Off, roWords*4, 0); err != nil {
		return nil, err
	}
	if err := e.record(0); err != nil {
		return nil, err
	}
	if err := e.pixelRays(cam); err != nil {
		return nil, err
	}
	if e.set.BinMode == engine.BinCPUConic {
		if err := e.hostBin(cam, shDegree, p); err != nil {
			return nil, err
		}
	} else {
		if recs != nil {
			if err := e.unpack(recs); err != nil {
				return nil, err
			}
		} else if err := e.project(cam, shDegree); err != nil {
			return nil, err
		}
		if err := e.record(1); err != nil {
			return nil, err
		}
		if err := e.bin(cam, shDegree, n); err != nil {
			return nil, err
		}
		if err := e.record(2); err != nil {
			return nil, err
		}
		if err := e.sort(tiles); err != nil {
			return nil, err
		}
		if err := e.ranges(tiles); err != nil {
			return nil, err
		}
		if err := e.record(3); err != nil {
			return nil, err
		}
	}
	if err := e.rasterFwd(cam, bg, tiles); err != nil {
		return nil, err
	}
	return p, e.record(4)
}

// viewBackward enqueues a view's loss and both backward passes, recording events 5..7: the
// parameter gradients into grads, summed with the batch's earlier views' when later.
func (e *Engine) viewBackward(p *pass, target gpu.Buffer, o engine.StepOptions, later bool) error {
	if err := e.rasterBackward(p, target, o.Background); err != nil {
		return err
	}
	if err := e.projectBwd(p.cam, o.SHDegree, o.AccumulateStats, later); err != nil {
		return err
	}
	return e.record(7)
}

// rasterBackward enqueues a view's loss and raster_bwd, recording events 5 and 6: the
// gradients of the forward's prepared data in pg, of the engine's splats or of a renderer's
// records (RenderRecordsBackward).
func (e *Engine) rasterBackward(p *pass, target gpu.Buffer, bg [3]float32) error {
	cam := p.cam
	if err := e.loss(target, cam.Width, cam.Height); err != nil {
		return err
	}
	if err := e.record(5); err != nil {
		return err
	}
	if err := e.rasterBwd(cam, bg, p.tiles); err != nil {
		return err
	}
	return e.record(6)
}

// update enqueues Adam over the summed gradients and the MCMC noise, recording event 8.
func (e *Engine) update(o engine.StepOptions, ap abi.AdamP) error {
	grads, seen := e.grads, e.seen
	if e.reduce != nil {
		grads, seen = e.gradsSum, e.seenSum
	}
	if err := e.adam(ap, grads, seen); err != nil {
		return err
	}
	if err := e.mcmcNoise(o.MCMC); err != nil {
		return err
	}
	return e.record(8)
}

// timings reads the stage times between the recorded events (after the readout, so the
// events have completed); cpu-conic's host stages are wall times.
func (e *Engine) timings(p *pass, events []gpu.Event, step bool) (map[string]time.Duration, error) {
	last := 4
	if step {
		last = len(engine.Stages)
	}
	out := make(map[string]time.Duration, last)
	for i := 0; i < last; i++ {
		name := engine.Stages[i]
		if p.hostTime != nil && i < 3 {
			out[name] = p.hostTime[name]
			continue
		}
		ms, err := e.dev.ElapsedMs(events[i], events[i+1])
		if err != nil {
			return nil, fmt.Errorf("fused: timing %s: %w", name, err)
		}
		out[name] = time.Duration(float64(ms) * float64(time.Millisecond))
	}
	return out, nil
}

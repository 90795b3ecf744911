package fused

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
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
	graphed  bool                     // replayed as a graph: only events 0 and 8 were recorded
}

// enqueueStep queues the step's work: launch by launch with an event between stages, or as
// one graph replay when graphs are on (SetGraphs) and the device has them.
func (e *Engine) enqueueStep(cam *camera.Camera, tgt gpu.Buffer, o engine.StepOptions, ap []byte) (*pass, error) {
	if e.graphs && e.set.BinMode != engine.BinCPUConic { // cpu-conic uploads mid-step: not capturable
		p, err := e.graphStep(cam, tgt, o, ap)
		if !errors.Is(err, gpu.ErrUnsupported) {
			return p, err
		}
		e.graphs = false // the device has no graphs: eager from now on
	}
	p, err := e.forward(cam, o.SHDegree, o.Background)
	if err != nil {
		return nil, err
	}
	return p, e.backward(p, tgt, o, ap)
}

// graphStep captures the step, folds the capture into e.graph and replays it between events 0
// and 8.
func (e *Engine) graphStep(cam *camera.Camera, tgt gpu.Buffer, o engine.StepOptions, ap []byte) (*pass, error) {
	if e.keys == nil { // allocate outside the capture
		if err := e.growLists(4 * e.n); err != nil {
			return nil, err
		}
	}
	if err := e.dev.BeginCapture(); err != nil {
		return nil, err
	}
	e.capturing = true
	p, err := e.forward(cam, o.SHDegree, o.Background)
	if err == nil {
		err = e.backward(p, tgt, o, ap)
	}
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
	p.graphed = true
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

// Step runs one training step (design.md §5) as one submission on the device's queue and
// reads back the readout block (and the image when o.WantImage).
func (e *Engine) Step(v *engine.View, o engine.StepOptions) (engine.StepResult, error) {
	cam := &v.Camera
	if err := e.checkView(cam, o.SHDegree); err != nil {
		return engine.StepResult{}, err
	}
	w, h := cam.Width, cam.Height
	if len(v.Target) != w*h*3 {
		return engine.StepResult{}, fmt.Errorf("fused: target of view %d has %d values, want %d×%d×3", v.Index, len(v.Target), w, h)
	}
	t := e.adamStep + 1
	ap, err := adamBytes(e.set.Adam, o.LR, t, e.n)
	if err != nil {
		return engine.StepResult{}, err
	}
	if err := e.growPixels(w, h); err != nil {
		return engine.StepResult{}, err
	}
	tgt, err := e.targetBuffer(v)
	if err != nil {
		return engine.StepResult{}, err
	}
	e.timed = o.WantTimings
	var ro readout
	var p *pass
	for attempt := 1; ; attempt++ {
		p, err = e.enqueueStep(cam, tgt, o, ap)
		if err == nil {
			ro, err = e.readout()
		}
		if err != nil {
			return engine.StepResult{}, fmt.Errorf("fused: step: %w", err)
		}
		if ro[roAbort] == 0 {
			break
		}
		if attempt == maxAttempts {
			return engine.StepResult{}, fmt.Errorf("fused: step: the tile lists overflowed %d times (last count %d entries)", attempt, ro[roEntries])
		}
		if err := e.growLists(int(ro[roEntries])); err != nil {
			return engine.StepResult{}, err
		}
	}
	e.adamStep = t
	res := engine.StepResult{
		Visible: int(ro[roVisible]), Entries: int(ro[roEntries]), NonFinite: int(ro[roNonFinite]),
	}
	res.Loss, res.L1, res.MSE, res.SSIM = lossResult(e.set.Loss, e.set.SSIMLambda, &ro, w*h*3)
	switch {
	case !e.timed:
	case p.graphed:
		ms, err := e.dev.ElapsedMs(e.events[0], e.events[len(e.events)-1])
		if err != nil {
			return engine.StepResult{}, fmt.Errorf("fused: timing the step: %w", err)
		}
		res.Timings = map[string]time.Duration{engine.StageStep: time.Duration(float64(ms) * float64(time.Millisecond))}
	default:
		if res.Timings, err = e.timings(p, true); err != nil {
			return engine.StepResult{}, err
		}
	}
	if o.WantImage {
		if res.Image, err = e.downloadImage(w, h); err != nil {
			return engine.StepResult{}, err
		}
	}
	return res, nil
}

// lossResult turns the readout's sums into the loss and its components (internal/loss's Loss).
func lossResult(kind loss.Kind, lambda float32, ro *readout, values int) (l, l1, mse, ssim float64) {
	n := float64(values)
	l1, mse = ro.f64(roL1)/n, ro.f64(roSq)/n
	ssim = math.NaN()
	lam := float64(lambda)
	if kind.UsesSSIM() {
		ssim = ro.f64(roSSIM) / n
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
	if err := e.checkView(cam, shDegree); err != nil {
		return nil, err
	}
	if err := e.growPixels(cam.Width, cam.Height); err != nil {
		return nil, err
	}
	e.timed = false
	for attempt := 1; ; attempt++ {
		if _, err := e.forward(cam, shDegree, bg); err != nil {
			return nil, fmt.Errorf("fused: render: %w", err)
		}
		ro, err := e.readout()
		if err != nil {
			return nil, fmt.Errorf("fused: render: %w", err)
		}
		if ro[roAbort] == 0 {
			break
		}
		if attempt == maxAttempts {
			return nil, fmt.Errorf("fused: render: the tile lists overflowed %d times", attempt)
		}
		if err := e.growLists(int(ro[roEntries])); err != nil {
			return nil, err
		}
	}
	return e.downloadImage(cam.Width, cam.Height)
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
	if err := e.dev.Download(b, e.readoutBuf, 0); err != nil {
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

// forward enqueues project, bin, sort (with ranges) and the forward rasterization, recording
// events 0..4 around them.
func (e *Engine) forward(cam *camera.Camera, shDegree int, bg [3]float32) (*pass, error) {
	ts := e.set.TileSize
	tiles := ((cam.Width + ts - 1) / ts) * ((cam.Height + ts - 1) / ts)
	p := &pass{cam: cam, tiles: tiles}
	e.lastW, e.lastH = cam.Width, cam.Height
	if e.keys == nil {
		if err := e.growLists(4 * e.n); err != nil {
			return nil, err
		}
	}
	if err := e.dev.Memset(e.readoutBuf, 0, roWords*4, 0); err != nil {
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
		if err := e.project(cam, shDegree); err != nil {
			return nil, err
		}
		if err := e.record(1); err != nil {
			return nil, err
		}
		if err := e.bin(cam, shDegree); err != nil {
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

// backward enqueues the loss, both backward passes and Adam, recording events 5..8.
func (e *Engine) backward(p *pass, target gpu.Buffer, o engine.StepOptions, ap []byte) error {
	cam := p.cam
	if err := e.loss(target, cam.Width, cam.Height); err != nil {
		return err
	}
	if err := e.record(5); err != nil {
		return err
	}
	if err := e.rasterBwd(cam, o.Background, p.tiles); err != nil {
		return err
	}
	if err := e.record(6); err != nil {
		return err
	}
	if err := e.projectBwd(cam, o.SHDegree, o.AccumulateStats); err != nil {
		return err
	}
	if err := e.record(7); err != nil {
		return err
	}
	if err := e.adam(ap); err != nil {
		return err
	}
	return e.record(8)
}

// timings reads the stage times between the recorded events (after the readout, so the
// events have completed); cpu-conic's host stages are wall times.
func (e *Engine) timings(p *pass, step bool) (map[string]time.Duration, error) {
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
		ms, err := e.dev.ElapsedMs(e.events[i], e.events[i+1])
		if err != nil {
			return nil, fmt.Errorf("fused: timing %s: %w", name, err)
		}
		out[name] = time.Duration(float64(ms) * float64(time.Millisecond))
	}
	return out, nil
}

package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/adam"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/io/scene"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/plot"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Trainer runs one training of an engine on a dataset.
type Trainer struct {
	opt Options
	ds  *dataset.Dataset
	eng engine.Engine

	pcg *rand.PCG
	rng *rand.Rand

	step     int
	order    []int // shuffled training-view order of the current epoch
	orderPos int

	// shapes and stats hold the last refinement's reads, their arrays reused by the next
	// (engine.Reader): refinements read a million splats' values every hundred steps.
	shapes engine.Shapes
	stats  engine.Stats
	// spare receives the states of checkpoints whose files are written (the writer's
	// goroutine hands each back once done with it), for the next checkpoint to read into
	// (engine.StateReader); reused counts the checkpoints that did.
	spare  chan *engine.State
	reused int
	// slowWrite, when set (tests), runs before each checkpoint's file is written, on the
	// writer's goroutine.
	slowWrite func()

	curve   []curvePoint
	metrics *os.File
	emit    func(Event)
	phases  Phases
	writes  *writer // previews and checkpoints being written during Run
	ahead   *queued // the next step, already submitted to a pipelining engine
	// sceneDue says the Observer wants the Gaussians after the current step.
	sceneDue bool
	// photosSaved holds the photos already queued by saveEvalRender (each is written once).
	photosSaved map[string]bool
	runID       string
	// coarse holds the training views at the coarse-to-fine factor of the current step (nil
	// at full size).
	coarse *coarseViews
}

// queued is a step submitted to an engine.Pipeliner before the one before it was collected.
type queued struct {
	step int
	view string // its view's name, for errors
}

// Phases is where a run's wall time went, so that a user (and a benchmark) can see what
// besides the steps costs time: densification, evaluation, previews, checkpoints, and the
// end's export (the final scene and curve written, and the last checkpoint's write waited for).
type Phases struct {
	Steps, Densify, Eval, Preview, Checkpoint, Export time.Duration
}

// Phases returns the time spent so far in each phase of Run (this process only).
func (t *Trainer) Phases() Phases { return t.phases }

// curvePoint is one entry of the training curve drawn at the end.
type curvePoint struct {
	Step       int
	Loss, PSNR float64
	TestPSNR   float64 // NaN where no evaluation happened
}

// New prepares a trainer. The engine must already hold the initial
// Gaussians (see Initial).
func New(opt Options, ds *dataset.Dataset, eng engine.Engine) (*Trainer, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if len(ds.Train) == 0 {
		return nil, fmt.Errorf("train: the dataset has no training views")
	}
	pcg := rand.NewPCG(opt.Seed, 0x5eed)
	return &Trainer{opt: opt, ds: ds, eng: eng, pcg: pcg, rng: rand.New(pcg), runID: opt.RunID}, nil
}

// Initial builds the starting Gaussians for a dataset: its SfM points, or
// random points in a cube when asked or when it has none (the returned
// notice says so), or the splats of a scene file (init mode "scene").
func Initial(opt Options, ds *dataset.Dataset) (*splat.Gaussians, string, error) {
	if opt.InitMode == "scene" {
		s, err := scene.ReadFile(opt.InitScene)
		if err != nil {
			return nil, "", fmt.Errorf("train: init.scene: %w", err)
		}
		notice := fmt.Sprintf("starting from the %d splats of %s (%s, SH degree %d)", s.Gaussians.Len(), opt.InitScene, s.Format, s.SHDegree)
		for _, w := range s.Warnings {
			notice += "; " + w
		}
		return s.Gaussians, notice, nil
	}
	notice := ""
	xyz, rgb := ds.Points, ds.PointColors
	if opt.InitMode == "random" || len(xyz) == 0 {
		if opt.InitMode != "random" {
			notice = fmt.Sprintf("the dataset has no SfM points: starting from %d random points", opt.InitRandomCount)
		}
		rng := rand.New(rand.NewPCG(opt.Seed, 0x1a17))
		centre := cameraCentroid(ds)
		xyz, rgb = RandomPoints(rng, opt.InitRandomCount, centre, opt.InitRandomScale*ds.Extent)
	}
	if len(xyz) == 0 {
		return nil, "", engine.ErrEmpty
	}
	scale := opt.InitScale
	if scale == 0 {
		scale = 1
	}
	g := FromPoints(xyz, rgb, opt.InitOpacity, scale, max(opt.Workers, 1))
	if err := g.Validate(); err != nil {
		return nil, "", fmt.Errorf("train: initial Gaussians: %w", err)
	}
	return g, notice, nil
}

// cameraCentroid is the point the cameras look at on average: the least
// squares intersection of their optical axes, or their mean centre when the
// axes are near parallel.
func cameraCentroid(ds *dataset.Dataset) [3]float64 {
	var a [3][3]float64
	var b [3]float64
	var mean [3]float64
	views := append(append([]dataset.View(nil), ds.Train...), ds.Test...)
	for _, v := range views {
		c := v.Camera.Center()
		d := [3]float64{v.Camera.R[2][0], v.Camera.R[2][1], v.Camera.R[2][2]} // optical axis in world
		for i := 0; i < 3; i++ {
			mean[i] += c[i] / float64(len(views))
			for j := 0; j < 3; j++ {
				p := -d[i] * d[j]
				if i == j {
					p++
				}
				a[i][j] += p
				b[i] += p * c[j]
			}
		}
	}
	x, ok := solve3(a, b)
	if !ok {
		return mean
	}
	return x
}

func solve3(a [3][3]float64, b [3]float64) ([3]float64, bool) {
	det := a[0][0]*(a[1][1]*a[2][2]-a[1][2]*a[2][1]) - a[0][1]*(a[1][0]*a[2][2]-a[1][2]*a[2][0]) + a[0][2]*(a[1][0]*a[2][1]-a[1][1]*a[2][0])
	if math.Abs(det) < 1e-9 {
		return [3]float64{}, false
	}
	var x [3]float64
	for k := 0; k < 3; k++ {
		m := a
		for i := 0; i < 3; i++ {
			m[i][k] = b[i]
		}
		x[k] = (m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) - m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) + m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])) / det
	}
	return x, true
}

// Step is the number of steps done.
func (t *Trainer) Step() int { return t.step }

// shDegree is the SH degree in use at 1-based step s: +1 every interval.
func (t *Trainer) shDegree(s int) int { return min(t.opt.SHDegree, s/t.opt.SHInterval) }

// lr returns the learning rates of step s (1-based).
func (t *Trainer) lr(s int) engine.LR {
	o := &t.opt
	steps := o.MeansLRSteps
	if steps <= 0 {
		steps = o.Iterations
	}
	ext := t.ds.Extent
	// A batch of B views averages B gradients: gsplat scales every rate by √B (the square-root
	// rule for Adam), with its betas and ε (app.EngineSettings, engine.AdamSettings.ForBatch).
	b := math.Sqrt(float64(o.batch()))
	return engine.LR{
		Means:     float32(b * adam.ExpDecay(o.MeansLR*ext, o.MeansLRFinal*ext, s, steps)),
		LogScales: float32(b * o.ScalesLR),
		Quats:     float32(b * o.QuatsLR),
		Opacity:   float32(b * o.OpacityLR),
		SHDC:      float32(b * o.SHDCLR),
		SHRest:    float32(b * o.SHRestLR),
	}
}

// nextView pops the next training view of a shuffled epoch.
func (t *Trainer) nextView() int {
	if t.orderPos >= len(t.order) {
		t.order = t.rng.Perm(len(t.ds.Train))
		t.orderPos = 0
	}
	v := t.order[t.orderPos]
	t.orderPos++
	return v
}

// Run trains until the configured number of iterations, reporting events.
// Cancelling ctx stops after the current step and writes a checkpoint.
func (t *Trainer) Run(ctx context.Context, emit func(Event)) error {
	if emit == nil {
		emit = func(Event) {}
	}
	o := &t.opt
	if t.runID == "" {
		t.runID = NewRunID(time.Now())
	}
	if ob := o.Observer; ob != nil {
		inner := emit
		emit = func(ev Event) { inner(ev); ob.Event(ev) }
	}
	t.emit = emit
	for _, d := range []string{o.OutDir, filepath.Join(o.OutDir, "checkpoints"), filepath.Join(o.OutDir, "previews")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	if len(o.ConfigYAML) > 0 {
		// The run ID as a comment: config.yaml stays a configuration any command reads.
		yaml := append([]byte("# run "+t.runID+"\n"), o.ConfigYAML...)
		if err := writeFileAtomic(filepath.Join(o.OutDir, "config.yaml"), yaml); err != nil {
			return err
		}
	}
	// A resumed run appends to its metrics; a fresh one starts them anew.
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if t.step == 0 {
		flags |= os.O_TRUNC
	}
	mf, err := os.OpenFile(filepath.Join(o.OutDir, "metrics.jsonl"), flags, 0o644)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	t.metrics = mf
	defer mf.Close()
	if t.step == 0 {
		t.logJSON(map[string]any{"run": t.runID, "started": time.Now().UTC().Format(time.RFC3339)})
	} else {
		t.logJSON(map[string]any{"run": t.runID, "resumed_at_step": t.step, "at": time.Now().UTC().Format(time.RFC3339)})
	}

	t.writes = newWriter()
	defer func() {
		if t.writes != nil { // a failed run: its writes finish, their own errors aside
			t.writes.close(emit)
			t.writes = nil
		}
	}()
	start := time.Now()
	window := newRateWindow(50)
	for t.step < o.Iterations {
		// A step already submitted ahead runs to the end first (runStep submits none once
		// ctx is done), so that the checkpoint holds every step the engine ran.
		if err := ctx.Err(); err != nil && t.ahead == nil {
			cerr := t.checkpoint()
			cerr = errors.Join(cerr, t.writes.close(emit))
			t.writes = nil
			if cerr != nil {
				return fmt.Errorf("train: interrupted at step %d, and the checkpoint failed: %w", t.step, cerr)
			}
			return fmt.Errorf("train: interrupted at step %d (checkpoint written): %w", t.step, err)
		}
		s := t.step + 1
		stepStart := time.Now()
		t.sceneDue = o.Observer != nil && o.Observer.WantScene(s)
		res, err := t.runStep(ctx, s)
		if err != nil {
			return err
		}
		// Previews and evaluation see the step's result before its densification and
		// opacity reset, as the original's training report does: an evaluation right after
		// a reset would measure the reset, not the training.
		if t.previewDue(s) {
			at := time.Now()
			if err := t.preview(s); err != nil {
				return err
			}
			t.phases.Preview += time.Since(at)
		}
		if t.evalDue(s) {
			at := time.Now()
			if err := t.evaluate(s); err != nil {
				return err
			}
			t.phases.Eval += time.Since(at)
		}
		densified, err := t.densifyStep(s)
		if err != nil {
			return err
		}
		t.step = s
		window.add(time.Since(stepStart))
		psnr := psnrFromMSE(res.MSE)
		if t.logs(s) {
			t.curve = append(t.curve, curvePoint{Step: s, Loss: res.Loss, PSNR: psnr, TestPSNR: math.NaN()})
			t.logJSON(map[string]any{
				"step": s, "loss": res.Loss, "l1": res.L1, "mse": res.MSE, "ssim": res.SSIM, "psnr": psnr,
				"gaussians": t.eng.Len(), "sh_degree": t.shDegree(s), "step_ms": msOf(time.Since(stepStart)),
				"elapsed_s": time.Since(start).Seconds(), "stage_ms": stageMillis(res.Timings),
			})
		}
		emit(Progress{Step: s, Total: o.Iterations, Loss: res.Loss, PSNR: psnr, Gaussians: t.eng.Len(),
			StepsPerSec: window.rate(), ElapsedSec: time.Since(start).Seconds(), SHDegree: t.shDegree(s),
			Densified: densified, StageMillis: stageMillis(res.Timings)})
		if err := t.observe(ctx, s); err != nil {
			return err
		}

		if t.checkpointDue(s) {
			at := time.Now()
			if err := t.checkpoint(); err != nil {
				return err
			}
			t.phases.Checkpoint += time.Since(at)
		}
		if err := t.writes.collect(false, emit); err != nil {
			return err
		}
	}
	// The final scene is read back and written while the writer's goroutine still writes the
	// last checkpoint, so that the two files' encoding and syncing overlap (the run waited for
	// the checkpoint first).
	at := time.Now()
	ferr := t.finish()
	err = errors.Join(t.writes.close(emit), ferr)
	t.writes = nil
	t.phases.Export += time.Since(at)
	return err
}

// observe hands the Observer the scene after step s when it asked for it, then waits while
// it holds the run paused. The copy is the engine's read-back; encoding it is the observer's
// business, off this goroutine.
func (t *Trainer) observe(ctx context.Context, s int) error {
	ob := t.opt.Observer
	if ob == nil {
		return nil
	}
	if t.sceneDue {
		g, err := t.eng.Gaussians()
		if err != nil {
			return fmt.Errorf("train: step %d: reading the Gaussians back for the viewer: %w", s, err)
		}
		ob.Scene(s, g, t.shDegree(s))
	}
	ob.Hold(ctx)
	return nil
}

// logs says whether step s writes a metrics line (and so asks the engine for its stage times).
func (t *Trainer) logs(s int) bool {
	return s%max(t.opt.LogEvery, 1) == 0 || s == 1 || s == t.opt.Iterations
}

// previewDue, evalDue and checkpointDue say what the host does after step s besides
// densification (densifyDue, resetDue). A preview also follows the last step, so that a run
// shorter than preview_every still leaves a picture of its result.
func (t *Trainer) previewDue(s int) bool {
	return t.opt.PreviewEvery > 0 && (s%t.opt.PreviewEvery == 0 || s == t.opt.Iterations)
}

func (t *Trainer) evalDue(s int) bool {
	return slices.Contains(t.opt.EvalSteps, s) || s == t.opt.Iterations
}

func (t *Trainer) checkpointDue(s int) bool {
	o := &t.opt
	return (o.CheckpointEvery > 0 && s%o.CheckpointEvery == 0) || s == o.Iterations
}

// densifyDue and resetDue say whether densification and the opacity reset follow step s.
// Neither follows the last step, whose state is what the run writes: splats added there would
// never be trained, and a reset there (a run of 3000 steps, say) would leave the written scene
// nearly transparent. The original writes its PLY before that step's densification too.
func (t *Trainer) densifyDue(s int) bool {
	d := &t.opt.Densify
	if t.opt.mcmc() {
		m := &d.MCMC
		return d.Enabled && s < m.Until && s < t.opt.Iterations && s > m.From && s%m.Every == 0
	}
	return d.Enabled && s < d.Until && s < t.opt.Iterations && s > d.From && s%d.Every == 0
}

func (t *Trainer) resetDue(s int) bool {
	o := &t.opt
	d := &o.Densify
	white := o.Background == [3]float32{1, 1, 1} && !o.RandomBackground
	return d.Enabled && d.OpacityReset && !o.mcmc() && s < d.Until && s < o.Iterations &&
		((d.ResetEvery > 0 && s%d.ResetEvery == 0) || (white && s == d.From))
}

// quiet says whether the host leaves the engine alone after step s but for reading its
// result: nothing above is due and s is not the last step.
func (t *Trainer) quiet(s int) bool {
	return s < t.opt.Iterations && !t.sceneDue && !t.previewDue(s) && !t.evalDue(s) && !t.checkpointDue(s) &&
		!t.densifyDue(s) && !t.resetDue(s)
}

// runStep runs the engine's training step s (1-based). On an engine that pipelines, step s+1
// is submitted behind s before s is collected whenever the host has nothing else to do with
// the engine after s, so that the device goes straight on while the host takes its turn (the
// readout, the metrics, the next view). The views, backgrounds and every random draw are taken
// in the same order either way, and the engine runs the same steps on the same state.
func (t *Trainer) runStep(ctx context.Context, s int) (engine.StepResult, error) {
	at := time.Now()
	defer func() { t.phases.Steps += time.Since(at) }()
	pl, ok := t.eng.(engine.Pipeliner)
	if !ok {
		vs, o, name, err := t.prepare(s)
		if err != nil {
			return engine.StepResult{}, err
		}
		res, err := t.eng.StepBatch(vs, o)
		return t.checked(s, name, res, err)
	}
	var name string
	if q := t.ahead; q != nil && q.step == s {
		name, t.ahead = q.view, nil
	} else {
		vs, o, n, err := t.prepare(s)
		if err != nil {
			return engine.StepResult{}, err
		}
		if err := pl.SubmitBatch(vs, o); err != nil {
			return engine.StepResult{}, fmt.Errorf("train: step %d (%s): %w", s, n, err)
		}
		name = n
	}
	if t.quiet(s) && ctx.Err() == nil {
		vs, o, n, err := t.prepare(s + 1)
		if err != nil {
			return engine.StepResult{}, err
		}
		if err := pl.SubmitBatch(vs, o); err != nil {
			return engine.StepResult{}, fmt.Errorf("train: step %d (%s): %w", s+1, n, err)
		}
		t.ahead = &queued{step: s + 1, view: n}
	}
	res, err := pl.Collect()
	return t.checked(s, name, res, err)
}

// prepare draws step s's views (train.batch_size of them) and background and returns what the
// engine needs for them, with their names ("view NAME", "views A, B"); the views are scaled
// down while the coarse-to-fine schedule says so.
func (t *Trainer) prepare(s int) ([]*engine.View, engine.StepOptions, string, error) {
	o := &t.opt
	vs := make([]*engine.View, o.batch())
	views := make([]*dataset.View, len(vs))
	names := make([]string, len(vs))
	for j := range vs {
		vi := t.nextView()
		view, err := t.trainView(vi, s)
		if err != nil {
			return nil, engine.StepOptions{}, "", err
		}
		vs[j], views[j], names[j] = &engine.View{Index: vi, Camera: view.Camera}, view, view.Name
	}
	// One background for the whole batch, drawn after its views (as gsplat draws one a step).
	bg := o.Background
	if o.RandomBackground {
		bg = [3]float32{t.rng.Float32(), t.rng.Float32(), t.rng.Float32()}
	}
	for j, v := range vs {
		v.Target = t.target(views[j], bg)
	}
	d := &o.Densify
	lr := t.lr(s)
	name := "view " + names[0]
	if len(names) > 1 {
		name = "views " + strings.Join(names, ", ")
	}
	return vs, engine.StepOptions{
		SHDegree:        t.shDegree(s),
		LR:              lr,
		Background:      bg,
		AccumulateStats: d.Enabled && s < d.Until && !o.mcmc(),
		WantTimings:     t.logs(s),
		MCMC:            t.mcmcStep(s, lr),
	}, name, nil
}

// checked wraps a step's error with the step and view, and refuses a non-finite loss.
func (t *Trainer) checked(s int, view string, res engine.StepResult, err error) (engine.StepResult, error) {
	if err != nil {
		return res, fmt.Errorf("train: step %d (view %s): %w", s, view, err)
	}
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return res, fmt.Errorf("train: step %d (view %s): the loss is %v", s, view, res.Loss)
	}
	return res, nil
}

// densifyStep applies the densification and opacity reset due after step s; it reports
// whether the Gaussians were densified.
func (t *Trainer) densifyStep(s int) (bool, error) {
	at := time.Now()
	defer func() { t.phases.Densify += time.Since(at) }()
	densified := false
	if t.densifyDue(s) {
		refine := t.densify
		if t.opt.mcmc() {
			refine = t.mcmcRefine
		}
		if err := refine(s); err != nil {
			return false, err
		}
		densified = true
	}
	if t.resetDue(s) {
		if err := t.eng.ResetOpacity(0.01); err != nil {
			return false, fmt.Errorf("train: step %d: opacity reset: %w", s, err)
		}
	}
	if t.eng.Len() == 0 {
		return false, fmt.Errorf("train: step %d: every Gaussian was pruned", s)
	}
	return densified, nil
}

// target is the view's photo over background bg. The dataset composited
// RGBA photos over its own background; another background is blended in
// through the kept alpha: rgb' = rgb + (1 − α)·(bg' − bg).
func (t *Trainer) target(v *dataset.View, bg [3]float32) []float32 {
	if v.Alpha == nil || bg == t.ds.Background {
		return v.Image.RGB
	}
	out := make([]float32, len(v.Image.RGB))
	for i, a := range v.Alpha {
		for c := 0; c < 3; c++ {
			out[i*3+c] = v.Image.RGB[i*3+c] + (1-a)*(bg[c]-t.ds.Background[c])
		}
	}
	return out
}

func (t *Trainer) logJSON(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	t.metrics.Write(append(b, '\n'))
}

// evaluate renders every test view (or the training views when there is no
// test split) and reports mean PSNR and SSIM of the renders clamped to [0,1].
func (t *Trainer) evaluate(s int) error {
	views, split := t.ds.Test, "test"
	if len(views) == 0 {
		views, split = t.ds.Train, "train"
	}
	// A view is scored on the host while the next one renders: the scorer takes the views one
	// at a time, in order (the evaluator's buffers serve one view), on its own goroutine, and
	// the loop hands it a view only once it has finished the one before.
	var psnrSum, ssimSum, ssim3Sum float64
	var ev *loss.Evaluator
	var imgs [2][]float32 // the view being scored and the one being rendered
	var scoring chan error
	wait := func() error {
		if scoring == nil {
			return nil
		}
		err := <-scoring
		scoring = nil
		return err
	}
	score := func(v *dataset.View, img, target []float32) error {
		var err error
		if ev == nil {
			ev, err = loss.NewEvaluator(v.Camera.Width, v.Camera.Height, max(t.opt.Workers, 1))
		} else {
			err = ev.Resize(v.Camera.Width, v.Camera.Height)
		}
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		p, err := loss.PSNR(img, target)
		if err != nil {
			return fmt.Errorf("train: %w", err)
		}
		ss, ss3, err := ev.SSIMs(img, target)
		if err != nil {
			return fmt.Errorf("train: evaluating %s: %w", v.Name, err)
		}
		psnrSum += p
		ssimSum += ss
		ssim3Sum += ss3
		return nil
	}
	for k := range views {
		v := &views[k]
		raw, err := t.eng.Render(&v.Camera, t.shDegree(s), t.opt.Background)
		if err != nil {
			return errors.Join(fmt.Errorf("train: evaluating %s: %w", v.Name, err), wait())
		}
		// Scored as the image a viewer shows, clamped to [0,1], as the original 3DGS and
		// gsplat score it; the unclamped render read up to ~0.15 dB lower on bonsai.
		img := loss.Clamp01(imgs[k%2], raw)
		imgs[k%2] = img
		target := t.target(v, t.opt.Background)
		if t.opt.SaveEvalRenders {
			if err := t.saveEvalRender(s, v.Name, img, target, v.Camera.Width, v.Camera.Height); err != nil {
				return errors.Join(err, wait())
			}
		}
		if err := wait(); err != nil {
			return err
		}
		scoring = make(chan error, 1)
		go func() { scoring <- score(v, img, target) }()
	}
	if err := wait(); err != nil {
		return err
	}
	n := float64(len(views))
	e := Evaluated{Step: s, Split: split, PSNR: psnrSum / n, SSIM: ssimSum / n, SSIM3DGS: ssim3Sum / n, Views: len(views), Gaussians: t.eng.Len()}
	if t.opt.SaveEvalRenders {
		e.RendersDir = t.evalDir(s)
	}
	if len(t.curve) > 0 && t.curve[len(t.curve)-1].Step == s {
		t.curve[len(t.curve)-1].TestPSNR = e.PSNR
	} else {
		t.curve = append(t.curve, curvePoint{Step: s, Loss: math.NaN(), PSNR: math.NaN(), TestPSNR: e.PSNR})
	}
	t.logJSON(map[string]any{"step": s, "eval": split, "psnr": e.PSNR, "ssim": e.SSIM, "ssim_3dgs": e.SSIM3DGS, "views": e.Views, "gaussians": e.Gaussians})
	t.emit(e)
	return nil
}

// saveEvalRender queues the PNG of one evaluated view's clamped render under
// OUT/eval/step-NNNNN/, and of its photo under OUT/eval/photos/ the first time, with the
// view's own name, so that the pairs line up for any external scorer.
func (t *Trainer) saveEvalRender(s int, name string, img, target []float32, w, h int) error {
	base := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name)) + ".png"
	render := filepath.Join(t.evalDir(s), base)
	photo := filepath.Join(t.opt.OutDir, "eval", "photos", base)
	jobs := []struct {
		path string
		rgb  []float32
	}{{render, append([]float32(nil), img...)}} // copies: both buffers are reused
	if !t.photosSaved[photo] {
		if t.photosSaved == nil {
			t.photosSaved = map[string]bool{}
		}
		t.photosSaved[photo] = true
		jobs = append(jobs, struct {
			path string
			rgb  []float32
		}{photo, append([]float32(nil), target...)})
	}
	for _, j := range jobs {
		err := t.writes.queue(func() (Saved, error) {
			if err := os.MkdirAll(filepath.Dir(j.path), 0o755); err != nil {
				return Saved{}, fmt.Errorf("train: evaluation render: %w", err)
			}
			if err := imageio.SavePNG(j.path, j.rgb, w, h); err != nil {
				return Saved{}, fmt.Errorf("train: evaluation render: %w", err)
			}
			return Saved{Kind: "eval-render", Path: j.path}, nil
		}, t.emit)
		if err != nil {
			return err
		}
	}
	return nil
}

func (t *Trainer) evalDir(s int) string {
	return filepath.Join(t.opt.OutDir, "eval", fmt.Sprintf("step-%05d", s))
}

// preview writes the render of a fixed view next to its target.
// previewMaxWidth caps the width of each half of a preview: a 4K test view would make a
// 16-megapixel PNG nobody opens during a run.
const previewMaxWidth = 800

// preview writes the render of a fixed view beside its photo at the view's size (each half
// capped at previewMaxWidth), labelled "render" and "photo", with the step and the render's
// PSNR (clamped to [0,1], as evaluation scores it) drawn below.
func (t *Trainer) preview(s int) error {
	views := t.ds.Test
	if len(views) == 0 {
		views = t.ds.Train
	}
	v := views[min(max(t.opt.PreviewView, 0), len(views)-1)]
	raw, err := t.eng.Render(&v.Camera, t.shDegree(s), t.opt.Background)
	if err != nil {
		return fmt.Errorf("train: preview: %w", err)
	}
	img := loss.Clamp01(nil, raw)
	target := slices.Clone(t.target(&v, t.opt.Background)) // the target's buffer may be reused
	psnr, err := loss.PSNR(img, target)
	if err != nil {
		return fmt.Errorf("train: preview: %w", err)
	}
	path := filepath.Join(t.opt.OutDir, "previews", fmt.Sprintf("step-%05d.png", s))
	w, h := v.Camera.Width, v.Camera.Height
	caption := fmt.Sprintf("step %d   PSNR %.2f dB   %s", s, psnr, v.Name)
	return t.writes.queue(func() (Saved, error) {
		render, err := previewHalf(img, w, h)
		if err != nil {
			return Saved{}, fmt.Errorf("train: preview: %w", err)
		}
		photo, err := previewHalf(target, w, h)
		if err != nil {
			return Saved{}, fmt.Errorf("train: preview: %w", err)
		}
		if err := imageio.WritePNG(path, plot.Pair(render, photo, "render", "photo", caption)); err != nil {
			return Saved{}, fmt.Errorf("train: preview: %w", err)
		}
		return Saved{Kind: "preview", Path: path}, nil
	}, t.emit)
}

// previewHalf is one half of a preview: rgb [h*w*3], area-averaged down to previewMaxWidth
// when wider.
func previewHalf(rgb []float32, w, h int) (*image.RGBA, error) {
	if w > previewMaxWidth {
		nh := max(1, int(math.Round(float64(h)*previewMaxWidth/float64(w))))
		small, err := imageio.Resize(&imageio.Image{W: w, H: h, RGB: rgb}, previewMaxWidth, nh)
		if err != nil {
			return nil, err
		}
		rgb, w, h = small.RGB, small.W, small.H
	}
	return imageio.ToRGBA(rgb, w, h)
}

// finish writes the final splat file and the training curve.
func (t *Trainer) finish() error {
	g, err := t.eng.Gaussians()
	if err != nil {
		return fmt.Errorf("train: reading the Gaussians back: %w", err)
	}
	path := filepath.Join(t.opt.OutDir, "point_cloud.ply")
	if err := ply.WriteFile(path, g, t.opt.SHDegree, "rlxsplat run "+t.runID, fmt.Sprintf("rlxsplat step %d", t.step)); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	t.emit(Saved{Kind: "ply", Path: path})
	cpath := filepath.Join(t.opt.OutDir, "training_curve.png")
	if err := writeCurve(cpath, t.curve); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	t.emit(Saved{Kind: "curve", Path: cpath})
	return nil
}

func psnrFromMSE(mse float64) float64 {
	if mse <= 0 {
		return 100
	}
	return -10 * math.Log10(mse)
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func stageMillis(m map[string]time.Duration) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = msOf(v)
	}
	return out
}

// rateWindow measures steps per second over the last n steps.
type rateWindow struct {
	d   []time.Duration
	pos int
	sum time.Duration
}

func newRateWindow(n int) *rateWindow { return &rateWindow{d: make([]time.Duration, 0, n)} }

func (r *rateWindow) add(d time.Duration) {
	if len(r.d) < cap(r.d) {
		r.d = append(r.d, d)
	} else {
		r.sum -= r.d[r.pos]
		r.d[r.pos] = d
		r.pos = (r.pos + 1) % len(r.d)
	}
	r.sum += d
}

func (r *rateWindow) rate() float64 {
	if r.sum <= 0 {
		return 0
	}
	return float64(len(r.d)) / r.sum.Seconds()
}

// writeFileAtomic writes data so that a crash never leaves a partial file.
func writeFileAtomic(path string, data []byte) error {
	err := atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(data); return err }, nil)
	if err != nil {
		return fmt.Errorf("train: writing %s: %w", path, err)
	}
	return nil
}

// readShapes reads the engine's shapes, into the trainer's arrays when the engine can
// (engine.Reader); the result is valid until the next call.
func (t *Trainer) readShapes() (engine.Shapes, error) {
	if r, ok := t.eng.(engine.Reader); ok {
		err := r.ShapesInto(&t.shapes)
		return t.shapes, err
	}
	return t.eng.Shapes()
}

// readStats is readShapes for the densification statistics.
func (t *Trainer) readStats() (engine.Stats, error) {
	if r, ok := t.eng.(engine.Reader); ok {
		err := r.StatsInto(&t.stats)
		return t.stats, err
	}
	return t.eng.Stats()
}

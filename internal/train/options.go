// Package train drives an Engine through a whole training run: view order,
// schedules (SH degree, learning rates), densification policy, evaluation,
// previews, checkpoints and the final splat file (design.md §1, §6, §7).
//
// It never prints: progress travels as Events that the command line turns
// into a progress bar. It never touches per-step device data: it asks the
// engine for readouts (loss, images, statistics) when it needs them.
package train

import (
	"fmt"
	"math"
)

// Options are the trainer's settings, resolved from the config by the caller.
type Options struct {
	Iterations int
	Seed       uint64
	// BatchSize is the number of views a step renders and back-propagates (0 means 1); the
	// learning rates are scaled by its square root (the engine's Adam settings must follow
	// engine.AdamSettings.ForBatch).
	BatchSize int

	SHDegree   int // final SH degree
	SHInterval int // +1 degree every SHInterval steps

	// Learning rates. Means rates are multiplied by the scene extent.
	MeansLR, MeansLRFinal float64
	MeansLRSteps          int // decay horizon; 0 = Iterations
	ScalesLR, QuatsLR     float64
	OpacityLR             float64
	SHDCLR, SHRestLR      float64

	Background       [3]float32
	RandomBackground bool

	Densify DensifyOptions

	// Init
	InitMode        string // "sfm" | "random" | "scene"
	InitScene       string // the scene file of init mode "scene"
	InitRandomCount int
	InitOpacity     float32
	InitScale       float64 // factor on the nearest-neighbour scales; 0 means 1
	InitRandomScale float64 // half-size of the random cube as a fraction of the extent

	EvalSteps    []int
	LogEvery     int
	PreviewEvery int
	PreviewView  int
	// SaveEvalRenders writes each evaluation's renders and, once, the photos as PNGs.
	SaveEvalRenders bool
	CheckpointEvery int
	KeepCheckpoints int

	// CoarseScale > 1 trains step s < CoarseUntil on the photos scaled down by
	// round(CoarseScale^(1−s/CoarseUntil)) (coarse.go).
	CoarseScale int
	CoarseUntil int

	OutDir string
	// RunID names the run in its files (NewRunID); empty: a new one. Resume replaces it
	// with the checkpoint's.
	RunID string
	// ConfigYAML is the resolved configuration, written to out/config.yaml
	// and into every checkpoint.
	ConfigYAML []byte
	Workers    int

	// Observer, when set, sees every event, may take copies of the scene between steps, and
	// may pause the run (train --view).
	Observer Observer
}

// DensifyOptions is the adaptive density control policy (the original's
// defaults are in design.md §6).
type DensifyOptions struct {
	Enabled bool
	// Strategy is "adc" (the fields below) or "mcmc" (MCMC); "" means adc.
	Strategy      string
	MCMC          MCMCOptions
	From, Until   int
	Every         int
	GradThreshold float64
	PercentDense  float64
	SplitN        int
	PruneOpacity  float64
	ResetEvery    int
	// OpacityReset: the ResetEvery steps clamp the opacities (the original); without it they
	// only mark where the large-splat pruning starts.
	OpacityReset  bool
	MaxScreenSize float64
	MaxWorldScale float64
	MaxGaussians  int
}

// StrategyMCMC names the MCMC densifier in DensifyOptions.Strategy.
const StrategyMCMC = "mcmc"

// MCMCOptions are the MCMC densifier's settings (Kheradmand et al. 2024, as gsplat's
// MCMCStrategy runs it; defaults and sources in configs/default.yaml).
type MCMCOptions struct {
	CapMax               int
	NoiseLR              float64
	From, Until, Every   int
	MinOpacity           float64
	OpacityReg, ScaleReg float64
	// RegInView keeps the regularisers to the Gaussians in each step's view
	// (engine.MCMCStep.RegInView).
	RegInView bool
}

// Validate reports options the trainer cannot run with.
func (o *Options) Validate() error {
	switch {
	case o.Iterations < 1:
		return fmt.Errorf("train: iterations %d < 1", o.Iterations)
	case o.SHInterval < 1:
		return fmt.Errorf("train: SH interval %d < 1", o.SHInterval)
	case o.Densify.Strategy != "" && o.Densify.Strategy != "adc" && o.Densify.Strategy != StrategyMCMC:
		return fmt.Errorf("train: densification strategy %q is not adc or mcmc", o.Densify.Strategy)
	case o.mcmc() && o.Densify.Enabled && o.Densify.MCMC.Every < 1:
		return fmt.Errorf("train: MCMC refinement interval %d < 1", o.Densify.MCMC.Every)
	case o.mcmc() && o.Densify.MCMC.CapMax < 1:
		return fmt.Errorf("train: MCMC cap %d < 1", o.Densify.MCMC.CapMax)
	case !o.mcmc() && o.Densify.Enabled && o.Densify.Every < 1:
		return fmt.Errorf("train: densify interval %d < 1", o.Densify.Every)
	case !o.mcmc() && o.Densify.Enabled && o.Densify.SplitN < 1:
		return fmt.Errorf("train: split count %d < 1", o.Densify.SplitN)
	case o.CoarseScale > 1 && o.CoarseUntil < 0:
		return fmt.Errorf("train: coarse_until %d < 0", o.CoarseUntil)
	case o.OutDir == "":
		return fmt.Errorf("train: no output directory")
	}
	return nil
}

func (o *Options) mcmc() bool { return o.Densify.Strategy == StrategyMCMC }

// batch is the number of views a step takes.
func (o *Options) batch() int { return max(o.BatchSize, 1) }

// ScaleSteps multiplies every step count of the schedule by f (gsplat's steps_scaler, for a
// batch of B views f = 1/B keeps the views trained on): the iterations, evaluation steps,
// preview and checkpoint cadences, the SH interval, the means decay horizon, the coarse-to-fine
// horizon and every densification step. Intervals stay at least 1; step 0 boundaries stay 0.
func (o *Options) ScaleSteps(f float64) {
	if f == 1 || !(f > 0) {
		return
	}
	at := func(s int) int { return int(math.Round(float64(s) * f)) }
	every := func(s int) int {
		if s <= 0 {
			return s
		}
		return max(1, at(s))
	}
	o.Iterations = max(1, at(o.Iterations))
	evals := make([]int, len(o.EvalSteps))
	for i, s := range o.EvalSteps {
		evals[i] = max(1, at(s))
	}
	o.EvalSteps = evals
	o.PreviewEvery, o.CheckpointEvery = every(o.PreviewEvery), every(o.CheckpointEvery)
	o.SHInterval = every(o.SHInterval)
	o.MeansLRSteps = at(o.MeansLRSteps)
	o.CoarseUntil = at(o.CoarseUntil)
	d := &o.Densify
	d.From, d.Until, d.Every, d.ResetEvery = at(d.From), at(d.Until), every(d.Every), every(d.ResetEvery)
	m := &d.MCMC
	m.From, m.Until, m.Every = at(m.From), at(m.Until), every(m.Every)
}

// Event is something the trainer reports while it runs.
type Event interface{ isEvent() }

// Progress is sent after every step.
type Progress struct {
	Step, Total int
	Loss, PSNR  float64 // PSNR of this step's training view
	Gaussians   int
	StepsPerSec float64 // over the recent window
	ElapsedSec  float64
	SHDegree    int
	Densified   bool
	StageMillis map[string]float64 // the step's stage times, on the steps that log them (else nil)
}

// Evaluated is sent after an evaluation over the test views.
type Evaluated struct {
	Step  int
	Split string // "test", or "train" when there is no test split
	PSNR  float64
	// SSIM is the standard metric (loss.MetricSSIM: interior windows, as scikit-image and
	// torchmetrics compute it); SSIM3DGS the original 3DGS code's (zero-padded, every pixel).
	SSIM, SSIM3DGS float64
	// RendersDir is where this evaluation's renders are being written (SaveEvalRenders), or "".
	RendersDir string
	Views      int
	Gaussians  int
}

// Notice is a one-line message for the user.
type Notice struct{ Text string }

// Saved names a file the trainer wrote.
type Saved struct {
	Kind string // "checkpoint", "preview", "ply", "curve", "metrics", "eval-render"
	Path string
}

func (Progress) isEvent()  {}
func (Evaluated) isEvent() {}
func (Notice) isEvent()    {}
func (Saved) isEvent()     {}

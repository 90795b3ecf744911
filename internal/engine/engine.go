// Package engine defines what a training engine is: something that owns the
// Gaussians and their optimizer state on one device and runs a whole
// training step per call (design.md §1, §5). The CPU engine
// (internal/engine/cpu) and the fused GPU engine (internal/fused) implement
// the same interface and pass the same tests.
//
// Policy (schedules, when and what to densify) belongs to the trainer; the
// engine only executes edits it is given.
package engine

import (
	"errors"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// View is one training image and its camera. Index identifies the view
// across steps so that a device engine can keep its target resident.
type View struct {
	Index  int
	Camera camera.Camera
	// Target is the image to fit, [H*W*3] in [0,1], already composited over
	// the step's background where the photo has alpha.
	Target []float32
}

// LR holds the learning rate of every Adam group for one step.
type LR struct {
	Means, LogScales, Quats, Opacity, SHDC, SHRest float32
}

// StepOptions are the per-step inputs the trainer decides.
type StepOptions struct {
	SHDegree   int
	LR         LR
	Background [3]float32
	// AccumulateStats adds this step's densification statistics (2D
	// position-gradient norm, visibility count, max screen radius).
	AccumulateStats bool
	// WantImage asks for the rendered image in the result (a readout).
	WantImage bool
	// WantTimings asks for StepResult.Timings. A GPU engine times its stages with device
	// events and reads each back with a host round trip, so it skips both when not asked;
	// training asks only on the steps it logs.
	WantTimings bool
	// MCMC adds the MCMC densifier's regularisers and position noise to the step.
	MCMC MCMCStep
}

// Stage names, one word per stage in every place (style.md §6.2).
const (
	StageProject    = "project"
	StageBin        = "bin"
	StageSort       = "sort"
	StageRasterFwd  = "raster_fwd"
	StageLoss       = "loss"
	StageRasterBwd  = "raster_bwd"
	StageProjectBwd = "project_bwd"
	StageAdam       = "adam"
	// StageStep is the whole step's device time, reported instead of the stages' by an
	// engine that runs the step as one unit it cannot time piece by piece (a replayed graph).
	StageStep = "step"
)

// Stages lists the stage names in pipeline order.
var Stages = []string{StageProject, StageBin, StageSort, StageRasterFwd, StageLoss, StageRasterBwd, StageProjectBwd, StageAdam}

// StepResult is what a step reports back.
type StepResult struct {
	Loss, L1, MSE, SSIM float64
	Visible             int // splats in front of the camera and on the image
	Entries             int // tile-list entries
	Image               []float32
	// Timings per stage (wall time on the CPU, device events on a GPU); a GPU engine
	// leaves it nil unless StepOptions.WantTimings.
	Timings map[string]time.Duration
	// NonFinite counts gradient or update elements the optimizer dropped.
	NonFinite int
}

// MeanOver makes r, whose loss terms are sums over a batch's views, the batch's result: the
// terms divided by views, and visible and entries (sums over the views) rounded to their means.
func (r *StepResult) MeanOver(views, visible, entries int) {
	r.Visible, r.Entries = (visible+views/2)/views, (entries+views/2)/views
	r.Loss /= float64(views)
	r.L1 /= float64(views)
	r.MSE /= float64(views)
	r.SSIM /= float64(views)
}

// Stats are the densification statistics accumulated since the last reset.
type Stats struct {
	GradAccum []float32 // [N] sum over visible steps of the 2D position-gradient norm (NDC units)
	Count     []int32   // [N] visible steps
	MaxRadius []float32 // [N] largest screen radius (px) seen
}

// Edit is one densification edit (design.md §6; the original's
// clone/split/prune). Indices refer to the splats before the edit. The
// result keeps, in order, every splat not removed and not split, then the
// clones, then the split children. Every new splat starts with zero Adam
// moments; the statistics are reset for all.
type Edit struct {
	Clone []int32 // splats to duplicate in place
	Split []int32 // splats to replace by SplitN children each
	// SplitSamples are standard-normal samples [len(Split)*SplitN*3]: child
	// c of split k sits at μ + R(q̂)·(s ⊙ sample).
	SplitSamples []float32
	SplitN       int
	// SplitScaleDiv divides the children's scales (the original: 0.8·N).
	SplitScaleDiv float32
	Remove        []bool // [N] splats to drop
}

// State is everything needed to resume training bit for bit.
type State struct {
	Params   *splat.Gaussians
	AdamM    *splat.Gaussians
	AdamV    *splat.Gaussians
	AdamStep int64
	Stats    Stats
}

// Shapes are the parameters densification decides on. Reading them alone
// spares a device engine the SH coefficients, four fifths of every splat.
type Shapes struct {
	LogScales     []float32 // [n,3]
	OpacityLogits []float32 // [n]
}

// Len is the number of splats.
func (s Shapes) Len() int { return len(s.OpacityLogits) }

// Engine runs training steps on one device.
type Engine interface {
	// Name says which engine and device this is ("cpu (2 threads)").
	Name() string
	// Step runs one full training step for the view: StepBatch of that view alone.
	Step(v *View, o StepOptions) (StepResult, error)
	// StepBatch runs one training step over a batch of views: each view rendered and
	// back-propagated in turn, the gradients summed and scaled by BatchScale (the loss is the
	// mean of the views'), the densification statistics accumulated view by view, then one
	// optimizer update (of the splats some view saw, with visible-only Adam). The result's
	// loss and counts are the means over the views; its image is the last view's.
	StepBatch(vs []*View, o StepOptions) (StepResult, error)
	// Render draws the current Gaussians for a camera ([H*W*3]).
	Render(cam *camera.Camera, shDegree int, background [3]float32) ([]float32, error)
	// Len is the current number of Gaussians.
	Len() int
	// Gaussians reads the parameters back (a copy).
	Gaussians() (*splat.Gaussians, error)
	// Shapes reads back only what densification decides on (a copy).
	Shapes() (Shapes, error)
	// Stats reads the densification statistics back (a copy).
	Stats() (Stats, error)
	// ResetStats zeroes the densification statistics.
	ResetStats() error
	// Apply performs a densification edit and zeroes the densification statistics
	// (as the original's densification_postfix does).
	Apply(e Edit) error
	// ResetOpacity clamps every opacity to at most maxOpacity and zeroes the
	// opacity moments (the original's opacity reset).
	ResetOpacity(maxOpacity float32) error
	// Relocate performs one MCMC relocation or growth (see Relocation) and zeroes the
	// densification statistics.
	Relocate(r Relocation) error
	// State and SetState save and restore the whole training state.
	State() (*State, error)
	SetState(s *State) error
	Close() error
}

// Pipeliner is an Engine that can queue a training step behind one whose result has not been
// read yet, so that a device engine never idles while the host takes its turn between steps.
// Submit queues a step (SubmitBatch: over a batch of views); Collect waits for the oldest
// queued step and returns its result. The results, and the state after each step, are those of calling Step in the same order. While
// steps are queued, every other method but Name, Len and Close fails: collect them first.
type Pipeliner interface {
	Engine
	Submit(v *View, o StepOptions) error
	SubmitBatch(vs []*View, o StepOptions) error
	Collect() (StepResult, error)
}

// Reader is an Engine that reads its shapes and statistics into arrays the caller keeps
// (resized as needed, their capacity reused), for a trainer that reads them every refinement:
// on a GPU host, filling freshly allocated arrays of a million splats' values took 3-5 ms a
// read, most of it the first touch of the new memory.
type Reader interface {
	ShapesInto(dst *Shapes) error
	StatsInto(dst *Stats) error
}

// StateReader is an Engine that reads its whole state into a State whose arrays the caller
// keeps (resized as needed, their capacity reused), for a trainer that checkpoints a run
// several times: filling fresh pages with a million splats' parameters and moments (640 MB)
// costs a page fault every 4 KiB, more than the copy itself (BenchmarkStateRead in
// internal/engine/cpu, 900k splats on a 2-core host: 0.32 s into pages new to the process
// against 0.074 s into the arrays of an earlier read).
type StateReader interface {
	StateInto(dst *State) error
}

// Resize returns s with length n, reusing its array when it is large enough.
func Resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// ErrEmpty is returned when an engine is asked to train zero Gaussians.
var ErrEmpty = errors.New("engine: the scene has no Gaussians")

// BatchScale is the factor on a batch's summed gradients: the step's loss is the mean of its
// views' losses, as gsplat's is. Both engines multiply by it in float32; for one view it is 1,
// which leaves the gradients exact.
func BatchScale(views int) float32 { return float32(1 / float64(max(views, 1))) }

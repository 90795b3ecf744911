// Package cpu is the pure-Go training engine: the whole step of design.md §5
// on the host, multi-threaded across cores, for both render models. It is
// the reference every GPU engine is checked against (rlxsplat parity) and
// the engine of machines without a GPU.
package cpu

import (
	"fmt"
	"slices"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/par"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Engine implements engine.Engine on the CPU.
type Engine struct {
	set   engine.Settings
	g     *splat.Gaussians
	opt   *optimizer
	stats engine.Stats
	pipe  *Pipeline[float32]
}

var _ engine.Engine = (*Engine)(nil)

// New returns a CPU engine training a copy of g.
func New(set engine.Settings, g *splat.Gaussians) (*Engine, error) {
	if err := set.Validate(); err != nil {
		return nil, err
	}
	if g.Len() == 0 {
		return nil, engine.ErrEmpty
	}
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	opt, err := newOptimizer(set.Adam, g.Len(), max(set.Workers, 1))
	if err != nil {
		return nil, err
	}
	return &Engine{set: set, g: g.Clone(), pipe: NewPipeline[float32](set), opt: opt, stats: newStats(g.Len())}, nil
}

func newStats(n int) engine.Stats {
	return engine.Stats{GradAccum: make([]float32, n), Count: make([]int32, n), MaxRadius: make([]float32, n)}
}

// Name says which engine this is.
func (e *Engine) Name() string { return fmt.Sprintf("cpu (%d threads)", max(e.set.Workers, 1)) }

// Len is the number of Gaussians.
func (e *Engine) Len() int { return e.g.Len() }

// Step runs one training step.
func (e *Engine) Step(v *engine.View, o engine.StepOptions) (engine.StepResult, error) {
	p := e.pipe
	if err := p.Forward(&v.Camera, e.g, o.SHDegree, o.Background); err != nil {
		return engine.StepResult{}, fmt.Errorf("cpu: %w", err)
	}
	lr, err := p.Loss(v.Target)
	if err != nil {
		return engine.StepResult{}, fmt.Errorf("cpu: %w", err)
	}
	if err := p.Backward(e.g); err != nil {
		return engine.StepResult{}, fmt.Errorf("cpu: %w", err)
	}
	visible := 0
	proj := p.Proj
	for i, ok := range proj.Valid {
		if !ok {
			continue
		}
		visible++
		if o.AccumulateStats {
			e.stats.GradAccum[i] += p.Grad2D[i]
			e.stats.Count[i]++
			e.stats.MaxRadius[i] = max(e.stats.MaxRadius[i], proj.Radius[i])
		}
	}
	if o.MCMC.OpacityReg != 0 || o.MCMC.ScaleReg != 0 {
		par.For(e.g.Len(), max(e.set.Workers, 1), func(_, lo, hi int) { engine.RegularizerGrads(p.Grads, e.g, o.MCMC, proj.Valid, lo, hi) })
	}
	var mask []bool
	if e.set.Adam.VisibleOnly {
		mask = proj.Valid
	}
	nonFinite, err := e.opt.step(e.g, p.Grads, o.LR, mask)
	if err != nil {
		return engine.StepResult{}, err
	}
	// The noise follows the update, as gsplat adds it after the optimizer's step.
	if o.MCMC.NoiseScale != 0 {
		par.For(e.g.Len(), max(e.set.Workers, 1), func(_, lo, hi int) { engine.PerturbMeans(e.g, o.MCMC, lo, hi) })
	}
	p.mark(engine.StageAdam)
	res := engine.StepResult{
		Loss: lr.Loss, L1: lr.L1, MSE: lr.MSE, SSIM: lr.SSIM,
		Visible: visible, Entries: len(p.Lists.IDs), NonFinite: nonFinite,
		Timings: make(map[string]time.Duration, len(p.Timings)),
	}
	for k, d := range p.Timings {
		res.Timings[k] = d
	}
	if o.WantImage {
		res.Image = append([]float32(nil), p.Image()...)
	}
	return res, nil
}

// Render draws the current Gaussians for a camera.
func (e *Engine) Render(cam *camera.Camera, shDegree int, bg [3]float32) ([]float32, error) {
	if err := e.pipe.Forward(cam, e.g, shDegree, bg); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	return append([]float32(nil), e.pipe.Image()...), nil
}

// Gaussians returns a copy of the parameters.
func (e *Engine) Gaussians() (*splat.Gaussians, error) { return e.g.Clone(), nil }

// Shapes returns a copy of the log-scales and opacity logits.
func (e *Engine) Shapes() (engine.Shapes, error) {
	return engine.Shapes{LogScales: slices.Clone(e.g.LogScales), OpacityLogits: slices.Clone(e.g.OpacityLogits)}, nil
}

// Stats returns a copy of the densification statistics.
func (e *Engine) Stats() (engine.Stats, error) {
	return engine.Stats{
		GradAccum: append([]float32(nil), e.stats.GradAccum...),
		Count:     append([]int32(nil), e.stats.Count...),
		MaxRadius: append([]float32(nil), e.stats.MaxRadius...),
	}, nil
}

// ResetStats zeroes the statistics.
func (e *Engine) ResetStats() error {
	e.stats = newStats(e.g.Len())
	return nil
}

// Apply performs a densification edit (see engine.Edit).
func (e *Engine) Apply(ed engine.Edit) error {
	n := e.g.Len()
	plan, err := engine.PlanEdit(ed, n)
	if err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	if err := e.opt.edit(plan); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	e.g = engine.ApplyEdit(e.g, ed, plan)
	e.stats = newStats(e.g.Len())
	return nil
}

// ResetOpacity clamps every opacity to at most maxOpacity and zeroes the
// opacity moments.
func (e *Engine) ResetOpacity(maxOpacity float32) error {
	if !(maxOpacity > 0 && maxOpacity < 1) {
		return fmt.Errorf("cpu: opacity reset value %v outside (0,1)", maxOpacity)
	}
	l := splat.Logit(maxOpacity)
	for i, v := range e.g.OpacityLogits {
		e.g.OpacityLogits[i] = min(v, l)
	}
	return e.opt.resetOpacityMoments()
}

// Relocate performs one MCMC relocation or growth (see engine.Relocation).
func (e *Engine) Relocate(r engine.Relocation) error {
	n := e.g.Len()
	if err := r.Validate(n); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	if err := e.opt.o.Append(len(r.Append)); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	zero := engine.ApplyRelocation(e.g, &r)
	if err := e.opt.o.ResetSplats(zero); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	e.stats = newStats(e.g.Len())
	return nil
}

// State returns a copy of the whole training state.
func (e *Engine) State() (*engine.State, error) {
	st, _ := e.Stats()
	m, v, step := e.opt.moments()
	return &engine.State{Params: e.g.Clone(), AdamM: m, AdamV: v, AdamStep: step, Stats: st}, nil
}

// SetState restores a state saved by State.
func (e *Engine) SetState(s *engine.State) error {
	n := s.Params.Len()
	if n == 0 {
		return engine.ErrEmpty
	}
	if err := s.Params.Validate(); err != nil {
		return fmt.Errorf("cpu: restoring state: %w", err)
	}
	if s.AdamM.Len() != n || s.AdamV.Len() != n || len(s.Stats.GradAccum) != n || len(s.Stats.Count) != n || len(s.Stats.MaxRadius) != n {
		return fmt.Errorf("cpu: restoring state: the moments or statistics do not have %d entries", n)
	}
	if err := e.opt.setMoments(s.AdamM.Clone(), s.AdamV.Clone(), s.AdamStep); err != nil {
		return fmt.Errorf("cpu: restoring state: %w", err)
	}
	e.g = s.Params.Clone()
	e.stats = engine.Stats{
		GradAccum: append([]float32(nil), s.Stats.GradAccum...),
		Count:     append([]int32(nil), s.Stats.Count...),
		MaxRadius: append([]float32(nil), s.Stats.MaxRadius...),
	}
	return nil
}

// Close releases nothing: the CPU engine holds only Go memory.
func (e *Engine) Close() error { return nil }

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
	// A batch's summed gradients and the splats its views saw, reused from step to step.
	batchGrads *splat.Gaussians
	seen       []bool
}

var (
	_ engine.Engine      = (*Engine)(nil)
	_ engine.StateReader = (*Engine)(nil)
)

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
	return e.StepBatch([]*engine.View{v}, o)
}

// StepBatch runs one training step over the views vs: each view's forward and backward in
// turn, their gradients summed in view order and scaled by engine.BatchScale (the mean of their
// losses), the densification statistics accumulated per view, then one Adam update of the
// splats some view saw (visible-only) or of all. The result's loss and counts are the means
// over the views, its image the last view's.
func (e *Engine) StepBatch(vs []*engine.View, o engine.StepOptions) (engine.StepResult, error) {
	if len(vs) == 0 {
		return engine.StepResult{}, fmt.Errorf("cpu: a step needs at least one view")
	}
	p := e.pipe
	workers := max(e.set.Workers, 1)
	var res engine.StepResult
	res.Timings = map[string]time.Duration{}
	var grads *splat.Gaussians // the step's gradients: the one view's, or the batch's sum
	var seen []bool
	for j, v := range vs {
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
		proj := p.Proj
		for i, ok := range proj.Valid {
			if !ok {
				continue
			}
			res.Visible++
			if o.AccumulateStats {
				e.stats.GradAccum[i] += p.Grad2D[i]
				e.stats.Count[i]++
				e.stats.MaxRadius[i] = max(e.stats.MaxRadius[i], proj.Radius[i])
			}
		}
		grads = p.Grads
		if len(vs) > 1 {
			if j == 0 {
				e.batchGrads = cloneInto(e.batchGrads, p.Grads)
				seen = append(e.seen[:0], proj.Valid...)
			} else {
				addGrads(e.batchGrads, p.Grads, workers)
				for i, ok := range proj.Valid {
					seen[i] = seen[i] || ok
				}
			}
			e.seen = seen
			grads = e.batchGrads
		} else {
			seen = proj.Valid
		}
		res.Loss += lr.Loss
		res.L1 += lr.L1
		res.MSE += lr.MSE
		res.SSIM += lr.SSIM
		res.Entries += len(p.Lists.IDs)
		for k, d := range p.Timings {
			res.Timings[k] += d
		}
	}
	nv := len(vs)
	if nv > 1 {
		scale := engine.BatchScale(nv)
		par.For(len(grads.Means)/3, workers, func(_, lo, hi int) { scaleRows(grads, scale, lo, hi) })
	}
	if o.MCMC.OpacityReg != 0 || o.MCMC.ScaleReg != 0 {
		par.For(e.g.Len(), workers, func(_, lo, hi int) { engine.RegularizerGrads(grads, e.g, o.MCMC, seen, lo, hi) })
	}
	at := time.Now()
	// The visible-only groups (settings) leave the splats outside every view of the step.
	nonFinite, err := e.opt.step(e.g, grads, o.LR, seen)
	if err != nil {
		return engine.StepResult{}, err
	}
	// The noise follows the update, as gsplat adds it after the optimizer's step.
	if o.MCMC.NoiseScale != 0 {
		par.For(e.g.Len(), workers, func(_, lo, hi int) { engine.PerturbMeans(e.g, o.MCMC, lo, hi) })
	}
	res.Timings[engine.StageAdam] += time.Since(at)
	res.NonFinite = nonFinite
	res.Loss /= float64(nv)
	res.L1 /= float64(nv)
	res.MSE /= float64(nv)
	res.SSIM /= float64(nv)
	res.Visible, res.Entries = (res.Visible+nv/2)/nv, (res.Entries+nv/2)/nv
	if o.WantImage {
		res.Image = append([]float32(nil), p.Image()...)
	}
	return res, nil
}

// cloneInto copies src into dst's arrays (new ones when dst has another size) and returns it.
func cloneInto(dst, src *splat.Gaussians) *splat.Gaussians {
	if dst == nil || dst.Len() != src.Len() {
		return src.Clone()
	}
	df, sf := dst.Fields(), src.Fields()
	for k := range df {
		copy(df[k].Data, sf[k].Data)
	}
	return dst
}

// addGrads adds g to sum element by element, in float32 (the fused engine's project_bwd adds a
// later view's gradients alike).
func addGrads(sum, g *splat.Gaussians, workers int) {
	sf, gf := sum.Fields(), g.Fields()
	n := g.Len()
	par.For(n, workers, func(_, lo, hi int) {
		for k := range sf {
			w := len(sf[k].Data) / n
			s, x := sf[k].Data[lo*w:hi*w], gf[k].Data[lo*w:hi*w]
			for i := range s {
				s[i] += x[i]
			}
		}
	})
}

// scaleRows multiplies splats [lo, hi) of g by s in float32 (adam.cu's gradScale).
func scaleRows(g *splat.Gaussians, s float32, lo, hi int) {
	n := g.Len()
	for _, f := range g.Fields() {
		w := len(f.Data) / n
		for i := lo * w; i < hi*w; i++ {
			f.Data[i] *= s
		}
	}
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

// ShapesInto copies the shapes into dst's arrays (engine.Reader).
func (e *Engine) ShapesInto(dst *engine.Shapes) error {
	dst.LogScales = append(dst.LogScales[:0], e.g.LogScales...)
	dst.OpacityLogits = append(dst.OpacityLogits[:0], e.g.OpacityLogits...)
	return nil
}

// Stats returns a copy of the densification statistics.
func (e *Engine) Stats() (engine.Stats, error) {
	var st engine.Stats
	return st, e.StatsInto(&st)
}

// StatsInto copies the densification statistics into dst's arrays (engine.Reader).
func (e *Engine) StatsInto(dst *engine.Stats) error {
	dst.GradAccum = append(dst.GradAccum[:0], e.stats.GradAccum...)
	dst.Count = append(dst.Count[:0], e.stats.Count...)
	dst.MaxRadius = append(dst.MaxRadius[:0], e.stats.MaxRadius...)
	return nil
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
	st := &engine.State{}
	return st, e.StateInto(st)
}

// StateInto copies the whole training state into dst's arrays (engine.StateReader).
func (e *Engine) StateInto(dst *engine.State) error {
	dst.Params = e.g.CopyInto(dst.Params)
	dst.AdamM = e.opt.o.M.CopyInto(dst.AdamM)
	dst.AdamV = e.opt.o.V.CopyInto(dst.AdamV)
	dst.AdamStep = e.opt.o.Steps[0]
	return e.StatsInto(&dst.Stats)
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

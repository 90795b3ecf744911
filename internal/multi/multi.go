// Package multi trains one scene data-parallel on several GPUs of a host: every rank (a fused
// engine on its own device) holds the whole scene, takes its share of each step's batch of
// views, and the ranks' summed gradients, the splats they saw and their overflow flags are
// reduced across them before one identical Adam update on every rank (design.md §5 step 8,
// as gsplat's distributed mode runs it). Densification edits, opacity resets and MCMC
// relocations are applied on every rank alike, so the ranks' scenes stay the same.
//
// The reduction is NCCL's all-reduce on each device's own stream (NCCLReducer), or, where NCCL
// is missing or the devices are not CUDA ones, a sum through the host (HostReducer: slow, and
// what the tests run on the emulator).
//
// Sharded is the other mode, Gaussian sharding: each rank owns a share of the splats and the
// ranks exchange the records of those in view (Exchanger; docs/sharding.md).
package multi

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Reducer combines the ranks' Reductions: Reduce is called by every rank at the same point of
// each step, each on its own goroutine, with its rank and device, and must leave every rank's
// buffers holding the combined values (in order with the device's queued work) before it
// returns or, for a stream-ordered reducer, before the device's next queued work runs.
type Reducer interface {
	Reduce(rank int, dev gpu.Device, r fused.Reduction) error
	Close() error
}

// Engine is engine.Engine over several ranks.
type Engine struct {
	ranks []*fused.Engine
	devs  []gpu.Device
	red   Reducer
	owned bool
	// rankStats receives a later rank's statistics while StatsInto merges them.
	rankStats engine.Stats
}

var _ engine.Engine = (*Engine)(nil)

// New builds a rank on each of devs, every one training a copy of g with settings set, their
// steps reduced by red. With own the engine closes the devices and the reducer when it is
// closed, or when New fails.
func New(devs []gpu.Device, red Reducer, set engine.Settings, g *splat.Gaussians, own bool, opts ...fused.Option) (*Engine, error) {
	e := &Engine{devs: devs, red: red, owned: own}
	if len(devs) < 1 || red == nil {
		return nil, errors.Join(errors.New("multi: no devices or no reducer"), e.closeOwned())
	}
	for k, dev := range devs {
		fe, err := fused.New(dev, set, g, opts...)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("multi: rank %d: %w", k, err), e.Close())
		}
		k := k
		fe.SetReduce(func(r fused.Reduction) error { return red.Reduce(k, dev, r) })
		e.ranks = append(e.ranks, fe)
	}
	return e, nil
}

// Ranks is the number of ranks.
func (e *Engine) Ranks() int { return len(e.ranks) }

// Name says which engine this is.
func (e *Engine) Name() string {
	return fmt.Sprintf("%s × %d GPUs", e.ranks[0].Name(), len(e.ranks))
}

// Len is the number of Gaussians (every rank holds them all).
func (e *Engine) Len() int { return e.ranks[0].Len() }

// Step runs one training step for the view: on one rank only, so it needs one rank.
func (e *Engine) Step(v *engine.View, o engine.StepOptions) (engine.StepResult, error) {
	return e.StepBatch([]*engine.View{v}, o)
}

// Shares splits a batch of b views over ranks ranks: rank k takes views [lo, hi) of it, the
// first b mod ranks ranks one view more.
func Shares(b, ranks int) [][2]int {
	out := make([][2]int, ranks)
	lo := 0
	for k := range out {
		n := b / ranks
		if k < b%ranks {
			n++
		}
		out[k] = [2]int{lo, lo + n}
		lo += n
	}
	return out
}

// StepBatch splits vs over the ranks (Shares), runs every rank's share at once and returns
// the views' mean loss and counts (the image: the last rank's last view's).
func (e *Engine) StepBatch(vs []*engine.View, o engine.StepOptions) (engine.StepResult, error) {
	if len(vs) < len(e.ranks) {
		return engine.StepResult{}, fmt.Errorf("multi: a batch of %d views for %d GPUs: each GPU needs at least one view (train.batch_size >= train.gpus)", len(vs), len(e.ranks))
	}
	shares := Shares(len(vs), len(e.ranks))
	res := make([]engine.StepResult, len(e.ranks))
	errs := make([]error, len(e.ranks))
	var wg sync.WaitGroup
	for k, fe := range e.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ro := o
			ro.WantImage = o.WantImage && k == len(e.ranks)-1
			sh := shares[k]
			res[k], errs[k] = fe.StepPart(vs[sh[0]:sh[1]], len(vs), ro)
		}()
	}
	wg.Wait()
	for k, err := range errs {
		if err != nil {
			return engine.StepResult{}, fmt.Errorf("multi: rank %d: %w", k, err)
		}
	}
	var out engine.StepResult
	for k, r := range res {
		w := float64(shares[k][1]-shares[k][0]) / float64(len(vs))
		out.Loss += w * r.Loss
		out.L1 += w * r.L1
		out.MSE += w * r.MSE
		out.SSIM += w * r.SSIM
		out.Visible += int(w*float64(r.Visible) + 0.5)
		out.Entries += int(w*float64(r.Entries) + 0.5)
		if k == 0 {
			out.NonFinite = r.NonFinite // every rank applies the same update
			out.Timings = r.Timings
		}
		if r.Image != nil {
			out.Image = r.Image
		}
	}
	return out, nil
}

// each runs f on every rank, in turn, and joins the ranks' errors.
func (e *Engine) each(what string, f func(fe *fused.Engine) error) error {
	var errs []error
	for k, fe := range e.ranks {
		if err := f(fe); err != nil {
			errs = append(errs, fmt.Errorf("multi: rank %d: %s: %w", k, what, err))
		}
	}
	return errors.Join(errs...)
}

// Render draws the current Gaussians on the first rank.
func (e *Engine) Render(cam *camera.Camera, shDegree int, bg [3]float32) ([]float32, error) {
	return e.ranks[0].Render(cam, shDegree, bg)
}

// Gaussians reads the parameters back from the first rank.
func (e *Engine) Gaussians() (*splat.Gaussians, error) { return e.ranks[0].Gaussians() }

// Shapes reads the shapes back from the first rank.
func (e *Engine) Shapes() (engine.Shapes, error) { return e.ranks[0].Shapes() }

// ShapesInto reads the shapes from the first rank into dst's arrays (engine.Reader).
func (e *Engine) ShapesInto(dst *engine.Shapes) error { return e.ranks[0].ShapesInto(dst) }

// Stats merges the ranks' statistics: each rank accumulated those of its own views, so the
// sums and counts add and the largest radius is the largest of the ranks'.
func (e *Engine) Stats() (engine.Stats, error) {
	var st engine.Stats
	return st, e.StatsInto(&st)
}

// StatsInto is Stats into dst's arrays (engine.Reader).
func (e *Engine) StatsInto(dst *engine.Stats) error {
	for k, fe := range e.ranks {
		if k == 0 {
			if err := fe.StatsInto(dst); err != nil {
				return fmt.Errorf("multi: rank %d: %w", k, err)
			}
			continue
		}
		if err := fe.StatsInto(&e.rankStats); err != nil {
			return fmt.Errorf("multi: rank %d: %w", k, err)
		}
		st := &e.rankStats
		for i := range dst.Count {
			dst.GradAccum[i] += st.GradAccum[i]
			dst.Count[i] += st.Count[i]
			dst.MaxRadius[i] = max(dst.MaxRadius[i], st.MaxRadius[i])
		}
	}
	return nil
}

// ResetStats zeroes every rank's statistics.
func (e *Engine) ResetStats() error {
	return e.each("reset statistics", func(fe *fused.Engine) error { return fe.ResetStats() })
}

// Apply performs the densification edit on every rank.
func (e *Engine) Apply(ed engine.Edit) error {
	return e.each("edit", func(fe *fused.Engine) error { return fe.Apply(ed) })
}

// ResetOpacity resets the opacities on every rank.
func (e *Engine) ResetOpacity(maxOpacity float32) error {
	return e.each("opacity reset", func(fe *fused.Engine) error { return fe.ResetOpacity(maxOpacity) })
}

// Relocate performs the MCMC relocation or growth on every rank.
func (e *Engine) Relocate(r engine.Relocation) error {
	return e.each("relocation", func(fe *fused.Engine) error { return fe.Relocate(r) })
}

// State is the first rank's state with the ranks' merged statistics.
func (e *Engine) State() (*engine.State, error) {
	s, err := e.ranks[0].State()
	if err != nil {
		return nil, err
	}
	if s.Stats, err = e.Stats(); err != nil {
		return nil, err
	}
	return s, nil
}

// SetState restores s on every rank; the first rank holds its statistics and the others
// start from zero, so that the merged statistics are s's.
func (e *Engine) SetState(s *engine.State) error {
	for k, fe := range e.ranks {
		r := *s
		if k > 0 {
			n := s.Params.Len()
			r.Stats = engine.Stats{GradAccum: make([]float32, n), Count: make([]int32, n), MaxRadius: make([]float32, n)}
		}
		if err := fe.SetState(&r); err != nil {
			return fmt.Errorf("multi: rank %d: %w", k, err)
		}
	}
	return nil
}

// Close closes every rank and, when owned, the devices and the reducer.
func (e *Engine) Close() error {
	var errs []error
	for k, fe := range e.ranks {
		if err := fe.Close(); err != nil {
			errs = append(errs, fmt.Errorf("multi: rank %d: %w", k, err))
		}
	}
	e.ranks = nil
	return errors.Join(append(errs, e.closeOwned())...)
}

func (e *Engine) closeOwned() error {
	if !e.owned {
		return nil
	}
	var errs []error
	if e.red != nil {
		errs = append(errs, e.red.Close())
	}
	for _, d := range e.devs {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	e.devs, e.red = nil, nil
	return errors.Join(errs...)
}

package cpu

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/adam"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// optimizer adapts adam.Optimizer to the engine's settings and edits.
type optimizer struct {
	o *adam.Optimizer
}

func newOptimizer(s engine.AdamSettings, n, workers int) (*optimizer, error) {
	o, err := adam.New(s.Optimizer(), n)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	o.SetWorkers(workers)
	return &optimizer{o: o}, nil
}

func lrArray(lr engine.LR) [adam.NumGroups]float32 {
	var a [adam.NumGroups]float32
	a[adam.Means] = lr.Means
	a[adam.LogScales] = lr.LogScales
	a[adam.Quats] = lr.Quats
	a[adam.OpacityLogits] = lr.Opacity
	a[adam.SHDC] = lr.SHDC
	a[adam.SHRest] = lr.SHRest
	return a
}

// step applies one Adam update and returns how many non-finite elements
// were dropped.
func (o *optimizer) step(params, grads *splat.Gaussians, lr engine.LR, visible []bool) (int, error) {
	st, err := o.o.Step(params, grads, lrArray(lr), visible)
	if err != nil {
		return 0, fmt.Errorf("cpu: %w", err)
	}
	t := st.Total()
	return t.NonFiniteGrads + t.SkippedUpdates, nil
}

// edit reorders the moments like the parameters: kept splats keep theirs,
// new ones (from plan.Fresh on) start at zero.
func (o *optimizer) edit(p engine.EditPlan) error {
	src := make([]int32, len(p.Src))
	for j, s := range p.Src {
		if j >= p.Fresh {
			s = -1
		}
		src[j] = s
	}
	return o.o.Gather(src)
}

func (o *optimizer) resetOpacityMoments() error { return o.o.ResetGroup(adam.OpacityLogits) }

func (o *optimizer) setMoments(m, v *splat.Gaussians, step int64) error {
	o.o.M, o.o.V = m, v
	for g := range o.o.Steps {
		o.o.Steps[g] = step
	}
	return o.o.Validate()
}

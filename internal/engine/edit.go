package engine

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// EditPlan is an Edit resolved into a gather: new splat j copies old splat
// Src[j]; splats from Fresh on are new (clones and split children) and get
// zero optimizer moments. Engines share it so that every engine produces
// the same order.
type EditPlan struct {
	Src   []int32
	Fresh int
	// Children is where the split children start in the new order.
	Children int
}

// PlanEdit validates e against n splats and resolves it.
func PlanEdit(e Edit, n int) (EditPlan, error) {
	if e.Remove != nil && len(e.Remove) != n {
		return EditPlan{}, fmt.Errorf("engine: edit: remove mask has %d entries for %d splats", len(e.Remove), n)
	}
	// A split list in increasing order (as densification makes it) is merged into the walk
	// below; any other order is marked in a flag per splat first.
	var split []bool
	for k, i := range e.Split {
		if i < 0 || int(i) >= n {
			return EditPlan{}, fmt.Errorf("engine: edit: split index %d outside 0..%d", i, n-1)
		}
		if split == nil && k > 0 && i <= e.Split[k-1] {
			split = make([]bool, n)
			for _, j := range e.Split[:k] {
				split[j] = true
			}
		}
		if split != nil {
			if split[i] {
				return EditPlan{}, fmt.Errorf("engine: edit: splat %d split twice", i)
			}
			split[i] = true
		}
	}
	for _, i := range e.Clone {
		if i < 0 || int(i) >= n {
			return EditPlan{}, fmt.Errorf("engine: edit: clone index %d outside 0..%d", i, n-1)
		}
	}
	if len(e.Split) > 0 {
		if e.SplitN < 1 {
			return EditPlan{}, fmt.Errorf("engine: edit: split count %d < 1", e.SplitN)
		}
		if len(e.SplitSamples) != len(e.Split)*e.SplitN*3 {
			return EditPlan{}, fmt.Errorf("engine: edit: %d split samples, want %d", len(e.SplitSamples), len(e.Split)*e.SplitN*3)
		}
		if !(e.SplitScaleDiv > 0) {
			return EditPlan{}, fmt.Errorf("engine: edit: split scale divisor %v must be > 0", e.SplitScaleDiv)
		}
	}
	var p EditPlan
	removed := 0
	if e.Remove != nil {
		for _, r := range e.Remove {
			if r {
				removed++
			}
		}
	}
	// Sized once: appending grew a slice of a million entries some twenty times.
	p.Src = make([]int32, 0, max(n-removed-len(e.Split), 0)+len(e.Clone)+len(e.Split)*e.SplitN)
	next := 0 // the next split of an increasing list
	for i := 0; i < n; i++ {
		if split != nil && split[i] {
			continue
		}
		if split == nil && next < len(e.Split) && int(e.Split[next]) == i {
			next++
			continue
		}
		if e.Remove != nil && e.Remove[i] {
			continue
		}
		p.Src = append(p.Src, int32(i))
	}
	p.Fresh = len(p.Src)
	p.Src = append(p.Src, e.Clone...)
	p.Children = len(p.Src)
	for _, i := range e.Split {
		for c := 0; c < e.SplitN; c++ {
			p.Src = append(p.Src, i)
		}
	}
	return p, nil
}

// ApplyEdit returns the Gaussians after the edit: a gather by the plan, then
// each split child moved to μ + R(q̂)·(s ⊙ sample) with its scales divided
// by SplitScaleDiv (the original's densify_and_split).
func ApplyEdit(g *splat.Gaussians, e Edit, p EditPlan) *splat.Gaussians {
	out := splat.Gather(g, p.Src)
	SplitChildren(g.Means, g.LogScales, g.Quats, e, func(k, c int, mean, logScale [3]float32) {
		j := p.Children + k*e.SplitN + c
		copy(out.Means[j*3:j*3+3], mean[:])
		copy(out.LogScales[j*3:j*3+3], logScale[:])
	})
	return out
}

// childLogScale is a split child's log-scale for its parent's scale s (exp of the log-scale).
func childLogScale(s float64, div float32) float32 { return float32(math.Log(s / float64(div))) }

// ChildShapes returns the shapes of e's split children, child c of split k at row k·SplitN + c:
// the parent's opacity logit and its log-scales divided as SplitChildren divides them, to the
// bit (the rows an engine's Shapes ends with once it has applied e, from EditPlan.Children on).
// e must be valid for g (PlanEdit).
func ChildShapes(g Shapes, e Edit) Shapes {
	m := len(e.Split) * e.SplitN
	out := Shapes{LogScales: make([]float32, 3*m), OpacityLogits: make([]float32, m)}
	for k, parent := range e.Split {
		for a := 0; a < 3; a++ {
			l := childLogScale(math.Exp(float64(g.LogScales[int(parent)*3+a])), e.SplitScaleDiv)
			for c := 0; c < e.SplitN; c++ {
				out.LogScales[(k*e.SplitN+c)*3+a] = l
			}
		}
		for c := 0; c < e.SplitN; c++ {
			out.OpacityLogits[k*e.SplitN+c] = g.OpacityLogits[parent]
		}
	}
	return out
}

// SplitChildren computes the mean and log-scales of child c of every split
// k of e from its parent's geometry (means, logScales, quats of all splats,
// in splat.Gaussians' layout) and hands them to set. Engines that keep the
// parameters elsewhere (on a device) share it so that children are
// bit-identical everywhere.
func SplitChildren(means, logScales, quats []float32, e Edit, set func(k, c int, mean, logScale [3]float32)) {
	for k, parent := range e.Split {
		i := int(parent)
		q := quats[i*4 : i*4+4]
		r := camera.RotationFromQuat(float64(q[0]), float64(q[1]), float64(q[2]), float64(q[3]))
		var s [3]float64
		for a := 0; a < 3; a++ {
			s[a] = math.Exp(float64(logScales[i*3+a]))
		}
		for c := 0; c < e.SplitN; c++ {
			smp := e.SplitSamples[(k*e.SplitN+c)*3:]
			var mean, logScale [3]float32
			for a := 0; a < 3; a++ {
				off := r[a][0]*s[0]*float64(smp[0]) + r[a][1]*s[1]*float64(smp[1]) + r[a][2]*s[2]*float64(smp[2])
				mean[a] = float32(float64(means[i*3+a]) + off)
				logScale[a] = childLogScale(s[a], e.SplitScaleDiv)
			}
			set(k, c, mean, logScale)
		}
	}
}

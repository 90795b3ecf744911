package train

import (
	"fmt"
	"math"
	"sort"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// densify applies the original 3DGS adaptive density control at step s:
// splats whose mean 2D position gradient reaches the threshold are cloned
// when small (max scale ≤ percent_dense·extent) and split when large; then
// transparent splats are pruned, and after the first opacity reset also
// splats too large on screen or in the world (design.md §6).
func (t *Trainer) densify(s int) error {
	d := &t.opt.Densify
	st, err := t.eng.Stats()
	if err != nil {
		return fmt.Errorf("train: step %d: densification statistics: %w", s, err)
	}
	g, err := t.eng.Shapes()
	if err != nil {
		return fmt.Errorf("train: step %d: %w", s, err)
	}
	edit := growEdit(g, st, d, t.ds.Extent)
	t.capGrowth(&edit, g.Len(), st)
	if n := len(edit.Split) * edit.SplitN * 3; n > 0 {
		edit.SplitSamples = make([]float32, n)
		for i := range edit.SplitSamples {
			edit.SplitSamples[i] = float32(t.rng.NormFloat64())
		}
	}
	if len(edit.Clone)+len(edit.Split) > 0 {
		if err := t.eng.Apply(edit); err != nil {
			return fmt.Errorf("train: step %d: densify: %w", s, err)
		}
	}
	// Prune on the grown set, as the original does after clone and split.
	g, err = t.eng.Shapes()
	if err != nil {
		return fmt.Errorf("train: step %d: %w", s, err)
	}
	st, err = t.eng.Stats()
	if err != nil {
		return fmt.Errorf("train: step %d: %w", s, err)
	}
	remove, n := pruneMask(g, st, d, t.ds.Extent, s > d.ResetEvery && d.ResetEvery > 0)
	if n > 0 {
		if n == g.Len() {
			return fmt.Errorf("train: step %d: pruning would remove all %d Gaussians (opacity below %g)", s, n, d.PruneOpacity)
		}
		if err := t.eng.Apply(engine.Edit{Remove: remove}); err != nil {
			return fmt.Errorf("train: step %d: prune: %w", s, err)
		}
	}
	return t.eng.ResetStats()
}

// growEdit selects the splats to clone and to split.
func growEdit(g engine.Shapes, st engine.Stats, d *DensifyOptions, extent float64) engine.Edit {
	e := engine.Edit{SplitN: d.SplitN, SplitScaleDiv: float32(0.8 * float64(d.SplitN))}
	limit := d.PercentDense * extent
	for i := 0; i < g.Len(); i++ {
		if st.Count[i] == 0 {
			continue
		}
		if float64(st.GradAccum[i])/float64(st.Count[i]) < d.GradThreshold {
			continue
		}
		if maxScale(g, i) <= limit {
			e.Clone = append(e.Clone, int32(i))
		} else {
			e.Split = append(e.Split, int32(i))
		}
	}
	return e
}

// capGrowth keeps the splats with the largest gradients when the edit would
// take the count above max_gaussians.
func (t *Trainer) capGrowth(e *engine.Edit, n int, st engine.Stats) {
	limit := t.opt.Densify.MaxGaussians
	if limit <= 0 {
		return
	}
	room := limit - n
	grow := len(e.Clone) + len(e.Split)*(e.SplitN-1)
	if grow <= room {
		return
	}
	type cand struct {
		i     int32
		split bool
		grad  float64
	}
	var cs []cand
	for _, i := range e.Clone {
		cs = append(cs, cand{i, false, float64(st.GradAccum[i]) / float64(st.Count[i])})
	}
	for _, i := range e.Split {
		cs = append(cs, cand{i, true, float64(st.GradAccum[i]) / float64(st.Count[i])})
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].grad > cs[b].grad })
	e.Clone, e.Split = e.Clone[:0], e.Split[:0]
	for _, c := range cs {
		cost := 1
		if c.split {
			cost = e.SplitN - 1
		}
		if cost > room {
			continue
		}
		room -= cost
		if c.split {
			e.Split = append(e.Split, c.i)
		} else {
			e.Clone = append(e.Clone, c.i)
		}
	}
	sort.Slice(e.Clone, func(a, b int) bool { return e.Clone[a] < e.Clone[b] })
	sort.Slice(e.Split, func(a, b int) bool { return e.Split[a] < e.Split[b] })
}

// pruneMask marks splats with opacity below the threshold and, when big is
// set, those larger than max_screen_size px on screen or max_world_scale of
// the extent in the world.
func pruneMask(g engine.Shapes, st engine.Stats, d *DensifyOptions, extent float64, big bool) ([]bool, int) {
	remove := make([]bool, g.Len())
	n := 0
	for i := range remove {
		r := float64(splat.Sigmoid(g.OpacityLogits[i])) < d.PruneOpacity
		if big && !r {
			r = (d.MaxScreenSize > 0 && float64(st.MaxRadius[i]) > d.MaxScreenSize) ||
				(d.MaxWorldScale > 0 && maxScale(g, i) > d.MaxWorldScale*extent)
		}
		if r {
			remove[i] = true
			n++
		}
	}
	return remove, n
}

func maxScale(g engine.Shapes, i int) float64 {
	m := math.Max(float64(g.LogScales[i*3]), math.Max(float64(g.LogScales[i*3+1]), float64(g.LogScales[i*3+2])))
	return math.Exp(m)
}

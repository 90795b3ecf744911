package train

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/par"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// densify applies the original 3DGS adaptive density control at step s:
// splats whose mean 2D position gradient reaches the threshold are cloned
// when small (max scale ≤ percent_dense·extent) and split when large; then
// transparent splats are pruned, and after the first opacity reset also
// splats too large on screen or in the world (design.md §6).
func (t *Trainer) densify(s int) error {
	d := &t.opt.Densify
	// Where a refinement's time goes, a metrics line per refinement: the host's share of the
	// run is what refinements cost beyond the device's work.
	ms := map[string]float64{}
	// What the refinement did, beside its time: the splats it cloned, split and pruned, and
	// how many the statistics saw and over how many views on average (what the growth
	// threshold is compared against: a splat's mean over the views that saw it).
	counts := map[string]any{"step": s, "densify_ms": ms}
	at := time.Now()
	lap := func(name string) {
		now := time.Now()
		ms[name] += msOf(now.Sub(at))
		at = now
	}
	defer func() { t.logJSON(counts) }()
	st, err := t.readStats()
	if err != nil {
		return fmt.Errorf("train: step %d: densification statistics: %w", s, err)
	}
	lap("stats")
	g, err := t.readShapes()
	if err != nil {
		return fmt.Errorf("train: step %d: %w", s, err)
	}
	lap("shapes")
	seen, views := statCoverage(st)
	counts["seen"], counts["mean_views"] = seen, views
	edit := growEdit(g, st, d, t.ds.Extent, t.opt.Workers)
	t.capGrowth(&edit, g.Len(), st)
	counts["cloned"], counts["split"] = len(edit.Clone), len(edit.Split)
	if n := len(edit.Split) * edit.SplitN * 3; n > 0 {
		edit.SplitSamples = make([]float32, n)
		for i := range edit.SplitSamples {
			edit.SplitSamples[i] = float32(t.rng.NormFloat64())
		}
	}
	lap("select")
	// The radii were measured on the step's photos, which coarse-to-fine training may have
	// scaled down: the screen-size limit is in full-size pixels.
	pd := *d
	pd.MaxScreenSize /= float64(t.opt.coarseFactor(s))
	big := s > d.ResetEvery && d.ResetEvery > 0
	if len(edit.Clone)+len(edit.Split) > 0 {
		// Grow and prune in one edit, as pruning the grown set after clone and split (the
		// original's order) would: a clone is a copy of its source and a split's children share
		// their shapes (engine.ChildShapes), so each takes one verdict, judged here on the
		// splats before the edit. No statistics: the original's densification_postfix zeroes
		// max_radii2D before its prune, so no screen radius is left to prune on.
		before, beforeN := pruneMask(g, engine.Stats{}, &pd, t.ds.Extent, big, t.opt.Workers)
		kids, _ := pruneMask(engine.ChildShapes(g, edit), engine.Stats{}, &pd, t.ds.Extent, big, t.opt.Workers)
		merged, pruned, kept := growAndPrune(edit, before, beforeN, kids)
		lap("select")
		if kept == 0 {
			return fmt.Errorf("train: step %d: pruning would remove all %d Gaussians (opacity below %g)", s, pruned, d.PruneOpacity)
		}
		counts["pruned"], counts["gaussians"] = pruned, kept
		if err := t.eng.Apply(merged); err != nil {
			return fmt.Errorf("train: step %d: densify: %w", s, err)
		}
		lap("grow")
	} else {
		remove, n := pruneMask(g, st, &pd, t.ds.Extent, big, t.opt.Workers)
		lap("select")
		if n > 0 && n == len(remove) {
			return fmt.Errorf("train: step %d: pruning would remove all %d Gaussians (opacity below %g)", s, n, d.PruneOpacity)
		}
		counts["pruned"], counts["gaussians"] = n, len(remove)-n
		if n > 0 {
			if err := t.eng.Apply(engine.Edit{Remove: remove}); err != nil {
				return fmt.Errorf("train: step %d: prune: %w", s, err)
			}
			lap("prune")
		}
	}
	err = t.eng.ResetStats()
	lap("reset")
	return err
}

// statCoverage returns how many splats the statistics saw in at least one view and the mean
// number of views over those.
func statCoverage(st engine.Stats) (seen int, meanViews float64) {
	var views int64
	for _, c := range st.Count {
		if c > 0 {
			seen++
			views += int64(c)
		}
	}
	if seen > 0 {
		meanViews = float64(views) / float64(seen)
	}
	return seen, meanViews
}

// growAndPrune folds the prune of the grown set into the growth e: before holds the verdicts
// on the n splats before it (beforeN of them to remove), kids those on its split children (on
// engine.ChildShapes, child c of split k at k·SplitN + c). A kept or cloned splat is a copy of
// its source, so a source judged to go is removed and not cloned; the children of a split share
// their shapes and so their verdict, and a split whose children go is dropped with its samples,
// its parent removed as the split would have removed it. The merged edit gives the splats of e
// followed by the prune, in the same order, with the same fresh rows; it takes before over as
// its Remove mask. It returns the merged edit and how many of the grown set's splats the prune
// took and kept.
func growAndPrune(e engine.Edit, before []bool, beforeN int, kids []bool) (merged engine.Edit, pruned, kept int) {
	merged = engine.Edit{Remove: before, SplitN: e.SplitN, SplitScaleDiv: e.SplitScaleDiv}
	grown := len(before) - len(e.Split) + len(e.Clone) + len(e.Split)*e.SplitN
	pruned = beforeN // the kept splats' verdicts, less the split parents' below
	for _, i := range e.Clone {
		if before[i] {
			pruned++
		} else {
			merged.Clone = append(merged.Clone, i)
		}
	}
	per := 3 * e.SplitN
	for k, i := range e.Split {
		if before[i] {
			pruned-- // a parent is not among the grown splats
		}
		if kids[k*e.SplitN] {
			pruned += e.SplitN
			merged.Remove[i] = true
			continue
		}
		merged.Split = append(merged.Split, i)
		merged.SplitSamples = append(merged.SplitSamples, e.SplitSamples[k*per:(k+1)*per]...)
	}
	return merged, pruned, grown - pruned
}

// growEdit selects the splats to clone and to split, in index order, with the splats cut into
// workers ranges (the lists are joined range by range, so the order is the same).
func growEdit(g engine.Shapes, st engine.Stats, d *DensifyOptions, extent float64, workers int) engine.Edit {
	e := engine.Edit{SplitN: d.SplitN, SplitScaleDiv: float32(0.8 * float64(d.SplitN))}
	large := newScaleAbove(d.PercentDense * extent)
	n := g.Len()
	clones := make([][]int32, len(par.Ranges(n, workers)))
	splits := make([][]int32, len(clones))
	par.For(n, workers, func(k, lo, hi int) {
		for i := lo; i < hi; i++ {
			if st.Count[i] == 0 {
				continue
			}
			if float64(st.GradAccum[i])/float64(st.Count[i]) < d.GradThreshold {
				continue
			}
			if !large.test(g, i) {
				clones[k] = append(clones[k], int32(i))
			} else {
				splits[k] = append(splits[k], int32(i))
			}
		}
	})
	e.Clone, e.Split = slices.Concat(clones...), slices.Concat(splits...)
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
// the extent in the world; workers goroutines each take a range of the splats.
func pruneMask(g engine.Shapes, st engine.Stats, d *DensifyOptions, extent float64, big bool, workers int) ([]bool, int) {
	remove := make([]bool, g.Len())
	counts := make([]int, len(par.Ranges(len(remove), workers)))
	par.For(len(remove), workers, func(k, lo, hi int) {
		counts[k] = pruneRange(g, st, d, extent, big, remove, lo, hi)
	})
	n := 0
	for _, c := range counts {
		n += c
	}
	return remove, n
}

// pruneRange is pruneMask for splats [lo, hi): it sets their remove flags and returns how many
// it set.
func pruneRange(g engine.Shapes, st engine.Stats, d *DensifyOptions, extent float64, big bool, remove []bool, lo, hi int) int {
	n := 0
	faint := newOpacityBelow(d.PruneOpacity)
	huge := newScaleAbove(d.MaxWorldScale * extent)
	// Statistics without radii (zeroed by a growth) leave nothing above the screen limit.
	screen, world := d.MaxScreenSize > 0 && big && st.MaxRadius != nil, d.MaxWorldScale > 0 && big
	logits, radii := g.OpacityLogits, st.MaxRadius
	for i := lo; i < hi; i++ {
		// Every test is evaluated and the answers combined without branches: on real
		// scenes each is close to a coin flip per splat, and mispredicted branches cost
		// more than the comparisons. Only values too close to a cutoff to decide from
		// the logit or log-scale alone take the exact (branching) path.
		x := float64(logits[i])
		r := b2u(x < faint.lo)
		if x >= faint.lo && !(x > faint.hi) { // near the cutoff (NaN compares false either way, as exactly)
			r = b2u(faint.exact(logits[i]))
		}
		r |= b2u(screen && float64(radii[i]) > d.MaxScreenSize)
		m := maxLogScale(g, i)
		w := b2u(m > huge.hi)
		if m >= huge.lo && !(m > huge.hi) { // near the cutoff
			w = b2u(huge.exact(g, i))
		}
		r |= w & b2u(world)
		remove[i] = r != 0
		n += int(r)
	}
	return n
}

// b2u is 1 for true; the compiler makes it a flag move, not a branch.
func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// The densification tests run over every splat at every densification (900k
// splats on bonsai, 150 times), where an exp per splat was most of their cost.
// Both functions they compare are increasing, so a logit or log-scale clearly
// on one side of the threshold's preimage decides the test without the exp;
// the few within a margin far wider than the rounding take the exact path,
// so the answers are those of the exact test.

// opacityBelow tests float64(Sigmoid(logit)) < t: below lo it holds, above hi it does not,
// between them exact decides.
type opacityBelow struct{ t, lo, hi float64 }

func newOpacityBelow(t float64) opacityBelow {
	o := opacityBelow{t: t, lo: math.Inf(-1), hi: math.Inf(1)}
	if t > 0 && t < 1 {
		// Sigmoid(lo) = t(1−1e-5) and Sigmoid(hi) = t(1+1e-5): apart from t by far
		// more than float32's relative rounding (6e-8).
		o.lo = logit(t * (1 - 1e-5))
		if u := t * (1 + 1e-5); u < 1 {
			o.hi = logit(u)
		}
	}
	return o
}

func logit(p float64) float64 { return math.Log(p / (1 - p)) }

func (o *opacityBelow) exact(x float32) bool { return float64(splat.Sigmoid(x)) < o.t }

// scaleAbove tests maxScale(g, i) > limit.
type scaleAbove struct{ limit, lo, hi float64 }

func newScaleAbove(limit float64) scaleAbove {
	s := scaleAbove{limit: limit, lo: math.Inf(-1), hi: math.Inf(1)}
	if limit > 0 && !math.IsInf(limit, 1) {
		l := math.Log(limit)
		s.lo, s.hi = l-1e-9*(1+math.Abs(l)), l+1e-9*(1+math.Abs(l))
	}
	return s
}

func (s *scaleAbove) test(g engine.Shapes, i int) bool {
	switch m := maxLogScale(g, i); {
	case m < s.lo:
		return false
	case m > s.hi:
		return true
	}
	return s.exact(g, i)
}

func (s *scaleAbove) exact(g engine.Shapes, i int) bool { return maxScale(g, i) > s.limit }

// maxLogScale is the largest log-scale of splat i. The built-in max has math.Max's rules
// (NaN wins, +0 above −0) and the float32 → float64 conversion keeps order, so this is
// math.Max of the converted values, without its cost.
func maxLogScale(g engine.Shapes, i int) float64 {
	l := g.LogScales[i*3 : i*3+3 : i*3+3]
	return float64(max(l[0], l[1], l[2]))
}

func maxScale(g engine.Shapes, i int) float64 { return math.Exp(maxLogScale(g, i)) }

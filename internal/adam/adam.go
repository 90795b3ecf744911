package adam

import (
	"fmt"
	"math"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Adam hyperparameters of design.md §5 step 8 (PyTorch's defaults, except ε,
// which 3DGS sets tiny because gradients of far-away splats are tiny too).
const (
	DefaultBeta1 = 0.9
	DefaultBeta2 = 0.999
	DefaultEps   = 1e-15
)

// GroupConfig holds the settings of one parameter group.
type GroupConfig struct {
	// LR is the group's learning rate (the base of any schedule; Step takes
	// the rate of each step explicitly).
	LR float32
	// Clip bounds each gradient element to [−Clip, Clip] before it enters the
	// moments; 0 = off.
	Clip float32
	// MaxUpdate bounds each element's Adam update to [−MaxUpdate, MaxUpdate];
	// 0 = off.
	MaxUpdate float32
	// Min and Max bound the updated values; NaN = no bound.
	Min, Max float32
	// VisibleOnly leaves the group's values and moments of the splats out of the step's view
	// as they are (sparse Adam), where Step is given the view's flags.
	VisibleOnly bool
}

// Unbounded returns a GroupConfig with learning rate lr and no clip, clamp
// or bounds.
func Unbounded(lr float32) GroupConfig {
	nan := float32(math.NaN())
	return GroupConfig{LR: lr, Min: nan, Max: nan}
}

// Config holds the optimizer's settings.
type Config struct {
	Beta1, Beta2, Eps float64
	Groups            [NumGroups]GroupConfig
}

// BaseConfig returns the hyperparameters of design.md §5 with no clip,
// clamp or bounds, and every learning rate 0: the rates come from the run
// config (configs/default.yaml), the one source of defaults.
func BaseConfig() Config {
	c := Config{Beta1: DefaultBeta1, Beta2: DefaultBeta2, Eps: DefaultEps}
	for g := range c.Groups {
		c.Groups[g] = Unbounded(0)
	}
	return c
}

// LRs returns the groups' base learning rates, indexed by Group.
func (c Config) LRs() [NumGroups]float32 {
	var lr [NumGroups]float32
	for g := range lr {
		lr[g] = c.Groups[g].LR
	}
	return lr
}

// Validate checks every setting; the error names the setting and the
// allowed range.
func (c *Config) Validate() error {
	if !(c.Beta1 >= 0 && c.Beta1 < 1) {
		return fmt.Errorf("adam: beta1 = %v, want a value in [0, 1)", c.Beta1)
	}
	if !(c.Beta2 >= 0 && c.Beta2 < 1) {
		return fmt.Errorf("adam: beta2 = %v, want a value in [0, 1)", c.Beta2)
	}
	if !(c.Eps > 0 && c.Eps <= math.MaxFloat32) {
		return fmt.Errorf("adam: eps = %v, want a positive finite float32", c.Eps)
	}
	for g := range NumGroups {
		gc := c.Groups[g]
		name := Group(g).String()
		for _, f := range []struct {
			key string
			v   float32
		}{{"lr", gc.LR}, {"clip", gc.Clip}, {"max_update", gc.MaxUpdate}} {
			if !(f.v >= 0 && f.v <= math.MaxFloat32) {
				return fmt.Errorf("adam: %s.%s = %v, want a finite value ≥ 0 (0 = off for clip and max_update)", name, f.key, f.v)
			}
		}
		if gc.Min > gc.Max { // false when either is NaN
			return fmt.Errorf("adam: %s.min = %v is above %s.max = %v", name, gc.Min, name, gc.Max)
		}
	}
	return nil
}

// Optimizer holds Adam's state for N splats.
//
// The exported fields are the state a checkpoint stores; after writing them
// directly (restoring a checkpoint), call Validate.
type Optimizer struct {
	// M and V are the first and second moments, in the parameters' layout.
	M, V *splat.Gaussians
	// Steps counts the steps taken per group, for bias correction. Like
	// PyTorch we keep one counter per group; they are equal in practice.
	// Step increments every counter, also for splats a visible-only update
	// leaves alone (bias correction follows time, as in sparse Adam).
	Steps [NumGroups]int64

	cfg     Config
	workers int
}

// SetWorkers sets how many goroutines Step uses (results do not depend on
// it: every element is updated on its own).
func (o *Optimizer) SetWorkers(n int) { o.workers = n }

// New returns an optimizer for n splats with zero moments.
func New(cfg Config, n int) (*Optimizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("adam: negative splat count %d", n)
	}
	return &Optimizer{M: splat.Zeros[float32](n), V: splat.Zeros[float32](n), cfg: cfg}, nil
}

// Config returns the optimizer's settings.
func (o *Optimizer) Config() Config { return o.cfg }

// SetConfig replaces the settings (the moments and step counters stay).
func (o *Optimizer) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	o.cfg = cfg
	return nil
}

// Len is the number of splats the state is for.
func (o *Optimizer) Len() int {
	if o.M == nil {
		return 0
	}
	return o.M.Len()
}

// checkState makes sure the moments (which callers may have replaced) have
// one shape, so that no index below can go out of range.
func (o *Optimizer) checkState() error {
	n := o.Len()
	if err := checkShape("first moment", o.M, n); err != nil {
		return err
	}
	return checkShape("second moment", o.V, n)
}

// Validate checks the exported state after it was set directly: moments of
// consistent shape, finite, V ≥ 0, step counters ≥ 0.
func (o *Optimizer) Validate() error {
	if o.M == nil || o.V == nil {
		return fmt.Errorf("adam: moments missing")
	}
	if err := o.M.Validate(); err != nil {
		return fmt.Errorf("adam: first moment: %w", err)
	}
	if err := o.V.Validate(); err != nil {
		return fmt.Errorf("adam: second moment: %w", err)
	}
	if o.M.Len() != o.V.Len() {
		return fmt.Errorf("adam: first moment has %d splats, second moment %d", o.M.Len(), o.V.Len())
	}
	for _, f := range o.V.Fields() {
		for j, v := range f.Data {
			if v < 0 {
				return fmt.Errorf("adam: second moment of %s of splat %d is negative (%v)", f.Name, j/f.Width, v)
			}
		}
	}
	for g, s := range o.Steps {
		if s < 0 {
			return fmt.Errorf("adam: step counter of %s is %d", Group(g), s)
		}
	}
	return nil
}

// GroupStats counts what the guards and limits did in one group.
type GroupStats struct {
	NonFiniteGrads int // gradient elements that were NaN or ±Inf (or whose square overflows), used as 0
	SkippedUpdates int // elements whose update or new value was not finite; left unchanged
	ClippedGrads   int // gradient elements clipped to ±Clip
	ClampedUpdates int // updates clamped to ±MaxUpdate
	BoundedValues  int // new values clamped to [Min, Max]
}

func (s *GroupStats) add(o GroupStats) {
	s.NonFiniteGrads += o.NonFiniteGrads
	s.SkippedUpdates += o.SkippedUpdates
	s.ClippedGrads += o.ClippedGrads
	s.ClampedUpdates += o.ClampedUpdates
	s.BoundedValues += o.BoundedValues
}

// Stats reports one Step.
type Stats struct {
	Groups  [NumGroups]GroupStats
	Updated int // splats updated in at least one group (all, unless every group is visible-only)
}

// Total sums the per-group counts.
func (s *Stats) Total() GroupStats {
	var t GroupStats
	for _, g := range s.Groups {
		t.add(g)
	}
	return t
}

// gradLimit bounds usable gradients: |g| < 2⁶⁴ has a finite float32 square
// (MaxFloat32 is just under 2¹²⁸); a larger one would make the second moment
// +Inf for good, so it is treated like a non-finite gradient.
const gradLimit = 0x1p64

// Step applies one Adam step to params with gradients grads (the same SoA
// layout; every array is read) and the learning rate lr[g] of each group
// (Config.LRs with any schedule applied). With visible != nil (one flag per
// splat), a group whose VisibleOnly is set updates only the visible splats:
// the others keep that group's parameters and moments (sparse Adam).
//
// Per element, in order: a non-finite gradient is used as 0; the gradient is
// clipped; m ← β1·m + (1−β1)·g, v ← β2·v + (1−β2)·g²; the update
// −lr·m̂/(√v̂ + ε) with m̂ = m/(1−β1ᵗ), v̂ = v/(1−β2ᵗ) is clamped; a
// non-finite update or new value is skipped; the new value is bounded.
func (o *Optimizer) Step(params, grads *splat.Gaussians, lr [NumGroups]float32, visible []bool) (Stats, error) {
	if err := o.checkState(); err != nil {
		return Stats{}, err
	}
	n := o.Len()
	if err := checkShape("parameters", params, n); err != nil {
		return Stats{}, err
	}
	if err := checkShape("gradients", grads, n); err != nil {
		return Stats{}, err
	}
	if visible != nil && len(visible) != n {
		return Stats{}, fmt.Errorf("adam: visibility has %d flags, want %d", len(visible), n)
	}
	for g, r := range lr {
		if !(r >= 0 && r <= math.MaxFloat32) {
			return Stats{}, fmt.Errorf("adam: learning rate of %s = %v, want a finite value ≥ 0", Group(g), r)
		}
	}

	var st Stats
	st.Updated = n
	if visible != nil && o.allVisibleOnly() {
		st.Updated = 0
		for _, v := range visible {
			if v {
				st.Updated++
			}
		}
	}
	for g := range NumGroups {
		o.Steps[g]++
		vis := visible
		if !o.cfg.Groups[g].VisibleOnly {
			vis = nil
		}
		st.Groups[g] = o.stepGroup(Group(g), params, grads, lr[g], vis)
	}
	return st, nil
}

// allVisibleOnly reports whether every group updates only the visible splats.
func (o *Optimizer) allVisibleOnly() bool {
	for _, g := range o.cfg.Groups {
		if !g.VisibleOnly {
			return false
		}
	}
	return true
}

func (o *Optimizer) stepGroup(grp Group, params, grads *splat.Gaussians, lr float32, visible []bool) GroupStats {
	var st GroupStats
	gc := o.cfg.Groups[grp]
	p, stride, off, width := layout(params, grp)
	gr, _, _, _ := layout(grads, grp)
	md, _, _, _ := layout(o.M, grp)
	vd, _, _, _ := layout(o.V, grp)

	// Bias corrections in float64 (β2ᵗ is close to 1 for many steps); the
	// per-element arithmetic is float32, as on the GPU.
	t := float64(o.Steps[grp])
	bc1 := 1 - math.Pow(o.cfg.Beta1, t)
	bc2 := 1 - math.Pow(o.cfg.Beta2, t)
	stepSize := float32(float64(lr) / bc1)
	invSqrtBc2 := float32(1 / math.Sqrt(bc2))
	b1, b2 := float32(o.cfg.Beta1), float32(o.cfg.Beta2)
	c1, c2 := float32(1-o.cfg.Beta1), float32(1-o.cfg.Beta2)
	eps := float32(o.cfg.Eps)
	hasMin, hasMax := !isNaN(gc.Min), !isNaN(gc.Max)

	n := len(p) / stride
	// Elements are independent: split the splats into contiguous chunks, one
	// per worker, each with its own counts, summed in chunk order.
	workers := max(o.workers, 1)
	if n < 4096 {
		workers = 1
	}
	chunk := (n + workers - 1) / workers
	parts := make([]GroupStats, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, n)
		if lo >= hi {
			continue
		}
		wg.Add(1)
		go func(st *GroupStats) {
			defer wg.Done()
			// Counters live in locals (not through st) so that the loop
			// keeps them in registers; rows are resliced so that the
			// compiler drops the bounds checks.
			var nonFinite, clipped, clamped, skipped, bounded int
			for i := lo; i < hi; i++ {
				if visible != nil && !visible[i] {
					continue
				}
				base := i*stride + off
				pr := p[base : base+width : base+width]
				gr := gr[base : base+width : base+width]
				mr := md[base : base+width : base+width]
				vr := vd[base : base+width : base+width]
				for k := range pr {
					g := gr[k]
					if !(g > -gradLimit && g < gradLimit) { // NaN, ±Inf, or g² would overflow
						g = 0
						nonFinite++
					}
					if gc.Clip > 0 {
						if g > gc.Clip {
							g = gc.Clip
							clipped++
						} else if g < -gc.Clip {
							g = -gc.Clip
							clipped++
						}
					}
					m := b1*mr[k] + c1*g
					v := b2*vr[k] + c2*(g*g)
					mr[k], vr[k] = m, v
					u := -stepSize * m / (float32(math.Sqrt(float64(v)))*invSqrtBc2 + eps)
					if gc.MaxUpdate > 0 {
						if u > gc.MaxUpdate {
							u = gc.MaxUpdate
							clamped++
						} else if u < -gc.MaxUpdate {
							u = -gc.MaxUpdate
							clamped++
						}
					}
					x := pr[k] + u
					if !isFinite(u) || !isFinite(x) {
						skipped++
						continue
					}
					if hasMin && x < gc.Min {
						x = gc.Min
						bounded++
					} else if hasMax && x > gc.Max {
						x = gc.Max
						bounded++
					}
					pr[k] = x
				}
			}
			st.NonFiniteGrads += nonFinite
			st.ClippedGrads += clipped
			st.ClampedUpdates += clamped
			st.SkippedUpdates += skipped
			st.BoundedValues += bounded
		}(&parts[w])
	}
	wg.Wait()
	for _, ps := range parts {
		st.add(ps)
	}
	return st
}

func isNaN(x float32) bool    { return x != x }
func isFinite(x float32) bool { return x-x == 0 }

// checkShape checks that every array of g holds n splats.
func checkShape(what string, g *splat.Gaussians, n int) error {
	if g == nil {
		return fmt.Errorf("adam: %s missing", what)
	}
	for _, f := range g.Fields() {
		if len(f.Data) != n*f.Width {
			return fmt.Errorf("adam: %s: %s has %d values, want %d (N=%d × %d; apply densification edits to the optimizer with Gather)",
				what, f.Name, len(f.Data), n*f.Width, n, f.Width)
		}
	}
	return nil
}

// Gather rebuilds the moments after a densification edit of the
// parameters: new splat i takes the moments of old splat src[i], or zero
// moments when src[i] = −1 (a new splat, as the original 3DGS starts clones
// and split children). Indices may repeat. For example pruning is
// Gather(kept indices); splitting is Gather(kept indices followed by one −1
// per child); cloning alone is Append.
func (o *Optimizer) Gather(src []int32) error {
	if err := o.checkState(); err != nil {
		return err
	}
	n := o.Len()
	for i, s := range src {
		if s < -1 || int(s) >= n {
			return fmt.Errorf("adam: Gather: src[%d] = %d, want −1 or an index in [0, %d)", i, s, n)
		}
	}
	o.M = splat.Gather(o.M, src)
	o.V = splat.Gather(o.V, src)
	return nil
}

// Append adds k splats with zero moments at the end.
func (o *Optimizer) Append(k int) error {
	if k < 0 {
		return fmt.Errorf("adam: Append(%d): negative count", k)
	}
	if err := o.checkState(); err != nil {
		return err
	}
	z := splat.Zeros[float32](k)
	for _, g := range []*splat.Gaussians{o.M, o.V} {
		g.Means = append(g.Means, z.Means...)
		g.LogScales = append(g.LogScales, z.LogScales...)
		g.Quats = append(g.Quats, z.Quats...)
		g.OpacityLogits = append(g.OpacityLogits, z.OpacityLogits...)
		g.SH = append(g.SH, z.SH...)
	}
	return nil
}

// ResetGroup zeroes both moments of one group for every splat (the
// original 3DGS does this for the opacities when it resets them).
func (o *Optimizer) ResetGroup(grp Group) error {
	if grp < 0 || grp >= NumGroups {
		return fmt.Errorf("adam: ResetGroup: no group %v", grp)
	}
	if err := o.checkState(); err != nil {
		return err
	}
	for _, g := range []*splat.Gaussians{o.M, o.V} {
		d, stride, off, width := layout(g, grp)
		for i := 0; i+stride <= len(d); i += stride {
			clear(d[i+off : i+off+width])
		}
	}
	return nil
}

// ResetSplats zeroes both moments of the given splats in every group (for
// splats whose parameters were replaced in place, such as relocated ones).
func (o *Optimizer) ResetSplats(idx []int32) error {
	if err := o.checkState(); err != nil {
		return err
	}
	n := o.Len()
	for i, s := range idx {
		if s < 0 || int(s) >= n {
			return fmt.Errorf("adam: ResetSplats: idx[%d] = %d, want an index in [0, %d)", i, s, n)
		}
	}
	for _, g := range []*splat.Gaussians{o.M, o.V} {
		for _, f := range g.Fields() {
			for _, s := range idx {
				clear(f.Data[int(s)*f.Width : (int(s)+1)*f.Width])
			}
		}
	}
	return nil
}

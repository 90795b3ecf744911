package adam

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Seeds of the random test data (named so a failure can be replayed).
const (
	seedParams uint64 = 11
	seedGrads  uint64 = 12
)

// testLRs are distinct per group so that a group picking up another's rate
// shows.
var testLRs = [NumGroups]float32{0.1, 5e-3, 0.1, 5e-3, 0.1, 5e-3}

func testConfig() Config {
	c := BaseConfig()
	for g := range c.Groups {
		c.Groups[g].LR = testLRs[g]
	}
	return c
}

func randGaussians(n int, seed uint64, scale float64) *splat.Gaussians {
	r := rand.New(rand.NewPCG(seed, 3))
	g := splat.New(n)
	for _, f := range g.Fields() {
		for i := range f.Data {
			f.Data[i] = float32(scale * (2*r.Float64() - 1))
		}
	}
	return g
}

func newOpt(t *testing.T, cfg Config, n int) *Optimizer {
	t.Helper()
	o, err := New(cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func mustStep(t *testing.T, o *Optimizer, p, g *splat.Gaussians, lr [NumGroups]float32, vis []bool) Stats {
	t.Helper()
	st, err := o.Step(p, g, lr, vis)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// elem returns the index in its array of component c of splat i in group grp.
func elem(grp Group, i, c int) int {
	_, stride, off, _ := layout(&splat.Gaussians{}, grp)
	return i*stride + off + c
}

func groupData(g *splat.Gaussians, grp Group) []float32 {
	d, _, _, _ := layout(g, grp)
	return d
}

func TestGroupNames(t *testing.T) {
	for g := range NumGroups {
		name := Group(g).String()
		got, err := ParseGroup(name)
		if err != nil || got != Group(g) {
			t.Errorf("ParseGroup(%q) = %v, %v; want %d", name, got, err, g)
		}
	}
	if _, err := ParseGroup("sh"); err == nil || !strings.Contains(err.Error(), "sh_dc, sh_rest") {
		t.Errorf("ParseGroup(\"sh\") error %v, want one listing the allowed names", err)
	}
}

// TestGroupLayoutCoversEveryValue checks that the six groups partition the
// parameter arrays: every value belongs to exactly one group.
func TestGroupLayoutCoversEveryValue(t *testing.T) {
	const n = 3
	g := splat.New(n)
	seen := map[*float32]int{}
	for grp := range Group(NumGroups) {
		d, stride, off, width := layout(g, grp)
		for i := range n {
			for c := range width {
				seen[&d[i*stride+off+c]]++
			}
		}
	}
	total := 0
	for _, f := range g.Fields() {
		for i := range f.Data {
			if seen[&f.Data[i]] != 1 {
				t.Fatalf("%s[%d] belongs to %d groups, want 1", f.Name, i, seen[&f.Data[i]])
			}
		}
		total += len(f.Data)
	}
	if len(seen) != total {
		t.Errorf("groups cover %d values, parameters have %d", len(seen), total)
	}
}

// TestStepHandComputed follows one element per group through three steps
// whose values were worked out by hand (and checked in float64):
//
//	lr 0.1, p0 = 1, g = 0.5, −1, 0.25:
//	  t=1: m = 0.05, v = 2.5e-4, m̂ = 0.5, v̂ = 0.25, Δ = −0.1·0.5/0.5 = −0.1
//	  t=2: m = −0.055, v = 1.24975e-3, m̂ = −0.055/0.19, v̂ = 1.24975e-3/1.999e-3, Δ = +0.0366104
//	  t=3: m = −0.0245, v = 1.311e-3, m̂ = −0.0245/0.271, v̂ = 1.311e-3/2.997001e-3, Δ = +0.0136691
//	lr 5e-3, p0 = −0.3, g = 2e-3, 2e-3, −4e-3: Δ = −5e-3, −5e-3, +3.78247e-4
func TestStepHandComputed(t *testing.T) {
	type seq struct {
		p0    float32
		grads [3]float32
		want  [3]float64 // parameter after each step
	}
	big := seq{1, [3]float32{0.5, -1, 0.25}, [3]float64{0.9, 0.9366103527035844, 0.9502794190086669}}
	small := seq{-0.3, [3]float32{2e-3, 2e-3, -4e-3}, [3]float64{-0.3049999999999975, -0.30999999999999495, -0.3096217533462116}}
	const n, splatIdx = 4, 2
	for grp := range Group(NumGroups) {
		s := small
		if testLRs[grp] == 0.1 {
			s = big
		}
		_, _, _, width := layout(&splat.Gaussians{}, grp)
		k := elem(grp, splatIdx, width-1)
		params := randGaussians(n, seedParams, 1)
		groupData(params, grp)[k] = s.p0
		o := newOpt(t, testConfig(), n)
		for step := range 3 {
			grads := randGaussians(n, seedGrads+uint64(step), 1)
			groupData(grads, grp)[k] = s.grads[step]
			mustStep(t, o, params, grads, o.Config().LRs(), nil)
			got := float64(groupData(params, grp)[k])
			if math.Abs(got-s.want[step]) > 2e-6 {
				t.Errorf("%v step %d: value %.9f, want %.9f", grp, step+1, got, s.want[step])
			}
		}
	}
}

// refAdam is an independent float64 Adam for one element.
type refAdam struct{ p, m, v float64 }

func (r *refAdam) step(g, lr float64, t int) {
	r.m = DefaultBeta1*r.m + (1-DefaultBeta1)*g
	r.v = DefaultBeta2*r.v + (1-DefaultBeta2)*g*g
	mh := r.m / (1 - math.Pow(DefaultBeta1, float64(t)))
	vh := r.v / (1 - math.Pow(DefaultBeta2, float64(t)))
	r.p -= lr * mh / (math.Sqrt(vh) + DefaultEps)
}

// TestStepMatchesFloat64Reference compares every element of every group
// over five steps with a float64 Adam: parameters within float32 rounding,
// moments to 1e-5 relative.
func TestStepMatchesFloat64Reference(t *testing.T) {
	const n, steps = 5, 5
	params := randGaussians(n, seedParams, 1)
	o := newOpt(t, testConfig(), n)
	ref := make([][]refAdam, NumGroups)
	for grp := range Group(NumGroups) {
		d := groupData(params, grp)
		ref[grp] = make([]refAdam, len(d))
		for k := range d {
			ref[grp][k].p = float64(d[k])
		}
	}
	for step := 1; step <= steps; step++ {
		grads := randGaussians(n, seedGrads+uint64(step), 0.1)
		mustStep(t, o, params, grads, o.Config().LRs(), nil)
		for grp := range Group(NumGroups) {
			d, stride, off, width := layout(params, grp)
			gd, md, vd := groupData(grads, grp), groupData(o.M, grp), groupData(o.V, grp)
			for i := range n {
				for c := range width {
					k := i*stride + off + c
					r := &ref[grp][k]
					r.step(float64(gd[k]), float64(testLRs[grp]), step)
					if math.Abs(float64(d[k])-r.p) > 1e-6 {
						t.Fatalf("%v splat %d comp %d step %d: value %.9g, float64 reference %.9g", grp, i, c, step, d[k], r.p)
					}
					// m can cancel (its terms are up to |g| ≤ 0.1), so its
					// bound is absolute; v is a sum of positive terms.
					if math.Abs(float64(md[k])-r.m) > 1e-7 || math.Abs(float64(vd[k])-r.v) > 1e-5*r.v+1e-15 {
						t.Fatalf("%v splat %d comp %d step %d: moments (%g, %g), reference (%g, %g)", grp, i, c, step, md[k], vd[k], r.m, r.v)
					}
				}
			}
		}
	}
	for g, s := range o.Steps {
		if s != steps {
			t.Errorf("Steps[%v] = %d, want %d", Group(g), s, steps)
		}
	}
}

// TestFirstStepIsSignTimesLR: at t = 1, m̂ = g and v̂ = g², so the update
// is −lr·g/(|g| + ε) ≈ −lr·sign(g) whatever the gradient's size.
func TestFirstStepIsSignTimesLR(t *testing.T) {
	grads := []float32{1e-9, -1e-6, 3e-3, -0.7, 42, -1e4, 0}
	const lr = 0.01
	cfg := BaseConfig()
	for g := range cfg.Groups {
		cfg.Groups[g].LR = lr
	}
	n := len(grads)
	o := newOpt(t, cfg, n)
	params, g := splat.New(n), splat.New(n)
	before := params.Clone()
	for i, v := range grads {
		g.OpacityLogits[i] = v
	}
	mustStep(t, o, params, g, cfg.LRs(), nil)
	for i, v := range grads {
		got := float64(params.OpacityLogits[i] - before.OpacityLogits[i])
		want := 0.0
		if v > 0 {
			want = -lr
		} else if v < 0 {
			want = lr
		}
		if math.Abs(got-want) > 1e-6*lr {
			t.Errorf("g = %g: update %.9g, want %.9g", v, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	const n = 2
	cfg := testConfig()
	cfg.Groups[LogScales].Clip = 0.5
	clipped := newOpt(t, cfg, n)
	plain := newOpt(t, testConfig(), n)
	p1, p2 := randGaussians(n, seedParams, 1), randGaussians(n, seedParams, 1)
	g1, g2 := randGaussians(n, seedGrads, 0.1), randGaussians(n, seedGrads, 0.1)
	// Two elements beyond the clip, one inside: the clipped run must equal a
	// plain run that was given the clipped values.
	g1.LogScales[0], g2.LogScales[0] = 10, 0.5
	g1.LogScales[4], g2.LogScales[4] = -3, -0.5
	g1.LogScales[5], g2.LogScales[5] = 0.25, 0.25
	st := mustStep(t, clipped, p1, g1, cfg.LRs(), nil)
	mustStep(t, plain, p2, g2, cfg.LRs(), nil)
	if got := st.Groups[LogScales].ClippedGrads; got != 2 {
		t.Errorf("ClippedGrads = %d, want 2", got)
	}
	if got := st.Total().ClippedGrads; got != 2 {
		t.Errorf("total ClippedGrads = %d, want 2 (other groups unclipped)", got)
	}
	assertSame(t, "params", p1, p2)
	assertSame(t, "first moment", clipped.M, plain.M)
	assertSame(t, "second moment", clipped.V, plain.V)
}

func assertSame(t *testing.T, what string, a, b *splat.Gaussians) {
	t.Helper()
	fa, fb := a.Fields(), b.Fields()
	for i := range fa {
		if len(fa[i].Data) != len(fb[i].Data) {
			t.Fatalf("%s: %s lengths %d and %d", what, fa[i].Name, len(fa[i].Data), len(fb[i].Data))
		}
		for j := range fa[i].Data {
			if math.Float32bits(fa[i].Data[j]) != math.Float32bits(fb[i].Data[j]) {
				t.Fatalf("%s: %s[%d] = %v and %v", what, fa[i].Name, j, fa[i].Data[j], fb[i].Data[j])
			}
		}
	}
}

func TestBoundsAndMaxUpdate(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name             string
		gc               GroupConfig
		p0, g            float32
		want             float32
		bounded, clamped int
	}{
		{"min bound stops a step down", GroupConfig{LR: 0.1, Min: 0.95, Max: nan}, 1, 1, 0.95, 1, 0},
		{"max bound stops a step up", GroupConfig{LR: 0.1, Min: nan, Max: 1.05}, 1, -1, 1.05, 1, 0},
		{"inside the bounds", GroupConfig{LR: 0.1, Min: 0, Max: 2}, 1, 1, 0.9, 0, 0},
		{"NaN bounds are none", GroupConfig{LR: 0.1, Min: nan, Max: nan}, 1, 1, 0.9, 0, 0},
		{"max update clamps", GroupConfig{LR: 0.1, MaxUpdate: 0.01, Min: nan, Max: nan}, 1, 1, 0.99, 0, 1},
		{"max update above the step", GroupConfig{LR: 0.1, MaxUpdate: 0.5, Min: nan, Max: nan}, 1, -1, 1.1, 0, 0},
		{"clamp then bound", GroupConfig{LR: 0.1, MaxUpdate: 0.05, Min: 0.97, Max: nan}, 1, 1, 0.97, 1, 1},
	}
	for _, tc := range tests {
		cfg := BaseConfig()
		cfg.Groups[OpacityLogits] = tc.gc
		o := newOpt(t, cfg, 1)
		p, g := splat.New(1), splat.New(1)
		p.OpacityLogits[0], g.OpacityLogits[0] = tc.p0, tc.g
		st := mustStep(t, o, p, g, cfg.LRs(), nil)
		if math.Abs(float64(p.OpacityLogits[0]-tc.want)) > 1e-6 {
			t.Errorf("%s: value %v, want %v", tc.name, p.OpacityLogits[0], tc.want)
		}
		gs := st.Groups[OpacityLogits]
		if gs.BoundedValues != tc.bounded || gs.ClampedUpdates != tc.clamped {
			t.Errorf("%s: bounded %d clamped %d, want %d and %d", tc.name, gs.BoundedValues, gs.ClampedUpdates, tc.bounded, tc.clamped)
		}
	}
}

func TestNonFiniteGuards(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	const n = 6
	cfg := testConfig()
	cfg.Groups[LogScales].LR = 3e37 // finite (as is lr/(1−β1) = 3e38), but it overflows a large value
	o := newOpt(t, cfg, n)
	p, g := randGaussians(n, seedParams, 1), randGaussians(n, seedGrads, 0.1)
	g.Means[0], g.Means[1], g.Means[2] = nan, inf, -inf
	g.Means[3] = 1e30 // finite, but its square overflows float32
	// A finite update (+3e37) that overflows the value is skipped.
	p.LogScales[0], g.LogScales[0] = math.MaxFloat32, -1
	// A NaN parameter stays NaN (and is counted), its neighbours update.
	p.SH[elem(SHRest, 1, 0)] = nan
	before := p.Clone()
	st := mustStep(t, o, p, g, o.Config().LRs(), nil)

	if got := st.Groups[Means].NonFiniteGrads; got != 4 {
		t.Errorf("Means NonFiniteGrads = %d, want 4", got)
	}
	for i := range 4 {
		// g used as 0: at t = 1, m = 0 and the value does not move.
		if p.Means[i] != before.Means[i] || o.M.Means[i] != 0 || o.V.Means[i] != 0 {
			t.Errorf("means[%d]: value %v→%v, moments (%v, %v); want unchanged and zero", i, before.Means[i], p.Means[i], o.M.Means[i], o.V.Means[i])
		}
	}
	if got := st.Groups[LogScales].SkippedUpdates; got != 1 || p.LogScales[0] != math.MaxFloat32 {
		t.Errorf("overflowing update: skipped %d, value %v; want 1 and MaxFloat32", got, p.LogScales[0])
	}
	if got := st.Groups[SHRest].SkippedUpdates; got != 1 {
		t.Errorf("NaN parameter: skipped %d, want 1", got)
	}
	if p.SH[elem(SHRest, 1, 1)] == before.SH[elem(SHRest, 1, 1)] {
		t.Error("the NaN parameter's neighbour did not update")
	}
	if tot := st.Total(); tot.NonFiniteGrads != 4 || tot.SkippedUpdates != 2 {
		t.Errorf("totals %+v, want 4 non-finite gradients and 2 skipped updates", tot)
	}
	// The moments stay finite whatever came in.
	for _, m := range []*splat.Gaussians{o.M, o.V} {
		if err := m.Validate(); err != nil {
			t.Errorf("moments not finite after poison: %v", err)
		}
	}
}

// TestVisibleOnly: in a visible-only group the invisible splats keep their values and moments
// bit for bit; every other element moves exactly as in a dense step. Every group sparse, and
// the SH rest alone (the rest of a splat out of view is then left, the other groups not).
func TestVisibleOnly(t *testing.T) {
	const n = 5
	visible := []bool{true, false, true, false, false}
	for _, c := range []struct {
		name        string
		sparse      [NumGroups]bool
		wantUpdated int
	}{
		{"every group", [NumGroups]bool{true, true, true, true, true, true}, 2},
		{"sh rest", [NumGroups]bool{SHRest: true}, n},
		{"none", [NumGroups]bool{}, n},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			for g := range cfg.Groups {
				cfg.Groups[g].VisibleOnly = c.sparse[g]
			}
			sparse, dense := newOpt(t, cfg, n), newOpt(t, testConfig(), n)
			ps, pd := randGaussians(n, seedParams, 1), randGaussians(n, seedParams, 1)
			for step := range 3 {
				g := randGaussians(n, seedGrads+uint64(step), 0.1)
				vis := visible
				if step == 0 {
					vis = nil // a dense first step gives the invisible splats non-zero moments to keep
				}
				mBefore, vBefore, pBefore := sparse.M.Clone(), sparse.V.Clone(), ps.Clone()
				st := mustStep(t, sparse, ps, g, testLRs, vis)
				mustStep(t, dense, pd, g, testLRs, nil)
				if vis == nil {
					continue
				}
				if st.Updated != c.wantUpdated {
					t.Errorf("Updated = %d, want %d", st.Updated, c.wantUpdated)
				}
				for grp := range Group(NumGroups) {
					_, stride, off, width := layout(ps, grp)
					for i := range n {
						for k := i*stride + off; k < i*stride+off+width; k++ {
							type pair struct {
								name     string
								now, ref []float32
							}
							checks := []pair{{"value", groupData(ps, grp), groupData(pd, grp)}, {"m", groupData(sparse.M, grp), groupData(dense.M, grp)}, {"v", groupData(sparse.V, grp), groupData(dense.V, grp)}}
							left := c.sparse[grp] && !visible[i]
							if left {
								checks = []pair{{"value", groupData(ps, grp), groupData(pBefore, grp)}, {"m", groupData(sparse.M, grp), groupData(mBefore, grp)}, {"v", groupData(sparse.V, grp), groupData(vBefore, grp)}}
							}
							for _, ch := range checks {
								if math.Float32bits(ch.now[k]) != math.Float32bits(ch.ref[k]) {
									t.Fatalf("step %d %v splat %d (visible %v): %s %v, want %v", step, grp, i, visible[i], ch.name, ch.now[k], ch.ref[k])
								}
							}
						}
					}
				}
				// Visible splats' values must have moved (else the test is vacuous), and the
				// invisible splats' dense groups too.
				if ps.Means[0] == pBefore.Means[0] {
					t.Error("visible splat 0 did not move")
				}
				if !c.sparse[Means] && ps.Means[3] == pBefore.Means[3] {
					t.Error("the dense means of invisible splat 1 did not move")
				}
			}
		})
	}
}

func TestGatherAppendReset(t *testing.T) {
	const n = 4
	o := newOpt(t, testConfig(), n)
	p := randGaussians(n, seedParams, 1)
	mustStep(t, o, p, randGaussians(n, seedGrads, 0.1), testLRs, nil)
	m0, v0 := o.M.Clone(), o.V.Clone()
	steps := o.Steps

	src := []int32{3, -1, 0, 0, 2}
	if err := o.Gather(src); err != nil {
		t.Fatal(err)
	}
	if o.Len() != len(src) || o.V.Len() != len(src) {
		t.Fatalf("after Gather: %d splats, want %d", o.Len(), len(src))
	}
	for _, pair := range []struct{ now, old *splat.Gaussians }{{o.M, m0}, {o.V, v0}} {
		fn, fo := pair.now.Fields(), pair.old.Fields()
		for fi := range fn {
			w := fn[fi].Width
			for i, s := range src {
				for c := range w {
					want := float32(0)
					if s >= 0 {
						want = fo[fi].Data[int(s)*w+c]
					}
					if got := fn[fi].Data[i*w+c]; got != want {
						t.Fatalf("after Gather: %s of new splat %d comp %d = %v, want %v (src %d)", fn[fi].Name, i, c, got, want, s)
					}
				}
			}
		}
	}
	if o.Steps != steps {
		t.Errorf("Gather changed the step counters: %v, want %v", o.Steps, steps)
	}
	// The optimizer now refuses parameters of the old size...
	if _, err := o.Step(p, randGaussians(n, seedGrads, 0.1), testLRs, nil); err == nil {
		t.Error("Step with 4 splats after Gather to 5: want an error")
	}
	// ...and accepts the new size.
	p5 := randGaussians(len(src), seedParams, 1)
	mustStep(t, o, p5, randGaussians(len(src), seedGrads, 0.1), testLRs, nil)

	for _, bad := range [][]int32{{0, 5}, {-2}} {
		if err := o.Gather(bad); err == nil {
			t.Errorf("Gather(%v) on 5 splats: want an error", bad)
		}
	}

	if err := o.Append(2); err != nil {
		t.Fatal(err)
	}
	if o.Len() != 7 || len(o.V.SH) != 7*splat.SHCoeffs*3 {
		t.Fatalf("after Append(2): %d splats", o.Len())
	}
	for _, f := range o.M.Fields() {
		for _, v := range f.Data[5*f.Width:] {
			if v != 0 {
				t.Fatalf("Append: %s of an appended splat is %v, want 0", f.Name, v)
			}
		}
	}

	// ResetGroup clears only its group: SH DC but not SH rest.
	mustStep(t, o, randGaussians(7, seedParams, 1), randGaussians(7, seedGrads, 0.1), testLRs, nil)
	restBefore := append([]float32(nil), o.M.SH...)
	if err := o.ResetGroup(SHDC); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		for c := range splat.SHCoeffs * 3 {
			k := i*splat.SHCoeffs*3 + c
			if c < 3 && (o.M.SH[k] != 0 || o.V.SH[k] != 0) {
				t.Fatalf("ResetGroup(sh_dc): splat %d DC comp %d not zero", i, c)
			}
			if c >= 3 && o.M.SH[k] != restBefore[k] {
				t.Fatalf("ResetGroup(sh_dc) changed SH rest of splat %d comp %d", i, c)
			}
		}
	}
	if err := o.ResetGroup(Group(6)); err == nil {
		t.Error("ResetGroup(6): want an error")
	}

	// ResetSplats clears every group of the listed splats only.
	if err := o.ResetSplats([]int32{1, 6}); err != nil {
		t.Fatal(err)
	}
	for _, f := range o.V.Fields() {
		for i := range 7 {
			allZero := true
			for _, v := range f.Data[i*f.Width : (i+1)*f.Width] {
				allZero = allZero && v == 0
			}
			reset := i == 1 || i == 6
			if reset && !allZero {
				t.Errorf("ResetSplats: %s of splat %d not zero", f.Name, i)
			}
			if !reset && allZero && f.Name != "sh" {
				t.Errorf("ResetSplats: %s of splat %d was cleared", f.Name, i)
			}
		}
	}
	if err := o.ResetSplats([]int32{7}); err == nil {
		t.Error("ResetSplats([7]) on 7 splats: want an error")
	}
}

// TestCheckpointRoundTrip restores the exported state into a fresh
// optimizer and requires identical continuation.
func TestCheckpointRoundTrip(t *testing.T) {
	const n = 3
	a := newOpt(t, testConfig(), n)
	pa := randGaussians(n, seedParams, 1)
	for step := range 4 {
		mustStep(t, a, pa, randGaussians(n, seedGrads+uint64(step), 0.1), testLRs, nil)
	}
	b := newOpt(t, testConfig(), 0)
	b.M, b.V, b.Steps = a.M.Clone(), a.V.Clone(), a.Steps
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	pb := pa.Clone()
	g := randGaussians(n, seedGrads+9, 0.1)
	mustStep(t, a, pa, g, testLRs, nil)
	mustStep(t, b, pb, g, testLRs, nil)
	assertSame(t, "params after resume", pa, pb)

	b.V.Quats[1] = -1
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("Validate with a negative second moment: %v", err)
	}
	b.V.Quats[1] = 0
	b.Steps[Quats] = -1
	if err := b.Validate(); err == nil {
		t.Error("Validate with a negative step counter: want an error")
	}
	b.Steps[Quats] = 1
	b.M.SH = b.M.SH[:10]
	if err := b.Validate(); err == nil {
		t.Error("Validate with a short first moment: want an error")
	}
	if _, err := b.Step(pb, g, testLRs, nil); err == nil || !strings.Contains(err.Error(), "first moment") {
		t.Errorf("Step with a short first moment: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name   string
		edit   func(c *Config)
		wantIn string
	}{
		{"base is valid", func(*Config) {}, ""},
		{"beta1 = 1", func(c *Config) { c.Beta1 = 1 }, "beta1"},
		{"beta2 < 0", func(c *Config) { c.Beta2 = -0.1 }, "beta2"},
		{"eps = 0", func(c *Config) { c.Eps = 0 }, "eps"},
		{"negative lr", func(c *Config) { c.Groups[Quats].LR = -1 }, "quats.lr"},
		{"NaN clip", func(c *Config) { c.Groups[SHRest].Clip = nan }, "sh_rest.clip"},
		{"Inf max update", func(c *Config) { c.Groups[Means].MaxUpdate = float32(math.Inf(1)) }, "means.max_update"},
		{"min above max", func(c *Config) { c.Groups[OpacityLogits].Min, c.Groups[OpacityLogits].Max = 1, 0 }, "opacity_logits.min"},
		{"one-sided bound", func(c *Config) { c.Groups[OpacityLogits].Min = -5 }, ""},
	}
	for _, tc := range tests {
		c := BaseConfig()
		tc.edit(&c)
		err := c.Validate()
		if tc.wantIn == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantIn) || !strings.HasPrefix(err.Error(), "adam: ") {
			t.Errorf("%s: error %v, want one starting with \"adam: \" naming %q", tc.name, err, tc.wantIn)
		}
		if _, err := New(c, 1); err == nil {
			t.Errorf("%s: New accepted the config", tc.name)
		}
	}
}

func TestStepErrors(t *testing.T) {
	const n = 3
	o := newOpt(t, testConfig(), n)
	p, g := randGaussians(n, seedParams, 1), randGaussians(n, seedGrads, 0.1)
	short := randGaussians(n, seedGrads, 0.1)
	short.Quats = short.Quats[:5]
	badLR := testLRs
	badLR[SHDC] = float32(math.NaN())
	tests := []struct {
		name   string
		p, g   *splat.Gaussians
		lr     [NumGroups]float32
		vis    []bool
		wantIn string
	}{
		{"short gradient array", p, short, testLRs, nil, "gradients: quats has 5 values, want 12"},
		{"nil gradients", p, nil, testLRs, nil, "gradients missing"},
		{"wrong visibility length", p, g, testLRs, []bool{true}, "visibility has 1 flags, want 3"},
		{"NaN learning rate", p, g, badLR, nil, "learning rate of sh_dc"},
	}
	for _, tc := range tests {
		before := p.Clone()
		_, err := o.Step(tc.p, tc.g, tc.lr, tc.vis)
		if err == nil || !strings.Contains(err.Error(), tc.wantIn) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.wantIn)
		}
		assertSame(t, tc.name+": params after a refused step", p, before)
	}
	if o.Steps != [NumGroups]int64{} {
		t.Errorf("refused steps advanced the counters: %v", o.Steps)
	}
}

// TestMinimisesQuadratic runs Adam on f(p) = Σ a·(p − c)² with a decaying
// learning rate and requires every parameter of every group to reach its
// minimum.
func TestMinimisesQuadratic(t *testing.T) {
	const n, steps = 6, 3000
	r := rand.New(rand.NewPCG(seedParams, 99))
	target := randGaussians(n, seedParams+1, 2)
	curv := randGaussians(n, seedParams+2, 1)
	for _, f := range curv.Fields() {
		for i := range f.Data {
			f.Data[i] = float32(0.1 + 10*r.Float64()) // curvatures from 0.1 to 10
		}
	}
	p := randGaussians(n, seedParams, 1)
	g := randGaussians(n, seedGrads, 1)
	cfg := testConfig()
	o := newOpt(t, cfg, n)
	for step := range steps {
		pf, tf, cf, gf := p.Fields(), target.Fields(), curv.Fields(), g.Fields()
		for fi := range pf {
			for i := range pf[fi].Data {
				gf[fi].Data[i] = 2 * cf[fi].Data[i] * (pf[fi].Data[i] - tf[fi].Data[i])
			}
		}
		var lr [NumGroups]float32
		for grp := range lr {
			lr[grp] = float32(ExpDecay(0.05, 1e-5, step, steps))
		}
		mustStep(t, o, p, g, lr, nil)
	}
	worst := 0.0
	pf, tf := p.Fields(), target.Fields()
	for fi := range pf {
		for i := range pf[fi].Data {
			worst = max(worst, math.Abs(float64(pf[fi].Data[i]-tf[fi].Data[i])))
		}
	}
	if worst > 1e-3 {
		t.Errorf("after %d steps the largest distance to the minimum is %.3g, want ≤ 1e-3", steps, worst)
	}
	t.Logf("largest distance to the minimum after %d steps: %.3g", steps, worst)
}

func TestExpDecay(t *testing.T) {
	const lr0, lr1 = 1.6e-4, 1.6e-6
	tests := []struct {
		name      string
		step, max int
		want      float64
	}{
		{"start", 0, 30000, lr0},
		{"before start", -5, 30000, lr0},
		{"midpoint is the geometric mean", 15000, 30000, 1.6e-5},
		{"end", 30000, 30000, lr1},
		{"after the end", 40000, 30000, lr1},
		{"no steps", 10, 0, lr1},
	}
	for _, tc := range tests {
		got := ExpDecay(lr0, lr1, tc.step, tc.max)
		if math.Abs(got-tc.want) > 1e-12*tc.want {
			t.Errorf("%s: ExpDecay = %.9g, want %.9g", tc.name, got, tc.want)
		}
	}
	if got := ExpDecay(0, 0, 5, 10); got != 0 {
		t.Errorf("ExpDecay(0, 0) = %v, want 0", got)
	}
	if got := ExpDecay(1, 0, 5, 10); got != 0.5 {
		t.Errorf("ExpDecay(1, 0) at the midpoint = %v, want the linear 0.5", got)
	}
	// Delayed: starts at delayMult·init, rises to the plain schedule.
	if got := ExpDecayDelayed(lr0, lr1, 0, 30000, 1000, 0.01); math.Abs(got-0.01*lr0) > 1e-15 {
		t.Errorf("ExpDecayDelayed at 0 = %g, want %g", got, 0.01*lr0)
	}
	for _, step := range []int{1000, 5000} {
		if got, want := ExpDecayDelayed(lr0, lr1, step, 30000, 1000, 0.01), ExpDecay(lr0, lr1, step, 30000); math.Abs(got-want) > 1e-15 {
			t.Errorf("ExpDecayDelayed at %d = %g, want the plain %g", step, got, want)
		}
	}
	if got, want := ExpDecayDelayed(lr0, lr1, 500, 30000, 0, 0.01), ExpDecay(lr0, lr1, 500, 30000); got != want {
		t.Errorf("ExpDecayDelayed with no delay = %g, want %g", got, want)
	}
}

func BenchmarkStep(b *testing.B) {
	const n = 100_000
	o, err := New(testConfig(), n)
	if err != nil {
		b.Fatal(err)
	}
	p, g := randGaussians(n, seedParams, 1), randGaussians(n, seedGrads, 0.1)
	st, err := o.Step(p, g, testLRs, nil)
	if err != nil || st.Updated != n || st.Total() != (GroupStats{}) {
		b.Fatalf("first step: %+v, %v", st, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := o.Step(p, g, testLRs, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Msplats/s")
}

// TestGradLimit pins the boundary of the overflow guard: the largest
// accepted gradient has a finite square.
func TestGradLimit(t *testing.T) {
	below := math.Nextafter32(gradLimit, 0)
	if sq := below * below; math.IsInf(float64(sq), 0) {
		t.Errorf("(%g)² overflows float32, so the guard lets an overflow through", below)
	}
	limit := float32(gradLimit) // a variable: the constant product would not compile
	if sq := limit * limit; !math.IsInf(float64(sq), 1) {
		t.Errorf("(2⁶⁴)² = %g is finite; the guard is stricter than needed", sq)
	}
}

// FuzzStep feeds arbitrary float32 bit patterns (NaN, ±Inf, denormals,
// huge values) as parameters and gradients: Step must not panic, the
// moments must stay finite with V ≥ 0, finite parameters must stay finite,
// and bounded groups must stay within their bounds.
func FuzzStep(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x7f, 0, 0, 0xc0, 0x7f, 1, 0, 0, 0}, float32(0.5), float32(0.1), uint8(3))
	f.Add([]byte{0xff, 0xff, 0x7f, 0x7f, 0xff, 0xff, 0x7f, 0xff}, float32(0), float32(0), uint8(1))
	f.Add([]byte{}, float32(1e-3), float32(0), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, clip, maxUpd float32, steps uint8) {
		const n = 3
		cfg := testConfig()
		if clip >= 0 && clip <= math.MaxFloat32 {
			cfg.Groups[Means].Clip = clip
		}
		if maxUpd >= 0 && maxUpd <= math.MaxFloat32 {
			cfg.Groups[Quats].MaxUpdate = maxUpd
		}
		cfg.Groups[OpacityLogits].Min, cfg.Groups[OpacityLogits].Max = -5, 5
		o := newOpt(t, cfg, n)
		p, g := splat.New(n), splat.New(n)
		word := func(i int) float32 {
			if len(data) < 4 {
				return float32(i%7) - 3
			}
			j := (4 * i) % (len(data) - len(data)%4)
			return math.Float32frombits(uint32(data[j]) | uint32(data[j+1])<<8 | uint32(data[j+2])<<16 | uint32(data[j+3])<<24)
		}
		idx := 0
		for _, gs := range []*splat.Gaussians{p, g} {
			for _, fl := range gs.Fields() {
				for i := range fl.Data {
					fl.Data[i] = word(idx)
					idx++
				}
			}
		}
		for i := range p.OpacityLogits {
			p.OpacityLogits[i] = 0 // start inside the bounds
		}
		before := p.Clone()
		for range steps % 4 {
			if _, err := o.Step(p, g, cfg.LRs(), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("state after poison: %v", err)
		}
		fp, fb := p.Fields(), before.Fields()
		for fi := range fp {
			for i, v := range fp[fi].Data {
				if isFinite(fb[fi].Data[i]) && !isFinite(v) {
					t.Fatalf("%s[%d] went from %v to %v", fp[fi].Name, i, fb[fi].Data[i], v)
				}
			}
		}
		for i, v := range p.OpacityLogits {
			if v < -5 || v > 5 {
				t.Fatalf("opacity_logits[%d] = %v outside the bounds [-5, 5]", i, v)
			}
		}
	})
}

// The update does not depend on the number of workers, with a visibility
// mask and non-finite gradients mixed in, above the parallel threshold.
func TestWorkersGiveIdenticalResults(t *testing.T) {
	const n = 10000
	vis := make([]bool, n)
	for i := range vis {
		vis[i] = i%3 != 0
	}
	var ref *splat.Gaussians
	var refStats Stats
	for _, w := range []int{1, 2, 3, 8} {
		o := newOpt(t, testConfig(), n)
		o.SetWorkers(w)
		p := randGaussians(n, seedParams, 1)
		var st Stats
		for step := range 3 {
			g := randGaussians(n, seedGrads+uint64(step), 0.1)
			g.Means[7] = float32(math.NaN())
			st = mustStep(t, o, p, g, testLRs, vis)
		}
		if ref == nil {
			ref, refStats = p, st
			continue
		}
		if st != refStats {
			t.Fatalf("workers %d: stats %+v, want %+v", w, st, refStats)
		}
		for fi, f := range p.Fields() {
			for j, x := range f.Data {
				if math.Float32bits(x) != math.Float32bits(ref.Fields()[fi].Data[j]) {
					t.Fatalf("workers %d: %s[%d] = %v, want %v", w, f.Name, j, x, ref.Fields()[fi].Data[j])
				}
			}
		}
	}
}

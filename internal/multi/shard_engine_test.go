package multi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// rowKeys is every splat of st as bytes (its parameters, both moments and its statistics),
// sorted: two states hold the same splats, in whatever order, when their keys are equal.
func rowKeys(st *engine.State) [][]byte {
	n := st.Params.Len()
	keys := make([][]byte, n)
	fields := [][]splat.Field[float32]{st.Params.Fields(), st.AdamM.Fields(), st.AdamV.Fields()}
	for i := range n {
		var b bytes.Buffer
		for _, fs := range fields {
			for _, f := range fs {
				binary.Write(&b, binary.LittleEndian, f.Data[i*f.Width:(i+1)*f.Width])
			}
		}
		binary.Write(&b, binary.LittleEndian, []any{st.Stats.GradAccum[i], st.Stats.Count[i], st.Stats.MaxRadius[i]})
		keys[i] = b.Bytes()
	}
	slices.SortFunc(keys, bytes.Compare)
	return keys
}

// sameSplats says how the splats of two states differ, in any order; "" when they do not.
func sameSplats(want, got *engine.State) string {
	if got.AdamStep != want.AdamStep {
		return fmt.Sprintf("%d Adam steps, want %d", got.AdamStep, want.AdamStep)
	}
	wk, gk := rowKeys(want), rowKeys(got)
	if len(wk) != len(gk) {
		return fmt.Sprintf("%d splats, want %d", len(gk), len(wk))
	}
	d := 0
	for i := range wk {
		if !bytes.Equal(wk[i], gk[i]) {
			d++
		}
	}
	if d > 0 {
		return fmt.Sprintf("%d of %d splats (sorted by their bytes) differ", d, len(wk))
	}
	return ""
}

// randomEdit clones, splits and removes about a twentieth of n splats each, disjoint sets,
// the splits in increasing order as densification lists them.
func randomEdit(rng *rand.Rand, n int) engine.Edit {
	ed := engine.Edit{SplitN: 2, SplitScaleDiv: 1.6, Remove: make([]bool, n)}
	for i := range n {
		switch rng.IntN(20) {
		case 0:
			ed.Clone = append(ed.Clone, int32(i))
		case 1:
			ed.Split = append(ed.Split, int32(i))
			for range ed.SplitN * 3 {
				ed.SplitSamples = append(ed.SplitSamples, float32(rng.NormFloat64()))
			}
		case 2:
			ed.Remove[i] = true
		}
	}
	return ed
}

// TestShardedEngineMatchesOneEngine runs a sharded scene (two and three emulated ranks)
// through what training asks of an engine besides steps, against one engine holding the whole
// scene: renders and reads to the bit; a densification edit, after which both hold the same
// splats (in their own orders) and the steps that follow give the same losses and images to
// the bit; an opacity reset; and the state, which must resume on either engine: one engine's
// state on the sharded ranks and the sharded state on a new engine take the same next step.
func TestShardedEngineMatchesOneEngine(t *testing.T) {
	devs := emuDevices(t, 3)
	for _, c := range []shardedCase{
		{name: "2 ranks/ewa", ranks: 2, model: prep.EWA, tile: 16, sh: 2, hide: -1, seed: 90},
		{name: "3 ranks/ray", ranks: 3, model: prep.Ray, tile: 16, sh: 1, hide: -1, seed: 91},
		{name: "3 ranks/ewa/rank1-out-of-view", ranks: 3, model: prep.EWA, tile: 8, sh: 3, absGrad: true, hide: 1, seed: 92},
	} {
		t.Run(c.name, func(t *testing.T) {
			one, s, g, vs, o := onePair(t, devs, c)

			// steps takes k steps on both and compares each step's result to the bit.
			view := 0
			steps := func(what string, k int) {
				t.Helper()
				for range k {
					v := vs[view%len(vs)]
					view++
					w, err1 := one.Step(v, o)
					got, err2 := stepWithin(s, v, o)
					if err1 != nil || err2 != nil {
						t.Fatalf("%s: %v %v", what, err1, err2)
					}
					if math.Float64bits(got.Loss) != math.Float64bits(w.Loss) || got.Visible != w.Visible || got.Entries != w.Entries {
						t.Errorf("%s: loss %.9g, %d visible, %d entries; one engine %.9g, %d, %d", what, got.Loss, got.Visible, got.Entries, w.Loss, w.Visible, w.Entries)
					}
					if d := check.BitsDiffer(got.Image, w.Image); d > 0 {
						t.Errorf("%s: %d of %d image values differ", what, d, len(w.Image))
					}
				}
			}
			states := func(what string) {
				t.Helper()
				ws, err1 := one.State()
				gs, err2 := s.State()
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: %v %v", what, err1, err2)
				}
				if p := sameSplats(ws, gs); p != "" {
					t.Errorf("%s: %s", what, p)
				}
			}

			steps("before the edit", 2)
			for k, v := range vs {
				w, err1 := one.Render(&v.Camera, c.sh, o.Background)
				got, err2 := s.Render(&v.Camera, c.sh, o.Background)
				if err1 != nil || err2 != nil {
					t.Fatalf("render %d: %v %v", k, err1, err2)
				}
				if d := check.BitsDiffer(got, w); d > 0 {
					t.Errorf("render %d: %d of %d values differ", k, d, len(w))
				}
			}
			ws, _ := one.Shapes()
			gsh, err := s.Shapes()
			if err != nil {
				t.Fatal(err)
			}
			wst, _ := one.Stats()
			gst, err := s.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if check.BitsDiffer(gsh.LogScales, ws.LogScales)+check.BitsDiffer(gsh.OpacityLogits, ws.OpacityLogits)+
				check.BitsDiffer(gst.GradAccum, wst.GradAccum)+check.BitsDiffer(gst.MaxRadius, wst.MaxRadius) > 0 || !slices.Equal(gst.Count, wst.Count) {
				t.Error("the shapes or statistics read from the ranks are not one engine's")
			}

			ed := randomEdit(rand.New(rand.NewPCG(c.seed, 1)), g.Len())
			if err := one.Apply(ed); err != nil {
				t.Fatal(err)
			}
			if err := s.Apply(ed); err != nil {
				t.Fatal(err)
			}
			if s.Len() != one.Len() {
				t.Fatalf("after the edit: %d splats, one engine %d", s.Len(), one.Len())
			}
			states("after the edit")
			steps("after the edit", 3)
			states("steps after the edit")

			// Edits that leave the shares uneven, so that rows move between the ranks: rank 0
			// loses two fifths of its splats; then the last rank clones half of its own.
			drop := func() engine.Edit {
				lo, hi := s.Range(0)
				ed := engine.Edit{Remove: make([]bool, s.Len())}
				for i := lo; i < lo+(hi-lo)*2/5; i++ {
					ed.Remove[i] = true
				}
				return ed
			}
			grow := func() engine.Edit {
				lo, hi := s.Range(c.ranks - 1)
				var ed engine.Edit
				for i := lo; i < hi; i += 2 {
					ed.Clone = append(ed.Clone, int32(i))
				}
				return ed
			}
			for k, edit := range []func() engine.Edit{drop, grow} {
				ed := edit()
				// One engine's order of the same splats: the indices in its own layout.
				if err := applyOnOne(one, s, ed); err != nil {
					t.Fatal(err)
				}
				if err := s.Apply(ed); err != nil {
					t.Fatal(err)
				}
				least, most := s.Len(), 0
				for r := range c.ranks {
					lo, hi := s.Range(r)
					least, most = min(least, hi-lo), max(most, hi-lo)
				}
				if float64(most) > float64(least)*(1+rebalanceSlack) {
					t.Errorf("uneven edit %d: shares %v not rebalanced", k, s.Ranges())
				}
				what := fmt.Sprintf("uneven edit %d", k)
				states(what)
				steps(what, 2)
				states(what + " and steps")
			}

			if err := one.ResetOpacity(0.01); err != nil {
				t.Fatal(err)
			}
			if err := s.ResetOpacity(0.01); err != nil {
				t.Fatal(err)
			}
			steps("after an opacity reset", 1)
			states("after an opacity reset")

			// Across layouts: the one engine's state on the ranks (split evenly, one engine's
			// order), and the ranks' state on a new engine.
			st, err := one.State()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetState(st); err != nil {
				t.Fatal(err)
			}
			for r := range c.ranks {
				lo, hi := s.Range(r)
				if want := Shares(st.Params.Len(), c.ranks)[r]; lo != want[0] || hi != want[1] {
					t.Errorf("after SetState rank %d holds [%d, %d), want %v", r, lo, hi, want)
				}
			}
			steps("state restored on the ranks", 2)
			sst, err := s.State()
			if err != nil {
				t.Fatal(err)
			}
			again, err := fused.New(devs[0], s.set, g)
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if err := again.SetState(sst); err != nil {
				t.Fatal(err)
			}
			ost, _ := one.State()
			if p := sameSplats(ost, sst); p != "" {
				t.Errorf("state after steps on the restored ranks: %s", p)
			}
			v := vs[view%len(vs)]
			w, err1 := again.Step(v, o)
			got, err2 := stepWithin(s, v, o)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if math.Float64bits(got.Loss) != math.Float64bits(w.Loss) {
				t.Errorf("the sharded state on one engine: loss %.9g, on the ranks %.9g", w.Loss, got.Loss)
			}
			t.Logf("%d splats over ranks %v, last loss %.6g", s.Len(), s.Ranges(), got.Loss)
		})
	}
}

// applyOnOne applies to one engine the edit ed that s applies in its own order of the same
// splats: ed's clones and removals mapped from s's order to one's by the splats' bytes (their
// parameters and moments). Splats with the same bytes (a clone of a splat that was never in
// view, and its source) are paired in order: they are alike in everything a step reads.
func applyOnOne(one *fused.Engine, s *Sharded, ed engine.Edit) error {
	os, err1 := one.State()
	ss, err2 := s.State()
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	key := func(st *engine.State, i int) string {
		var b bytes.Buffer
		for _, g := range []*splat.Gaussians{st.Params, st.AdamM, st.AdamV} {
			for _, f := range g.Fields() {
				binary.Write(&b, binary.LittleEndian, f.Data[i*f.Width:(i+1)*f.Width])
			}
		}
		return b.String()
	}
	at := map[string][]int32{}
	for i := range os.Params.Len() {
		k := key(os, i)
		at[k] = append(at[k], int32(i))
	}
	mapped := engine.Edit{}
	if ed.Remove != nil {
		mapped.Remove = make([]bool, len(ed.Remove))
	}
	for i := range ss.Params.Len() {
		k := key(ss, i)
		if len(at[k]) == 0 {
			return fmt.Errorf("the sharded splat %d is not one of one engine's", i)
		}
		j := at[k][0]
		at[k] = at[k][1:]
		if ed.Remove != nil {
			mapped.Remove[j] = ed.Remove[i]
		}
		if slices.Contains(ed.Clone, int32(i)) {
			mapped.Clone = append(mapped.Clone, j)
		}
	}
	if len(ed.Split) > 0 {
		return errors.New("applyOnOne maps clones and removals only")
	}
	return one.Apply(mapped)
}

// onePair is case c's scene and views on one engine (on devs[0]) and sharded over c.ranks
// ranks of devs through the host exchanger, with the case's step options; both close when the
// test ends.
func onePair(t *testing.T, devs []gpu.Device, c shardedCase) (*fused.Engine, *Sharded, *splat.Gaussians, []*engine.View, engine.StepOptions) {
	t.Helper()
	return onePairOn(t, devs[0], devs[:c.ranks], c, shardedN, shardedW, shardedH)
}

// onePairOn is onePair with the one engine on one, the ranks on ranks, and a scene of n splats
// seen at w×h.
func onePairOn(t *testing.T, one gpu.Device, ranks []gpu.Device, c shardedCase, n, w, h int) (*fused.Engine, *Sharded, *splat.Gaussians, []*engine.View, engine.StepOptions) {
	t.Helper()
	g, vs := shardedScene(c, n, w, h)
	set, o := c.settings()
	e, err := fused.New(one, set, g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	s, err := NewSharded(ranks, NewHostExchanger(len(ranks)), set, g, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return e, s, g, vs, o
}

// TestShardedEngineRefusals: an edit that would leave fewer splats than ranks is refused
// before any rank applies its share; edits and relocations with bad indices name them; a state
// too small for the ranks is refused.
func TestShardedEngineRefusals(t *testing.T) {
	devs := emuDevices(t, 2)
	c := shardedCase{ranks: 2, model: prep.EWA, tile: 16, sh: 1, hide: -1, seed: 93}
	g, _ := shardedScene(c, 40, 32, 24)
	set, _ := c.settings()
	s, err := NewSharded(devs, NewHostExchanger(2), set, g, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, _ := s.Gaussians()
	oneLeft := engine.Edit{Remove: make([]bool, 40)}
	for i := 1; i < 40; i++ {
		oneLeft.Remove[i] = true
	}
	for _, x := range []struct {
		name string
		run  func() error
		want string
	}{
		{"an edit that leaves fewer splats than ranks", func() error { return s.Apply(oneLeft) }, "leaves 1 splats for 2 ranks"},
		{"a clone out of range", func() error { return s.Apply(engine.Edit{Clone: []int32{40}}) }, "clone 0: index 40 outside 0..39"},
		{"a split out of range", func() error {
			return s.Apply(engine.Edit{Split: []int32{-1}, SplitN: 1, SplitScaleDiv: 1, SplitSamples: make([]float32, 3)})
		}, "split 0: index -1"},
		{"a short removal mask", func() error { return s.Apply(engine.Edit{Remove: make([]bool, 39)}) }, "39 entries for 40"},
		{"a relocation out of range", func() error { return s.Relocate(engine.Relocation{Dst: []int32{3}, Src: []int32{40}}) }, "src[0] = 40 outside 0..39"},
		{"a state of one splat", func() error {
			st, err := s.State()
			if err != nil {
				return err
			}
			one := &engine.State{Params: st.Params.Range(0, 1), AdamM: st.AdamM.Range(0, 1), AdamV: st.AdamV.Range(0, 1),
				Stats: engine.Stats{GradAccum: st.Stats.GradAccum[:1], Count: st.Stats.Count[:1], MaxRadius: st.Stats.MaxRadius[:1]}}
			return s.SetState(one)
		}, "every rank owns at least one"},
	} {
		err := x.run()
		if err == nil || !strings.Contains(err.Error(), x.want) {
			t.Errorf("%s: %v, want an error saying %q", x.name, err, x.want)
			continue
		}
		if x.name == "an edit that leaves fewer splats than ranks" && !errors.Is(err, engine.ErrEmpty) {
			t.Errorf("%s: %v does not wrap engine.ErrEmpty", x.name, err)
		}
		t.Logf("%s: %v", x.name, err)
	}
	after, _ := s.Gaussians()
	if d := differ(before, after); d > 0 || s.Len() != 40 {
		t.Fatalf("the refused calls changed %d parameters, %d splats", d, s.Len())
	}
}

// TestShardedRebalanceKeepsOrder makes the ranks' shares uneven, each by its own edit, and
// rebalances: the ranges must become Shares' and the scene, read in global order, must be what
// it was, every splat's parameters, moments and statistics in its place (the boundaries move,
// the splats do not). A chain whose middle rank holds one splat takes more than one sweep.
func TestShardedRebalanceKeepsOrder(t *testing.T) {
	devs := emuDevices(t, 3)
	// grow[r] > 0 clones rank r's first grow[r] splats (each once); < 0 removes all but -grow[r].
	for _, c := range []struct {
		name string
		grow []int
		n    int
	}{
		{"2 ranks/rank 0 over", []int{90, 0}, 200},
		{"2 ranks/rank 1 over", []int{0, 90}, 200},
		{"3 ranks/middle over", []int{0, 95, 0}, 300},
		{"3 ranks/first over, middle one splat", []int{100, -1, 0}, 300},
		{"3 ranks/last over, middle one splat", []int{0, -1, 100}, 300},
		{"3 ranks/first under", []int{-10, 0, 0}, 300},
		{"3 ranks/within the slack", []int{8, 0, 0}, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			ranks := len(c.grow)
			sc := shardedCase{ranks: ranks, model: prep.EWA, tile: 16, sh: 1, hide: -1, seed: 94}
			g, vs := shardedScene(sc, c.n, 32, 24)
			set, o := sc.settings()
			s, err := NewSharded(devs[:ranks], NewHostExchanger(ranks), set, g, false)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := stepWithin(s, vs[0], o); err != nil { // moments to carry
				t.Fatal(err)
			}
			for r, k := range c.grow {
				var ed engine.Edit
				switch {
				case k > 0:
					for i := range k {
						ed.Clone = append(ed.Clone, int32(i))
					}
				case k < 0:
					lo, hi := s.Range(r)
					ed.Remove = make([]bool, hi-lo)
					for i := -k; i < hi-lo; i++ {
						ed.Remove[i] = true
					}
				}
				if err := s.ranks[r].eng.Apply(ed); err != nil {
					t.Fatal(err)
				}
			}
			s.renumber()
			before, err := s.State()
			if err != nil {
				t.Fatal(err)
			}
			uneven := s.Ranges()
			if err := s.rebalance(); err != nil {
				t.Fatal(err)
			}
			after, err := s.State()
			if err != nil {
				t.Fatal(err)
			}
			least, most := c.n, 0
			for _, rg := range uneven {
				least, most = min(least, rg[1]-rg[0]), max(most, rg[1]-rg[0])
			}
			want := uneven
			if float64(most) > float64(least)*(1+rebalanceSlack) {
				want = Shares(s.Len(), ranks)
			}
			if !slices.Equal(s.Ranges(), want) {
				t.Errorf("ranges %v after rebalancing %v, want %v", s.Ranges(), uneven, want)
			}
			d := check.BitsDiffer(packed(after.Params), packed(before.Params)) + check.BitsDiffer(packed(after.AdamM), packed(before.AdamM)) +
				check.BitsDiffer(packed(after.AdamV), packed(before.AdamV)) + check.BitsDiffer(after.Stats.GradAccum, before.Stats.GradAccum) +
				check.BitsDiffer(after.Stats.MaxRadius, before.Stats.MaxRadius)
			if d > 0 || !slices.Equal(after.Stats.Count, before.Stats.Count) {
				t.Errorf("rebalancing %v changed %d values of the scene in global order", uneven, d)
			}
			t.Logf("%v → %v", uneven, s.Ranges())
		})
	}
}

// TestEditOrder: the plan-derived order maps a sharded edit's splats onto one engine's on the
// emulator, where both hold the same bits (the parameters after an edit, before any step).
func TestEditOrder(t *testing.T) {
	devs := emuDevices(t, 3)
	c := shardedCase{ranks: 3, model: prep.EWA, tile: 16, sh: 1, hide: -1, seed: 95}
	one, s, g, vs, o := onePairOn(t, devs[0], devs, c, 600, 32, 24)
	one.Step(vs[0], o)
	stepWithin(s, vs[0], o)
	ed := randomEdit(rand.New(rand.NewPCG(c.seed, 2)), g.Len())
	order, err := editOrder(ed, s.Ranges())
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(one.Apply(ed), s.Apply(ed)); err != nil {
		t.Fatal(err)
	}
	w, err1 := one.Gaussians()
	got, err2 := s.Gaussians()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if d := check.BitsDiffer(packed(got), packed(permuted(w, order))); d > 0 {
		t.Fatalf("%d values differ from one engine's splats in the plans' order", d)
	}
	if d := check.BitsDiffer(packed(got), packed(w)); d == 0 {
		t.Fatal("the sharded order is one engine's: the check above tells nothing")
	}
}

// TestShardedEngineOnOneGPU runs the sharded engine's paths with CUDA's kernels: two and three
// ranks, each a context of the one GPU, the records through the host (NCCL takes one rank a
// GPU). Against one engine on the same GPU, within the bounds its atomics allow: the first
// step's loss and counts exactly, later losses and counts within the drift
// TestShardedOneRankNCCL allows, renders, an uneven edit (rebalanced through the row blocks)
// and steps after it, and the parameters at the end (in one engine's order) within
// shardedGPUParamTol.
func TestShardedEngineOnOneGPU(t *testing.T) {
	o, err := gpu.OptionsFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	var devs []gpu.Device
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	for range 4 {
		d, err := gpu.OpenWith(gpu.KindCUDA, o)
		if err != nil {
			t.Skipf("no CUDA device: %v", err)
		}
		devs = append(devs, d)
	}
	for _, c := range []shardedCase{
		{name: "2 ranks/ewa", ranks: 2, model: prep.EWA, tile: 16, sh: 3, hide: -1, seed: 96},
		{name: "3 ranks/ray", ranks: 3, model: prep.Ray, tile: 16, sh: 2, hide: -1, seed: 97},
	} {
		t.Run(c.name, func(t *testing.T) {
			one, s, _, vs, so := onePairOn(t, devs[0], devs[1:1+c.ranks], c, 4000, 160, 120)
			view := 0
			steps := func(what string, k int, exact bool) {
				t.Helper()
				for range k {
					v := vs[view%len(vs)]
					view++
					w, err1 := one.Step(v, so)
					r, err2 := stepWithin(s, v, so)
					if err := errors.Join(err1, err2); err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					d := math.Abs(r.Loss-w.Loss) / math.Abs(w.Loss)
					slack := func(a, b int) bool { return math.Abs(float64(a-b)) <= shardedGPUCountSlack*float64(max(a, b)) }
					if exact && (d != 0 || r.Visible != w.Visible || r.Entries != w.Entries) ||
						!(d <= shardedGPULossSlack) || !slack(r.Visible, w.Visible) || !slack(r.Entries, w.Entries) {
						t.Errorf("%s: loss %.9g (relative difference %.3g), %d visible, %d entries; one engine %.9g, %d, %d",
							what, r.Loss, d, r.Visible, r.Entries, w.Loss, w.Visible, w.Entries)
					}
					exact = false
				}
			}
			steps("first steps", 3, true)
			for k, v := range vs {
				w, err1 := one.Render(&v.Camera, c.sh, so.Background)
				got, err2 := s.Render(&v.Camera, c.sh, so.Background)
				if err := errors.Join(err1, err2); err != nil {
					t.Fatal(err)
				}
				if rel := check.RelErr(got, w); !(rel <= 1e-4) {
					t.Errorf("render %d: relative L2 %.3g from one engine's", k, rel)
				}
			}
			lo, hi := s.Range(0)
			ed := randomEdit(rand.New(rand.NewPCG(c.seed, 3)), s.Len())
			for i := lo; i < lo+(hi-lo)*2/5; i++ {
				ed.Remove[i] = true // rank 0 falls below the others: rows move to it
			}
			order, err := editOrder(ed, s.Ranges())
			if err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(one.Apply(ed), s.Apply(ed)); err != nil {
				t.Fatal(err)
			}
			if want := Shares(s.Len(), c.ranks); !slices.Equal(s.Ranges(), want) {
				t.Errorf("after the uneven edit: ranges %v, want %v", s.Ranges(), want)
			}
			steps("after the edit", 3, false)
			w, err1 := one.Gaussians()
			got, err2 := s.Gaussians()
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			rel := check.RelErr(packed(got), packed(permuted(w, order)))
			t.Logf("%d splats over %v: parameters relative L2 %.3g from one engine's", s.Len(), s.Ranges(), rel)
			if !(rel <= shardedGPUParamTol) {
				t.Errorf("parameters: relative L2 %.3g from one engine's, bound %g", rel, shardedGPUParamTol)
			}
		})
	}
}

// TestShardedRelocateMatchesOneEngine runs MCMC on a sharded scene (emulated ranks) and on one
// engine: steps with the regularisers and the noise (keyed by global id), then a relocation
// whose corrections, copies and appended copies fall within ranks and across them (copies of
// corrected splats among them, appended copies piling on the last rank so that rows move to
// the others), after which both hold the same splats, and steps with the regularisers (no
// noise: it is keyed by id, and the two orders now differ) give the same losses and images to
// the bit.
func TestShardedRelocateMatchesOneEngine(t *testing.T) {
	devs := emuDevices(t, 3)
	for _, c := range []shardedCase{
		{name: "2 ranks/ewa", ranks: 2, model: prep.EWA, tile: 16, sh: 2, hide: -1, seed: 98, mcmc: true},
		{name: "3 ranks/ray/in-view", ranks: 3, model: prep.Ray, tile: 16, sh: 1, hide: -1, seed: 99, mcmc: true, regInView: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			one, s, _, vs, o := onePair(t, devs, c)
			view := 0
			steps := func(what string, k int, o engine.StepOptions) {
				t.Helper()
				for range k {
					v := vs[view%len(vs)]
					view++
					o.MCMC.NoiseStep = uint32(view)
					w, err1 := one.Step(v, o)
					got, err2 := stepWithin(s, v, o)
					if err := errors.Join(err1, err2); err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					if math.Float64bits(got.Loss) != math.Float64bits(w.Loss) || check.BitsDiffer(got.Image, w.Image) > 0 {
						t.Errorf("%s: loss %.9g, one engine %.9g; %d image values differ", what, got.Loss, w.Loss, check.BitsDiffer(got.Image, w.Image))
					}
				}
			}
			states := func(what string) {
				t.Helper()
				ws, err1 := one.State()
				gs, err2 := s.State()
				if err := errors.Join(err1, err2); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if p := sameSplats(ws, gs); p != "" {
					t.Errorf("%s: %s", what, p)
				}
			}
			steps("with noise", 3, o)
			states("with noise")

			// A relocation: each of rows 0, 7, 14, … is corrected, copied onto the splat a
			// third of the scene on (mostly another rank's) or appended, by turns; the last
			// rank's splats are appended twice over.
			n := s.Len()
			rng := rand.New(rand.NewPCG(c.seed, 4))
			var rl engine.Relocation
			used := make([]bool, n)
			for i := 0; i < n/3; i += 7 {
				rl.Rows = append(rl.Rows, int32(i))
				rl.OpacityLogits = append(rl.OpacityLogits, float32(rng.NormFloat64()))
				rl.LogScales = append(rl.LogScales, float32(rng.NormFloat64()-3), float32(rng.NormFloat64()-3), float32(rng.NormFloat64()-3))
				used[i] = true
			}
			for i := 0; i < n/3; i += 2 {
				switch d := i + n/3 + 1; {
				case i%4 == 0 && !used[d]:
					rl.Src, rl.Dst = append(rl.Src, int32(i)), append(rl.Dst, int32(d))
					used[d] = true
				default:
					rl.Append = append(rl.Append, int32(i))
				}
			}
			lo, hi := s.Range(c.ranks - 1)
			for i := lo; i < hi; i += 1 + i%2 {
				if !used[i] {
					rl.Append = append(rl.Append, int32(i), int32(i))
				}
			}
			if err := errors.Join(rl.Validate(n), one.Relocate(rl), s.Relocate(rl)); err != nil {
				t.Fatal(err)
			}
			if want := Shares(s.Len(), c.ranks); !slices.Equal(s.Ranges(), want) {
				t.Errorf("after the relocation: ranges %v, want %v", s.Ranges(), want)
			}
			states("after the relocation")
			quiet := o
			quiet.MCMC.NoiseScale = 0
			steps("after the relocation", 3, quiet)
			states("steps after the relocation")
			t.Logf("%d splats over %v", s.Len(), s.Ranges())
		})
	}
}

// TestShardedMemoryFalls: the point of sharding is that each GPU holds a share of the splats'
// state. On a scene of which each view sees a sixth, as a view of a large capture sees a
// fraction of it, each of N ranks' engine buffers must peak at about 1/N of one engine's (at
// most 1/N of it plus a sixth: the buffers of a view's splats, which a renderer sizes by the
// records it draws). Where a view sees every splat the renderer's buffers hold them all, and
// the share falls less (docs/sharding.md, "Where the memory goes now").
func TestShardedMemoryFalls(t *testing.T) {
	devs := emuDevices(t, 3)
	c := shardedCase{ranks: 3, model: prep.EWA, tile: 16, sh: 3, hide: -1, seed: 100}
	g, vs := shardedScene(c, 6000, 32, 24)
	for i := range g.Len() {
		if i%6 != 0 {
			g.Means[3*i+2] = -6 // behind every camera
		}
	}
	set, o := c.settings()
	one, err := fused.New(devs[0], set, g)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.Step(vs[0], o); err != nil {
		t.Fatal(err)
	}
	_, wholePeak := one.DeviceBytes()
	one.Close()
	for _, ranks := range []int{2, 3} {
		s, err := NewSharded(devs[:ranks], NewHostExchanger(ranks), set, g, false)
		if err != nil {
			t.Fatal(err)
		}
		for k := range ranks {
			if _, err := stepWithin(s, vs[k%len(vs)], o); err != nil {
				t.Fatal(err)
			}
		}
		per := s.RankDeviceBytes()
		_, peak := s.DeviceBytes()
		s.Close()
		bound := wholePeak/int64(ranks) + wholePeak/6
		t.Logf("%d ranks: peaks %v bytes, one engine %d: the largest rank %.2f of it", ranks, per, wholePeak, float64(peak)/float64(wholePeak))
		if peak > bound {
			t.Errorf("%d ranks: a rank's buffers peaked at %d bytes, one engine's at %d (bound %d)", ranks, peak, wholePeak, bound)
		}
	}
}

// TestShardedEditEmptiesRanks prunes whole ranks' shares, as a region pruned whole is: each
// emptied rank takes a splat from the nearest rank with one to spare, and the scene must be one
// engine's after the same edit (the same splats, steps after it to the bit), its ranges even.
func TestShardedEditEmptiesRanks(t *testing.T) {
	devs := emuDevices(t, 3)
	for _, c := range []struct {
		name    string
		ranks   int
		emptied []int
	}{
		{"2 ranks/first", 2, []int{0}},
		{"2 ranks/last", 2, []int{1}},
		{"3 ranks/middle", 3, []int{1}},
		{"3 ranks/first two", 3, []int{0, 1}},
		{"3 ranks/last two", 3, []int{1, 2}},
		{"3 ranks/first and last", 3, []int{0, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := shardedCase{ranks: c.ranks, model: prep.EWA, tile: 16, sh: 1, hide: -1, seed: 101}
			one, s, _, vs, o := onePair(t, devs, sc)
			for k := range 2 {
				_, err1 := one.Step(vs[k], o)
				_, err2 := stepWithin(s, vs[k], o)
				if err := errors.Join(err1, err2); err != nil {
					t.Fatal(err)
				}
			}
			ed := engine.Edit{Remove: make([]bool, s.Len())}
			for _, r := range c.emptied {
				lo, hi := s.Range(r)
				for i := lo; i < hi; i++ {
					ed.Remove[i] = true
				}
			}
			for r := range c.ranks { // and some growth on a rank that keeps its splats
				if !slices.Contains(c.emptied, r) {
					lo, hi := s.Range(r)
					ed.Clone = []int32{int32(lo), int32(hi - 1)}
					break
				}
			}
			if err := errors.Join(one.Apply(ed), s.Apply(ed)); err != nil {
				t.Fatal(err)
			}
			if want := Shares(s.Len(), c.ranks); !slices.Equal(s.Ranges(), want) {
				t.Errorf("ranges %v, want %v", s.Ranges(), want)
			}
			ws, err1 := one.State()
			gs, err2 := s.State()
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if p := sameSplats(ws, gs); p != "" {
				t.Errorf("after the edit: %s", p)
			}
			for k := range 2 {
				w, err1 := one.Step(vs[k], o)
				got, err2 := stepWithin(s, vs[k], o)
				if err := errors.Join(err1, err2); err != nil {
					t.Fatal(err)
				}
				if math.Float64bits(got.Loss) != math.Float64bits(w.Loss) || check.BitsDiffer(got.Image, w.Image) > 0 {
					t.Errorf("step %d after the edit: loss %.9g, one engine %.9g", k, got.Loss, w.Loss)
				}
			}
			t.Logf("%d splats over %v", s.Len(), s.Ranges())
		})
	}
}

package multi

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// TolParams bounds the relative L2 distance of the parameters after two data-parallel steps
// from the one-device batch: the ranks' partial sums add in another order than one device's
// sum (4e-9 on the emulator for two ranks of two views), and the GPU's rasterizer atomics add
// their own rounding, run to run.
const TolParams = 1e-5

// Compare trains two steps of the batch vs data-parallel over devs (reduced by red) and on
// one engine on devs[0], and returns parity rows: the ranks' parameters identical to each
// other, the statistics' counts equal to the one engine's, their sums and the parameters
// within tolerance of it (the difference reported). devs stay open; red is not closed.
func Compare(devs []gpu.Device, red Reducer, set engine.Settings, g *splat.Gaussians, vs []*engine.View, o engine.StepOptions) ([]fused.CompareRow, error) {
	one, err := fused.New(devs[0], set, g)
	if err != nil {
		return nil, fmt.Errorf("multi: compare: %w", err)
	}
	for s := 0; s < 2; s++ {
		if _, err := one.StepBatch(vs, o); err != nil {
			one.Close()
			return nil, fmt.Errorf("multi: compare: one device: %w", err)
		}
	}
	want, err1 := one.Gaussians()
	wantSt, err2 := one.Stats()
	if err := one.Close(); err != nil || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("multi: compare: one device: %v %v %v", err, err1, err2)
	}

	me, err := New(devs, red, set, g, false)
	if err != nil {
		return nil, fmt.Errorf("multi: compare: %w", err)
	}
	defer me.Close()
	for s := 0; s < 2; s++ {
		if _, err := me.StepBatch(vs, o); err != nil {
			return nil, fmt.Errorf("multi: compare: %d ranks: %w", len(devs), err)
		}
	}
	got, err := me.Gaussians()
	if err != nil {
		return nil, err
	}
	var rows []fused.CompareRow
	count := func(name string, bad, of int, note string) {
		if note == "" {
			note = fmt.Sprintf("%d of %d differ", bad, of)
		}
		rows = append(rows, fused.CompareRow{Name: name, MaxAbs: math.NaN(), RelErr: math.NaN(), Cosine: math.NaN(), Pass: bad == 0, Note: note})
	}
	near := func(name string, a, b []float32, tol float64, note string) {
		rel := check.RelErr(a, b)
		rows = append(rows, fused.CompareRow{Name: name, MaxAbs: check.MaxAbs(a, b), RelErr: rel, Cosine: math.NaN(), Tol: tol, Pass: rel <= tol, Note: note})
	}
	a := packed(got)
	for k := 1; k < len(me.ranks); k++ {
		other, err := me.ranks[k].Gaussians()
		if err != nil {
			return nil, err
		}
		b := packed(other)
		bad := 0
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				bad++
			}
		}
		count(fmt.Sprintf("rank %d params = rank 0's", k), bad, len(a), "")
	}
	st, err := me.Stats()
	if err != nil {
		return nil, err
	}
	bad := 0
	for i := range st.Count {
		if st.Count[i] != wantSt.Count[i] {
			bad++
		}
	}
	count("data-parallel stat count", bad, len(st.Count), "")
	near("data-parallel stat grad accum", st.GradAccum, wantSt.GradAccum, TolParams, "against one device's batch")
	near("data-parallel params", a, packed(want), TolParams,
		fmt.Sprintf("two steps of %d views over %d ranks against one device's batch", len(vs), len(devs)))
	return rows, nil
}

func packed(g *splat.Gaussians) []float32 {
	var out []float32
	for _, f := range g.Fields() {
		out = append(out, f.Data...)
	}
	return out
}

// editOrder is, for each splat of a sharded scene after the edit ed (the ranks owning ranges
// before it), the index of the same splat in one engine after ed, from the two engines' plans:
// a splat is the m-th new splat of its kind (kept, clone, split child) with a given source.
// Rebalancing moves no splat in the global order, so it holds after that too.
func editOrder(ed engine.Edit, ranges [][2]int) ([]int, error) {
	type key struct {
		src  int32
		kind int
		m    int
	}
	kinds := func(p engine.EditPlan, j int) int {
		switch {
		case j < p.Fresh:
			return 0
		case j < p.Children:
			return 1
		}
		return 2
	}
	whole, err := engine.PlanEdit(ed, ranges[len(ranges)-1][1])
	if err != nil {
		return nil, err
	}
	at := map[key]int{}
	seen := map[[2]int]int{}
	for j, src := range whole.Src {
		k := kinds(whole, j)
		at[key{src, k, seen[[2]int{int(src), k}]}] = j
		seen[[2]int{int(src), k}]++
	}
	edits, err := cutEdit(ed, ranges)
	if err != nil {
		return nil, err
	}
	var out []int
	seen = map[[2]int]int{}
	for r, e := range edits {
		p, err := engine.PlanEdit(e, ranges[r][1]-ranges[r][0])
		if err != nil {
			return nil, err
		}
		for j, local := range p.Src {
			src, k := local+int32(ranges[r][0]), kinds(p, j)
			w, ok := at[key{src, k, seen[[2]int{int(src), k}]}]
			if !ok {
				return nil, fmt.Errorf("rank %d's splat %d (from %d) has no counterpart in one engine", r, j, src)
			}
			seen[[2]int{int(src), k}]++
			out = append(out, w)
		}
	}
	return out, nil
}

// permuted is g's splats in the order order gives: splat i of the result is g's order[i].
func permuted(g *splat.Gaussians, order []int) *splat.Gaussians {
	idx := make([]int32, len(order))
	for i, j := range order {
		idx[i] = int32(j)
	}
	return splat.Gather(g, idx)
}

// TolSharded bounds the relative L2 distance of a sharded scene's parameters from one
// engine's after CompareSharded's steps and edit: 0 where the sums run in a fixed order (the
// emulator, the Metal host), where the two are equal to the bit; on a GPU the rasterizer's
// atomics sum in no fixed order on either side (two GPU runs of one engine differ as much).
const TolSharded = 1e-4

// shardedCountSlack is the share of visibility counts a GPU's rounding may flip between two
// runs of the same steps (a splat at the edge of a tile or of the image).
const shardedCountSlack = 0.001

// CompareSharded trains a scene sharded over devs (exchanged through x) and on one engine on
// devs[0], with an uneven densification edit between two pairs of steps (so that rows move
// between the ranks), and returns parity rows: the render of the sharded scene, the ranges
// evened by the rebalancing, and after the steps the statistics' counts, their gradient sums
// and the parameters against one engine's (in its order of the new splats). devs stay open; x
// is not closed.
func CompareSharded(devs []gpu.Device, x Exchanger, set engine.Settings, g *splat.Gaussians, vs []*engine.View, o engine.StepOptions) ([]fused.CompareRow, error) {
	ranks := len(devs)
	one, err := fused.New(devs[0], set, g)
	if err != nil {
		return nil, fmt.Errorf("multi: compare sharded: %w", err)
	}
	defer one.Close()
	s, err := NewSharded(devs, x, set, g, false)
	if err != nil {
		return nil, fmt.Errorf("multi: compare sharded: %w", err)
	}
	defer s.Close()
	step := func(k int) error {
		v := vs[k%len(vs)]
		if _, err := one.Step(v, o); err != nil {
			return fmt.Errorf("multi: compare sharded: one engine: %w", err)
		}
		if _, err := s.Step(v, o); err != nil {
			return fmt.Errorf("multi: compare sharded: %d ranks: %w", ranks, err)
		}
		return nil
	}
	var rows []fused.CompareRow
	near := func(name string, a, b []float32, tol float64, note string) {
		rel := check.RelErr(a, b)
		rows = append(rows, fused.CompareRow{Name: name, MaxAbs: check.MaxAbs(a, b), RelErr: rel, Cosine: math.NaN(), Tol: tol, Pass: rel <= tol, Note: note})
	}
	count := func(name string, bad, of int, allowed int, note string) {
		if allowed > 0 {
			note += fmt.Sprintf("; up to %d may (a GPU's rounding)", allowed)
		}
		rows = append(rows, fused.CompareRow{Name: name, MaxAbs: math.NaN(), RelErr: math.NaN(), Cosine: math.NaN(), Pass: bad <= allowed,
			Note: fmt.Sprintf("%d of %d differ%s", bad, of, note)})
	}
	for k := range 2 {
		if err := step(k); err != nil {
			return nil, err
		}
	}
	cam := &vs[0].Camera
	want, err1 := one.Render(cam, o.SHDegree, o.Background)
	img, err2 := s.Render(cam, o.SHDegree, o.Background)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("multi: compare sharded: render: %w", err)
	}
	near("sharded render", img, want, TolSharded, fmt.Sprintf("%d ranks' records drawn on rank 0, after 2 steps", ranks))

	// An edit that shrinks rank 0's share by two fifths and clones and splits a twentieth of
	// the splats, so that rows move to rank 0.
	n := s.Len()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	ed := engine.Edit{SplitN: 2, SplitScaleDiv: 1.6, Remove: make([]bool, n)}
	lo, hi := s.Range(0)
	for i := range n {
		switch {
		case i >= lo && i < lo+(hi-lo)*2/5:
			ed.Remove[i] = true
		case rng.IntN(20) == 0:
			ed.Clone = append(ed.Clone, int32(i))
		case rng.IntN(20) == 0:
			ed.Split = append(ed.Split, int32(i))
			for range 6 {
				ed.SplitSamples = append(ed.SplitSamples, float32(rng.NormFloat64()))
			}
		}
	}
	order, err := editOrder(ed, s.Ranges())
	if err != nil {
		return nil, fmt.Errorf("multi: compare sharded: %w", err)
	}
	if err := errors.Join(one.Apply(ed), s.Apply(ed)); err != nil {
		return nil, fmt.Errorf("multi: compare sharded: edit: %w", err)
	}
	uneven := 0
	for r, want := range Shares(s.Len(), ranks) {
		if lo, hi := s.Range(r); lo != want[0] || hi != want[1] {
			uneven++
		}
	}
	count("sharded ranges rebalanced", uneven, ranks, 0, fmt.Sprintf(": ranges %v after an edit that took 2/5 of rank 0's splats", s.Ranges()))
	for k := 2; k < 4; k++ {
		if err := step(k); err != nil {
			return nil, err
		}
	}
	w, err1 := one.Gaussians()
	wst, err2 := one.Stats()
	got, err3 := s.Gaussians()
	st, err4 := s.Stats()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, fmt.Errorf("multi: compare sharded: %w", err)
	}
	bad := 0
	accum := make([]float32, len(order))
	for i, j := range order {
		if st.Count[i] != wst.Count[j] {
			bad++
		}
		accum[i] = wst.GradAccum[j]
	}
	count("sharded stat count", bad, len(order), int(shardedCountSlack*float64(len(order))), "")
	near("sharded stat grad accum", st.GradAccum, accum, TolSharded, "against one engine's, in its order")
	near("sharded params", packed(got), packed(permuted(w, order)), TolSharded,
		fmt.Sprintf("4 steps and an edit over %d ranks against one engine", ranks))
	return rows, nil
}

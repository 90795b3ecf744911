package multi

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// The rest of engine.Engine for a sharded scene: renders, reads, densification edits and
// states. Global ids are the ranks' splats one after the other in rank order, so reading the
// ranks in turn gives the layout of one engine holding the whole scene, and a state saved by
// either resumes on the other.

var (
	_ engine.Engine = (*Sharded)(nil)
	_ engine.Reader = (*Sharded)(nil)
)

// Name says which engine this is.
func (s *Sharded) Name() string {
	return fmt.Sprintf("%s × %d, Gaussians sharded", s.ranks[0].eng.Name(), len(s.ranks))
}

// Render draws the current Gaussians for a camera on rank 0 from every owner's records of its
// splats in view, as a step's forward draws them: one engine's render of the whole scene.
func (s *Sharded) Render(cam *camera.Camera, shDegree int, bg [3]float32) ([]float32, error) {
	_, total, err := s.sendRecords("render: ", cam, shDegree, 0)
	if err != nil {
		return nil, err
	}
	rk := s.ranks[0]
	img, err := rk.eng.RenderRecords(cam, rk.recsIn, total, bg)
	if err != nil {
		return nil, fmt.Errorf("multi: sharded: render: rank 0 (renderer): %w", err)
	}
	return img, nil
}

// Shapes gathers the ranks' shapes in rank order.
func (s *Sharded) Shapes() (engine.Shapes, error) {
	var sh engine.Shapes
	return sh, s.ShapesInto(&sh)
}

// ShapesInto is Shapes into dst's arrays (engine.Reader).
func (s *Sharded) ShapesInto(dst *engine.Shapes) error {
	n := s.Len()
	dst.LogScales = engine.Resize(dst.LogScales, 3*n)
	dst.OpacityLogits = engine.Resize(dst.OpacityLogits, n)
	for r, rk := range s.ranks {
		if err := rk.eng.ShapesInto(&rk.shapes); err != nil {
			return fmt.Errorf("multi: sharded: rank %d: %w", r, err)
		}
		copy(dst.LogScales[3*rk.lo:3*rk.hi], rk.shapes.LogScales)
		copy(dst.OpacityLogits[rk.lo:rk.hi], rk.shapes.OpacityLogits)
	}
	return nil
}

// Stats gathers the ranks' densification statistics in rank order: each splat's statistics
// live on its owner alone.
func (s *Sharded) Stats() (engine.Stats, error) {
	var st engine.Stats
	return st, s.StatsInto(&st)
}

// StatsInto is Stats into dst's arrays (engine.Reader).
func (s *Sharded) StatsInto(dst *engine.Stats) error {
	n := s.Len()
	dst.GradAccum = engine.Resize(dst.GradAccum, n)
	dst.Count = engine.Resize(dst.Count, n)
	dst.MaxRadius = engine.Resize(dst.MaxRadius, n)
	for r, rk := range s.ranks {
		if err := rk.eng.StatsInto(&rk.stats); err != nil {
			return fmt.Errorf("multi: sharded: rank %d: %w", r, err)
		}
		copy(dst.GradAccum[rk.lo:rk.hi], rk.stats.GradAccum)
		copy(dst.Count[rk.lo:rk.hi], rk.stats.Count)
		copy(dst.MaxRadius[rk.lo:rk.hi], rk.stats.MaxRadius)
	}
	return nil
}

// each runs f on every rank in turn and joins the ranks' errors, each naming its rank.
func (s *Sharded) each(what string, f func(rk *shardRank) error) error {
	var errs []error
	for r, rk := range s.ranks {
		if err := f(rk); err != nil {
			errs = append(errs, fmt.Errorf("multi: sharded: rank %d: %s: %w", r, what, err))
		}
	}
	return errors.Join(errs...)
}

// ResetStats zeroes every owner's statistics.
func (s *Sharded) ResetStats() error {
	return s.each("reset statistics", func(rk *shardRank) error { return rk.eng.ResetStats() })
}

// ResetOpacity clamps the opacities on every owner: the reset is per splat.
func (s *Sharded) ResetOpacity(maxOpacity float32) error {
	return s.each("opacity reset", func(rk *shardRank) error { return rk.eng.ResetOpacity(maxOpacity) })
}

// ownerOf is the rank owning global id i, for ranks owning ranges (contiguous, in order), or
// -1 when none does.
func ownerOf(ranges [][2]int) func(i int32) int {
	return func(i int32) int {
		r, found := slices.BinarySearchFunc(ranges, int(i), func(rg [2]int, i int) int {
			switch {
			case rg[1] <= i:
				return -1
			case rg[0] > i:
				return 1
			}
			return 0
		})
		if !found {
			return -1
		}
		return r
	}
}

// cutEdit cuts ed, in global ids, into each owner's edit in its local ids (rank r owning
// ranges[r], contiguous and in order): its clones, its splits with their samples, and its
// share of the removal mask, each in ed's order.
func cutEdit(ed engine.Edit, ranges [][2]int) ([]engine.Edit, error) {
	n := ranges[len(ranges)-1][1]
	owner := ownerOf(ranges)
	if ed.Remove != nil && len(ed.Remove) != n {
		return nil, fmt.Errorf("multi: sharded: edit: remove mask has %d entries for %d splats", len(ed.Remove), n)
	}
	if len(ed.Split) > 0 && (ed.SplitN < 1 || len(ed.SplitSamples) != len(ed.Split)*ed.SplitN*3) {
		return nil, fmt.Errorf("multi: sharded: edit: %d split samples for %d splits of %d children", len(ed.SplitSamples), len(ed.Split), ed.SplitN)
	}
	edits := make([]engine.Edit, len(ranges))
	for r, rg := range ranges {
		edits[r].SplitN, edits[r].SplitScaleDiv = ed.SplitN, ed.SplitScaleDiv
		if ed.Remove != nil {
			edits[r].Remove = ed.Remove[rg[0]:rg[1]]
		}
	}
	for k, i := range ed.Clone {
		r := owner(i)
		if r < 0 {
			return nil, fmt.Errorf("multi: sharded: edit: clone %d: index %d outside 0..%d", k, i, n-1)
		}
		edits[r].Clone = append(edits[r].Clone, i-int32(ranges[r][0]))
	}
	w := ed.SplitN * 3
	for k, i := range ed.Split {
		r := owner(i)
		if r < 0 {
			return nil, fmt.Errorf("multi: sharded: edit: split %d: index %d outside 0..%d", k, i, n-1)
		}
		edits[r].Split = append(edits[r].Split, i-int32(ranges[r][0]))
		edits[r].SplitSamples = append(edits[r].SplitSamples, ed.SplitSamples[k*w:(k+1)*w]...)
	}
	return edits, nil
}

// Apply performs the densification edit ed, whose indices are global ids: every owner clones,
// splits and removes its own splats (its share of ed, engine.PlanEdit's order within the
// share), and the statistics are zeroed, as one engine's Apply does. The scene is one engine's
// after ed up to the order of its splats: one engine puts every new splat after all the kept
// ones, here each follows its owner's kept splats, and global ids are renumbered rank by rank.
// Then, if the shares have drifted apart, rows move to even them (rebalance).
//
// An owner whose edit removes every splat it holds (a region pruned whole) is given the
// nearest other owner's neighbouring splat first, kept by its edit, as rebalancing would give
// it, since an engine holds at least one splat. An edit that leaves fewer splats than ranks is
// refused before any owner applies its share.
func (s *Sharded) Apply(ed engine.Edit) error {
	edits, err := cutEdit(ed, s.Ranges())
	if err != nil {
		return err
	}
	after, total := make([]int, len(s.ranks)), 0
	for r, rk := range s.ranks {
		plan, err := engine.PlanEdit(edits[r], rk.hi-rk.lo)
		if err != nil {
			return fmt.Errorf("multi: sharded: edit: rank %d: %w", r, err)
		}
		after[r] = len(plan.Src)
		total += after[r]
	}
	if total < len(s.ranks) {
		return fmt.Errorf("multi: sharded: edit: it leaves %d splats for %d ranks, each of which owns at least one: %w", total, len(s.ranks), engine.ErrEmpty)
	}
	apply := func(rk *shardRank, e engine.Edit) error {
		if len(e.Clone) == 0 && len(e.Split) == 0 && !slices.Contains(e.Remove, true) {
			return rk.eng.ResetStats() // nothing else of Apply's work is this owner's
		}
		return rk.eng.Apply(e)
	}
	err = s.parallel("edit", func(r int, rk *shardRank) error {
		if after[r] == 0 {
			return nil // below, once a splat has come to it
		}
		return apply(rk, edits[r])
	})
	s.renumber() // whatever failed, the ranges follow what the owners now hold
	if err != nil {
		return err
	}
	for r, rk := range s.ranks {
		if after[r] > 0 {
			continue
		}
		// Ranks after r that the edit empties still hold the splats it removes.
		q, err := s.refill(r, func(q int) bool { return q > r && after[q] == 0 })
		if err != nil {
			return fmt.Errorf("multi: sharded: edit: rank %d, emptied by it: %w", r, err)
		}
		e := edits[r]
		if q < r {
			e.Remove = append([]bool{false}, e.Remove...) // the splat came to its front
		} else {
			e.Remove = append(slices.Clone(e.Remove), false) // to its end
		}
		err = apply(rk, e)
		s.renumber()
		if err != nil {
			return fmt.Errorf("multi: sharded: edit: rank %d: %w", r, err)
		}
	}
	return s.rebalance()
}

// refill moves one splat to rank r, which an edit is about to empty, from the nearest rank
// that holds more than one and is not doomed (holding only splats the edit removes): its first
// splat to r's end from a later rank, its last to r's front from an earlier one. Ranks in
// between are being emptied too, so in the order that remains the splat keeps its place. It
// returns the rank the splat came from.
func (s *Sharded) refill(r int, doomed func(q int) bool) (int, error) {
	for d := 1; d < len(s.ranks); d++ {
		for _, q := range []int{r + d, r - d} {
			if q < 0 || q >= len(s.ranks) || s.ranks[q].hi-s.ranks[q].lo < 2 || doomed(q) {
				continue
			}
			return q, s.moveRows(q, r, 1)
		}
	}
	return -1, errors.New("no rank holds a splat to spare")
}

// rebalanceSlack is how far the largest share may exceed the smallest before rows move: the
// design's 10 %, so that a refinement's growth, which differs from region to region, moves rows
// only every few refinements.
const rebalanceSlack = 0.10

// rebalance evens the shares when the largest exceeds the smallest by more than rebalanceSlack,
// to Shares(Len, Ranks), by moving the boundaries between neighbouring ranks: a rank above its
// share up to a boundary hands its last rows to the next rank, which puts them before its own
// (fused.InsertRows at 0), and one below takes the next rank's first rows after its own. So no
// splat's place in the global order changes: a clone still follows its source, whose depth it
// ties, wherever the two now live. Each move is one round of the exchanger (the sender's row
// block: parameters and moments, fused.ExportRows); a move gives at most all but one of the
// sender's rows, so an uneven chain may take a few sweeps over the boundaries. It runs after an
// edit, whose statistics are zero, so that the moved rows' statistics, which start at zero on
// their new owner, lose nothing.
func (s *Sharded) rebalance() error {
	least, most := s.ranks[0].hi-s.ranks[0].lo, 0
	for _, rk := range s.ranks {
		least, most = min(least, rk.hi-rk.lo), max(most, rk.hi-rk.lo)
	}
	if float64(most) <= float64(least)*(1+rebalanceSlack) {
		return nil
	}
	want := Shares(s.Len(), len(s.ranks))
	for sweep := 0; ; sweep++ {
		moved := false
		for b := 0; b+1 < len(s.ranks); b++ {
			left, right := s.ranks[b], s.ranks[b+1]
			switch over := left.hi - want[b][1]; {
			case over > 0:
				rows := min(over, left.hi-left.lo-1)
				if err := s.moveRows(b, b+1, rows); err != nil {
					return err
				}
				moved = moved || rows > 0
			case over < 0:
				rows := min(-over, right.hi-right.lo-1)
				if err := s.moveRows(b+1, b, rows); err != nil {
					return err
				}
				moved = moved || rows > 0
			}
		}
		if !moved {
			return nil
		}
		if sweep > len(s.ranks) {
			return fmt.Errorf("multi: sharded: rebalancing: ranges %v after %d sweeps, want %v", s.Ranges(), sweep, want)
		}
	}
}

// renumber sets the ranks' ranges of global ids from the splats each holds now.
func (s *Sharded) renumber() {
	lo := 0
	for _, rk := range s.ranks {
		rk.lo, rk.hi = lo, lo+rk.eng.Len()
		lo = rk.hi
	}
}

// Ranges is each rank's range of global ids, [lo, hi), in rank order.
func (s *Sharded) Ranges() [][2]int {
	out := make([][2]int, len(s.ranks))
	for r, rk := range s.ranks {
		out[r] = [2]int{rk.lo, rk.hi}
	}
	return out
}

// moveRows moves rows splats from rank from to its neighbour to: its last rows to the next
// rank's front, or its first rows to the previous rank's end.
func (s *Sharded) moveRows(from, to, rows int) error {
	if rows <= 0 {
		return nil
	}
	n := len(s.ranks)
	src, dst := s.ranks[from], s.ranks[to]
	have := src.hi - src.lo
	first, keepLo, keepHi, at := have-rows, 0, have-rows, 0 // rightwards: the tail, to the front
	if to < from {
		first, keepLo, keepHi, at = 0, rows, have, dst.hi-dst.lo // leftwards: the head, to the end
	}
	fail := func(err error) error {
		return fmt.Errorf("multi: sharded: rebalancing %d rows from rank %d to rank %d: %w", rows, from, to, err)
	}
	idx := make([]int32, rows)
	for j := range idx {
		idx[j] = int32(first + j)
	}
	block, err := src.eng.ExportRows(idx)
	if err != nil {
		return fail(err)
	}
	if err := grow(dst, &dst.recsIn, rows*fused.RowWords); err != nil {
		return fail(err)
	}
	if err := s.parallel("rebalance", func(r int, rk *shardRank) error {
		x := &Exchange{Send: rk.none, SendCounts: make([]int, n), Recv: rk.none}
		switch r {
		case from:
			x.Send, x.SendCounts[to] = block, rows*fused.RowWords
		case to:
			x.Recv, x.RecvCap = dst.recsIn, rows*fused.RowWords
		}
		if err := s.x.Exchange(r, rk.dev, x); err != nil {
			return err
		}
		got := make([]int, n)
		if r == to {
			got[from] = rows
		}
		return checkRecvCounts(x.RecvCounts, got, fused.RowWords, true, "rows")
	}); err != nil {
		return fail(err)
	}
	err = errors.Join(dst.eng.InsertRows(dst.recsIn, rows, at), src.eng.KeepRows(keepLo, keepHi))
	s.renumber()
	if err != nil {
		return fail(err)
	}
	return nil
}

// Relocate performs MCMC's move rl, whose indices are global ids (engine.Relocation). Every
// owner first applies its share: the corrections of its rows, the copies whose source and
// destination it owns both, and the appended copies of its rows, which follow its own splats
// (one engine appends them after all of its splats; as with Apply, the scene is one engine's up
// to that order). Then the copies across owners, in rounds: in round k, rank a sends rank
// (a+k) mod N a row block of the sources it owns for destinations that rank owns, exported
// after its own corrections (as one engine copies corrected rows), and that rank writes them
// over the destinations with zero moments (fused.WriteRows). The statistics are zeroed, and
// then the shares are rebalanced (rebalance).
func (s *Sharded) Relocate(rl engine.Relocation) error {
	if err := rl.Validate(s.Len()); err != nil {
		return fmt.Errorf("multi: sharded: %w", err)
	}
	n := len(s.ranks)
	ranges := s.Ranges()
	owner := ownerOf(ranges)
	local := make([]engine.Relocation, n)
	for k, i := range rl.Rows {
		r := owner(i)
		local[r].Rows = append(local[r].Rows, i-int32(ranges[r][0]))
		local[r].OpacityLogits = append(local[r].OpacityLogits, rl.OpacityLogits[k])
		local[r].LogScales = append(local[r].LogScales, rl.LogScales[3*k:3*k+3]...)
	}
	// across[a][b] are the copies from rank a's splats onto rank b's, in local ids.
	across := make([][]copies, n)
	for a := range across {
		across[a] = make([]copies, n)
	}
	for j, d := range rl.Dst {
		a, b := owner(rl.Src[j]), owner(d)
		src, dst := rl.Src[j]-int32(ranges[a][0]), d-int32(ranges[b][0])
		if a == b {
			local[a].Src, local[a].Dst = append(local[a].Src, src), append(local[a].Dst, dst)
			continue
		}
		across[a][b].src, across[a][b].dst = append(across[a][b].src, src), append(across[a][b].dst, dst)
	}
	for _, i := range rl.Append {
		r := owner(i)
		local[r].Append = append(local[r].Append, i-int32(ranges[r][0]))
	}
	err := s.parallel("relocation", func(r int, rk *shardRank) error {
		l := local[r]
		if len(l.Rows) == 0 && len(l.Dst) == 0 && len(l.Append) == 0 {
			return rk.eng.ResetStats() // nothing else of Relocate's work is this owner's
		}
		return rk.eng.Relocate(l)
	})
	s.renumber()
	if err != nil {
		return err
	}
	// Appended rows went after each owner's splats; the local ids of the others stand.
	for k := 1; k < n; k++ {
		to, from := func(r int) int { return (r + k) % n }, func(r int) int { return (r - k + n) % n }
		moves := 0
		for a := range n {
			moves += len(across[a][to(a)].src)
		}
		if moves == 0 {
			continue
		}
		if err := s.copyAcross(fmt.Sprintf("relocation, copies to rank r+%d", k), to, from, across); err != nil {
			return err
		}
	}
	return s.rebalance()
}

// copies are splats of one rank (src) to be copied over splats of another (dst), in local
// ids: dst[j] becomes src[j].
type copies struct{ src, dst []int32 }

// copyAcross runs one round of copies between ranks (what names it): every rank a sends rank
// to(a) a row block of its splats across[a][to(a)].src, and every rank b writes the block it
// receives from from(b) over its splats across[from(b)][b].dst, with zero moments.
func (s *Sharded) copyAcross(what string, to, from func(r int) int, across [][]copies) error {
	n := len(s.ranks)
	blocks := make([]gpu.Buffer, n)
	if err := s.parallel(what+": export", func(a int, rk *shardRank) error {
		var err error
		blocks[a], err = rk.eng.ExportRows(across[a][to(a)].src)
		return err
	}); err != nil {
		return err
	}
	var errs []error
	for b, rk := range s.ranks {
		if err := grow(rk, &rk.recsIn, len(across[from(b)][b].src)*fused.RowWords); err != nil {
			errs = append(errs, fmt.Errorf("multi: sharded: %s: rank %d: %w", what, b, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := s.parallel(what, func(r int, rk *shardRank) error {
		out, in := len(across[r][to(r)].src), len(across[from(r)][r].src)
		x := &Exchange{Send: orNone(blocks[r], rk), SendCounts: make([]int, n), Recv: orNone(rk.recsIn, rk), RecvCap: in * fused.RowWords}
		x.SendCounts[to(r)] = out * fused.RowWords
		if err := s.x.Exchange(r, rk.dev, x); err != nil {
			return err
		}
		got := make([]int, n)
		got[from(r)] = in
		return checkRecvCounts(x.RecvCounts, got, fused.RowWords, true, "rows")
	}); err != nil {
		return err
	}
	return s.parallel(what+": write", func(b int, rk *shardRank) error {
		return rk.eng.WriteRows(rk.recsIn, across[from(b)][b].dst, false)
	})
}

// State gathers the whole training state in rank order: one engine's layout, so that a state
// saved here resumes on one GPU, or on any number of ranks.
func (s *Sharded) State() (*engine.State, error) {
	parts := make([]*engine.State, len(s.ranks))
	for r, rk := range s.ranks {
		var err error
		if parts[r], err = rk.eng.State(); err != nil {
			return nil, fmt.Errorf("multi: sharded: rank %d: %w", r, err)
		}
		if parts[r].AdamStep != parts[0].AdamStep {
			return nil, fmt.Errorf("multi: sharded: rank %d has taken %d Adam steps, rank 0 %d", r, parts[r].AdamStep, parts[0].AdamStep)
		}
	}
	out := &engine.State{AdamStep: parts[0].AdamStep}
	var ps, ms, vs []*splat.Gaussians
	for _, p := range parts {
		ps, ms, vs = append(ps, p.Params), append(ms, p.AdamM), append(vs, p.AdamV)
		out.Stats.GradAccum = append(out.Stats.GradAccum, p.Stats.GradAccum...)
		out.Stats.Count = append(out.Stats.Count, p.Stats.Count...)
		out.Stats.MaxRadius = append(out.Stats.MaxRadius, p.Stats.MaxRadius...)
	}
	out.Params, out.AdamM, out.AdamV = splat.Concat(ps...), splat.Concat(ms...), splat.Concat(vs...)
	return out, nil
}

// SetState restores a state saved by State (of this or any engine), split over the ranks as
// NewSharded splits a scene: contiguous shares as even as Shares makes them.
func (s *Sharded) SetState(st *engine.State) error {
	n := st.Params.Len()
	if n < len(s.ranks) {
		return fmt.Errorf("multi: sharded: restoring a state of %d Gaussians on %d ranks: every rank owns at least one", n, len(s.ranks))
	}
	if st.AdamM.Len() != n || st.AdamV.Len() != n || len(st.Stats.GradAccum) != n || len(st.Stats.Count) != n || len(st.Stats.MaxRadius) != n {
		return fmt.Errorf("multi: sharded: restoring state: the moments or statistics do not have %d entries", n)
	}
	shares := Shares(n, len(s.ranks))
	err := s.parallel("restore state", func(r int, rk *shardRank) error {
		lo, hi := shares[r][0], shares[r][1]
		return rk.eng.SetState(&engine.State{
			Params: st.Params.Range(lo, hi), AdamM: st.AdamM.Range(lo, hi), AdamV: st.AdamV.Range(lo, hi),
			AdamStep: st.AdamStep,
			Stats: engine.Stats{GradAccum: st.Stats.GradAccum[lo:hi], Count: st.Stats.Count[lo:hi],
				MaxRadius: st.Stats.MaxRadius[lo:hi]},
		})
	})
	s.renumber()
	return err
}

// DeviceBytes is the most device memory any one rank's engine buffers hold now, and the most
// any one held at once: what each GPU must have room for.
func (s *Sharded) DeviceBytes() (current, peak int64) {
	for _, p := range s.RankDeviceBytes() {
		current, peak = max(current, p[0]), max(peak, p[1])
	}
	return current, peak
}

// RankDeviceBytes is each rank's device memory in its engine's buffers, now and at its peak.
func (s *Sharded) RankDeviceBytes() [][2]int64 {
	out := make([][2]int64, len(s.ranks))
	for r, rk := range s.ranks {
		out[r][0], out[r][1] = rk.eng.DeviceBytes()
	}
	return out
}

package fused

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// seedRows draws the row tests' scenes and states (scene.go's seeds draw the others').
const seedRows = 19

// The row tests' engines: a receiver trained for a few steps at SH degree 0 (its moments
// non-zero in band 0 alone, its statistics accumulated, adam_step told to skip the higher
// bands), and a sender given a state with random moments in every band and random
// statistics.
const (
	rowsRecvN = 100 // capacity 125 (growSplats' quarter)
	rowsSendN = 150
	rowsW     = 40
	rowsH     = 32
)

// hostRows is a training state row by row, as the host expects a row move to leave it: splat
// i's 59 parameters and 59 values of each moment, field by field (a row block's order, one
// row), and its statistics.
type hostRows struct {
	params, m, v [][paramFloats]float32
	accum, maxR  []float32
	count        []int32
	step         int64
}

// rowsOf reads s row by row.
func rowsOf(s *engine.State) hostRows {
	n := s.Params.Len()
	r := hostRows{params: splitRows(s.Params), m: splitRows(s.AdamM), v: splitRows(s.AdamV), step: s.AdamStep,
		accum: append([]float32(nil), s.Stats.GradAccum...), maxR: append([]float32(nil), s.Stats.MaxRadius...),
		count: append([]int32(nil), s.Stats.Count...)}
	if len(r.accum) != n || len(r.maxR) != n || len(r.count) != n {
		panic(fmt.Sprintf("a state of %d splats with %d, %d, %d statistics", n, len(r.accum), len(r.count), len(r.maxR)))
	}
	return r
}

func splitRows(g *splat.Gaussians) [][paramFloats]float32 {
	rows := make([][paramFloats]float32, g.Len())
	for i := range rows {
		k := 0
		for _, f := range g.Fields() {
			k += copy(rows[i][k:], f.Data[i*f.Width:(i+1)*f.Width])
		}
	}
	return rows
}

func joinRows(rows [][paramFloats]float32) *splat.Gaussians {
	g := splat.New(len(rows))
	for i := range rows {
		k := 0
		for _, f := range g.Fields() {
			k += copy(f.Data[i*f.Width:(i+1)*f.Width], rows[i][k:])
		}
	}
	return g
}

func (r hostRows) len() int { return len(r.params) }

// state is r as an engine.State, for SetState.
func (r hostRows) state() *engine.State {
	return &engine.State{Params: joinRows(r.params), AdamM: joinRows(r.m), AdamV: joinRows(r.v), AdamStep: r.step,
		Stats: engine.Stats{GradAccum: append([]float32(nil), r.accum...), Count: append([]int32(nil), r.count...),
			MaxRadius: append([]float32(nil), r.maxR...)}}
}

// sent is rows idx as another rank receives them: parameters and moments, zero statistics.
func (r hostRows) sent(idx []int32) hostRows {
	out := hostRows{step: r.step, accum: make([]float32, len(idx)), maxR: make([]float32, len(idx)), count: make([]int32, len(idx))}
	for _, i := range idx {
		out.params, out.m, out.v = append(out.params, r.params[i]), append(out.m, r.m[i]), append(out.v, r.v[i])
	}
	return out
}

// then is r's rows followed by o's; r's Adam step.
func (r hostRows) then(o hostRows) hostRows {
	c := func(a, b [][paramFloats]float32) [][paramFloats]float32 {
		return append(append([][paramFloats]float32(nil), a...), b...)
	}
	return hostRows{params: c(r.params, o.params), m: c(r.m, o.m), v: c(r.v, o.v), step: r.step,
		accum: append(append([]float32(nil), r.accum...), o.accum...), maxR: append(append([]float32(nil), r.maxR...), o.maxR...),
		count: append(append([]int32(nil), r.count...), o.count...)}
}

// head is rows [0,n).
func (r hostRows) head(n int) hostRows { return r.rng(0, n) }

// rng is rows [lo,hi).
func (r hostRows) rng(lo, hi int) hostRows {
	return hostRows{params: r.params[lo:hi:hi], m: r.m[lo:hi:hi], v: r.v[lo:hi:hi], accum: r.accum[lo:hi:hi],
		maxR: r.maxR[lo:hi:hi], count: r.count[lo:hi:hi], step: r.step}
}

// clone is a deep copy, to edit.
func (r hostRows) clone() hostRows { return r.then(hostRows{}) }

// block is the row block of r's rows, as ExportRows lays it out: each part in the packed layout
// of r.len() splats.
func (r hostRows) block() []float32 {
	return append(append(pack(joinRows(r.params)), pack(joinRows(r.m))...), pack(joinRows(r.v))...)
}

// rowDiffs lists where got differs from want, bit for bit: the first few rows of each part,
// and how many in all.
func rowDiffs(want, got hostRows) []string {
	if want.len() != got.len() {
		return []string{fmt.Sprintf("%d rows, want %d", got.len(), want.len())}
	}
	var out []string
	if got.step != want.step {
		out = append(out, fmt.Sprintf("Adam step %d, want %d", got.step, want.step))
	}
	part := func(name string, bad func(i int) bool) {
		var rows []int
		for i := range want.len() {
			if bad(i) {
				rows = append(rows, i)
			}
		}
		if len(rows) > 0 {
			out = append(out, fmt.Sprintf("%s: %d rows differ, first %v", name, len(rows), rows[:min(len(rows), 5)]))
		}
	}
	for _, x := range []struct {
		name      string
		want, got [][paramFloats]float32
	}{{"params", want.params, got.params}, {"adam m", want.m, got.m}, {"adam v", want.v, got.v}} {
		part(x.name, func(i int) bool { return check.BitsDiffer(x.got[i][:], x.want[i][:]) > 0 })
	}
	part("statistics", func(i int) bool {
		return math.Float32bits(got.accum[i]) != math.Float32bits(want.accum[i]) || got.count[i] != want.count[i] ||
			math.Float32bits(got.maxR[i]) != math.Float32bits(want.maxR[i])
	})
	return out
}

// rowsRig opens the row tests' engines on one device.
type rowsRig struct {
	t     *testing.T
	dev   gpu.Device
	exact bool // the device sums in a fixed order (the emulators): steps repeat to the bit
	set   engine.Settings
	o     engine.StepOptions
	view  *engine.View
}

func newRowsRig(t *testing.T) *rowsRig {
	dev, exact := testDevice(t)
	_, v := RandomScene(seedRows, rowsRecvN, rowsW, rowsH)
	set := engine.DefaultSettings()
	set.Workers = 2
	return &rowsRig{t: t, dev: dev, exact: exact, set: set, view: v,
		o: engine.StepOptions{SHDegree: 0, LR: testLR(), AccumulateStats: true}}
}

// receiver is an engine of rowsRecvN splats trained for two steps at SH degree 0.
func (r *rowsRig) receiver(seed uint64) *Engine {
	g, _ := RandomScene(seed, rowsRecvN, rowsW, rowsH)
	e := newEngine(r.t, r.dev, r.set, g)
	for range 2 {
		if _, err := e.Step(r.view, r.o); err != nil {
			r.t.Fatal(err)
		}
	}
	st := r.rows(e)
	seen := 0
	for _, c := range st.count {
		seen += int(c)
	}
	if seen == 0 {
		r.t.Fatal("the receiver's steps saw no splat: its statistics check nothing")
	}
	return e
}

// sender is an engine of rowsSendN splats with random moments (every SH band) and statistics.
func (r *rowsRig) sender(seed uint64) *Engine {
	g, _ := RandomScene(seed, rowsSendN, rowsW, rowsH)
	rng := rand.New(rand.NewPCG(seedRows, seed))
	n := g.Len()
	m, v := splat.New(n), splat.New(n)
	for fi, f := range m.Fields() {
		vf := v.Fields()[fi]
		for k := range f.Data {
			f.Data[k] = float32(rng.NormFloat64() * 1e-3)
			vf.Data[k] = float32(rng.Float64() * 1e-6)
		}
	}
	st := engine.Stats{GradAccum: make([]float32, n), Count: make([]int32, n), MaxRadius: make([]float32, n)}
	for i := range n {
		st.GradAccum[i], st.Count[i], st.MaxRadius[i] = float32(rng.Float64()), int32(1+rng.IntN(9)), float32(20*rng.Float64())
	}
	e := newEngine(r.t, r.dev, r.set, g)
	if err := e.SetState(&engine.State{Params: g, AdamM: m, AdamV: v, AdamStep: 7, Stats: st}); err != nil {
		r.t.Fatal(err)
	}
	return e
}

func (r *rowsRig) rows(e *Engine) hostRows {
	r.t.Helper()
	s, err := e.State()
	if err != nil {
		r.t.Fatal(err)
	}
	return rowsOf(s)
}

// same fails the test where e's state is not want, bit for bit.
func (r *rowsRig) same(what string, e *Engine, want hostRows) {
	r.t.Helper()
	if e.Len() != want.len() {
		r.t.Fatalf("%s: Len() %d, want %d", what, e.Len(), want.len())
	}
	for _, d := range rowDiffs(want, r.rows(e)) {
		r.t.Errorf("%s: %s", what, d)
	}
}

// stepLikeFresh takes a step on e, which holds want, and on a fresh engine given want by
// SetState. The losses must agree to the bit (the forward reads the parameters alone) and, on
// a device that sums in a fixed order, the states after the step too: a per-splat buffer the
// row calls left stale, or moments in SH bands adam_step was told to skip (shUsed), show here.
func (r *rowsRig) stepLikeFresh(e *Engine, want hostRows) {
	r.t.Helper()
	ref := newEngine(r.t, r.dev, r.set, joinRows(want.params))
	if err := ref.SetState(want.state()); err != nil {
		r.t.Fatal(err)
	}
	got, err := e.Step(r.view, r.o)
	if err != nil {
		r.t.Fatalf("a step after the row move: %v", err)
	}
	exp, err := ref.Step(r.view, r.o)
	if err != nil {
		r.t.Fatal(err)
	}
	if math.Float64bits(got.Loss) != math.Float64bits(exp.Loss) || got.Visible != exp.Visible {
		r.t.Errorf("step after the row move: loss %.9g over %d visible, a fresh engine with the same state %.9g over %d", got.Loss, got.Visible, exp.Loss, exp.Visible)
	}
	if !r.exact {
		return
	}
	for _, d := range rowDiffs(r.rows(ref), r.rows(e)) {
		r.t.Errorf("after a step, against a fresh engine stepped from the same state: %s", d)
	}
}

// TestRowsExportAppend exports rows of a sender (ExportRows) and appends the block to a
// receiver on the same device (AppendRows), as two ranks rebalancing do once the exchange has
// carried the block. The block must be the packed layout the doc gives; the receiver's state
// its own rows as they were (statistics included) followed by the sent rows' parameters and
// moments with zero statistics, bit for bit; the sender's unchanged; a step afterwards the
// step a fresh engine takes from that state.
func TestRowsExportAppend(t *testing.T) {
	r := newRowsRig(t)
	all := make([]int32, rowsSendN)
	for i := range all {
		all[i] = int32(i)
	}
	// at is where InsertRows puts the rows (-1: AppendRows): before every existing row, as
	// the next rank takes a rank's tail, or amid them; the existing rows' statistics then move.
	cases := []struct {
		name string
		idx  []int32
		at   int
	}{
		{"tail", all[rowsSendN-20:], -1},
		{"scattered-repeats", []int32{7, 3, rowsSendN - 1, 3, 0, 7, 88}, -1},
		{"single", []int32{42}, -1},
		// More rows than the receiver had, past its capacity: every buffer grows, the
		// statistics through the host.
		{"grow", append(append([]int32(nil), all...), all[:30]...), -1},
		{"none", nil, -1},
		{"tail/first", all[rowsSendN-20:], 0},
		{"scattered/amid", []int32{7, 3, rowsSendN - 1}, rowsRecvN / 3},
		{"grow/first", append(append([]int32(nil), all...), all[:30]...), 0},
		{"single/before-last", []int32{42}, rowsRecvN - 1},
		{"none/first", nil, 0},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := *r
			r.t = t
			send, recv := r.sender(uint64(100+k)), r.receiver(uint64(200+k))
			sent, had := r.rows(send), r.rows(recv)
			capBefore := recv.capN

			block, err := send.ExportRows(c.idx)
			if err != nil {
				t.Fatal(err)
			}
			if block == nil {
				t.Fatal("ExportRows returned a nil block")
			}
			if got, want := dl[float32](t, send, block, RowWords*len(c.idx)), sent.sent(c.idx).block(); check.BitsDiffer(got, want) > 0 {
				t.Errorf("the block: %d of %d words differ from the packed layout of the rows", check.BitsDiffer(got, want), len(want))
			}
			want := had.then(sent.sent(c.idx))
			if c.at < 0 {
				err = recv.AppendRows(block, len(c.idx))
			} else {
				err = recv.InsertRows(block, len(c.idx), c.at)
				want = had.head(c.at).then(sent.sent(c.idx)).then(had.rng(c.at, had.len()))
			}
			if err != nil {
				t.Fatal(err)
			}
			r.same("the receiver", recv, want)
			r.same("the sender", send, sent)
			if grows := rowsRecvN+len(c.idx) > capBefore; grows && recv.capN <= capBefore {
				t.Errorf("%d rows in a capacity of %d, which stayed", recv.Len(), capBefore)
			} else if !grows && recv.capN != capBefore {
				t.Errorf("the capacity went from %d to %d for %d rows", capBefore, recv.capN, recv.Len())
			}
			r.stepLikeFresh(recv, want)
		})
	}
}

// TestRowsWrite overwrites rows of a receiver with rows a sender exported (WriteRows), as an
// MCMC relocation across ranks does: the listed rows take the block's parameters, and its
// moments or zero ones; every other row, and every row's statistics, stay as they were.
func TestRowsWrite(t *testing.T) {
	r := newRowsRig(t)
	cases := []struct {
		name     string
		src, dst []int32
		moments  bool
	}{
		{"relocate/moments", []int32{3, 3, 40, rowsSendN - 1}, []int32{5, 17, 0, rowsRecvN - 1}, true},
		{"relocate/zero-moments", []int32{3, 3, 40, rowsSendN - 1}, []int32{5, 17, 0, rowsRecvN - 1}, false},
		{"single/zero-moments", []int32{0}, []int32{rowsRecvN - 1}, false},
		{"none", nil, nil, true},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := *r
			r.t = t
			send, recv := r.sender(uint64(300+k)), r.receiver(uint64(400+k))
			sent, had := r.rows(send), r.rows(recv)
			block, err := send.ExportRows(c.src)
			if err != nil {
				t.Fatal(err)
			}
			if err := recv.WriteRows(block, c.dst, c.moments); err != nil {
				t.Fatal(err)
			}
			want := had.clone()
			for j, d := range c.dst {
				want.params[d] = sent.params[c.src[j]]
				want.m[d], want.v[d] = [paramFloats]float32{}, [paramFloats]float32{}
				if c.moments {
					want.m[d], want.v[d] = sent.m[c.src[j]], sent.v[c.src[j]]
				}
			}
			r.same("the receiver", recv, want)
			r.stepLikeFresh(recv, want)
		})
	}
}

// TestRowsKeep drops a receiver's tail (TruncateRows) or its head and tail (KeepRows): the
// kept rows keep their order, parameters, moments and statistics, bit for bit, and train on.
func TestRowsKeep(t *testing.T) {
	r := newRowsRig(t)
	for k, c := range [][2]int{{0, 1}, {0, rowsRecvN / 2}, {0, rowsRecvN - 1}, {0, rowsRecvN},
		{1, rowsRecvN}, {rowsRecvN / 3, rowsRecvN}, {rowsRecvN - 1, rowsRecvN}, {5, rowsRecvN - 7}} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			r := *r
			r.t = t
			e := r.receiver(uint64(500 + k))
			had := r.rows(e)
			var err error
			if c[0] == 0 {
				err = e.TruncateRows(c[1])
			} else {
				err = e.KeepRows(c[0], c[1])
			}
			if err != nil {
				t.Fatal(err)
			}
			r.same("after the cut", e, had.rng(c[0], c[1]))
			r.stepLikeFresh(e, had.rng(c[0], c[1]))
		})
	}
}

// TestRowsHandoff hands a rank's last rows to the next rank as rebalancing does (the sender
// exports its tail, the receiver appends it, the sender truncates), and back again: the two
// engines together must hold the rows they held, each in its new range.
func TestRowsHandoff(t *testing.T) {
	r := newRowsRig(t)
	a, b := r.sender(600), r.receiver(601)
	ra, rb := r.rows(a), r.rows(b)
	move := func(from, to *Engine, count int) {
		t.Helper()
		n := from.Len()
		idx := make([]int32, count)
		for j := range idx {
			idx[j] = int32(n - count + j)
		}
		block, err := from.ExportRows(idx)
		if err != nil {
			t.Fatal(err)
		}
		if err := to.AppendRows(block, count); err != nil {
			t.Fatal(err)
		}
		if err := from.TruncateRows(n - count); err != nil {
			t.Fatal(err)
		}
	}
	const k = 60 // past the receiver's capacity
	move(a, b, k)
	tail := make([]int32, k)
	for j := range tail {
		tail[j] = int32(rowsSendN - k + j)
	}
	r.same("the sender after handing its tail", a, ra.head(rowsSendN-k))
	r.same("the receiver after taking the tail", b, rb.then(ra.sent(tail)))
	// The receiver hands its own first rows' worth back (now its tail): the sent rows, with
	// the statistics they gathered here (zero).
	move(b, a, k)
	r.same("the receiver after handing it back", b, rb)
	r.same("the sender after taking it back", a, ra.head(rowsSendN-k).then(ra.sent(tail)))
}

// TestRowsRefused checks the row calls' refusals: each names what is wrong and leaves the
// engine as it was.
func TestRowsRefused(t *testing.T) {
	r := newRowsRig(t)
	e := r.receiver(700)
	had := r.rows(e)
	n := e.Len()
	small, err := e.ExportRows([]int32{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	// The scratch block has room for a few more than 3 rows; 50 need far more.
	many := make([]int32, 50)
	for j := range many {
		many[j] = int32(j)
	}
	cases := []struct {
		name string
		call func() error
		want string // in the message
		is   error
	}{
		{"export/past-end", func() error { _, err := e.ExportRows([]int32{0, 5, int32(n)}); return err }, "position 2", nil},
		{"export/negative", func() error { _, err := e.ExportRows([]int32{-1}); return err }, "row -1 at position 0", nil},
		{"write/past-end", func() error { return e.WriteRows(small, []int32{1, int32(n + 3), 2}, true) }, "position 1", nil},
		{"write/repeated", func() error { return e.WriteRows(small, []int32{4, 9, 4}, false) }, "positions 0 and 2", nil},
		{"write/small-block", func() error { return e.WriteRows(small, many, true) }, "the block holds", nil},
		{"write/no-block", func() error { return e.WriteRows(nil, []int32{1}, true) }, "no block", nil},
		{"append/small-block", func() error { return e.AppendRows(small, 50) }, "the block holds", nil},
		{"append/negative-count", func() error { return e.AppendRows(small, -1) }, "-1 rows", nil},
		{"append/no-block", func() error { return e.AppendRows(nil, 2) }, "no block", nil},
		{"truncate/zero", func() error { return e.TruncateRows(0) }, "keep rows [0, 0)", engine.ErrEmpty},
		{"keep/empty", func() error { return e.KeepRows(4, 4) }, "keep rows [4, 4)", engine.ErrEmpty},
		{"keep/negative", func() error { return e.KeepRows(-1, 3) }, "holds 100", nil},
		{"insert/past-end", func() error { return e.InsertRows(small, 1, n+1) }, "at 101 outside 0..100", nil},
		{"insert/negative-at", func() error { return e.InsertRows(small, 1, -1) }, "at -1 outside", nil},
		{"truncate/negative", func() error { return e.TruncateRows(-3) }, "", engine.ErrEmpty},
		{"truncate/past-end", func() error { return e.TruncateRows(n + 1) }, "holds 100", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			switch {
			case err == nil:
				t.Fatal("accepted")
			case !strings.Contains(err.Error(), c.want):
				t.Errorf("%v: the message does not say %q", err, c.want)
			case c.is != nil && !errors.Is(err, c.is):
				t.Errorf("%v: not %v", err, c.is)
			}
			t.Log(err)
		})
	}
	r.same("after the refusals", e, had)

	// A step submitted and not collected: every row call waits for it to be collected.
	if err := e.Submit(r.view, r.o); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"export":   func() error { _, err := e.ExportRows([]int32{0}); return err },
		"append":   func() error { return e.AppendRows(small, 1) },
		"write":    func() error { return e.WriteRows(small, []int32{0}, true) },
		"truncate": func() error { return e.TruncateRows(1) },
		"insert":   func() error { return e.InsertRows(small, 1, 0) },
		"keep":     func() error { return e.KeepRows(1, 2) },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "not collected") {
			t.Errorf("%s with a step in flight: %v", name, err)
		}
	}
	if _, err := e.Collect(); err != nil {
		t.Fatal(err)
	}
	if e.Len() != n {
		t.Errorf("the refused calls changed the engine to %d splats", e.Len())
	}
}

// TestRowsForgetProjection checks that the calls that change rows forget PackVisible's
// projection and the batch's summed gradients, as an edit does: an owner's backward after them
// would map gradients to the wrong splats, and an update would apply sums of rows that moved.
// ExportRows changes nothing and keeps both.
func TestRowsForgetProjection(t *testing.T) {
	r := newRowsRig(t)
	cam := &r.view.Camera
	cases := []struct {
		name  string
		call  func(e, send *Engine) error
		keeps bool
	}{
		{"export", func(e, _ *Engine) error { _, err := e.ExportRows([]int32{0, 1}); return err }, true},
		{"append", func(e, send *Engine) error {
			b, err := send.ExportRows([]int32{2})
			if err != nil {
				return err
			}
			return e.AppendRows(b, 1)
		}, false},
		{"write", func(e, send *Engine) error {
			b, err := send.ExportRows([]int32{2})
			if err != nil {
				return err
			}
			return e.WriteRows(b, []int32{5}, false)
		}, false},
		{"truncate", func(e, _ *Engine) error { return e.TruncateRows(e.Len() - 1) }, false},
		{"keep-tail", func(e, _ *Engine) error { return e.KeepRows(1, e.Len()) }, false},
		{"insert-first", func(e, send *Engine) error {
			b, err := send.ExportRows([]int32{2})
			if err != nil {
				return err
			}
			return e.InsertRows(b, 1, 0)
		}, false},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := *r
			r.t = t
			e, send := r.receiver(uint64(800+k)), r.sender(uint64(900+k))
			// The gradients of the packed records: zeros will do, no update is compared.
			_, count, err := e.PackVisible(cam, r.o.SHDegree, 0)
			if err != nil {
				t.Fatal(err)
			}
			if count == 0 {
				t.Fatal("the view sees none of the receiver's splats: the test checks nothing")
			}
			grads, err := r.dev.Alloc(count * e.gradWords() * 4)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.dev.Free(grads) })
			if err := r.dev.Memset(grads, 0, grads.Size(), 0); err != nil {
				t.Fatal(err)
			}
			if err := e.BackwardFromGradients(cam, grads, count, r.o, false); err != nil {
				t.Fatal(err)
			}
			// A second view's backward needs the projection again: pack once more.
			if _, count, err = e.PackVisible(cam, r.o.SHDegree, 0); err != nil {
				t.Fatal(err)
			}
			if err := c.call(e, send); err != nil {
				t.Fatal(err)
			}
			backErr := e.BackwardFromGradients(cam, grads, count, r.o, true)
			_, updErr := e.UpdateFromGradients(r.o)
			switch {
			case c.keeps && (backErr != nil || updErr != nil):
				t.Errorf("the projection and sums should stay: backward %v, update %v", backErr, updErr)
			case !c.keeps && (backErr == nil || !strings.Contains(backErr.Error(), "no PackVisible")):
				t.Errorf("a backward through the projection packed before the rows changed: %v", backErr)
			case !c.keeps && (updErr == nil || !strings.Contains(updErr.Error(), "no gradients summed")):
				t.Errorf("an update of the sums taken before the rows changed: %v", updErr)
			}
		})
	}
}

// TestSplatLimit: past maxRows splats the kernels' 32-bit element ids would wrap, so an edit or
// a relocation that grows the engine past it is refused, with the limit and what to do, before
// any device work, and the engine is as it was.
func TestSplatLimit(t *testing.T) {
	r := newRowsRig(t)
	e := r.receiver(710)
	had := r.rows(e)
	over := make([]int32, maxRows-e.Len()+1) // clones of splat 0, one past the limit
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"edit", func() error { return e.Apply(engine.Edit{Clone: over}) }},
		{"relocation", func() error { return e.Relocate(engine.Relocation{Append: over}) }},
	} {
		err := c.call()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("one engine holds at most %d", maxRows)) {
			t.Errorf("%s to %d Gaussians: %v, want the limit named", c.name, e.Len()+len(over), err)
			continue
		}
		t.Logf("%s: %v", c.name, err)
	}
	r.same("after the refusals", e, had)
	if err := checkSplats("upload", maxRows); err != nil {
		t.Errorf("exactly maxRows splats refused: %v", err)
	}
}

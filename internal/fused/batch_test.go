package fused

import (
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// TestBatchParity runs CompareBatch (the rows `rlxsplat parity` prints for batches): a batch's
// summed gradients against its views alone and against the CPU, its seen splats, statistics and
// update.
func TestBatchParity(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 3000, 128, 96
	if emu {
		n, w, h = 300, 48, 40
	}
	cases := []struct {
		name        string
		model       prep.Model
		views       int
		visibleOnly bool
		mcmc        bool
	}{
		{"ewa/3", prep.EWA, 3, false, false},
		{"ewa/2/visible-only", prep.EWA, 2, true, false},
		{"ray/2", prep.Ray, 2, false, false},
		{"ewa/4/mcmc", prep.EWA, 4, false, true},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, vs := RandomBatch(uint64(ci), n, w, h, c.views)
			set := engine.DefaultSettings()
			set.Render = c.model
			set.Adam.VisibleOnly = c.visibleOnly
			set.Workers = 2
			o := engine.StepOptions{SHDegree: 3, LR: testLR(), AccumulateStats: !c.mcmc}
			if c.mcmc {
				o.MCMC = engine.MCMCStep{OpacityReg: 0.01, ScaleReg: 0.01, RegInView: true}
			}
			rows, err := CompareBatch(dev, set, g, vs, o)
			if err != nil {
				t.Fatal(err)
			}
			seen := false
			for _, r := range rows {
				seen = seen || r.Name == "batch params after adam"
				if !r.Pass {
					t.Errorf("%s: max abs %.3g, rel %.3g, cosine %.8f, tol %g: %s", r.Name, r.MaxAbs, r.RelErr, r.Cosine, r.Tol, r.Note)
				}
			}
			if !seen {
				t.Fatal("no update row")
			}
		})
	}
}

// TestBatchOverflowResumes starts a batch with lists too short for its later views: the step
// must grow them and resume from the view that overflowed, the earlier views' gradients and
// statistics kept once, giving what a step with room from the start gives.
func TestBatchOverflowResumes(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 2000, 96, 72
	if emu {
		n, w, h = 200, 40, 32
	}
	g, vs := RandomBatch(5, n, w, h, 3)
	set := engine.DefaultSettings()
	set.Workers = 2
	o := engine.StepOptions{SHDegree: 1, LR: testLR(), AccumulateStats: true}
	// Each view's entries; the batch starts with the view that needs the fewest.
	entries := viewEntries(t, dev, set, g, vs)
	first := slices.Index(entries, slices.Min(entries))
	vs[0], vs[first] = vs[first], vs[0]
	entries[0], entries[first] = entries[first], entries[0]
	if slices.Max(entries[1:]) <= entries[0] {
		t.Fatalf("views' entries %v: no later view needs more than the first", entries)
	}
	run := func(overflow bool) (engine.Stats, []float32) {
		fe, err := New(dev, set, g)
		if err != nil {
			t.Fatal(err)
		}
		defer fe.Close()
		if overflow {
			if err := fe.growLists(entries[0]); err != nil {
				t.Fatal(err)
			}
			fe.listCap = entries[0] // the buffers stay; the count check sees room for the first view only
		}
		res, err := fe.StepBatch(vs, o)
		if err != nil {
			t.Fatal(err)
		}
		if res.Visible == 0 {
			t.Fatal("no splat visible")
		}
		if overflow && fe.listCap <= entries[0] {
			t.Fatalf("the lists did not grow (%d entries): no view overflowed", fe.listCap)
		}
		st, err := fe.Stats()
		if err != nil {
			t.Fatal(err)
		}
		p, err := fe.Gaussians()
		if err != nil {
			t.Fatal(err)
		}
		return st, pack(p)
	}
	st0, p0 := run(false)
	st1, p1 := run(true)
	bad := 0
	for i := range st0.Count {
		if st0.Count[i] != st1.Count[i] {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("statistic counts differ for %d of %d splats after the resumed batch", bad, len(st0.Count))
	}
	if rel := check.RelErr(p1, p0); rel > 1e-4 {
		t.Errorf("parameters after the resumed batch: relative L2 %.3g from the batch with room", rel)
	}
}

// pairReducer sums two ranks' Reductions through the host (internal/multi's HostReducer, which
// the tests here cannot import): rank 0 waits for rank 1's buffers and writes the sums to both.
type pairReducer struct {
	mu    sync.Mutex
	cond  *sync.Cond
	parts [2]*pairPart
	gen   int
	calls [2]int
}

type pairPart struct {
	dev         gpu.Device
	r           Reduction
	grads       []float32
	seen        []uint32
	abort, done uint32
}

func newPairReducer() *pairReducer {
	p := &pairReducer{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *pairReducer) reduce(rank int, dev gpu.Device) func(Reduction) error {
	return func(r Reduction) error {
		part := &pairPart{dev: dev, r: r, grads: make([]float32, r.N*paramFloats), seen: make([]uint32, r.N)}
		w := make([]byte, 4)
		if err := errors.Join(gpu.DownloadF32(dev, part.grads, r.Grads), gpu.DownloadSlice(dev, part.seen, r.Seen, 0),
			dev.Download(w, r.Readout, r.AbortOff)); err != nil {
			return err
		}
		part.abort = binary.LittleEndian.Uint32(w)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.calls[rank]++
		gen := p.gen
		p.parts[rank] = part
		if p.parts[0] == nil || p.parts[1] == nil {
			for p.gen == gen {
				p.cond.Wait()
			}
			return nil
		}
		a, b := p.parts[0], p.parts[1]
		p.parts = [2]*pairPart{}
		sum := make([]float32, len(a.grads))
		seen := make([]uint32, len(a.seen))
		for i := range sum {
			sum[i] = a.grads[i] + b.grads[i]
		}
		for i := range seen {
			seen[i] = max(a.seen[i], b.seen[i])
		}
		binary.LittleEndian.PutUint32(w, max(a.abort, b.abort))
		var errs []error
		for _, q := range []*pairPart{a, b} {
			errs = append(errs, gpu.UploadF32(q.dev, q.r.GradsOut, sum), gpu.UploadSlice(q.dev, q.r.SeenOut, 0, seen), q.dev.Upload(q.r.Readout, q.r.PeerOff, w))
		}
		p.gen++
		p.cond.Broadcast()
		return errors.Join(errs...)
	}
}

// TestDataParallelOverflow runs a batch as two ranks' shares, one rank's lists too short for
// its second view: that rank resumes from the view that overflowed, the other reruns only the
// reduction and the update, and both end with the parameters of a run with room, each rank's
// statistics counted once.
func TestDataParallelOverflow(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 2000, 96, 72
	if emu {
		n, w, h = 200, 40, 32
	}
	g, vs := RandomBatch(6, n, w, h, 4)
	set := engine.DefaultSettings()
	set.Workers = 2
	o := engine.StepOptions{SHDegree: 1, LR: testLR(), AccumulateStats: true}
	shares := [2][]*engine.View{vs[:2], vs[2:]}
	// Rank 1's first view must need fewer entries than its second.
	entries := viewEntries(t, dev, set, g, vs)
	if entries[2] > entries[3] {
		shares[1] = []*engine.View{vs[3], vs[2]}
		entries[2], entries[3] = entries[3], entries[2]
	}
	if entries[3] <= entries[2] {
		t.Fatalf("rank 1's views need %d and %d entries: no overflow to make", entries[2], entries[3])
	}
	run := func(overflow bool) ([]float32, engine.Stats, [2]int) {
		red := newPairReducer()
		var ranks [2]*Engine
		for k := range ranks {
			fe, err := New(dev, set, g)
			if err != nil {
				t.Fatal(err)
			}
			defer fe.Close()
			fe.SetReduce(red.reduce(k, dev))
			ranks[k] = fe
		}
		if overflow {
			if err := ranks[1].growLists(entries[2]); err != nil {
				t.Fatal(err)
			}
			ranks[1].listCap = entries[2]
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k := range ranks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[k] = ranks[k].StepPart(shares[k], len(vs), o)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		p0, _ := ranks[0].Gaussians()
		p1, _ := ranks[1].Gaussians()
		if d := check.BitsDiffer(pack(p0), pack(p1)); d > 0 {
			t.Fatalf("the ranks differ in %d values after the step", d)
		}
		s0, _ := ranks[0].Stats()
		s1, _ := ranks[1].Stats()
		for i := range s0.Count {
			s0.Count[i] += s1.Count[i]
		}
		return pack(p0), s0, red.calls
	}
	p0, st0, calls0 := run(false)
	p1, st1, calls1 := run(true)
	if calls0 != [2]int{1, 1} || calls1 != [2]int{2, 2} {
		t.Fatalf("reductions per rank: %v with room, %v with the overflow (want [1 1] and [2 2])", calls0, calls1)
	}
	bad := 0
	for i := range st0.Count {
		if st0.Count[i] != st1.Count[i] {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("statistic counts differ for %d splats after the overflow", bad)
	}
	if rel := check.RelErr(p1, p0); rel > 1e-5 {
		t.Errorf("parameters after the overflow: relative L2 %.3g from the step with room", rel)
	}
}

// viewEntries is the tile-list entries each view of vs needs, stepped one at a time on an engine
// of its own from g (the overflow tests size the lists between them).
func viewEntries(t *testing.T, dev gpu.Device, set engine.Settings, g *splat.Gaussians, vs []*engine.View) []int {
	t.Helper()
	fe, err := New(dev, set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	entries := make([]int, len(vs))
	for j, v := range vs {
		res, err := fe.Step(v, engine.StepOptions{SHDegree: 1})
		if err != nil {
			t.Fatal(err)
		}
		entries[j] = res.Entries
	}
	return entries
}

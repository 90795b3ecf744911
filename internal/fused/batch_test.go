package fused

import (
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/prep"
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
	entries := make([]int, len(vs))
	{
		fe, err := New(dev, set, g)
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range vs {
			res, err := fe.Step(v, engine.StepOptions{SHDegree: 1})
			if err != nil {
				t.Fatal(err)
			}
			entries[j] = res.Entries
		}
		fe.Close()
	}
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

package multi

import (
	"fmt"
	"math"

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

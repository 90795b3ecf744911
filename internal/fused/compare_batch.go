package fused

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// CompareBatch checks a training step over a batch of views (train.batch_size) on dev: the
// batch's summed gradients against the sum of the same views' single-view gradients on the
// device and against the CPU pipeline's sum, the splats the batch marks seen against the union
// of the views' valid flags, the densification statistics against the CPU engine's batch step,
// and the parameters after the step against the CPU optimizer applied to the step's own summed
// gradients times engine.BatchScale (exact). dev stays open.
func CompareBatch(dev gpu.Device, set engine.Settings, g *splat.Gaussians, vs []*engine.View, o engine.StepOptions) ([]CompareRow, error) {
	if len(vs) < 2 {
		return nil, fmt.Errorf("fused: compare batch: %d views, want at least 2", len(vs))
	}
	n := g.Len()
	fe, err := New(dev, set, g)
	if err != nil {
		return nil, fmt.Errorf("fused: compare batch: %w", err)
	}
	defer fe.Close()
	r := &rows{e: fe}

	// Each view alone on the device, its gradients summed in view order (float32, as the
	// batch sums them), and the union of the views' valid flags.
	fe.gradsOnly = true
	one := o
	one.AccumulateStats = false
	sum := make([]float32, n*paramFloats)
	union := make([]bool, n)
	for _, v := range vs {
		if err := fe.poison(); err != nil {
			return nil, fmt.Errorf("fused: compare batch: %w", err)
		}
		if _, err := fe.Step(v, one); err != nil {
			return nil, fmt.Errorf("fused: compare batch: view %d alone: %w", v.Index, err)
		}
		gp := r.f32(fe.grads, 0, n*paramFloats)
		valid := download[uint32](r, fe.valid, 0, n)
		if r.err != nil {
			return nil, r.err
		}
		zeroInvalid(gp, valid)
		for k := range sum {
			sum[k] += gp[k]
		}
		for i, ok := range valid {
			union[i] = union[i] || ok != 0
		}
	}

	// The CPU pipeline's gradients of the same views, summed alike, and the CPU engine's step.
	pipe := cpu.NewPipeline[float32](set)
	cpuSum := splat.Zeros[float32](n)
	for _, v := range vs {
		if err := pipe.Forward(&v.Camera, g, o.SHDegree, o.Background); err != nil {
			return nil, fmt.Errorf("fused: compare batch: cpu forward: %w", err)
		}
		if _, err := pipe.Loss(v.Target); err != nil {
			return nil, fmt.Errorf("fused: compare batch: cpu loss: %w", err)
		}
		if err := pipe.Backward(g); err != nil {
			return nil, fmt.Errorf("fused: compare batch: cpu backward: %w", err)
		}
		sf, gf := cpuSum.Fields(), pipe.Grads.Fields()
		for k := range sf {
			for i := range sf[k].Data {
				sf[k].Data[i] += gf[k].Data[i]
			}
		}
	}
	ce, err := cpu.New(set, g)
	if err != nil {
		return nil, fmt.Errorf("fused: compare batch: cpu engine: %w", err)
	}
	cres, err := ce.StepBatch(vs, o)
	if err != nil {
		return nil, fmt.Errorf("fused: compare batch: cpu step: %w", err)
	}
	cStats, err := ce.Stats()
	if err != nil {
		return nil, err
	}

	// The batch on the device, from the same start, with its update.
	if err := fe.upload(g, nil, nil, 0, nil); err != nil {
		return nil, fmt.Errorf("fused: compare batch: %w", err)
	}
	if err := fe.poison(); err != nil {
		return nil, fmt.Errorf("fused: compare batch: %w", err)
	}
	fe.gradsOnly = false
	gres, err := fe.StepBatch(vs, o)
	if err != nil {
		return nil, fmt.Errorf("fused: compare batch: step: %w", err)
	}
	bp := r.f32(fe.grads, 0, n*paramFloats)
	seen := download[uint32](r, fe.seen, 0, n)
	if r.err != nil {
		return nil, r.err
	}
	zeroInvalid(bp, seen)
	bad := 0
	for i, s := range seen {
		if (s != 0) != union[i] {
			bad++
		}
	}
	r.count("batch seen splats", bad, n, "")
	batch, single := unpack(bp, n), unpack(sum, n)
	for _, grp := range groups(batch, single) {
		r.grad("batch d "+grp.name+" (device views alone)", grp.got, grp.want)
	}
	for _, grp := range groups(batch, cpuSum) {
		r.grad("batch d "+grp.name+" (cpu)", grp.got, grp.want)
	}
	for _, x := range []struct {
		name      string
		got, want float64
	}{{"batch loss", gres.Loss, cres.Loss}, {"batch loss ssim", gres.SSIM, cres.SSIM}} {
		d := math.Abs(x.got - x.want)
		tol := TolExact * max(1, math.Abs(x.want))
		r.out = append(r.out, CompareRow{Name: x.name, MaxAbs: d, RelErr: d / max(math.Abs(x.want), math.SmallestNonzeroFloat64),
			Cosine: math.NaN(), Tol: TolExact, Pass: d <= tol || (math.IsNaN(x.want) && math.IsNaN(x.got)),
			Note: fmt.Sprintf("%.9g, cpu %.9g (means over %d views)", x.got, x.want, len(vs))})
	}

	fst, err := fe.Stats()
	if err != nil {
		return nil, fmt.Errorf("fused: compare batch: statistics: %w", err)
	}
	if o.AccumulateStats {
		r.grad("batch stat grad accum", fst.GradAccum, cStats.GradAccum)
		bad = 0
		for i := range fst.Count {
			if fst.Count[i] != cStats.Count[i] {
				bad++
			}
		}
		r.count("batch stat count", bad, n, "")
	}

	// The update: the CPU optimizer on the step's own summed gradients, scaled as the engines
	// scale them, plus the regularisers over the seen splats, must give the device's
	// parameters to the bit.
	after, err := fe.Gaussians()
	if err != nil {
		return nil, fmt.Errorf("fused: compare batch: parameters: %w", err)
	}
	scale := engine.BatchScale(len(vs))
	for _, f := range batch.Fields() {
		for i := range f.Data {
			f.Data[i] *= scale
		}
	}
	inView := make([]bool, n)
	for i, s := range seen {
		inView[i] = s != 0
	}
	engine.RegularizerGrads(batch, g, o.MCMC, inView, 0, n)
	want, err := hostAdam(set.Adam, o.LR, g, batch, inView)
	if err != nil {
		return nil, err
	}
	d := check.BitsDiffer(pack(after), pack(want))
	r.count("batch params after adam", d, n*paramFloats, fmt.Sprintf("%d of %d values differ from the CPU optimizer on the device's mean gradients", d, n*paramFloats))
	cAfter, err := ce.Gaussians()
	if err != nil {
		return nil, err
	}
	a, b := pack(after), pack(cAfter)
	r.out = append(r.out, CompareRow{Name: "batch params vs cpu step", MaxAbs: check.MaxAbs(a, b), RelErr: check.RelErr(a, b), Cosine: math.NaN(),
		Tol: math.Inf(1), Pass: true, Note: "reported only: Adam moves noise-level gradients by ±lr"})
	return r.out, r.err
}

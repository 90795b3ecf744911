package parity

import (
	"math/rand/v2"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// CheckMCMC checks the MCMC densifier's regularisers (engine.RegularizerGrads, the gradients
// every engine adds before Adam) against central finite differences of their loss
// (engine.RegularizerLoss in float64), one row for the opacity logits and one for the
// log-scales. brk names a group ("opacity_logits" or "log_scales") whose analytic gradient is
// scaled by 1.01, to show that the check fails.
func CheckMCMC(brk string) []Row {
	const n = 23
	rng := rand.New(rand.NewPCG(0x3c3c, 5))
	g := splat.New(n)
	for i := 0; i < n; i++ {
		g.OpacityLogits[i] = float32(8*rng.Float64() - 4)
		for a := 0; a < 3; a++ {
			g.LogScales[3*i+a] = float32(-4 + 3*rng.Float64())
		}
	}
	m := engine.MCMCStep{OpacityReg: 0.01, ScaleReg: 0.01}
	grads := splat.Zeros[float32](n)
	engine.RegularizerGrads(grads, g, m, nil, 0, n)
	logits, scales := f64(g.OpacityLogits), f64(g.LogScales)
	loss := func() float64 {
		return engine.RegularizerLoss(logits, scales, float64(m.OpacityReg), float64(m.ScaleReg))
	}
	var rows []Row
	for _, x := range []struct {
		group    string
		param    []float64
		analytic []float32
	}{{"opacity_logits", logits, grads.OpacityLogits}, {"log_scales", scales, grads.LogScales}} {
		a := f64(x.analytic)
		if x.group == brk {
			for j := range a {
				a[j] *= 1.01
			}
		}
		fd := check.Central(x.param, 1e-6, loss)
		err := check.Grad(x.group, a, fd, GradTol)
		rows = append(rows, Row{
			Check: "grad mcmc regularisers", Group: x.group, RelErr: check.RelErr(a, fd), Cosine: check.Cosine(a, fd),
			MaxAbs: check.MaxAbs(a, fd), Tol: GradTol, Pass: err == nil, Note: errNote(err),
		})
	}
	return rows
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

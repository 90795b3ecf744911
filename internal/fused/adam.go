package fused

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// adamArgs is struct AdamP for Adam step t over a batch of views views: the per-group step
// sizes and bias corrections in float64, rounded as internal/adam's stepGroup rounds them, the
// coefficients of m's regularisers for n splats, the factor 1/views on the summed gradients
// (engine.BatchScale), and the SH floats of a splat that may move: those of degrees up to
// shUsed (shLiveFloats).
func adamArgs(s engine.AdamSettings, lr engine.LR, t int64, n int, m engine.MCMCStep, views, shUsed int) (abi.AdamP, error) {
	lrs := [6]float32{lr.Means, lr.LogScales, lr.Quats, lr.Opacity, lr.SHDC, lr.SHRest}
	b1, b2, eps := float64(s.Beta1), float64(s.Beta2), float64(s.Eps)
	bc1 := 1 - math.Pow(b1, float64(t))
	bc2 := 1 - math.Pow(b2, float64(t))
	ap := abi.AdamP{
		B1:  float32(b1),
		B2:  float32(b2),
		C1:  float32(1 - b1),
		C2:  float32(1 - b2),
		Eps: float32(eps),
		N:   uint32(n),
		// The mean of the views' losses: the CPU engine scales its summed gradients alike.
		GradScale: engine.BatchScale(views),
		ShLive:    shLiveFloats(shUsed),
	}
	for g, r := range lrs {
		if !(r >= 0 && r <= math.MaxFloat32) {
			return abi.AdamP{}, fmt.Errorf("fused: learning rate of group %d = %v, want a finite value ≥ 0", g, r)
		}
		ap.G[g] = abi.AdamGroup{StepSize: float32(float64(r) / bc1), InvSqrtBc2: float32(1 / math.Sqrt(bc2)), Clip: s.GradClip}
	}
	ap.VisibleOnly = s.SparseGroups()
	if n > 0 {
		ap.Co, ap.Cs = engine.RegCoeffs(m, n)
	}
	if m.RegInView {
		ap.RegInView = 1
	}
	return ap, nil
}

// adam launches adam.cu's adam_step over the 59·n packed elements, 4 a thread (design.md §5
// step 8), on the gradients grads holds for the splats valid marks (seen after a step's
// project_bwd; their reductions in a data-parallel step).
func (e *Engine) adam(ap abi.AdamP, grads, valid gpu.Buffer) error {
	return e.k.AdamStep(gpu.BlocksFor(uint32((paramFloats*e.n+3)/4), abi.AdamStepBlock), gpu.Dim3{abi.AdamStepBlock}, abi.AdamStepArgs{
		Ap: ap, Readout: e.ro, Params: abi.B(e.params), Grads: abi.B(grads), M: abi.B(e.adamM),
		V: abi.B(e.adamV), Valid: abi.B(valid)})
}

// shAll is the highest SH degree, whose bands fill a splat's 48 SH floats.
const shAll = 3

// shLiveFloats is how many of a splat's SH floats adam_step updates when no step has used a
// degree above d: the 3(d+1)² of bands 0..d. A band above every degree used so far has had
// zero gradients (project_bwd writes zeros above the step's degree) and so zero moments, and
// Adam's update of such a value is m = v = 0, u = −0, the value unchanged bit for bit: skipping
// it changes nothing but the bytes moved (the CPU engine updates it, with the same result).
func shLiveFloats(d int) uint32 {
	d = min(max(d, 0), shAll)
	return uint32(3 * (d + 1) * (d + 1))
}

package fused

import (
	"math"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/loss"
)

// lossArgs is struct LossP: the coefficients and window exactly as internal/loss computes
// them.
func lossArgs(kind loss.Kind, lambda float32, w, h int) abi.LossP {
	lam := float64(lambda)
	if kind == loss.MSE {
		lam = 0
	}
	n := float64(w * h * 3)
	pointCoef := (1 - lam) / n
	if kind != loss.L1SSIM {
		pointCoef *= 2
	}
	var kern [2*loss.WindowRadius + 1]float64
	var sum float64
	for i := range kern {
		d := float64(i - loss.WindowRadius)
		kern[i] = math.Exp(-d * d / (2 * loss.WindowSigma * loss.WindowSigma))
		sum += kern[i]
	}
	lp := abi.LossP{W: int32(w), H: int32(h), Kind: int32(kind), PointCoef: float32(pointCoef), SsimCoef: float32(-lam / n)}
	if kind.UsesSSIM() {
		lp.Ssim = 1
	}
	for i, k := range kern {
		lp.Kern[i] = float32(k / sum)
	}
	return lp
}

// lossTile is the edge of loss.cu's square tiles of output pixels (LOSS_TILE, declared once in
// internal/fused/abi/spec): one block of abi.LossMapBlock threads a tile.
const lossTile = abi.LossTile

// lossTiles is loss.cu's grid for a w×h image: its tiles, row by row.
func lossTiles(w, h int) int {
	return ((w + lossTile - 1) / lossTile) * ((h + lossTile - 1) / lossTile)
}

// maxLossTiles bounds lossTiles(w, h) over every w, h with w·h ≤ npx, so that growPixels can
// size the per-tile partial sums by the pixel count alone, as it does every other per-pixel
// buffer (and fits need not check them): if w ≤ 16, lossTiles is ⌈h/16⌉ ≤ ⌈npx/16⌉, and
// likewise for h ≤ 16; otherwise ⌈w/16⌉ < 2w/16 and ⌈h/16⌉ < 2h/16, so it is below npx/64.
func maxLossTiles(npx int) int { return (npx + lossTile - 1) / lossTile }

// loss launches loss.cu (design.md §5 step 5): the sums into the readout and dL/dimage into
// dImage. Three launches with SSIM (loss_map, loss_grad, loss_finish), two without.
func (e *Engine) loss(target gpu.Buffer, w, h int) error {
	tiles := uint32(lossTiles(w, h))
	lp := lossArgs(e.set.Loss, e.set.SSIMLambda, w, h)
	ro := e.ro
	if err := e.k.LossMap(gpu.Dim3{tiles}, gpu.Dim3{abi.LossMapBlock}, abi.LossMapArgs{Lp: lp, Readout: ro, Img: abi.B(e.image),
		Target: abi.B(target), Grad: abi.B(e.dImage), Dmap: abi.B(e.dmap), PartAbs: abi.B(e.partAbs),
		PartSq: abi.B(e.partSq), PartSsim: abi.B(e.partSSIM)}); err != nil {
		return err
	}
	if e.set.Loss.UsesSSIM() {
		if err := e.k.LossGrad(gpu.Dim3{tiles}, gpu.Dim3{abi.LossGradBlock}, abi.LossGradArgs{Lp: lp, Readout: ro, Dmap: abi.B(e.dmap),
			Img: abi.B(e.image), Target: abi.B(target), Grad: abi.B(e.dImage)}); err != nil {
			return err
		}
	}
	return e.k.LossFinish(gpu.Dim3{1}, gpu.Dim3{abi.LossFinishBlock}, abi.LossFinishArgs{PartAbs: abi.B(e.partAbs), PartSq: abi.B(e.partSq),
		PartSsim: abi.B(e.partSSIM), Blocks: tiles, Readout: ro})
}

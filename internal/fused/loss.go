package fused

import (
	"math"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/loss"
)

// lossBytes is struct LossP (shaders/loss.cu): the coefficients and window exactly as
// internal/loss computes them.
func lossBytes(kind loss.Kind, lambda float32, w, h int) []byte {
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
	var b words
	b.i32(int32(w))
	b.i32(int32(h))
	b.i32(int32(kind))
	ssim := int32(0)
	if kind.UsesSSIM() {
		ssim = 1
	}
	b.i32(ssim)
	b.f32(float32(pointCoef))
	b.f32(float32(-lam / n))
	for _, k := range kern {
		b.f32(float32(k / sum))
	}
	return b.b
}

// lossTile is the edge of loss.cu's square tiles of output pixels (TILE there): one block of
// 256 threads a tile.
const lossTile = 16

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
	lp := gpu.Bytes(lossBytes(e.set.Loss, e.set.SSIMLambda, w, h))
	ro := gpu.Ptr(e.readoutBuf)
	d := e.dev
	if err := d.Launch(e.k.lossMap, gpu.Dim3{tiles}, gpu.Dim3{256}, 0, lp, ro, gpu.Ptr(e.image), gpu.Ptr(target),
		gpu.Ptr(e.dImage), gpu.Ptr(e.dmap), gpu.Ptr(e.partAbs), gpu.Ptr(e.partSq), gpu.Ptr(e.partSSIM)); err != nil {
		return err
	}
	if e.set.Loss.UsesSSIM() {
		if err := d.Launch(e.k.lossGrad, gpu.Dim3{tiles}, gpu.Dim3{256}, 0, lp, ro, gpu.Ptr(e.dmap), gpu.Ptr(e.image),
			gpu.Ptr(target), gpu.Ptr(e.dImage)); err != nil {
			return err
		}
	}
	return d.Launch(e.k.lossFinish, gpu.Dim3{1}, gpu.Dim3{256}, 0, gpu.Ptr(e.partAbs), gpu.Ptr(e.partSq),
		gpu.Ptr(e.partSSIM), gpu.U32(tiles), ro)
}

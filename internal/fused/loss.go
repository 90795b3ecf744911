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

// loss launches loss.cu (design.md §5 step 5): the sums into the readout and dL/dimage into
// dImage.
func (e *Engine) loss(target gpu.Buffer, w, h int) error {
	npx := w * h
	blocks := uint32((npx + 255) / 256)
	lp := gpu.Bytes(lossBytes(e.set.Loss, e.set.SSIMLambda, w, h))
	ro := gpu.Ptr(e.readoutBuf)
	d := e.dev
	if err := d.Launch(e.k.lossPointwise, gpu.Dim3{blocks}, gpu.Dim3{256}, 0, lp, ro, gpu.Ptr(e.image), gpu.Ptr(target),
		gpu.Ptr(e.dImage), gpu.Ptr(e.hq), gpu.Ptr(e.partAbs), gpu.Ptr(e.partSq)); err != nil {
		return err
	}
	ssim := e.set.Loss.UsesSSIM()
	if ssim {
		if err := d.Launch(e.k.lossSSIM, gpu.Dim3{blocks}, gpu.Dim3{256}, 0, lp, ro, gpu.Ptr(e.hq), gpu.Ptr(e.dmap),
			gpu.U32(1), gpu.Ptr(e.partSSIM)); err != nil {
			return err
		}
		if err := d.Launch(e.k.lossSSIMDx, gpu.Dim3{blocks}, gpu.Dim3{256}, 0, lp, ro, gpu.Ptr(e.dmap), gpu.Ptr(e.hd)); err != nil {
			return err
		}
		if err := d.Launch(e.k.lossSSIMGrad, gpu.Dim3{blocks}, gpu.Dim3{256}, 0, lp, ro, gpu.Ptr(e.hd), gpu.Ptr(e.image),
			gpu.Ptr(target), gpu.Ptr(e.dImage)); err != nil {
			return err
		}
	}
	s := uint32(0)
	if ssim {
		s = 1
	}
	return d.Launch(e.k.lossFinish, gpu.Dim3{1}, gpu.Dim3{256}, 0, gpu.Ptr(e.partAbs), gpu.Ptr(e.partSq),
		gpu.Ptr(e.partSSIM), gpu.U32(blocks), gpu.U32(s), ro)
}

package loss

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// MaxPSNR caps PSNR, in dB. Identical images have an infinite PSNR; a finite
// cap keeps metrics.jsonl valid JSON (which has no Inf) and averages over
// test views meaningful. 100 dB is an MSE of 1e-10, far below what float32
// renders distinguish, so the cap never hides a real difference.
const MaxPSNR = 100

// PSNR returns 10·log10(1/MSE) in dB for images in [0,1] (peak value 1),
// capped at MaxPSNR. The images are used as given: evaluation code that
// follows the original 3DGS clamps the render to [0,1] first. A NaN in either
// image gives NaN.
func PSNR[F splat.Float](img, target []F) (float64, error) {
	if len(img) != len(target) {
		return 0, fmt.Errorf("loss: PSNR of images with %d and %d values", len(img), len(target))
	}
	if len(img) == 0 {
		return 0, fmt.Errorf("loss: PSNR of empty images")
	}
	var s float64
	for i := range img {
		d := float64(img[i]) - float64(target[i])
		s += d * d
	}
	mse := s / float64(len(img))
	if math.IsNaN(mse) {
		return math.NaN(), nil
	}
	if mse <= math.Pow(10, -MaxPSNR/10) {
		return MaxPSNR, nil
	}
	return 10 * math.Log10(1/mse), nil
}

// Clamp01 writes src clamped to [0,1] into dst (grown as needed) and returns it. A render
// is scored as an image, as the original 3DGS and gsplat score it: a pixel the splats push
// past white counts as white. NaN stays NaN, so that PSNR still reports it.
func Clamp01[F splat.Float](dst, src []F) []F {
	dst = append(dst[:0], src...)
	for i, v := range dst {
		if v < 0 {
			dst[i] = 0
		} else if v > 1 {
			dst[i] = 1
		}
	}
	return dst
}

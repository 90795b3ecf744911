// Package quant holds the byte quantisations that the splat file formats (internal/io/spz,
// internal/io/dotsplat) share, so that both round and clamp alike.
package quant

import (
	"math"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// alphaFloor keeps the opacities of alpha bytes 0 and 255 finite as logits: they decode
// 0.25/255 away from 0 and 1, within the half step every alpha byte carries, and encode back
// to the same byte.
const alphaFloor = 0.25 / 255

// Byte rounds v to the nearest integer and clamps it to 0..255 (NaN gives 0).
func Byte(v float64) byte {
	r := math.Round(v)
	switch {
	case r < 0 || math.IsNaN(r):
		return 0
	case r > 255:
		return 255
	}
	return byte(r)
}

// AlphaByte quantises an opacity logit as round(sigmoid·255): the opacity is within 0.5/255
// after a round trip through AlphaLogit.
func AlphaByte(logit float32) byte { return Byte(float64(splat.Sigmoid(logit)) * 255) }

// AlphaLogit is the opacity logit of alpha byte b, finite for every byte.
func AlphaLogit(b byte) float32 {
	a := min(max(float64(b)/255, alphaFloor), 1-alphaFloor)
	return float32(math.Log(a / (1 - a)))
}

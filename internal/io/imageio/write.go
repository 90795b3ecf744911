package imageio

import (
	"bufio"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
)

// Composite returns the image's colour over the background bg by its alpha,
// out = α·rgb + (1−α)·bg, as a new [H*W*3] slice. An opaque image (Alpha
// nil) returns a copy of RGB, so callers may always modify the result.
func (img Image) Composite(bg [3]float32) []float32 {
	out := make([]float32, len(img.RGB))
	copy(out, img.RGB)
	if img.Alpha == nil {
		return out
	}
	n := min(len(img.Alpha), len(out)/3)
	for i := 0; i < n; i++ {
		a := img.Alpha[i]
		for ch := 0; ch < 3; ch++ {
			out[3*i+ch] = a*out[3*i+ch] + (1-a)*bg[ch]
		}
	}
	return out
}

// SavePNG writes rgb ([h*w*3], nominally in [0,1]) as an opaque 8-bit PNG.
// Values are clamped to [0,1] (NaN becomes 0) and rounded to the nearest
// level. The file is written to a temporary file in the same directory,
// synced and renamed over path, so a crash never leaves a half-written
// image behind.
func SavePNG(path string, rgb []float32, w, h int) error {
	m, err := ToRGBA(rgb, w, h)
	if err != nil {
		return fmt.Errorf("imageio: %s: %w", path, err)
	}
	return WritePNG(path, m)
}

// ToRGBA converts rgb ([h*w*3], nominally in [0,1]) to an opaque 8-bit image as SavePNG
// writes it: clamped to [0,1], NaN as 0, rounded to the nearest level.
func ToRGBA(rgb []float32, w, h int) (*image.RGBA, error) {
	if w <= 0 || h <= 0 || w > MaxPixels/h {
		return nil, fmt.Errorf("image size %d×%d out of range", w, h)
	}
	if len(rgb) != w*h*3 {
		return nil, fmt.Errorf("%d×%d image needs %d RGB values, got %d", w, h, w*h*3, len(rgb))
	}
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		m.Pix[4*i] = quantize(rgb[3*i])
		m.Pix[4*i+1] = quantize(rgb[3*i+1])
		m.Pix[4*i+2] = quantize(rgb[3*i+2])
		m.Pix[4*i+3] = 0xff
	}
	return m, nil
}

// WritePNG encodes m as a PNG at path atomically, as SavePNG does.
func WritePNG(path string, m image.Image) error {
	err := atomicfile.Write(path, func(f io.Writer) error {
		bw := bufio.NewWriter(f)
		if err := png.Encode(bw, m); err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		return bw.Flush()
	}, nil)
	if err != nil {
		return fmt.Errorf("imageio: %s: %w", path, err)
	}
	return nil
}

func quantize(v float32) uint8 {
	if !(v > 0) { // also NaN
		return 0
	}
	if v >= 1 {
		return 255
	}
	return uint8(math.Floor(float64(v)*255 + 0.5))
}

package imageio

import (
	"fmt"
	"math"
)

// Resize returns img resampled to w×h by area averaging: every output pixel
// is the mean of the source area it covers, each source pixel weighted by
// the fraction of it inside that area. For integer factors (W = N·w) this is
// exactly the N×N box filter; otherwise the weights are fractional overlaps.
// Colour is averaged premultiplied by alpha, so that transparent pixels do
// not bleed their (meaningless) colour into the result; the output keeps an
// alpha channel when the input has one. Upsampling works too (each output
// pixel then takes the source pixels it overlaps), but the trainer only
// shrinks.
func Resize(img *Image, w, h int) (*Image, error) {
	if img == nil {
		return nil, fmt.Errorf("imageio: resize: nil image")
	}
	if err := img.check(); err != nil {
		return nil, err
	}
	if w <= 0 || h <= 0 || w > MaxPixels/h {
		return nil, fmt.Errorf("imageio: resize %d×%d to %d×%d: target size out of range", img.W, img.H, w, h)
	}
	if w == img.W && h == img.H {
		out := &Image{W: w, H: h, RGB: append([]float32(nil), img.RGB...)}
		if img.Alpha != nil {
			out.Alpha = append([]float32(nil), img.Alpha...)
		}
		return out, nil
	}
	if img.Alpha == nil {
		return &Image{W: w, H: h, RGB: resizePlanes(img.RGB, img.W, img.H, 3, w, h)}, nil
	}
	n := img.W * img.H
	pre := make([]float32, n*4)
	for i := 0; i < n; i++ {
		a := img.Alpha[i]
		pre[4*i] = img.RGB[3*i] * a
		pre[4*i+1] = img.RGB[3*i+1] * a
		pre[4*i+2] = img.RGB[3*i+2] * a
		pre[4*i+3] = a
	}
	res := resizePlanes(pre, img.W, img.H, 4, w, h)
	out := &Image{W: w, H: h, RGB: make([]float32, w*h*3), Alpha: make([]float32, w*h)}
	for i := 0; i < w*h; i++ {
		a := res[4*i+3]
		out.Alpha[i] = a
		setStraight(out.RGB[3*i:3*i+3], res[4*i], res[4*i+1], res[4*i+2], a)
	}
	return out, nil
}

// check verifies that the slices match the stated size.
func (img *Image) check() error {
	if img.W <= 0 || img.H <= 0 || img.W > MaxPixels/img.H {
		return fmt.Errorf("imageio: image size %d×%d out of range", img.W, img.H)
	}
	if len(img.RGB) != img.W*img.H*3 {
		return fmt.Errorf("imageio: %d×%d image holds %d RGB values, want %d", img.W, img.H, len(img.RGB), img.W*img.H*3)
	}
	if img.Alpha != nil && len(img.Alpha) != img.W*img.H {
		return fmt.Errorf("imageio: %d×%d image holds %d alpha values, want %d", img.W, img.H, len(img.Alpha), img.W*img.H)
	}
	return nil
}

// tap is the contribution of a run of source samples to one output sample.
type tap struct {
	first  int       // first source index
	weight []float64 // weights of source first, first+1, ...; they sum to 1
}

// axisTaps computes, for each of dst output samples along one axis, the
// overlap of its footprint [i·s, (i+1)·s) (s = src/dst, in source pixels)
// with each source pixel [j, j+1), divided by s.
func axisTaps(src, dst int) []tap {
	s := float64(src) / float64(dst)
	taps := make([]tap, dst)
	for i := range taps {
		lo := float64(i) * s
		hi := float64(i+1) * s
		if i == dst-1 {
			hi = float64(src) // no rounding gap at the far edge
		}
		first := int(math.Floor(lo))
		last := int(math.Ceil(hi)) - 1
		if last >= src {
			last = src - 1
		}
		if last < first {
			last = first
		}
		wts := make([]float64, last-first+1)
		sum := 0.0
		for j := first; j <= last; j++ {
			ov := math.Min(hi, float64(j+1)) - math.Max(lo, float64(j))
			if ov < 0 {
				ov = 0
			}
			wts[j-first] = ov
			sum += ov
		}
		// Normalising by the actual sum (equal to s up to rounding) keeps
		// a constant image exactly constant.
		for k := range wts {
			wts[k] /= sum
		}
		taps[i] = tap{first: first, weight: wts}
	}
	return taps
}

// resizePlanes resamples an interleaved [sh, sw, c] buffer to [dh, dw, c],
// first along x, then along y (the area filter is separable).
func resizePlanes(src []float32, sw, sh, c, dw, dh int) []float32 {
	tx := axisTaps(sw, dw)
	ty := axisTaps(sh, dh)
	tmp := make([]float32, sh*dw*c)
	acc := make([]float64, c)
	for y := 0; y < sh; y++ {
		srow := src[y*sw*c : (y+1)*sw*c]
		drow := tmp[y*dw*c : (y+1)*dw*c]
		for x, t := range tx {
			clear(acc)
			for k, wt := range t.weight {
				p := srow[(t.first+k)*c : (t.first+k+1)*c]
				for ch := range acc {
					acc[ch] += wt * float64(p[ch])
				}
			}
			for ch := range acc {
				drow[x*c+ch] = float32(acc[ch])
			}
		}
	}
	out := make([]float32, dh*dw*c)
	rowAcc := make([]float64, dw*c)
	for y, t := range ty {
		clear(rowAcc)
		for k, wt := range t.weight {
			srow := tmp[(t.first+k)*dw*c : (t.first+k+1)*dw*c]
			for i, v := range srow {
				rowAcc[i] += wt * float64(v)
			}
		}
		drow := out[y*dw*c : (y+1)*dw*c]
		for i, v := range rowAcc {
			drow[i] = float32(v)
		}
	}
	return out
}

// ResizePlane resamples one [sh, sw] plane (an alpha channel, say) to [dh, dw] with Resize's
// area filter.
func ResizePlane(p []float32, sw, sh, dw, dh int) ([]float32, error) {
	if sw <= 0 || sh <= 0 || len(p) != sw*sh {
		return nil, fmt.Errorf("imageio: resize plane: %d values for %d×%d", len(p), sw, sh)
	}
	if dw <= 0 || dh <= 0 || dw > MaxPixels/dh {
		return nil, fmt.Errorf("imageio: resize plane %d×%d to %d×%d: target size out of range", sw, sh, dw, dh)
	}
	return resizePlanes(p, sw, sh, 1, dw, dh), nil
}

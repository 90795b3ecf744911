package imageio

import "image"

// JPEG photos store their colour as Y'CbCr, the two chroma planes usually at half the width
// (4:2:2) or half the width and height (4:2:0). Go's decoder returns the planes as stored;
// how they are brought back to one sample a pixel is the decoder's choice, and it changes the
// photo the trainer fits: repeating each chroma sample over its 2×2 block (what
// image.YCbCr.At does) leaves a blocky colour pattern aligned with each photo's own pixel grid,
// which no multi-view scene can reproduce. The original 3DGS code and gsplat read photos with
// Pillow, that is libjpeg-turbo with its default "fancy" upsampling: each output sample
// weighs the two nearest input samples of each upsampled axis 3:1 (9/16, 3/16, 3/16, 1/16 for
// 4:2:0), with the image edges repeated. yccToRGB does the same arithmetic, rounding included,
// and converts with libjpeg's fixed-point JFIF equations, so that a photo decodes to the
// pixels those trainers train on. The IDCT is still Go's: on real photos the result agrees
// with libjpeg-turbo's djpeg within a few levels (TestYCbCrMatchesLibjpeg).

// yccToRGB writes src's pixels as RGB in [0,1] to rgb ([H*W*3], row-major) and reports whether
// it could: it handles the chroma layouts Go's JPEG decoder produces, for a rectangle that
// starts at the origin (a decoded image's).
func yccToRGB(src *image.YCbCr, rgb []float32) bool {
	// Each layout's chroma upsampling factors, horizontal and vertical.
	layouts := [...]struct {
		r      image.YCbCrSubsampleRatio
		fx, fy int
	}{
		{image.YCbCrSubsampleRatio444, 1, 1}, {image.YCbCrSubsampleRatio422, 2, 1},
		{image.YCbCrSubsampleRatio420, 2, 2}, {image.YCbCrSubsampleRatio440, 1, 2},
		{image.YCbCrSubsampleRatio411, 4, 1}, {image.YCbCrSubsampleRatio410, 4, 2},
	}
	fx, fy := 0, 0
	for _, l := range layouts {
		if l.r == src.SubsampleRatio {
			fx, fy = l.fx, l.fy
		}
	}
	if fx == 0 {
		return false
	}
	b := src.Rect
	if b.Min != (image.Point{}) {
		return false
	}
	w, h := b.Dx(), b.Dy()
	// The planes' sizes in samples (libjpeg's downsampled_width and _height).
	cw, ch := (w+fx-1)/fx, (h+fy-1)/fy
	if len(src.Y) < (h-1)*src.YStride+w || len(src.Cb) < (ch-1)*src.CStride+cw || len(src.Cr) < (ch-1)*src.CStride+cw {
		return false
	}
	up := chromaUpsampler{fx: fx, fy: fy, cw: cw, ch: ch, stride: src.CStride}
	cb := make([]int32, up.cw*fx)
	cr := make([]int32, up.cw*fx)
	sums := make([]int32, up.cw)
	for y := 0; y < h; y++ {
		up.row(src.Cb, y, cb, sums)
		up.row(src.Cr, y, cr, sums)
		lum := src.Y[y*src.YStride : y*src.YStride+w]
		o := rgb[y*w*3 : (y+1)*w*3]
		for x, yy := range lum {
			r, g, bl := jfifToRGB(int32(yy), cb[x], cr[x])
			o[3*x] = float32(r) / 255
			o[3*x+1] = float32(g) / 255
			o[3*x+2] = float32(bl) / 255
		}
	}
	return true
}

// chromaUpsampler brings one chroma plane to full size row by row, as libjpeg-turbo's
// decompressor does with fancy upsampling on (its default): the triangle filter for the 2×
// factors (h2v1, h1v2, h2v2), sample repetition for the others and for planes of at most two
// samples a row, where libjpeg does the same.
type chromaUpsampler struct {
	fx, fy int // upsampling factors
	cw, ch int // plane size in samples
	stride int // the plane's row stride
}

// row writes output row y of plane p into out ([cw·fx], of which the first w are the image's),
// with sums as scratch ([cw]).
func (u *chromaUpsampler) row(p []uint8, y int, out, sums []int32) {
	r := y / u.fy
	in0 := p[r*u.stride : r*u.stride+u.cw]
	fancyH := u.fx == 2 && u.cw > 2
	fancyV := u.fy == 2 && (u.fx == 1 || fancyH)
	if !fancyV {
		if fancyH {
			h2v1(in0, out)
			return
		}
		for x := range out {
			out[x] = int32(in0[x/u.fx])
		}
		return
	}
	// The nearer row weighs 3, the further 1: the row above for the upper output row of a
	// pair, the one below for the lower, each repeated at the image's top and bottom.
	v := y % 2
	r1 := r - 1
	if v == 1 {
		r1 = r + 1
	}
	r1 = min(max(r1, 0), u.ch-1)
	in1 := p[r1*u.stride : r1*u.stride+u.cw]
	for c := range sums {
		sums[c] = 3*int32(in0[c]) + int32(in1[c])
	}
	if u.fx == 1 { // h1v2: libjpeg rounds the upper row's sum with 1, the lower's with 2
		bias := int32(1 + v)
		for c, s := range sums {
			out[c] = (s + bias) >> 2
		}
		return
	}
	// h2v2: each output sample weighs its nearer column sum 3, the further 1; the edge
	// columns weigh their own sum 4. The biases 8 and 7 alternate, as libjpeg's do.
	n := len(sums)
	out[0] = (4*sums[0] + 8) >> 4
	out[1] = (3*sums[0] + sums[1] + 7) >> 4
	for c := 1; c < n-1; c++ {
		out[2*c] = (3*sums[c] + sums[c-1] + 8) >> 4
		out[2*c+1] = (3*sums[c] + sums[c+1] + 7) >> 4
	}
	out[2*n-2] = (3*sums[n-1] + sums[n-2] + 8) >> 4
	out[2*n-1] = (4*sums[n-1] + 7) >> 4
}

// h2v1 is the horizontal triangle filter of 4:2:2 (at least three samples): the edge samples
// are repeated, the others weigh the nearer input 3 and the further 1, rounded with 1 and 2.
func h2v1(in []uint8, out []int32) {
	n := len(in)
	out[0] = int32(in[0])
	out[1] = (3*int32(in[0]) + int32(in[1]) + 2) >> 2
	for c := 1; c < n-1; c++ {
		v := 3 * int32(in[c])
		out[2*c] = (v + int32(in[c-1]) + 1) >> 2
		out[2*c+1] = (v + int32(in[c+1]) + 2) >> 2
	}
	out[2*n-2] = (3*int32(in[n-1]) + int32(in[n-2]) + 1) >> 2
	out[2*n-1] = int32(in[n-1])
}

// jfifToRGB converts a JFIF Y'CbCr sample to 8-bit RGB with libjpeg's 16-bit fixed-point
// constants and rounding (the red and blue terms rounded on their own, green's two summed
// first), clamped to [0, 255].
func jfifToRGB(y, cb, cr int32) (r, g, b uint8) {
	const (
		half  = 1 << 15
		crR   = 91881  // round(1.40200 · 2¹⁶)
		cbB   = 116130 // round(1.77200 · 2¹⁶)
		crG   = 46802  // round(0.71414 · 2¹⁶)
		cbG   = 22554  // round(0.34414 · 2¹⁶)
		scale = 16
	)
	cb -= 128
	cr -= 128
	return clamp8(y + (crR*cr+half)>>scale), clamp8(y + (-cbG*cb-crG*cr+half)>>scale), clamp8(y + (cbB*cb+half)>>scale)
}

func clamp8(v int32) uint8 { return uint8(min(max(v, 0), 255)) }

package plot

import (
	"image"
	"image/color"
	"image/draw"

	"golang.org/x/image/font/basicfont"
)

// Layout of Pair: a label strip above the images and a caption strip below them, each one
// line of the 7×13 bitmap font with a little air, and a gap between the images.
const (
	stripH  = 18
	pairGap = 4
	textPad = 4
)

// Pair places left and right side by side, each under its label, with caption below both:
// a render beside its photo, the step and the PSNR. Text wider than the images is clipped.
// Images of different heights are top-aligned.
func Pair(left, right image.Image, leftLabel, rightLabel, caption string) *image.RGBA {
	lb, rb := left.Bounds(), right.Bounds()
	w := lb.Dx() + pairGap + rb.Dx()
	h := max(lb.Dy(), rb.Dy())
	img := image.NewRGBA(image.Rect(0, 0, w, stripH+h+stripH))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	lr := image.Rect(0, stripH, lb.Dx(), stripH+lb.Dy())
	rr := image.Rect(lb.Dx()+pairGap, stripH, w, stripH+rb.Dy())
	draw.Draw(img, lr, left, lb.Min, draw.Src)
	draw.Draw(img, rr, right, rb.Min, draw.Src)
	black := color.RGBA{0, 0, 0, 255}
	base := basicfont.Face7x13.Ascent + (stripH-basicfont.Face7x13.Height)/2
	centred := func(r image.Rectangle, s string) int {
		return max(r.Min.X+textPad, r.Min.X+(r.Dx()-textWidth(s))/2)
	}
	text(img, centred(lr, leftLabel), base, leftLabel, black)
	text(img, centred(rr, rightLabel), base, rightLabel, black)
	text(img, textPad, stripH+h+base, caption, black)
	return img
}

// textWidth is the width in pixels of s in the bitmap font (fixed advance per rune).
func textWidth(s string) int {
	return len([]rune(s)) * basicfont.Face7x13.Advance
}

package imageio

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
	"os"

	// Decoders register themselves with package image; Decode picks one by
	// the file's magic bytes.
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/bmp"
	_ "golang.org/x/image/tiff"
	_ "golang.org/x/image/webp"
)

// MaxPixels bounds the pixel count Decode accepts. Decoders allocate the
// whole raster from the header's size before reading any pixel data, so a
// corrupt or hostile header could otherwise ask for gigabytes. 2^27 pixels
// (about 11 600 × 11 600) is far above any photo a splat trainer uses.
const MaxPixels = 1 << 27

// Image is a decoded picture in row-major order, top row first.
type Image struct {
	W, H int
	// RGB holds the straight (not premultiplied) colour, [H*W*3] in [0,1].
	RGB []float32
	// Alpha holds the coverage, [H*W] in [0,1]; nil when the image is opaque.
	Alpha []float32
}

// Load reads and decodes the image file at path. The format is detected
// from the content. Errors name the path.
func Load(path string) (*Image, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		// *os.PathError already names the file.
		return nil, fmt.Errorf("imageio: %w", err)
	}
	return decode(data, path, MaxPixels)
}

// Decode decodes an encoded image held in memory; name is used in errors
// only (typically the file it came from).
func Decode(data []byte, name string) (*Image, error) {
	return decode(data, name, MaxPixels)
}

func decode(data []byte, name string, maxPixels int) (*Image, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, decodeError(name, format, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("imageio: %s: %s header gives an empty size %d×%d", name, format, cfg.Width, cfg.Height)
	}
	if cfg.Width > maxPixels/cfg.Height {
		return nil, fmt.Errorf("imageio: %s: %s header gives %d×%d pixels, more than the %d allowed", name, format, cfg.Width, cfg.Height, maxPixels)
	}
	m, format, err := safeDecode(data)
	if err != nil {
		return nil, decodeError(name, format, err)
	}
	b := m.Bounds()
	if b.Dx() <= 0 || b.Dy() <= 0 || b.Dx() > maxPixels/b.Dy() {
		return nil, fmt.Errorf("imageio: %s: decoded %s has an unusable size %d×%d", name, format, b.Dx(), b.Dy())
	}
	return fromImage(m), nil
}

// safeDecode runs the registered decoder and turns a decoder panic into an
// error: the decoders are third-party code fed with untrusted bytes, and a
// bad file must never take the trainer down.
func safeDecode(data []byte) (m image.Image, format string, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("decoder panicked: %v", r)
		}
	}()
	return image.Decode(bytes.NewReader(data))
}

func decodeError(name, format string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		if format == "" {
			format = "image"
		}
		return fmt.Errorf("imageio: %s: truncated %s data: %w", name, format, err)
	}
	// The standard decoders prefix their messages with the format
	// ("png: invalid format: ..."), image.ErrFormat with "image:".
	return fmt.Errorf("imageio: %s: %w", name, err)
}

// fromImage converts any decoded image to straight float RGB + alpha. The
// common decoder outputs have fast paths; everything else goes through the
// colour model, which is exact but slower.
func fromImage(m image.Image) *Image {
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	out := &Image{W: w, H: h, RGB: make([]float32, w*h*3)}
	var alpha []float32
	switch m.(type) {
	case *image.YCbCr, *image.Gray, *image.Gray16:
		// No alpha channel: skip the buffer.
	default:
		alpha = make([]float32, w*h)
	}
	opaque := true
	switch src := m.(type) {
	case *image.YCbCr:
		// JPEG: opaque. The chroma planes are upsampled as libjpeg does (ycc.go); the
		// per-block lookup below is for layouts it does not handle.
		if yccToRGB(src, out.RGB) {
			break
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				yi := src.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := src.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bl := color.YCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])
				o := (y*w + x) * 3
				out.RGB[o] = float32(r) / 255
				out.RGB[o+1] = float32(g) / 255
				out.RGB[o+2] = float32(bl) / 255
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride : y*src.Stride+w]
			for x, v := range row {
				f := float32(v) / 255
				o := (y*w + x) * 3
				out.RGB[o], out.RGB[o+1], out.RGB[o+2] = f, f, f
			}
		}
	case *image.Gray16:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride : y*src.Stride+2*w]
			for x := 0; x < w; x++ {
				f := float32(uint16(row[2*x])<<8|uint16(row[2*x+1])) / 65535
				o := (y*w + x) * 3
				out.RGB[o], out.RGB[o+1], out.RGB[o+2] = f, f, f
			}
		}
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride : y*src.Stride+4*w]
			for x := 0; x < w; x++ {
				p := row[4*x : 4*x+4]
				o := (y*w + x) * 3
				out.RGB[o] = float32(p[0]) / 255
				out.RGB[o+1] = float32(p[1]) / 255
				out.RGB[o+2] = float32(p[2]) / 255
				alpha[y*w+x] = float32(p[3]) / 255
				opaque = opaque && p[3] == 0xff
			}
		}
	case *image.RGBA:
		// Premultiplied: divide by alpha to get the straight colour.
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride : y*src.Stride+4*w]
			for x := 0; x < w; x++ {
				p := row[4*x : 4*x+4]
				o := (y*w + x) * 3
				a := float32(p[3])
				setStraight(out.RGB[o:o+3], float32(p[0]), float32(p[1]), float32(p[2]), a)
				alpha[y*w+x] = a / 255
				opaque = opaque && p[3] == 0xff
			}
		}
	case *image.NRGBA64:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride : y*src.Stride+8*w]
			for x := 0; x < w; x++ {
				p := row[8*x : 8*x+8]
				o := (y*w + x) * 3
				out.RGB[o] = float32(be16(p[0:])) / 65535
				out.RGB[o+1] = float32(be16(p[2:])) / 65535
				out.RGB[o+2] = float32(be16(p[4:])) / 65535
				a := be16(p[6:])
				alpha[y*w+x] = float32(a) / 65535
				opaque = opaque && a == 0xffff
			}
		}
	case *image.RGBA64:
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride : y*src.Stride+8*w]
			for x := 0; x < w; x++ {
				p := row[8*x : 8*x+8]
				o := (y*w + x) * 3
				a := be16(p[6:])
				setStraight(out.RGB[o:o+3], float32(be16(p[0:])), float32(be16(p[2:])), float32(be16(p[4:])), float32(a))
				alpha[y*w+x] = float32(a) / 65535
				opaque = opaque && a == 0xffff
			}
		}
	case *image.Paletted:
		// Palette entries converted once; indices past the palette are
		// treated as opaque black, as image.Paletted.At does.
		pal := make([][4]float32, len(src.Palette))
		palOpaque := make([]bool, len(src.Palette))
		for i, c := range src.Palette {
			pal[i], palOpaque[i] = straight(c)
		}
		for y := 0; y < h; y++ {
			row := src.Pix[y*src.Stride : y*src.Stride+w]
			for x, idx := range row {
				c, op := [4]float32{0, 0, 0, 1}, true
				if int(idx) < len(pal) {
					c, op = pal[idx], palOpaque[idx]
				}
				o := (y*w + x) * 3
				out.RGB[o], out.RGB[o+1], out.RGB[o+2] = c[0], c[1], c[2]
				alpha[y*w+x] = c[3]
				opaque = opaque && op
			}
		}
	default:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c, op := straight(m.At(b.Min.X+x, b.Min.Y+y))
				o := (y*w + x) * 3
				out.RGB[o], out.RGB[o+1], out.RGB[o+2] = c[0], c[1], c[2]
				alpha[y*w+x] = c[3]
				opaque = opaque && op
			}
		}
	}
	if !opaque {
		out.Alpha = alpha
	}
	return out
}

// straight converts any colour to straight RGBA in [0,1] through the
// 16-bit non-premultiplied model; op reports full opacity.
func straight(c color.Color) (v [4]float32, op bool) {
	n := color.NRGBA64Model.Convert(c).(color.NRGBA64)
	return [4]float32{
		float32(n.R) / 65535, float32(n.G) / 65535, float32(n.B) / 65535, float32(n.A) / 65535,
	}, n.A == 0xffff
}

// setStraight writes premultiplied (r,g,b) with alpha a (same scale) as
// straight colour in [0,1]. A fully transparent pixel has no colour; it
// gets black, which Composite never shows.
func setStraight(dst []float32, r, g, b, a float32) {
	if a == 0 {
		dst[0], dst[1], dst[2] = 0, 0, 0
		return
	}
	dst[0] = min(r/a, 1)
	dst[1] = min(g/a, 1)
	dst[2] = min(b/a, 1)
}

func be16(p []byte) uint16 { return uint16(p[0])<<8 | uint16(p[1]) }

package anim

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/gif"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
)

// FrameName is the file name of frame i in a frame directory: the pattern ffmpeg reads.
func FrameName(i int) string { return fmt.Sprintf("frame_%05d.png", i) }

const framePattern = "frame_%05d.png"

// maxSamples caps the pixels, spread evenly over all frames, that choose the palette.
const maxSamples = 1 << 18

// WriteGIF writes the n frames in dir (FrameName) as a looping GIF at fps frames per second.
// All frames share one 256-colour palette chosen by median cut over pixels of every frame:
// a palette per frame would make a colour that stays put in the scene change shade from one
// frame to the next, a flicker that an orbit shows at once. Pixels map to their nearest
// palette colour without dithering, which would crawl as the view turns.
func WriteGIF(path, dir string, n int, fps float64) error {
	if n < 1 {
		return fmt.Errorf("anim: %s: no frames", path)
	}
	if !(fps > 0) {
		return fmt.Errorf("anim: %s: %g frames per second, want > 0", path, fps)
	}
	var samples [][3]uint8
	var bounds image.Rectangle
	for i := 0; i < n; i++ {
		m, err := readFrame(dir, i)
		if err != nil {
			return fmt.Errorf("anim: %s: %w", path, err)
		}
		if i == 0 {
			bounds = m.Bounds()
		} else if m.Bounds() != bounds {
			return fmt.Errorf("anim: %s: frame %d is %v, frame 0 %v", path, i, m.Bounds(), bounds)
		}
		samples = sample(samples, m, max(1, bounds.Dx()*bounds.Dy()*n/maxSamples))
	}
	pal := MedianCut(samples, 256)
	lut := newLookup(pal)
	// GIF delays are in hundredths of a second.
	delay := max(1, int(math.Round(100/fps)))
	g := &gif.GIF{LoopCount: 0}
	for i := 0; i < n; i++ {
		m, err := readFrame(dir, i)
		if err != nil {
			return fmt.Errorf("anim: %s: %w", path, err)
		}
		g.Image = append(g.Image, lut.paletted(m, pal))
		g.Delay = append(g.Delay, delay)
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { return gif.EncodeAll(w, g) }, nil); err != nil {
		return fmt.Errorf("anim: %s: %w", path, err)
	}
	return nil
}

// readFrame decodes frame i of dir as RGBA.
func readFrame(dir string, i int) (*image.RGBA, error) {
	p := filepath.Join(dir, FrameName(i))
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if rgba, ok := m.(*image.RGBA); ok {
		return rgba, nil
	}
	rgba := image.NewRGBA(m.Bounds())
	draw.Draw(rgba, rgba.Bounds(), m, m.Bounds().Min, draw.Src)
	return rgba, nil
}

// sample appends every stride-th pixel of m to s.
func sample(s [][3]uint8, m *image.RGBA, stride int) [][3]uint8 {
	n := len(m.Pix) / 4
	for i := 0; i < n; i += stride {
		p := m.Pix[4*i : 4*i+3]
		s = append(s, [3]uint8{p[0], p[1], p[2]})
	}
	return s
}

// MedianCut chooses up to n colours for the samples: it splits the box of samples with the
// widest channel range at that channel's median until there are n boxes (or none can be
// split), and takes each box's mean colour.
func MedianCut(samples [][3]uint8, n int) color.Palette {
	if len(samples) == 0 {
		return color.Palette{color.RGBA{0, 0, 0, 255}}
	}
	boxes := [][][3]uint8{samples}
	for len(boxes) < n {
		best, bestCh, bestRange := -1, 0, 0
		for i, b := range boxes {
			if len(b) < 2 {
				continue
			}
			ch, r := widest(b)
			if r > bestRange {
				best, bestCh, bestRange = i, ch, r
			}
		}
		if best < 0 {
			break // every box holds one colour
		}
		b := boxes[best]
		sort.Slice(b, func(i, j int) bool { return b[i][bestCh] < b[j][bestCh] })
		mid := len(b) / 2
		// The cut falls between two different values, so that both halves are smaller boxes.
		for mid < len(b) && b[mid][bestCh] == b[mid-1][bestCh] {
			mid++
		}
		if mid == len(b) {
			mid = len(b) / 2
			for mid > 0 && b[mid][bestCh] == b[mid-1][bestCh] {
				mid--
			}
		}
		boxes[best] = b[:mid]
		boxes = append(boxes, b[mid:])
	}
	pal := make(color.Palette, 0, len(boxes))
	for _, b := range boxes {
		var sum [3]int
		for _, c := range b {
			sum[0] += int(c[0])
			sum[1] += int(c[1])
			sum[2] += int(c[2])
		}
		k := len(b)
		pal = append(pal, color.RGBA{uint8((sum[0] + k/2) / k), uint8((sum[1] + k/2) / k), uint8((sum[2] + k/2) / k), 255})
	}
	return pal
}

// widest returns the channel of b with the widest range, and that range.
func widest(b [][3]uint8) (int, int) {
	lo := [3]uint8{255, 255, 255}
	var hi [3]uint8
	for _, c := range b {
		for k := 0; k < 3; k++ {
			lo[k] = min(lo[k], c[k])
			hi[k] = max(hi[k], c[k])
		}
	}
	ch, r := 0, 0
	for k := 0; k < 3; k++ {
		if d := int(hi[k]) - int(lo[k]); d > r {
			ch, r = k, d
		}
	}
	return ch, r
}

// lookupBits is the precision per channel of the nearest-colour table: 6 bits (2^18 cells)
// keeps the table's own rounding below the palette's.
const lookupBits = 6

// lookup maps a colour, cut to lookupBits per channel, to its nearest palette index, so
// that mapping a frame costs one table read a pixel rather than a search of the palette.
type lookup []uint8

func newLookup(pal color.Palette) lookup {
	const cells = 1 << lookupBits
	lut := make(lookup, cells*cells*cells)
	rgb := make([][3]int, len(pal))
	for i, c := range pal {
		r, g, b, _ := c.RGBA()
		rgb[i] = [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
	}
	centre := func(v int) int { return v<<(8-lookupBits) + 1<<(7-lookupBits) }
	for r := 0; r < cells; r++ {
		for g := 0; g < cells; g++ {
			for b := 0; b < cells; b++ {
				cr, cg, cb := centre(r), centre(g), centre(b)
				best, bestD := 0, math.MaxInt
				for i, p := range rgb {
					dr, dg, db := cr-p[0], cg-p[1], cb-p[2]
					if d := dr*dr + dg*dg + db*db; d < bestD {
						best, bestD = i, d
					}
				}
				lut[(r*cells+g)*cells+b] = uint8(best)
			}
		}
	}
	return lut
}

func (l lookup) paletted(m *image.RGBA, pal color.Palette) *image.Paletted {
	b := m.Bounds()
	out := image.NewPaletted(image.Rect(0, 0, b.Dx(), b.Dy()), pal)
	const cells = 1 << lookupBits
	for y := 0; y < b.Dy(); y++ {
		row := m.Pix[y*m.Stride : y*m.Stride+4*b.Dx()]
		dst := out.Pix[y*out.Stride : y*out.Stride+b.Dx()]
		for x := range dst {
			p := row[4*x : 4*x+3]
			r, g, bl := int(p[0])>>(8-lookupBits), int(p[1])>>(8-lookupBits), int(p[2])>>(8-lookupBits)
			dst[x] = l[(r*cells+g)*cells+bl]
		}
	}
	return out
}

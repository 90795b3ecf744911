package plot

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"testing"
)

// A series is drawn in its colour, gaps (NaN) do not break the panel, and
// an empty panel says so instead of failing.
func TestDraw(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5}
	y := []float64{0.5, 0.3, math.NaN(), 0.1, 0.05}
	img := Draw([]Panel{
		{Title: "loss", XLabel: "step", LogY: true, Series: []Series{{Name: "loss", Color: Blue, X: x, Y: y}}},
		{Title: "empty"},
	})
	if img.Bounds().Dx() != 2*panelW || img.Bounds().Dy() != panelH {
		t.Fatalf("image %v", img.Bounds())
	}
	blue := 0
	for py := 0; py < panelH; py++ {
		for px := 0; px < panelW; px++ {
			if img.RGBAAt(px, py) == (color.RGBA{31, 119, 180, 255}) {
				blue++
			}
		}
	}
	if blue < 100 {
		t.Fatalf("only %d pixels of the series colour", blue)
	}
}

// Pair puts each image under its label, side by side, with the caption below: the images'
// pixels land where they belong, and each label and the caption leave ink in their strips.
func TestPair(t *testing.T) {
	solid := func(w, h int, c color.RGBA) *image.RGBA {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		draw.Draw(m, m.Bounds(), image.NewUniform(c), image.Point{}, draw.Src)
		return m
	}
	red, green := color.RGBA{255, 0, 0, 255}, color.RGBA{0, 255, 0, 255}
	for _, c := range []struct {
		name       string
		lw, rw, h  int
		caption    string
		wantW      int
		wantH      int
		inkCaption bool
	}{
		{"equal", 120, 120, 90, "step 1000   PSNR 25.31 dB", 244, 90 + 2*stripH, true},
		{"tiny, text clipped", 8, 8, 6, "step 5   PSNR 10.00 dB", 20, 6 + 2*stripH, true},
		{"no caption", 60, 60, 40, "", 124, 40 + 2*stripH, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := Pair(solid(c.lw, c.h, red), solid(c.rw, c.h, green), "render", "photo", c.caption)
			if img.Bounds().Dx() != c.wantW || img.Bounds().Dy() != c.wantH {
				t.Fatalf("size %v, want %d×%d", img.Bounds(), c.wantW, c.wantH)
			}
			if got := img.RGBAAt(c.lw/2, stripH+c.h/2); got != red {
				t.Errorf("left image centre %v", got)
			}
			if got := img.RGBAAt(c.lw+pairGap+c.rw/2, stripH+c.h/2); got != green {
				t.Errorf("right image centre %v", got)
			}
			ink := func(r image.Rectangle) int {
				n := 0
				for y := r.Min.Y; y < r.Max.Y; y++ {
					for x := r.Min.X; x < r.Max.X; x++ {
						if img.RGBAAt(x, y) == (color.RGBA{0, 0, 0, 255}) {
							n++
						}
					}
				}
				return n
			}
			if ink(image.Rect(0, 0, c.lw, stripH)) == 0 || ink(image.Rect(c.lw+pairGap, 0, c.wantW, stripH)) == 0 {
				t.Error("a label left no ink above its image")
			}
			if got := ink(image.Rect(0, stripH+c.h, c.wantW, c.wantH)) > 0; got != c.inkCaption {
				t.Errorf("caption ink %v, want %v", got, c.inkCaption)
			}
		})
	}
}

// The legend sits between the title and the plot area, never over the data: its colour
// appears above the plot area even when the data fill the area's top.
func TestLegendOffTheData(t *testing.T) {
	x := []float64{0, 1, 2, 3}
	y := []float64{1, 1, 1, 1} // a flat line: drawn across the middle of the area
	img := Draw([]Panel{{Title: "t", Series: []Series{{Name: "only", Color: Green, X: x, Y: y}}}})
	area := plotArea(img.Bounds())
	above := 0
	for py := 0; py < area.Min.Y; py++ {
		for px := 0; px < panelW; px++ {
			if img.RGBAAt(px, py) == Green {
				above++
			}
		}
	}
	if above == 0 {
		t.Error("no legend above the plot area")
	}
}

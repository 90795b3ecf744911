package plot

import (
	"image/color"
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

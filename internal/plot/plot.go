// Package plot draws simple line charts (training curves) into PNG images
// with nothing but the standard library and golang.org/x/image's bitmap
// font. It is not a general plotting library: one or more series over a
// shared x axis, each panel with its own y range.
package plot

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Series is one line of a panel.
type Series struct {
	Name  string
	Color color.RGBA
	X, Y  []float64 // NaN y values are gaps
	LogY  bool
}

// Panel is one chart with a title and its series.
type Panel struct {
	Title  string
	XLabel string
	Series []Series
	LogY   bool
}

// Colours used by callers for consistent series.
var (
	Blue   = color.RGBA{31, 119, 180, 255}
	Orange = color.RGBA{255, 127, 14, 255}
	Green  = color.RGBA{44, 160, 44, 255}
	// Light variants for raw data drawn under its smoothed line.
	LightBlue   = color.RGBA{174, 199, 232, 255}
	LightOrange = color.RGBA{255, 187, 120, 255}
)

const (
	panelW, panelH = 560, 320
	marginL        = 64
	marginR        = 16
	marginT        = 28
	marginB        = 40
)

// Draw renders the panels side by side.
func Draw(panels []Panel) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, panelW*len(panels), panelH))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	for i, p := range panels {
		drawPanel(img, image.Rect(i*panelW, 0, (i+1)*panelW, panelH), p)
	}
	return img
}

func drawPanel(img *image.RGBA, r image.Rectangle, p Panel) {
	plotR := image.Rect(r.Min.X+marginL, r.Min.Y+marginT, r.Max.X-marginR, r.Max.Y-marginB)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	tr := func(y float64) float64 {
		if p.LogY {
			return math.Log10(y)
		}
		return y
	}
	for _, s := range p.Series {
		for j := range s.X {
			y := tr(s.Y[j])
			if math.IsNaN(y) || math.IsInf(y, 0) {
				continue
			}
			xmin, xmax = math.Min(xmin, s.X[j]), math.Max(xmax, s.X[j])
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
		}
	}
	grey := color.RGBA{200, 200, 200, 255}
	black := color.RGBA{0, 0, 0, 255}
	text(img, r.Min.X+marginL, r.Min.Y+18, p.Title, black)
	if math.IsInf(xmin, 0) {
		text(img, plotR.Min.X+10, plotR.Min.Y+20, "no data", black)
		return
	}
	if xmin > 0 && xmin <= 1 {
		xmin = 0 // steps start at 1: round the axis to 0 so ticks fall on round numbers
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ymax == ymin {
		ymin, ymax = ymin-0.5, ymax+0.5
	}
	pad := 0.05 * (ymax - ymin)
	ymin, ymax = ymin-pad, ymax+pad
	px := func(x float64) int {
		return plotR.Min.X + int(math.Round((x-xmin)/(xmax-xmin)*float64(plotR.Dx()-1)))
	}
	py := func(y float64) int {
		return plotR.Max.Y - 1 - int(math.Round((y-ymin)/(ymax-ymin)*float64(plotR.Dy()-1)))
	}
	// Grid and tick labels.
	for k := 0; k <= 4; k++ {
		y := ymin + (ymax-ymin)*float64(k)/4
		yy := py(y)
		hline(img, plotR.Min.X, plotR.Max.X, yy, grey)
		lbl := y
		if p.LogY {
			lbl = math.Pow(10, y)
		}
		text(img, r.Min.X+4, yy+4, short(lbl), black)
		x := xmin + (xmax-xmin)*float64(k)/4
		xx := px(x)
		vline(img, xx, plotR.Min.Y, plotR.Max.Y, grey)
		text(img, xx-12, plotR.Max.Y+16, strconv.FormatFloat(math.Round(x), 'f', 0, 64), black)
	}
	text(img, plotR.Min.X+plotR.Dx()/2-20, r.Max.Y-6, p.XLabel, black)
	// Series and legend.
	for si, s := range p.Series {
		prevOK := false
		var x0, y0 int
		for j := range s.X {
			y := tr(s.Y[j])
			if math.IsNaN(y) || math.IsInf(y, 0) {
				continue // gaps in a series are skipped, the line joins the valid points
			}
			x1, y1 := px(s.X[j]), py(y)
			if prevOK {
				line(img, x0, y0, x1, y1, s.Color)
			} else {
				dot(img, x1, y1, s.Color)
			}
			x0, y0, prevOK = x1, y1, true
		}
		lx := plotR.Max.X - 150
		ly := plotR.Min.Y + 14 + 14*si
		hline(img, lx, lx+18, ly-4, s.Color)
		text(img, lx+24, ly, s.Name, black)
	}
	rect(img, plotR, black)
}

func short(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 0.01:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return fmt.Sprintf("%.1e", v)
	}
}

func text(img *image.RGBA, x, y int, s string, c color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	for x := x0; x < x1; x++ {
		img.SetRGBA(x, y, c)
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	for y := y0; y < y1; y++ {
		img.SetRGBA(x, y, c)
	}
}

func rect(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	hline(img, r.Min.X, r.Max.X, r.Min.Y, c)
	hline(img, r.Min.X, r.Max.X, r.Max.Y-1, c)
	vline(img, r.Min.X, r.Min.Y, r.Max.Y, c)
	vline(img, r.Max.X-1, r.Min.Y, r.Max.Y, c)
}

func dot(img *image.RGBA, x, y int, c color.RGBA) {
	for dy := -1; dy <= 1; dy++ {
		for dx := -1; dx <= 1; dx++ {
			img.SetRGBA(x+dx, y+dy, c)
		}
	}
}

// line draws a 2-px Bresenham line.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	err := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		img.SetRGBA(x0, y0+1, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * err
		if e2 >= dy {
			err += dy
			x0 += sx
		}
		if e2 <= dx {
			err += dx
			y0 += sy
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

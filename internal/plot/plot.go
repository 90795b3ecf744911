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
	panelW, panelH = 560, 340
	marginL        = 64
	marginR        = 16
	// marginT holds the title and, below it, the legend: a legend inside the plot area
	// covers data wherever it is put.
	marginT = 48
	marginB = 40
	titleY  = 16 // baseline of the title, from the panel's top
	legendY = 36 // baseline of the legend row
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

// plotArea is the rectangle of a panel's data.
func plotArea(r image.Rectangle) image.Rectangle {
	return image.Rect(r.Min.X+marginL, r.Min.Y+marginT, r.Max.X-marginR, r.Max.Y-marginB)
}

func drawPanel(img *image.RGBA, r image.Rectangle, p Panel) {
	plotR := plotArea(r)
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
	text(img, r.Min.X+marginL, r.Min.Y+titleY, p.Title, black)
	drawLegend(img, r, p.Series)
	if math.IsInf(xmin, 0) {
		text(img, plotR.Min.X+10, plotR.Min.Y+20, "no data", black)
		rect(img, plotR, black)
		return
	}
	if xmin > 0 && xmin <= 1 {
		xmin = 0 // steps start at 1: the axis starts at 0, a round number
	}
	// The axes span whole tick intervals, so that the first and last ticks sit on the frame.
	xt := linearTicks(xmin, xmax)
	xmin, xmax = xt[0], xt[len(xt)-1]
	var yt []float64 // in the plotted (log10 when LogY) space
	if p.LogY {
		yt = logTicks(ymin, ymax)
	} else {
		yt = linearTicks(ymin, ymax)
	}
	ymin, ymax = yt[0], yt[len(yt)-1]
	px := func(x float64) int {
		return plotR.Min.X + int(math.Round((x-xmin)/(xmax-xmin)*float64(plotR.Dx()-1)))
	}
	py := func(y float64) int {
		return plotR.Max.Y - 1 - int(math.Round((y-ymin)/(ymax-ymin)*float64(plotR.Dy()-1)))
	}
	for _, y := range yt {
		yy := py(y)
		hline(img, plotR.Min.X, plotR.Max.X, yy, grey)
		lbl := tickLabel(y, yt)
		if p.LogY {
			lbl = logTickLabel(y)
		}
		text(img, plotR.Min.X-6-textWidth(lbl), yy+4, lbl, black)
	}
	for _, x := range xt {
		xx := px(x)
		vline(img, xx, plotR.Min.Y, plotR.Max.Y, grey)
		lbl := tickLabel(x, xt)
		text(img, xx-textWidth(lbl)/2, plotR.Max.Y+16, lbl, black)
	}
	text(img, plotR.Min.X+plotR.Dx()/2-textWidth(p.XLabel)/2, r.Max.Y-6, p.XLabel, black)
	for _, s := range p.Series {
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
	}
	rect(img, plotR, black)
}

// drawLegend writes the series' names in one row between the title and the plot area.
func drawLegend(img *image.RGBA, r image.Rectangle, series []Series) {
	black := color.RGBA{0, 0, 0, 255}
	x := r.Min.X + marginL
	for _, s := range series {
		hline(img, x, x+18, r.Min.Y+legendY-4, s.Color)
		hline(img, x, x+18, r.Min.Y+legendY-3, s.Color)
		text(img, x+24, r.Min.Y+legendY, s.Name, black)
		x += 24 + textWidth(s.Name) + 16
	}
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

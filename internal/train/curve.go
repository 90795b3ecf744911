package train

import (
	"bytes"
	"fmt"
	"image/png"

	"github.com/rlxsplat/rlxsplat/internal/plot"
)

// writeCurve draws the training loss and the train/test PSNR against the
// step into a PNG.
func writeCurve(path string, pts []curvePoint) error {
	var steps, lossY, psnrY, testX, testY []float64
	for _, p := range pts {
		steps = append(steps, float64(p.Step))
		lossY = append(lossY, p.Loss)
		psnrY = append(psnrY, p.PSNR)
		if p.TestPSNR == p.TestPSNR { // not NaN
			testX = append(testX, float64(p.Step))
			testY = append(testY, p.TestPSNR)
		}
	}
	// Each point is one training view, so the raw curves are noisy; the smoothed ones show
	// the trend over a window that is a fixed fraction of the run (see smooth).
	span := smoothSpan(len(steps))
	img := plot.Draw([]plot.Panel{
		{Title: "training loss", XLabel: "step", LogY: true, Series: []plot.Series{
			{Name: "loss", Color: plot.LightBlue, X: steps, Y: lossY},
			{Name: "smoothed", Color: plot.Blue, X: steps, Y: smooth(lossY, span)},
		}},
		{Title: "PSNR (dB)", XLabel: "step", Series: []plot.Series{
			{Name: "train view", Color: plot.LightOrange, X: steps, Y: psnrY},
			{Name: "smoothed", Color: plot.Orange, X: steps, Y: smooth(psnrY, span)},
			{Name: "evaluation", Color: plot.Green, X: testX, Y: testY},
		}},
	})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return fmt.Errorf("train: encoding the training curve: %w", err)
	}
	return writeFileAtomic(path, buf.Bytes())
}

// smoothFraction is the smoothing window as a fraction of the run's logged points.
const smoothFraction = 1.0 / 40

// smoothSpan is the smoothing window, in points, for a curve of n points: a fixed fraction of
// the run, so that the smoothed line lags the data by the same small part of the x axis
// (about 2.5%) on a 300-step run as on a 30 000-step one. A fixed window of 20 points (the
// earlier choice) lagged a third of the axis behind a 60-point run.
func smoothSpan(n int) float64 {
	return max(1, smoothFraction*float64(n))
}

// smooth is an exponential moving average over a window of span points (weight
// a = 1/span of each new point), skipping NaNs, with the bias correction of Adam and
// TensorBoard: each output is the weighted mean of the points so far, the weights
// (1−a)^age normalised by their sum 1−(1−a)^k. Without it the first outputs lean on
// whatever the average started from; seeding it with the first point instead gives that
// one noisy point the weight of a whole window. The EMA rather than a centred window: it
// needs no points after the last, so the line runs to the end of the data.
func smooth(y []float64, span float64) []float64 {
	a := 1 / max(span, 1)
	out := make([]float64, len(y))
	m, decay := 0.0, 1.0 // decay = (1−a)^k after k points
	for i, v := range y {
		if v != v {
			out[i] = v
			continue
		}
		m = (1-a)*m + a*v
		decay *= 1 - a // < 1 after the first point, as a > 0
		out[i] = m / (1 - decay)
	}
	return out
}

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
	// Each point is one training view, so the raw curves are noisy; the
	// smoothed ones (an exponential moving average over ~20 points) show the
	// trend.
	img := plot.Draw([]plot.Panel{
		{Title: "training loss", XLabel: "step", LogY: true, Series: []plot.Series{
			{Name: "loss", Color: plot.LightBlue, X: steps, Y: lossY},
			{Name: "smoothed", Color: plot.Blue, X: steps, Y: smooth(lossY, 0.05)},
		}},
		{Title: "PSNR (dB)", XLabel: "step", Series: []plot.Series{
			{Name: "train view", Color: plot.LightOrange, X: steps, Y: psnrY},
			{Name: "smoothed", Color: plot.Orange, X: steps, Y: smooth(psnrY, 0.05)},
			{Name: "evaluation", Color: plot.Green, X: testX, Y: testY},
		}},
	})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return fmt.Errorf("train: encoding the training curve: %w", err)
	}
	return writeFileAtomic(path, buf.Bytes())
}

// smooth is an exponential moving average with weight a, skipping NaNs.
func smooth(y []float64, a float64) []float64 {
	out := make([]float64, len(y))
	m, ok := 0.0, false
	for i, v := range y {
		if v != v {
			out[i] = v
			continue
		}
		if !ok {
			m, ok = v, true
		} else {
			m += a * (v - m)
		}
		out[i] = m
	}
	return out
}

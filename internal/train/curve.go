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
	img := plot.Draw([]plot.Panel{
		{Title: "training loss", XLabel: "step", LogY: true, Series: []plot.Series{{Name: "loss", Color: plot.Blue, X: steps, Y: lossY}}},
		{Title: "PSNR (dB)", XLabel: "step", Series: []plot.Series{
			{Name: "train view", Color: plot.Orange, X: steps, Y: psnrY},
			{Name: "evaluation", Color: plot.Green, X: testX, Y: testY},
		}},
	})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return fmt.Errorf("train: encoding the training curve: %w", err)
	}
	return writeFileAtomic(path, buf.Bytes())
}

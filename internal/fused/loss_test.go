package fused

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/loss"
)

// TestLossStageSizes runs the loss stage alone, for every loss kind, on image sizes around
// loss.cu's 16×16 tiles and the SSIM window's radius of 5: smaller than a tile or the radius
// either way, exact and inexact multiples of the tile, several tiles each way. The pixel
// gradient must be the CPU engine's bit for bit (the tile borders and the image borders are
// where a tiled filter would go wrong), the three two-float sums the CPU's up to summation
// order. With the abort flag set, the stage must write neither.
func TestLossStageSizes(t *testing.T) {
	dev, _ := testDevice(t)
	g, _ := RandomScene(3, 10, 16, 16)
	// Sizes grow and shrink, so that some run in buffers sized for a larger image of another
	// shape (the per-tile partial sums must still fit).
	sizes := [][2]int{{1, 1}, {3, 17}, {40, 7}, {33, 2}, {16, 32}, {1, 47}, {17, 33}, {131, 67}, {2, 90}}
	for _, kind := range []loss.Kind{loss.L1SSIM, loss.MSE, loss.MSESSIM} {
		set := engine.DefaultSettings()
		set.Loss = kind
		fe, err := newOnDevice(dev, set, g)
		if err != nil {
			t.Fatal(err)
		}
		fe.useView(0, 0, nil)
		for si, sz := range sizes {
			w, h := sz[0], sz[1]
			t.Run(fmt.Sprintf("%v/%dx%d", kind, w, h), func(t *testing.T) {
				checkLossStage(t, fe, uint64(si), w, h)
			})
		}
		if err := fe.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkLossStage runs fe's loss stage on a random w×h image and target and compares it with
// internal/loss.
func checkLossStage(t *testing.T, fe *Engine, seed uint64, w, h int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seedTarget, 100+seed))
	npx := w * h
	img, tgt := make([]float32, npx*3), make([]float32, npx*3)
	for i := range img {
		img[i], tgt[i] = rng.Float32(), rng.Float32()
		if rng.IntN(8) == 0 {
			tgt[i] = img[i] // L1's gradient at a tie is 0
		}
	}
	set := fe.set
	ev, err := loss.NewEvaluator(w, h, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, npx*3)
	res, err := ev.Loss(set.Loss, set.SSIMLambda, img, tgt, want)
	if err != nil {
		t.Fatal(err)
	}

	if err := fe.growPixels(w, h); err != nil {
		t.Fatal(err)
	}
	poison(t, fe)
	if err := gpu.UploadF32(fe.dev, fe.image, img); err != nil {
		t.Fatal(err)
	}
	tbuf, err := fe.targetBuffer(&engine.View{Index: 0, Target: tgt})
	if err != nil {
		t.Fatal(err)
	}
	run := func(ro []uint32) ([]float32, readout) {
		t.Helper()
		if err := gpu.UploadSlice(fe.dev, fe.ro.B, 0, ro); err != nil {
			t.Fatal(err)
		}
		if err := fe.loss(tbuf, w, h); err != nil {
			t.Fatal(err)
		}
		var back readout
		copy(back[:], dl[uint32](t, fe, fe.ro.B, roWords))
		return dl[float32](t, fe, fe.dImage, npx*3), back
	}

	// Aborted: nothing written. The loss words hold a marker the stage would overwrite.
	var ro [roWords]uint32
	ro[roAbort] = 1
	for wd := roL1; wd < roSSIM+2; wd++ {
		ro[wd] = 0x12345678
	}
	gotAbort, back := run(ro[:])
	for i, v := range gotAbort {
		if math.Float32bits(v) != 0xFFFFFFFF {
			t.Fatalf("aborted: d image[%d] = %v, want the poison left alone", i, v)
		}
	}
	if back != ro {
		t.Fatalf("aborted: readout %x, want %x unchanged", back, ro)
	}

	ro = [roWords]uint32{}
	got, back := run(ro[:])
	bad := 0
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 5 {
				t.Errorf("d image[%d] (pixel %d,%d channel %d) = %.9g (%#x), cpu %.9g (%#x)", i, i/3%w, i/3/w, i%3,
					got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d gradient values differ from the cpu's", bad, len(got))
	}
	n := float64(npx * 3)
	ssim := res.SSIM
	if !set.Loss.UsesSSIM() {
		ssim = 0 // loss_map writes zero partials without SSIM
	}
	for _, s := range []struct {
		name      string
		got, want float64
	}{{"l1", back.sum(roL1) / n, res.L1}, {"mse", back.sum(roSq) / n, res.MSE}, {"ssim", back.sum(roSSIM) / n, ssim}} {
		if d := math.Abs(s.got - s.want); !(d <= 1e-12*max(1, math.Abs(s.want))) {
			t.Errorf("%s %.17g, cpu %.17g", s.name, s.got, s.want)
		}
	}
}

// TestMaxLossTiles checks the bound growPixels sizes loss.cu's partial sums by: no image of at
// most npx pixels, whatever its shape, has more tiles.
func TestMaxLossTiles(t *testing.T) {
	for w := 1; w <= 300; w++ {
		for h := 1; h <= 300; h++ {
			if n, b := lossTiles(w, h), maxLossTiles(w*h); n > b {
				t.Fatalf("%d×%d: %d tiles, bound %d", w, h, n, b)
			}
		}
	}
}

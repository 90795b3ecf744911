package raster

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/prep"
)

const seedBench = 31337

// benchSplats is the scene size of the benchmarks (a small-to-medium
// training scene).
const benchSplats = 50_000

var benchSizes = []struct{ w, h int }{{200, 200}, {800, 532}}

// benchScenes caches the (slow to build) benchmark scenes by model and size.
var benchScenes sync.Map

// benchScene is benchSplats random splats binned at the production cutoff,
// with screen sizes that scale with the image (as one scene rendered at two
// resolutions would): σ from 0.5 to 4 px at 200 px wide.
func benchScene(m prep.Model, w, h int) *testScene {
	key := fmt.Sprintf("%v/%dx%d", m, w, h)
	if s, ok := benchScenes.Load(key); ok {
		return s.(*testScene)
	}
	k := float64(w) / 200
	s := genScene(seedBench, genOpts{model: m, n: benchSplats, w: w, h: h, tile: 16,
		opMin: 0.02, opMax: 0.95, sigMin: 0.5 * k, sigMax: 4 * k, tight: true, alphaMin: prep.AlphaMin})
	benchScenes.Store(key, s)
	return s
}

// checkImage fails the benchmark when the image is not finite or shows no
// splats, so that a broken rasterizer is not timed.
func checkImage(b *testing.B, f *Frame[float32], fw *Forward[float32]) {
	covered := 0
	for p, t := range fw.FinalT {
		for c := 0; c < 3; c++ {
			if v := fw.Image[3*p+c]; math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				b.Fatalf("pixel %d is %v", p, v)
			}
		}
		if t < 0.5 {
			covered++
		}
	}
	if covered < len(fw.FinalT)/2 {
		b.Fatalf("only %d of %d pixels covered", covered, len(fw.FinalT))
	}
}

func benchRaster(b *testing.B, m prep.Model, backward bool) {
	for _, sz := range benchSizes {
		b.Run(fmt.Sprintf("%dx%d", sz.w, sz.h), func(b *testing.B) {
			s := benchScene(m, sz.w, sz.h)
			f := frameOf[float32](s, 0, 0, runtime.GOMAXPROCS(0))
			var r Rasterizer[float32]
			var fw Forward[float32]
			if err := r.Render(f, &fw); err != nil {
				b.Fatal(err)
			}
			checkImage(b, f, &fw)
			dImage := convert[float32](randomDImage(3 * sz.w * sz.h))
			g := prep.NewPrepGrads[float32](m, s.proj.N)
			if backward {
				if err := r.Backward(f, &fw, dImage, g, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if backward {
					_ = r.Backward(f, &fw, dImage, g, nil)
				} else {
					_ = r.Render(f, &fw)
				}
			}
			ms := float64(b.Elapsed().Microseconds()) / 1e3 / float64(b.N)
			b.ReportMetric(ms, "ms/frame")
			b.ReportMetric(float64(len(s.lists.IDs))/ms/1e3, "Mentries/s")
		})
	}
}

// BenchmarkRenderEWA times the EWA forward (GOMAXPROCS workers).
func BenchmarkRenderEWA(b *testing.B) { benchRaster(b, prep.EWA, false) }

// BenchmarkRenderRay times the ray-model forward.
func BenchmarkRenderRay(b *testing.B) { benchRaster(b, prep.Ray, false) }

// BenchmarkBackwardEWA times the EWA backward (the forward is not timed).
func BenchmarkBackwardEWA(b *testing.B) { benchRaster(b, prep.EWA, true) }

// BenchmarkBackwardRay times the ray-model backward.
func BenchmarkBackwardRay(b *testing.B) { benchRaster(b, prep.Ray, true) }

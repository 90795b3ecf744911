package viewer_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rlxsplat/rlxsplat/internal/splattest"
	"github.com/rlxsplat/rlxsplat/internal/viewer"
)

// BenchmarkBrowserFPS measures the page's frames per second in headless Chromium (SwiftShader,
// software WebGL2) on a 1280×720 canvas while the camera orbits (so the worker re-sorts):
//
//	go test -run '^$' -bench BrowserFPS -benchtime 1x ./internal/viewer
//
// The scenes are random splats of SH degree 3 with small scales (log scale −4 ± …), so most
// are a few pixels wide, as in a trained scene.
func BenchmarkBrowserFPS(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("splats=%d", n), func(b *testing.B) {
			g := splattest.RandomScene(5, n, 3, 1)
			for i := range g.LogScales {
				g.LogScales[i] = g.LogScales[i]/6 - 5 // about e^-7..e^-4: small splats
			}
			for i := range g.Means {
				g.Means[i] /= 20 // ±5 units
			}
			srv := viewer.New(viewer.Options{Title: "bench", Loopback: true})
			if err := srv.SetScene(g, 3); err != nil {
				b.Fatal(err)
			}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			ctx := newBrowser(b, 1280, 720)
			openPage(b, ctx, hs.URL+"/")
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`rlx.setView({width: 1280, height: 720, k: [700, 700, 640, 360], r: [1,0,0, 0,1,0, 0,0,1], t: [0, 0, 12]}).then(() => true)`, chromedp.EvalAwaitPromise)); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var fps float64
			for i := 0; i < b.N; i++ {
				v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`rlx.fps(5000)`, chromedp.EvalAwaitPromise))
				if err != nil {
					b.Fatal(err)
				}
				fps = v
			}
			b.ReportMetric(fps, "fps")
		})
	}
}

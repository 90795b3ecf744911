package viewer_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/viewer"
)

// The browser tests drive Debian's chromium headless through the DevTools protocol. WebGL2
// there runs on SwiftShader (software), so they need no GPU.

// browserPath finds a Chromium; the tests skip, saying why, without one.
func browserPath(t testing.TB) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH (Debian: apt-get install chromium): the browser tests need one")
	return ""
}

// newBrowser starts a fresh headless Chromium with its own profile and returns a tab context.
func newBrowser(t testing.TB, width, height int) context.Context {
	path := browserPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// WebGL on the software rasterizer: without these a GPU-less Chromium refuses WebGL.
		chromedp.Flag("use-angle", "swiftshader"),
		chromedp.Flag("enable-unsafe-swiftshader", true),
		chromedp.WindowSize(width, height),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancel3)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// openPage loads url and waits until the page has its scene (or reports its error).
func openPage(t testing.TB, ctx context.Context, url string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		st, err := chromedp.Run(ctx, chromedp.Evaluate[pageStatus](`window.rlx ? rlx.status() : {}`))
		if err != nil {
			t.Fatalf("page status: %v", err)
		}
		if st.Error != "" {
			t.Fatalf("the page failed: %s", st.Error)
		}
		if st.Ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the page did not load its scene in 3 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type pageStatus struct {
	Ready  bool   `json:"ready"`
	Splats int    `json:"splats"`
	Curve  int    `json:"curve"`
	Error  string `json:"error"`
}

type capture struct {
	Width  int    `json:"width"`
	Height int    `json:"height"`
	RGBA   string `json:"rgba"`
}

// viewOf shows cam on the page and returns the canvas's pixels as RGB in [0,1].
func viewOf(t testing.TB, ctx context.Context, cam *camera.Camera) []float32 {
	t.Helper()
	r := make([]float64, 9)
	for a := 0; a < 3; a++ {
		copy(r[3*a:], cam.R[a][:])
	}
	v := map[string]any{"width": cam.Width, "height": cam.Height, "k": []float64{cam.Fx, cam.Fy, cam.Cx, cam.Cy}, "r": r, "t": cam.T[:]}
	js, err := jsonString(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`rlx.setView(`+js+`).then(() => true)`, chromedp.EvalAwaitPromise)); err != nil {
		t.Fatalf("setting the view: %v", err)
	}
	c, err := chromedp.Run(ctx, chromedp.Evaluate[capture](`rlx.capture()`))
	if err != nil {
		t.Fatalf("capturing the view: %v", err)
	}
	if c.Width != cam.Width || c.Height != cam.Height {
		t.Fatalf("canvas is %d×%d, want %d×%d", c.Width, c.Height, cam.Width, cam.Height)
	}
	px, err := base64.StdEncoding.DecodeString(c.RGBA)
	if err != nil || len(px) != 4*c.Width*c.Height {
		t.Fatalf("capture: %d bytes, %v", len(px), err)
	}
	out := make([]float32, 3*c.Width*c.Height)
	for i := 0; i < c.Width*c.Height; i++ {
		for ch := 0; ch < 3; ch++ {
			out[3*i+ch] = float32(px[4*i+ch]) / 255
		}
	}
	return out
}

// psnr8 is the PSNR between two images after both are rounded to bytes, as the canvas is.
func psnr8(a, b []float32) float64 {
	var se float64
	for i := range a {
		d := float64(byte8(a[i])) - float64(byte8(b[i]))
		se += d * d
	}
	mse := se / float64(len(a)) / (255 * 255)
	if mse == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(1/mse)
}

func byte8(v float32) byte {
	switch {
	case !(v > 0):
		return 0
	case v >= 1:
		return 255
	}
	return byte(math.Round(float64(v) * 255))
}

// outDir is where the tests leave their screenshots: $RLXSPLAT_TEST_OUT/viewer, or a
// temporary directory (named in the log).
func outDir(t testing.TB) string {
	d := t.TempDir()
	if base := os.Getenv("RLXSPLAT_TEST_OUT"); base != "" {
		d = filepath.Join(base, "viewer")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// savePair writes the viewer's image beside rlxsplat's render and their difference (×4), with
// grey gaps between.
func savePair(t testing.TB, path string, left, right []float32, w, h int) {
	t.Helper()
	const gap = 4
	m := image.NewRGBA(image.Rect(0, 0, 3*w+2*gap, h))
	for i := range m.Pix {
		m.Pix[i] = 128
		if i%4 == 3 {
			m.Pix[i] = 255
		}
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for c := 0; c < 3; c++ {
				l, r := byte8(left[3*(y*w+x)+c]), byte8(right[3*(y*w+x)+c])
				m.Pix[4*(y*(3*w+2*gap)+x)+c] = l
				m.Pix[4*(y*(3*w+2*gap)+x+w+gap)+c] = r
				m.Pix[4*(y*(3*w+2*gap)+x+2*(w+gap))+c] = byte8(4 * float32(math.Abs(float64(l)-float64(r))) / 255)
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, m); err != nil {
		t.Fatal(err)
	}
}

func cpuRender(t testing.TB, g *splat.Gaussians, deg int, cam *camera.Camera, bg [3]float32) []float32 {
	t.Helper()
	eng, err := cpu.New(engine.DefaultSettings(), g)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	img, err := eng.Render(cam, deg, bg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// compareScene serves g, shows it in Chromium at each camera and checks the canvas against the
// CPU engine's render: PSNR ≥ 30 dB.
func compareScene(t *testing.T, name string, g *splat.Gaussians, deg int, cams []camera.Camera, bg [3]float32) {
	srv := viewer.New(viewer.Options{Title: name, Background: bg, Loopback: true})
	if err := srv.SetScene(g, deg); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx := newBrowser(t, 1280, 900)
	openPage(t, ctx, hs.URL+"/")
	dir := outDir(t)
	for i := range cams {
		cam := &cams[i]
		got := viewOf(t, ctx, cam)
		want := cpuRender(t, g, deg, cam, bg)
		p := psnr8(got, want)
		path := filepath.Join(dir, fmt.Sprintf("%s-view%d.png", name, i))
		savePair(t, path, got, want, cam.Width, cam.Height)
		t.Logf("%s view %d (%d×%d, %d splats): viewer vs CPU render PSNR %.2f dB (%s: viewer, rlxsplat, |difference|×4)",
			name, i, cam.Width, cam.Height, g.Len(), p, path)
		if p < 30 {
			t.Errorf("%s view %d: the viewer differs from rlxsplat's render: PSNR %.2f dB < 30", name, i, p)
		}
	}
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

package loss

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// metricCase is a pair of w×h RGB images made from a seeded generator, so that the same pair
// can be scored here and by scikit-image.
type metricCase struct {
	name string
	w, h int
	seed uint64
	// make fills the photo and the render; r draws from the case's seed.
	make func(r *rand.Rand, w, h int, photo, render []float32)
	// skimage is structural_similarity(photo, render, gaussian_weights=True, sigma=1.5,
	// use_sample_covariance=False, data_range=1, channel_axis=2) from scikit-image 0.19.3
	// (Debian bookworm's python3-skimage) on this case's images, as printed by
	// skimageScript. TestMetricSSIMMatchesScikitImage re-computes it where scikit-image is
	// installed.
	skimage float64
}

// smooth is a photo-like image: low-frequency colour waves plus fine noise.
func smooth(r *rand.Rand, w, h int, dst []float32) {
	fx, fy, ph := 0.05+0.2*r.Float64(), 0.05+0.2*r.Float64(), 6*r.Float64()
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for c := 0; c < 3; c++ {
				v := 0.5 + 0.35*math.Sin(fx*float64(x)+ph+float64(c))*math.Cos(fy*float64(y)-float64(c)) + 0.05*r.NormFloat64()
				dst[(y*w+x)*3+c] = float32(min(max(v, 0), 1))
			}
		}
	}
}

// degrade is a render-like copy of src: blurred horizontally, shifted in brightness and noisy.
func degrade(r *rand.Rand, w, h int, src, dst []float32, noise float64) {
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for c := 0; c < 3; c++ {
				l, rr := max(x-1, 0), min(x+1, w-1)
				v := (float64(src[(y*w+l)*3+c]) + 2*float64(src[(y*w+x)*3+c]) + float64(src[(y*w+rr)*3+c])) / 4
				v = 0.97*v + 0.02 + noise*r.NormFloat64()
				dst[(y*w+x)*3+c] = float32(min(max(v, 0), 1))
			}
		}
	}
}

var metricCases = []metricCase{
	{name: "smallest 11x11", w: 11, h: 11, seed: 1, skimage: 0.82566550826024576,
		make: func(r *rand.Rand, w, h int, p, q []float32) { smooth(r, w, h, p); degrade(r, w, h, p, q, 0.03) }},
	{name: "render vs photo 64x48", w: 64, h: 48, seed: 2, skimage: 0.873685716752444,
		make: func(r *rand.Rand, w, h int, p, q []float32) { smooth(r, w, h, p); degrade(r, w, h, p, q, 0.02) }},
	{name: "close render 200x150", w: 200, h: 150, seed: 3, skimage: 0.87948009944618466,
		make: func(r *rand.Rand, w, h int, p, q []float32) { smooth(r, w, h, p); degrade(r, w, h, p, q, 0.005) }},
	{name: "noise vs noise 37x23", w: 37, h: 23, seed: 4, skimage: -0.030657898833544289,
		make: func(r *rand.Rand, w, h int, p, q []float32) {
			for i := range p {
				p[i], q[i] = r.Float32(), r.Float32()
			}
		}},
	{name: "flat vs smooth 40x40", w: 40, h: 40, seed: 5, skimage: 0.15996707768040699,
		make: func(r *rand.Rand, w, h int, p, q []float32) {
			smooth(r, w, h, p)
			for i := range q {
				q[i] = 0.5
			}
		}},
	{name: "identical 30x20", w: 30, h: 20, seed: 6, skimage: 1,
		make: func(r *rand.Rand, w, h int, p, q []float32) { smooth(r, w, h, p); copy(q, p) }},
}

func (c metricCase) images() (photo, render []float32) {
	r := rand.New(rand.NewPCG(c.seed, 0x55))
	photo, render = make([]float32, c.w*c.h*3), make([]float32, c.w*c.h*3)
	c.make(r, c.w, c.h, photo, render)
	return photo, render
}

func metricSSIM(t *testing.T, c metricCase) float64 {
	t.Helper()
	photo, render := c.images()
	ev, err := NewEvaluator(c.w, c.h, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ev.MetricSSIM(render, photo)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestMetricSSIMReference holds MetricSSIM to scikit-image's values, recorded once per case
// (see metricCase.skimage), on machines without scikit-image too.
func TestMetricSSIMReference(t *testing.T) {
	for _, c := range metricCases {
		t.Run(c.name, func(t *testing.T) {
			if got := metricSSIM(t, c); math.Abs(got-c.skimage) > 1e-5 {
				t.Errorf("MetricSSIM = %.8f, scikit-image gave %.8f (|Δ| = %.2g > 1e-5)", got, c.skimage, math.Abs(got-c.skimage))
			}
		})
	}
}

// skimageScript scores raw little-endian float32 H×W×3 images the way the standard metric does.
const skimageScript = `
import sys, numpy as np
from skimage.metrics import structural_similarity
w, h = int(sys.argv[3]), int(sys.argv[4])
a = np.fromfile(sys.argv[1], dtype='<f4').reshape(h, w, 3).astype(np.float64)
b = np.fromfile(sys.argv[2], dtype='<f4').reshape(h, w, 3).astype(np.float64)
print(repr(structural_similarity(a, b, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=1.0, channel_axis=2)))
`

// TestMetricSSIMMatchesScikitImage scores every case with scikit-image itself, where Python 3
// and scikit-image are installed (Debian: python3-skimage), and also checks that the recorded
// values are still what it gives.
func TestMetricSSIMMatchesScikitImage(t *testing.T) {
	py, why := skimagePython()
	if py == "" {
		t.Skip(why)
	}
	dir := t.TempDir()
	for _, c := range metricCases {
		t.Run(c.name, func(t *testing.T) {
			photo, render := c.images()
			pf, rf := filepath.Join(dir, "photo.f32"), filepath.Join(dir, "render.f32")
			writeF32(t, pf, photo)
			writeF32(t, rf, render)
			out, err := exec.Command(py, "-c", skimageScript, rf, pf, strconv.Itoa(c.w), strconv.Itoa(c.h)).CombinedOutput()
			if err != nil {
				t.Fatalf("scikit-image: %v: %s", err, out)
			}
			want, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
			if err != nil {
				t.Fatalf("scikit-image printed %q: %v", out, err)
			}
			got := metricSSIM(t, c)
			t.Logf("MetricSSIM %.10f, scikit-image %.10f, |Δ| %.2g", got, want, math.Abs(got-want))
			if math.Abs(got-want) > 1e-5 {
				t.Errorf("MetricSSIM = %.8f, scikit-image %.8f: |Δ| = %.2g > 1e-5", got, want, math.Abs(got-want))
			}
			if math.Abs(want-c.skimage) > 1e-12 {
				t.Errorf("scikit-image now gives %.17g for this case, recorded %.17g: update metricCase.skimage", want, c.skimage)
			}
		})
	}
}

// skimagePython finds a Python 3 that imports scikit-image: the one on PATH, else the system's
// (a user's own Python often shadows Debian's, where python3-skimage installs), or says why not.
func skimagePython() (string, string) {
	var tried []string
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		py, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if out, err := exec.Command(py, "-c", "import skimage.metrics").CombinedOutput(); err == nil {
			return py, ""
		} else {
			tried = append(tried, fmt.Sprintf("%s: %s", py, lastLine(string(out))))
		}
	}
	if len(tried) == 0 {
		return "", "python3 not installed: scikit-image cannot score the cases (TestMetricSSIMReference checks its recorded values)"
	}
	return "", fmt.Sprintf("scikit-image not importable (Debian: apt install python3-skimage); tried %s", strings.Join(tried, "; "))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func writeF32(t *testing.T, path string, v []float32) {
	t.Helper()
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestMetricSSIMRejectsSmallImages(t *testing.T) {
	for _, sz := range [][2]int{{10, 11}, {11, 10}, {1, 1}} {
		ev, err := NewEvaluator(sz[0], sz[1], 1)
		if err != nil {
			t.Fatal(err)
		}
		img := make([]float32, sz[0]*sz[1]*3)
		if _, err := ev.MetricSSIM(img, img); err == nil || !strings.Contains(err.Error(), "11×11") {
			t.Errorf("%d×%d: err = %v, want one naming the 11×11 window", sz[0], sz[1], err)
		}
	}
}

// TestMetricSSIMSkipsBorderPixels: a change in the first row is seen by fewer of the standard
// metric's windows (only interior ones, which weigh row 0 lightly) than by the zero-padded
// SSIM, whose border pixels centre their windows on it, so the standard metric reads higher.
func TestMetricSSIMSkipsBorderPixels(t *testing.T) {
	const w, h = 40, 30
	a := make([]float32, w*h*3)
	for i := range a {
		a[i] = 0.4
	}
	b := append([]float32(nil), a...)
	for x := 0; x < w; x++ {
		for c := 0; c < 3; c++ {
			b[x*3+c] = 0.9 // row 0
		}
	}
	ev, err := NewEvaluator(w, h, 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ev.MetricSSIM(b, a)
	if err != nil {
		t.Fatal(err)
	}
	full, err := ev.SSIM(b, a)
	if err != nil {
		t.Fatal(err)
	}
	if !(got > full) {
		t.Errorf("MetricSSIM %.6f not above the zero-padded SSIM %.6f for a change in the border row", got, full)
	}
}

package imageio

import (
	"bytes"
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The upsampling filters on small planes, against values worked out by hand from libjpeg's
// equations (each output sample weighs the nearer input 3 and the further 1, rounded with the
// bias the position takes).
func TestChromaUpsampler(t *testing.T) {
	tests := []struct {
		name   string
		fx, fy int
		w      int
		plane  [][]uint8 // rows of the plane
		y      int       // output row
		want   []int32
	}{
		// h2v1: edges repeated; (3·0 + 40 + 2) >> 2 = 10, (3·40 + 0 + 1) >> 2 = 30, …
		{"h2v1", 2, 1, 6, [][]uint8{{0, 40, 200}}, 0, []int32{0, 10, 30, 80, 160, 200}},
		// Two samples a row: libjpeg repeats them (no triangle filter).
		{"h2v1 narrow", 2, 1, 4, [][]uint8{{0, 40}}, 0, []int32{0, 0, 40, 40}},
		// h1v2, upper output row of a pair: (3·row0 + row above (row0 repeated) + 1) >> 2.
		{"h1v2 top", 1, 2, 2, [][]uint8{{10, 100}, {30, 0}}, 0, []int32{10, 100}},
		// lower row: (3·10 + 30 + 2) >> 2 = 15, (3·100 + 0 + 2) >> 2 = 75.
		{"h1v2 lower", 1, 2, 2, [][]uint8{{10, 100}, {30, 0}}, 1, []int32{15, 75}},
		// h2v2, row 1: column sums 3·row0 + row1 = {62, 300, 26}; (4·62+8)>>4 = 16,
		// (3·62+300+7)>>4 = 30, (3·300+62+8)>>4 = 60, (3·300+26+7)>>4 = 58, (3·26+300+8)>>4 = 24,
		// (4·26+7)>>4 = 6 (the edge sums are 2 mod 4, where biases of 7 and 8 part).
		{"h2v2", 2, 2, 6, [][]uint8{{20, 100, 8}, {2, 0, 2}}, 1, []int32{16, 30, 60, 58, 24, 6}},
		// h2v2 with two samples a row: repetition both ways.
		{"h2v2 narrow", 2, 2, 4, [][]uint8{{20, 100}, {0, 0}}, 1, []int32{20, 20, 100, 100}},
		// 4:1:1 repeats.
		{"h4v1", 4, 1, 8, [][]uint8{{7, 9}}, 0, []int32{7, 7, 7, 7, 9, 9, 9, 9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cw := len(tc.plane[0])
			var p []uint8
			for _, r := range tc.plane {
				p = append(p, r...)
			}
			u := chromaUpsampler{fx: tc.fx, fy: tc.fy, cw: cw, ch: len(tc.plane), stride: cw}
			out := make([]int32, cw*tc.fx)
			u.row(p, tc.y, out, make([]int32, cw))
			if fmt.Sprint(out[:tc.w]) != fmt.Sprint(tc.want) {
				t.Errorf("row %d = %v, want %v", tc.y, out[:tc.w], tc.want)
			}
		})
	}
}

// The JFIF equations with libjpeg's rounding, at points worked out by hand.
func TestJFIFToRGB(t *testing.T) {
	tests := []struct {
		y, cb, cr int32
		want      [3]uint8
	}{
		{128, 128, 128, [3]uint8{128, 128, 128}},
		// R = 100 + (91881·50 + 32768) >> 16 = 100 + 70; G = 100 + (−46802·50 + 32768) >> 16 = 100 − 36
		// (the shift floors);
		// B = 100.
		{100, 128, 178, [3]uint8{170, 64, 100}},
		// B = 100 + (116130·(−60) + 32768) >> 16 = 100 − 106 → clamped to 0; G = 100 + (22554·60 + 32768) >> 16 = 121.
		{100, 68, 128, [3]uint8{100, 121, 0}},
		{250, 128, 255, [3]uint8{255, 159, 250}},
	}
	for _, tc := range tests {
		r, g, b := jfifToRGB(tc.y, tc.cb, tc.cr)
		if got := [3]uint8{r, g, b}; got != tc.want {
			t.Errorf("Y'CbCr (%d,%d,%d) → %v, want %v", tc.y, tc.cb, tc.cr, got, tc.want)
		}
	}
}

// libjpegTools returns the paths of libjpeg-turbo's cjpeg and djpeg, or skips: Pillow, which
// the original 3DGS code and gsplat read photos with, decodes with libjpeg-turbo.
func libjpegTools(t *testing.T) (cjpeg, djpeg string) {
	t.Helper()
	c, err1 := exec.LookPath("cjpeg")
	d, err2 := exec.LookPath("djpeg")
	if err1 != nil || err2 != nil {
		t.Skip("libjpeg-turbo's cjpeg and djpeg not installed (Debian: libjpeg-turbo-progs); .ci/run installs them")
	}
	return c, d
}

// djpegRGB decodes a JPEG with djpeg (fancy upsampling and the islow IDCT, its defaults) into
// 8-bit RGB.
func djpegRGB(t *testing.T, djpeg, path string) (rgb []byte, w, h int) {
	t.Helper()
	out, err := exec.Command(djpeg, "-pnm", path).Output()
	if err != nil {
		t.Fatalf("djpeg %s: %v", path, err)
	}
	var magic string
	var maxv int
	if _, err := fmt.Fscan(bytes.NewReader(out), &magic, &w, &h, &maxv); err != nil || magic != "P6" || maxv != 255 {
		t.Fatalf("djpeg %s: not an 8-bit PPM (%q %d): %v", path, magic, maxv, err)
	}
	if len(out) < w*h*3 {
		t.Fatalf("djpeg %s: %d bytes for %d×%d", path, len(out), w, h)
	}
	return out[len(out)-w*h*3:], w, h
}

// againstDjpeg decodes the JPEG at path with Load and with djpeg and returns, value by value,
// how many 8-bit levels Load's decode lies above djpeg's.
func againstDjpeg(t *testing.T, djpeg, path string) []int {
	t.Helper()
	want, w, h := djpegRGB(t, djpeg, path)
	img, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if img.W != w || img.H != h {
		t.Fatalf("%s: %d×%d, djpeg %d×%d", path, img.W, img.H, w, h)
	}
	diff := make([]int, len(want))
	for i, v := range want {
		diff[i] = int(math.Round(float64(img.RGB[i])*255)) - int(v)
	}
	return diff
}

// Photos whose blocks are flat decode to the same values in every IDCT, so the upsampling and
// the colour conversion are all that can differ from libjpeg-turbo: they must match it exactly,
// for every chroma layout cjpeg writes. Sizes: one that ends inside a block (53×37), and one
// whose last chroma row and column start a block of their own colour (34×34: 17 chroma
// samples), so that the edge rules are seen.
func TestYCbCrMatchesLibjpegExactly(t *testing.T) {
	cjpeg, djpeg := libjpegTools(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	// Flat 16×16 blocks (the largest MCU) of random colours.
	colours := make([][3]uint8, 16)
	for i := range colours {
		colours[i] = [3]uint8{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256))}
	}
	for _, size := range [][2]int{{53, 37}, {34, 34}} {
		w, h := size[0], size[1]
		var ppm bytes.Buffer
		fmt.Fprintf(&ppm, "P6\n%d %d\n255\n", w, h)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := colours[(y/16*4+x/16)%len(colours)]
				ppm.Write(c[:])
			}
		}
		src := filepath.Join(dir, fmt.Sprintf("flat-%dx%d.ppm", w, h))
		if err := os.WriteFile(src, ppm.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, sampling := range []string{"2x2", "2x1", "1x2", "1x1"} {
			t.Run(fmt.Sprintf("%dx%d/%s", w, h, sampling), func(t *testing.T) {
				jpg := strings.TrimSuffix(src, ".ppm") + "-" + sampling + ".jpg"
				cmd := exec.Command(cjpeg, "-quality", "100", "-sample", sampling, "-outfile", jpg, src)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("cjpeg -sample %s: %v: %s", sampling, err, out)
				}
				diff := againstDjpeg(t, djpeg, jpg)
				bad := 0
				for i, d := range diff {
					if d != 0 {
						if bad < 5 {
							t.Errorf("pixel (%d,%d) channel %d: %+d levels from djpeg", i/3%w, i/3/w, i%3, d)
						}
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("%d of %d values differ from djpeg", bad, len(diff))
				}
			})
		}
	}
}

// On a real photo the IDCTs differ in the last bits (Go's against libjpeg's islow), and nothing
// else: the decode stays within a few levels of djpeg's everywhere, where repeating each chroma
// sample over its block (Go's image.YCbCr.At) is off by up to 20 levels on bonsai.
func TestYCbCrMatchesLibjpegOnAPhoto(t *testing.T) {
	_, djpeg := libjpegTools(t)
	s := sharedDir(t)
	path := filepath.Join(s, "data/bonsai/images/DSCF5565.JPG")
	diff := againstDjpeg(t, djpeg, path)
	var se float64
	worst := 0
	for _, d := range diff {
		se += float64(d * d)
		worst = max(worst, d, -d)
	}
	psnr := 10 * math.Log10(255*255/(se/float64(len(diff))))
	t.Logf("against djpeg: PSNR %.2f dB, largest difference %d levels", psnr, worst)
	// Measured here: 63.7 dB, 3 levels (block repetition: 48.9 dB, 20 levels).
	if psnr < 60 || worst > 4 {
		t.Errorf("PSNR %.2f dB and largest difference %d against djpeg; want ≥ 60 dB and ≤ 4 levels (IDCT rounding alone)", psnr, worst)
	}
}

// A layout yccToRGB does not handle (a sub-image not at the origin) falls back to the
// per-block lookup rather than failing.
func TestYCbCrFallback(t *testing.T) {
	m := image.NewYCbCr(image.Rect(0, 0, 8, 8), image.YCbCrSubsampleRatio420)
	sub := m.SubImage(image.Rect(2, 2, 6, 6)).(*image.YCbCr)
	if yccToRGB(sub, make([]float32, 4*4*3)) {
		t.Fatal("yccToRGB took a rectangle away from the origin")
	}
	img := fromImage(sub)
	if img.W != 4 || img.H != 4 {
		t.Fatalf("%d×%d", img.W, img.H)
	}
}

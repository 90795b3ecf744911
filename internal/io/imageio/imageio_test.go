package imageio

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"

	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// sharedDir returns ../shared next to the module root (the directory
// holding go.mod), or skips the test when it is absent.
func sharedDir(t testing.TB) string {
	t.Helper()
	return filepath.Dir(sharedtest.Path(t, "data"))
}

func encodePNG(t testing.TB, m image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pixel reads the straight RGBA of pixel (x, y) of an Image.
func pixel(img *Image, x, y int) [4]float32 {
	i := y*img.W + x
	a := float32(1)
	if img.Alpha != nil {
		a = img.Alpha[i]
	}
	return [4]float32{img.RGB[3*i], img.RGB[3*i+1], img.RGB[3*i+2], a}
}

func TestDecodeFormats(t *testing.T) {
	const w, h = 3, 2
	rgba8 := image.NewNRGBA(image.Rect(0, 0, w, h))
	opaque8 := image.NewRGBA(image.Rect(0, 0, w, h))
	rgb16 := image.NewNRGBA64(image.Rect(0, 0, w, h))
	rgba16 := image.NewNRGBA64(image.Rect(0, 0, w, h))
	gray := image.NewGray(image.Rect(0, 0, w, h))
	gray16 := image.NewGray16(image.Rect(0, 0, w, h))
	pal := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{
		color.NRGBA{10, 20, 30, 255}, color.NRGBA{200, 100, 50, 0}, color.NRGBA{0, 255, 0, 128},
	})
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			k := uint8(y*w + x)
			rgba8.SetNRGBA(x, y, color.NRGBA{40 * k, 255 - 30*k, 7 * k, 255 - 50*k})
			opaque8.SetRGBA(x, y, color.RGBA{40 * k, 255 - 30*k, 7 * k, 255})
			// Low bytes differ from high bytes, so an 8-bit truncation shows.
			v := uint16(k)*9000 + 0x0123
			rgb16.SetNRGBA64(x, y, color.NRGBA64{v, 65535 - v, v / 3, 0xffff})
			rgba16.SetNRGBA64(x, y, color.NRGBA64{v, 65535 - v, v / 3, 65535 - 4000*uint16(k)})
			gray.SetGray(x, y, color.Gray{30 * k})
			gray16.SetGray16(x, y, color.Gray16{v})
			pal.SetColorIndex(x, y, k%3)
		}
	}
	var bmpBuf, tiffBuf bytes.Buffer
	if err := bmp.Encode(&bmpBuf, opaque8); err != nil {
		t.Fatal(err)
	}
	if err := tiff.Encode(&tiffBuf, rgba8, nil); err != nil {
		t.Fatal(err)
	}

	nrgba := func(c color.NRGBA) [4]float32 {
		return [4]float32{float32(c.R) / 255, float32(c.G) / 255, float32(c.B) / 255, float32(c.A) / 255}
	}
	nrgba64 := func(c color.NRGBA64) [4]float32 {
		return [4]float32{float32(c.R) / 65535, float32(c.G) / 65535, float32(c.B) / 65535, float32(c.A) / 65535}
	}
	tests := []struct {
		name      string
		data      []byte
		wantAlpha bool
		want      func(x, y int) [4]float32
		tol       float32
	}{
		{"png rgba8", encodePNG(t, rgba8), true, func(x, y int) [4]float32 { return nrgba(rgba8.NRGBAAt(x, y)) }, 0},
		{"png rgb8", encodePNG(t, opaque8), false, func(x, y int) [4]float32 {
			c := opaque8.RGBAAt(x, y)
			return nrgba(color.NRGBA{c.R, c.G, c.B, c.A})
		}, 0},
		{"png rgb16", encodePNG(t, rgb16), false, func(x, y int) [4]float32 { return nrgba64(rgb16.NRGBA64At(x, y)) }, 0},
		{"png rgba16", encodePNG(t, rgba16), true, func(x, y int) [4]float32 { return nrgba64(rgba16.NRGBA64At(x, y)) }, 0},
		{"png gray8", encodePNG(t, gray), false, func(x, y int) [4]float32 {
			v := float32(gray.GrayAt(x, y).Y) / 255
			return [4]float32{v, v, v, 1}
		}, 0},
		{"png gray16", encodePNG(t, gray16), false, func(x, y int) [4]float32 {
			v := float32(gray16.Gray16At(x, y).Y) / 65535
			return [4]float32{v, v, v, 1}
		}, 0},
		{"png paletted with transparency", encodePNG(t, pal), true, func(x, y int) [4]float32 {
			c := nrgba(pal.Palette[pal.ColorIndexAt(x, y)].(color.NRGBA))
			if c[3] == 0 {
				c = [4]float32{0, 0, 0, 0} // a transparent entry has no colour
			}
			return c
		}, 1e-6},
		{"bmp", bmpBuf.Bytes(), false, func(x, y int) [4]float32 {
			c := opaque8.RGBAAt(x, y)
			return nrgba(color.NRGBA{c.R, c.G, c.B, c.A})
		}, 0},
		// TIFF stores premultiplied 8-bit alpha; straight colour comes back
		// to within the premultiplication's rounding.
		{"tiff rgba", tiffBuf.Bytes(), true, func(x, y int) [4]float32 { return nrgba(rgba8.NRGBAAt(x, y)) }, 0.02},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			img, err := Decode(tc.data, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if img.W != w || img.H != h {
				t.Fatalf("size %d×%d, want %d×%d", img.W, img.H, w, h)
			}
			if (img.Alpha != nil) != tc.wantAlpha {
				t.Fatalf("alpha present = %v, want %v", img.Alpha != nil, tc.wantAlpha)
			}
			for y := 0; y < h; y++ {
				for x := 0; x < w; x++ {
					got, want := pixel(img, x, y), tc.want(x, y)
					for ch := range got {
						if d := got[ch] - want[ch]; d > tc.tol || d < -tc.tol {
							t.Fatalf("pixel (%d,%d) = %v, want %v", x, y, got, want)
						}
					}
				}
			}
		})
	}
}

func TestDecodeJPEG(t *testing.T) {
	m := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for i := range m.Pix {
		m.Pix[i] = 255
	}
	for y := 0; y < 16; y++ {
		for x := 0; x < 8; x++ {
			m.SetRGBA(x, y, color.RGBA{200, 40, 40, 255})
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, m, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	img, err := Decode(buf.Bytes(), "a.jpg")
	if err != nil {
		t.Fatal(err)
	}
	if img.W != 16 || img.H != 16 || img.Alpha != nil {
		t.Fatalf("got %d×%d alpha=%v", img.W, img.H, img.Alpha != nil)
	}
	// Lossy: compare pixels away from the edge within a JPEG tolerance.
	for _, c := range []struct {
		x, y int
		want [3]float32
	}{{2, 2, [3]float32{200. / 255, 40. / 255, 40. / 255}}, {13, 13, [3]float32{1, 1, 1}}} {
		p := pixel(img, c.x, c.y)
		for ch := 0; ch < 3; ch++ {
			if math.Abs(float64(p[ch]-c.want[ch])) > 0.05 {
				t.Errorf("pixel (%d,%d) = %v, want ≈ %v", c.x, c.y, p, c.want)
			}
		}
	}
}

// Truncated files of every kind must give an error naming the file, never
// a panic or a silently partial image.
func TestDecodeTruncated(t *testing.T) {
	m := image.NewNRGBA(image.Rect(0, 0, 32, 24))
	for i := range m.Pix {
		m.Pix[i] = uint8(i * 7)
	}
	pngData := encodePNG(t, m)
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, m, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"images/r_003.png", pngData}, {"images/x.jpg", jb.Bytes()}} {
		for _, n := range []int{0, 1, 8, 20, 33, len(f.data) / 2, len(f.data) - 13, len(f.data) - 1} {
			// A JPEG cut just before its end-of-image marker still decodes
			// (Go's decoder tolerates a missing EOI); skip that cut.
			if strings.HasSuffix(f.name, ".jpg") && n == len(f.data)-1 {
				continue
			}
			_, err := Decode(f.data[:n], f.name)
			if err == nil {
				t.Errorf("%s cut to %d bytes: no error", f.name, n)
				continue
			}
			if !strings.HasPrefix(err.Error(), "imageio: "+f.name+": ") {
				t.Errorf("%s cut to %d bytes: error %q does not start with the package and file", f.name, n, err)
			}
		}
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.png")
	if err := os.WriteFile(garbage, []byte("this is not an image at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A valid 1×1 PNG whose header claims 100000×100000 pixels.
	huge := encodePNG(t, image.NewGray(image.Rect(0, 0, 1, 1)))
	binary.BigEndian.PutUint32(huge[16:], 100000)
	binary.BigEndian.PutUint32(huge[20:], 100000)
	binary.BigEndian.PutUint32(huge[29:], crc32.ChecksumIEEE(huge[12:29]))
	hugePath := filepath.Join(dir, "huge.png")
	if err := os.WriteFile(hugePath, huge, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want []string
	}{
		{filepath.Join(dir, "missing.png"), []string{"imageio:", "missing.png", "no such file"}},
		{garbage, []string{"imageio:", "garbage.png", "unknown format"}},
		{hugePath, []string{"imageio:", "huge.png", "100000×100000"}},
	}
	for _, tc := range tests {
		_, err := Load(tc.path)
		if err == nil {
			t.Errorf("Load(%s): no error", tc.path)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Load(%s): error %q lacks %q", tc.path, err, w)
			}
		}
	}
}

func TestResizeBoxFilter(t *testing.T) {
	// 4×2 → 2×1: each output is the exact mean of a 2×2 block.
	img := &Image{W: 4, H: 2, RGB: make([]float32, 4*2*3)}
	for i := range img.RGB {
		img.RGB[i] = float32(i%7) / 8
	}
	out, err := Resize(img, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	for ox := 0; ox < 2; ox++ {
		for ch := 0; ch < 3; ch++ {
			var sum float64
			for y := 0; y < 2; y++ {
				for x := 2 * ox; x < 2*ox+2; x++ {
					sum += float64(img.RGB[(y*4+x)*3+ch])
				}
			}
			if got := out.RGB[ox*3+ch]; float64(got) != sum/4 {
				t.Errorf("out (%d,0) ch %d = %v, want %v", ox, ch, got, sum/4)
			}
		}
	}
}

func TestResizeAreaWeights(t *testing.T) {
	// 3 → 2 along x: footprints [0,1.5) and [1.5,3).
	img := &Image{W: 3, H: 1, RGB: []float32{0.3, 0, 0, 0.6, 0, 0, 0.9, 0, 0}}
	out, err := Resize(img, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{(0.3 + 0.5*0.6) / 1.5, (0.5*0.6 + 0.9) / 1.5}
	for i, w := range want {
		if math.Abs(float64(out.RGB[3*i])-w) > 1e-6 {
			t.Errorf("out[%d] = %v, want %v", i, out.RGB[3*i], w)
		}
	}
}

// Area averaging preserves a constant image and the image mean, for any
// pair of sizes (each source pixel's weights over the outputs sum to the
// same value).
func TestResizeInvariants(t *testing.T) {
	sizes := []struct{ sw, sh, dw, dh int }{
		{799, 532, 200, 133}, {400, 400, 200, 200}, {10, 7, 3, 2}, {5, 5, 5, 5}, {4, 3, 9, 7}, {1, 1, 1, 1}, {13, 1, 1, 1},
	}
	for _, s := range sizes {
		img := &Image{W: s.sw, H: s.sh, RGB: make([]float32, s.sw*s.sh*3)}
		flat := &Image{W: s.sw, H: s.sh, RGB: make([]float32, s.sw*s.sh*3)}
		var mean float64
		for i := range img.RGB {
			img.RGB[i] = float32((i*37)%101) / 100
			mean += float64(img.RGB[i])
			flat.RGB[i] = 0.7
		}
		mean /= float64(len(img.RGB))
		out, err := Resize(img, s.dw, s.dh)
		if err != nil {
			t.Fatal(err)
		}
		fo, err := Resize(flat, s.dw, s.dh)
		if err != nil {
			t.Fatal(err)
		}
		if out.W != s.dw || out.H != s.dh || len(out.RGB) != s.dw*s.dh*3 {
			t.Fatalf("%v: got %d×%d with %d values", s, out.W, out.H, len(out.RGB))
		}
		var got float64
		for i, v := range out.RGB {
			got += float64(v)
			if math.Abs(float64(fo.RGB[i])-0.7) > 1e-6 {
				t.Fatalf("%v: constant image changed at %d: %v", s, i, fo.RGB[i])
			}
		}
		got /= float64(len(out.RGB))
		if math.Abs(got-mean) > 1e-5 {
			t.Errorf("%v: mean %v, want %v", s, got, mean)
		}
	}
}

func TestResizeAlphaPremultiplied(t *testing.T) {
	// Transparent red next to opaque blue: the average must be blue at
	// half coverage, not purple.
	img := &Image{W: 2, H: 1, RGB: []float32{1, 0, 0, 0, 0, 1}, Alpha: []float32{0, 1}}
	out, err := Resize(img, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := pixel(out, 0, 0); got != [4]float32{0, 0, 1, 0.5} {
		t.Errorf("got %v, want blue at alpha 0.5", got)
	}
	// Resizing then compositing equals compositing then resizing.
	big := &Image{W: 6, H: 4, RGB: make([]float32, 72), Alpha: make([]float32, 24)}
	for i := range big.RGB {
		big.RGB[i] = float32((i*13)%17) / 16
	}
	for i := range big.Alpha {
		big.Alpha[i] = float32((i*5)%9) / 8
	}
	bg := [3]float32{0.2, 0.5, 1}
	r, err := Resize(big, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	a := r.Composite(bg)
	c, err := Resize(&Image{W: 6, H: 4, RGB: big.Composite(bg)}, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if math.Abs(float64(a[i]-c.RGB[i])) > 1e-5 {
			t.Fatalf("value %d: resize∘composite %v vs composite∘resize %v", i, a[i], c.RGB[i])
		}
	}
}

func TestResizeErrors(t *testing.T) {
	good := &Image{W: 2, H: 2, RGB: make([]float32, 12)}
	tests := []struct {
		name string
		img  *Image
		w, h int
	}{
		{"nil", nil, 1, 1},
		{"zero width", good, 0, 1},
		{"negative height", good, 1, -1},
		{"short rgb", &Image{W: 2, H: 2, RGB: make([]float32, 11)}, 1, 1},
		{"short alpha", &Image{W: 2, H: 2, RGB: make([]float32, 12), Alpha: make([]float32, 3)}, 1, 1},
	}
	for _, tc := range tests {
		if _, err := Resize(tc.img, tc.w, tc.h); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestComposite(t *testing.T) {
	img := Image{W: 2, H: 1, RGB: []float32{1, 0, 0, 0, 1, 0}, Alpha: []float32{0.25, 1}}
	got := img.Composite([3]float32{0, 0, 1})
	want := []float32{0.25, 0, 0.75, 0, 1, 0}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-7 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	opaque := Image{W: 1, H: 1, RGB: []float32{0.1, 0.2, 0.3}}
	c := opaque.Composite([3]float32{1, 1, 1})
	c[0] = 9
	if opaque.RGB[0] != 0.1 {
		t.Error("Composite of an opaque image aliases its RGB")
	}
}

func TestSavePNGRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.png")
	// Overwriting an existing file must work (rename over it).
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	rgb := []float32{0, 0.5, 1, -0.3, 1.7, float32(math.NaN()), 0.2 / 255, 0.6 / 255, 254.49 / 255, 1, 1, 1}
	if err := SavePNG(path, rgb, 2, 2); err != nil {
		t.Fatal(err)
	}
	img, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if img.W != 2 || img.H != 2 || img.Alpha != nil {
		t.Fatalf("got %d×%d alpha=%v", img.W, img.H, img.Alpha != nil)
	}
	want := []uint8{0, 128, 255, 0, 255, 0, 0, 1, 254, 255, 255, 255}
	for i, w := range want {
		if got := img.RGB[i] * 255; math.Abs(float64(got)-float64(w)) > 1e-3 {
			t.Errorf("value %d = %v/255, want %d", i, got, w)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after SavePNG, want only out.png", len(entries))
	}
	if err := SavePNG(path, rgb[:11], 2, 2); err == nil || !strings.Contains(err.Error(), "out.png") {
		t.Errorf("short slice: error %v, want one naming out.png", err)
	}
	if err := SavePNG(filepath.Join(dir, "no", "such", "dir.png"), rgb, 2, 2); err == nil {
		t.Error("missing directory: no error")
	}
}

func TestLoadSharedImages(t *testing.T) {
	s := sharedDir(t)
	tests := []struct {
		path string
		w, h int
	}{
		{"data/duck/images/r_000.png", 400, 400},
		{"data/bonsai/images/DSCF5565.JPG", 799, 532},
	}
	for _, tc := range tests {
		img, err := Load(filepath.Join(s, tc.path))
		if err != nil {
			t.Fatal(err)
		}
		if img.W != tc.w || img.H != tc.h || img.Alpha != nil {
			t.Errorf("%s: %d×%d alpha=%v, want %d×%d opaque", tc.path, img.W, img.H, img.Alpha != nil, tc.w, tc.h)
		}
		var lo, hi float32 = 1, 0
		for _, v := range img.RGB {
			lo, hi = min(lo, v), max(hi, v)
		}
		if lo < 0 || hi > 1 || hi-lo < 0.3 {
			t.Errorf("%s: values span [%v, %v]; want a real photo in [0,1]", tc.path, lo, hi)
		}
	}
}

// fuzzMaxPixels keeps the fuzzer's allocations small; the limit logic is
// the same as Decode's.
const fuzzMaxPixels = 1 << 20

func FuzzLoadBytes(f *testing.F) {
	small := image.NewNRGBA64(image.Rect(0, 0, 5, 4))
	for i := range small.Pix {
		small.Pix[i] = uint8(i * 31)
	}
	f.Add(encodePNG(f, small))
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, small, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(jb.Bytes())
	var bb, tb bytes.Buffer
	if err := bmp.Encode(&bb, small); err != nil {
		f.Fatal(err)
	}
	f.Add(bb.Bytes())
	if err := tiff.Encode(&tb, small, &tiff.Options{Compression: tiff.Deflate}); err != nil {
		f.Fatal(err)
	}
	f.Add(tb.Bytes())
	// Real files, the small ones: one camera JPEG and one rendered PNG.
	if s, ok := optionalShared(); ok {
		for _, p := range []string{"data/bonsai/input/DSCF5764.JPG", "data/duck/images/r_087.png"} {
			if data, err := os.ReadFile(filepath.Join(s, p)); err == nil {
				f.Add(data)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := decode(data, "fuzz", fuzzMaxPixels)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "imageio: fuzz: ") {
				t.Fatalf("error %q lacks the package and name prefix", err)
			}
			return
		}
		if err := img.check(); err != nil {
			t.Fatal(err)
		}
		for i, v := range img.RGB {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("RGB[%d] = %v outside [0,1]", i, v)
			}
		}
		for i, v := range img.Alpha {
			if !(v >= 0 && v <= 1) {
				t.Fatalf("Alpha[%d] = %v outside [0,1]", i, v)
			}
		}
	})
}

// optionalShared is sharedDir for fuzz seeding: no skip, just absence.
func optionalShared() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			s := filepath.Join(dir, "..", "shared")
			_, err := os.Stat(s)
			return s, err == nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

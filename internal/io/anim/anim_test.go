package anim

import (
	"context"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// writeFrames writes n w×h frames into a new directory: a gradient that moves one pixel a
// frame, as an orbit's does.
func writeFrames(t *testing.T, n, w, h int) string {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				m.SetRGBA(x, y, color.RGBA{uint8((x + i) * 255 / (w + n)), uint8(y * 255 / h), 128, 255})
			}
		}
		f, err := os.Create(filepath.Join(dir, FrameName(i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, m); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return dir
}

func TestMedianCut(t *testing.T) {
	red, blue := [3]uint8{250, 10, 10}, [3]uint8{10, 10, 250}
	for _, c := range []struct {
		name    string
		samples [][3]uint8
		n       int
		want    []color.RGBA
	}{
		{"empty: black", nil, 256, []color.RGBA{{0, 0, 0, 255}}},
		{"one colour", [][3]uint8{red, red, red}, 256, []color.RGBA{{250, 10, 10, 255}}},
		{"fewer colours than entries: each exactly", [][3]uint8{red, blue, red, blue, blue}, 256,
			[]color.RGBA{{250, 10, 10, 255}, {10, 10, 250, 255}}},
		{"two clusters into two: their means", [][3]uint8{{240, 0, 0}, {250, 10, 10}, {0, 0, 240}, {10, 10, 250}}, 2,
			[]color.RGBA{{245, 5, 5, 255}, {5, 5, 245, 255}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pal := MedianCut(append([][3]uint8(nil), c.samples...), c.n)
			if len(pal) != len(c.want) {
				t.Fatalf("%d colours %v, want %v", len(pal), pal, c.want)
			}
			for _, w := range c.want {
				found := false
				for _, p := range pal {
					found = found || p == w
				}
				if !found {
					t.Errorf("palette %v lacks %v", pal, w)
				}
			}
		})
	}
}

// The GIF holds every frame, at the frame rate, looping, on one shared palette, with every
// pixel close to the frame's own colour.
func TestWriteGIF(t *testing.T) {
	const n, w, h = 6, 40, 30
	dir := writeFrames(t, n, w, h)
	path := filepath.Join(t.TempDir(), "orbit.gif")
	if err := WriteGIF(path, dir, n, 25); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := gif.DecodeAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Image) != n || g.LoopCount != 0 {
		t.Fatalf("%d frames, loop %d; want %d looping", len(g.Image), g.LoopCount, n)
	}
	worst := 0
	for i, fr := range g.Image {
		if g.Delay[i] != 4 {
			t.Errorf("frame %d: delay %d/100 s, want 4 (25 fps)", i, g.Delay[i])
		}
		if fr.Bounds().Dx() != w || fr.Bounds().Dy() != h {
			t.Fatalf("frame %d is %v", i, fr.Bounds())
		}
		if len(fr.Palette) != len(g.Image[0].Palette) {
			t.Errorf("frame %d has its own palette", i)
		}
		src, err := readFrame(dir, i)
		if err != nil {
			t.Fatal(err)
		}
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				r0, g0, b0, _ := src.At(x, y).RGBA()
				r1, g1, b1, _ := fr.At(x, y).RGBA()
				for _, d := range []int{int(r0>>8) - int(r1>>8), int(g0>>8) - int(g1>>8), int(b0>>8) - int(b1>>8)} {
					worst = max(worst, d, -d)
				}
			}
		}
	}
	// The frames hold about 1 700 colours for 256 entries: 12 levels of 255 at most.
	if worst > 12 {
		t.Errorf("a pixel is %d levels off its frame's colour", worst)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestWriteGIFErrors(t *testing.T) {
	dir := writeFrames(t, 2, 8, 8)
	other := writeFrames(t, 1, 9, 8)
	if err := os.Rename(filepath.Join(other, FrameName(0)), filepath.Join(dir, FrameName(2))); err != nil {
		t.Fatal(err)
	}
	twoFrames := writeFrames(t, 2, 8, 8)
	out := filepath.Join(t.TempDir(), "a.gif")
	for _, c := range []struct {
		name string
		dir  string
		n    int
		fps  float64
		want string
	}{
		{"no frames", dir, 0, 25, "no frames"},
		{"no rate", dir, 2, 0, "frames per second"},
		{"sizes differ", dir, 3, 25, "frame 2 is"},
		{"missing frame", twoFrames, 3, 25, FrameName(2)},
	} {
		if err := WriteGIF(out, c.dir, c.n, c.fps); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed write left %s (%v)", out, err)
	}
}

// WriteMP4 runs ffmpeg on the frame pattern and puts its file at the path; ffmpeg's own
// message is in the error when it fails. A stand-in ffmpeg checks the invocation on any
// machine; the real one, where installed, checks that the file is an MP4.
func TestWriteMP4(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in ffmpeg is a shell script")
	}
	bin := t.TempDir()
	fake := filepath.Join(bin, "ffmpeg")
	script := `#!/bin/sh
for a; do last=$a; done
echo "$@" > "$(dirname "$last")/args"
[ -n "$FAIL" ] && { echo "unknown encoder libx264" >&2; exit 1; }
printf 'fake mp4' > "$last"
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := writeFrames(t, 3, 8, 6)
	path := filepath.Join(t.TempDir(), "orbit.mp4")
	if err := WriteMP4(context.Background(), fake, path, dir, 30); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "fake mp4" {
		t.Fatalf("output %q (%v)", b, err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	for _, want := range []string{"-framerate 30", filepath.Join(dir, "frame_%05d.png"), "-pix_fmt yuv420p"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("ffmpeg arguments %q lack %q", args, want)
		}
	}
	t.Setenv("FAIL", "1")
	if err := WriteMP4(context.Background(), fake, filepath.Join(t.TempDir(), "x.mp4"), dir, 30); err == nil || !strings.Contains(err.Error(), "unknown encoder libx264") {
		t.Errorf("failing ffmpeg: %v", err)
	}
	t.Setenv("FAIL", "")

	t.Setenv("PATH", bin)
	if p, err := FindFFmpeg(); err != nil || p != fake {
		t.Errorf("FindFFmpeg with the stand-in on PATH: %q, %v", p, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := FindFFmpeg(); !errors.Is(err, ErrNoFFmpeg) {
		t.Errorf("FindFFmpeg without ffmpeg: %v", err)
	}
}

func TestWriteMP4RealFFmpeg(t *testing.T) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("no ffmpeg on PATH: the MP4 path is checked with a stand-in only (TestWriteMP4)")
	}
	dir := writeFrames(t, 10, 33, 25) // odd sizes: padded to even for yuv420p
	path := filepath.Join(t.TempDir(), "orbit.mp4")
	if err := WriteMP4(context.Background(), ffmpeg, path, dir, 10); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 12 || string(b[4:8]) != "ftyp" {
		t.Fatalf("not an MP4 (%d bytes, %v)", len(b), err)
	}
}

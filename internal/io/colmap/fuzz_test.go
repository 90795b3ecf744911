package colmap

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzSeedDirs are the models in ../shared whose files seed the fuzzers.
func fuzzSeedDirs() [][]string {
	return [][]string{
		{"data", "duck", "sparse", "0"},
		{"data", "duck", "sparse_txt", "0"},
		{"data", "bonsai", "sparse", "0"},
		{"data", "bonsai", "distorted", "sparse", "0"},
		{"fixtures", "colmap", "other-opencv", "sparse", "0"},
		{"fixtures", "colmap", "other-pinhole", "sparse", "0"},
	}
}

// maxSeedBytes skips shared files too large to seed with: only bonsai's
// 12 MB points3D.bin, whose records are like duck's; every fuzz execution
// on a seed that size would parse all of it.
const maxSeedBytes = 4 << 20

// testdataModel is the repository's own capture (written by internal/demo): its files seed
// the fuzzers everywhere, ../shared or not.
var testdataModel = filepath.Join("..", "..", "..", "testdata", "demo", "sparse", "0")

// addSharedSeeds adds every shared file called base (up to maxSeedBytes), and the one in
// testdata/demo, as a seed; absent files are skipped, and the generated seeds still run.
func addSharedSeeds(f *testing.F, base string) {
	dirs := []string{testdataModel}
	for _, rel := range fuzzSeedDirs() {
		if dir, ok := findShared(rel...); ok {
			dirs = append(dirs, dir)
		}
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, base)
		if st, err := os.Stat(p); err != nil || st.Size() > maxSeedBytes {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatalf("seed %s: %v", p, err)
		}
		f.Add(data)
	}
}

// checkErr checks that a reader's error names the file and a position.
func checkErr(t *testing.T, err error, name, where string) {
	t.Helper()
	if prefix := "colmap: " + name + ": " + where + " "; !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("error %q does not start with %q", err, prefix)
	}
}

// Run a fuzzer with a bound on minimisation, for example
//
//	go test ./internal/io/colmap -run '^$' -fuzz '^FuzzImagesBinary$' -fuzztime 60s -fuzzminimizetime 10x -parallel 1
//
// Go's default lets the minimisation of each new input run for 60 s, and
// minimising an input derived from a megabyte seed takes all of it: a
// 60 s run then executes a dozen inputs instead of a few million.

// The binary fuzzers check: no panic; an error names the file and offset;
// a file that parses re-encodes to the same bytes (images, points) or to
// a file that parses to the same model (cameras, whose map drops order).

func FuzzCamerasBinary(f *testing.F) {
	addSharedSeeds(f, "cameras.bin")
	f.Add(writeCamerasBinary(f, sampleModel().Cameras))
	f.Add(writeCamerasBinary(f, tinyModel().Cameras))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		cams, err := ReadCamerasBinary(bytes.NewReader(data), "cameras.bin")
		if err != nil {
			checkErr(t, err, "cameras.bin", "offset")
			return
		}
		again, err := ReadCamerasBinary(bytes.NewReader(writeCamerasBinary(t, cams)), "cameras.bin")
		if err != nil {
			t.Fatalf("re-encoded cameras fail: %v", err)
		}
		if d := diffCameras(cams, again); d != "" {
			t.Fatalf("re-encoded cameras differ: %s", d)
		}
	})
}

func FuzzImagesBinary(f *testing.F) {
	addSharedSeeds(f, "images.bin")
	f.Add(writeImagesBinary(sampleModel().Images))
	f.Add(writeImagesBinary(tinyModel().Images))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		imgs, err := ReadImagesBinary(bytes.NewReader(data), "images.bin")
		if err != nil {
			checkErr(t, err, "images.bin", "offset")
			return
		}
		if !bytes.Equal(writeImagesBinary(imgs), data) {
			t.Fatal("images re-encode to different bytes")
		}
	})
}

func FuzzPoints3DBinary(f *testing.F) {
	addSharedSeeds(f, "points3D.bin")
	f.Add(writePoints3DBinary(sampleModel().Points))
	f.Add(writePoints3DBinary(tinyModel().Points))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		pts, err := ReadPoints3DBinary(bytes.NewReader(data), "points3D.bin")
		if err != nil {
			checkErr(t, err, "points3D.bin", "offset")
			return
		}
		if !bytes.Equal(writePoints3DBinary(pts), data) {
			t.Fatal("points re-encode to different bytes")
		}
	})
}

// The text fuzzers check: no panic; an error names the file and line; a
// file that parses writes back (17 significant digits) to a file that
// parses to the same content.

func FuzzCamerasText(f *testing.F) {
	addSharedSeeds(f, "cameras.txt")
	f.Add(writeCamerasText(sampleModel().Cameras))
	f.Add([]byte("# c\n1 PINHOLE 4 4 1 1 2 2\n\n2 SIMPLE_RADIAL 4 4 1 2 2 -0.1\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		cams, err := ReadCamerasText(bytes.NewReader(data), "cameras.txt")
		if err != nil {
			checkErr(t, err, "cameras.txt", "line")
			return
		}
		again, err := ReadCamerasText(bytes.NewReader(writeCamerasText(cams)), "cameras.txt")
		if err != nil {
			t.Fatalf("re-written cameras fail: %v", err)
		}
		if d := diffCameras(cams, again); d != "" {
			t.Fatalf("re-written cameras differ: %s", d)
		}
	})
}

func FuzzImagesText(f *testing.F) {
	addSharedSeeds(f, "images.txt")
	f.Add(writeImagesText(sampleModel().Images))
	f.Add([]byte("1 1 0 0 0 0 0 0 1 a.png\n\n2 1 0 0 0 0 0 0 1 b c.png\n1 2 -1 3 4 7\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		imgs, err := ReadImagesText(bytes.NewReader(data), "images.txt")
		if err != nil {
			checkErr(t, err, "images.txt", "line")
			return
		}
		for _, im := range imgs {
			// A name with a line break cannot be written as text; the
			// reader never produces one, since it splits lines first.
			if strings.ContainsAny(im.Name, "\n") {
				t.Fatalf("image %d: name %q holds a line break", im.ID, im.Name)
			}
		}
		again, err := ReadImagesText(bytes.NewReader(writeImagesText(imgs)), "images.txt")
		if err != nil {
			t.Fatalf("re-written images fail: %v", err)
		}
		if d := diffImages(imgs, again); d != "" {
			t.Fatalf("re-written images differ: %s", d)
		}
	})
}

func FuzzPoints3DText(f *testing.F) {
	addSharedSeeds(f, "points3D.txt")
	f.Add(writePoints3DText(sampleModel().Points))
	f.Add([]byte("1 0 0 0 1 2 3 0.5 1 0 2 0\n# c\n\n2 1e3 -0 NaN 255 0 9 0\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		pts, err := ReadPoints3DText(bytes.NewReader(data), "points3D.txt")
		if err != nil {
			checkErr(t, err, "points3D.txt", "line")
			return
		}
		again, err := ReadPoints3DText(bytes.NewReader(writePoints3DText(pts)), "points3D.txt")
		if err != nil {
			t.Fatalf("re-written points fail: %v", err)
		}
		if d := diffPoints(pts, again); d != "" {
			t.Fatalf("re-written points differ: %s", d)
		}
	})
}

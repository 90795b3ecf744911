package convert

import (
	"bufio"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/io/colmap"
)

// fakeColmapScript stands in for COLMAP: it appends its arguments to
// $FAKE_DIR/calls (one call a line, tab-separated), prints the progress
// lines COLMAP 3.8 prints, and writes what each command would: the
// database, the models prepared in $FAKE_DIR/models, and for
// image_undistorter the photos and the model in $FAKE_DIR/undistorted.
// FAKE_FAIL=<command> makes that command fail with status 3, FAKE_SLEEP=<command>
// makes it wait (exec, so that an interrupt reaches the waiting process).
const fakeColmapScript = `#!/bin/sh
for a in "$@"; do printf '%s\t' "$a" >> "$FAKE_DIR/calls"; done
echo >> "$FAKE_DIR/calls"
sub=$1
shift
while [ $# -gt 0 ]; do
	case $1 in
	--database_path) db=$2; shift ;;
	--image_path) img=$2; shift ;;
	--output_path) outp=$2; shift ;;
	esac
	shift
done
if [ "$FAKE_FAIL" = "$sub" ]; then
	echo "fake $sub: starting"
	echo "fake $sub: something broke" >&2
	exit 3
fi
if [ "$FAKE_SLEEP" = "$sub" ]; then
	echo "fake $sub: waiting"
	exec sleep 60
fi
case $sub in
help)
	echo "COLMAP 3.8 -- Structure-from-Motion and Multi-View Stereo (fake)" ;;
feature_extractor)
	n=$(ls "$img" | wc -l | tr -d ' ')
	i=0
	for f in "$img"/*; do i=$((i+1)); echo "Processed file [$i/$n]"; done
	echo db > "$db" ;;
exhaustive_matcher)
	echo "Matching block [1/1, 1/1] in 0.01s" ;;
sequential_matcher)
	echo "Matching image [1/2]"
	echo "Matching image [2/2]" ;;
mapper)
	cp -R "$FAKE_DIR/models/." "$outp/"
	echo "Registering image #1 (1)"
	echo "Registering image #2 (2)" ;;
image_undistorter)
	mkdir -p "$outp/images" "$outp/sparse" "$outp/stereo"
	cp "$img"/* "$outp/images/"
	cp "$FAKE_DIR/undistorted/"* "$outp/sparse/"
	echo "Undistorting image [1/1]" ;;
*)
	echo "unknown command $sub" >&2
	exit 1 ;;
esac
`

// fake is a fake COLMAP set up in a temporary directory.
type fake struct {
	exe string
	dir string // FAKE_DIR
	env []string
}

// photoW, photoH is the size of the test photos.
const photoW, photoH = 24, 16

// newFake writes the fake COLMAP; models gives the registered photo count
// of each model the mapper "writes" (sparse/0, sparse/1, ...), photos the
// photo names in the folder the model refers to.
func newFake(t *testing.T, photos []string, models ...int) *fake {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake COLMAP is a POSIX shell script")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "colmap")
	if err := os.WriteFile(exe, []byte(fakeColmapScript), 0o755); err != nil {
		t.Fatal(err)
	}
	largest := 0
	for i, n := range models {
		if err := colmap.WriteBinary(filepath.Join(dir, "models", fmt.Sprint(i)), testModel("OPENCV", photos[:n])); err != nil {
			t.Fatal(err)
		}
		if n > models[largest] {
			largest = i
		}
	}
	if len(models) == 0 {
		if err := os.MkdirAll(filepath.Join(dir, "models"), 0o755); err != nil {
			t.Fatal(err)
		}
	} else if err := colmap.WriteBinary(filepath.Join(dir, "undistorted"), testModel("PINHOLE", photos[:models[largest]])); err != nil {
		t.Fatal(err)
	}
	return &fake{exe: exe, dir: dir, env: []string{"PATH=" + os.Getenv("PATH"), "FAKE_DIR=" + dir}}
}

// calls returns the fake's calls, each as its arguments.
func (f *fake) calls(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		out = append(out, strings.Split(strings.TrimSuffix(sc.Text(), "\t"), "\t"))
	}
	return out
}

// testModel is a model of the named photos: one camera of the given
// model, cameras on a ring looking at the origin, and a few points.
func testModel(camModel string, names []string) *colmap.Model {
	params := []float64{20, 20, photoW / 2, photoH / 2}
	if camModel == "OPENCV" {
		params = append(params, 0.01, 0, 0, 0)
	}
	m := &colmap.Model{Cameras: map[uint32]colmap.Camera{1: {ID: 1, Model: camModel, Width: photoW, Height: photoH, Params: params}}}
	for i, n := range names {
		// Identity rotation, cameras spread along x, all looking down +z at the points.
		m.Images = append(m.Images, colmap.Image{ID: uint32(i + 1), Q: [4]float64{1, 0, 0, 0}, T: [3]float64{float64(i) * 0.1, 0, 4}, CameraID: 1, Name: n})
	}
	for i := 0; i < 8; i++ {
		m.Points = append(m.Points, colmap.Point3D{ID: uint64(i + 1), XYZ: [3]float64{float64(i%3) - 1, float64(i/3) - 1, 0}, RGB: [3]uint8{200, 100, 50}})
	}
	return m
}

// writePhotos writes small distinct photos named names into dir (JPEG for
// .jpg/.jpeg names, PNG otherwise) of size w×h.
func writePhotos(t *testing.T, dir string, names []string, w, h int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				m.Set(x, y, color.RGBA{uint8(10 * x), uint8(10 * y), uint8(40 * i), 255})
			}
		}
		f, err := os.Create(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		switch strings.ToLower(filepath.Ext(n)) {
		case ".jpg", ".jpeg":
			err = jpeg.Encode(f, m, &jpeg.Options{Quality: 95})
		default:
			err = png.Encode(f, m)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// collect gathers Run's events.
type collect struct{ events []Event }

func (c *collect) emit(e Event) { c.events = append(c.events, e) }

// started returns the stages started, in order.
func (c *collect) started() []string {
	var out []string
	for _, e := range c.events {
		if s, ok := e.(StageStarted); ok {
			out = append(out, s.Stage)
		}
	}
	return out
}

// lastProgress returns the last progress of stage (0, 0 when none).
func (c *collect) lastProgress(stage string) (int, int) {
	d, n := 0, 0
	for _, e := range c.events {
		if p, ok := e.(StageProgress); ok && p.Stage == stage {
			d, n = p.Done, p.Total
		}
	}
	return d, n
}

func runFake(t *testing.T, ctx context.Context, o Options) (*Result, *collect, error) {
	t.Helper()
	c := &collect{}
	res, err := Run(ctx, o, c.emit)
	return res, c, err
}

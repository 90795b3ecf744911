package demo

import (
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
)

var update = flag.Bool("update", false, "rewrite ../../testdata/demo from the generator")

// testdataDir is the repository's demo capture, written by WriteCOLMAP.
const testdataDir = "../../testdata/demo"

// testdataOptions size the committed capture: small enough to keep in the repository, large
// enough to train on.
func testdataOptions() Options {
	return Options{Views: 16, Width: 64, Height: 48, TestEvery: 8, Seed: 1, Workers: 2}
}

// TestTestdata checks that testdata/demo is what WriteCOLMAP makes of the demo scene today,
// read back through the dataset loader: the same views and cameras, images within 8-bit
// rounding, the same points. `go test ./internal/demo -run TestTestdata -update` rewrites it.
func TestTestdata(t *testing.T) {
	ds, err := Generate(testdataOptions())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.RemoveAll(testdataDir); err != nil {
			t.Fatal(err)
		}
		if err := WriteCOLMAP(testdataDir, ds); err != nil {
			t.Fatal(err)
		}
	}
	opt := dataset.DefaultOptions()
	opt.Workers = 2
	got, err := dataset.Load(testdataDir, opt)
	if err != nil {
		t.Fatalf("%v (regenerate with: go test ./internal/demo -run TestTestdata -update)", err)
	}
	want := map[string]dataset.View{}
	for _, v := range append(ds.Train, ds.Test...) {
		want[v.Name+".png"] = v
	}
	all := append(got.Train, got.Test...)
	if len(all) != len(want) || len(got.Test) != 2 {
		t.Fatalf("%d views (%d test), want %d (2 test)", len(all), len(got.Test), len(want))
	}
	for _, v := range all {
		w, ok := want[v.Name]
		if !ok {
			t.Fatalf("view %s is not one of the generator's", v.Name)
		}
		a, b := v.Camera, w.Camera
		if a.Width != b.Width || a.Height != b.Height || a.Fx != b.Fx || a.Fy != b.Fy || a.Cx != b.Cx || a.Cy != b.Cy {
			t.Fatalf("view %s: intrinsics %+v, want %+v", v.Name, a, b)
		}
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				if math.Abs(a.R[i][j]-b.R[i][j]) > 1e-12 {
					t.Fatalf("view %s: R %v, want %v", v.Name, a.R, b.R)
				}
			}
			if math.Abs(a.T[i]-b.T[i]) > 1e-12 {
				t.Fatalf("view %s: T %v, want %v", v.Name, a.T, b.T)
			}
		}
		for i, x := range v.Image.RGB {
			if d := math.Abs(float64(x) - float64(min(max(w.Image.RGB[i], 0), 1))); d > 0.5/255+1e-6 {
				t.Fatalf("view %s: value %d is %v, the render's %v", v.Name, i, x, w.Image.RGB[i])
			}
		}
	}
	if len(got.Points) != len(ds.Points) {
		t.Fatalf("%d point values, want %d", len(got.Points), len(ds.Points))
	}
	for i, p := range got.Points {
		if p != ds.Points[i] || math.Abs(float64(got.PointColors[i]-ds.PointColors[i])) > 0.5/255+1e-6 {
			t.Fatalf("point value %d: %v colour %v, want %v colour %v", i, p, got.PointColors[i], ds.Points[i], ds.PointColors[i])
		}
	}
}

// TestWriteCOLMAPNamesTheFile checks that a view the writer cannot place fails with its name.
func TestWriteCOLMAPNamesTheFile(t *testing.T) {
	ds, err := Generate(Options{Views: 2, Width: 8, Height: 8, Seed: 1, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ds.Train[1].Image.RGB = ds.Train[1].Image.RGB[:5]
	dir := t.TempDir()
	err = WriteCOLMAP(dir, ds)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "images", ds.Train[1].Name+".png")) {
		t.Fatalf("WriteCOLMAP with a short image: %v, want an error naming its file", err)
	}
}

package dataset

import (
	"math"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/colmap"
)

// Tests on the real captures in ../shared/data (see ../shared/README.md).

func allViews(ds *Dataset) []View {
	return append(append([]View(nil), ds.Train...), ds.Test...)
}

// checkSplit verifies the every-8th-by-name split: test views are names
// 0, 8, 16, ... of the sorted list.
func checkSplit(t *testing.T, ds *Dataset, total int) {
	t.Helper()
	wantTest := (total + 7) / 8
	if len(ds.Train) != total-wantTest || len(ds.Test) != wantTest {
		t.Fatalf("%d train, %d test views, want %d and %d", len(ds.Train), len(ds.Test), total-wantTest, wantTest)
	}
	var names []string
	for _, v := range allViews(ds) {
		names = append(names, v.Name)
	}
	sort.Strings(names)
	for i, v := range ds.Test {
		if v.Name != names[8*i] {
			t.Fatalf("test view %d is %s, want %s", i, v.Name, names[8*i])
		}
	}
}

// The duck capture in both formats at downscale 2: sizes, split, points,
// and the camera conventions. The COLMAP reconstruction and the true poses
// differ by a similarity (scale, rotation, translation); estimated from the
// cameras, it must map COLMAP's 3D points to where the transforms cameras
// see them, within a pixel or two.
func TestDuck(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "data", "duck")
	opt := DefaultOptions()
	opt.Downscale = 2
	col, err := Load(dir, opt) // both formats present: COLMAP by default
	if err != nil {
		t.Fatal(err)
	}
	opt.Format = FormatTransforms
	tra, err := Load(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	if col.Format != FormatCOLMAP || tra.Format != FormatTransforms {
		t.Fatalf("formats %q and %q", col.Format, tra.Format)
	}
	for _, ds := range []*Dataset{col, tra} {
		checkSplit(t, ds, 96)
		for _, v := range allViews(ds) {
			if v.Image.W != 200 || v.Image.H != 200 || v.Camera.Width != 200 || v.Camera.Height != 200 || v.Alpha != nil {
				t.Fatalf("%s view %s: image %d×%d, camera %d×%d", ds.Format, v.Name, v.Image.W, v.Image.H, v.Camera.Width, v.Camera.Height)
			}
		}
	}
	if c := col.Train[0].Camera; math.Abs(c.Fx-428.17714823327259/2) > 1e-9 || math.Abs(c.Fy-424.48480422843426/2) > 1e-9 || c.Cx != 100 {
		t.Errorf("COLMAP camera intrinsics %v %v %v, want sparse/0's halved", c.Fx, c.Fy, c.Cx)
	}
	if c := tra.Train[0].Camera; math.Abs(c.Fx-428.9013816294943/2) > 1e-9 || c.Cx != 100 {
		t.Errorf("transforms camera intrinsics %v %v, want fl_x and cx halved", c.Fx, c.Cx)
	}
	if len(col.Points) != 3*3730 || len(col.PointColors) != len(col.Points) {
		t.Errorf("%d point values, %d colour values, want 3·3730", len(col.Points), len(col.PointColors))
	}
	if tra.Points != nil {
		t.Errorf("transforms: %d point values, want none", len(tra.Points))
	}
	// Every true camera is 4 from the origin, at 10–40° elevation: the
	// farthest is a little over 4 from the mean centre.
	if tra.Extent < 1.1*4 || tra.Extent > 1.1*4.5 {
		t.Errorf("transforms extent %v, want 1.1 × (4 … 4.5)", tra.Extent)
	}

	// Pair the views by image file name.
	byName := map[string]camera.Camera{}
	for _, v := range allViews(tra) {
		byName[path.Base(v.Name)] = v.Camera
	}
	var cc, nc []camera.Camera
	for _, v := range allViews(col) {
		n, ok := byName[v.Name]
		if !ok {
			t.Fatalf("COLMAP view %s has no transforms twin", v.Name)
		}
		cc = append(cc, v.Camera)
		nc = append(nc, n)
	}
	s, q, tr := Similarity(cc, nc)
	t.Logf("similarity COLMAP → transforms: scale %.4f, translation %.4f", s, tr)
	if r := s * col.Extent / tra.Extent; math.Abs(r-1) > 0.01 {
		t.Errorf("COLMAP extent %v × scale %v differs from the transforms extent %v by %.2f%%", col.Extent, s, tra.Extent, 100*math.Abs(r-1))
	}
	var centreErr float64
	for i := range cc {
		p := ApplySimilarity(s, q, tr, cc[i].Center())
		n := nc[i].Center()
		centreErr += math.Sqrt((p[0]-n[0])*(p[0]-n[0])+(p[1]-n[1])*(p[1]-n[1])+(p[2]-n[2])*(p[2]-n[2])) / float64(len(cc))
	}
	if centreErr > 0.05 {
		t.Errorf("aligned camera centres differ by %.4f on average, want < 0.05 (README: 0.017)", centreErr)
	}
	var diffs []float64
	for k := 0; k < len(col.Points)/3; k += 7 {
		p := [3]float64{float64(col.Points[3*k]), float64(col.Points[3*k+1]), float64(col.Points[3*k+2])}
		pn := ApplySimilarity(s, q, tr, p)
		for i := 0; i < len(cc); i += 5 {
			u1, v1, z1 := project(cc[i], p)
			u2, v2, z2 := project(nc[i], pn)
			if z1 <= 0 || z2 <= 0 || u1 < 0 || v1 < 0 || u1 > 200 || v1 > 200 {
				continue
			}
			diffs = append(diffs, math.Hypot(u1-u2, v1-v2))
		}
	}
	sort.Float64s(diffs)
	if len(diffs) < 1000 {
		t.Fatalf("only %d point projections to compare", len(diffs))
	}
	med, p90 := diffs[len(diffs)/2], diffs[len(diffs)*9/10]
	t.Logf("%d projections: median %.3f px, 90th percentile %.3f px, max %.3f px", len(diffs), med, p90, diffs[len(diffs)-1])
	if med > 1.5 || p90 > 3 {
		t.Errorf("COLMAP and transforms cameras disagree: median %.3f px, 90th percentile %.3f px (want < 1.5 and < 3)", med, p90)
	}

	// PointsFrom carries COLMAP's points into the transforms frame the same
	// way, and leaves them where they are for the COLMAP dataset itself.
	sparse := filepath.Join(dir, "sparse", "0")
	xyz, _, note, err := PointsFrom(tra, sparse)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(note)
	if len(xyz) != len(col.Points) {
		t.Fatalf("PointsFrom: %d values, want %d", len(xyz), len(col.Points))
	}
	for k := 0; k < len(xyz)/3; k += 97 {
		want := ApplySimilarity(s, q, tr, [3]float64{float64(col.Points[3*k]), float64(col.Points[3*k+1]), float64(col.Points[3*k+2])})
		for a := 0; a < 3; a++ {
			if math.Abs(float64(xyz[3*k+a])-want[a]) > 1e-4 {
				t.Fatalf("PointsFrom point %d: %v, want %v", k, xyz[3*k:3*k+3], want)
			}
		}
	}
	same, _, _, err := PointsFrom(col, sparse)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range same {
		if math.Abs(float64(v-col.Points[i])) > 1e-4*(1+math.Abs(float64(v))) {
			t.Fatalf("PointsFrom on the model's own dataset moved value %d: %v → %v", i, col.Points[i], v)
		}
	}

	// The true cameras aim at (0, 0, 0.6) above the duck: image centre.
	for _, v := range allViews(tra) {
		u, w, z := project(v.Camera, [3]float64{0, 0, 0.6})
		if z <= 0 || math.Abs(u-100) > 0.5 || math.Abs(w-100) > 0.5 {
			t.Fatalf("view %s: aim point projects to (%.2f, %.2f), z %.2f; want the image centre", v.Name, u, w, z)
		}
	}
}

// bonsaiSubset builds a small capture in a temporary directory from three
// bonsai photos (symbolic links, nothing copied) and a COLMAP text model
// holding just their cameras and poses from the real model.
func bonsaiSubset(t *testing.T, sparse, images string) (dir string, model *colmap.Model) {
	t.Helper()
	bonsai := filepath.Join(sharedDir(t), "data", "bonsai")
	m, err := colmap.ReadModel(filepath.Join(bonsai, sparse))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	sub := m.Images[:3]
	for _, im := range sub {
		if err := os.Symlink(filepath.Join(bonsai, images, im.Name), filepath.Join(dir, "images", im.Name)); err != nil {
			t.Skipf("cannot link the bonsai photos: %v", err)
		}
	}
	writeColmapText(t, dir, "sparse/0", m.Cameras, sub, nil)
	return dir, m
}

func TestBonsaiAutoDownscale(t *testing.T) {
	dir, m := bonsaiSubset(t, "sparse/0", "images")
	ref, err := colmap.ToCamera(m.Images[0], m.Cameras)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		maxWidth, w, h int
	}{
		{0, 799, 532},   // 799 < 1600: loaded as they are
		{400, 400, 266}, // 532·400/799 = 266.3
	}
	for _, tc := range tests {
		opt := DefaultOptions()
		opt.MaxWidth = tc.maxWidth
		ds, err := Load(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		checkSplit(t, ds, 3)
		v := ds.Test[0]
		if v.Name != m.Images[0].Name || v.Image.W != tc.w || v.Image.H != tc.h {
			t.Fatalf("max width %d: view %s %d×%d, want %s %d×%d", tc.maxWidth, v.Name, v.Image.W, v.Image.H, m.Images[0].Name, tc.w, tc.h)
		}
		if want := ref.Scaled(tc.w, tc.h); !reflect.DeepEqual(v.Camera, want) {
			t.Errorf("max width %d: camera %+v, want %+v", tc.maxWidth, v.Camera, want)
		}
	}
}

func TestBonsaiDistorted(t *testing.T) {
	bonsai := filepath.Join(sharedDir(t), "data", "bonsai")
	opt := DefaultOptions()
	opt.SparseDir = "distorted/sparse/0"
	opt.ImagesDir = "input"
	opt.Downscale = 4
	// Refused before any image is read.
	_, err := Load(bonsai, opt)
	if err == nil || !strings.Contains(err.Error(), "OPENCV") || !strings.Contains(err.Error(), "image_undistorter") {
		t.Fatalf("distorted model without AllowDistortion: error %v, want a refusal naming OPENCV and image_undistorter", err)
	}

	// Accepted with AllowDistortion (three photos; the whole capture is in
	// TestBonsaiFull).
	dir, _ := bonsaiSubset(t, "distorted/sparse/0", "input")
	opt = DefaultOptions()
	opt.AllowDistortion = true
	opt.Downscale = 4
	ds, err := Load(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	v := ds.Train[0]
	if v.Image.W != 200 || v.Image.H != 133 || v.Camera.Distortion.Model != "OPENCV" || len(v.Camera.Distortion.Params) != 4 {
		t.Errorf("view %s: %d×%d, distortion %+v; want 200×133 OPENCV", v.Name, v.Image.W, v.Image.H, v.Camera.Distortion)
	}
}

// The whole bonsai capture, undistorted and distorted, at downscale 4:
// 2 × 292 JPEG decodes, several seconds on two cores.
func TestBonsaiFull(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 584 photos; skipped with -short")
	}
	bonsai := filepath.Join(sharedDir(t), "data", "bonsai")
	opt := DefaultOptions()
	opt.Downscale = 4
	ds, err := Load(bonsai, opt)
	if err != nil {
		t.Fatal(err)
	}
	checkSplit(t, ds, 292)
	if len(ds.Points) != 3*107819 {
		t.Errorf("%d point values, want 3·107819", len(ds.Points))
	}
	for _, v := range allViews(ds) {
		if v.Image.W != 200 || v.Image.H != 133 || v.Camera.Width != 200 || v.Camera.Height != 133 || !v.Camera.Distortion.IsPinhole() {
			t.Fatalf("view %s: image %d×%d, camera %+v", v.Name, v.Image.W, v.Image.H, v.Camera)
		}
	}
	if ds.Extent <= 0 || math.IsNaN(ds.Extent) {
		t.Errorf("extent %v", ds.Extent)
	}

	opt.SparseDir = "distorted/sparse/0"
	opt.ImagesDir = "input"
	opt.AllowDistortion = true
	dd, err := Load(bonsai, opt)
	if err != nil {
		t.Fatal(err)
	}
	checkSplit(t, dd, 292)
	if v := dd.Train[0]; v.Image.W != 200 || v.Image.H != 133 || v.Camera.Distortion.Model != "OPENCV" {
		t.Errorf("distorted view %s: %d×%d, distortion %+v", v.Name, v.Image.W, v.Image.H, v.Camera.Distortion)
	}
	// Undistortion keeps the poses: the same image has the same centre.
	if a, b := ds.Train[0].Camera.Center(), dd.Train[0].Camera.Center(); math.Abs(a[0]-b[0])+math.Abs(a[1]-b[1])+math.Abs(a[2]-b[2]) > 1e-6 {
		t.Errorf("view %s: centre %v undistorted, %v distorted", ds.Train[0].Name, a, b)
	}
}

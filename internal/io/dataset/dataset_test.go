package dataset

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/io/colmap"
)

const (
	genW, genH = 8, 6 // generated image size
	genViews   = 10
	genF       = 10.0 // focal length in pixels at genW×genH
)

var genCam = colmap.Camera{ID: 1, Model: "PINHOLE", Width: genW, Height: genH, Params: []float64{genF, genF, genW / 2, genH / 2}}

// genKind names the generated dataset layouts.
type genKind string

const (
	genCOLMAP     genKind = "colmap"
	genNerfstudio genKind = "transforms with w h fl_x"
	genSynthetic  genKind = "transforms with camera_angle_x only"
)

// makeDataset writes a generated capture of genViews images (pattern
// texture, genW×genH) on a ring, in the given layout, and returns its dir.
func makeDataset(t testing.TB, kind genKind) string {
	t.Helper()
	dir := t.TempDir()
	imgs := ringImages(genViews)
	for _, im := range imgs {
		writeImage(t, dir, "images/"+im.Name, genW, genH, pattern)
	}
	switch kind {
	case genCOLMAP:
		pts := []colmap.Point3D{{ID: 1, XYZ: [3]float64{0.1, 0.2, 0.3}, RGB: [3]uint8{255, 0, 51}}, {ID: 7, XYZ: [3]float64{-1, 0, 1}, RGB: [3]uint8{0, 255, 102}}}
		writeColmapText(t, dir, "sparse/0", map[uint32]colmap.Camera{1: genCam}, imgs, pts)
	default:
		head := fmt.Sprintf(`"fl_x": %v, "fl_y": %v, "w": %d, "h": %d`, genF, genF, genW, genH)
		if kind == genSynthetic {
			head = fmt.Sprintf(`"camera_angle_x": %s`, fmtF(2*math.Atan(0.5*genW/genF)))
		}
		frames := make([]string, len(imgs))
		for i, im := range imgs {
			// Paths without extension, as NeRF-synthetic writes them.
			frames[i] = transformsFrame(im, "./images/"+strings.TrimSuffix(im.Name, ".png"))
		}
		writeFile(t, dir, "transforms.json", fmt.Sprintf("{%s, \"frames\": [\n%s\n]}", head, strings.Join(frames, ",\n")))
	}
	return dir
}

func rgbAt(v View, x, y int) [3]float32 {
	i := (y*v.Image.W + x) * 3
	return [3]float32{v.Image.RGB[i], v.Image.RGB[i+1], v.Image.RGB[i+2]}
}

func TestLoadGenerated(t *testing.T) {
	var ref *Dataset
	for _, kind := range []genKind{genCOLMAP, genNerfstudio, genSynthetic} {
		t.Run(string(kind), func(t *testing.T) {
			ds, err := Load(makeDataset(t, kind), DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if len(ds.Train) != 8 || len(ds.Test) != 2 {
				t.Fatalf("%d train, %d test views, want 8 and 2", len(ds.Train), len(ds.Test))
			}
			wantTest := []string{"im_00.png", "im_08.png"}
			for i, v := range ds.Test {
				if filepath.Base(v.Name) != wantTest[i] {
					t.Errorf("test view %d is %q, want %s", i, v.Name, wantTest[i])
				}
			}
			if math.Abs(ds.Extent-3.3) > 1e-9 {
				t.Errorf("extent %v, want 1.1 × ring radius 3", ds.Extent)
			}
			all := append(append([]View(nil), ds.Train...), ds.Test...)
			for _, v := range all {
				c := v.Camera
				if v.Image.W != genW || v.Image.H != genH || c.Width != genW || c.Height != genH ||
					math.Abs(c.Fx-genF) > 1e-9 || math.Abs(c.Fy-genF) > 1e-9 || c.Cx != genW/2 || c.Cy != genH/2 {
					t.Fatalf("view %s: image %d×%d, camera %+v", v.Name, v.Image.W, v.Image.H, c)
				}
				want := pattern(3, 2)
				if got := rgbAt(v, 3, 2); got != [3]float32{float32(want.R) / 255, float32(want.G) / 255, float32(want.B) / 255} {
					t.Fatalf("view %s: pixel (3,2) = %v, want %v", v.Name, got, want)
				}
				// Every ring camera looks at the origin.
				u, vv, z := project(c, [3]float64{0, 0, 0})
				if z <= 0 || math.Abs(u-genW/2) > 1e-9 || math.Abs(vv-genH/2) > 1e-9 {
					t.Fatalf("view %s: origin projects to (%v, %v, z=%v)", v.Name, u, vv, z)
				}
			}
			switch kind {
			case genCOLMAP:
				ref = ds
				want := []float32{0.1, 0.2, 0.3, -1, 0, 1}
				wantC := []float32{1, 0, 0.2, 0, 1, 0.4}
				if !reflect.DeepEqual(ds.Points, want) || !reflect.DeepEqual(ds.PointColors, wantC) {
					t.Errorf("points %v colours %v, want %v %v", ds.Points, ds.PointColors, want, wantC)
				}
				if ds.Format != FormatCOLMAP {
					t.Errorf("format %q", ds.Format)
				}
			default:
				if ds.Points != nil || ds.PointColors != nil || ds.Format != FormatTransforms {
					t.Errorf("format %q, points %v: want transforms with no points", ds.Format, ds.Points)
				}
				if ref == nil {
					t.Skip("COLMAP case failed; no reference cameras")
				}
				// The same poses written both ways give the same cameras.
				for i, v := range ds.Train {
					a, b := ref.Train[i].Camera, v.Camera
					for r := 0; r < 3; r++ {
						for k := 0; k < 3; k++ {
							if math.Abs(a.R[r][k]-b.R[r][k]) > 1e-9 {
								t.Fatalf("view %s: R differs from COLMAP's: %v vs %v", v.Name, b.R, a.R)
							}
						}
						if math.Abs(a.T[r]-b.T[r]) > 1e-9 {
							t.Fatalf("view %s: T differs from COLMAP's: %v vs %v", v.Name, b.T, a.T)
						}
					}
				}
			}
		})
	}
}

func TestDownscale(t *testing.T) {
	for _, kind := range []genKind{genCOLMAP, genNerfstudio, genSynthetic} {
		for _, folder := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, images_2 %v", kind, folder), func(t *testing.T) {
				dir := makeDataset(t, kind)
				if folder {
					for i := 0; i < genViews; i++ {
						writeImage(t, dir, fmt.Sprintf("images_2/im_%02d.png", i), genW/2, genH/2, flat(200))
					}
				}
				opt := DefaultOptions()
				opt.Downscale = 2
				ds, err := Load(dir, opt)
				if err != nil {
					t.Fatal(err)
				}
				v := ds.Train[0]
				c := v.Camera
				if v.Image.W != 4 || v.Image.H != 3 || c.Width != 4 || c.Height != 3 || math.Abs(c.Fx-genF/2) > 1e-9 || c.Cx != 2 || c.Cy != 1.5 {
					t.Fatalf("image %d×%d, camera %+v; want 4×3 with halved intrinsics", v.Image.W, v.Image.H, c)
				}
				want := [3]float32{200. / 255, 200. / 255, 200. / 255}
				if !folder {
					// The exact 2×2 box average of the pattern.
					var s [3]float32
					for y := 2; y < 4; y++ {
						for x := 2; x < 4; x++ {
							p := pattern(x, y)
							s[0] += float32(p.R) / 255 / 4
							s[1] += float32(p.G) / 255 / 4
							s[2] += float32(p.B) / 255 / 4
						}
					}
					want = s
				}
				got := rgbAt(v, 1, 1)
				for k := range got {
					if math.Abs(float64(got[k]-want[k])) > 1e-6 {
						t.Fatalf("pixel (1,1) = %v, want %v", got, want)
					}
				}
			})
		}
	}
	// A factor that does not divide the size: round(8/3) × round(6/3).
	opt := DefaultOptions()
	opt.Downscale = 3
	ds, err := Load(makeDataset(t, genCOLMAP), opt)
	if err != nil {
		t.Fatal(err)
	}
	if v := ds.Train[0]; v.Image.W != 3 || v.Image.H != 2 || math.Abs(v.Camera.Fx-genF*3/8) > 1e-9 || math.Abs(v.Camera.Fy-genF*2/6) > 1e-9 {
		t.Errorf("downscale 3: image %d×%d, camera %+v", v.Image.W, v.Image.H, v.Camera)
	}
}

func TestAutoDownscale(t *testing.T) {
	dir := makeDataset(t, genCOLMAP)
	tests := []struct {
		maxWidth, downscale int
		w, h                int
	}{
		{0, 0, genW, genH}, // 1600 by default: unchanged
		{4, 0, 4, 3},       // wider than 4: scaled to width 4
		{5, 0, 5, 4},       // 6·5/8 = 3.75 rounds to 4
		{4, 1, genW, genH}, // an explicit factor turns auto off
	}
	for _, tc := range tests {
		opt := DefaultOptions()
		opt.MaxWidth, opt.Downscale = tc.maxWidth, tc.downscale
		ds, err := Load(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		v := ds.Train[0]
		if v.Image.W != tc.w || v.Image.H != tc.h || v.Camera.Width != tc.w || v.Camera.Height != tc.h {
			t.Errorf("%+v: image %d×%d camera %d×%d, want %d×%d", tc, v.Image.W, v.Image.H, v.Camera.Width, v.Camera.Height, tc.w, tc.h)
		}
		if math.Abs(v.Camera.Fx-genF*float64(tc.w)/genW) > 1e-9 {
			t.Errorf("%+v: fx %v, want %v", tc, v.Camera.Fx, genF*float64(tc.w)/genW)
		}
	}
}

func TestRGBAComposite(t *testing.T) {
	dir := t.TempDir()
	writeImage(t, dir, "images/a.png", 2, 1, func(x, y int) color.NRGBA {
		if x == 0 {
			return color.NRGBA{255, 0, 0, 0} // fully transparent red
		}
		return color.NRGBA{255, 255, 0, 51} // yellow at 20%
	})
	writeFile(t, dir, "transforms.json", `{"camera_angle_x": 1, "frames": [{"file_path": "images/a", "transform_matrix": [[1,0,0,0],[0,1,0,0],[0,0,1,3],[0,0,0,1]]}]}`)
	opt := DefaultOptions()
	opt.Background = [3]float32{0, 0, 1}
	// One view would be test view 0 of the every-8th split, leaving
	// nothing to train on.
	if _, err := Load(dir, opt); err == nil || !strings.Contains(err.Error(), "no training views") {
		t.Fatalf("one view with TestEvery 8: error %v, want no training views", err)
	}
	opt.TestEvery = 0
	ds, err := Load(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Test) != 0 || len(ds.Train) != 1 {
		t.Fatalf("%d train, %d test", len(ds.Train), len(ds.Test))
	}
	v := ds.Train[0]
	want := []float32{0, 0, 1, 0.2, 0.2, 0.8}
	for i, w := range want {
		if math.Abs(float64(v.Image.RGB[i]-w)) > 1e-6 {
			t.Fatalf("RGB %v, want %v", v.Image.RGB, want)
		}
	}
	if v.Image.Alpha != nil || len(v.Alpha) != 2 || v.Alpha[0] != 0 || math.Abs(float64(v.Alpha[1])-0.2) > 1e-6 {
		t.Errorf("image alpha %v, view alpha %v; want nil and [0 0.2]", v.Image.Alpha, v.Alpha)
	}
	if v.Camera.Width != 2 || v.Camera.Height != 1 || math.Abs(v.Camera.Fx-1/math.Tan(0.5)) > 1e-9 {
		t.Errorf("camera %+v: want 2×1 with fx from camera_angle_x", v.Camera)
	}
}

func TestSplitFiles(t *testing.T) {
	dir := t.TempDir()
	imgs := ringImages(6)
	var train, test, val []string
	for i, im := range imgs {
		sub := []string{"train", "test", "val"}[min(i/3+i/5, 2)]
		p := sub + "/" + strings.TrimSuffix(im.Name, ".png")
		writeImage(t, dir, p+".png", genW, genH, pattern)
		f := transformsFrame(im, "./"+p)
		switch sub {
		case "train":
			train = append(train, f)
		case "test":
			test = append(test, f)
		default:
			val = append(val, f)
		}
	}
	head := fmt.Sprintf(`"camera_angle_x": %s`, fmtF(2*math.Atan(0.5*genW/genF)))
	file := func(frames []string) string {
		return fmt.Sprintf("{%s, \"frames\": [%s]}", head, strings.Join(frames, ","))
	}
	writeFile(t, dir, "transforms_train.json", file(train))
	writeFile(t, dir, "transforms_val.json", file(val))
	count := func(opt Options) (int, int, []string) {
		t.Helper()
		ds, err := Load(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, v := range ds.Test {
			names = append(names, v.Name)
		}
		return len(ds.Train), len(ds.Test), names
	}
	// No test file: the val file is the test set.
	if tr, te, names := count(DefaultOptions()); tr != 3 || te != 1 || names[0] != "val/im_05.png" {
		t.Errorf("train+val: %d train, %d test %v; want 3 and [val/im_05.png]", tr, te, names)
	}
	writeFile(t, dir, "transforms_test.json", file(test))
	if tr, te, names := count(DefaultOptions()); tr != 3 || te != 2 || names[0] != "test/im_03.png" || names[1] != "test/im_04.png" {
		t.Errorf("train+test: %d train, %d test %v; want 3 and test/im_03, im_04", tr, te, names)
	}
	opt := DefaultOptions()
	opt.TestEvery = 0
	if tr, te, _ := count(opt); tr != 3 || te != 0 {
		t.Errorf("TestEvery 0: %d train, %d test; want 3 and 0", tr, te)
	}
}

func TestNerfstudioPointCloud(t *testing.T) {
	dir := makeDataset(t, genNerfstudio)
	js, err := os.ReadFile(filepath.Join(dir, "transforms.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "transforms.json", strings.Replace(string(js), "{", `{"ply_file_path": "sparse_pc.ply", `, 1))
	writeFile(t, dir, "sparse_pc.ply", "ply\nformat ascii 1.0\nelement vertex 2\nproperty float x\nproperty float y\nproperty float z\n"+
		"property uchar red\nproperty uchar green\nproperty uchar blue\nend_header\n1 2 3 255 0 51\n-1 0.5 0 0 255 0\n")
	ds, err := Load(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 2, 3, -1, 0.5, 0}; !reflect.DeepEqual(ds.Points, want) {
		t.Errorf("points %v, want %v", ds.Points, want)
	}
	if want := []float32{1, 0, 0.2, 0, 1, 0}; !reflect.DeepEqual(ds.PointColors, want) {
		t.Errorf("colours %v, want %v", ds.PointColors, want)
	}
}

func TestLoadErrors(t *testing.T) {
	type setup func(t *testing.T, dir string) string // returns the dir to load
	gen := func(kind genKind, edit func(t *testing.T, dir string)) setup {
		return func(t *testing.T, _ string) string {
			d := makeDataset(t, kind)
			if edit != nil {
				edit(t, d)
			}
			return d
		}
	}
	remove := func(rel string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
				t.Fatal(err)
			}
		}
	}
	distorted := func(t *testing.T, dir string) {
		c := genCam
		c.Model, c.Params = "OPENCV", []float64{genF, genF, genW / 2, genH / 2, 0.1, 0, 0, 0}
		writeColmapText(t, dir, "sparse/0", map[uint32]colmap.Camera{1: c}, ringImages(genViews), nil)
	}
	tests := []struct {
		name  string
		setup setup
		opt   func(*Options)
		want  []string
	}{
		{"missing image colmap", gen(genCOLMAP, remove("images/im_03.png")), nil,
			[]string{"dataset: view im_03.png", filepath.Join("images", "im_03.png"), "no such file"}},
		{"missing image transforms", gen(genSynthetic, remove("images/im_04.png")), nil,
			[]string{"dataset: view images/im_04.png", "frames[4]", filepath.Join("images", "im_04.png"), "no such file"}},
		{"wrong size", gen(genCOLMAP, func(t *testing.T, dir string) {
			writeImage(t, dir, "images/im_05.png", genW+1, genH, pattern)
		}), nil, []string{"im_05.png", "image is 9×6", "camera is 8×6"}},
		{"wrong size in images_2", gen(genNerfstudio, func(t *testing.T, dir string) {
			for i := 0; i < genViews; i++ {
				writeImage(t, dir, fmt.Sprintf("images_2/im_%02d.png", i), 4, 3, pattern)
			}
			writeImage(t, dir, "images_2/im_06.png", 6, 3, pattern)
		}), func(o *Options) { o.Downscale = 2 }, []string{filepath.Join("images_2", "im_06.png"), "image is 6×3", "camera is 8×6", "/2 gives 4×3"}},
		{"missing image in images_2", gen(genCOLMAP, func(t *testing.T, dir string) {
			writeImage(t, dir, "images_2/im_00.png", 4, 3, pattern)
		}), func(o *Options) { o.Downscale = 2 }, []string{"view im_01.png", filepath.Join("images_2", "im_01.png"), "no such file"}},
		{"no views", func(t *testing.T, dir string) string {
			writeFile(t, dir, "transforms.json", `{"camera_angle_x": 1, "frames": []}`)
			return dir
		}, nil, []string{"dataset:", "no views"}},
		{"no format", func(t *testing.T, dir string) string { return dir }, nil, []string{"no COLMAP model", "no transforms.json"}},
		{"not a directory", func(t *testing.T, dir string) string { return writeFile(t, dir, "file", "x") }, nil, []string{"is not a directory"}},
		{"missing directory", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope") }, nil, []string{"dataset:", "nope", "no such file"}},
		{"format colmap without a model", gen(genSynthetic, nil), func(o *Options) { o.Format = "colmap" }, []string{"format colmap, but no COLMAP model"}},
		{"format transforms without a file", gen(genCOLMAP, nil), func(o *Options) { o.Format = "transforms" }, []string{"format transforms, but no transforms.json"}},
		{"unknown format", gen(genCOLMAP, nil), func(o *Options) { o.Format = "blender" }, []string{`unknown format "blender"`}},
		{"negative downscale", gen(genCOLMAP, nil), func(o *Options) { o.Downscale = -2 }, []string{"downscale -2"}},
		{"bad background", gen(genCOLMAP, nil), func(o *Options) { o.Background[1] = 2 }, []string{"background channel 1"}},
		{"sparse dir without model", gen(genCOLMAP, nil), func(o *Options) { o.SparseDir = "sparse/1" }, []string{"no cameras.bin or cameras.txt", filepath.Join("sparse", "1")}},
		{"distorted colmap", gen(genCOLMAP, distorted), nil, []string{"OPENCV", "image_undistorter", "model.render: ray"}},
		{"distorted transforms", gen(genNerfstudio, func(t *testing.T, dir string) {
			js, err := os.ReadFile(filepath.Join(dir, "transforms.json"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "transforms.json", strings.Replace(string(js), "{", `{"k1": 0.05, `, 1))
		}), nil, []string{"frames[0]", "OPENCV", "model.render: ray"}},
		{"bad transforms", func(t *testing.T, dir string) string {
			writeFile(t, dir, "transforms.json", `{"fl_x": 1, "w": 2, "h": 2, "frames": [{"file_path": "a", "transform_matrix": [[1,0,0],[0,1,0]]}]}`)
			return dir
		}, nil, []string{"dataset: nerf:", "frames[0].transform_matrix: want 4×4 numbers"}},
		{"bad ply", gen(genNerfstudio, func(t *testing.T, dir string) {
			js, err := os.ReadFile(filepath.Join(dir, "transforms.json"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "transforms.json", strings.Replace(string(js), "{", `{"ply_file_path": "pc.ply", `, 1))
			writeFile(t, dir, "pc.ply", "not a ply")
		}), nil, []string{"ply_file_path", "pc.ply"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t, t.TempDir())
			opt := DefaultOptions()
			if tc.opt != nil {
				tc.opt(&opt)
			}
			_, err := Load(dir, opt)
			if err == nil {
				t.Fatalf("no error, want one with %q", tc.want)
			}
			t.Log(err)
			if !strings.HasPrefix(err.Error(), "dataset: ") {
				t.Errorf("error %q does not start with the package", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestAllowDistortion(t *testing.T) {
	dir := makeDataset(t, genCOLMAP)
	c := genCam
	c.Model, c.Params = "OPENCV", []float64{genF, genF, genW / 2, genH / 2, 0.1, 0, 0, 0}
	writeColmapText(t, dir, "sparse/0", map[uint32]colmap.Camera{1: c}, ringImages(genViews), nil)
	opt := DefaultOptions()
	opt.AllowDistortion = true
	ds, err := Load(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	if d := ds.Train[0].Camera.Distortion; d.Model != "OPENCV" || !reflect.DeepEqual(d.Params, []float64{0.1, 0, 0, 0}) {
		t.Errorf("distortion %+v, want OPENCV k1 = 0.1", d)
	}
	if ds.Points != nil {
		t.Errorf("points %v from an empty points3D.txt", ds.Points)
	}
}

// The result must not depend on the number of workers, and neither must
// the error when several images are bad.
func TestWorkersDeterministic(t *testing.T) {
	dir := makeDataset(t, genCOLMAP)
	var first *Dataset
	for _, w := range []int{1, 2, 7, 0} {
		opt := DefaultOptions()
		opt.Workers = w
		ds, err := Load(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = ds
		} else if !reflect.DeepEqual(first, ds) {
			t.Fatalf("workers %d: dataset differs from workers 1", w)
		}
	}
	for _, n := range []string{"im_02.png", "im_07.png", "im_09.png"} {
		if err := os.Remove(filepath.Join(dir, "images", n)); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []int{1, 3, 10} {
		for rep := 0; rep < 3; rep++ {
			opt := DefaultOptions()
			opt.Workers = w
			_, err := Load(dir, opt)
			if err == nil || !strings.Contains(err.Error(), "view im_02.png") {
				t.Fatalf("workers %d: error %v, want the first missing view im_02.png", w, err)
			}
		}
	}
}

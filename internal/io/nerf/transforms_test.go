package nerf

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// sharedDir returns ../shared next to the module root (the directory
// holding go.mod), or skips the test when it is absent.
func sharedDir(t testing.TB) string {
	t.Helper()
	s, ok := findShared()
	if !ok {
		t.Skip("shared data not available: no ../shared/data next to the module root")
	}
	return s
}

func findShared() (string, bool) {
	s, ok := sharedtest.Find()
	if _, err := os.Stat(filepath.Join(s, "data")); !ok || err != nil {
		return s, false
	}
	return s, true
}

const ident = `[[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]`

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"syntax", `{"frames": [}`, "nerf: transforms.json: invalid JSON at byte offset 13"},
		{"truncated", `{"frames": [`, "nerf: transforms.json: invalid JSON"},
		{"trailing data", `{"frames": []} {}`, "data after the top-level value"},
		{"top level array", `[1,2]`, "want a JSON object at the top level, got an array"},
		{"no frames", `{"fl_x": 1}`, "no frames key"},
		{"frames not array", `{"fl_x": 1, "frames": {}}`, "frames: want an array, got an object"},
		{"frame not object", `{"fl_x": 1, "frames": [3]}`, "frames[0]: want an object, got a number"},
		{"missing file_path", `{"fl_x": 1, "frames": [{"transform_matrix": ` + ident + `}]}`, "frames[0].file_path: missing"},
		{"file_path number", `{"fl_x": 1, "frames": [{"file_path": 7, "transform_matrix": ` + ident + `}]}`, "frames[0].file_path: want a non-empty string, got a number"},
		{"missing matrix", `{"fl_x": 1, "frames": [{"file_path": "a"}]}`, "frames[0].transform_matrix: missing"},
		{"matrix 3 rows", `{"fl_x": 1, "frames": [{"file_path": "a", "transform_matrix": ` + ident + `}, {"file_path": "a", "transform_matrix": ` + ident + `}, {"file_path": "a", "transform_matrix": ` + ident + `},
			{"file_path": "b", "transform_matrix": [[1,0,0,0],[0,1,0,0],[0,0,1,0]]}]}`,
			"nerf: transforms.json: frames[3].transform_matrix: want 4×4 numbers"},
		{"matrix short row", `{"fl_x": 1, "frames": [{"file_path": "a", "transform_matrix": [[1,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]}]}`, "frames[0].transform_matrix: want 4×4 numbers (row 0"},
		{"matrix string entry", `{"fl_x": 1, "frames": [{"file_path": "a", "transform_matrix": [[1,0,0,0],[0,1,"x",0],[0,0,1,0],[0,0,0,1]]}]}`, "frames[0].transform_matrix[1][2]: want a number, got a string"},
		{"matrix overflow", `{"fl_x": 1, "frames": [{"file_path": "a", "transform_matrix": [[1,0,0,1e999],[0,1,0,0],[0,0,1,0],[0,0,0,1]]}]}`, "frames[0].transform_matrix[0][3]: number 1e999 out of range"},
		{"singular", `{"fl_x": 1, "frames": [{"file_path": "a", "transform_matrix": [[1,0,0,0],[0,0,0,0],[0,0,1,0],[0,0,0,1]]}]}`, "frames[0].transform_matrix: singular"},
		{"not orthogonal", `{"fl_x": 1, "frames": [{"file_path": "a", "transform_matrix": [[1,0.5,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]}]}`, "frames[0].transform_matrix: rotation part is not orthogonal"},
		{"reflection", `{"fl_x": 1, "frames": [{"file_path": "a", "transform_matrix": [[-1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]}]}`, "frames[0].transform_matrix: rotation part is a reflection"},
		{"bad last row", `{"fl_x": 1, "frames": [{"file_path": "a", "transform_matrix": [[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,1,1]]}]}`, "frames[0].transform_matrix: last row"},
		{"fl_x string", `{"fl_x": "400", "frames": []}`, "nerf: transforms.json: fl_x: want a number, got a string"},
		{"fl_x negative", `{"fl_x": -4, "frames": []}`, "fl_x: -4: want a positive number"},
		{"w fractional", `{"fl_x": 1, "w": 400.5, "frames": []}`, "w: 400.5: want a positive whole number"},
		{"h zero", `{"fl_x": 1, "h": 0, "frames": []}`, "h: 0: want a positive whole number"},
		{"angle too wide", `{"camera_angle_x": 4, "frames": []}`, "camera_angle_x: 4: want a field of view"},
		{"camera model", `{"fl_x": 1, "camera_model": "EQUIRECTANGULAR", "frames": []}`, `camera_model: unsupported "EQUIRECTANGULAR"`},
		{"camera model type", `{"fl_x": 1, "camera_model": 1, "frames": []}`, `camera_model: want a string, got a number`},
		{"frame override type", `{"fl_x": 1, "frames": [{"file_path": "a", "fl_y": [1], "transform_matrix": ` + ident + `}]}`, "frames[0].fl_y: want a number, got an array"},
		{"no focal", `{"w": 4, "h": 4, "frames": [{"file_path": "a", "transform_matrix": ` + ident + `}]}`, "frames[0]: no focal length"},
		{"k4 with opencv", `{"fl_x": 1, "k4": 0.1, "frames": [{"file_path": "a", "transform_matrix": ` + ident + `}]}`, "frames[0]: k4 is only supported with camera_model OPENCV_FISHEYE"},
		{"fisheye tangential", `{"fl_x": 1, "camera_model": "OPENCV_FISHEYE", "p1": 0.1, "frames": [{"file_path": "a", "transform_matrix": ` + ident + `}]}`, "frames[0]: camera_model OPENCV_FISHEYE has no tangential terms"},
		{"applied transform", `{"fl_x": 1, "applied_transform": [[1,0,0]], "frames": []}`, "applied_transform: want 3×4 or 4×4 numbers"},
		{"ply path", `{"fl_x": 1, "ply_file_path": 3, "frames": []}`, "ply_file_path: want a non-empty string, got a number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json), "transforms.json")
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "nerf: transforms.json: ") {
				t.Fatalf("error %q does not start with the package and file", err)
			}
		})
	}
}

func TestIntrinsics(t *testing.T) {
	const a = 0.6911112070083618 // a NeRF-synthetic camera_angle_x
	fxA := func(w float64) float64 { return 0.5 * w / math.Tan(0.5*a) }
	tests := []struct {
		name     string
		json     string
		setW     int // SetSize width/height when the file has none; 0 = expect resolved
		setH     int
		want     [4]float64 // fx fy cx cy
		wantW    int
		wantH    int
		wantDist camera.Distortion
	}{
		{"synthetic, size from image", `{"camera_angle_x": 0.6911112070083618, "frames": [{"file_path": "./train/r_0", "transform_matrix": ` + ident + `}]}`,
			800, 800, [4]float64{fxA(800), fxA(800), 400, 400}, 800, 800, camera.Distortion{}},
		{"synthetic with w h", `{"camera_angle_x": 0.6911112070083618, "w": 640, "h": 480, "frames": [{"file_path": "a", "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{fxA(640), fxA(640), 320, 240}, 640, 480, camera.Distortion{}},
		{"angle y", `{"camera_angle_x": 0.6911112070083618, "camera_angle_y": 0.5, "w": 640, "h": 480, "frames": [{"file_path": "a", "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{fxA(640), 240 / math.Tan(0.25), 320, 240}, 640, 480, camera.Distortion{}},
		{"fl_x wins over angle", `{"camera_angle_x": 0.6911112070083618, "fl_x": 500, "w": 640, "h": 480, "frames": [{"file_path": "a", "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{500, 500, 320, 240}, 640, 480, camera.Distortion{}},
		{"nerfstudio opencv", `{"fl_x": 500, "fl_y": 510, "cx": 321, "cy": 239, "w": 640, "h": 480, "k1": 0.1, "k2": -0.01, "p1": 0.001, "p2": 0.002, "camera_model": "OPENCV",
			"frames": [{"file_path": "images/a.jpg", "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{500, 510, 321, 239}, 640, 480, camera.Distortion{Model: "OPENCV", Params: []float64{0.1, -0.01, 0.001, 0.002}}},
		{"per-frame override", `{"fl_x": 500, "fl_y": 510, "cx": 321, "cy": 239, "w": 640, "h": 480,
			"frames": [{"file_path": "images/a.jpg", "fl_x": 700, "w": 800, "k1": 0.2, "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{700, 510, 321, 239}, 800, 480, camera.Distortion{Model: "OPENCV", Params: []float64{0.2, 0, 0, 0}}},
		{"k3 is full opencv", `{"fl_x": 500, "w": 640, "h": 480, "k1": 0.1, "k3": 0.05, "frames": [{"file_path": "a.png", "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{500, 500, 320, 240}, 640, 480, camera.Distortion{Model: "FULL_OPENCV", Params: []float64{0.1, 0, 0, 0, 0.05, 0, 0, 0}}},
		{"fisheye", `{"fl_x": 500, "w": 640, "h": 480, "camera_model": "OPENCV_FISHEYE", "k1": 0.1, "k4": 0.05, "frames": [{"file_path": "a.png", "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{500, 500, 320, 240}, 640, 480, camera.Distortion{Model: "OPENCV_FISHEYE", Params: []float64{0.1, 0, 0, 0.05}}},
		{"zero coefficients are pinhole", `{"fl_x": 500, "w": 640, "h": 480, "camera_model": "OPENCV", "k1": 0, "k2": 0, "p1": 0, "p2": 0, "frames": [{"file_path": "a.png", "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{500, 500, 320, 240}, 640, 480, camera.Distortion{}},
		{"byte-order mark", "\xef\xbb\xbf" + `{"fl_x": 300, "w": 640, "h": 480, "frames": [{"file_path": "a.png", "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{300, 300, 320, 240}, 640, 480, camera.Distortion{}},
		{"fl_y only", `{"fl_y": 300, "w": 640, "h": 480, "unknown_key": {"x": [1, "y"]}, "frames": [{"file_path": "a.png", "colmap_im_id": 4, "transform_matrix": ` + ident + `}]}`,
			0, 0, [4]float64{300, 300, 320, 240}, 640, 480, camera.Distortion{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := Parse([]byte(tc.json), "d/transforms.json")
			if err != nil {
				t.Fatal(err)
			}
			if len(tr.Frames) != 1 {
				t.Fatalf("%d frames, want 1", len(tr.Frames))
			}
			f := tr.Frames[0]
			if f.Resolved() != (tc.setW == 0) {
				t.Fatalf("Resolved() = %v before SetSize", f.Resolved())
			}
			if tc.setW != 0 {
				if err := f.SetSize(tc.setW, tc.setH); err != nil {
					t.Fatal(err)
				}
			}
			got := [4]float64{f.Fx, f.Fy, f.Cx, f.Cy}
			for i := range got {
				if math.Abs(got[i]-tc.want[i]) > 1e-9 {
					t.Fatalf("fx fy cx cy = %v, want %v", got, tc.want)
				}
			}
			if f.W != tc.wantW || f.H != tc.wantH {
				t.Errorf("size %d×%d, want %d×%d", f.W, f.H, tc.wantW, tc.wantH)
			}
			if f.Distortion.Model != tc.wantDist.Model || !equal(f.Distortion.Params, tc.wantDist.Params) {
				t.Errorf("distortion %+v, want %+v", f.Distortion, tc.wantDist)
			}
		})
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSetSizeKeepsFileSize(t *testing.T) {
	tr, err := Parse([]byte(`{"camera_angle_x": 1, "w": 640, "frames": [{"file_path": "a", "transform_matrix": `+ident+`}]}`), "t.json")
	if err != nil {
		t.Fatal(err)
	}
	f := tr.Frames[0]
	if f.Resolved() {
		t.Fatal("resolved without h")
	}
	if err := f.SetSize(100, 50); err != nil {
		t.Fatal(err)
	}
	if f.W != 640 || f.H != 50 {
		t.Errorf("size %d×%d, want the file's w 640 and the image's h 50", f.W, f.H)
	}
	if err := f.SetSize(0, 5); err == nil {
		t.Error("SetSize(0, 5): no error")
	}
}

// project maps a world point through a camera to pixel coordinates.
func project(c camera.Camera, p [3]float64) (u, v, z float64) {
	q := c.ToCamera(p)
	return c.Fx*q[0]/q[2] + c.Cx, c.Fy*q[1]/q[2] + c.Cy, q[2]
}

func TestToCameraAxes(t *testing.T) {
	// An OpenGL camera at (0, 0, 5) with identity rotation looks down −z,
	// at the origin, with world +y up in its image.
	tr, err := Parse([]byte(`{"fl_x": 100, "w": 200, "h": 100, "frames": [{"file_path": "a", "transform_matrix": [[1,0,0,0],[0,1,0,0],[0,0,1,5],[0,0,0,1]]}]}`), "t.json")
	if err != nil {
		t.Fatal(err)
	}
	c := ToCamera(tr.Frames[0])
	if c.Width != 200 || c.Height != 100 || c.Fx != 100 || c.Cx != 100 || c.Cy != 50 {
		t.Fatalf("intrinsics %+v", c)
	}
	if ctr := c.Center(); math.Abs(ctr[0])+math.Abs(ctr[1])+math.Abs(ctr[2]-5) > 1e-12 {
		t.Errorf("centre %v, want (0,0,5)", ctr)
	}
	tests := []struct {
		p    [3]float64
		u, v float64
	}{
		{[3]float64{0, 0, 0}, 100, 50},
		{[3]float64{1, 0, 0}, 120, 50}, // world +x: right in the image
		{[3]float64{0, 1, 0}, 100, 30}, // world +y (up): up in the image, smaller v
	}
	for _, tc := range tests {
		u, v, z := project(c, tc.p)
		if z <= 0 || math.Abs(u-tc.u) > 1e-9 || math.Abs(v-tc.v) > 1e-9 {
			t.Errorf("%v projects to (%v, %v) at depth %v, want (%v, %v) in front", tc.p, u, v, z, tc.u, tc.v)
		}
	}
}

func TestToCameraOrthonormal(t *testing.T) {
	// A pose rounded to float32-like precision and with a scaled camera
	// object: the camera must still get an exact rotation and the centre.
	m := `[[0.0, -0.42261827, 0.9063078, 3.6252313],[2.0, 0.0, 0.0, 0.1],[0.0, 0.9063079, 0.42261824, 2.290473],[0,0,0,1]]`
	tr, err := Parse([]byte(`{"fl_x": 100, "w": 200, "h": 100, "frames": [{"file_path": "a", "transform_matrix": `+m+`}]}`), "t.json")
	if err != nil {
		t.Fatal(err)
	}
	c := ToCamera(tr.Frames[0])
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			var d float64
			for k := 0; k < 3; k++ {
				d += c.R[i][k] * c.R[j][k]
			}
			if i == j {
				d--
			}
			if math.Abs(d) > 1e-12 {
				t.Fatalf("R Rᵀ differs from I by %g at (%d,%d)", d, i, j)
			}
		}
	}
	ctr := c.Center()
	want := [3]float64{3.6252313, 0.1, 2.290473}
	for i := range ctr {
		if math.Abs(ctr[i]-want[i]) > 1e-9 {
			t.Fatalf("centre %v, want %v", ctr, want)
		}
	}
	// OpenCV forward (+z) is OpenGL back (−z column).
	fwd := c.R[2]
	if math.Abs(fwd[0]+0.9063078) > 1e-6 || math.Abs(fwd[2]+0.42261824) > 1e-6 {
		t.Errorf("forward axis %v, want minus the matrix's third column", fwd)
	}
}

func TestReadResolvesImages(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.png", "b.jpg", "sub/c"} {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	js := `{"camera_angle_x": 1, "ply_file_path": "sparse_pc.ply", "applied_transform": [[0,1,0,0],[1,0,0,0],[0,0,-1,0]],
		"frames": [
		{"file_path": "./a", "transform_matrix": ` + ident + `},
		{"file_path": "b.jpg", "transform_matrix": ` + ident + `},
		{"file_path": "sub/c", "transform_matrix": ` + ident + `},
		{"file_path": "missing", "transform_matrix": ` + ident + `}]}`
	path := filepath.Join(dir, "transforms.json")
	if err := os.WriteFile(path, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.png", "b.jpg", "sub/c", "missing.png"}
	for i, w := range want {
		if got := tr.Frames[i].Image; got != filepath.Join(dir, filepath.FromSlash(w)) {
			t.Errorf("frame %d image %q, want %q", i, got, filepath.Join(dir, w))
		}
	}
	if tr.PLYFile != filepath.Join(dir, "sparse_pc.ply") {
		t.Errorf("PLYFile %q", tr.PLYFile)
	}
	if tr.AppliedTransform == nil || tr.AppliedTransform[0][1] != 1 || tr.AppliedTransform[2][2] != -1 || tr.AppliedTransform[3] != [4]float64{0, 0, 0, 1} {
		t.Errorf("AppliedTransform %v", tr.AppliedTransform)
	}
	if _, err := Read(filepath.Join(dir, "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("missing file: error %v, want one naming nope.json", err)
	}
}

// Duck's cameras sit on a ring around the z axis (Blender's up), all
// aimed at one point above the duck at the origin. With the right axis
// conversion, every optical axis (+z of the OpenCV camera) passes through
// that point, which lies on the z axis and projects to the image centre;
// the origin projects straight below it; world up points up in the image.
func TestDuck(t *testing.T) {
	s := sharedDir(t)
	tr, err := Read(filepath.Join(s, "data", "duck", "transforms.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Frames) != 96 {
		t.Fatalf("%d frames, want 96", len(tr.Frames))
	}
	if got := tr.Frames[3].Image; filepath.Base(got) != "r_003.png" {
		t.Errorf("frame 3 image %q, want …/r_003.png", got)
	}
	if _, err := os.Stat(tr.Frames[95].Image); err != nil {
		t.Error(err)
	}
	fxAngle := 0.5 * 400 / math.Tan(0.5*0.8726646304130554)
	cams := make([]camera.Camera, len(tr.Frames))
	for i, f := range tr.Frames {
		if !f.Resolved() || f.W != 400 || f.H != 400 || math.Abs(f.Fx-fxAngle) > 1e-3 || f.Cx != 200 {
			t.Fatalf("frame %d: %d×%d fx %v cx %v, want 400×400 fx %v cx 200", i, f.W, f.H, f.Fx, f.Cx, fxAngle)
		}
		cams[i] = ToCamera(f)
	}
	target := nearestToAxes(cams)
	t.Logf("optical axes meet at %.4f", target)
	if math.Hypot(target[0], target[1]) > 0.05 || math.Abs(target[2]) > 1 {
		t.Fatalf("optical axes meet near %v, want a point on the z axis near the duck", target)
	}
	for i, c := range cams {
		u, v, z := project(c, target)
		if z <= 0 || math.Abs(u-200) > 1 || math.Abs(v-200) > 1 {
			t.Errorf("frame %d: aim point projects to (%.2f, %.2f) at depth %.2f, want (200, 200) in front", i, u, v, z)
		}
		u0, v0, z0 := project(c, [3]float64{0, 0, 0})
		if z0 <= 0 || math.Abs(u0-200) > 1 || v0 < v {
			t.Errorf("frame %d: origin projects to (%.2f, %.2f) at depth %.2f, want straight below the centre", i, u0, v0, z0)
		}
		u1, v1, _ := project(c, [3]float64{0, 0, target[2] + 0.5})
		if v1 >= v || math.Abs(u1-u) > 1 {
			t.Errorf("frame %d: world +z goes from (%.1f,%.1f) to (%.1f,%.1f), want straight up", i, u, v, u1, v1)
		}
	}
}

// nearestToAxes returns the point with the least summed squared distance
// to the cameras' optical axes: Σ(I − ddᵀ) p = Σ(I − ddᵀ) c.
func nearestToAxes(cams []camera.Camera) [3]float64 {
	var a [3][3]float64
	var b [3]float64
	for _, c := range cams {
		d := c.R[2] // optical axis in world coordinates (third row of R)
		ctr := c.Center()
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				p := -d[i] * d[j]
				if i == j {
					p++
				}
				a[i][j] += p
				b[i] += p * ctr[j]
			}
		}
	}
	// Cramer's rule on the 3×3 system.
	det := det3(a)
	var x [3]float64
	for k := 0; k < 3; k++ {
		m := a
		for i := 0; i < 3; i++ {
			m[i][k] = b[i]
		}
		x[k] = det3(m) / det
	}
	return x
}

func FuzzRead(f *testing.F) {
	if s, ok := findShared(); ok {
		if data, err := os.ReadFile(filepath.Join(s, "data", "duck", "transforms.json")); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"camera_angle_x": 0.69, "frames": [{"file_path": "./train/r_0", "rotation": 0.01, "transform_matrix": [[-0.99,0.0,0.01,0.05],[0.01,0.3,-0.95,-3.8],[0,-0.95,-0.3,-1.2],[0,0,0,1]]}]}`))
	f.Add([]byte(`{"fl_x": 500, "fl_y": 510, "cx": 321, "cy": 239, "w": 640, "h": 480, "k1": 0.1, "k2": -0.01, "p1": 0.001, "p2": 0.002, "camera_model": "OPENCV",
		"ply_file_path": "sparse_pc.ply", "applied_transform": [[0,1,0,0],[1,0,0,0],[0,0,-1,0]],
		"frames": [{"file_path": "images/frame_00001.jpg", "fl_x": 700, "transform_matrix": [[1,0,0,0],[0,1,0,0],[0,0,1,5],[0,0,0,1]]}]}`))
	f.Add([]byte(`{"fl_x": 500, "w": 640, "h": 480, "camera_model": "OPENCV_FISHEYE", "k1": 0.1, "k4": 0.05, "frames": [{"file_path": "a.png", "transform_matrix": ` + ident + `}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Parse(data, "transforms.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "nerf: transforms.json: ") {
				t.Fatalf("error %q lacks the package and file prefix", err)
			}
			return
		}
		for i := range tr.Frames {
			fr := tr.Frames[i]
			if !fr.Resolved() {
				if err := fr.SetSize(64, 48); err != nil {
					continue // e.g. an extreme angle giving an infinite focal length
				}
			}
			for _, v := range []float64{fr.Fx, fr.Fy} {
				if !(v > 0) || math.IsInf(v, 0) {
					t.Fatalf("frame %d: focal length %v", i, v)
				}
			}
			c := ToCamera(fr)
			for r := 0; r < 3; r++ {
				n := c.R[r][0]*c.R[r][0] + c.R[r][1]*c.R[r][1] + c.R[r][2]*c.R[r][2]
				if math.Abs(n-1) > 1e-9 || math.IsNaN(c.T[r]) {
					t.Fatalf("frame %d: camera R row %d has squared norm %v, T %v", i, r, n, c.T)
				}
			}
		}
	})
}

package colmap

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
)

func TestIntrinsics(t *testing.T) {
	cases := []struct {
		model          string
		params         []float64
		fx, fy, cx, cy float64
		dist           []float64
	}{
		{"SIMPLE_PINHOLE", []float64{500, 320, 240}, 500, 500, 320, 240, nil},
		{"PINHOLE", []float64{500, 510, 320, 240}, 500, 510, 320, 240, nil},
		{"SIMPLE_RADIAL", []float64{500, 320, 240, 0.1}, 500, 500, 320, 240, []float64{0.1}},
		{"RADIAL", []float64{500, 320, 240, 0.1, -0.2}, 500, 500, 320, 240, []float64{0.1, -0.2}},
		{"OPENCV", []float64{500, 510, 320, 240, 1, 2, 3, 4}, 500, 510, 320, 240, []float64{1, 2, 3, 4}},
		{"OPENCV_FISHEYE", []float64{500, 510, 320, 240, 1, 2, 3, 4}, 500, 510, 320, 240, []float64{1, 2, 3, 4}},
		{"FULL_OPENCV", []float64{500, 510, 320, 240, 1, 2, 3, 4, 5, 6, 7, 8}, 500, 510, 320, 240, []float64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"FOV", []float64{500, 510, 320, 240, 0.9}, 500, 510, 320, 240, []float64{0.9}},
		{"SIMPLE_RADIAL_FISHEYE", []float64{500, 320, 240, 0.1}, 500, 500, 320, 240, []float64{0.1}},
		{"RADIAL_FISHEYE", []float64{500, 320, 240, 0.1, 0.2}, 500, 500, 320, 240, []float64{0.1, 0.2}},
		{"THIN_PRISM_FISHEYE", []float64{500, 510, 320, 240, 1, 2, 3, 4, 5, 6, 7, 8}, 500, 510, 320, 240, []float64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"RAD_TAN_THIN_PRISM_FISHEYE", []float64{500, 510, 320, 240, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 500, 510, 320, 240,
			[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{"SIMPLE_DIVISION", []float64{500, 320, 240, -0.1}, 500, 500, 320, 240, []float64{-0.1}},
		{"DIVISION", []float64{500, 510, 320, 240, -0.1}, 500, 510, 320, 240, []float64{-0.1}},
		{"SIMPLE_FISHEYE", []float64{500, 320, 240}, 500, 500, 320, 240, nil},
		{"FISHEYE", []float64{500, 510, 320, 240}, 500, 510, 320, 240, nil},
		{"EUCM", []float64{500, 510, 320, 240, 0.6, 1.1}, 500, 510, 320, 240, []float64{0.6, 1.1}},
	}
	if len(cases) != len(CameraModels())-1 { // all but EQUIRECTANGULAR
		t.Fatalf("%d cases for %d perspective models", len(cases), len(CameraModels())-1)
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			c := Camera{ID: 3, Model: tc.model, Width: 640, Height: 480, Params: tc.params}
			fx, fy, cx, cy, d, err := c.Intrinsics()
			if err != nil {
				t.Fatal(err)
			}
			if fx != tc.fx || fy != tc.fy || cx != tc.cx || cy != tc.cy {
				t.Errorf("fx fy cx cy = %v %v %v %v, want %v %v %v %v", fx, fy, cx, cy, tc.fx, tc.fy, tc.cx, tc.cy)
			}
			if string(d.Model) != tc.model || !reflect.DeepEqual(d.Params, tc.dist) {
				t.Errorf("distortion %+v, want {%s %v}", d, tc.model, tc.dist)
			}
			if err := d.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			// The distortion must not alias the camera's parameters.
			if len(d.Params) > 0 {
				d.Params[0] = 1e9
				if c.Params[len(c.Params)-len(d.Params)] == 1e9 {
					t.Error("Distortion.Params aliases Camera.Params")
				}
			}
		})
	}
}

func TestIntrinsicsErrors(t *testing.T) {
	cases := []struct {
		c    Camera
		want string
	}{
		{Camera{ID: 4, Model: "EQUIRECTANGULAR", Width: 2000, Height: 1000, Params: []float64{2000, 1000}},
			"colmap: camera 4: model EQUIRECTANGULAR has no pinhole intrinsics"},
		{Camera{ID: 5, Model: "KANNALA", Params: []float64{1, 2, 3}}, `colmap: camera 5: unknown camera model "KANNALA"`},
		{Camera{ID: 6, Model: "PINHOLE", Params: []float64{1, 2, 3}}, "colmap: camera 6: model PINHOLE takes 4 parameters, got 3"},
	}
	for _, tc := range cases {
		if _, _, _, _, _, err := tc.c.Intrinsics(); err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.c.Model, err, tc.want)
		}
	}
}

func TestToCamera(t *testing.T) {
	cams := map[uint32]Camera{
		2: {ID: 2, Model: "OPENCV", Width: 800, Height: 533, Params: []float64{600, 610, 400, 266.5, -0.05, 0.01, 0.001, -0.002}},
	}
	// A rotation of 90° about +z: q = (cos 45°, 0, 0, sin 45°).
	s := math.Sqrt(0.5)
	img := Image{ID: 7, Name: "x.png", Q: [4]float64{s, 0, 0, s}, T: [3]float64{1, 2, 3}, CameraID: 2}
	c, err := ToCamera(img, cams)
	if err != nil {
		t.Fatal(err)
	}
	if c.Width != 800 || c.Height != 533 || c.Fx != 600 || c.Fy != 610 || c.Cx != 400 || c.Cy != 266.5 {
		t.Errorf("intrinsics %+v", c)
	}
	if c.Distortion.Model != camera.OpenCV || !reflect.DeepEqual(c.Distortion.Params, []float64{-0.05, 0.01, 0.001, -0.002}) {
		t.Errorf("distortion %+v", c.Distortion)
	}
	wantR := [3][3]float64{{0, -1, 0}, {1, 0, 0}, {0, 0, 1}}
	for i := range wantR {
		for j := range wantR[i] {
			if math.Abs(c.R[i][j]-wantR[i][j]) > 1e-15 {
				t.Fatalf("R = %v, want %v", c.R, wantR)
			}
		}
	}
	if c.T != img.T {
		t.Errorf("T = %v, want %v", c.T, img.T)
	}
	// World point p maps to R·p + T: (1,0,0) → (0,1,0) + (1,2,3).
	if got := c.ToCamera([3]float64{1, 0, 0}); math.Abs(got[0]-1) > 1e-15 || math.Abs(got[1]-3) > 1e-15 || got[2] != 3 {
		t.Errorf("ToCamera(1,0,0) = %v, want (1,3,3)", got)
	}

	bad := []struct {
		name string
		img  Image
		cams map[uint32]Camera
		want string
	}{
		{"missing camera", Image{ID: 7, Name: "x.png", Q: [4]float64{1}, CameraID: 9}, cams,
			"colmap: image 7 (x.png): camera 9 not found"},
		{"zero quaternion", Image{ID: 7, Name: "x.png", CameraID: 2}, cams,
			"colmap: image 7 (x.png): quaternion [0 0 0 0] has no direction"},
		{"nan quaternion", Image{ID: 7, Name: "x.png", Q: [4]float64{math.NaN(), 0, 0, 0}, CameraID: 2}, cams,
			"colmap: image 7 (x.png): quaternion [NaN 0 0 0] has no direction"},
		{"inf translation", Image{ID: 7, Name: "x.png", Q: [4]float64{1}, T: [3]float64{0, math.Inf(1), 0}, CameraID: 2}, cams,
			"colmap: image 7 (x.png): non-finite translation [0 +Inf 0]"},
		{"equirectangular", Image{ID: 7, Name: "x.png", Q: [4]float64{1}, CameraID: 1},
			map[uint32]Camera{1: {ID: 1, Model: "EQUIRECTANGULAR", Width: 20, Height: 10, Params: []float64{20, 10}}},
			"colmap: image 7 (x.png): camera 1: model EQUIRECTANGULAR has no pinhole intrinsics"},
		{"zero width", Image{ID: 7, Name: "x.png", Q: [4]float64{1}, CameraID: 1},
			map[uint32]Camera{1: {ID: 1, Model: "PINHOLE", Width: 0, Height: 10, Params: []float64{1, 1, 0, 0}}},
			"colmap: image 7 (x.png): camera 1: image size 0×10 out of range"},
		{"huge height", Image{ID: 7, Name: "x.png", Q: [4]float64{1}, CameraID: 1},
			map[uint32]Camera{1: {ID: 1, Model: "PINHOLE", Width: 10, Height: 1 << 40, Params: []float64{1, 1, 0, 0}}},
			"colmap: image 7 (x.png): camera 1: image size 10×1099511627776 out of range"},
		{"zero focal", Image{ID: 7, Name: "x.png", Q: [4]float64{1}, CameraID: 1},
			map[uint32]Camera{1: {ID: 1, Model: "SIMPLE_PINHOLE", Width: 10, Height: 10, Params: []float64{0, 5, 5}}},
			"colmap: image 7 (x.png): camera 1: zero focal length"},
		{"nan principal point", Image{ID: 7, Name: "x.png", Q: [4]float64{1}, CameraID: 1},
			map[uint32]Camera{1: {ID: 1, Model: "PINHOLE", Width: 10, Height: 10, Params: []float64{1, 1, math.NaN(), 5}}},
			"colmap: image 7 (x.png): camera 1: non-finite intrinsics"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ToCamera(tc.img, tc.cams)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want prefix %q", err, tc.want)
			}
		})
	}
}

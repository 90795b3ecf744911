package camera_test

import (
	"math"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
)

// testCamera is a 640×480 camera looking from a general pose: rotated
// about a tilted axis and translated, so that no axis is special.
func testCamera(d camera.Distortion) camera.Camera {
	return camera.Camera{
		Width: 640, Height: 480,
		Fx: 520, Fy: 515, Cx: 322.5, Cy: 238.25,
		R:          camera.RotationFromQuat(0.9, 0.2, -0.3, 0.25),
		T:          [3]float64{0.3, -1.2, 4.5},
		Distortion: d,
	}
}

// project maps a world point to pixel coordinates through the lens.
func project(c *camera.Camera, p [3]float64) (px, py float64) {
	q := c.ToCamera(p)
	xd, yd := c.Distortion.Distort(q[0]/q[2], q[1]/q[2])
	return c.Fx*xd + c.Cx, c.Fy*yd + c.Cy
}

func near(a, b [3]float64, tol float64) bool {
	return math.Abs(a[0]-b[0]) <= tol && math.Abs(a[1]-b[1]) <= tol && math.Abs(a[2]-b[2]) <= tol
}

func TestRotationFromQuat(t *testing.T) {
	r := camera.RotationFromQuat(0.9, 0.2, -0.3, 0.25)
	// Orthonormal with determinant +1.
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			dot := r[i][0]*r[j][0] + r[i][1]*r[j][1] + r[i][2]*r[j][2]
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(dot-want) > 1e-15 {
				t.Fatalf("rows %d·%d = %g, want %g", i, j, dot, want)
			}
		}
	}
	det := r[0][0]*(r[1][1]*r[2][2]-r[1][2]*r[2][1]) - r[0][1]*(r[1][0]*r[2][2]-r[1][2]*r[2][0]) + r[0][2]*(r[1][0]*r[2][1]-r[1][1]*r[2][0])
	if math.Abs(det-1) > 1e-15 {
		t.Errorf("det = %g", det)
	}
	// 90° about +x, (cos 45°, sin 45°, 0, 0): y → z.
	s := math.Sqrt(0.5)
	r = camera.RotationFromQuat(s, s, 0, 0)
	if y := [3]float64{r[0][1], r[1][1], r[2][1]}; !near(y, [3]float64{0, 0, 1}, 1e-15) {
		t.Errorf("R·ŷ = %v, want ẑ", y)
	}
	if r := camera.RotationFromQuat(0, 0, 0, 0); r != [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}} {
		t.Errorf("zero quaternion: %v, want identity", r)
	}
}

func TestCenterAndToCamera(t *testing.T) {
	c := testCamera(camera.Distortion{})
	o := c.Center()
	if q := c.ToCamera(o); !near(q, [3]float64{}, 1e-14) {
		t.Errorf("ToCamera(Center()) = %v, want 0", q)
	}
	// A point one unit in front of the camera on its axis: Center + Rᵀ·ẑ.
	ahead := [3]float64{o[0] + c.R[2][0], o[1] + c.R[2][1], o[2] + c.R[2][2]}
	if q := c.ToCamera(ahead); !near(q, [3]float64{0, 0, 1}, 1e-14) {
		t.Errorf("ToCamera(Center + view axis) = %v, want (0, 0, 1)", q)
	}
	// Identity pose: ToCamera adds T, Center is −T.
	id := camera.Camera{R: [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, T: [3]float64{1, 2, 3}}
	if q := id.ToCamera([3]float64{1, 1, 1}); q != [3]float64{2, 3, 4} {
		t.Errorf("identity ToCamera = %v", q)
	}
	if o := id.Center(); o != [3]float64{-1, -2, -3} {
		t.Errorf("identity Center = %v", o)
	}
}

func TestScaled(t *testing.T) {
	c := testCamera(camera.Distortion{})
	s := c.Scaled(320, 240)
	if s.Width != 320 || s.Height != 240 || s.Fx != 260 || s.Fy != 257.5 || s.Cx != 161.25 || s.Cy != 119.125 {
		t.Errorf("Scaled = %+v", s)
	}
	if s.R != c.R || s.T != c.T {
		t.Error("Scaled changed the pose")
	}
	if c.Width != 640 || c.Fx != 520 {
		t.Error("Scaled changed its receiver")
	}
	// Continuous pixel coordinates (pixel centres at +0.5) scale with the
	// image: a point seen at pixel (u, v) is seen at (u/2, v/2).
	p := [3]float64{0.4, -0.7, 1.3}
	u, v := project(&c, p)
	us, vs := project(&s, p)
	if math.Abs(us-u/2) > 1e-12 || math.Abs(vs-v/2) > 1e-12 {
		t.Errorf("scaled projection (%g, %g), want (%g, %g)", us, vs, u/2, v/2)
	}
}

func TestPixelRayPinhole(t *testing.T) {
	c := testCamera(camera.Distortion{})
	o := c.Center()
	// The principal point's ray is the viewing axis, the third row of R.
	dir, ok := c.PixelRay(c.Cx, c.Cy)
	if !ok || !near(dir, c.R[2], 1e-15) {
		t.Errorf("PixelRay(principal point) = %v, %v; want %v", dir, ok, c.R[2])
	}
	for _, px := range [][2]float64{{0.5, 0.5}, {639.5, 479.5}, {100.25, 400.75}, {320, 10}} {
		dir, ok := c.PixelRay(px[0], px[1])
		if !ok {
			t.Fatalf("PixelRay(%v) failed", px)
		}
		if n := math.Sqrt(dir[0]*dir[0] + dir[1]*dir[1] + dir[2]*dir[2]); math.Abs(n-1) > 1e-15 {
			t.Errorf("PixelRay(%v) has length %g", px, n)
		}
		for _, depth := range []float64{0.5, 7} {
			p := [3]float64{o[0] + depth*dir[0], o[1] + depth*dir[1], o[2] + depth*dir[2]}
			u, v := project(&c, p)
			if math.Abs(u-px[0]) > 1e-9 || math.Abs(v-px[1]) > 1e-9 {
				t.Errorf("pixel %v: ray point at depth %g projects to (%.12g, %.12g)", px, depth, u, v)
			}
		}
	}
}

// TestPixelRayDistorted checks, for one camera of each lens family, that
// the world point at any depth along PixelRay(pixel) projects through the
// lens back to that pixel, over a grid covering the whole image.
func TestPixelRayDistorted(t *testing.T) {
	for _, d := range []camera.Distortion{
		{Model: camera.OpenCV, Params: []float64{-0.0598, 0.1515, 0.0016, 0.0014}}, // bonsai's lens
		{Model: camera.OpenCV, Params: []float64{0.22, 1.9, -0.056, -0.063}},
		{Model: camera.FullOpenCV, Params: []float64{-0.3, 0.1, 0.001, -0.002, -0.01, 0.05, 0.02, 0.001}},
		{Model: camera.OpenCVFisheye, Params: []float64{0.05, -0.01, 0.002, -0.0005}},
		{Model: camera.RadTanThinPrismFisheye,
			Params: []float64{0.02, -0.01, 0.003, -0.001, 0.0002, -0.00002, 0.0005, -0.0003, 0.0004, -0.0001, 0.0002, 0.00005}},
		{Model: camera.FOV, Params: []float64{0.9}},
		{Model: camera.Division, Params: []float64{-0.1}},
		{Model: camera.EUCM, Params: []float64{0.6, 1.1}},
	} {
		t.Run(string(d.Model), func(t *testing.T) {
			c := testCamera(d)
			o := c.Center()
			const n = 17
			for i := 0; i < n; i++ {
				for j := 0; j < n; j++ {
					px := 0.5 + 639*float64(i)/(n-1)
					py := 0.5 + 479*float64(j)/(n-1)
					dir, ok := c.PixelRay(px, py)
					if !ok {
						t.Fatalf("PixelRay(%g, %g) failed", px, py)
					}
					p := [3]float64{o[0] + 3*dir[0], o[1] + 3*dir[1], o[2] + 3*dir[2]}
					u, v := project(&c, p)
					if math.Abs(u-px) > 1e-7 || math.Abs(v-py) > 1e-7 {
						t.Fatalf("pixel (%g, %g) reprojects to (%.10g, %.10g)", px, py, u, v)
					}
				}
			}
		})
	}
}

func TestPixelRayFails(t *testing.T) {
	// An equidistant fisheye with f = 100 px maps θ = 90° to 157 px from
	// the centre: the corner of a 640×480 image lies beyond it.
	c := testCamera(camera.Distortion{Model: camera.Fisheye})
	c.Fx, c.Fy = 100, 100
	if dir, ok := c.PixelRay(0.5, 0.5); ok {
		t.Errorf("fisheye corner beyond 90°: PixelRay = %v, ok", dir)
	}
	if _, ok := c.PixelRay(c.Cx+50, c.Cy); !ok {
		t.Error("fisheye pixel at θ = 0.5 rad: PixelRay failed")
	}
	bad := testCamera(camera.Distortion{Model: camera.OpenCV, Params: []float64{0.1}})
	if dir, ok := bad.PixelRay(10, 10); ok {
		t.Errorf("invalid distortion: PixelRay = %v, ok", dir)
	}
}

// LookAt gives an orthonormal rotation that puts the target on the optical axis in front of
// the camera and the down direction downwards in the image.
func TestLookAt(t *testing.T) {
	for _, tc := range []struct{ eye, target, down [3]float64 }{
		{[3]float64{0, 0, -3}, [3]float64{}, [3]float64{0, 1, 0}},
		{[3]float64{4.5, -1.6, 2}, [3]float64{0, 0.4, 0}, [3]float64{0, 1, 0}},
		{[3]float64{0, -5, 0.1}, [3]float64{}, [3]float64{1, 0, 0}},
	} {
		R, T := camera.LookAt(tc.eye, tc.target, tc.down)
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				d := R[i][0]*R[j][0] + R[i][1]*R[j][1] + R[i][2]*R[j][2]
				if want := map[bool]float64{true: 1, false: 0}[i == j]; math.Abs(d-want) > 1e-12 {
					t.Errorf("%v: row %d · row %d = %g, want %g", tc, i, j, d, want)
				}
			}
		}
		cam := camera.Camera{R: R, T: T}
		p := cam.ToCamera(tc.target)
		if math.Abs(p[0]) > 1e-12 || math.Abs(p[1]) > 1e-12 || !(p[2] > 0) {
			t.Errorf("%v: target at %v in camera space, want on the +z axis", tc, p)
		}
		below := cam.ToCamera([3]float64{tc.target[0] + tc.down[0], tc.target[1] + tc.down[1], tc.target[2] + tc.down[2]})
		if !(below[1] > 0) {
			t.Errorf("%v: the down direction maps to y = %g, want > 0", tc, below[1])
		}
	}
}

// TestQuatFromRotation round-trips quaternions of every branch (trace largest, then each
// diagonal entry largest) through RotationFromQuat.
func TestQuatFromRotation(t *testing.T) {
	for _, q := range [][4]float64{
		{0.9, 0.2, -0.3, 0.25},   // trace largest
		{0.1, 0.95, 0.2, -0.2},   // x
		{0.05, -0.2, 0.97, 0.1},  // y
		{0.02, 0.1, -0.15, 0.98}, // z
		{1, 0, 0, 0},
		{0, 0, 0, 1}, // 180° about z
	} {
		n := math.Sqrt(q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3])
		want := [4]float64{q[0] / n, q[1] / n, q[2] / n, q[3] / n}
		w, x, y, z := camera.QuatFromRotation(camera.RotationFromQuat(q[0], q[1], q[2], q[3]))
		got := [4]float64{w, x, y, z}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Errorf("quaternion %v: got %v back, want %v", q, got, want)
				break
			}
		}
	}
}

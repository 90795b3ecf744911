package camera_test

import (
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/colmap"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// realistic holds, for every COLMAP model, parameters of the size real
// calibrations have, and the half-width of the normalised-coordinate
// square a lens of that kind covers (about 80° across for the perspective
// models, 140° for the fisheye ones).
func realistic() []struct {
	d    camera.Distortion
	half float64
} {
	return []struct {
		d    camera.Distortion
		half float64
	}{
		{camera.Distortion{Model: camera.SimplePinhole}, 0.8},
		{camera.Distortion{Model: camera.Pinhole}, 0.8},
		{camera.Distortion{Model: camera.SimpleRadial, Params: []float64{-0.08}}, 0.8},
		{camera.Distortion{Model: camera.Radial, Params: []float64{-0.12, 0.03}}, 0.8},
		{camera.Distortion{Model: camera.OpenCV, Params: []float64{-0.06, 0.15, 0.0016, 0.0014}}, 0.8},
		{camera.Distortion{Model: camera.OpenCV, Params: []float64{0.22, 1.9, -0.056, -0.063}}, 0.45},
		{camera.Distortion{Model: camera.FullOpenCV, Params: []float64{-0.3, 0.1, 0.001, -0.002, -0.01, 0.05, 0.02, 0.001}}, 0.8},
		{camera.Distortion{Model: camera.OpenCVFisheye, Params: []float64{0.05, -0.01, 0.002, -0.0005}}, 2},
		{camera.Distortion{Model: camera.SimpleRadialFisheye, Params: []float64{0.03}}, 2},
		{camera.Distortion{Model: camera.RadialFisheye, Params: []float64{0.03, -0.005}}, 2},
		{camera.Distortion{Model: camera.ThinPrismFisheye,
			Params: []float64{0.02, -0.004, 0.001, -0.0008, 0.0005, -0.0001, 0.0007, -0.0003}}, 2},
		{camera.Distortion{Model: camera.RadTanThinPrismFisheye,
			Params: []float64{0.02, -0.01, 0.003, -0.001, 0.0002, -0.00002, 0.0005, -0.0003, 0.0004, -0.0001, 0.0002, 0.00005}}, 2},
		{camera.Distortion{Model: camera.FOV, Params: []float64{0.9}}, 1.2},
		{camera.Distortion{Model: camera.FOV, Params: []float64{1e-3}}, 0.8},
		{camera.Distortion{Model: camera.SimpleDivision, Params: []float64{-0.1}}, 0.8},
		{camera.Distortion{Model: camera.Division, Params: []float64{0.15}}, 0.8},
		{camera.Distortion{Model: camera.SimpleFisheye}, 2},
		{camera.Distortion{Model: camera.Fisheye}, 2},
		{camera.Distortion{Model: camera.EUCM, Params: []float64{0.6, 1.1}}, 1.5},
	}
}

// checkRoundTrip checks Undistort(Distort(p)) ≈ p over an n×n grid on
// [−half, half]², and Distort(Undistort(q)) ≈ q at the distorted points.
func checkRoundTrip(t *testing.T, d camera.Distortion, half float64, n int) {
	t.Helper()
	worst := 0.0
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			x := -half + 2*half*float64(i)/float64(n-1)
			y := -half + 2*half*float64(j)/float64(n-1)
			xd, yd := d.Distort(x, y)
			if math.IsNaN(xd) || math.IsNaN(yd) {
				t.Fatalf("Distort(%g, %g) = NaN", x, y)
			}
			xu, yu, ok := d.Undistort(xd, yd)
			if !ok {
				t.Fatalf("Undistort(Distort(%g, %g) = (%g, %g)) failed", x, y, xd, yd)
			}
			e := math.Hypot(xu-x, yu-y) / math.Max(1, math.Hypot(x, y))
			worst = math.Max(worst, e)
			if e > 1e-9 {
				t.Fatalf("Undistort(Distort(%g, %g)) = (%.15g, %.15g), error %.3g", x, y, xu, yu, e)
			}
			x2, y2 := d.Distort(xu, yu)
			if e2 := math.Hypot(x2-xd, y2-yd) / math.Max(1, math.Hypot(xd, yd)); e2 > 1e-9 {
				t.Fatalf("Distort(Undistort(%g, %g)) off by %.3g", xd, yd, e2)
			}
		}
	}
	t.Logf("worst relative round-trip error %.2g", worst)
}

func TestRoundTripEveryModel(t *testing.T) {
	seen := map[camera.Model]bool{}
	for _, tc := range realistic() {
		seen[tc.d.Model] = true
		t.Run(string(tc.d.Model), func(t *testing.T) {
			if err := tc.d.Validate(); err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, tc.d, tc.half, 41)
		})
	}
	// Every perspective model COLMAP defines is covered.
	for _, m := range colmap.CameraModels() {
		if m.NumFocal > 0 && !seen[camera.Model(m.Name)] {
			t.Errorf("model %s has no round-trip case", m.Name)
		}
	}
}

// TestDistortKnownValues checks Distort against each model's formula as
// its own reference writes it (OpenCV's documentation, Kannala–Brandt,
// Project Aria's Fisheye624, Devernay–Faugeras, Fitzgibbon, EUCM), in a
// form independent of the implementation's shared code path.
func TestDistortKnownValues(t *testing.T) {
	x, y := 0.31, -0.17
	r2 := x*x + y*y
	r := math.Sqrt(r2)
	th := math.Atan(r)
	th2 := th * th
	xf, yf := x*th/r, y*th/r // equidistant fisheye plane
	type known struct {
		d      camera.Distortion
		wx, wy float64
	}
	var cases []known
	{
		k := 0.1
		cases = append(cases, known{camera.Distortion{Model: camera.SimpleRadial, Params: []float64{k}},
			x * (1 + k*r2), y * (1 + k*r2)})
	}
	{
		k1, k2, p1, p2 := -0.2, 0.05, 0.003, -0.004
		rad := 1 + k1*r2 + k2*r2*r2
		cases = append(cases, known{camera.Distortion{Model: camera.OpenCV, Params: []float64{k1, k2, p1, p2}},
			x*rad + 2*p1*x*y + p2*(r2+2*x*x), y*rad + p1*(r2+2*y*y) + 2*p2*x*y})
	}
	{
		k1, k2, p1, p2, k3, k4, k5, k6 := -0.2, 0.05, 0.003, -0.004, 0.01, 0.1, -0.02, 0.005
		rad := (1 + k1*r2 + k2*r2*r2 + k3*r2*r2*r2) / (1 + k4*r2 + k5*r2*r2 + k6*r2*r2*r2)
		cases = append(cases, known{camera.Distortion{Model: camera.FullOpenCV, Params: []float64{k1, k2, p1, p2, k3, k4, k5, k6}},
			x*rad + 2*p1*x*y + p2*(r2+2*x*x), y*rad + p1*(r2+2*y*y) + 2*p2*x*y})
	}
	{
		k1, k2, k3, k4 := 0.05, -0.01, 0.002, -0.0005
		thd := th * (1 + k1*th2 + k2*th2*th2 + k3*math.Pow(th, 6) + k4*math.Pow(th, 8))
		cases = append(cases, known{camera.Distortion{Model: camera.OpenCVFisheye, Params: []float64{k1, k2, k3, k4}},
			x * thd / r, y * thd / r})
	}
	{
		k1, k2, p1, p2, k3, k4, sx1, sy1 := 0.02, -0.004, 0.001, -0.0008, 0.0005, -0.0001, 0.0007, -0.0003
		rad := 1 + k1*th2 + k2*math.Pow(th, 4) + k3*math.Pow(th, 6) + k4*math.Pow(th, 8)
		cases = append(cases, known{camera.Distortion{Model: camera.ThinPrismFisheye, Params: []float64{k1, k2, p1, p2, k3, k4, sx1, sy1}},
			xf*rad + 2*p1*xf*yf + p2*(th2+2*xf*xf) + sx1*th2, yf*rad + p1*(th2+2*yf*yf) + 2*p2*xf*yf + sy1*th2})
	}
	{
		k := []float64{0.4, -0.3, 0.1, 0.05, -0.02, 0.003}
		p0, p1, s0, s1, s2, s3 := 0.002, -0.001, 0.003, -0.001, 0.002, 0.0005
		// Aria: θd = θ(1 + Σ kᵢ θ^(2i+2)); uvR = θd·(x, y)/r; then
		// uvD = uvR·(1 + 2⟨p, uvR⟩) + p·|uvR|² + thin prism.
		thd := th
		for i, ki := range k {
			thd += ki * math.Pow(th, float64(2*i+3))
		}
		xr, yr := x*thd/r, y*thd/r
		rr := xr*xr + yr*yr
		dot := 2 * (p0*xr + p1*yr)
		cases = append(cases, known{camera.Distortion{Model: camera.RadTanThinPrismFisheye,
			Params: append(append([]float64(nil), k...), p0, p1, s0, s1, s2, s3)},
			xr*(1+dot) + p0*rr + s0*rr + s1*rr*rr, yr*(1+dot) + p1*rr + s2*rr + s3*rr*rr})
	}
	{
		w := 0.9
		rd := math.Atan(2*r*math.Tan(w/2)) / w
		cases = append(cases, known{camera.Distortion{Model: camera.FOV, Params: []float64{w}}, x * rd / r, y * rd / r})
	}
	{
		a, b := 0.6, 1.1
		den := a*math.Sqrt(b*r2+1) + 1 - a
		cases = append(cases, known{camera.Distortion{Model: camera.EUCM, Params: []float64{a, b}}, x / den, y / den})
	}
	cases = append(cases, known{camera.Distortion{Model: camera.Fisheye}, xf, yf})
	for _, tc := range cases {
		gx, gy := tc.d.Distort(x, y)
		if math.Abs(gx-tc.wx) > 1e-14 || math.Abs(gy-tc.wy) > 1e-14 {
			t.Errorf("%s: Distort = (%.17g, %.17g), want (%.17g, %.17g)", tc.d.Model, gx, gy, tc.wx, tc.wy)
		}
	}
	// The division model is defined by its inverse: x_u = x_d / (1 + k·r_d²).
	for _, k := range []float64{-0.3, 0.2} {
		d := camera.Distortion{Model: camera.Division, Params: []float64{k}}
		xd, yd := d.Distort(x, y)
		s := 1 + k*(xd*xd+yd*yd)
		if math.Abs(xd/s-x) > 1e-15 || math.Abs(yd/s-y) > 1e-15 {
			t.Errorf("DIVISION k=%g: Distort = (%g, %g) does not satisfy x_u = x_d/(1 + k r_d²)", k, xd, yd)
		}
		// k < 0 is barrel distortion: the lens pulls points inwards.
		if (k < 0) != (math.Hypot(xd, yd) < r) {
			t.Errorf("DIVISION k=%g: r_d = %g vs r_u = %g, want r_d < r_u exactly when k < 0", k, math.Hypot(xd, yd), r)
		}
	}
}

func TestDistortionFailures(t *testing.T) {
	nan := math.NaN()
	cases := []struct {
		name   string
		d      camera.Distortion
		xd, yd float64
	}{
		{"unknown model", camera.Distortion{Model: "KANNALA", Params: []float64{0.1}}, 0.1, 0.1},
		{"equirectangular", camera.Distortion{Model: "EQUIRECTANGULAR", Params: []float64{10, 5}}, 0.1, 0.1},
		{"too few params", camera.Distortion{Model: camera.OpenCV, Params: []float64{0.1, 0.01}}, 0.1, 0.1},
		{"NaN input", camera.Distortion{Model: camera.OpenCV, Params: []float64{0.1, 0.01, 0, 0}}, nan, 0.1},
		{"Inf input", camera.Distortion{Model: camera.OpenCVFisheye, Params: []float64{0, 0, 0, 0}}, math.Inf(1), 0},
		// Equidistant: a distorted radius of π/2 is a ray at 90°.
		{"fisheye at 90°", camera.Distortion{Model: camera.Fisheye}, math.Pi / 2, 0},
		{"fisheye past 90°", camera.Distortion{Model: camera.OpenCVFisheye, Params: []float64{0, 0, 0, 0}}, 1.2, 1.2},
		{"FOV past its field", camera.Distortion{Model: camera.FOV, Params: []float64{1.5}}, 1.1, 0},
		{"division past the fold", camera.Distortion{Model: camera.Division, Params: []float64{0.5}}, 1.5, 0},
		{"division at infinity", camera.Distortion{Model: camera.SimpleDivision, Params: []float64{-1}}, 1, 0},
		{"EUCM outside domain", camera.Distortion{Model: camera.EUCM, Params: []float64{0.9, 2}}, 2, 0},
		// r_d = 0.9 lies beyond the fold of 1 − 0.5 r² (max r_d ≈ 0.544 at r ≈ 0.816).
		{"radial past the fold", camera.Distortion{Model: camera.SimpleRadial, Params: []float64{-0.5}}, 0.9, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			xu, yu, ok := tc.d.Undistort(tc.xd, tc.yd)
			if ok {
				t.Errorf("Undistort(%g, %g) = (%g, %g), ok; want failure", tc.xd, tc.yd, xu, yu)
			}
		})
	}
	for _, d := range []camera.Distortion{
		{Model: "KANNALA", Params: []float64{0.1}},
		{Model: camera.OpenCV, Params: []float64{0.1}},
		{Model: camera.Division, Params: []float64{1}}, // 4k·r² > 1 at r = 0.6
	} {
		if x, y := d.Distort(0.6, 0); !math.IsNaN(x) || !math.IsNaN(y) {
			t.Errorf("%+v: Distort(0.6, 0) = (%g, %g), want NaN", d, x, y)
		}
	}
}

func TestParamCountValidate(t *testing.T) {
	if n, err := (camera.Distortion{}).ParamCount(); n != 0 || err != nil {
		t.Errorf("zero Distortion: ParamCount = %d, %v", n, err)
	}
	if n, err := (camera.Distortion{Model: camera.RadTanThinPrismFisheye}).ParamCount(); n != 12 || err != nil {
		t.Errorf("RAD_TAN_THIN_PRISM_FISHEYE: ParamCount = %d, %v; want 12", n, err)
	}
	_, err := camera.Distortion{Model: "opencv"}.ParamCount()
	if err == nil || err.Error() != `camera: unknown distortion model "opencv"` {
		t.Errorf("unknown model: error %v", err)
	}
	err = camera.Distortion{Model: camera.FOV}.Validate()
	if err == nil || err.Error() != "camera: distortion model FOV: want 1 parameters, got 0" {
		t.Errorf("FOV without omega: error %v", err)
	}
}

func TestIsPinhole(t *testing.T) {
	cases := []struct {
		d    camera.Distortion
		want bool
	}{
		{camera.Distortion{}, true},
		{camera.Distortion{Model: camera.Pinhole}, true},
		{camera.Distortion{Model: camera.SimplePinhole}, true},
		{camera.Distortion{Model: camera.OpenCV, Params: []float64{0, 0, 0, 0}}, true},
		{camera.Distortion{Model: camera.OpenCV, Params: []float64{0, 0, 1e-9, 0}}, false},
		{camera.Distortion{Model: camera.FOV, Params: []float64{0}}, true},
		{camera.Distortion{Model: camera.EUCM, Params: []float64{0, 0.5}}, false},
		// The equidistant projection is not the pinhole one.
		{camera.Distortion{Model: camera.OpenCVFisheye, Params: []float64{0, 0, 0, 0}}, false},
		{camera.Distortion{Model: camera.Fisheye}, false},
		// Invalid distortions are not silently the identity.
		{camera.Distortion{Model: camera.OpenCV}, false},
		{camera.Distortion{Model: "KANNALA"}, false},
	}
	for _, tc := range cases {
		if got := tc.d.IsPinhole(); got != tc.want {
			t.Errorf("%+v.IsPinhole() = %v, want %v", tc.d, got, tc.want)
		}
	}
}

// sharedFile returns ../shared/<rel> next to the directory holding go.mod,
// skipping the test when it is absent.
func sharedFile(t *testing.T, rel ...string) string { return sharedtest.Path(t, rel...) }

// TestRealOpenCVCameras round-trips every pixel-grid point of two real
// OPENCV calibrations: bonsai's (mild) and the other-opencv fixture's
// (strong: k2 ≈ 1.9), over the whole image including its corners.
func TestRealOpenCVCameras(t *testing.T) {
	for _, rel := range [][]string{
		{"data", "bonsai", "distorted", "sparse", "0", "cameras.bin"},
		{"fixtures", "colmap", "other-opencv", "sparse", "0", "cameras.bin"},
	} {
		t.Run(strings.Join(rel[:2], "/"), func(t *testing.T) {
			f, err := os.Open(sharedFile(t, rel...))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cams, err := colmap.ReadCamerasBinary(f, rel[len(rel)-1])
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cams {
				fx, fy, cx, cy, d, err := c.Intrinsics()
				if err != nil {
					t.Fatal(err)
				}
				if d.Model != camera.OpenCV || d.IsPinhole() {
					t.Fatalf("camera %d: distortion %+v, want non-trivial OPENCV", c.ID, d)
				}
				w, h := float64(c.Width), float64(c.Height)
				const n = 33
				for i := 0; i < n; i++ {
					for j := 0; j < n; j++ {
						px, py := w*float64(i)/(n-1), h*float64(j)/(n-1)
						xd, yd := (px-cx)/fx, (py-cy)/fy
						xu, yu, ok := d.Undistort(xd, yd)
						if !ok {
							t.Fatalf("pixel (%g, %g): Undistort failed", px, py)
						}
						x2, y2 := d.Distort(xu, yu)
						if e := math.Hypot(fx*(x2-xd), fy*(y2-yd)); e > 1e-7 {
							t.Fatalf("pixel (%g, %g): round trip off by %.3g px", px, py, e)
						}
					}
				}
				// And the other way, over the undistorted field the image sees.
				xl, _, _ := d.Undistort(-cx/fx, 0)
				xr, _, _ := d.Undistort((w-cx)/fx, 0)
				checkRoundTrip(t, d, 0.95*math.Min(-xl, xr), 33)
			}
		})
	}
}

// undistortSeed fixes the random inputs of TestUndistortNeverLies.
const undistortSeed = 20240611

// TestUndistortNeverLies feeds random, often extreme, parameters and
// distorted points to every model: Undistort may fail, but when it
// reports success its result must distort back to the input.
func TestUndistortNeverLies(t *testing.T) {
	rng := rand.New(rand.NewPCG(undistortSeed, 1))
	okCount, total := 0, 0
	for _, tc := range realistic() {
		n, _ := tc.d.ParamCount()
		for trial := 0; trial < 300; trial++ {
			d := camera.Distortion{Model: tc.d.Model, Params: make([]float64, n)}
			for i := range d.Params {
				// Scale 1 for every parameter: far beyond real lenses.
				d.Params[i] = rng.NormFloat64()
			}
			xd, yd := 3*rng.NormFloat64(), 3*rng.NormFloat64()
			xu, yu, ok := d.Undistort(xd, yd)
			total++
			if !ok {
				continue
			}
			okCount++
			x2, y2 := d.Distort(xu, yu)
			if e := math.Hypot(x2-xd, y2-yd); !(e <= 1e-8*math.Max(1, math.Hypot(xd, yd))) {
				t.Fatalf("%+v: Undistort(%g, %g) = (%g, %g) ok, but that distorts to (%g, %g)", d, xd, yd, xu, yu, x2, y2)
			}
		}
	}
	t.Logf("%d of %d random inversions succeeded", okCount, total)
}

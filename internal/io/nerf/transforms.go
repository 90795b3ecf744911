package nerf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/rlxsplat/rlxsplat/internal/camera"
)

// Transforms is one parsed transforms*.json file.
type Transforms struct {
	// Path is the file that was read; relative paths inside it are
	// resolved against its directory.
	Path   string
	Frames []Frame // in file order
	// AppliedTransform is nerfstudio's applied_transform (the transform
	// ns-process-data applied to the original poses), completed to 4×4;
	// nil when absent. It is informative only: the frames' matrices and the
	// PLY points are already expressed after it.
	AppliedTransform *[4][4]float64
	// PLYFile is ply_file_path resolved against the file's directory, ""
	// when absent.
	PLYFile string
}

// Frame is one view: an image and its camera.
type Frame struct {
	// FilePath is file_path as written in the file.
	FilePath string
	// Image is the image path resolved against the file's directory. A
	// file_path without extension gets ".png"; Read replaces that guess
	// with the file that exists (FilePath+".png", else FilePath as is).
	Image string
	// Matrix is transform_matrix: camera-to-world, OpenGL axes (x right,
	// y up, z back), row-major, exactly as in the file.
	Matrix [4][4]float64
	// W, H are the image size in pixels; 0 when neither the frame nor the
	// file gives them (then call SetSize with the image's size).
	W, H int
	// Fx, Fy, Cx, Cy are the pinhole intrinsics in pixels, valid once W and
	// H are known (see Resolved).
	Fx, Fy, Cx, Cy float64
	// Distortion is the lens model from camera_model and k1..k4, p1, p2.
	Distortion camera.Distortion

	given intrinsics // as the file gives them, for SetSize
}

// intrinsics holds the optional camera keys of the file's top level merged
// with a frame's overrides.
type intrinsics struct {
	flX, flY, cx, cy, angleX, angleY, w, h opt
	k1, k2, k3, k4, p1, p2                 opt
	model                                  string
}

type opt struct {
	v  float64
	ok bool
}

// Resolved reports whether the frame's intrinsics are complete.
func (f *Frame) Resolved() bool { return f.W > 0 && f.H > 0 }

// SetSize gives the frame its image size when the file has none (w and h
// absent) and derives the intrinsics that depend on it: fx from
// camera_angle_x where fl_x is absent, cx = w/2 and cy = h/2 where absent.
// Sizes the file does give are left as they are.
func (f *Frame) SetSize(w, h int) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("nerf: %s: image size %d×%d is not positive", f.FilePath, w, h)
	}
	if !f.given.w.ok {
		f.W = w
	}
	if !f.given.h.ok {
		f.H = h
	}
	if err := f.resolve(); err != nil {
		return fmt.Errorf("nerf: %s: %w", f.FilePath, err)
	}
	return nil
}

// resolve computes Fx, Fy, Cx, Cy from the given keys once the size is
// known; its errors carry no prefix, the callers add the context. Explicit fl_x/fl_y win over camera_angle_x/y; a missing focal
// length on one axis takes the other's (square pixels, as NeRF-synthetic
// files with only camera_angle_x assume).
func (f *Frame) resolve() error {
	if !f.Resolved() {
		return nil
	}
	g := &f.given
	focal := func(fl, angle opt, size int) (float64, bool) {
		switch {
		case fl.ok:
			return fl.v, true
		case angle.ok:
			return 0.5 * float64(size) / math.Tan(0.5*angle.v), true
		}
		return 0, false
	}
	fx, okx := focal(g.flX, g.angleX, f.W)
	fy, oky := focal(g.flY, g.angleY, f.H)
	switch {
	case !okx && !oky:
		return errors.New("no focal length (want fl_x or camera_angle_x)")
	case !okx:
		fx = fy
	case !oky:
		fy = fx
	}
	cx, cy := float64(f.W)/2, float64(f.H)/2
	if g.cx.ok {
		cx = g.cx.v
	}
	if g.cy.ok {
		cy = g.cy.v
	}
	for _, v := range []float64{fx, fy} {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("focal length %g is not a positive finite number", v)
		}
	}
	f.Fx, f.Fy, f.Cx, f.Cy = fx, fy, cx, cy
	return nil
}

// Read parses the transforms file at path and resolves each frame's image
// path against the files that exist.
func Read(path string) (*Transforms, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nerf: %w", err)
	}
	t, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	for i := range t.Frames {
		t.Frames[i].Image = findImage(t.Frames[i].Image, t.Frames[i].FilePath, filepath.Dir(path))
	}
	return t, nil
}

// findImage applies the NeRF-synthetic rule: try file_path + ".png", then
// file_path as is. When neither exists it keeps Parse's guess, and the
// loader reports that path as missing.
func findImage(guess, filePath, dir string) string {
	p := joinPath(dir, filePath)
	for _, c := range []string{p + ".png", p} {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c
		}
	}
	return guess
}

func joinPath(dir, p string) string {
	p = filepath.FromSlash(p)
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// Parse parses the contents of a transforms file; name is the file's path,
// used in errors and to resolve relative paths (the file system is not
// consulted, see Read).
func Parse(data []byte, name string) (*Transforms, error) {
	p := parser{name: name}
	// Some Windows tools start JSON files with a UTF-8 byte-order mark,
	// which encoding/json rejects.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // so that out-of-range numbers get a key path, not a decoder error
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, p.syntaxError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("nerf: %s: invalid JSON: data after the top-level value at byte offset %d", name, dec.InputOffset())
	}
	top, ok := root.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("nerf: %s: want a JSON object at the top level, got %s", name, kind(root))
	}
	dir := filepath.Dir(name)
	t := &Transforms{Path: name}

	var base intrinsics
	if err := p.intrinsics(top, "", &base); err != nil {
		return nil, err
	}
	if v, ok := top["applied_transform"]; ok {
		m, err := p.matrix(v, "applied_transform", true)
		if err != nil {
			return nil, err
		}
		t.AppliedTransform = &m
	}
	if v, ok := top["ply_file_path"]; ok {
		s, ok := v.(string)
		if !ok || s == "" {
			return nil, p.errf("ply_file_path", "want a non-empty string, got %s", kind(v))
		}
		t.PLYFile = joinPath(dir, s)
	}

	fv, ok := top["frames"]
	if !ok {
		return nil, fmt.Errorf("nerf: %s: no frames key", name)
	}
	frames, ok := fv.([]any)
	if !ok {
		return nil, p.errf("frames", "want an array, got %s", kind(fv))
	}
	t.Frames = make([]Frame, 0, len(frames))
	for i, v := range frames {
		key := "frames[" + strconv.Itoa(i) + "]"
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, p.errf(key, "want an object, got %s", kind(v))
		}
		f := Frame{given: base}
		fp, ok := obj["file_path"]
		if !ok {
			return nil, p.errf(key+".file_path", "missing")
		}
		if f.FilePath, ok = fp.(string); !ok || f.FilePath == "" {
			return nil, p.errf(key+".file_path", "want a non-empty string, got %s", kind(fp))
		}
		f.Image = joinPath(dir, f.FilePath)
		if filepath.Ext(f.Image) == "" {
			f.Image += ".png"
		}
		mv, ok := obj["transform_matrix"]
		if !ok {
			return nil, p.errf(key+".transform_matrix", "missing")
		}
		m, err := p.matrix(mv, key+".transform_matrix", false)
		if err != nil {
			return nil, err
		}
		if err := checkPose(m); err != nil {
			return nil, p.errf(key+".transform_matrix", "%v", err)
		}
		f.Matrix = m
		if err := p.intrinsics(obj, key+".", &f.given); err != nil {
			return nil, err
		}
		if f.Distortion, err = distortion(f.given); err != nil {
			return nil, p.errf(key, "%v", err)
		}
		if !f.given.flX.ok && !f.given.angleX.ok && !f.given.flY.ok && !f.given.angleY.ok {
			return nil, p.errf(key, "no focal length (want fl_x or camera_angle_x, in the frame or at the top level)")
		}
		if f.given.w.ok {
			f.W = int(f.given.w.v)
		}
		if f.given.h.ok {
			f.H = int(f.given.h.v)
		}
		if err := f.resolve(); err != nil {
			return nil, p.errf(key, "%v", err)
		}
		t.Frames = append(t.Frames, f)
	}
	return t, nil
}

type parser struct{ name string }

func (p parser) errf(key, format string, args ...any) error {
	return fmt.Errorf("nerf: %s: %s: %s", p.name, key, fmt.Sprintf(format, args...))
}

func (p parser) syntaxError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("nerf: %s: invalid JSON at byte offset %d: %w", p.name, se.Offset, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("nerf: %s: invalid JSON: unexpected end of data: %w", p.name, err)
	}
	return fmt.Errorf("nerf: %s: invalid JSON: %w", p.name, err)
}

// intrinsics reads the optional camera keys of obj into in, overriding
// what is there; prefix is obj's key path for errors.
func (p parser) intrinsics(obj map[string]any, prefix string, in *intrinsics) error {
	fields := []struct {
		key string
		dst *opt
		chk func(float64) string
	}{
		{"fl_x", &in.flX, positive}, {"fl_y", &in.flY, positive},
		{"cx", &in.cx, nil}, {"cy", &in.cy, nil},
		{"w", &in.w, size}, {"h", &in.h, size},
		{"camera_angle_x", &in.angleX, angle}, {"camera_angle_y", &in.angleY, angle},
		{"k1", &in.k1, nil}, {"k2", &in.k2, nil}, {"k3", &in.k3, nil}, {"k4", &in.k4, nil},
		{"p1", &in.p1, nil}, {"p2", &in.p2, nil},
	}
	for _, fd := range fields {
		v, ok := obj[fd.key]
		if !ok {
			continue
		}
		x, err := number(v)
		if err != nil {
			return p.errf(prefix+fd.key, "%v", err)
		}
		if fd.chk != nil {
			if msg := fd.chk(x); msg != "" {
				return p.errf(prefix+fd.key, "%g: %s", x, msg)
			}
		}
		*fd.dst = opt{v: x, ok: true}
	}
	if v, ok := obj["camera_model"]; ok {
		s, ok := v.(string)
		if !ok {
			return p.errf(prefix+"camera_model", "want a string, got %s", kind(v))
		}
		switch s {
		case "OPENCV", "OPENCV_FISHEYE", "PINHOLE", "SIMPLE_PINHOLE":
		default:
			return p.errf(prefix+"camera_model", "unsupported %q (want OPENCV, OPENCV_FISHEYE or PINHOLE)", s)
		}
		in.model = s
	}
	return nil
}

func positive(x float64) string {
	if x > 0 {
		return ""
	}
	return "want a positive number"
}

// maxSize bounds w and h: far above any real image, and small enough that
// w·h cannot overflow anywhere downstream.
const maxSize = 1 << 20

func size(x float64) string {
	if x >= 1 && x <= maxSize && x == math.Trunc(x) {
		return ""
	}
	return "want a positive whole number of pixels"
}

func angle(x float64) string {
	if x > 0 && x < math.Pi {
		return ""
	}
	return "want a field of view in radians, in (0, π)"
}

// number converts a decoded JSON value to a finite float64.
func number(v any) (float64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("want a number, got %s", kind(v))
	}
	x, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		return 0, fmt.Errorf("number %s out of range", n)
	}
	return x, nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// matrix reads a 4×4 matrix of numbers (3×4 too when allow3x4, completed
// with the row 0 0 0 1).
func (p parser) matrix(v any, key string, allow3x4 bool) ([4][4]float64, error) {
	var m [4][4]float64
	want := "want 4×4 numbers"
	if allow3x4 {
		want = "want 3×4 or 4×4 numbers"
	}
	rows, ok := v.([]any)
	if !ok || !(len(rows) == 4 || (allow3x4 && len(rows) == 3)) {
		return m, p.errf(key, "%s", want)
	}
	m[3] = [4]float64{0, 0, 0, 1}
	for i, r := range rows {
		row, ok := r.([]any)
		if !ok || len(row) != 4 {
			return m, p.errf(key, "%s (row %d is not 4 numbers)", want, i)
		}
		for j, x := range row {
			f, err := number(x)
			if err != nil {
				return m, p.errf(fmt.Sprintf("%s[%d][%d]", key, i, j), "%v", err)
			}
			m[i][j] = f
		}
	}
	return m, nil
}

// distortion maps nerfstudio's camera_model and coefficients to COLMAP's
// models, the ones camera.Distortion uses. nerfstudio's OPENCV radial term
// is 1 + k1 r² + k2 r⁴ + k3 r⁶ (+ k4 r⁸); with k3 ≠ 0 that is COLMAP's
// FULL_OPENCV with k4..k6 = 0, and a non-zero k4 has no COLMAP equivalent.
// A PINHOLE camera_model with non-zero coefficients is treated like OPENCV,
// as nerfstudio does (it applies whatever coefficients are given).
func distortion(g intrinsics) (camera.Distortion, error) {
	d, err := distortionModel(g)
	if err != nil {
		return d, err
	}
	if err := d.Validate(); err != nil {
		return camera.Distortion{}, err
	}
	return d, nil
}

func distortionModel(g intrinsics) (camera.Distortion, error) {
	k1, k2, k3, k4, p1, p2 := g.k1.v, g.k2.v, g.k3.v, g.k4.v, g.p1.v, g.p2.v
	if g.model == "OPENCV_FISHEYE" {
		if p1 != 0 || p2 != 0 {
			return camera.Distortion{}, fmt.Errorf("camera_model OPENCV_FISHEYE has no tangential terms, but p1/p2 are non-zero")
		}
		// Not pinhole even with all k = 0: the fisheye maps the angle θ,
		// not tan θ.
		return camera.Distortion{Model: "OPENCV_FISHEYE", Params: []float64{k1, k2, k3, k4}}, nil
	}
	if k4 != 0 {
		return camera.Distortion{}, fmt.Errorf("k4 is only supported with camera_model OPENCV_FISHEYE")
	}
	switch {
	case k1 == 0 && k2 == 0 && k3 == 0 && p1 == 0 && p2 == 0:
		return camera.Distortion{}, nil
	case k3 != 0:
		return camera.Distortion{Model: "FULL_OPENCV", Params: []float64{k1, k2, p1, p2, k3, 0, 0, 0}}, nil
	}
	return camera.Distortion{Model: "OPENCV", Params: []float64{k1, k2, p1, p2}}, nil
}

// Tolerances of checkPose. Files store poses as float32 or with 6–8
// decimals, far inside these.
const (
	bottomRowTol = 1e-6
	orthoTol     = 1e-3
)

// checkPose verifies that m is a rigid camera-to-world transform, allowing
// a scale per axis (Blender writes a scaled camera object's scale into its
// matrix; the orientation is still well defined).
func checkPose(m [4][4]float64) error {
	b := m[3]
	if math.Abs(b[0]) > bottomRowTol || math.Abs(b[1]) > bottomRowTol || math.Abs(b[2]) > bottomRowTol || math.Abs(b[3]-1) > bottomRowTol {
		return fmt.Errorf("last row is %v, want 0 0 0 1", b)
	}
	r, err := rotation(m)
	if err != nil {
		return err
	}
	var worst float64
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			var d float64
			for k := 0; k < 3; k++ {
				d += r[k][i] * r[k][j]
			}
			if i == j {
				d--
			}
			worst = max(worst, math.Abs(d))
		}
	}
	if worst > orthoTol {
		return fmt.Errorf("rotation part is not orthogonal (|RᵀR − I| reaches %.3g after normalising the columns)", worst)
	}
	if det3(r) < 0 {
		return fmt.Errorf("rotation part is a reflection (negative determinant)")
	}
	return nil
}

// rotation returns the upper-left 3×3 of m with unit columns.
func rotation(m [4][4]float64) ([3][3]float64, error) {
	var r [3][3]float64
	for j := 0; j < 3; j++ {
		n := math.Sqrt(m[0][j]*m[0][j] + m[1][j]*m[1][j] + m[2][j]*m[2][j])
		if !(n > 1e-9) || math.IsInf(n, 0) {
			return r, fmt.Errorf("singular: column %d of the rotation part has length %g", j, n)
		}
		for i := 0; i < 3; i++ {
			r[i][j] = m[i][j] / n
		}
	}
	return r, nil
}

func det3(a [3][3]float64) float64 {
	return a[0][0]*(a[1][1]*a[2][2]-a[1][2]*a[2][1]) -
		a[0][1]*(a[1][0]*a[2][2]-a[1][2]*a[2][0]) +
		a[0][2]*(a[1][0]*a[2][1]-a[1][1]*a[2][0])
}

// orthonormalize returns the rotation nearest to r (its polar factor) by
// the iteration R ← ½(R + R⁻ᵀ), which converges quadratically from a
// near-rotation. File poses carry float32 rounding; the camera wants an
// exact rotation so that Rᵀ is its inverse.
func orthonormalize(r [3][3]float64) [3][3]float64 {
	for it := 0; it < 20; it++ {
		d := det3(r)
		if d == 0 {
			return r
		}
		// R⁻ᵀ = cofactor(R) / det(R).
		var n [3][3]float64
		var change float64
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				i1, i2 := (i+1)%3, (i+2)%3
				j1, j2 := (j+1)%3, (j+2)%3
				cof := r[i1][j1]*r[i2][j2] - r[i1][j2]*r[i2][j1]
				n[i][j] = 0.5 * (r[i][j] + cof/d)
				change = max(change, math.Abs(n[i][j]-r[i][j]))
			}
		}
		r = n
		if change < 1e-15 {
			break
		}
	}
	return r
}

// ToCamera converts a frame to rlxsplat's camera: the camera-to-world pose
// in OpenGL axes is inverted and its y and z camera axes are flipped, giving
// world-to-camera in OpenCV axes (x right, y down, z forward). Intrinsics
// come from the frame, so it should be Resolved. The frame must have come
// from Parse or Read, which reject matrices that are not poses.
func ToCamera(f Frame) camera.Camera {
	c := camera.Camera{
		Width: f.W, Height: f.H,
		Fx: f.Fx, Fy: f.Fy, Cx: f.Cx, Cy: f.Cy,
		Distortion: f.Distortion,
	}
	r, err := rotation(f.Matrix)
	if err != nil {
		return c
	}
	r = orthonormalize(r)
	t := [3]float64{f.Matrix[0][3], f.Matrix[1][3], f.Matrix[2][3]}
	// The columns of r are the camera's x, y, z axes in world coordinates
	// (OpenGL); OpenCV's camera axes are x, −y, −z. World-to-camera rotation
	// rows are those axes.
	flip := [3]float64{1, -1, -1}
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			c.R[i][j] = flip[i] * r[j][i]
		}
		c.T[i] = -(c.R[i][0]*t[0] + c.R[i][1]*t[1] + c.R[i][2]*t[2])
	}
	return c
}

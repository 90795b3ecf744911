// Package camera holds the one camera type every stage uses: a
// world-to-camera pose in COLMAP/OpenCV axes (x right, y down, z forward),
// pinhole intrinsics in pixels with pixel centres at (i+0.5, j+0.5), and an
// optional lens distortion in COLMAP's models (design.md §3).
//
// File formats convert to this type at the edge (internal/io/...).
package camera

import "math"

// Camera is one calibrated view.
type Camera struct {
	Width, Height  int
	Fx, Fy, Cx, Cy float64
	// R is the world-to-camera rotation, row-major: p_cam = R·p_world + T.
	R [3][3]float64
	T [3]float64
	// Distortion is the lens model after the pinhole intrinsics; the zero
	// value is an ideal pinhole.
	Distortion Distortion
}

// Center is the camera centre in world coordinates, −Rᵀ·T.
func (c *Camera) Center() [3]float64 {
	var o [3]float64
	for i := 0; i < 3; i++ {
		o[i] = -(c.R[0][i]*c.T[0] + c.R[1][i]*c.T[1] + c.R[2][i]*c.T[2])
	}
	return o
}

// ToCamera maps a world point into camera coordinates.
func (c *Camera) ToCamera(p [3]float64) [3]float64 {
	var q [3]float64
	for i := 0; i < 3; i++ {
		q[i] = c.R[i][0]*p[0] + c.R[i][1]*p[1] + c.R[i][2]*p[2] + c.T[i]
	}
	return q
}

// Scaled returns the camera for an image resized to width w and height h:
// focal lengths and principal point scale with the image, so that pixel
// centres keep the (i+0.5) convention.
func (c Camera) Scaled(w, h int) Camera {
	sx := float64(w) / float64(c.Width)
	sy := float64(h) / float64(c.Height)
	c.Fx *= sx
	c.Cx *= sx
	c.Fy *= sy
	c.Cy *= sy
	c.Width, c.Height = w, h
	return c
}

// PixelRay returns the unit world-space direction of the ray through pixel
// coordinates (px, py) (pixel centres at +0.5), undistorting through the lens
// model. ok is false where the undistortion does not converge.
func (c *Camera) PixelRay(px, py float64) (dir [3]float64, ok bool) {
	xd := (px - c.Cx) / c.Fx
	yd := (py - c.Cy) / c.Fy
	xu, yu := xd, yd
	if !c.Distortion.IsPinhole() {
		xu, yu, ok = c.Distortion.Undistort(xd, yd)
		if !ok {
			return dir, false
		}
	}
	// Camera-space direction (xu, yu, 1) rotated to world by Rᵀ.
	n := math.Sqrt(xu*xu + yu*yu + 1)
	v := [3]float64{xu / n, yu / n, 1 / n}
	for i := 0; i < 3; i++ {
		dir[i] = c.R[0][i]*v[0] + c.R[1][i]*v[1] + c.R[2][i]*v[2]
	}
	return dir, true
}

// RotationFromQuat builds the world-to-camera rotation from a unit quaternion
// (w,x,y,z) as COLMAP stores it in images.bin/txt.
func RotationFromQuat(w, x, y, z float64) [3][3]float64 {
	n := math.Sqrt(w*w + x*x + y*y + z*z)
	if n == 0 {
		return [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
	}
	w, x, y, z = w/n, x/n, y/n, z/n
	return [3][3]float64{
		{1 - 2*(y*y+z*z), 2 * (x*y - w*z), 2 * (x*z + w*y)},
		{2 * (x*y + w*z), 1 - 2*(x*x+z*z), 2 * (y*z - w*x)},
		{2 * (x*z - w*y), 2 * (y*z + w*x), 1 - 2*(x*x+y*y)},
	}
}

// QuatFromRotation is the inverse of RotationFromQuat: the unit quaternion (w,x,y,z), w ≥ 0,
// of a rotation matrix, from its largest diagonal combination so that no division is by a
// small number (Shepperd's method).
func QuatFromRotation(r [3][3]float64) (w, x, y, z float64) {
	tr := r[0][0] + r[1][1] + r[2][2]
	switch {
	case tr >= r[0][0] && tr >= r[1][1] && tr >= r[2][2]:
		s := 2 * math.Sqrt(1+tr)
		w, x, y, z = s/4, (r[2][1]-r[1][2])/s, (r[0][2]-r[2][0])/s, (r[1][0]-r[0][1])/s
	case r[0][0] >= r[1][1] && r[0][0] >= r[2][2]:
		s := 2 * math.Sqrt(1+r[0][0]-r[1][1]-r[2][2])
		w, x, y, z = (r[2][1]-r[1][2])/s, s/4, (r[0][1]+r[1][0])/s, (r[0][2]+r[2][0])/s
	case r[1][1] >= r[2][2]:
		s := 2 * math.Sqrt(1+r[1][1]-r[0][0]-r[2][2])
		w, x, y, z = (r[0][2]-r[2][0])/s, (r[0][1]+r[1][0])/s, s/4, (r[1][2]+r[2][1])/s
	default:
		s := 2 * math.Sqrt(1+r[2][2]-r[0][0]-r[1][1])
		w, x, y, z = (r[1][0]-r[0][1])/s, (r[0][2]+r[2][0])/s, (r[1][2]+r[2][1])/s, s/4
	}
	if w < 0 {
		w, x, y, z = -w, -x, -y, -z
	}
	n := math.Sqrt(w*w + x*x + y*y + z*z)
	return w / n, x / n, y / n, z / n
}

// LookAt returns the world-to-camera rotation and translation of a camera at eye looking at
// target, with down the world direction that should appear downwards in the image (COLMAP
// axes: x right, y down, z forward). down must not be parallel to the view direction.
func LookAt(eye, target, down [3]float64) (R [3][3]float64, T [3]float64) {
	fwd := unit3(sub3(target, eye))
	right := unit3(cross3(down, fwd))
	R = [3][3]float64{right, cross3(fwd, right), fwd}
	for i := 0; i < 3; i++ {
		T[i] = -(R[i][0]*eye[0] + R[i][1]*eye[1] + R[i][2]*eye[2])
	}
	return R, T
}

func sub3(a, b [3]float64) [3]float64 { return [3]float64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }

func cross3(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

func unit3(a [3]float64) [3]float64 {
	n := math.Sqrt(a[0]*a[0] + a[1]*a[1] + a[2]*a[2])
	return [3]float64{a[0] / n, a[1] / n, a[2] / n}
}

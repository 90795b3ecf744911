package colmap

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/camera"
)

// Intrinsics splits the camera's parameters into pinhole intrinsics in
// pixels (fx = fy = f for the single-focal models) and the distortion
// parameters that follow them, as a camera.Distortion named after the
// COLMAP model. It fails for an unknown model, a wrong parameter count, or
// a model with no pinhole intrinsics (EQUIRECTANGULAR).
func (c Camera) Intrinsics() (fx, fy, cx, cy float64, dist camera.Distortion, err error) {
	fx, fy, cx, cy, dist, err = c.intrinsics()
	if err != nil {
		return 0, 0, 0, 0, camera.Distortion{}, fmt.Errorf("colmap: %w", err)
	}
	return fx, fy, cx, cy, dist, nil
}

// intrinsics is Intrinsics with errors that do not start with "colmap:",
// for callers that add their own context.
func (c Camera) intrinsics() (fx, fy, cx, cy float64, dist camera.Distortion, err error) {
	m, ok := ModelByName(c.Model)
	if !ok {
		return 0, 0, 0, 0, dist, fmt.Errorf("camera %d: unknown camera model %q", c.ID, c.Model)
	}
	if m.NumFocal == 0 {
		return 0, 0, 0, 0, dist, fmt.Errorf("camera %d: model %s has no pinhole intrinsics", c.ID, m.Name)
	}
	if len(c.Params) != m.NumParams {
		return 0, 0, 0, 0, dist, fmt.Errorf("camera %d: model %s takes %d parameters, got %d",
			c.ID, m.Name, m.NumParams, len(c.Params))
	}
	p := c.Params
	if m.NumFocal == 1 {
		fx, fy, cx, cy = p[0], p[0], p[1], p[2]
	} else {
		fx, fy, cx, cy = p[0], p[1], p[2], p[3]
	}
	dist.Model = camera.Model(m.Name)
	if extra := p[m.NumFocal+2:]; len(extra) > 0 {
		dist.Params = append([]float64(nil), extra...)
	}
	return fx, fy, cx, cy, dist, nil
}

// ToCamera builds the world-to-camera camera.Camera of an image: R from
// the image's quaternion (w,x,y,z), T = its translation, and the
// intrinsics and distortion of its camera in cams. COLMAP's axes and pixel
// convention are design.md §3's, so nothing is flipped.
func ToCamera(img Image, cams map[uint32]Camera) (camera.Camera, error) {
	fail := func(format string, args ...any) (camera.Camera, error) {
		return camera.Camera{}, fmt.Errorf("colmap: image %d (%s): %s", img.ID, img.Name, fmt.Sprintf(format, args...))
	}
	c, ok := cams[img.CameraID]
	if !ok {
		return fail("camera %d not found", img.CameraID)
	}
	fx, fy, cx, cy, dist, err := c.intrinsics()
	if err != nil {
		return camera.Camera{}, fmt.Errorf("colmap: image %d (%s): %w", img.ID, img.Name, err)
	}
	if c.Width == 0 || c.Height == 0 || c.Width > math.MaxInt32 || c.Height > math.MaxInt32 {
		return fail("camera %d: image size %d×%d out of range", c.ID, c.Width, c.Height)
	}
	for _, v := range [...]float64{fx, fy, cx, cy} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fail("camera %d: non-finite intrinsics fx=%g fy=%g cx=%g cy=%g", c.ID, fx, fy, cx, cy)
		}
	}
	if fx == 0 || fy == 0 {
		return fail("camera %d: zero focal length", c.ID)
	}
	if err := dist.Validate(); err != nil {
		return camera.Camera{}, fmt.Errorf("colmap: image %d (%s): camera %d: %w", img.ID, img.Name, c.ID, err)
	}
	q := img.Q
	n2 := q[0]*q[0] + q[1]*q[1] + q[2]*q[2] + q[3]*q[3]
	// RotationFromQuat normalises, so any length is a rotation; zero or a
	// non-finite value is not, and would silently become the identity.
	if math.IsNaN(n2) || math.IsInf(n2, 0) || n2 == 0 {
		return fail("quaternion %v has no direction", q)
	}
	for _, v := range img.T {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fail("non-finite translation %v", img.T)
		}
	}
	return camera.Camera{
		Width:      int(c.Width),
		Height:     int(c.Height),
		Fx:         fx,
		Fy:         fy,
		Cx:         cx,
		Cy:         cy,
		R:          camera.RotationFromQuat(q[0], q[1], q[2], q[3]),
		T:          img.T,
		Distortion: dist,
	}, nil
}

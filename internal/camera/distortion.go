package camera

// Model is a COLMAP camera model name ("PINHOLE", "OPENCV", ...).
type Model string

// Distortion is a lens distortion in normalised image coordinates
// (x = X/Z, y = Y/Z), in one of COLMAP's models. Params holds the model's
// parameters after the focal lengths and principal point, in COLMAP's order
// (for OPENCV: k1 k2 p1 p2).
type Distortion struct {
	Model  Model
	Params []float64
}

// IsPinhole reports whether the distortion is the identity.
func (d Distortion) IsPinhole() bool {
	if d.Model == "" || d.Model == "PINHOLE" || d.Model == "SIMPLE_PINHOLE" {
		return true
	}
	for _, p := range d.Params {
		if p != 0 {
			return false
		}
	}
	return true
}

// Distort maps undistorted normalised coordinates to distorted ones.
// TODO(helper): every COLMAP model.
func (d Distortion) Distort(xu, yu float64) (xd, yd float64) { return xu, yu }

// Undistort inverts Distort by Newton iteration; ok is false when it does
// not converge.
// TODO(helper): every COLMAP model.
func (d Distortion) Undistort(xd, yd float64) (xu, yu float64, ok bool) { return xd, yd, true }

package train

import (
	"math"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
)

// OrbitCameras returns n cameras on a circle around the point the dataset's
// cameras look at: the circle lies in the plane perpendicular to the
// cameras' mean up direction, at their mean distance and height, and every
// camera has the first view's intrinsics.
func OrbitCameras(ds *dataset.Dataset, n int) []camera.Camera {
	views := append(append([]dataset.View(nil), ds.Train...), ds.Test...)
	if len(views) == 0 || n <= 0 {
		return nil
	}
	target := cameraCentroid(ds)
	// Mean up: camera y points down, so up is −(row 1 of R).
	var up [3]float64
	for _, v := range views {
		for a := 0; a < 3; a++ {
			up[a] -= v.Camera.R[1][a]
		}
	}
	up = unit(up)
	var radius, height float64
	for _, v := range views {
		c := v.Camera.Center()
		d := sub3(c, target)
		h := dot(d, up)
		height += h / float64(len(views))
		radius += math.Sqrt(math.Max(dot(d, d)-h*h, 0)) / float64(len(views))
	}
	// A basis of the orbit plane.
	e1 := unit(sub3(views[0].Camera.Center(), target))
	e1 = unit(sub3(e1, scale3(up, dot(e1, up))))
	e2 := cross3(up, e1)
	base := views[0].Camera
	base.Distortion = camera.Distortion{}
	cams := make([]camera.Camera, n)
	for i := range cams {
		th := 2 * math.Pi * float64(i) / float64(n)
		eye := target
		for a := 0; a < 3; a++ {
			eye[a] += radius*(math.Cos(th)*e1[a]+math.Sin(th)*e2[a]) + height*up[a]
		}
		fwd := unit(sub3(target, eye))
		right := unit(cross3(fwd, up))
		down := cross3(fwd, right)
		c := base
		c.R = [3][3]float64{right, down, fwd}
		for a := 0; a < 3; a++ {
			c.T[a] = -dot(c.R[a], eye)
		}
		cams[i] = c
	}
	return cams
}

func dot(a, b [3]float64) float64               { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }
func sub3(a, b [3]float64) [3]float64           { return [3]float64{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }
func scale3(a [3]float64, s float64) [3]float64 { return [3]float64{a[0] * s, a[1] * s, a[2] * s} }
func cross3(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}
func unit(a [3]float64) [3]float64 {
	n := math.Sqrt(dot(a, a))
	if n == 0 {
		return a
	}
	return scale3(a, 1/n)
}

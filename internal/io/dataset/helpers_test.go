package dataset

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/colmap"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// sharedDir returns ../shared next to the module root (the directory
// holding go.mod), or skips the test when it is absent.
func sharedDir(t testing.TB) string {
	t.Helper()
	return filepath.Dir(sharedtest.Path(t, "data"))
}

// writeFile writes data under dir, creating folders.
func writeFile(t testing.TB, dir, rel, data string) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeImage writes a w×h 8-bit PNG whose pixel (x, y) is px(x, y).
func writeImage(t testing.TB, dir, rel string, w, h int, px func(x, y int) color.NRGBA) {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.SetNRGBA(x, y, px(x, y))
		}
	}
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, m); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func flat(v uint8) func(x, y int) color.NRGBA {
	return func(x, y int) color.NRGBA { return color.NRGBA{v, v, v, 255} }
}

// pattern is a deterministic opaque texture.
func pattern(x, y int) color.NRGBA {
	return color.NRGBA{uint8(x * 17), uint8(y * 29), uint8((x + y) * 7), 255}
}

func fmtF(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// writeColmapText writes a COLMAP text model into dir/sub: cams keyed by
// ID, imgs in order, and the points with empty tracks.
func writeColmapText(t testing.TB, dir, sub string, cams map[uint32]colmap.Camera, imgs []colmap.Image, pts []colmap.Point3D) {
	t.Helper()
	var cb, ib, pb strings.Builder
	for id, c := range cams {
		fmt.Fprintf(&cb, "%d %s %d %d", id, c.Model, c.Width, c.Height)
		for _, p := range c.Params {
			cb.WriteString(" " + fmtF(p))
		}
		cb.WriteString("\n")
	}
	for _, im := range imgs {
		fmt.Fprintf(&ib, "%d %s %s %s %s %s %s %s %d %s\n\n", im.ID,
			fmtF(im.Q[0]), fmtF(im.Q[1]), fmtF(im.Q[2]), fmtF(im.Q[3]),
			fmtF(im.T[0]), fmtF(im.T[1]), fmtF(im.T[2]), im.CameraID, im.Name)
	}
	for _, p := range pts {
		fmt.Fprintf(&pb, "%d %s %s %s %d %d %d 0.5\n", p.ID, fmtF(p.XYZ[0]), fmtF(p.XYZ[1]), fmtF(p.XYZ[2]), p.RGB[0], p.RGB[1], p.RGB[2])
	}
	writeFile(t, dir, sub+"/cameras.txt", cb.String())
	writeFile(t, dir, sub+"/images.txt", ib.String())
	writeFile(t, dir, sub+"/points3D.txt", pb.String())
}

// ringImages returns n COLMAP images on a circle of radius 3 around the
// origin, all looking at it, named im_00.png, im_01.png, ...
func ringImages(n int) []colmap.Image {
	imgs := make([]colmap.Image, n)
	for i := range imgs {
		a := 2 * math.Pi * float64(i) / float64(n)
		// Camera z axis towards the origin, y down along world −z, x = y × z.
		ctr := [3]float64{3 * math.Cos(a), 3 * math.Sin(a), 0}
		z := [3]float64{-math.Cos(a), -math.Sin(a), 0}
		y := [3]float64{0, 0, -1}
		x := [3]float64{y[1]*z[2] - y[2]*z[1], y[2]*z[0] - y[0]*z[2], y[0]*z[1] - y[1]*z[0]}
		r := [3][3]float64{x, y, z}
		q := quatFromRot(r)
		var tr [3]float64
		for k := 0; k < 3; k++ {
			tr[k] = -(r[k][0]*ctr[0] + r[k][1]*ctr[1] + r[k][2]*ctr[2])
		}
		imgs[i] = colmap.Image{ID: uint32(i + 1), Q: q, T: tr, CameraID: 1, Name: fmt.Sprintf("im_%02d.png", i)}
	}
	return imgs
}

// quatFromRot converts a rotation matrix to a unit quaternion (w,x,y,z).
func quatFromRot(r [3][3]float64) [4]float64 {
	tr := r[0][0] + r[1][1] + r[2][2]
	switch {
	case tr > 0:
		s := 2 * math.Sqrt(tr+1)
		return [4]float64{s / 4, (r[2][1] - r[1][2]) / s, (r[0][2] - r[2][0]) / s, (r[1][0] - r[0][1]) / s}
	case r[0][0] > r[1][1] && r[0][0] > r[2][2]:
		s := 2 * math.Sqrt(1+r[0][0]-r[1][1]-r[2][2])
		return [4]float64{(r[2][1] - r[1][2]) / s, s / 4, (r[0][1] + r[1][0]) / s, (r[0][2] + r[2][0]) / s}
	case r[1][1] > r[2][2]:
		s := 2 * math.Sqrt(1+r[1][1]-r[0][0]-r[2][2])
		return [4]float64{(r[0][2] - r[2][0]) / s, (r[0][1] + r[1][0]) / s, s / 4, (r[1][2] + r[2][1]) / s}
	}
	s := 2 * math.Sqrt(1+r[2][2]-r[0][0]-r[1][1])
	return [4]float64{(r[1][0] - r[0][1]) / s, (r[0][2] + r[2][0]) / s, (r[1][2] + r[2][1]) / s, s / 4}
}

// transformsFrame returns a transforms.json frame for a COLMAP-style
// image: camera-to-world with the y and z axes flipped to OpenGL's.
func transformsFrame(im colmap.Image, filePath string) string {
	r := camera.RotationFromQuat(im.Q[0], im.Q[1], im.Q[2], im.Q[3])
	c := camera.Camera{R: r, T: im.T}
	ctr := c.Center()
	var rows [3]string
	flip := [3]float64{1, -1, -1}
	for i := 0; i < 3; i++ {
		// c2w[i][j] = R[j][i] · flip[j]
		rows[i] = fmt.Sprintf("[%s, %s, %s, %s]", fmtF(r[0][i]*flip[0]), fmtF(r[1][i]*flip[1]), fmtF(r[2][i]*flip[2]), fmtF(ctr[i]))
	}
	return fmt.Sprintf(`{"file_path": %q, "transform_matrix": [%s, %s, %s, [0, 0, 0, 1]]}`, filePath, rows[0], rows[1], rows[2])
}

// project maps a world point to pixel coordinates with a pinhole camera.
func project(c camera.Camera, p [3]float64) (u, v, z float64) {
	q := c.ToCamera(p)
	return c.Fx*q[0]/q[2] + c.Cx, c.Fy*q[1]/q[2] + c.Cy, q[2]
}

package colmap

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// findShared returns ../shared/<rel> next to the directory holding go.mod,
// walking up from the package directory; ok is false when it is absent.
func findShared(rel ...string) (string, bool) { return sharedtest.Find(rel...) }

// sharedPath is findShared for tests: it skips, saying why, when absent.
func sharedPath(t testing.TB, rel ...string) string {
	t.Helper()
	p, ok := findShared(rel...)
	if !ok {
		t.Skipf("shared data %q absent (expected at ../shared next to the repository)", filepath.Join(rel...))
	}
	return p
}

// --- the binary encoders (write.go), for tests ---

func writeCamerasBinary(t testing.TB, cams map[uint32]Camera) []byte {
	t.Helper()
	b, err := EncodeCamerasBinary(cams)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeImagesBinary(imgs []Image) []byte { return EncodeImagesBinary(imgs) }

func writePoints3DBinary(pts []Point3D) []byte { return EncodePoints3DBinary(pts) }

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func writeCamerasText(cams map[uint32]Camera) []byte {
	var b strings.Builder
	b.WriteString("# Camera list with one line of data per camera:\n#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n")
	fmt.Fprintf(&b, "# Number of cameras: %d\n", len(cams))
	for _, id := range sortedCameraIDs(cams) {
		c := cams[id]
		fmt.Fprintf(&b, "%d %s %d %d", c.ID, c.Model, c.Width, c.Height)
		for _, p := range c.Params {
			b.WriteString(" " + ftoa(p))
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

func writeImagesText(imgs []Image) []byte {
	var b strings.Builder
	b.WriteString("# Image list with two lines of data per image:\n")
	b.WriteString("#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n#   POINTS2D[] as (X, Y, POINT3D_ID)\n")
	for _, im := range imgs {
		fmt.Fprintf(&b, "%d", im.ID)
		for _, v := range im.Q {
			b.WriteString(" " + ftoa(v))
		}
		for _, v := range im.T {
			b.WriteString(" " + ftoa(v))
		}
		fmt.Fprintf(&b, " %d %s\n", im.CameraID, im.Name)
		for k, p := range im.Points2D {
			if k > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s %s %d", ftoa(p.X), ftoa(p.Y), p.Point3DID)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

func writePoints3DText(pts []Point3D) []byte {
	var b strings.Builder
	b.WriteString("# 3D point list with one line of data per point:\n")
	b.WriteString("#   POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[] as (IMAGE_ID, POINT2D_IDX)\n")
	for _, p := range pts {
		fmt.Fprintf(&b, "%d %s %s %s %d %d %d %s", p.ID, ftoa(p.XYZ[0]), ftoa(p.XYZ[1]), ftoa(p.XYZ[2]),
			p.RGB[0], p.RGB[1], p.RGB[2], ftoa(p.Error))
		for _, e := range p.Track {
			fmt.Fprintf(&b, " %d %d", e.ImageID, e.Point2DIdx)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// --- comparisons: exact, with NaN equal to NaN (text cannot keep NaN
// payloads) and -0 distinct from +0 ---

func sameF(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return a == b && math.Signbit(a) == math.Signbit(b)
}

func sameFs(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameF(a[i], b[i]) {
			return false
		}
	}
	return true
}

// diffCameras returns "" when equal, else the first difference.
func diffCameras(a, b map[uint32]Camera) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d cameras vs %d", len(a), len(b))
	}
	for id, ca := range a {
		cb, ok := b[id]
		if !ok {
			return fmt.Sprintf("camera %d missing", id)
		}
		if ca.ID != cb.ID || ca.Model != cb.Model || ca.Width != cb.Width || ca.Height != cb.Height || !sameFs(ca.Params, cb.Params) {
			return fmt.Sprintf("camera %d: %+v vs %+v", id, ca, cb)
		}
	}
	return ""
}

func diffImages(a, b []Image) string { return diffImagesQ(a, b, 0) }

// ulpDist is the distance of two finite floats in units in the last place.
func ulpDist(a, b float64) uint64 {
	ia, ib := int64(math.Float64bits(a)), int64(math.Float64bits(b))
	// Map the sign-magnitude encoding onto a monotonic integer line.
	if ia < 0 {
		ia = math.MinInt64 - ia
	}
	if ib < 0 {
		ib = math.MinInt64 - ib
	}
	if ia > ib {
		return uint64(ia - ib)
	}
	return uint64(ib - ia)
}

// diffImagesQ is diffImages allowing the quaternions to differ by qULP
// units in the last place (see TestDuckBinaryMatchesText).
func diffImagesQ(a, b []Image, qULP uint64) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d images vs %d", len(a), len(b))
	}
	for i := range a {
		x, y := &a[i], &b[i]
		qok := sameFs(x.Q[:], y.Q[:])
		if !qok && qULP > 0 {
			qok = true
			for k := range x.Q {
				if ulpDist(x.Q[k], y.Q[k]) > qULP {
					qok = false
				}
			}
		}
		if x.ID != y.ID || x.CameraID != y.CameraID || x.Name != y.Name || !qok || !sameFs(x.T[:], y.T[:]) {
			return fmt.Sprintf("image #%d: id %d/%d cam %d/%d name %q/%q q %v/%v t %v/%v",
				i, x.ID, y.ID, x.CameraID, y.CameraID, x.Name, y.Name, x.Q, y.Q, x.T, y.T)
		}
		if len(x.Points2D) != len(y.Points2D) {
			return fmt.Sprintf("image %d: %d keypoints vs %d", x.ID, len(x.Points2D), len(y.Points2D))
		}
		for k := range x.Points2D {
			p, q := x.Points2D[k], y.Points2D[k]
			if !sameF(p.X, q.X) || !sameF(p.Y, q.Y) || p.Point3DID != q.Point3DID {
				return fmt.Sprintf("image %d keypoint %d: %+v vs %+v", x.ID, k, p, q)
			}
		}
	}
	return ""
}

func diffPoints(a, b []Point3D) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d points vs %d", len(a), len(b))
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.ID != y.ID || !sameFs(x.XYZ[:], y.XYZ[:]) || x.RGB != y.RGB || !sameF(x.Error, y.Error) {
			return fmt.Sprintf("point #%d: %+v vs %+v", i, *x, *y)
		}
		if len(x.Track) != len(y.Track) {
			return fmt.Sprintf("point %d: track length %d vs %d", x.ID, len(x.Track), len(y.Track))
		}
		for k := range x.Track {
			if x.Track[k] != y.Track[k] {
				return fmt.Sprintf("point %d track %d: %+v vs %+v", x.ID, k, x.Track[k], y.Track[k])
			}
		}
	}
	return ""
}

// sampleModel is a small model with one camera of every COLMAP model (with
// distinct, non-round parameters), images with and without keypoints (one
// name with a space and a subdirectory) and points with and without tracks.
func sampleModel() *Model {
	cams := map[uint32]Camera{}
	for i, m := range CameraModels() {
		params := make([]float64, m.NumParams)
		for k := range params {
			params[k] = float64(100*(i+1)+k) + 1.0/3.0 - 0.05*float64(k*k)
		}
		id := uint32(10 + i)
		cams[id] = Camera{ID: id, Model: m.Name, Width: uint64(640 + i), Height: uint64(480 - i), Params: params}
	}
	imgs := []Image{
		{
			ID: 3, Q: [4]float64{0.9, -0.1, 0.3, 0.2}, T: [3]float64{1.5, -2.25, 3.125}, CameraID: 10,
			Name: "a.png",
			Points2D: []Point2D{
				{X: 12.5, Y: 40.25, Point3DID: 7},
				{X: 1e-300, Y: -0.0, Point3DID: -1},
				{X: 799.99999999999, Y: 532.5, Point3DID: 1 << 40},
			},
		},
		{ID: 1, Q: [4]float64{1, 0, 0, 0}, T: [3]float64{0, 0, 0}, CameraID: 14, Name: "sub dir/b 01.jpg"},
		{
			ID: 4000000000, Q: [4]float64{0.5, 0.5, 0.5, 0.5}, T: [3]float64{-1e10, 2.5e-8, 7}, CameraID: 27,
			Name: "c.JPG", Points2D: []Point2D{{X: 0.5, Y: 0.5, Point3DID: 9}},
		},
	}
	pts := []Point3D{
		{ID: 7, XYZ: [3]float64{0.1, -0.2, 3.3}, RGB: [3]uint8{0, 128, 255}, Error: 0.42,
			Track: []TrackElem{{ImageID: 3, Point2DIdx: 0}, {ImageID: 4000000000, Point2DIdx: 0}}},
		{ID: 9, XYZ: [3]float64{-5, 6.75, 1e-3}, RGB: [3]uint8{1, 2, 3}, Error: 1.5},
		{ID: 1 << 40, XYZ: [3]float64{1e20, -1e-20, 0}, RGB: [3]uint8{255, 255, 255}, Error: 0,
			Track: []TrackElem{{ImageID: 3, Point2DIdx: 2}}},
	}
	return &Model{Cameras: cams, Images: imgs, Points: pts}
}

// tinyModel is the smallest model that still has every kind of record and
// count: one OPENCV camera, one image with two keypoints, one point with
// a track of two. Its binary files are small enough to cut at every byte.
func tinyModel() *Model {
	return &Model{
		Cameras: map[uint32]Camera{1: {ID: 1, Model: "OPENCV", Width: 800, Height: 533,
			Params: []float64{600, 610, 400, 266.5, -0.05, 0.01, 0.001, -0.002}}},
		Images: []Image{{ID: 17, Q: [4]float64{1, 0, 0, 0}, T: [3]float64{0, 0, 4}, CameraID: 1, Name: "im.png",
			Points2D: []Point2D{{X: 10, Y: 20, Point3DID: 5}, {X: 30, Y: 40, Point3DID: -1}}}},
		Points: []Point3D{{ID: 5, XYZ: [3]float64{0, 0, 1}, RGB: [3]uint8{9, 8, 7}, Error: 0.5,
			Track: []TrackElem{{ImageID: 17, Point2DIdx: 0}, {ImageID: 17, Point2DIdx: 1}}}},
	}
}

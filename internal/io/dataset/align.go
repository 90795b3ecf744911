package dataset

import (
	"fmt"
	"math"
	"path"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/colmap"
)

// PointsFrom reads the points of the COLMAP model in sparseDir and maps
// them into the dataset's frame: the images the model and the dataset share
// (matched by file name without extension) give two sets of cameras, and the
// similarity between them (scale, rotation, translation) carries the points
// over. For the dataset's own model it is the identity. Colours are in
// [0,1]. The note says what was matched and how well the cameras agree.
func PointsFrom(ds *Dataset, sparseDir string) (xyz, rgb []float32, note string, err error) {
	m, err := colmap.ReadModel(sparseDir)
	if err != nil {
		return nil, nil, "", fmt.Errorf("dataset: init points: %w", err)
	}
	if len(m.Points) == 0 {
		return nil, nil, "", fmt.Errorf("dataset: init points: %s has no points", sparseDir)
	}
	byName := map[string]colmap.Image{}
	for _, im := range m.Images {
		byName[stem(im.Name)] = im
	}
	var a, b []camera.Camera
	for _, v := range append(append([]View(nil), ds.Train...), ds.Test...) {
		im, ok := byName[stem(v.Name)]
		if !ok {
			continue
		}
		c, err := colmap.ToCamera(im, m.Cameras)
		if err != nil {
			return nil, nil, "", fmt.Errorf("dataset: init points: %w", err)
		}
		a, b = append(a, c), append(b, v.Camera)
	}
	if len(a) < 3 {
		return nil, nil, "", fmt.Errorf("dataset: init points: %s shares %d images with the dataset by name; at least 3 are needed to align them", sparseDir, len(a))
	}
	s, q, t := Similarity(a, b)
	var res float64
	for i := range a {
		p := ApplySimilarity(s, q, t, a[i].Center())
		c := b[i].Center()
		res += math.Sqrt((p[0]-c[0])*(p[0]-c[0])+(p[1]-c[1])*(p[1]-c[1])+(p[2]-c[2])*(p[2]-c[2])) / float64(len(a))
	}
	xyz = make([]float32, 0, 3*len(m.Points))
	rgb = make([]float32, 0, 3*len(m.Points))
	for _, p := range m.Points {
		x := ApplySimilarity(s, q, t, p.XYZ)
		for k := 0; k < 3; k++ {
			xyz = append(xyz, float32(x[k]))
			rgb = append(rgb, float32(p.RGB[k])/255)
		}
	}
	note = fmt.Sprintf("starting from the %d points of %s, mapped by the similarity of %d shared cameras (scale %.4g, mean camera-centre residual %.3g = %.2g%% of the extent)",
		len(m.Points), sparseDir, len(a), s, res, 100*res/math.Max(ds.Extent, 1e-12))
	return xyz, rgb, note, nil
}

func stem(name string) string {
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	return strings.TrimSuffix(base, path.Ext(base))
}

// Similarity estimates x_b = s·Q·x_a + t between two pose sets of the same
// views: each view gives Q ≈ R_bᵀ R_a (world-to-camera rotations), averaged
// and projected back to a rotation; s is the ratio of the spreads of the
// camera centres, t matches their means.
func Similarity(a, b []camera.Camera) (s float64, q [3][3]float64, t [3]float64) {
	var ma, mb [3]float64
	for i := range a {
		ra, rb := a[i].R, b[i].R
		for r := 0; r < 3; r++ {
			for c := 0; c < 3; c++ {
				for k := 0; k < 3; k++ {
					q[r][c] += rb[k][r] * ra[k][c]
				}
			}
		}
		ca, cb := a[i].Center(), b[i].Center()
		for k := 0; k < 3; k++ {
			ma[k] += ca[k] / float64(len(a))
			mb[k] += cb[k] / float64(len(a))
		}
	}
	q = polar(q)
	var sa, sb float64
	for i := range a {
		ca, cb := a[i].Center(), b[i].Center()
		for k := 0; k < 3; k++ {
			sa += (ca[k] - ma[k]) * (ca[k] - ma[k])
			sb += (cb[k] - mb[k]) * (cb[k] - mb[k])
		}
	}
	s = math.Sqrt(sb / sa)
	qm := ApplySimilarity(s, q, [3]float64{}, ma)
	for k := 0; k < 3; k++ {
		t[k] = mb[k] - qm[k]
	}
	return s, q, t
}

// ApplySimilarity returns s·Q·p + t.
func ApplySimilarity(s float64, q [3][3]float64, t, p [3]float64) [3]float64 {
	var o [3]float64
	for r := 0; r < 3; r++ {
		o[r] = s*(q[r][0]*p[0]+q[r][1]*p[1]+q[r][2]*p[2]) + t[r]
	}
	return o
}

// polar returns the rotation nearest to m by the iteration M ← ½(M + M⁻ᵀ),
// after scaling m to unit determinant.
func polar(m [3][3]float64) [3][3]float64 {
	det := func(a [3][3]float64) float64 {
		return a[0][0]*(a[1][1]*a[2][2]-a[1][2]*a[2][1]) - a[0][1]*(a[1][0]*a[2][2]-a[1][2]*a[2][0]) + a[0][2]*(a[1][0]*a[2][1]-a[1][1]*a[2][0])
	}
	sc := math.Cbrt(det(m))
	for i := range m {
		for j := range m[i] {
			m[i][j] /= sc
		}
	}
	for it := 0; it < 50; it++ {
		d := det(m)
		var n [3][3]float64
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				i1, i2, j1, j2 := (i+1)%3, (i+2)%3, (j+1)%3, (j+2)%3
				n[i][j] = 0.5 * (m[i][j] + (m[i1][j1]*m[i2][j2]-m[i1][j2]*m[i2][j1])/d)
			}
		}
		m = n
	}
	return m
}

package viewer_test

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/demo"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/io/scene"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// sharedPath is a file under ../shared (relative to the repository root).
func sharedPath(rel string) string { return filepath.Join("..", "..", "..", "shared", rel) }

// TestBrowserMatchesRenderDemo: the demo scene's true Gaussians at two of its cameras.
func TestBrowserMatchesRenderDemo(t *testing.T) {
	browserPath(t)
	opt := demo.DefaultOptions()
	opt.Views = 8
	ds, err := demo.Generate(opt)
	if err != nil {
		t.Fatal(err)
	}
	cams := []camera.Camera{ds.Test[0].Camera, ds.Train[3].Camera}
	compareScene(t, "demo", demo.Truth(opt.Seed), splat.MaxSHDegree, cams, [3]float32{0, 0, 0})
}

// TestBrowserMatchesRenderTrain1000: 1000 splats of a real trained scene with SH degree 3,
// seen from two cameras aimed at their centre, on a grey background.
func TestBrowserMatchesRenderTrain1000(t *testing.T) {
	browserPath(t)
	path := sharedPath("fixtures/ply/train-1000.ply")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s absent: %v", path, err)
	}
	g, info, err := ply.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Aim at the median splat from 1.5 median distances away, along two directions.
	var ctr [3]float64
	for a := 0; a < 3; a++ {
		v := make([]float64, g.Len())
		for i := range v {
			v[i] = float64(g.Means[3*i+a])
		}
		ctr[a] = median(v)
	}
	d := make([]float64, g.Len())
	for i := range d {
		d[i] = math.Hypot(math.Hypot(float64(g.Means[3*i])-ctr[0], float64(g.Means[3*i+1])-ctr[1]), float64(g.Means[3*i+2])-ctr[2])
	}
	r := median(d)
	var cams []camera.Camera
	for _, dir := range [][3]float64{{0.3, -0.4, -1}, {-1, -0.3, 0.2}} {
		n := math.Sqrt(dir[0]*dir[0] + dir[1]*dir[1] + dir[2]*dir[2])
		eye := [3]float64{ctr[0] + 1.5*r*dir[0]/n, ctr[1] + 1.5*r*dir[1]/n, ctr[2] + 1.5*r*dir[2]/n}
		R, T := camera.LookAt(eye, ctr, [3]float64{0, 1, 0})
		cams = append(cams, camera.Camera{Width: 320, Height: 240, Fx: 260, Fy: 260, Cx: 160, Cy: 120, R: R, T: T})
	}
	compareScene(t, "train1000", g, info.SHDegree, cams, [3]float32{0.5, 0.5, 0.5})
}

// TestBrowserMatchesRenderTrained compares a trained scene named by RLXSPLAT_VIEWER_SCENE (any
// format the scene reader takes: PLY, SPZ, .splat, .glb, checkpoint; paths absolute, or
// relative to internal/viewer, where go test runs) at the first test views of the dataset
// RLXSPLAT_VIEWER_DATA (downscaled by RLXSPLAT_VIEWER_DOWNSCALE): the duck and bonsai
// screenshots come from it.
func TestBrowserMatchesRenderTrained(t *testing.T) {
	scenePath, dataDir := os.Getenv("RLXSPLAT_VIEWER_SCENE"), os.Getenv("RLXSPLAT_VIEWER_DATA")
	if scenePath == "" || dataDir == "" {
		t.Skip("set RLXSPLAT_VIEWER_SCENE and RLXSPLAT_VIEWER_DATA to compare a trained scene at its dataset's test views")
	}
	browserPath(t)
	sc, err := scene.ReadFile(scenePath)
	if err != nil {
		t.Fatal(err)
	}
	o := dataset.DefaultOptions()
	o.Downscale = envInt("RLXSPLAT_VIEWER_DOWNSCALE", 1)
	ds, err := dataset.Load(dataDir, o)
	if err != nil {
		t.Fatal(err)
	}
	views := ds.Test
	if len(views) == 0 {
		views = ds.Train
	}
	var cams []camera.Camera
	for i := 0; i < min(2, len(views)); i++ {
		cams = append(cams, views[i].Camera)
	}
	name := os.Getenv("RLXSPLAT_VIEWER_NAME")
	if name == "" {
		name = filepath.Base(dataDir)
	}
	compareScene(t, name, sc.Gaussians, sc.SHDegree, cams, o.Background)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := 1; i < len(s); i++ { // insertion sort: a thousand values
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

package demo

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/colmap"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
)

// WriteCOLMAP writes ds as a COLMAP capture in dir: images/NAME.png (8-bit) and the binary
// model in sparse/0 (one PINHOLE camera per distinct set of intrinsics, the views' poses,
// the points with their colours and no tracks), so that `rlxsplat train --data dir` reads it
// as it reads a real capture. The views are written train and test alike, in name order;
// the loader holds out its own test views.
func WriteCOLMAP(dir string, ds *dataset.Dataset) error {
	views := append(slices.Clone(ds.Train), ds.Test...)
	slices.SortFunc(views, func(a, b dataset.View) int { return strings.Compare(a.Name, b.Name) })
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	m := &colmap.Model{Cameras: map[uint32]colmap.Camera{}}
	camIDs := map[[6]float64]uint32{}
	for i, v := range views {
		c := v.Camera
		if !c.Distortion.IsPinhole() {
			return fmt.Errorf("demo: view %s: only pinhole cameras are written", v.Name)
		}
		key := [6]float64{float64(c.Width), float64(c.Height), c.Fx, c.Fy, c.Cx, c.Cy}
		id, ok := camIDs[key]
		if !ok {
			id = uint32(len(camIDs) + 1)
			camIDs[key] = id
			m.Cameras[id] = colmap.Camera{ID: id, Model: "PINHOLE", Width: uint64(c.Width), Height: uint64(c.Height),
				Params: []float64{c.Fx, c.Fy, c.Cx, c.Cy}}
		}
		name := v.Name + ".png"
		if err := imageio.SavePNG(filepath.Join(dir, "images", name), v.Image.RGB, v.Image.W, v.Image.H); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		w, x, y, z := camera.QuatFromRotation(c.R)
		m.Images = append(m.Images, colmap.Image{ID: uint32(i + 1), Q: [4]float64{w, x, y, z}, T: c.T, CameraID: id, Name: name})
	}
	for i := 0; i < len(ds.Points)/3; i++ {
		p := colmap.Point3D{ID: uint64(i + 1)}
		for a := 0; a < 3; a++ {
			p.XYZ[a] = float64(ds.Points[3*i+a])
			p.RGB[a] = uint8(math.Round(255 * min(max(float64(ds.PointColors[3*i+a]), 0), 1)))
		}
		m.Points = append(m.Points, p)
	}
	if err := colmap.WriteBinary(filepath.Join(dir, "sparse", "0"), m); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

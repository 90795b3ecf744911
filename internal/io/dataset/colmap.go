package dataset

import (
	"fmt"
	"path/filepath"

	"github.com/rlxsplat/rlxsplat/internal/io/colmap"
)

// colmapSpecs lists the views of a COLMAP model and its points. Every
// camera is checked before any image is read, so a distorted model is
// refused at once.
func colmapSpecs(dir, sparse string, opt Options) (specs []viewSpec, points, colors []float32, err error) {
	m, err := colmap.ReadModel(sparse)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dataset: %w", err)
	}
	imagesDir := joinDir(dir, opt.ImagesDir)
	specs = make([]viewSpec, 0, len(m.Images))
	for _, img := range m.Images {
		cam, err := colmap.ToCamera(img, m.Cameras)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("dataset: %s: %w", sparse, err)
		}
		if !opt.AllowDistortion && !cam.Distortion.IsPinhole() {
			return nil, nil, nil, fmt.Errorf("dataset: %s: image %s uses camera %d, model %s with lens distortion %v: "+
				"the default render model needs undistorted images; undistort the capture with COLMAP's image_undistorter "+
				"(as the original 3DGS convert.py does) and train on its images/ and sparse/, or set model.render: ray, "+
				"which handles distortion",
				sparse, img.Name, img.CameraID, cam.Distortion.Model, cam.Distortion.Params)
		}
		specs = append(specs, viewSpec{
			name:   img.Name,
			path:   filepath.Join(imagesDir, filepath.FromSlash(img.Name)),
			cam:    cam,
			origin: fmt.Sprintf("image %d of %s", img.ID, sparse),
		})
	}
	sortSpecs(specs)
	if len(m.Points) > 0 {
		points = make([]float32, 3*len(m.Points))
		colors = make([]float32, 3*len(m.Points))
		for i, p := range m.Points {
			for k := 0; k < 3; k++ {
				points[3*i+k] = float32(p.XYZ[k])
				colors[3*i+k] = float32(p.RGB[k]) / 255
			}
		}
	}
	return specs, points, colors, nil
}

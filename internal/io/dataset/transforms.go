package dataset

import (
	"fmt"
	"path/filepath"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/nerf"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
)

// transformsSpecs lists the views of a transforms.json capture (split by
// TestEvery) or of a NeRF-synthetic one (transforms_train.json, with
// transforms_test.json — or transforms_val.json when there is no test
// file — as the test set), and nerfstudio's ply_file_path points.
func transformsSpecs(dir, file string, opt Options) (specs []viewSpec, points, colors []float32, err error) {
	tr, err := nerf.Read(file)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("dataset: %w", err)
	}
	split := splitAuto
	var testFile string
	if filepath.Base(file) == "transforms_train.json" {
		for _, c := range []string{"transforms_test.json", "transforms_val.json"} {
			if p := filepath.Join(dir, c); isFile(p) {
				testFile = p
				break
			}
		}
		if testFile != "" {
			split = splitTrain
		}
	}
	if specs, err = frameSpecs(dir, tr, split, opt); err != nil {
		return nil, nil, nil, err
	}
	if testFile != "" && opt.TestEvery > 0 {
		tt, err := nerf.Read(testFile)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("dataset: %w", err)
		}
		more, err := frameSpecs(dir, tt, splitTest, opt)
		if err != nil {
			return nil, nil, nil, err
		}
		specs = append(specs, more...)
	}
	sortSpecs(specs)

	if tr.PLYFile != "" {
		xyz, rgb, err := ply.ReadPointCloud(tr.PLYFile)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("dataset: %s: ply_file_path: %w", file, err)
		}
		if len(xyz)%3 != 0 || (rgb != nil && len(rgb) != len(xyz)) {
			return nil, nil, nil, fmt.Errorf("dataset: %s: ply_file_path %s: %d coordinates and %d colour values do not make [N,3] points",
				file, tr.PLYFile, len(xyz), len(rgb))
		}
		if len(xyz) > 0 {
			points = xyz
			colors = make([]float32, len(xyz))
			for i := range colors {
				colors[i] = 0.5 // no colours in the file: neutral grey
				if rgb != nil {
					colors[i] = float32(rgb[i]) / 255
				}
			}
		}
	}
	return specs, points, colors, nil
}

func frameSpecs(dir string, tr *nerf.Transforms, split int, opt Options) ([]viewSpec, error) {
	specs := make([]viewSpec, 0, len(tr.Frames))
	for i, f := range tr.Frames {
		origin := fmt.Sprintf("%s frames[%d]", tr.Path, i)
		if !opt.AllowDistortion && !f.Distortion.IsPinhole() {
			return nil, fmt.Errorf("dataset: %s: camera model %s with lens distortion %v: "+
				"the default render model needs undistorted images; undistort them first, or set model.render: ray, "+
				"which handles distortion", origin, f.Distortion.Model, f.Distortion.Params)
		}
		name := f.Image
		if rel, err := filepath.Rel(dir, f.Image); err == nil {
			name = filepath.ToSlash(rel)
		}
		s := viewSpec{name: name, path: f.Image, split: split, origin: origin}
		if f.Resolved() {
			s.cam = nerf.ToCamera(f)
		} else {
			s.resolve = func(w, h int) (camera.Camera, error) {
				if err := f.SetSize(w, h); err != nil {
					return camera.Camera{}, err
				}
				return nerf.ToCamera(f), nil
			}
		}
		specs = append(specs, s)
	}
	return specs, nil
}

package demo

import (
	"encoding/json"
	"fmt"
	"image"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// objectCentre is where the object scene's cameras look: the middle of the three blobs.
var objectCentre = [3]float64{0, 0.45, 0.2}

// ObjectTruth returns the object scene: the demo's three blobs without the floor, each
// painted with stripes so that the views carry fine detail as well as smooth shading.
func ObjectTruth(seed uint64) *splat.Gaussians {
	g := truth(seed, false)
	for i := 0; i < g.Len(); i++ {
		x, z := float64(g.Means[i*3]), float64(g.Means[i*3+2])
		stripe := 0.8 + 0.2*math.Copysign(1, math.Sin(14*math.Atan2(z-objectCentre[2], x-objectCentre[0])))
		for a := 0; a < 3; a++ {
			c := 0.5 + float64(splat.SHC0*g.SH[i*splat.SHCoeffs*3+a])
			g.SH[i*splat.SHCoeffs*3+a] = splat.RGBToDC(float32(c * stripe))
		}
	}
	return g
}

// objectCamera looks at the object from view v of n, on a sphere of radius 4 around it: the
// azimuth steps by the golden angle and the elevation sweeps 15°–65° above the horizon, as the
// NeRF-synthetic captures cover the upper hemisphere.
func objectCamera(v, n, w, h int) camera.Camera {
	az := float64(v) * math.Pi * (3 - math.Sqrt(5))
	el := (15 + 50*(float64(v)+0.5)/float64(n)) * math.Pi / 180
	eye := [3]float64{
		objectCentre[0] + 4*math.Cos(el)*math.Sin(az),
		objectCentre[1] - 4*math.Sin(el), // y points down: above is negative
		objectCentre[2] - 4*math.Cos(el)*math.Cos(az),
	}
	return lookingAt(eye, objectCentre, 1.1, w, h)
}

// Object renders a NeRF-synthetic-style dataset of the object scene: views with alpha (the
// object over nothing), composited over black as the loader composites over the default
// background, and no points (such captures have none: the trainer initialises at random).
func Object(opt Options) (*dataset.Dataset, error) {
	eng, err := renderer(opt, ObjectTruth(opt.Seed))
	if err != nil {
		return nil, err
	}
	ds := &dataset.Dataset{Format: "transforms", Dir: "(built-in object scene)"}
	var views []dataset.View
	for v := 0; v < opt.Views; v++ {
		cam := objectCamera(v, opt.Views, opt.Width, opt.Height)
		// Over black the render is the premultiplied colour C; over white it is C + T, so
		// the coverage is 1 − T and the straight colour C / (1 − T).
		black, err := eng.Render(&cam, 0, [3]float32{})
		if err != nil {
			return nil, fmt.Errorf("demo: rendering view %d: %w", v, err)
		}
		white, err := eng.Render(&cam, 0, [3]float32{1, 1, 1})
		if err != nil {
			return nil, fmt.Errorf("demo: rendering view %d: %w", v, err)
		}
		np := opt.Width * opt.Height
		alpha := make([]float32, np)
		for i := range alpha {
			alpha[i] = min(max(1-(white[3*i+1]-black[3*i+1]), 0), 1)
		}
		views = append(views, dataset.View{Name: fmt.Sprintf("r_%03d", v), Camera: cam,
			Image: &imageio.Image{W: opt.Width, H: opt.Height, RGB: black}, Alpha: alpha})
	}
	split(ds, views, opt.TestEvery)
	return ds, nil
}

// WriteNeRF writes ds as a NeRF-synthetic capture in dir: transforms_train.json and
// transforms_test.json (camera_angle_x and camera-to-world matrices in OpenGL axes, file
// paths without extension) and train/NAME.png, test/NAME.png as 8-bit RGBA with straight
// colour, so that `rlxsplat train --data dir` (and other trainers) read it like the Blender
// scenes. Every view must share the first one's pinhole intrinsics, with the principal point
// at the centre and square pixels, which is all camera_angle_x can say.
func WriteNeRF(dir string, ds *dataset.Dataset) error {
	if len(ds.Train) == 0 {
		return fmt.Errorf("demo: no training views to write")
	}
	c0 := ds.Train[0].Camera
	for _, split := range []struct {
		name  string
		views []dataset.View
	}{{"train", ds.Train}, {"test", ds.Test}} {
		if err := os.MkdirAll(filepath.Join(dir, split.name), 0o755); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		type frame struct {
			FilePath  string        `json:"file_path"`
			Transform [4][4]float64 `json:"transform_matrix"`
		}
		doc := struct {
			CameraAngleX float64 `json:"camera_angle_x"`
			Frames       []frame `json:"frames"`
		}{CameraAngleX: 2 * math.Atan(float64(c0.Width)/(2*c0.Fx)), Frames: []frame{}}
		for _, v := range split.views {
			c := v.Camera
			if c.Width != c0.Width || c.Height != c0.Height || c.Fx != c0.Fx || c.Fy != c.Fx ||
				c.Cx != float64(c.Width)/2 || c.Cy != float64(c.Height)/2 || !c.Distortion.IsPinhole() {
				return fmt.Errorf("demo: view %s: NeRF-synthetic files hold one centred pinhole camera with square pixels", v.Name)
			}
			if err := imageio.WritePNG(filepath.Join(dir, split.name, v.Name+".png"), straightRGBA(v)); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			doc.Frames = append(doc.Frames, frame{FilePath: "./" + split.name + "/" + v.Name, Transform: cameraToWorldGL(c)})
		}
		path := filepath.Join(dir, "transforms_"+split.name+".json")
		err := atomicfile.Write(path, func(w io.Writer) error {
			e := json.NewEncoder(w)
			e.SetIndent("", "  ")
			return e.Encode(doc)
		}, nil)
		if err != nil {
			return fmt.Errorf("demo: %s: %w", path, err)
		}
	}
	return nil
}

// cameraToWorldGL is c's camera-to-world matrix with the y and z axes flipped to OpenGL's.
func cameraToWorldGL(c camera.Camera) [4][4]float64 {
	ctr := c.Center()
	flip := [3]float64{1, -1, -1}
	var m [4][4]float64
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			m[i][j] = c.R[j][i] * flip[j]
		}
		m[i][3] = ctr[i]
	}
	m[3][3] = 1
	return m
}

// straightRGBA is v's image as 8-bit RGBA with straight colour: the premultiplied colour
// (the image over black) divided by the coverage.
func straightRGBA(v dataset.View) *image.NRGBA {
	w, h := v.Image.W, v.Image.H
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < w*h; i++ {
		a := float32(1)
		if v.Alpha != nil {
			a = v.Alpha[i]
		}
		for ch := 0; ch < 3; ch++ {
			c := float32(0)
			if a > 0 {
				c = v.Image.RGB[3*i+ch] / a
			}
			m.Pix[4*i+ch] = level(c)
		}
		m.Pix[4*i+3] = level(a)
	}
	return m
}

// level is v in [0,1] as the nearest 8-bit level (NaN as 0).
func level(v float32) uint8 {
	if !(v > 0) {
		return 0
	}
	return uint8(math.Round(float64(min(v, 1)) * 255))
}

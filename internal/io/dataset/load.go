package dataset

import (
	"fmt"
	"math"
	"path/filepath"

	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/par"
)

// source is where one view's image is read from.
type source struct {
	path   string
	scaled bool // from a pre-shrunk <folder>_N: the image is already 1/N size
}

// sources applies the folder plan to every view.
func sources(specs []viewSpec, plan map[string]string, folderOf func(string) string) ([]source, error) {
	out := make([]source, len(specs))
	for i, s := range specs {
		out[i] = source{path: s.path}
		folder := folderOf(s.path)
		alt, ok := plan[folder]
		if !ok {
			continue
		}
		rel, err := filepath.Rel(folder, s.path)
		if err != nil {
			return nil, fmt.Errorf("dataset: view %s: %w", s.name, err)
		}
		out[i] = source{path: filepath.Join(alt, rel), scaled: true}
	}
	return out, nil
}

// loadViews decodes every view's image with opt.Workers goroutines. The
// result is in spec order, and the error reported is the one of the first
// failing view in that order whatever the scheduling (par.Each).
func loadViews(specs []viewSpec, src []source, opt Options) ([]View, error) {
	views := make([]View, len(specs))
	err := par.Each(len(specs), opt.Workers, func(i int) error {
		var err error
		views[i], err = loadView(specs[i], src[i], opt)
		return err
	})
	if err != nil {
		return nil, err
	}
	return views, nil
}

func roundDiv(a, n int) int {
	return max(1, int(math.Round(float64(a)/float64(n))))
}

func absInt(a int) int {
	if a < 0 {
		return -a
	}
	return a
}

// loadView reads one image, checks it against its camera, brings it to the
// requested size, and scales the camera to match.
func loadView(s viewSpec, src source, opt Options) (View, error) {
	img, err := imageio.Load(src.path)
	if err != nil {
		return View{}, fmt.Errorf("dataset: view %s (%s): %w", s.name, s.origin, err)
	}
	n := max(opt.Downscale, 1)
	cam := s.cam
	if s.resolve != nil {
		// The file gives no size: the image does (times N for a
		// pre-shrunk copy, whose camera is then scaled back down).
		fw, fh := img.W, img.H
		if src.scaled {
			fw, fh = fw*n, fh*n
		}
		if cam, err = s.resolve(fw, fh); err != nil {
			return View{}, fmt.Errorf("dataset: view %s (%s): %w", s.name, s.origin, err)
		}
	}
	if src.scaled {
		// Tools that write images_N round either way: allow 1 px.
		ew, eh := roundDiv(cam.Width, n), roundDiv(cam.Height, n)
		if absInt(img.W-ew) > 1 || absInt(img.H-eh) > 1 {
			return View{}, fmt.Errorf("dataset: %s: image is %d×%d, but its camera is %d×%d, which /%d gives %d×%d",
				src.path, img.W, img.H, cam.Width, cam.Height, n, ew, eh)
		}
	} else if img.W != cam.Width || img.H != cam.Height {
		return View{}, fmt.Errorf("dataset: %s: image is %d×%d, but its camera is %d×%d",
			src.path, img.W, img.H, cam.Width, cam.Height)
	}

	tw, th := img.W, img.H
	if !src.scaled {
		switch {
		case opt.Downscale >= 2:
			tw, th = roundDiv(img.W, n), roundDiv(img.H, n)
		case opt.Downscale == 0 && img.W > opt.MaxWidth:
			// As the original 3DGS: the width becomes MaxWidth, the height
			// keeps the aspect ratio.
			tw = opt.MaxWidth
			th = max(1, int(math.Round(float64(img.H)*float64(opt.MaxWidth)/float64(img.W))))
		}
	}
	if tw != img.W || th != img.H {
		if img, err = imageio.Resize(img, tw, th); err != nil {
			return View{}, fmt.Errorf("dataset: %s: %w", src.path, err)
		}
	}
	v := View{Name: s.name, Camera: cam.Scaled(img.W, img.H), Image: img}
	if img.Alpha != nil {
		v.Alpha = img.Alpha
		v.Image = &imageio.Image{W: img.W, H: img.H, RGB: img.Composite(opt.Background)}
	}
	return v, nil
}

package train

import (
	"fmt"
	"math"

	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/par"
)

// Coarse-to-fine training (DashGaussian, Chen et al. 2025). A step's rasterization, loss and
// backward cost grows with its pixel count, so the early steps, which fit the scene's coarse
// structure, render smaller photos. DashGaussian places its resolution levels so that the
// photos' spectral energy (the sum of |FFT| inside each level's band) rises in equal steps of
// its logarithm, full size arriving at the end of densification; for photos whose amplitude
// spectrum falls as 1/f the band energy is proportional to the band's width, and the schedule
// is geometric: factor start^(1−s/until). rlxsplat takes that closed form (no FFT of the
// photos), rounded to the nearest integer factor, so that a run passes through a handful of
// sizes: each is one set of resized photos and one re-capture of the step.

// coarseFactor returns the integer factor by which step s's photo is scaled down: the
// integer nearest to CoarseScale^(1−s/CoarseUntil) before CoarseUntil, else 1.
func (o *Options) coarseFactor(s int) int {
	if o.CoarseScale <= 1 || s >= o.CoarseUntil {
		return 1
	}
	f := math.Pow(float64(o.CoarseScale), 1-float64(s)/float64(o.CoarseUntil))
	return max(1, int(math.Round(f)))
}

// coarseViews are the training views scaled down by one factor.
type coarseViews struct {
	factor int
	views  []dataset.View
}

// trainView returns training view vi as step s uses it: the dataset's, or its copy scaled down
// by the step's factor. The first step at a factor scales every training view (in parallel)
// and drops the last factor's copies: the factor only falls, so they are never needed again.
func (t *Trainer) trainView(vi, s int) (*dataset.View, error) {
	f := t.opt.coarseFactor(s)
	if f == 1 {
		t.coarse = nil
		return &t.ds.Train[vi], nil
	}
	if t.coarse == nil || t.coarse.factor != f {
		views, err := scaleViews(t.ds.Train, f, t.opt.Workers)
		if err != nil {
			return nil, fmt.Errorf("train: step %d: %w", s, err)
		}
		t.coarse = &coarseViews{factor: f, views: views}
	}
	return &t.coarse.views[vi], nil
}

// scaleViews returns the views scaled down by factor f: each photo area-averaged to
// ⌊W/f⌋ × ⌊H/f⌋ (at least 1 × 1), its alpha too, and the camera scaled to that size
// (camera.Scaled keeps the pixel-centre convention, so the scaled pixels cover the same rays).
func scaleViews(src []dataset.View, f, workers int) ([]dataset.View, error) {
	out := make([]dataset.View, len(src))
	err := par.Each(len(src), workers, func(i int) error {
		v := &src[i]
		w, h := max(1, v.Image.W/f), max(1, v.Image.H/f)
		// The target is already composited (opaque); the alpha that re-composites it over
		// another background is averaged on its own, as the compositing is linear in both.
		img, err := imageio.Resize(&imageio.Image{W: v.Image.W, H: v.Image.H, RGB: v.Image.RGB}, w, h)
		if err != nil {
			return fmt.Errorf("scaling view %s down by %d: %w", v.Name, f, err)
		}
		s := dataset.View{Name: v.Name, Camera: v.Camera.Scaled(w, h), Image: img}
		if v.Alpha != nil {
			if s.Alpha, err = imageio.ResizePlane(v.Alpha, v.Image.W, v.Image.H, w, h); err != nil {
				return fmt.Errorf("scaling the alpha of view %s down by %d: %w", v.Name, f, err)
			}
		}
		out[i] = s
		return nil
	})
	return out, err
}

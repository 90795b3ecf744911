package cpu

import (
	"fmt"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/raster"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Pipeline is one view's forward and backward through every stage but the
// optimizer (design.md §5 steps 1–7). It is generic so that the gradient
// checks run in float64 exactly the code the engine runs in float32, and it
// owns its buffers so that a training loop does not allocate per step.
type Pipeline[F splat.Float] struct {
	Set engine.Settings
	// AlphaMin overrides the alpha cutoff (footprints and raster); 0 keeps
	// prep.AlphaMin. Only the finite-difference checks set it.
	AlphaMin float64
	// FixedLists, when set, skips projection-driven binning and uses these
	// lists (the checks hold the lists fixed while they perturb parameters).
	FixedLists *prep.TileLists

	Cam    *prep.Cam[F]
	Proj   *prep.ProjectedOf[F]
	Lists  prep.TileLists
	Fwd    raster.Forward[F]
	PG     *prep.PrepGradsOf[F]
	Grads  *splat.GaussiansOf[F]
	Grad2D []F
	DImage []F
	Stats  raster.Stats[F]

	binner   prep.Binner
	rast     raster.Rasterizer[F]
	eval     *loss.EvaluatorOf[F]
	rays     []F
	raysCam  camera.Camera
	frame    raster.Frame[F]
	prepSet  prep.Settings
	Timings  map[string]time.Duration
	timeMark time.Time
}

// NewPipeline returns a pipeline for the settings.
func NewPipeline[F splat.Float](set engine.Settings) *Pipeline[F] {
	return &Pipeline[F]{Set: set, Proj: prep.NewProjected[F](set.Render, 0), Timings: map[string]time.Duration{}}
}

func (p *Pipeline[F]) mark(stage string) {
	now := time.Now()
	if stage != "" {
		p.Timings[stage] += now.Sub(p.timeMark)
	}
	p.timeMark = now
}

// Forward projects, bins, sorts and rasterizes g for cam.
func (p *Pipeline[F]) Forward(cam *camera.Camera, g *splat.GaussiansOf[F], shDegree int, bg [3]float32) error {
	if p.Set.Render == prep.EWA && !cam.Distortion.IsPinhole() {
		return fmt.Errorf("cpu: the ewa render model needs undistorted images (camera model %s): undistort them with COLMAP's image_undistorter or use model.render: ray", cam.Distortion.Model)
	}
	clear(p.Timings)
	p.mark("")
	p.Cam = prep.NewCam[F](cam)
	p.prepSet = p.Set.Prep(shDegree)
	p.prepSet.AlphaMin = p.AlphaMin
	workers := max(p.Set.Workers, 1)
	prep.Project(p.Cam, &p.prepSet, g, p.Proj, workers)
	p.mark(engine.StageProject)
	lists := p.FixedLists
	if lists == nil {
		conic := p.Set.BinMode != engine.BinGPURadiusAABB
		if err := prep.Emit(&p.binner, p.Proj, cam.Width, cam.Height, p.Set.TileSize, conic, workers); err != nil {
			return err
		}
		p.mark(engine.StageBin)
		p.binner.SortInto(&p.Lists)
		p.mark(engine.StageSort)
		lists = &p.Lists
	}
	if p.Set.Render == prep.Ray {
		p.updateRays(cam)
	}
	p.frame = raster.Frame[F]{
		Width: cam.Width, Height: cam.Height,
		Background:    [3]F{F(bg[0]), F(bg[1]), F(bg[2])},
		Proj:          p.Proj,
		Lists:         lists,
		Rays:          p.rays,
		MaxSplatSteps: p.Set.MaxSplatSteps,
		AlphaMin:      F(p.AlphaMin),
		Workers:       workers,
	}
	if err := p.rast.Render(&p.frame, &p.Fwd); err != nil {
		return err
	}
	p.mark(engine.StageRasterFwd)
	return nil
}

// updateRays computes the per-pixel world ray directions, once per camera.
func (p *Pipeline[F]) updateRays(cam *camera.Camera) {
	if p.rays != nil && p.raysCam.Width == cam.Width && p.raysCam.Height == cam.Height &&
		p.raysCam.R == cam.R && p.raysCam.T == cam.T && p.raysCam.Fx == cam.Fx && p.raysCam.Fy == cam.Fy &&
		p.raysCam.Cx == cam.Cx && p.raysCam.Cy == cam.Cy && sameDistortion(p.raysCam.Distortion, cam.Distortion) {
		return
	}
	p.rays = PixelRays[F](cam, p.rays)
	p.raysCam = *cam
	p.raysCam.Distortion.Params = append([]float64(nil), cam.Distortion.Params...)
}

func sameDistortion(a, b camera.Distortion) bool {
	if a.Model != b.Model || len(a.Params) != len(b.Params) {
		return false
	}
	for i := range a.Params {
		if a.Params[i] != b.Params[i] {
			return false
		}
	}
	return true
}

// PixelRays returns [H*W*3] unit world directions through every pixel
// centre, undistorted through the lens (float32 pinhole rays through
// prep.RayCam). A pixel whose undistortion fails
// gets a zero direction (it then sees only the background).
func PixelRays[F splat.Float](cam *camera.Camera, buf []F) []F {
	n := cam.Width * cam.Height * 3
	if cap(buf) < n {
		buf = make([]F, n)
	}
	buf = buf[:n]
	if f32, ok := any(buf).([]float32); ok && cam.Distortion.IsPinhole() {
		// The float32 engine takes the rays the fused engine's pixel_rays computes
		// (without float64, to the same bits).
		rc := prep.NewRayCam(cam)
		for y := 0; y < cam.Height; y++ {
			for x := 0; x < cam.Width; x++ {
				d := rc.Ray(x, y)
				copy(f32[(y*cam.Width+x)*3:], d[:])
			}
		}
		return buf
	}
	for y := 0; y < cam.Height; y++ {
		for x := 0; x < cam.Width; x++ {
			d, ok := cam.PixelRay(float64(x)+0.5, float64(y)+0.5)
			i := (y*cam.Width + x) * 3
			if !ok {
				buf[i], buf[i+1], buf[i+2] = 0, 0, 0
				continue
			}
			buf[i], buf[i+1], buf[i+2] = F(d[0]), F(d[1]), F(d[2])
		}
	}
	return buf
}

// Image is the last forward's render, [H*W*3].
func (p *Pipeline[F]) Image() []F { return p.Fwd.Image }

// Loss evaluates the loss of the last render against target and fills
// DImage with its pixel gradient.
func (p *Pipeline[F]) Loss(target []F) (loss.Result, error) {
	w, h := p.frame.Width, p.frame.Height
	var err error
	if p.eval == nil {
		p.eval, err = loss.NewEvaluatorOf[F](w, h, max(p.Set.Workers, 1))
	} else if ew, eh := p.eval.Size(); ew != w || eh != h {
		err = p.eval.Resize(w, h)
	}
	if err != nil {
		return loss.Result{}, err
	}
	if len(target) != w*h*3 {
		return loss.Result{}, fmt.Errorf("cpu: target has %d values, want %d×%d×3", len(target), w, h)
	}
	if cap(p.DImage) < w*h*3 {
		p.DImage = make([]F, w*h*3)
	}
	p.DImage = p.DImage[:w*h*3]
	res, err := p.eval.Loss(p.Set.Loss, F(p.Set.SSIMLambda), p.Fwd.Image, target, p.DImage)
	p.mark(engine.StageLoss)
	return res, err
}

// Backward propagates DImage (the loss gradient of the last render) back
// to every parameter of g, into Grads and Grad2D.
func (p *Pipeline[F]) Backward(g *splat.GaussiansOf[F]) error {
	n := g.Len()
	if p.PG == nil || len(p.PG.Opacity) != n {
		p.PG = prep.NewPrepGrads[F](p.Set.Render, n)
	}
	if p.Set.AbsGrad && p.Set.Render == prep.EWA && len(p.PG.Mean2DAbs) != 2*n {
		p.PG.Mean2DAbs = make([]F, 2*n)
	}
	if p.Grads == nil || p.Grads.Len() != n {
		p.Grads = splat.NewOf[F](n)
	}
	if len(p.Grad2D) != n {
		p.Grad2D = make([]F, n)
	}
	if err := p.rast.Backward(&p.frame, &p.Fwd, p.DImage, p.PG, nil); err != nil {
		return err
	}
	p.mark(engine.StageRasterBwd)
	prep.ProjectBackward(p.Cam, &p.prepSet, g, p.Proj, p.PG, p.Grads, p.Grad2D, max(p.Set.Workers, 1))
	p.mark(engine.StageProjectBwd)
	return nil
}

// Package demo generates the built-in demo scene that `rlxsplat train`
// trains when it is given no data: a known Gaussian scene (a chequered floor
// and three coloured blobs) rendered by the CPU engine from cameras on a
// ring, with noisy "SfM" points sampled from the true scene. Nothing is read
// from disk, so a fresh checkout can train and test end to end.
package demo

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Options size the demo scene.
type Options struct {
	Views         int // cameras on the ring
	Width, Height int
	TestEvery     int // every Nth view is held out (0 = none)
	Seed          uint64
	Workers       int
}

// DefaultOptions is the scene `train` uses with no --data.
func DefaultOptions() Options {
	return Options{Views: 32, Width: 128, Height: 96, TestEvery: 8, Seed: 1}
}

// Truth returns the ground-truth Gaussians of the demo scene.
func Truth(seed uint64) *splat.Gaussians {
	return truth(seed, true)
}

// truth is the demo scene with or without its floor.
func truth(seed uint64, floor bool) *splat.Gaussians {
	rng := rand.New(rand.NewPCG(seed, 0xde40))
	var means, scales, colors [][3]float64
	// A chequered floor at y = +1 (y points down in the camera convention
	// used by the ring below, so the floor is below the blobs).
	cells := 8
	if !floor {
		cells = 0
	}
	for i := 0; i < cells; i++ {
		for j := 0; j < cells; j++ {
			c := [3]float64{0.85, 0.85, 0.8}
			if (i+j)%2 == 1 {
				c = [3]float64{0.15, 0.2, 0.3}
			}
			for k := 0; k < 9; k++ {
				x := -2 + (float64(i)+(float64(k%3)+0.5)/3)*4/float64(cells)
				z := -2 + (float64(j)+(float64(k/3)+0.5)/3)*4/float64(cells)
				means = append(means, [3]float64{x, 1, z})
				scales = append(scales, [3]float64{0.09, 0.01, 0.09})
				colors = append(colors, c)
			}
		}
	}
	// Three blobs of small Gaussians on sphere surfaces.
	blobs := []struct {
		c   [3]float64
		r   float64
		col [3]float64
	}{
		{[3]float64{-0.7, 0.45, 0.2}, 0.5, [3]float64{0.9, 0.2, 0.15}},
		{[3]float64{0.6, 0.55, -0.4}, 0.45, [3]float64{0.2, 0.75, 0.25}},
		{[3]float64{0.1, 0.2, 0.8}, 0.35, [3]float64{0.25, 0.35, 0.95}},
	}
	for _, b := range blobs {
		for k := 0; k < 400; k++ {
			d := [3]float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
			n := math.Sqrt(d[0]*d[0] + d[1]*d[1] + d[2]*d[2])
			p := [3]float64{b.c[0] + b.r*d[0]/n, b.c[1] + b.r*d[1]/n, b.c[2] + b.r*d[2]/n}
			shade := 0.75 + 0.25*(-d[1]/n) // lit from above
			means = append(means, p)
			scales = append(scales, [3]float64{0.06, 0.06, 0.06})
			colors = append(colors, [3]float64{b.col[0] * shade, b.col[1] * shade, b.col[2] * shade})
		}
	}
	g := splat.New(len(means))
	for i := range means {
		for a := 0; a < 3; a++ {
			g.Means[i*3+a] = float32(means[i][a])
			g.LogScales[i*3+a] = float32(math.Log(scales[i][a]))
			g.SH[i*splat.SHCoeffs*3+a] = splat.RGBToDC(float32(colors[i][a]))
		}
		g.OpacityLogits[i] = splat.Logit(0.95)
	}
	return g
}

// ringCamera looks at the origin from angle theta on a ring of radius 4.5,
// 1.6 units above the floor plane's centre (camera y points down).
func ringCamera(theta float64, w, h int) camera.Camera {
	eye := [3]float64{4.5 * math.Sin(theta), -1.6, -4.5 * math.Cos(theta)}
	return lookingAt(eye, [3]float64{0, 0.4, 0}, 0.9, w, h)
}

// lookingAt is a centred pinhole camera of w×h pixels and focal length f·w at eye, looking
// at target with y pointing down.
func lookingAt(eye, target [3]float64, f float64, w, h int) camera.Camera {
	r, t := camera.LookAt(eye, target, [3]float64{0, 1, 0})
	fx := f * float64(w)
	return camera.Camera{Width: w, Height: h, Fx: fx, Fy: fx, Cx: float64(w) / 2, Cy: float64(h) / 2, R: r, T: t}
}

// renderer checks opt's size and returns the CPU engine that renders truth's views.
func renderer(opt Options, truth *splat.Gaussians) (*cpu.Engine, error) {
	if opt.Views < 2 || opt.Width < 8 || opt.Height < 8 {
		return nil, fmt.Errorf("demo: %d views of %d×%d px is too small", opt.Views, opt.Width, opt.Height)
	}
	set := engine.DefaultSettings()
	set.Workers = max(opt.Workers, 1)
	eng, err := cpu.New(set, truth)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return eng, nil
}

// Generate renders the demo dataset.
func Generate(opt Options) (*dataset.Dataset, error) {
	truth := Truth(opt.Seed)
	eng, err := renderer(opt, truth)
	if err != nil {
		return nil, err
	}
	ds := &dataset.Dataset{Format: "demo", Dir: "(built-in demo scene)"}
	var views []dataset.View
	for v := 0; v < opt.Views; v++ {
		cam := ringCamera(2*math.Pi*float64(v)/float64(opt.Views), opt.Width, opt.Height)
		img, err := eng.Render(&cam, 0, [3]float32{})
		if err != nil {
			return nil, fmt.Errorf("demo: rendering view %d: %w", v, err)
		}
		views = append(views, dataset.View{Name: fmt.Sprintf("demo_%03d", v), Camera: cam, Image: &imageio.Image{W: opt.Width, H: opt.Height, RGB: img}})
	}
	split(ds, views, opt.TestEvery)
	// "SfM" points: a third of the true centres, jittered, with their colours.
	rng := rand.New(rand.NewPCG(opt.Seed, 0x5f3))
	for i := 0; i < truth.Len(); i += 3 {
		for a := 0; a < 3; a++ {
			ds.Points = append(ds.Points, truth.Means[i*3+a]+float32(rng.NormFloat64()*0.02))
			dc := truth.SH[i*splat.SHCoeffs*3+a]
			ds.PointColors = append(ds.PointColors, min(max(0.5+splat.SHC0*dc, 0), 1))
		}
	}
	return ds, nil
}

// split holds out every testEvery-th of views (none for 0) and sets ds's extent from all of
// their cameras.
func split(ds *dataset.Dataset, views []dataset.View, testEvery int) {
	var centres [][3]float64
	for v, view := range views {
		if testEvery > 0 && v%testEvery == 0 {
			ds.Test = append(ds.Test, view)
		} else {
			ds.Train = append(ds.Train, view)
		}
		centres = append(centres, view.Camera.Center())
	}
	ds.Extent = extent(centres)
}

// extent is 1.1 × the largest distance of a camera centre from their mean
// (design.md §6).
func extent(c [][3]float64) float64 {
	var m [3]float64
	for _, p := range c {
		for a := 0; a < 3; a++ {
			m[a] += p[a] / float64(len(c))
		}
	}
	d := 0.0
	for _, p := range c {
		d = math.Max(d, math.Sqrt(sq(p[0]-m[0])+sq(p[1]-m[1])+sq(p[2]-m[2])))
	}
	return 1.1 * d
}

func sq(x float64) float64 { return x * x }

// Package parity holds the checks behind `rlxsplat parity`: the CPU
// engine's gradients against central finite differences of its own forward
// (in float64, the same generic code the engine runs in float32), and,
// where a GPU engine exists, every stage of that engine against the CPU
// engine. Each check returns table rows; the command prints them and exits
// non-zero on any failure. Tests call the same functions.
package parity

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Row is one line of the parity table.
type Row struct {
	Check  string // e.g. "grad ewa l1-ssim sh3"
	Group  string // parameter group or stage output
	RelErr float64
	Cosine float64
	MaxAbs float64
	Tol    float64
	Pass   bool
	Note   string
}

// GradCase is one finite-difference configuration.
type GradCase struct {
	Model       prep.Model
	Loss        loss.Kind
	SHDegree    int
	Antialiased bool
	Seed        uint64
	// Break, when not empty, scales that group's analytic gradient by 1.01
	// to show the check fails (the "can it fail" demonstration).
	Break string
}

func (c GradCase) String() string {
	s := fmt.Sprintf("grad %v %v sh%d", c.Model, c.Loss, c.SHDegree)
	if c.Antialiased {
		s += " aa"
	}
	if c.Break != "" {
		s += " (broken " + c.Break + ")"
	}
	return s
}

// GradTol is the relative error every gradient group must stay under.
const GradTol = 1e-3

// GradCases lists the configurations `parity` runs on the CPU: both render
// models × every loss × SH degrees 0–3, plus the antialiased EWA variant.
func GradCases() []GradCase {
	var cs []GradCase
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		for _, l := range []loss.Kind{loss.L1SSIM, loss.MSE, loss.MSESSIM} {
			for d := 0; d <= splat.MaxSHDegree; d++ {
				cs = append(cs, GradCase{Model: m, Loss: l, SHDegree: d, Seed: uint64(10*d + int(l))})
			}
		}
	}
	cs = append(cs, GradCase{Model: prep.EWA, Loss: loss.L1SSIM, SHDegree: 3, Antialiased: true, Seed: 77})
	return cs
}

// gradScene is a small random scene that keeps away from the places where
// the forward is not smooth: opacities below the 0.99 clamp, colours away
// from the zero clamp, few enough layers that transmittance never reaches
// the 1e-4 stop.
func gradScene(rng *rand.Rand, n int) *splat.GaussiansOf[float64] {
	g := splat.NewOf[float64](n)
	for i := 0; i < n; i++ {
		g.Means[i*3] = (rng.Float64()*2 - 1) * 0.7
		g.Means[i*3+1] = (rng.Float64()*2 - 1) * 0.5
		g.Means[i*3+2] = (rng.Float64()*2 - 1) * 0.6
		for k := 0; k < 3; k++ {
			g.LogScales[i*3+k] = math.Log(0.06 + 0.12*rng.Float64())
		}
		for k := 0; k < 4; k++ {
			g.Quats[i*4+k] = rng.NormFloat64()
		}
		p := 0.25 + 0.5*rng.Float64()
		g.OpacityLogits[i] = math.Log(p / (1 - p))
		for k := 0; k < splat.SHCoeffs; k++ {
			for c := 0; c < 3; c++ {
				v := rng.NormFloat64() * 0.12
				if k == 0 {
					v = 0.4 + 0.8*rng.Float64()
				}
				g.SH[(i*splat.SHCoeffs+k)*3+c] = v
			}
		}
	}
	return g
}

// gradCamera looks at the origin from z = −3.5, slightly rotated.
func gradCamera(w, h int) camera.Camera {
	r := camera.RotationFromQuat(0.996, 0.04, -0.06, 0.02)
	c := [3]float64{0.2, -0.15, -3.5}
	var t [3]float64
	for i := 0; i < 3; i++ {
		t[i] = -(r[i][0]*c[0] + r[i][1]*c[1] + r[i][2]*c[2])
	}
	return camera.Camera{Width: w, Height: h, Fx: 1.2 * float64(w), Fy: 1.2 * float64(w), Cx: 0.5 * float64(w), Cy: 0.5 * float64(h), R: r, T: t}
}

// CheckGrad runs one finite-difference configuration over the whole step
// (project → raster → loss → backward) and returns a row per parameter
// group.
func CheckGrad(c GradCase) ([]Row, error) {
	rng := rand.New(rand.NewPCG(c.Seed, 0x9a4d))
	const w, h, n = 26, 20, 14
	cam := gradCamera(w, h)
	g := gradScene(rng, n)
	target := make([]float64, w*h*3)
	for i := range target {
		target[i] = rng.Float64()
	}
	set := engine.DefaultSettings()
	set.Render = c.Model
	set.Loss = c.Loss
	set.Antialiased = c.Antialiased
	set.TileSize = 8
	set.RadiusScale = 1.2
	bg := [3]float32{0.2, 0.1, 0.3}
	p := cpu.NewPipeline[float64](set)
	// A tiny alpha cutoff so that no splat switches on or off under a step
	// (design.md §9); the lists are computed once and held fixed.
	p.AlphaMin = 1e-10
	if err := p.Forward(&cam, g, c.SHDegree, bg); err != nil {
		return nil, err
	}
	lists := p.Lists
	lists.Keys = append([]uint64(nil), p.Lists.Keys...)
	lists.IDs = append([]int32(nil), p.Lists.IDs...)
	lists.Offsets = append([]int32(nil), p.Lists.Offsets...)
	p.FixedLists = &lists
	if _, err := p.Loss(target); err != nil {
		return nil, err
	}
	if err := p.Backward(g); err != nil {
		return nil, err
	}
	analytic := p.Grads.Clone()
	f := func() float64 {
		if err := p.Forward(&cam, g, c.SHDegree, bg); err != nil {
			return math.NaN()
		}
		r, err := p.Loss(target)
		if err != nil {
			return math.NaN()
		}
		return r.Loss
	}
	var rows []Row
	an := analytic.Fields()
	for fi, fld := range g.Fields() {
		a := an[fi].Data
		if fld.Name == c.Break {
			for j := range a {
				a[j] *= 1.01
			}
		}
		fd := check.Central(fld.Data, 1e-6, f)
		// Only the coefficients of the active degree carry a gradient; the
		// rest must be exactly zero on both sides.
		err := check.Grad(fld.Name, a, fd, GradTol)
		rows = append(rows, Row{
			Check: c.String(), Group: fld.Name, RelErr: check.RelErr(a, fd), Cosine: check.Cosine(a, fd),
			MaxAbs: check.MaxAbs(a, fd), Tol: GradTol, Pass: err == nil, Note: errNote(err),
		})
	}
	return rows, nil
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

package fused

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/adam"
	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/raster"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Tolerances of issue 3 (rlxsplat parity): image relative L2 ≤ 1e-5, every gradient group
// relative L2 ≤ 1e-4 with cosine ≥ 0.99999. The projection, the lists and the loss are meant to
// be bit-identical (the kernels keep the CPU's rounding); they get a float tolerance far below
// anything a different algorithm would produce.
const (
	TolImage  = 1e-5
	TolGrad   = 1e-4
	TolCosine = 0.99999
	TolExact  = 1e-6
)

// CompareRow is one compared quantity of Compare. RelErr and MaxAbs are NaN where the row is a
// count or a yes/no (Note says what was counted), Cosine is NaN where it does not apply, and a
// Tol of 0 means "must be identical".
type CompareRow struct {
	Name   string
	MaxAbs float64
	RelErr float64
	Cosine float64
	Tol    float64
	Pass   bool
	Note   string
}

// compareOpts are the test-only variations of Compare.
type compareOpts struct {
	overflow     bool // start with tiny tile lists, so that the step must grow them and run again
	bwdMaxBlocks int  // raster_bwd's grid cap, when not 0 (a few blocks stride over many chunks)
}

// Compare runs one training step of the CPU engine and of the fused engine on dev from the
// same Gaussians, view and options, and compares every stage: the forward-only render, the
// warp-per-splat binning path, the projection, the tile lists, the image and its per-pixel
// outputs, the loss and its pixel gradient, the gradients of the prepared data and of every
// parameter group, the densification statistics, the parameters after Adam, and a
// densification edit applied to both. It returns one row per quantity; an error means a
// stage could not run at all, not that it disagreed. dev stays open.
func Compare(dev gpu.Device, set engine.Settings, g *splat.Gaussians, v *engine.View, o engine.StepOptions) ([]CompareRow, error) {
	return compare(dev, set, g, v, o, compareOpts{})
}

// rows collects the comparison's rows and the first download error, so that the comparisons
// read as a list rather than as a ladder of error checks.
type rows struct {
	e   *Engine
	out []CompareRow
	err error
}

func (r *rows) f32(b gpu.Buffer, off, n int) []float32 { return download[float32](r, b, off, n) }

func download[T gpu.Elem](r *rows, b gpu.Buffer, off, n int) []T {
	out := make([]T, n)
	if n == 0 || r.err != nil {
		return out
	}
	if err := gpu.DownloadSlice(r.e.dev, out, b, off); err != nil {
		r.err = fmt.Errorf("fused: compare: download: %w", err)
	}
	return out
}

// near adds a row comparing got with want by relative L2 error against tol.
func (r *rows) near(name string, got, want []float32, tol float64, note string) {
	rel := check.RelErr(got, want)
	r.out = append(r.out, CompareRow{Name: name, MaxAbs: check.MaxAbs(got, want), RelErr: rel, Cosine: math.NaN(), Tol: tol, Pass: rel <= tol, Note: note})
}

// grad adds a gradient row: relative L2 error and cosine, both against the tolerances.
func (r *rows) grad(name string, got, want []float32) {
	rel, c := check.RelErr(got, want), check.Cosine(got, want)
	r.out = append(r.out, CompareRow{Name: name, MaxAbs: check.MaxAbs(got, want), RelErr: rel, Cosine: c, Tol: TolGrad,
		Pass: rel <= TolGrad && c >= TolCosine})
}

// count adds a row for something that must match exactly: bad is how many values differ.
func (r *rows) count(name string, bad, of int, note string) {
	if note == "" && bad > 0 {
		note = fmt.Sprintf("%d of %d differ", bad, of)
	}
	r.out = append(r.out, CompareRow{Name: name, MaxAbs: math.NaN(), RelErr: math.NaN(), Cosine: math.NaN(), Pass: bad == 0, Note: note})
}

func compare(dev gpu.Device, set engine.Settings, g *splat.Gaussians, v *engine.View, o engine.StepOptions, co compareOpts) ([]CompareRow, error) {
	cam := &v.Camera
	n := g.Len()
	// The CPU reference: the pipeline's stages, then the engine's whole step.
	pipe := cpu.NewPipeline[float32](set)
	if err := pipe.Forward(cam, g, o.SHDegree, o.Background); err != nil {
		return nil, fmt.Errorf("fused: compare: cpu forward: %w", err)
	}
	lres, err := pipe.Loss(v.Target)
	if err != nil {
		return nil, fmt.Errorf("fused: compare: cpu loss: %w", err)
	}
	if err := pipe.Backward(g); err != nil {
		return nil, fmt.Errorf("fused: compare: cpu backward: %w", err)
	}
	ce, err := cpu.New(set, g)
	if err != nil {
		return nil, fmt.Errorf("fused: compare: cpu engine: %w", err)
	}
	cres, err := ce.Step(v, o)
	if err != nil {
		return nil, fmt.Errorf("fused: compare: cpu step: %w", err)
	}
	cAfter, err := ce.Gaussians()
	if err != nil {
		return nil, fmt.Errorf("fused: compare: cpu parameters: %w", err)
	}
	cStats, err := ce.Stats()
	if err != nil {
		return nil, fmt.Errorf("fused: compare: cpu statistics: %w", err)
	}

	fe, err := newOnDevice(dev, set, g)
	if err != nil {
		return nil, fmt.Errorf("fused: compare: %w", err)
	}
	defer fe.Close()
	if co.bwdMaxBlocks > 0 {
		fe.bwdMaxBlocks = co.bwdMaxBlocks
	}
	r := &rows{e: fe}

	// Render first: it must equal the CPU forward (and it exercises the forward-only path).
	img, err := fe.Render(cam, o.SHDegree, o.Background)
	if err != nil {
		return nil, fmt.Errorf("fused: compare: render: %w", err)
	}
	r.near("render image", img, pipe.Fwd.Image, TolImage, "forward only")
	// The warp-per-splat binning path: with every box of more than one tile queued for a warp,
	// the lists must be the same.
	if set.BinMode != engine.BinCPUConic {
		fe.bigArea = 1
		if _, err := fe.Render(cam, o.SHDegree, o.Background); err != nil {
			return nil, fmt.Errorf("fused: compare: render with warp-per-splat binning: %w", err)
		}
		ro, err := fe.readout()
		if err != nil {
			return nil, fmt.Errorf("fused: compare: %w", err)
		}
		if ro[roBig] == 0 {
			r.count("bin warp per splat", 1, 1, "no splat took the warp-per-splat path (scene too small to check it)")
		} else {
			r.count("bin warp per splat", 0, 1, fmt.Sprintf("%d splats binned a warp each", ro[roBig]))
		}
		r.lists("tile lists (warp per splat)", &pipe.Lists, int(ro[roEntries]))
		// Again with their hit bits kept (this render grew the bits to what the last one
		// asked for), and with none kept, so that every queued splat's tiles are tested twice.
		for _, none := range []bool{false, true} {
			fe.noBigBits = none
			if _, err := fe.Render(cam, o.SHDegree, o.Background); err != nil {
				return nil, fmt.Errorf("fused: compare: render with warp-per-splat binning: %w", err)
			}
			ro, err := fe.readout()
			if err != nil {
				return nil, fmt.Errorf("fused: compare: %w", err)
			}
			name, kept := "tile lists (warp per splat, hit bits kept)", fe.bigBitsCap >= int(ro[roBigBits])
			if none {
				name, kept = "tile lists (warp per splat, tiles tested twice)", true
			}
			if !kept {
				r.count(name, 1, 1, fmt.Sprintf("%d words of hit bits asked for, %d held", ro[roBigBits], fe.bigBitsCap))
				continue
			}
			r.lists(name, &pipe.Lists, int(ro[roEntries]))
		}
		fe.noBigBits = false
		fe.bigArea = defaultBigArea
	}

	if err := fe.growPixels(cam.Width, cam.Height); err != nil {
		return nil, fmt.Errorf("fused: compare: %w", err)
	}
	// Whatever a stage fails to write shows as NaN or 2³²−1 rather than as last step's values.
	if err := fe.poison(); err != nil {
		return nil, fmt.Errorf("fused: compare: %w", err)
	}
	if co.overflow {
		fe.listCap = 16 // the buffers stay; the count check sees room for 16 entries only
	}
	gres, err := fe.Step(v, o)
	if err != nil {
		return nil, fmt.Errorf("fused: compare: step: %w", err)
	}

	r.projection(pipe.Proj, n)
	r.lists("tile lists", &pipe.Lists, gres.Entries)
	r.count("visible splats", boolInt(gres.Visible != cres.Visible), 1, fmt.Sprintf("%d, cpu %d", gres.Visible, cres.Visible))

	// Image and the forward's per-pixel outputs.
	npx := cam.Width * cam.Height
	r.near("image", gres.Image, pipe.Fwd.Image, TolImage, "")
	r.near("final T", r.f32(fe.finalT, 0, npx), pipe.Fwd.FinalT, TolImage, "")
	cnt := download[uint32](r, fe.count, 0, npx)
	bad, border, note := 0, 0, ""
	var rays []float32 // the pixels' ray directions, for the ray model's walks
	for i, c := range cnt {
		if int32(c) == pipe.Fwd.Count[i] {
			continue
		}
		// The CPU's EWA alphas are the per-pixel exponential's to about 1e-6, and CUDA's
		// hardware exponential is within about 2⁻²² of exp32 (borderline.go): a pixel whose
		// walk decides that close to a threshold may end elsewhere, but then the device's
		// count must be one that raster_fwd's arithmetic reaches, those decisions taken either
		// way.
		x, y := i%cam.Width, i/cam.Width
		if set.MaxSplatSteps == 0 {
			l := pipe.Lists
			tile := (y/l.TileSize)*l.TilesX + x/l.TileSize
			ids := l.IDs[l.Offsets[tile]:l.Offsets[tile+1]]
			var ends []int
			switch {
			case set.Render == prep.EWA && len(ids) <= raster.SegmentEntries:
				ends = walkEWA(pipe.Proj, ids, x, y)
			case set.Render == prep.Ray:
				if rays == nil {
					rays = cpu.PixelRays[float32](cam, nil)
				}
				ends = walkRay(pipe.Proj, ids, [3]float32{rays[3*i], rays[3*i+1], rays[3*i+2]})
			}
			if len(ends) > 1 && slices.Contains(ends, int(c)) {
				border++
				continue
			}
		}
		if bad == 0 {
			note = fmt.Sprintf("first at pixel (%d, %d): %d, cpu %d", x, y, int32(c), pipe.Fwd.Count[i])
		}
		bad++
	}
	if border > 0 {
		note = strings.TrimPrefix(note+fmt.Sprintf("; %d pixels whose walks decide within %g of a threshold end elsewhere than the CPU's, each at an end raster_fwd's arithmetic reaches with those decisions taken either way", border, borderTol), "; ")
	}
	r.count("last contributor", bad, npx, note)

	// Loss and its pixel gradient.
	for _, x := range []struct {
		name      string
		got, want float64
	}{{"loss", gres.Loss, lres.Loss}, {"loss l1", gres.L1, lres.L1}, {"loss mse", gres.MSE, lres.MSE}, {"loss ssim", gres.SSIM, lres.SSIM}} {
		d := math.Abs(x.got - x.want)
		tol := TolExact * max(1, math.Abs(x.want))
		pass := d <= tol || (math.IsNaN(x.want) && math.IsNaN(x.got))
		rel := d / max(math.Abs(x.want), math.SmallestNonzeroFloat64)
		r.out = append(r.out, CompareRow{Name: x.name, MaxAbs: d, RelErr: rel, Cosine: math.NaN(), Tol: TolExact, Pass: pass,
			Note: fmt.Sprintf("%.9g, cpu %.9g", x.got, x.want)})
	}
	// The pixel gradient twice. First the loss kernel alone: the CPU loss on the
	// GPU's own image must give the GPU's gradient to image tolerance. Then the
	// pipeline's: the CPU pipeline's gradient comes from the CPU's image, and the
	// loss (SSIM most of all) amplifies the images' float32 rounding differences,
	// so it is checked as the gradient it is, at the gradient tolerances.
	gotDImage := r.f32(fe.dImage, 0, npx*3)
	if own, err := lossOn(set, cam.Width, cam.Height, gres.Image, v.Target); err != nil {
		return nil, fmt.Errorf("fused: compare: cpu loss on the gpu image: %w", err)
	} else {
		r.near("d image (loss kernel)", gotDImage, own, TolImage, "cpu loss on the gpu's image")
	}
	r.grad("d image", gotDImage, pipe.DImage)

	// Gradients of the prepared data, then of every parameter group.
	for _, f := range pgFields(set.Render, pipe.PG) {
		r.grad(f.name, r.f32(fe.pg, f.off*fe.capV, n*f.width), f.want)
	}
	// An invalid splat's gradient is zero by definition, and project_bwd leaves its elements
	// as they were (poisoned): zero them, by the device's own flags, before comparing (a
	// valid splat whose gradient was not written still shows as NaN).
	gp := r.f32(fe.grads, 0, n*paramFloats)
	dvalid := download[uint32](r, fe.valid, 0, n)
	if r.err != nil {
		return nil, r.err
	}
	zeroInvalid(gp, dvalid)
	gg := unpack(gp, n)
	for _, grp := range groups(gg, pipe.Grads) {
		r.grad("d "+grp.name, grp.got, grp.want)
	}
	r.grad("grad2d", r.f32(fe.grad2d, 0, n), pipe.Grad2D)
	if r.err != nil {
		return nil, r.err
	}

	// Densification statistics.
	fst, err := fe.Stats()
	if err != nil {
		return nil, fmt.Errorf("fused: compare: statistics: %w", err)
	}
	r.grad("stat grad accum", fst.GradAccum, cStats.GradAccum)
	r.near("stat max radius", fst.MaxRadius, cStats.MaxRadius, TolExact, "")
	bad = 0
	for i := range fst.Count {
		if fst.Count[i] != cStats.Count[i] {
			bad++
		}
	}
	r.count("stat count", bad, len(fst.Count), "")

	// Parameters after the whole step: the CPU optimizer applied to this step's device gradients
	// must give them exactly (the gradients themselves were compared above). Against the CPU
	// engine's parameters the difference is only reported: Adam's first step moves an element
	// by about ±lr whatever its gradient's size, so elements whose gradient is rounding noise
	// (an isotropic splat's rotation, say) may move either way.
	fAfter, err := fe.Gaussians()
	if err != nil {
		return nil, fmt.Errorf("fused: compare: parameters: %w", err)
	}
	mask := pipe.Proj.Valid // for the visible-only groups
	// The regularisers' gradients, when on, join in Adam on the device (every splat's, or the
	// splats' in view).
	withReg := gg.Clone()
	engine.RegularizerGrads(withReg, g, o.MCMC, pipe.Proj.Valid, 0, n)
	want, err := hostAdam(set.Adam, o.LR, g, withReg, mask)
	if err != nil {
		return nil, err
	}
	d := check.BitsDiffer(pack(fAfter), pack(want))
	r.count("params after adam", d, n*paramFloats, fmt.Sprintf("%d of %d values differ from the CPU optimizer on the device's gradients", d, n*paramFloats))
	a, b := pack(fAfter), pack(cAfter)
	r.out = append(r.out, CompareRow{Name: "params vs cpu step", MaxAbs: check.MaxAbs(a, b), RelErr: check.RelErr(a, b), Cosine: math.NaN(),
		Tol: math.Inf(1), Pass: true, Note: "reported only: Adam moves noise-level gradients by ±lr"})
	r.count("non-finite count", boolInt(gres.NonFinite != cres.NonFinite), 1, fmt.Sprintf("%d, cpu %d", gres.NonFinite, cres.NonFinite))

	// Adam alone on the CPU's gradients from the same start must give the CPU's parameters.
	if err := fe.upload(g, nil, nil, 0, nil); err != nil {
		return nil, fmt.Errorf("fused: compare: %w", err)
	}
	if err := gpu.UploadF32(dev, fe.grads, pack(pipe.Grads)); err != nil {
		return nil, fmt.Errorf("fused: compare: gradients: %w", err)
	}
	if err := dev.Memset(fe.ro.B, fe.ro.Off, roWords*4, 0); err != nil {
		return nil, fmt.Errorf("fused: compare: readout: %w", err)
	}
	ap, err := adamArgs(set.Adam, o.LR, 1, n, o.MCMC, 1, shAll)
	if err != nil {
		return nil, fmt.Errorf("fused: compare: %w", err)
	}
	if err := fe.adam(ap, fe.grads, fe.valid); err != nil {
		return nil, fmt.Errorf("fused: compare: adam: %w", err)
	}
	aAfter, err := fe.Gaussians()
	if err != nil {
		return nil, fmt.Errorf("fused: compare: parameters: %w", err)
	}
	r.count("adam on cpu gradients", check.BitsDiffer(pack(aAfter), pack(cAfter)), n*paramFloats, "")

	if err := r.edit(ce, n); err != nil {
		return nil, err
	}
	if err := r.relocation(ce); err != nil {
		return nil, err
	}
	if err := r.mcmcTerms(ce); err != nil {
		return nil, err
	}
	if err := r.sparseAdam(g); err != nil {
		return nil, err
	}
	return r.out, r.err
}

// sparseAdam runs adam_step from random non-zero moments, at step 5, on random gradients with a
// third of the splats out of view, for each choice of visible-only groups (none, the SH rest,
// every group), and adds a row for each against the CPU optimizer from the same moments. From
// zero moments an out-of-view element does not move in a dense step either, so the moments
// must be non-zero for the rows to tell the groups apart: each row also requires the host's
// result to differ from the dense one wherever a group is left (else it would test nothing).
func (r *rows) sparseAdam(g *splat.Gaussians) error {
	fe, n := r.e, g.Len()
	rng := rand.New(rand.NewPCG(0x5a5e, uint64(n)))
	grads, m, v := splat.Zeros[float32](n), splat.Zeros[float32](n), splat.Zeros[float32](n)
	valid := make([]uint32, n)
	inView := make([]bool, n)
	for i := range valid {
		valid[i] = uint32(min(i%3, 1))
		inView[i] = valid[i] != 0
	}
	for k, f := range grads.Fields() {
		w := len(f.Data) / n
		mf, vf := m.Fields()[k], v.Fields()[k]
		for i := range f.Data {
			if inView[i/w] {
				f.Data[i] = float32(rng.NormFloat64() * 1e-3)
			}
			mf.Data[i] = float32(rng.NormFloat64() * 1e-4)
			vf.Data[i] = float32(rng.ExpFloat64() * 1e-8)
		}
	}
	const step = 5
	lr := engine.LR{Means: 1e-3, LogScales: 5e-3, Quats: 1e-3, Opacity: 5e-2, SHDC: 2.5e-3, SHRest: 1.25e-4}
	host := func(s engine.AdamSettings) (*splat.Gaussians, error) {
		opt, err := adam.New(s.Optimizer(), n)
		if err != nil {
			return nil, fmt.Errorf("fused: compare: host adam: %w", err)
		}
		opt.M, opt.V = m.Clone(), v.Clone()
		for k := range opt.Steps {
			opt.Steps[k] = step - 1
		}
		p := g.Clone()
		if _, err := opt.Step(p, grads, [adam.NumGroups]float32{lr.Means, lr.LogScales, lr.Quats, lr.Opacity, lr.SHDC, lr.SHRest}, inView); err != nil {
			return nil, fmt.Errorf("fused: compare: host adam: %w", err)
		}
		return p, nil
	}
	out := 0 // splats out of view
	for _, in := range inView {
		if !in {
			out++
		}
	}
	ds := fe.set.Adam
	ds.VisibleOnly, ds.VisibleOnlySH = false, false
	dense, err := host(ds)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name         string
		all, shRest  bool
		leftPerSplat int
	}{
		{"adam dense from moments", false, false, 0},
		{"adam visible-only sh rest", false, true, shRestFloats},
		{"adam visible-only", true, false, paramFloats},
	} {
		s := fe.set.Adam
		s.VisibleOnly, s.VisibleOnlySH = c.all, c.shRest
		ap, err := adamArgs(s, lr, step, n, engine.MCMCStep{}, 1, shAll)
		if err != nil {
			return fmt.Errorf("fused: compare: %w", err)
		}
		got, err := r.adamAlone(ap, g, m, v, step-1, grads, valid)
		if err != nil {
			return err
		}
		want, err := host(s)
		if err != nil {
			return err
		}
		d := check.BitsDiffer(pack(got), pack(want))
		left := check.BitsDiffer(pack(want), pack(dense))
		// A left value of a splat out of view differs from its dense update unless that update
		// rounds away (a moment drawn near zero): the host's result must differ from the dense
		// one in most of those values and nowhere else.
		maxLeft := out * c.leftPerSplat
		if left > maxLeft || (maxLeft > 0 && 10*left < 9*maxLeft) {
			d += n * paramFloats
		}
		r.count(c.name, d, n*paramFloats, fmt.Sprintf("%d of %d values differ from the CPU optimizer from the same moments; %d values left where a dense step moves them (of %d in groups left out of view)",
			min(d, n*paramFloats), n*paramFloats, left, maxLeft))
	}
	return r.adamBelowDegree(g, m, v, grads, valid, inView, step, lr)
}

// adamBelowDegree is sparseAdam's dense row for a run that has used SH degree 1 at most: the
// moments and gradients of bands 2 and 3 are zero, and adam_step, told so (shLiveFloats), skips
// them; the CPU optimizer updates every value. The parameters must agree everywhere: a skip
// that reached a band in use would leave its values where the dense step moves them.
func (r *rows) adamBelowDegree(g, m, v, grads *splat.Gaussians, valid []uint32, inView []bool, step int64, lr engine.LR) error {
	const used = 1
	const live = 3 * 4 // bands 0 and 1: four coefficients of three colours, counted apart from shLiveFloats
	m, v, grads = m.Clone(), v.Clone(), grads.Clone()
	for _, x := range []*splat.Gaussians{m, v, grads} {
		for i := 0; i < x.Len(); i++ {
			clear(x.SH[i*3*splat.SHCoeffs+live : (i+1)*3*splat.SHCoeffs])
		}
	}
	s := r.e.set.Adam
	s.VisibleOnly, s.VisibleOnlySH = false, false
	ap, err := adamArgs(s, lr, step, g.Len(), engine.MCMCStep{}, 1, used)
	if err != nil {
		return fmt.Errorf("fused: compare: %w", err)
	}
	got, err := r.adamAlone(ap, g, m, v, step-1, grads, valid)
	if err != nil {
		return err
	}
	opt, err := adam.New(s.Optimizer(), g.Len())
	if err != nil {
		return fmt.Errorf("fused: compare: host adam: %w", err)
	}
	opt.M, opt.V = m, v
	for k := range opt.Steps {
		opt.Steps[k] = step - 1
	}
	want := g.Clone()
	if _, err := opt.Step(want, grads, [adam.NumGroups]float32{lr.Means, lr.LogScales, lr.Quats, lr.Opacity, lr.SHDC, lr.SHRest}, inView); err != nil {
		return fmt.Errorf("fused: compare: host adam: %w", err)
	}
	d := check.BitsDiffer(pack(got), pack(want))
	moved := check.BitsDiffer(pack(want), pack(g))
	r.count("adam below the sh degree used", d, g.Len()*paramFloats, fmt.Sprintf("%d of %d values differ from the CPU optimizer, which updates every band; %d values moved", min(d, g.Len()*paramFloats), g.Len()*paramFloats, moved))
	return nil
}

// relocation starts the fused engine from the CPU engine's state and applies the same MCMC
// move (RandomRelocation: corrections, copies over other splats, appended copies) to both; the
// states must then be identical, since a move only copies values the host gave both.
func (r *rows) relocation(ce *cpu.Engine) error {
	st, err := ce.State()
	if err != nil {
		return fmt.Errorf("fused: compare: cpu state: %w", err)
	}
	if err := r.e.SetState(st); err != nil {
		return fmt.Errorf("fused: compare: set state: %w", err)
	}
	n := ce.Len()
	rel := RandomRelocation(rand.New(rand.NewPCG(0x4e10c, uint64(n))), n)
	if err := ce.Relocate(rel); err != nil {
		return fmt.Errorf("fused: compare: cpu relocation: %w", err)
	}
	if err := r.e.Relocate(rel); err != nil {
		return fmt.Errorf("fused: compare: relocation: %w", err)
	}
	if r.e.Len() != ce.Len() {
		r.count("mcmc relocate", 1, 1, fmt.Sprintf("%d splats, cpu %d", r.e.Len(), ce.Len()))
		return nil
	}
	bad, of, notes, err := stateDiff(r.e, ce)
	if err != nil {
		return err
	}
	note := fmt.Sprintf("%d corrected, %d relocated, %d appended; %d splats", len(rel.Rows), len(rel.Dst), len(rel.Append), ce.Len())
	if bad > 0 {
		note += "; " + strings.Join(notes, ", ")
	}
	r.count("mcmc relocate", bad, of, note)
	return nil
}

// mcmcTerms runs the MCMC step's terms on the CPU engine's parameters (every fourth splat made
// nearly transparent, so that the opacity gate lets the noise through): Adam with the
// regularisers on random gradients (regularisedAdam) against the CPU optimizer with
// engine.RegularizerGrads, and mcmc_noise against engine.PerturbMeans. Both must give the
// CPU's bits.
func (r *rows) mcmcTerms(ce *cpu.Engine) error {
	st, err := ce.State()
	if err != nil {
		return fmt.Errorf("fused: compare: cpu state: %w", err)
	}
	g := st.Params
	for i := 0; i < g.Len(); i += 4 {
		g.OpacityLogits[i] = -6
	}
	if err := r.e.SetState(st); err != nil {
		return fmt.Errorf("fused: compare: set state: %w", err)
	}
	n := g.Len()
	// Base keys the noise as a sharded owner whose first splat is global id Base does.
	m := engine.MCMCStep{OpacityReg: 0.01, ScaleReg: 0.03, NoiseScale: 80, NoiseSeed: 0x5eed_0000_0042, NoiseStep: 7777, Base: 70001}
	if err := r.regularisedAdam(g, m); err != nil {
		return err
	}
	m.RegInView = true
	if err := r.regularisedAdam(g, m); err != nil {
		return err
	}
	if err := r.e.SetState(st); err != nil {
		return fmt.Errorf("fused: compare: set state: %w", err)
	}
	if err := r.e.mcmcNoise(m); err != nil {
		return fmt.Errorf("fused: compare: mcmc_noise: %w", err)
	}
	before := append([]float32(nil), g.Means...)
	engine.PerturbMeans(g, m, 0, n)
	after, err := r.e.Gaussians()
	if err != nil {
		return fmt.Errorf("fused: compare: parameters: %w", err)
	}
	// The row means something only where the noise moved splats: say how many it moved.
	moved := 0
	for i := range g.Means {
		if g.Means[i] != before[i] {
			moved++
		}
	}
	d := check.BitsDiffer(pack(after), pack(g))
	r.count("mcmc noise", d, n*paramFloats, fmt.Sprintf("%d of %d values differ; %d mean coordinates moved", d, n*paramFloats, moved))
	return nil
}

// adamAlone runs adam_step ap alone on the fused engine from parameters g, moments m and v (nil:
// zero) after step steps, on gradients grads for the splats valid marks, and returns the
// parameters it leaves.
func (r *rows) adamAlone(ap abi.AdamP, g, m, v *splat.Gaussians, step int64, grads *splat.Gaussians, valid []uint32) (*splat.Gaussians, error) {
	fe := r.e
	if err := fe.upload(g, m, v, step, nil); err != nil {
		return nil, fmt.Errorf("fused: compare: %w", err)
	}
	if err := gpu.UploadF32(fe.dev, fe.grads, pack(grads)); err != nil {
		return nil, fmt.Errorf("fused: compare: gradients: %w", err)
	}
	if err := gpu.UploadSlice(fe.dev, fe.valid, 0, valid); err != nil {
		return nil, fmt.Errorf("fused: compare: valid flags: %w", err)
	}
	if err := fe.dev.Memset(fe.ro.B, fe.ro.Off, roWords*4, 0); err != nil {
		return nil, fmt.Errorf("fused: compare: readout: %w", err)
	}
	if err := fe.adam(ap, fe.grads, fe.valid); err != nil {
		return nil, fmt.Errorf("fused: compare: adam: %w", err)
	}
	got, err := fe.Gaussians()
	if err != nil {
		return nil, fmt.Errorf("fused: compare: parameters: %w", err)
	}
	return got, nil
}

// regularisedAdam runs adam_step with m's regularisers on from g (zero moments) on random loss
// gradients, with a third of the splats out of view (their loss gradient is zero and not read,
// but the regularisers' still applies unless m.RegInView: they are means over every splat), and
// adds a row for the parameters against the CPU optimizer on the same gradients plus
// engine.RegularizerGrads.
func (r *rows) regularisedAdam(g *splat.Gaussians, m engine.MCMCStep) error {
	fe, n := r.e, g.Len()
	rng := rand.New(rand.NewPCG(0x6e9, uint64(n)))
	grads := splat.Zeros[float32](n)
	valid := make([]uint32, n)
	for i := range valid {
		valid[i] = uint32(min(i%3, 1))
	}
	for _, f := range grads.Fields() {
		w := len(f.Data) / n
		for i := range f.Data {
			if valid[i/w] != 0 {
				f.Data[i] = float32(rng.NormFloat64() * 1e-3)
			}
		}
	}
	lr := engine.LR{Means: 1e-3, LogScales: 5e-3, Quats: 1e-3, Opacity: 5e-2, SHDC: 2.5e-3, SHRest: 1.25e-4}
	ap, err := adamArgs(fe.set.Adam, lr, 1, n, m, 1, shAll)
	if err != nil {
		return fmt.Errorf("fused: compare: %w", err)
	}
	got, err := r.adamAlone(ap, g, nil, nil, 0, grads, valid)
	if err != nil {
		return err
	}
	inView := make([]bool, n)
	for i := range inView {
		inView[i] = valid[i] != 0
	}
	engine.RegularizerGrads(grads, g, m, inView, 0, n)
	want, err := hostAdam(fe.set.Adam, lr, g, grads, inView)
	if err != nil {
		return err
	}
	d := check.BitsDiffer(pack(got), pack(want))
	name, scope := "mcmc regularisers", "every splat's"
	if m.RegInView {
		name, scope = "mcmc regularisers in view", "the splats' in view"
	}
	r.count(name, d, n*paramFloats, fmt.Sprintf("%d of %d values differ from the CPU optimizer on loss + regulariser gradients (a third of the splats out of view; %s regularised)", d, n*paramFloats, scope))
	return nil
}

// edit starts the fused engine from the CPU engine's state and applies the same densification
// edit (a fixed random tenth of the splats removed, cloned and split) to both; the states must
// then be identical, since an edit only copies and transforms values the CPU also has.
func (r *rows) edit(ce *cpu.Engine, n int) error {
	st, err := ce.State()
	if err != nil {
		return fmt.Errorf("fused: compare: cpu state: %w", err)
	}
	if err := r.e.SetState(st); err != nil {
		return fmt.Errorf("fused: compare: set state: %w", err)
	}
	ed := RandomEdit(rand.New(rand.NewPCG(0xed17, uint64(n))), n)
	if err := ce.Apply(ed); err != nil {
		return fmt.Errorf("fused: compare: cpu edit: %w", err)
	}
	if err := r.e.Apply(ed); err != nil {
		return fmt.Errorf("fused: compare: edit: %w", err)
	}
	if r.e.Len() != ce.Len() {
		r.count("edit", 1, 1, fmt.Sprintf("%d splats, cpu %d", r.e.Len(), ce.Len()))
		return nil
	}
	bad, of, notes, err := stateDiff(r.e, ce)
	if err != nil {
		return err
	}
	note := fmt.Sprintf("%d removed, %d cloned, %d split; %d splats", countTrue(ed.Remove), len(ed.Clone), len(ed.Split), ce.Len())
	if bad > 0 {
		note += "; " + strings.Join(notes, ", ")
	}
	r.count("edit", bad, of, note)
	return nil
}

// stateDiff counts the values in which the two engines' states differ (parameters, moments,
// statistics, Adam's step) and says where.
func stateDiff(fe *Engine, ce *cpu.Engine) (bad, of int, where []string, err error) {
	a, err := fe.State()
	if err != nil {
		return 0, 0, nil, fmt.Errorf("fused: compare: state: %w", err)
	}
	b, err := ce.State()
	if err != nil {
		return 0, 0, nil, fmt.Errorf("fused: compare: cpu state: %w", err)
	}
	if a.AdamStep != b.AdamStep {
		bad++
		where = append(where, fmt.Sprintf("Adam step %d, cpu %d", a.AdamStep, b.AdamStep))
	}
	for _, x := range []struct {
		name string
		a, b *splat.Gaussians
	}{{"params", a.Params, b.Params}, {"adam m", a.AdamM, b.AdamM}, {"adam v", a.AdamV, b.AdamV}} {
		pa, pb := pack(x.a), pack(x.b)
		of += len(pb)
		if d := check.BitsDiffer(pa, pb); d > 0 {
			bad += d
			where = append(where, fmt.Sprintf("%s: %d values differ", x.name, d))
		}
	}
	of += len(b.Stats.GradAccum) + len(b.Stats.MaxRadius)
	if d := check.BitsDiffer(a.Stats.GradAccum, b.Stats.GradAccum) + check.BitsDiffer(a.Stats.MaxRadius, b.Stats.MaxRadius); d > 0 {
		bad += d
		where = append(where, fmt.Sprintf("statistics: %d values differ", d))
	}
	return bad, of, where, nil
}

// projection compares the device's projection with the CPU's for every splat.
func (r *rows) projection(want *prep.Projected, n int) {
	fe := r.e
	valid := download[uint32](r, fe.valid, 0, n)
	var mism []string
	for i := range valid {
		if (valid[i] == 1) != want.Valid[i] || valid[i] > 1 {
			mism = append(mism, fmt.Sprintf("valid[%d] = %d, cpu %v", i, valid[i], want.Valid[i]))
		}
	}
	r.count("projection valid", len(mism), n, strings.Join(mism[:min(len(mism), 5)], ", "))
	if len(mism) > 0 {
		return // the other fields of a splat only one side projects mean nothing
	}
	type field struct {
		name  string
		buf   gpu.Buffer
		width int
		want  []float32
	}
	fields := []field{
		{"depth", fe.depth, 1, want.Depth}, {"opacity", fe.opacity, 1, want.Opacity}, {"color", fe.color, 3, want.Color},
		{"mean2d", fe.mean2d, 2, want.Mean2D}, {"bound center", fe.boundCenter, 2, want.BoundCenter},
		{"bound Q", fe.boundQ, 3, want.BoundQ}, {"radius", fe.radius, 1, want.Radius},
	}
	if want.Model == prep.Ray {
		fields = append(fields, field{"rayU", fe.rayU, 3, want.RayU}, field{"rayA", fe.rayA, 9, want.RayA},
			field{"ray half-plane", fe.rayHalf, 3, want.RayHalf})
	} else {
		fields = append(fields, field{"conic", fe.conic, 3, want.Conic})
	}
	for _, f := range fields {
		got := r.f32(f.buf, 0, n*f.width)
		var a, b []float32
		for i := 0; i < n; i++ {
			if want.Valid[i] {
				a = append(a, got[i*f.width:(i+1)*f.width]...)
				b = append(b, f.want[i*f.width:(i+1)*f.width]...)
			}
		}
		note := ""
		if d := check.BitsDiffer(a, b); d > 0 {
			note = fmt.Sprintf("%d of %d values differ in the last bits", d, len(b))
		}
		r.near("projection "+f.name, a, b, TolExact, note)
	}
	rect := download[int32](r, fe.rect, 0, n*4)
	bad, note := 0, ""
	for i := 0; i < n; i++ {
		if !want.Valid[i] {
			continue
		}
		for k := 0; k < 4; k++ {
			if rect[i*4+k] != want.Rect[i*4+k] {
				if bad == 0 {
					note = fmt.Sprintf("splat %d: %v, cpu %v", i, rect[i*4:i*4+4], want.Rect[i*4:i*4+4])
				}
				bad++
				break
			}
		}
	}
	r.count("projection rect", bad, n, note)
}

// lists compares the sorted tile lists and their offsets. They must be identical; the only
// differences issue 3 admits are entries within float rounding of a conic boundary, which the
// kernels avoid by keeping the CPU's rounding, so any difference fails and is listed.
func (r *rows) lists(name string, want *prep.TileLists, entries int) {
	fe := r.e
	if entries != len(want.IDs) {
		r.count(name, 1, 1, fmt.Sprintf("%d entries, cpu %d", entries, len(want.IDs)))
		return
	}
	keys := download[uint32](r, fe.sortedKeys, 0, entries)
	ids := download[uint32](r, fe.sortedIDs, 0, entries)
	var diffs []string
	for i := range keys {
		if uint64(keys[i]) != want.Keys[i]>>32 || int32(ids[i]) != want.IDs[i] {
			diffs = append(diffs, fmt.Sprintf("#%d: tile %d splat %d (cpu tile %d splat %d)", i, keys[i], ids[i], want.Keys[i]>>32, want.IDs[i]))
		}
	}
	note := fmt.Sprintf("%d entries", entries)
	if len(diffs) > 0 {
		note = fmt.Sprintf("%d of %d entries differ: %s", len(diffs), entries, strings.Join(diffs[:min(len(diffs), 20)], "; "))
	}
	r.count(name, len(diffs), entries, note)
	offs := download[uint32](r, fe.tileOffsets, 0, len(want.Offsets))
	bad, onote := 0, ""
	for i, o := range offs {
		if int32(o) != want.Offsets[i] {
			if bad == 0 {
				onote = fmt.Sprintf("tile %d: %d, cpu %d", i, o, want.Offsets[i])
			}
			bad++
		}
	}
	r.count(name+" offsets", bad, len(offs), onote)
}

// poison fills every buffer a step writes (not the parameters, moments or statistics) with
// 0xFF bytes: NaN for floats, 2³²−1 for words, so that anything a stage fails to write shows.
func (e *Engine) poison() error {
	for _, b := range []gpu.Buffer{e.grads, e.valid, e.depth, e.opacity, e.color, e.mean2d, e.conic, e.rayU, e.rayA, e.rayHalf,
		e.boundCenter, e.boundQ, e.rect, e.radius, e.pg, e.grad2d, e.counts, e.visFlags, e.depthKeys, e.order, e.depthKeysTmp, e.orderTmp, e.ranked, e.rankOf,
		e.hitMask, e.bigOff, e.bigBits, e.keys, e.ids, e.keysTmp, e.idsTmp,
		e.hist, e.tileOffsets, e.tileOrder, e.image, e.finalT, e.count, e.dImage, e.rays, e.dmap,
		e.partAbs, e.partSq, e.partSSIM, e.tileWalk, e.chunkStart, e.chunkTile, e.chunkState, e.segCont, e.segItems, e.segState,
		e.segCount, e.seen, e.vis} {
		if b == nil {
			continue
		}
		if err := e.dev.Memset(b, 0, b.Size(), 0xFF); err != nil {
			return fmt.Errorf("fused: poison: %w", err)
		}
	}
	e.raysFor = nil
	e.packed, e.summed = nil, nil
	return nil
}

// pgField is one field of the prepared-data gradients (the pg buffer, from off·capV) with the
// CPU's values for it.
type pgField struct {
	name       string
	off, width int
	want       []float32
}

// pgFields lists the render model's prepared-data gradient fields against the CPU's.
func pgFields(model prep.Model, cpu *prep.PrepGrads) []pgField {
	fs := []pgField{{"d color", pgColor, 3, cpu.Color}, {"d opacity", pgOpacity, 1, cpu.Opacity}}
	if model == prep.Ray {
		return append(fs, pgField{"d rayU", pgRayU, 3, cpu.RayU}, pgField{"d rayA", pgRayA, 9, cpu.RayA})
	}
	fs = append(fs, pgField{"d mean2d", pgMean2D, 2, cpu.Mean2D}, pgField{"d conic", pgConic, 3, cpu.Conic})
	if cpu.Mean2DAbs != nil { // engine.Settings.AbsGrad
		fs = append(fs, pgField{"d mean2d abs sums", pgMean2DAbs, 2, cpu.Mean2DAbs})
	}
	return fs
}

// hostAdam is internal/adam's step (as the CPU engine configures it) on copies of g and grads.
func hostAdam(s engine.AdamSettings, lr engine.LR, g, grads *splat.Gaussians, mask []bool) (*splat.Gaussians, error) {
	opt, err := adam.New(s.Optimizer(), g.Len())
	if err != nil {
		return nil, fmt.Errorf("fused: compare: host adam: %w", err)
	}
	p := g.Clone()
	if _, err := opt.Step(p, grads, [adam.NumGroups]float32{lr.Means, lr.LogScales, lr.Quats, lr.Opacity, lr.SHDC, lr.SHRest}, mask); err != nil {
		return nil, fmt.Errorf("fused: compare: host adam: %w", err)
	}
	return p, nil
}

type groupPair struct {
	name      string
	got, want []float32
}

// groups splits two parameter sets into Adam's groups (SH split into DC and rest).
func groups(a, b *splat.Gaussians) []groupPair {
	n := a.Len()
	dc := func(g *splat.Gaussians, rest bool) []float32 {
		var out []float32
		for i := 0; i < n; i++ {
			s := g.SH[i*48 : (i+1)*48]
			if rest {
				out = append(out, s[3:]...)
			} else {
				out = append(out, s[:3]...)
			}
		}
		return out
	}
	return []groupPair{
		{"means", a.Means, b.Means}, {"log_scales", a.LogScales, b.LogScales}, {"quats", a.Quats, b.Quats},
		{"opacity_logits", a.OpacityLogits, b.OpacityLogits},
		{"sh_dc", dc(a, false), dc(b, false)}, {"sh_rest", dc(a, true), dc(b, true)},
	}
}

func countTrue(b []bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lossOn is the CPU engine's loss gradient for img against target, in float32.
func lossOn(set engine.Settings, w, h int, img, target []float32) ([]float32, error) {
	ev, err := loss.NewEvaluatorOf[float32](w, h, max(set.Workers, 1))
	if err != nil {
		return nil, err
	}
	grad := make([]float32, w*h*3)
	if _, err := ev.Loss(set.Loss, set.SSIMLambda, img, target, grad); err != nil {
		return nil, err
	}
	return grad, nil
}

// zeroInvalid zeroes, in the packed gradients p of len(valid) splats, every element of the
// splats whose flag is 0.
func zeroInvalid(p []float32, valid []uint32) {
	n := len(valid)
	off := 0
	for _, f := range splat.New(0).Fields() {
		for i, ok := range valid {
			if ok == 0 {
				clear(p[off+i*f.Width : off+(i+1)*f.Width])
			}
		}
		off += n * f.Width
	}
}

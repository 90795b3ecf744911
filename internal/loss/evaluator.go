package loss

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// SSIM constants (Wang et al. 2004, as the original 3DGS uses them with
// images in [0,1]).
const (
	WindowRadius = 5   // the window is (2·WindowRadius+1)² = 11×11 pixels
	WindowSigma  = 1.5 // standard deviation of the Gaussian window, pixels
	C1           = 0.01 * 0.01
	C2           = 0.03 * 0.03
)

const windowSize = 2*WindowRadius + 1

// Per pixel and channel, the forward pass filters five quantities: the two
// images, their squares and their product. They are stored interleaved
// ([H,W,3,5]) so that both separable passes run over contiguous memory.
const (
	qX = iota
	qY
	qXX
	qYY
	qXY
	nQ
)

// fwdK is the number of filtered values per pixel in the forward pass.
const fwdK = 3 * nQ

// The backward pass filters the three per-pixel partials of the SSIM map
// with respect to μx, E[x²] and E[xy] ([H,W,3,3]).
const (
	dMu = iota
	dXX
	dXY
	nD
)

// bwdK is the number of filtered values per pixel in the backward pass.
const bwdK = 3 * nD

// Result holds the loss of one image and its components, each a mean over
// all H·W·3 values (SSIM: over the SSIM map).
type Result struct {
	Loss float64
	L1   float64
	MSE  float64
	// SSIM is NaN when the loss kind has no SSIM term (it is not computed
	// then; a NaN cannot be mistaken for a measurement).
	SSIM float64
}

// Evaluator is the float32 instantiation the engines use.
type Evaluator = EvaluatorOf[float32]

// NewEvaluator returns a float32 Evaluator for w×h images; see NewEvaluatorOf.
func NewEvaluator(w, h, workers int) (*Evaluator, error) {
	return NewEvaluatorOf[float32](w, h, workers)
}

// EvaluatorOf computes losses, their image gradients and SSIM for images of
// one size. It owns every scratch buffer, so a call allocates no image-sized
// memory (with more than one worker, each call starts goroutines, which costs
// a few small allocations).
//
// An EvaluatorOf is not safe for concurrent use; give each goroutine its own.
type EvaluatorOf[F splat.Float] struct {
	w, h    int
	workers int
	kern    [windowSize]F // normalised 1D Gaussian; the 2D window is its outer product

	hq []F // [H,W,fwdK] forward quantities filtered along x
	hd []F // [H,W,bwdK] SSIM-map partials filtered along x

	scratchA [][]F // per worker [W*fwdK]
	scratchB [][]F // per worker [W*bwdK]

	// Per-row sums, reduced in row order afterwards so that the result does
	// not depend on how rows were split among workers.
	rowAbs, rowSq, rowSSIM []float64 // [H]
	// rowSSIMIn is the row's SSIM sum over interior columns only (windows that fit the image),
	// for the standard metric (MetricSSIM).
	rowSSIMIn []float64 // [H]

	job job[F] // the arguments of the call in progress
	wg  sync.WaitGroup
}

// job is the state of one call, shared read-only by the workers (each
// writes only its own rows of the outputs).
type job[F splat.Float] struct {
	kind        Kind
	img, target []F
	grad        []F  // nil: no gradient
	ssim        bool // compute the SSIM map
	pointCoef   F    // pixel-wise term's coefficient: (1−λ)/N for L1, 2(1−λ)/N for MSE
	ssimCoef    F    // −λ/N, the SSIM term's coefficient
}

// NewEvaluatorOf returns an evaluator for w×h images that splits rows among
// workers goroutines (workers ≤ 0 means runtime.GOMAXPROCS(0)).
func NewEvaluatorOf[F splat.Float](w, h, workers int) (*EvaluatorOf[F], error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	e := &EvaluatorOf[F]{workers: workers}
	var sum float64
	var k [windowSize]float64
	for i := range k {
		d := float64(i - WindowRadius)
		k[i] = math.Exp(-d * d / (2 * WindowSigma * WindowSigma))
		sum += k[i]
	}
	for i := range k {
		e.kern[i] = F(k[i] / sum)
	}
	if err := e.Resize(w, h); err != nil {
		return nil, err
	}
	return e, nil
}

// maxPixels bounds the image size so that buffer sizes cannot overflow int
// on any platform we build for.
const maxPixels = 1 << 26

// Resize makes the evaluator work on w×h images, reusing its buffers when
// they are large enough.
func (e *EvaluatorOf[F]) Resize(w, h int) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("loss: image size %d×%d: width and height must be positive", w, h)
	}
	if w > maxPixels/h {
		return fmt.Errorf("loss: image size %d×%d: more than %d pixels", w, h, maxPixels)
	}
	e.w, e.h = w, h
	n := w * h
	e.hq = grow(e.hq, n*fwdK)
	e.hd = grow(e.hd, n*bwdK)
	e.rowAbs = grow(e.rowAbs, h)
	e.rowSq = grow(e.rowSq, h)
	e.rowSSIM = grow(e.rowSSIM, h)
	e.rowSSIMIn = grow(e.rowSSIMIn, h)
	nw := min(e.workers, h)
	if len(e.scratchA) < nw {
		e.scratchA = append(e.scratchA, make([][]F, nw-len(e.scratchA))...)
		e.scratchB = append(e.scratchB, make([][]F, nw-len(e.scratchB))...)
	}
	for i := 0; i < nw; i++ {
		e.scratchA[i] = grow(e.scratchA[i], w*fwdK)
		e.scratchB[i] = grow(e.scratchB[i], w*bwdK)
	}
	return nil
}

// Size returns the image size the evaluator works on.
func (e *EvaluatorOf[F]) Size() (w, h int) { return e.w, e.h }

func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// Loss returns the loss of img against target and, when grad is not nil,
// writes dLoss/dimg into grad (same layout, overwritten). lambda is the SSIM
// weight λ ∈ [0,1] of the blended kinds (ignored by MSE). The gradient of |·|
// at 0 is taken as 0. grad must not overlap img or target.
func (e *EvaluatorOf[F]) Loss(kind Kind, lambda F, img, target, grad []F) (Result, error) {
	if !kind.valid() {
		return Result{}, fmt.Errorf("loss: invalid loss kind %v (allowed: %s)", kind, strings.Join(KindNames(), ", "))
	}
	lam := float64(lambda)
	if !(lam >= 0 && lam <= 1) {
		return Result{}, fmt.Errorf("loss: lambda = %v, want a value in [0,1]", lam)
	}
	if err := e.checkSizes(img, target, grad); err != nil {
		return Result{}, err
	}
	if kind == MSE {
		lam = 0
	}
	n := float64(e.w * e.h * 3)
	pointCoef := (1 - lam) / n
	if kind != L1SSIM {
		pointCoef *= 2 // d/dx (x−y)² = 2(x−y)
	}
	e.job = job[F]{
		kind: kind, img: img, target: target, grad: grad,
		ssim:      kind.UsesSSIM(),
		pointCoef: F(pointCoef),
		ssimCoef:  F(-lam / n),
	}
	defer e.clearJob()

	e.run(phasePointwise)
	res := Result{SSIM: math.NaN()}
	var sAbs, sSq float64
	for y := 0; y < e.h; y++ {
		sAbs += e.rowAbs[y]
		sSq += e.rowSq[y]
	}
	res.L1, res.MSE = sAbs/n, sSq/n
	if kind.UsesSSIM() {
		e.run(phaseSSIM)
		res.SSIM = e.sumSSIM() / n
		if grad != nil {
			e.run(phaseSSIMGrad)
		}
	}
	switch kind {
	case L1SSIM:
		res.Loss = (1-lam)*res.L1 + lam*(1-res.SSIM)
	case MSE:
		res.Loss = res.MSE
	case MSESSIM:
		res.Loss = (1-lam)*res.MSE + lam*(1-res.SSIM)
	}
	return res, nil
}

// MetricSSIM returns the SSIM of img against target as the standard metric implementations
// compute it (scikit-image's structural_similarity with gaussian_weights, σ = 1.5,
// use_sample_covariance off and data_range 1; torchmetrics' structural_similarity_index_measure
// with its defaults): the 11×11 Gaussian-window SSIM map averaged over the pixels whose window
// lies inside the image, so border pixels, whose windows would reach into padding, are left
// out. Per channel, then averaged over the three channels, which for equal-sized channels is
// the mean over every interior value. It agrees with scikit-image 0.19.3
// (TestMetricSSIMMatchesScikitImage): within 4e-6 on test images.
//
// SSIM (the same map averaged over every pixel with zero padding at the border) is what the
// original 3DGS code trains with and reports; it reads slightly lower on real renders because
// border windows see zeros. The fixed 11×11 window needs images of at least 11×11 pixels.
func (e *EvaluatorOf[F]) MetricSSIM(img, target []F) (float64, error) {
	m, _, err := e.SSIMs(img, target)
	return m, err
}

// SSIM returns the mean SSIM of img against target (1 for equal images): the map averaged
// over every pixel, with zero padding where the window leaves the image, as the original 3DGS
// computes it. See MetricSSIM for the standard metric.
func (e *EvaluatorOf[F]) SSIM(img, target []F) (float64, error) {
	if err := e.ssimMap(img, target); err != nil {
		return 0, err
	}
	return e.sumSSIM() / float64(e.w*e.h*3), nil
}

// SSIMs returns both means of one SSIM map of img against target: the standard metric
// (MetricSSIM) and the original 3DGS code's (SSIM), for the price of one.
func (e *EvaluatorOf[F]) SSIMs(img, target []F) (metric, zeroPadded float64, err error) {
	if e.w < windowSize || e.h < windowSize {
		return 0, 0, fmt.Errorf("loss: standard SSIM of a %d×%d image: the %d×%d window needs at least %d×%d pixels", e.w, e.h, windowSize, windowSize, windowSize, windowSize)
	}
	if err := e.ssimMap(img, target); err != nil {
		return 0, 0, err
	}
	var s float64
	for y := WindowRadius; y < e.h-WindowRadius; y++ {
		s += e.rowSSIMIn[y]
	}
	return s / float64((e.w-2*WindowRadius)*(e.h-2*WindowRadius)*3), e.sumSSIM() / float64(e.w*e.h*3), nil
}

// ssimMap computes the SSIM map's row sums (rowSSIM, rowSSIMIn) of img against target.
func (e *EvaluatorOf[F]) ssimMap(img, target []F) error {
	if err := e.checkSizes(img, target, nil); err != nil {
		return err
	}
	e.job = job[F]{kind: L1SSIM, img: img, target: target, ssim: true}
	defer e.clearJob()
	e.run(phasePointwise)
	e.run(phaseSSIM)
	return nil
}

func (e *EvaluatorOf[F]) sumSSIM() float64 {
	var s float64
	for y := 0; y < e.h; y++ {
		s += e.rowSSIM[y]
	}
	return s
}

// clearJob drops the references to the caller's images.
func (e *EvaluatorOf[F]) clearJob() { e.job = job[F]{} }

func (e *EvaluatorOf[F]) checkSizes(img, target, grad []F) error {
	want := e.w * e.h * 3
	if len(img) != want {
		return fmt.Errorf("loss: image has %d values, want %d (%d×%d×3)", len(img), want, e.w, e.h)
	}
	if len(target) != want {
		return fmt.Errorf("loss: target has %d values, want %d (%d×%d×3)", len(target), want, e.w, e.h)
	}
	if grad != nil && len(grad) != want {
		return fmt.Errorf("loss: gradient buffer has %d values, want %d (%d×%d×3)", len(grad), want, e.w, e.h)
	}
	return nil
}

// The phases of one call. Each reads only rows that an earlier phase
// finished (the separable filter's vertical pass needs the neighbouring
// rows), so phases are separated by a barrier and a phase's rows are
// independent.
const (
	// phasePointwise: per-row L1/MSE sums, the MSE gradient, and the
	// forward quantities filtered along x (into hq).
	phasePointwise = iota
	// phaseSSIM: filter hq along y, the SSIM map's row sums and, for a
	// gradient, its partials filtered along x (into hd).
	phaseSSIM
	// phaseSSIMGrad: filter hd along y and write the gradient.
	phaseSSIMGrad
)

// run executes one phase over all rows with up to e.workers goroutines,
// contiguous blocks of rows each; the caller's goroutine takes the first.
func (e *EvaluatorOf[F]) run(phase int) {
	nw := min(e.workers, e.h)
	chunk := (e.h + nw - 1) / nw
	nw = (e.h + chunk - 1) / chunk
	e.wg.Add(nw - 1)
	for wk := 1; wk < nw; wk++ {
		go e.worker(phase, wk, wk*chunk, min(e.h, (wk+1)*chunk))
	}
	e.rows(phase, 0, 0, min(e.h, chunk))
	e.wg.Wait()
}

func (e *EvaluatorOf[F]) worker(phase, wk, y0, y1 int) {
	defer e.wg.Done()
	e.rows(phase, wk, y0, y1)
}

func (e *EvaluatorOf[F]) rows(phase, wk, y0, y1 int) {
	for y := y0; y < y1; y++ {
		switch phase {
		case phasePointwise:
			e.pointwiseRow(wk, y)
		case phaseSSIM:
			e.ssimRow(wk, y)
		case phaseSSIMGrad:
			e.ssimGradRow(wk, y)
		}
	}
}

func (e *EvaluatorOf[F]) pointwiseRow(wk, y int) {
	j := &e.job
	w := e.w
	x := j.img[y*w*3 : (y+1)*w*3]
	t := j.target[y*w*3 : (y+1)*w*3]
	var sAbs, sSq float64
	for i := range x {
		d := float64(x[i]) - float64(t[i])
		sAbs += math.Abs(d)
		sSq += d * d
	}
	e.rowAbs[y], e.rowSq[y] = sAbs, sSq
	if j.kind == MSE && j.grad != nil {
		g := j.grad[y*w*3 : (y+1)*w*3]
		for i := range g {
			g[i] = j.pointCoef * (x[i] - t[i])
		}
	}
	if !j.ssim {
		return
	}
	q := e.scratchA[wk][:w*fwdK]
	for p := 0; p < w; p++ {
		for c := 0; c < 3; c++ {
			a, b := x[p*3+c], t[p*3+c]
			o := p*fwdK + c*nQ
			q[o+qX] = a
			q[o+qY] = b
			q[o+qXX] = a * a
			q[o+qYY] = b * b
			q[o+qXY] = a * b
		}
	}
	filterX(e.hq[y*w*fwdK:(y+1)*w*fwdK], q, fwdK, &e.kern)
}

// ssimRow evaluates the SSIM map of row y,
//
//	S = (2μxμy + C1)(2σxy + C2) / ((μx² + μy² + C1)(σx² + σy² + C2)),
//
// with μ, σ², σxy from the filtered E[x], E[y], E[x²], E[y²], E[xy]. For a
// gradient it also stores S's partials with respect to μx, E[x²] and E[xy]
// (y is the constant target), filtered along x.
func (e *EvaluatorOf[F]) ssimRow(wk, y int) {
	j := &e.job
	w := e.w
	m := e.scratchA[wk][:w*fwdK]
	filterY(m, e.hq, y, e.h, &e.kern)
	var d []F
	if j.grad != nil {
		d = e.scratchB[wk][:w*bwdK]
	}
	c1, c2 := F(C1), F(C2)
	var sum, sumIn float64
	for p := 0; p < w; p++ {
		// Interior columns (the window fits) also count towards MetricSSIM's sum.
		in := p >= WindowRadius && p < w-WindowRadius
		for c := 0; c < 3; c++ {
			o := p*fwdK + c*nQ
			mx, my := m[o+qX], m[o+qY]
			sx := m[o+qXX] - mx*mx
			sy := m[o+qYY] - my*my
			sxy := m[o+qXY] - mx*my
			a1 := 2*mx*my + c1
			a2 := 2*sxy + c2
			b1 := mx*mx + my*my + c1
			b2 := sx + sy + c2
			inv := 1 / (b1 * b2)
			s := a1 * a2 * inv
			sum += float64(s)
			if in {
				sumIn += float64(s)
			}
			if d != nil {
				// μx enters a1, b1 directly and a2, b2 through σxy = E[xy] − μxμy
				// and σx² = E[x²] − μx².
				od := p*bwdK + c*nD
				d[od+dMu] = 2*my*(a2-a1)*inv - 2*mx*s*(1/b1-1/b2)
				d[od+dXX] = -s / b2
				d[od+dXY] = 2 * a1 * inv
			}
		}
	}
	e.rowSSIM[y], e.rowSSIMIn[y] = sum, sumIn
	if d != nil {
		filterX(e.hd[y*w*bwdK:(y+1)*w*bwdK], d, bwdK, &e.kern)
	}
}

// ssimGradRow writes the gradient of row y. With G the (symmetric,
// zero-padded) window, Σ_q S_q depends on pixel x_p through μx = G*x,
// E[x²] = G*x² and E[xy] = G*(x·y); the adjoint of a zero-padded "same"
// convolution with a symmetric kernel is the same convolution, so
//
//	∂ΣS/∂x_p = (G*∂S/∂μx)_p + 2·x_p·(G*∂S/∂E[x²])_p + y_p·(G*∂S/∂E[xy])_p.
func (e *EvaluatorOf[F]) ssimGradRow(wk, y int) {
	j := &e.job
	w := e.w
	gd := e.scratchB[wk][:w*bwdK]
	filterY(gd, e.hd, y, e.h, &e.kern)
	x := j.img[y*w*3 : (y+1)*w*3]
	t := j.target[y*w*3 : (y+1)*w*3]
	g := j.grad[y*w*3 : (y+1)*w*3]
	for p := 0; p < w; p++ {
		for c := 0; c < 3; c++ {
			i := p*3 + c
			a, b := x[i], t[i]
			o := p*bwdK + c*nD
			ds := gd[o+dMu] + 2*a*gd[o+dXX] + b*gd[o+dXY]
			var pt F
			if j.kind == L1SSIM {
				switch {
				case a > b:
					pt = j.pointCoef
				case a < b:
					pt = -j.pointCoef
				}
			} else {
				pt = j.pointCoef * (a - b)
			}
			g[i] = pt + j.ssimCoef*ds
		}
	}
}

// filterX convolves one row of k-vectors (src, [W,k]) with the window along
// x, zero outside the row, into dst. Every output sums its taps in the same
// order (−R..R), so results are reproducible bit for bit.
func filterX[F splat.Float](dst, src []F, k int, kern *[windowSize]F) {
	w := len(dst) / k
	if w > 2*WindowRadius {
		// Interior pixels see all taps: output x*k+i reads src at
		// (x+tap)*k+i, i.e. eleven slices of src shifted by k.
		lo, hi := WindowRadius*k, (w-WindowRadius)*k
		var s [windowSize][]F
		for t := range s {
			s[t] = src[t*k : t*k+hi-lo]
		}
		sum11(dst[lo:hi], &s, kern)
		filterXSlow(dst, src, k, 0, WindowRadius, kern)
		filterXSlow(dst, src, k, w-WindowRadius, w, kern)
		return
	}
	filterXSlow(dst, src, k, 0, w, kern)
}

// filterXSlow is filterX for output pixels x0..x1−1, skipping taps outside
// the row.
func filterXSlow[F splat.Float](dst, src []F, k, x0, x1 int, kern *[windowSize]F) {
	w := len(dst) / k
	for x := x0; x < x1; x++ {
		d := dst[x*k : (x+1)*k]
		clear(d)
		for tap := -WindowRadius; tap <= WindowRadius; tap++ {
			xs := x + tap
			if xs < 0 || xs >= w {
				continue
			}
			g := kern[tap+WindowRadius]
			sv := src[xs*k : (xs+1)*k]
			sv = sv[:len(d)]
			for i := range d {
				d[i] += g * sv[i]
			}
		}
	}
}

// filterY convolves column-wise: dst (one row, rowLen = len(dst)) is row y of
// src ([H,rowLen]) filtered along y, zero above and below the image.
func filterY[F splat.Float](dst, src []F, y, h int, kern *[windowSize]F) {
	n := len(dst)
	if y >= WindowRadius && y+WindowRadius < h {
		var s [windowSize][]F
		for t := range s {
			yy := y + t - WindowRadius
			s[t] = src[yy*n : (yy+1)*n]
		}
		sum11(dst, &s, kern)
		return
	}
	clear(dst)
	for tap := -WindowRadius; tap <= WindowRadius; tap++ {
		yy := y + tap
		if yy < 0 || yy >= h {
			continue
		}
		g := kern[tap+WindowRadius]
		sv := src[yy*n : (yy+1)*n]
		sv = sv[:n]
		for i := range dst {
			dst[i] += g * sv[i]
		}
	}
}

// sum11 sets dst[i] = Σ_t kern[t]·s[t][i], summing in t order (the order the
// border loops use), keeping the running sum in a register: one pass over
// dst instead of eleven.
func sum11[F splat.Float](dst []F, s *[windowSize][]F, kern *[windowSize]F) {
	n := len(dst)
	s0, s1, s2, s3, s4, s5 := s[0][:n], s[1][:n], s[2][:n], s[3][:n], s[4][:n], s[5][:n]
	s6, s7, s8, s9, s10 := s[6][:n], s[7][:n], s[8][:n], s[9][:n], s[10][:n]
	g0, g1, g2, g3, g4, g5 := kern[0], kern[1], kern[2], kern[3], kern[4], kern[5]
	g6, g7, g8, g9, g10 := kern[6], kern[7], kern[8], kern[9], kern[10]
	for i := range dst {
		dst[i] = g0*s0[i] + g1*s1[i] + g2*s2[i] + g3*s3[i] + g4*s4[i] + g5*s5[i] +
			g6*s6[i] + g7*s7[i] + g8*s8[i] + g9*s9[i] + g10*s10[i]
	}
}

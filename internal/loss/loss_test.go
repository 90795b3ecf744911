package loss

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Seeds of the random test images (named so a failure can be replayed).
const (
	seedA uint64 = 1
	seedB uint64 = 7
	seedC uint64 = 2024
)

// randImages returns a random image and target of w×h in [0,1] whose values
// differ by at least minDiff everywhere, so that |x−y| is smooth within any
// finite-difference step smaller than minDiff. lowContrast makes a smooth
// target with a little noise and an image close to it, so that the local
// variances are small and C1, C2 matter.
func randImages(w, h int, seed uint64, lowContrast bool, minDiff float64) (img, target []float64) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	n := w * h * 3
	img, target = make([]float64, n), make([]float64, n)
	for i := range n {
		p := i / 3
		x, y := p%w, p/w
		for {
			if lowContrast {
				base := 0.3 + 0.4*float64(x)/float64(w) + 0.1*float64(y)/float64(h) + 0.05*float64(i%3)
				target[i] = base + 0.02*r.Float64()
				img[i] = target[i] + 0.06*(r.Float64()-0.5)
			} else {
				img[i], target[i] = r.Float64(), r.Float64()
			}
			if math.Abs(img[i]-target[i]) >= minDiff {
				break
			}
		}
	}
	return img, target
}

func to32(s []float64) []float32 {
	o := make([]float32, len(s))
	for i, v := range s {
		o[i] = float32(v)
	}
	return o
}

// naiveSSIM is an independent reference: the SSIM map averaged over pixels
// and channels, with a direct 11×11 zero-padded convolution whose 2D window
// is built and normalised in 2D.
func naiveSSIM(w, h int, x, y []float64) float64 {
	var win [windowSize][windowSize]float64
	var sum float64
	for i := range windowSize {
		for j := range windowSize {
			di, dj := float64(i-WindowRadius), float64(j-WindowRadius)
			win[i][j] = math.Exp(-(di*di + dj*dj) / (2 * WindowSigma * WindowSigma))
			sum += win[i][j]
		}
	}
	var total float64
	for c := range 3 {
		for py := range h {
			for px := range w {
				var mx, my, exx, eyy, exy float64
				for i := range windowSize {
					for j := range windowSize {
						qx, qy := px+j-WindowRadius, py+i-WindowRadius
						if qx < 0 || qy < 0 || qx >= w || qy >= h {
							continue
						}
						k := win[i][j] / sum
						a, b := x[(qy*w+qx)*3+c], y[(qy*w+qx)*3+c]
						mx += k * a
						my += k * b
						exx += k * a * a
						eyy += k * b * b
						exy += k * a * b
					}
				}
				sx, sy, sxy := exx-mx*mx, eyy-my*my, exy-mx*my
				total += (2*mx*my + C1) * (2*sxy + C2) / ((mx*mx + my*my + C1) * (sx + sy + C2))
			}
		}
	}
	return total / float64(w*h*3)
}

func naiveLoss(kind Kind, lambda float64, w, h int, x, y []float64) Result {
	var sa, sq float64
	for i := range x {
		d := x[i] - y[i]
		sa += math.Abs(d)
		sq += d * d
	}
	n := float64(len(x))
	r := Result{L1: sa / n, MSE: sq / n, SSIM: math.NaN()}
	switch kind {
	case L1SSIM:
		r.SSIM = naiveSSIM(w, h, x, y)
		r.Loss = (1-lambda)*r.L1 + lambda*(1-r.SSIM)
	case MSE:
		r.Loss = r.MSE
	case MSESSIM:
		r.SSIM = naiveSSIM(w, h, x, y)
		r.Loss = (1-lambda)*r.MSE + lambda*(1-r.SSIM)
	}
	return r
}

func TestParseKind(t *testing.T) {
	tests := []struct {
		in      string
		want    Kind
		wantErr bool
	}{
		{"l1-ssim", L1SSIM, false},
		{"mse", MSE, false},
		{"mse-ssim", MSESSIM, false},
		{"L1-SSIM", 0, true},
		{"l1", 0, true},
		{"", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseKind(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseKind(%q) = %v, want an error", tc.in, got)
			} else if !strings.Contains(err.Error(), "l1-ssim, mse, mse-ssim") || !strings.HasPrefix(err.Error(), "loss: ") {
				t.Errorf("ParseKind(%q) error %q should start with \"loss: \" and list the allowed names", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("Kind(%d).String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

func TestSSIMOfIdenticalImagesIsOne(t *testing.T) {
	tests := []struct {
		name string
		w, h int
		fill func(i int, r *rand.Rand) float64
	}{
		{"random", 31, 17, func(_ int, r *rand.Rand) float64 { return r.Float64() }},
		{"constant", 12, 12, func(int, *rand.Rand) float64 { return 0.25 }},
		{"zero", 5, 3, func(int, *rand.Rand) float64 { return 0 }},
		{"single pixel", 1, 1, func(int, *rand.Rand) float64 { return 0.9 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(seedA, 0))
			x := make([]float32, tc.w*tc.h*3)
			for i := range x {
				x[i] = float32(tc.fill(i, r))
			}
			e, err := NewEvaluator(tc.w, tc.h, 2)
			if err != nil {
				t.Fatal(err)
			}
			s, err := e.SSIM(x, x)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(s-1) > 1e-6 {
				t.Errorf("SSIM(x, x) = %.9f, want 1", s)
			}
		})
	}
}

func TestPSNR(t *testing.T) {
	fill := func(n int, v float32) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	tests := []struct {
		name        string
		img, target []float32
		want        float64
	}{
		{"mse 1e-2", fill(12, 0.5), fill(12, 0.6), 20},
		{"mse 1e-4", fill(12, 0.25), fill(12, 0.26), 40},
		{"mse 1 (black vs white)", fill(6, 0), fill(6, 1), 0},
		{"mse 1e-3 over half", []float32{0, 0, 0, 0}, []float32{0, 0, float32(math.Sqrt(2e-3)), float32(math.Sqrt(2e-3))}, 30},
		{"identical is capped", fill(9, 0.3), fill(9, 0.3), MaxPSNR},
	}
	for _, tc := range tests {
		got, err := PSNR(tc.img, tc.target)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if math.Abs(got-tc.want) > 1e-4 {
			t.Errorf("%s: PSNR = %.6f dB, want %.6f", tc.name, got, tc.want)
		}
	}
	if _, err := PSNR([]float32{1, 2}, []float32{1}); err == nil {
		t.Error("PSNR of images of different lengths: want an error")
	}
	if _, err := PSNR([]float64{}, []float64{}); err == nil {
		t.Error("PSNR of empty images: want an error")
	}
}

// TestLossAgainstNaive checks the separable, row-parallel evaluator against
// the direct 2D reference, in float64 (same maths up to rounding) and in
// float32 (the engine's precision).
func TestLossAgainstNaive(t *testing.T) {
	sizes := [][2]int{{13, 9}, {1, 1}, {3, 20}, {24, 17}}
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		x, y := randImages(w, h, seedB, false, 0)
		for _, kind := range []Kind{L1SSIM, MSE, MSESSIM} {
			want := naiveLoss(kind, DefaultLambda, w, h, x, y)

			e64, err := NewEvaluatorOf[float64](w, h, 3)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e64.Loss(kind, DefaultLambda, x, y, nil)
			if err != nil {
				t.Fatal(err)
			}
			compareResult(t, fmt.Sprintf("float64 %v %dx%d", kind, w, h), got, want, 1e-12)

			e32, err := NewEvaluator(w, h, 3)
			if err != nil {
				t.Fatal(err)
			}
			got, err = e32.Loss(kind, DefaultLambda, to32(x), to32(y), nil)
			if err != nil {
				t.Fatal(err)
			}
			compareResult(t, fmt.Sprintf("float32 %v %dx%d", kind, w, h), got, want, 2e-6)
		}
	}
}

func compareResult(t *testing.T, name string, got, want Result, tol float64) {
	t.Helper()
	pairs := []struct {
		field string
		g, w  float64
	}{{"Loss", got.Loss, want.Loss}, {"L1", got.L1, want.L1}, {"MSE", got.MSE, want.MSE}, {"SSIM", got.SSIM, want.SSIM}}
	for _, p := range pairs {
		if math.IsNaN(p.w) {
			if !math.IsNaN(p.g) {
				t.Errorf("%s: %s = %v, want NaN (not computed)", name, p.field, p.g)
			}
			continue
		}
		if math.Abs(p.g-p.w) > tol {
			t.Errorf("%s: %s = %.12g, want %.12g (diff %.3g > %.3g)", name, p.field, p.g, p.w, math.Abs(p.g-p.w), tol)
		}
	}
}

// gradCheck compares an analytic image gradient of the float64 loss with
// central finite differences of the same loss, entry by entry. The relative
// error of an entry is |a−n| / max(|a|, |n|, floor) where floor is 1e-3 of
// the largest numeric entry, so that entries that are tiny compared with the
// rest (and do not matter to training) are held to an absolute bound
// instead. It returns the largest relative error, and an error naming the
// worst entry when that exceeds tol.
func gradCheck(w, h int, kind Kind, lambda float64, img, target, analytic []float64, tol float64) (float64, error) {
	e, err := NewEvaluatorOf[float64](w, h, 2)
	if err != nil {
		return 0, err
	}
	const step = 1e-6
	x := append([]float64(nil), img...)
	num := make([]float64, len(x))
	var maxNum float64
	for i := range x {
		orig := x[i]
		x[i] = orig + step
		rp, err := e.Loss(kind, lambda, x, target, nil)
		if err != nil {
			return 0, err
		}
		x[i] = orig - step
		rm, err := e.Loss(kind, lambda, x, target, nil)
		if err != nil {
			return 0, err
		}
		x[i] = orig
		num[i] = (rp.Loss - rm.Loss) / (2 * step)
		maxNum = max(maxNum, math.Abs(num[i]))
	}
	floor := 1e-3 * maxNum
	worst, worstAt := 0.0, -1
	for i := range num {
		rel := math.Abs(analytic[i]-num[i]) / max(math.Abs(analytic[i]), math.Abs(num[i]), floor)
		if rel > worst || math.IsNaN(rel) {
			worst, worstAt = rel, i
		}
	}
	if worst > tol || math.IsNaN(worst) {
		p := worstAt / 3
		return worst, fmt.Errorf("gradient of %v (λ=%g) at pixel (%d,%d) channel %d: analytic %.9g, numeric %.9g, relative error %.3g > %.3g",
			kind, lambda, p%w, p/w, worstAt%3, analytic[worstAt], num[worstAt], worst, tol)
	}
	return worst, nil
}

type gradCase struct {
	name        string
	w, h        int
	seed        uint64
	lowContrast bool
}

var gradCases = []gradCase{
	{"13x9 seed A", 13, 9, seedA, false},
	{"13x9 seed B", 13, 9, seedB, false},
	{"13x9 seed C low contrast", 13, 9, seedC, true},
	{"17x14 seed B low contrast", 17, 14, seedB, true},
	{"4x2 seed C", 4, 2, seedC, false},
}

const gradTol = 1e-3

func TestGradientFiniteDifferences(t *testing.T) {
	worstAll := 0.0
	for _, gc := range gradCases {
		img, target := randImages(gc.w, gc.h, gc.seed, gc.lowContrast, 1e-3)
		for _, kind := range []Kind{L1SSIM, MSE, MSESSIM} {
			for _, lambda := range []float64{DefaultLambda, 0, 1} {
				if kind == MSE && lambda != DefaultLambda {
					continue // λ is ignored
				}
				e, err := NewEvaluatorOf[float64](gc.w, gc.h, 2)
				if err != nil {
					t.Fatal(err)
				}
				grad := make([]float64, len(img))
				if _, err := e.Loss(kind, lambda, img, target, grad); err != nil {
					t.Fatal(err)
				}
				worst, err := gradCheck(gc.w, gc.h, kind, lambda, img, target, grad, gradTol)
				if err != nil {
					t.Errorf("%s: %v", gc.name, err)
				}
				worstAll = max(worstAll, worst)
			}
		}
	}
	t.Logf("largest relative gradient error over all cases: %.3g (tolerance %g)", worstAll, gradTol)
}

// TestGradCheckCatchesBrokenGradients shows that gradCheck can fail: the
// gradient is split into its pixel-wise part (λ = 0) and its SSIM part
// (λ = 1), which are then recombined wrongly.
func TestGradCheckCatchesBrokenGradients(t *testing.T) {
	const w, h = 13, 9
	img, target := randImages(w, h, seedA, false, 1e-3)
	parts := func(kind Kind) (point, ssim []float64) {
		e, err := NewEvaluatorOf[float64](w, h, 1)
		if err != nil {
			t.Fatal(err)
		}
		point, ssim = make([]float64, len(img)), make([]float64, len(img))
		if _, err := e.Loss(kind, 0, img, target, point); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Loss(kind, 1, img, target, ssim); err != nil {
			t.Fatal(err)
		}
		return point, ssim
	}
	const lam = DefaultLambda
	tests := []struct {
		name string
		kind Kind
		grad func(point, ssim []float64, i int) float64
	}{
		{"correct recombination passes", L1SSIM, func(p, s []float64, i int) float64 { return (1-lam)*p[i] + lam*s[i] }},
		{"SSIM term ×2", L1SSIM, func(p, s []float64, i int) float64 { return (1-lam)*p[i] + 2*lam*s[i] }},
		{"SSIM term ×2 (mse-ssim)", MSESSIM, func(p, s []float64, i int) float64 { return (1-lam)*p[i] + 2*lam*s[i] }},
		{"SSIM term dropped", L1SSIM, func(p, s []float64, i int) float64 { return (1 - lam) * p[i] }},
		{"SSIM term sign flipped", L1SSIM, func(p, s []float64, i int) float64 { return (1-lam)*p[i] - lam*s[i] }},
		{"SSIM term one pixel off", L1SSIM, func(p, s []float64, i int) float64 {
			return (1-lam)*p[i] + lam*s[(i+3)%len(s)]
		}},
	}
	for _, tc := range tests {
		p, s := parts(tc.kind)
		g := make([]float64, len(p))
		for i := range g {
			g[i] = tc.grad(p, s, i)
		}
		worst, err := gradCheck(w, h, tc.kind, lam, img, target, g, gradTol)
		wantPass := strings.HasPrefix(tc.name, "correct")
		switch {
		case wantPass && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case !wantPass && err == nil:
			t.Errorf("%s: the check passed a broken gradient (largest relative error %.3g)", tc.name, worst)
		case !wantPass:
			t.Logf("%s: caught, largest relative error %.3g", tc.name, worst)
		}
	}
}

// TestResultsIndependentOfWorkers requires bit-identical results and
// gradients for any number of workers.
func TestResultsIndependentOfWorkers(t *testing.T) {
	const w, h = 37, 23
	x64, y64 := randImages(w, h, seedC, false, 0)
	x, y := to32(x64), to32(y64)
	for _, kind := range []Kind{L1SSIM, MSE, MSESSIM} {
		var ref Result
		var refGrad []float32
		for _, workers := range []int{1, 2, 3, 4, 7, 64} {
			e, err := NewEvaluator(w, h, workers)
			if err != nil {
				t.Fatal(err)
			}
			grad := make([]float32, len(x))
			r, err := e.Loss(kind, DefaultLambda, x, y, grad)
			if err != nil {
				t.Fatal(err)
			}
			if refGrad == nil {
				ref, refGrad = r, grad
				continue
			}
			if !sameResult(r, ref) {
				t.Errorf("%v with %d workers: %+v, with 1 worker %+v", kind, workers, r, ref)
			}
			for i := range grad {
				if math.Float32bits(grad[i]) != math.Float32bits(refGrad[i]) {
					t.Errorf("%v with %d workers: grad[%d] = %g, with 1 worker %g", kind, workers, i, grad[i], refGrad[i])
					break
				}
			}
		}
	}
}

func sameResult(a, b Result) bool {
	eq := func(u, v float64) bool { return math.Float64bits(u) == math.Float64bits(v) }
	return eq(a.Loss, b.Loss) && eq(a.L1, b.L1) && eq(a.MSE, b.MSE) && eq(a.SSIM, b.SSIM)
}

// TestEvaluatorReuse checks that a second call (and a Resize) gives the
// same result as a fresh evaluator: no state leaks between calls.
func TestEvaluatorReuse(t *testing.T) {
	xa, ya := randImages(20, 10, seedA, false, 0)
	xb, yb := randImages(7, 11, seedB, true, 0)
	e, err := NewEvaluatorOf[float64](20, 10, 2)
	if err != nil {
		t.Fatal(err)
	}
	ga := make([]float64, len(xa))
	first, _ := e.Loss(L1SSIM, DefaultLambda, xa, ya, ga)
	if err := e.Resize(7, 11); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Loss(MSESSIM, 0.5, xb, yb, make([]float64, len(xb))); err != nil {
		t.Fatal(err)
	}
	if err := e.Resize(20, 10); err != nil {
		t.Fatal(err)
	}
	ga2 := make([]float64, len(xa))
	again, _ := e.Loss(L1SSIM, DefaultLambda, xa, ya, ga2)
	if !sameResult(first, again) {
		t.Errorf("after reuse: %+v, first call %+v", again, first)
	}
	for i := range ga {
		if ga[i] != ga2[i] {
			t.Fatalf("after reuse: grad[%d] = %g, first call %g", i, ga2[i], ga[i])
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := NewEvaluator(0, 5, 1); err == nil {
		t.Error("NewEvaluator(0, 5): want an error")
	}
	if _, err := NewEvaluator(4, -1, 1); err == nil {
		t.Error("NewEvaluator(4, -1): want an error")
	}
	if _, err := NewEvaluator(1<<20, 1<<20, 1); err == nil {
		t.Error("NewEvaluator(2^20, 2^20): want an error")
	}
	e, err := NewEvaluator(4, 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	ok := make([]float32, 36)
	tests := []struct {
		name              string
		kind              Kind
		lambda            float32
		img, target, grad []float32
		wantIn            string
	}{
		{"short image", L1SSIM, 0.2, ok[:35], ok, nil, "image has 35 values, want 36"},
		{"long target", L1SSIM, 0.2, ok, make([]float32, 37), nil, "target has 37 values"},
		{"short grad", MSE, 0.2, ok, ok, make([]float32, 3), "gradient buffer has 3 values"},
		{"bad kind", Kind(9), 0.2, ok, ok, nil, "invalid loss kind Kind(9)"},
		{"lambda > 1", L1SSIM, 1.5, ok, ok, nil, "lambda = 1.5"},
		{"lambda NaN", MSESSIM, float32(math.NaN()), ok, ok, nil, "lambda = NaN"},
	}
	for _, tc := range tests {
		_, err := e.Loss(tc.kind, tc.lambda, tc.img, tc.target, tc.grad)
		if err == nil || !strings.Contains(err.Error(), tc.wantIn) || !strings.HasPrefix(err.Error(), "loss: ") {
			t.Errorf("%s: error %v, want one starting with \"loss: \" containing %q", tc.name, err, tc.wantIn)
		}
	}
	if _, err := e.SSIM(ok, ok[:3]); err == nil {
		t.Error("SSIM with a short target: want an error")
	}
}

// TestNoAllocations checks that a call with one worker allocates nothing:
// every buffer belongs to the evaluator.
func TestNoAllocations(t *testing.T) {
	x64, y64 := randImages(16, 12, seedA, false, 0)
	x, y := to32(x64), to32(y64)
	grad := make([]float32, len(x))
	e, err := NewEvaluator(16, 12, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []Kind{L1SSIM, MSE, MSESSIM} {
		allocs := testing.AllocsPerRun(5, func() {
			if _, err := e.Loss(kind, DefaultLambda, x, y, grad); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per call, want 0", kind, allocs)
		}
	}
}

// FuzzLoss feeds arbitrary sizes and values (NaN, Inf, out of range): the
// evaluator must never panic, and for images in [0,1] it must give finite
// results, SSIM in [−1, 1] and a finite gradient.
func FuzzLoss(f *testing.F) {
	f.Add(uint8(3), uint8(2), uint8(0), float32(0.2), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(uint8(1), uint8(1), uint8(2), float32(1), []byte{255, 0, 255, 0, 127, 128})
	f.Add(uint8(12), uint8(13), uint8(1), float32(0), []byte{})
	f.Add(uint8(0), uint8(4), uint8(7), float32(-1), []byte{1})
	f.Fuzz(func(t *testing.T, w8, h8, kind8 uint8, lambda float32, data []byte) {
		w, h := int(w8%40), int(h8%40)
		e, err := NewEvaluator(w, h, 3)
		if w == 0 || h == 0 {
			if err == nil {
				t.Fatalf("NewEvaluator(%d, %d) accepted an empty image", w, h)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		n := w * h * 3
		img, target := make([]float32, n), make([]float32, n)
		inRange := true
		for i := range n {
			var a, b byte
			if len(data) > 0 {
				a, b = data[(2*i)%len(data)], data[(2*i+1)%len(data)]
			}
			img[i], target[i] = float32(a)/255, float32(b)/255
			if len(data) > 0 && data[0] == 0xff && i == n/2 {
				img[i] = float32(math.NaN()) // poison one value
				inRange = false
			}
		}
		grad := make([]float32, n)
		kind := Kind(kind8 % 4)
		r, err := e.Loss(kind, lambda, img, target, grad)
		valid := kind.valid() && lambda >= 0 && lambda <= 1
		if (err == nil) != valid {
			t.Fatalf("Loss(kind=%v, λ=%v): err = %v", kind, lambda, err)
		}
		if err != nil || !inRange {
			return
		}
		for _, v := range []float64{r.Loss, r.L1, r.MSE} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("non-finite result %+v", r)
			}
		}
		if kind.UsesSSIM() && !(r.SSIM >= -1-1e-5 && r.SSIM <= 1+1e-5) {
			t.Fatalf("SSIM %v outside [-1, 1]", r.SSIM)
		}
		for i, g := range grad {
			if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
				t.Fatalf("grad[%d] = %v", i, g)
			}
		}
	})
}

func BenchmarkLossL1SSIM(b *testing.B) {
	for _, sz := range [][2]int{{200, 200}, {800, 532}} {
		w, h := sz[0], sz[1]
		b.Run(fmt.Sprintf("%dx%d", w, h), func(b *testing.B) {
			x64, y64 := randImages(w, h, seedA, true, 0)
			x, y := to32(x64), to32(y64)
			grad := make([]float32, len(x))
			e, err := NewEvaluator(w, h, 0)
			if err != nil {
				b.Fatal(err)
			}
			// Validate before timing: a benchmark of wrong output is worthless.
			r, err := e.Loss(L1SSIM, DefaultLambda, x, y, grad)
			if err != nil {
				b.Fatal(err)
			}
			if math.IsNaN(r.Loss) || r.SSIM <= 0 || r.SSIM > 1 {
				b.Fatalf("implausible result %+v", r)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := e.Loss(L1SSIM, DefaultLambda, x, y, grad); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(w*h)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpx/s")
		})
	}
}

func TestClamp01(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name    string
		in, out []float32
	}{
		{"inside stays", []float32{0, 0.25, 1}, []float32{0, 0.25, 1}},
		{"over white", []float32{1.5, 1.0000001}, []float32{1, 1}},
		{"under black", []float32{-0.2, -1e-30}, []float32{0, 0}},
	}
	for _, tc := range tests {
		src := append([]float32(nil), tc.in...)
		got := Clamp01(nil, src)
		for i := range got {
			if got[i] != tc.out[i] {
				t.Errorf("%s: [%d] = %v, want %v", tc.name, i, got[i], tc.out[i])
			}
		}
		for i := range src {
			if src[i] != tc.in[i] {
				t.Errorf("%s: the source was changed", tc.name)
			}
		}
	}
	if got := Clamp01(nil, []float32{nan}); !math.IsNaN(float64(got[0])) {
		t.Errorf("NaN clamped to %v; it must stay NaN so that PSNR reports it", got[0])
	}
	// Scoring the clamped render: a render past white against a white target is perfect.
	p, err := PSNR(Clamp01(nil, []float32{1.3, 1.1}), []float32{1, 1})
	if err != nil || p != MaxPSNR {
		t.Errorf("PSNR of a clamped over-white render = %v, %v; want %v", p, err, MaxPSNR)
	}
}

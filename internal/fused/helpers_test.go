package fused

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Seeds of the random scenes; each check draws its own stream from them.
const (
	seedScene  = 7
	seedTarget = 11
	seedEdit   = 13
)

// envEmu runs the GPU tests on the host emulator when no CUDA device is present.
const envEmu = "RLXSPLAT_FUSED_EMU"

// envPTXDir points the no-NVRTC fallback (RLXSPLAT_NO_NVRTC=1) at a directory of prebuilt PTX
// instead of the embedded shaders/ptx, so that freshly generated PTX can be checked before it
// is embedded.
const envPTXDir = "RLXSPLAT_FUSED_PTX_DIR"

// testDevice opens the CUDA device, or the host emulator when RLXSPLAT_FUSED_EMU=1 and there is
// no GPU; otherwise the test is skipped with the reason.
func testDevice(t testing.TB) (gpu.Device, bool) {
	t.Helper()
	o, err := gpu.OptionsFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv(envPTXDir); dir != "" {
		o.PTX = os.DirFS(dir)
	}
	d, err := gpu.OpenWith(gpu.KindCUDA, o)
	if err == nil {
		in := d.Info()
		t.Logf("device: %s %s (%s), compiler: %s", in.Backend, in.Name, in.Arch, in.Compiler)
		t.Cleanup(func() { d.Close() })
		return d, false
	}
	if !errors.Is(err, gpu.ErrNoDevice) {
		t.Fatalf("opening the CUDA device: %v", err)
	}
	if os.Getenv(envEmu) != "1" {
		t.Skip("no CUDA device: " + err.Error())
	}
	ed, eerr := newEmuDevice(emuCacheDir())
	if eerr != nil {
		t.Skip("no CUDA device (" + err.Error() + ") and no emulator: " + eerr.Error())
	}
	t.Cleanup(func() { ed.Close() })
	return ed, true
}

// lookAt returns a pinhole camera at eye looking at the origin, y down (COLMAP axes).
func lookAt(eye [3]float64, w, h int) camera.Camera {
	f := norm3([3]float64{-eye[0], -eye[1], -eye[2]})
	r := norm3(cross3([3]float64{0, 1, 0}, f))
	d := cross3(f, r)
	R := [3][3]float64{r, d, f}
	var t [3]float64
	for i := 0; i < 3; i++ {
		t[i] = -(R[i][0]*eye[0] + R[i][1]*eye[1] + R[i][2]*eye[2])
	}
	return camera.Camera{Width: w, Height: h, Fx: 0.9 * float64(w), Fy: 0.95 * float64(w),
		Cx: 0.52 * float64(w), Cy: 0.47 * float64(h), R: R, T: t}
}

func cross3(a, b [3]float64) [3]float64 {
	return [3]float64{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}

func norm3(a [3]float64) [3]float64 {
	n := math.Sqrt(a[0]*a[0] + a[1]*a[1] + a[2]*a[2])
	return [3]float64{a[0] / n, a[1] / n, a[2] / n}
}

// randomScene makes n splats in a ball of radius about 1 around the origin with scales around
// scale, random rotations, opacities and SH of every degree; a few are behind the camera, huge,
// or nearly transparent, so that the culling paths run too.
func randomScene(rng *rand.Rand, n int, scale float64) *splat.Gaussians {
	g := splat.New(n)
	for i := 0; i < n; i++ {
		for a := 0; a < 3; a++ {
			g.Means[i*3+a] = float32(rng.NormFloat64() * 0.6)
			g.LogScales[i*3+a] = float32(math.Log(scale * (0.3 + 1.4*rng.Float64())))
		}
		for k := 0; k < 4; k++ {
			g.Quats[i*4+k] = float32(rng.NormFloat64())
		}
		g.OpacityLogits[i] = float32(rng.NormFloat64() * 1.5)
		for k := 0; k < splat.SHCoeffs*3; k++ {
			s := 0.6
			if k >= 3 {
				s = 0.15
			}
			g.SH[i*splat.SHCoeffs*3+k] = float32(rng.NormFloat64() * s)
		}
		switch rng.IntN(40) {
		case 0: // far behind the camera or at it
			g.Means[i*3+2] = -6
		case 1: // large
			for a := 0; a < 3; a++ {
				g.LogScales[i*3+a] += 2
			}
		case 2: // nearly transparent
			g.OpacityLogits[i] = -7
		}
	}
	return g
}

// randomImage is a smooth random image in [0,1] (so that SSIM sees structure).
func randomImage(rng *rand.Rand, w, h int) []float32 {
	img := make([]float32, w*h*3)
	var fx, fy, ph [3]float64
	for c := 0; c < 3; c++ {
		fx[c], fy[c], ph[c] = 0.05+0.2*rng.Float64(), 0.05+0.2*rng.Float64(), 6*rng.Float64()
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			for c := 0; c < 3; c++ {
				v := 0.5 + 0.35*math.Sin(fx[c]*float64(x)+fy[c]*float64(y)+ph[c]) + 0.1*rng.NormFloat64()
				img[(y*w+x)*3+c] = float32(min(max(v, 0), 1))
			}
		}
	}
	return img
}

// relL2 is ‖a − b‖ / ‖b‖ in float64 (‖a − b‖ when b is zero); NaN anywhere gives +Inf.
func relL2(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		x, y := float64(a[i]), float64(b[i])
		if math.IsNaN(x) || math.IsNaN(y) {
			return math.Inf(1)
		}
		d += (x - y) * (x - y)
		n += y * y
	}
	if n == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / n)
}

// cosine of the angle between a and b (1 for two zero vectors).
func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range b {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	if aa == 0 && bb == 0 {
		return 1
	}
	return ab / math.Sqrt(aa*bb)
}

// sharedDir returns ../shared/<rel> beside the module root, or skips the test.
func sharedDir(t testing.TB, rel string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("no go.mod above the test directory")
		}
		dir = parent
	}
	p := filepath.Join(dir, "..", "shared", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data %s not available: %v", p, err)
	}
	return p
}

// poison fills every buffer a step writes (not the parameters, moments or statistics) with
// 0xFF bytes: NaN for floats, 2³²−1 for words, so that anything a stage fails to write shows.
func (e *Engine) poison(t testing.TB) {
	t.Helper()
	for _, b := range []gpu.Buffer{e.grads, e.valid, e.depth, e.opacity, e.color, e.mean2d, e.conic, e.rayU, e.rayA,
		e.boundCenter, e.boundQ, e.rect, e.radius, e.pg, e.grad2d, e.counts, e.keys, e.ids, e.keysTmp, e.idsTmp,
		e.hist, e.tileOffsets, e.image, e.finalT, e.count, e.dImage, e.rays, e.hq, e.dmap, e.hd,
		e.partAbs, e.partSq, e.partSSIM} {
		if b == nil {
			continue
		}
		if err := e.dev.Memset(b, 0, b.Size(), 0xFF); err != nil {
			t.Fatal(err)
		}
	}
	e.raysFor = nil
}

func dl[T gpu.Elem](t testing.TB, e *Engine, b gpu.Buffer, n int) []T {
	t.Helper()
	out := make([]T, n)
	if n == 0 {
		return out
	}
	if err := gpu.DownloadSlice(e.dev, out, b, 0); err != nil {
		t.Fatal(err)
	}
	return out
}

// dlAt downloads n floats at float offset off.
func dlAt(t testing.TB, e *Engine, b gpu.Buffer, off, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	if err := gpu.DownloadSlice(e.dev, out, b, off); err != nil {
		t.Fatal(err)
	}
	return out
}

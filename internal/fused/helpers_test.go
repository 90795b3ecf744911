package fused

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/emu"
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
	ed, eerr := emu.New(emu.Config{CacheDir: emuCacheDir()})
	if eerr != nil {
		t.Skip("no CUDA device (" + err.Error() + ") and no emulator: " + eerr.Error())
	}
	t.Cleanup(func() { ed.Close() })
	return ed, true
}

// newEmu opens the host emulator with cfg (the shared test cache), or skips without a C++
// compiler.
func newEmu(t testing.TB, cfg emu.Config) *emu.Device {
	t.Helper()
	cfg.CacheDir = emuCacheDir()
	d, err := emu.New(cfg)
	if err != nil {
		t.Skip("no host emulator: " + err.Error())
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// emuCacheDir is a per-user directory for the compiled units, keyed by source hash, so that
// repeated test runs do not recompile.
func emuCacheDir() string {
	h := sha256.Sum256([]byte(os.Getenv("USER")))
	return filepath.Join(os.TempDir(), "rlxsplat-emu-"+hex.EncodeToString(h[:4]))
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

// poison is Engine.poison for tests.
func poison(t testing.TB, e *Engine) {
	t.Helper()
	if err := e.poison(); err != nil {
		t.Fatal(err)
	}
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

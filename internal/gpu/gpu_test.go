package gpu

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// hostDevice is an in-memory Device for testing the typed helpers without a GPU.
type hostDevice struct {
	driver.Device // unimplemented verbs panic if a test reaches them
}

type hostBuffer struct{ mem []byte }

func (b *hostBuffer) Size() int { return len(b.mem) }

func (hostDevice) Alloc(n int) (Buffer, error) { return &hostBuffer{mem: make([]byte, n)}, nil }
func (hostDevice) Upload(dst Buffer, off int, src []byte) error {
	b := dst.(*hostBuffer)
	if off < 0 || off+len(src) > len(b.mem) {
		return errors.New("out of range")
	}
	copy(b.mem[off:], src)
	return nil
}
func (hostDevice) Download(dst []byte, src Buffer, off int) error {
	b := src.(*hostBuffer)
	if off < 0 || off+len(dst) > len(b.mem) {
		return errors.New("out of range")
	}
	copy(dst, b.mem[off:])
	return nil
}
func (hostDevice) Memset(dst Buffer, off, n int, v byte) error {
	b := dst.(*hostBuffer)
	for i := off; i < off+n; i++ {
		b.mem[i] = v
	}
	return nil
}

func TestTypedTransfers(t *testing.T) {
	var d hostDevice
	buf, err := AllocSlice[float32](d, 8)
	if err != nil || buf.Size() != 32 {
		t.Fatalf("AllocSlice: %v, size %d", err, buf.Size())
	}
	in := []float32{1.5, -2, float32(math.Inf(1)), 3.25}
	if err := UploadSlice(d, buf, 4, in); err != nil {
		t.Fatal(err)
	}
	// Bytes 16..31 hold the values, little-endian.
	raw := buf.(*hostBuffer).mem
	if math.Float32frombits(uint32(raw[16])|uint32(raw[17])<<8|uint32(raw[18])<<16|uint32(raw[19])<<24) != 1.5 {
		t.Fatalf("element offset not honoured: %v", raw)
	}
	out := make([]float32, 4)
	if err := DownloadSlice(d, out, buf, 4); err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if out[i] != in[i] {
			t.Fatalf("round trip %v -> %v", in, out)
		}
	}
	if err := UploadSlice(d, buf, 6, in); err == nil {
		t.Fatal("upload past the end accepted")
	}
	if err := UploadSlice(d, buf, -1, in); err == nil || !strings.Contains(err.Error(), "negative element offset") {
		t.Fatalf("negative offset: %v", err)
	}
	if _, err := AllocSlice[uint16](d, -1); err == nil {
		t.Fatal("negative count accepted")
	}
	u := []uint32{7, 0xffffffff}
	if err := UploadU32(d, buf, u); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, 2)
	if err := DownloadU32(d, got, buf); err != nil || got[0] != 7 || got[1] != 0xffffffff {
		t.Fatalf("u32 round trip %v %v", got, err)
	}
	if err := Zero(d, buf); err != nil {
		t.Fatal(err)
	}
	f := make([]float32, 8)
	if err := DownloadF32(d, f, buf); err != nil {
		t.Fatal(err)
	}
	for _, v := range f {
		if v != 0 {
			t.Fatalf("Zero left %v", f)
		}
	}
	if err := UploadF32(d, buf, nil); err != nil {
		t.Fatalf("empty upload: %v", err)
	}
}

func TestShaderSources(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "selftest.cu"), []byte("// changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, env, wantDir string
		wantChanged        bool
	}{
		{"unset: embedded", "", "", false},
		{"blank: embedded", "  ", "", false},
		{"directory", dir, dir, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys, got := ShaderSources(func(k string) string {
				if k == EnvShaderDir {
					return tt.env
				}
				return ""
			})
			if got != tt.wantDir {
				t.Fatalf("dir = %q, want %q", got, tt.wantDir)
			}
			b, err := fs.ReadFile(fsys, "selftest.cu")
			if err != nil {
				t.Fatal(err)
			}
			if changed := string(b) == "// changed\n"; changed != tt.wantChanged {
				t.Fatalf("read the directory's selftest.cu: %v, want %v", changed, tt.wantChanged)
			}
		})
	}
}

func TestOptionsFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    Options
		wantErr string
	}{
		{"empty", nil, Options{}, ""},
		{"all set", map[string]string{EnvNoNVRTC: "1", EnvDebug: "TRUE", EnvKernelCache: "/tmp/k"},
			Options{NoCompiler: true, Debug: true, CacheDir: "/tmp/k"}, ""},
		{"off words", map[string]string{EnvNoNVRTC: "no", EnvDebug: " off "}, Options{}, ""},
		{"bad bool", map[string]string{EnvDebug: "maybe"}, Options{}, "RLXSPLAT_GPU_DEBUG=\"maybe\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OptionsFromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != (Options{NoCompiler: tc.want.NoCompiler, Debug: tc.want.Debug, CacheDir: tc.want.CacheDir}) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOpenUnknownKind(t *testing.T) {
	_, err := OpenWith("vulkan", Options{})
	if err == nil || !strings.Contains(err.Error(), `"vulkan"`) || !strings.Contains(err.Error(), "auto") {
		t.Fatalf("err = %v", err)
	}
	if IsUnavailable(err) {
		t.Fatal("an unknown kind is a configuration error, not a missing GPU")
	}
}

// TestOpenAuto: on a machine without a GPU (CI) Open must fail with ErrNoDevice, which drives
// the CPU fallback; on a GPU machine it must open and run the self-test kernel.
func TestOpenAuto(t *testing.T) {
	d, err := OpenWith(KindAuto, Options{CacheDir: t.TempDir()})
	if err != nil {
		if !IsUnavailable(err) {
			t.Fatalf("Open(auto) failed with an error that is not ErrNoDevice: %v", err)
		}
		if !strings.Contains(err.Error(), "cuda") || !strings.Contains(err.Error(), "metal") {
			t.Errorf("auto error should give each backend's reason: %v", err)
		}
		t.Skip("no GPU (checked that the error is ErrNoDevice): " + err.Error())
	}
	defer d.Close()
	runSelfTest(t, d)
}

// TestOpenNoCompilerUsesEmbeddedPTX runs the self-test kernels from the PTX embedded from
// shaders/ptx, as on a machine with a driver but no CUDA toolkit.
func TestOpenNoCompilerUsesEmbeddedPTX(t *testing.T) {
	d, err := OpenWith(KindCUDA, Options{NoCompiler: true, CacheDir: driver.CacheOff})
	if err != nil {
		t.Skip("no CUDA device: " + err.Error())
	}
	defer d.Close()
	m := runSelfTest(t, d)
	if m.Info().Origin != driver.OriginEmbedded {
		t.Fatalf("module origin %q, want the embedded PTX", m.Info().Origin)
	}
}

func runSelfTest(t *testing.T, d Device) Module {
	t.Helper()
	m, err := CompileShader(d, "selftest.cu")
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Kernel("saxpy")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i+1)
	}
	bx, _ := AllocSlice[float32](d, n)
	by, _ := AllocSlice[float32](d, n)
	defer d.Free(bx)
	defer d.Free(by)
	if err := UploadF32(d, bx, x); err != nil {
		t.Fatal(err)
	}
	if err := UploadF32(d, by, y); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(k, BlocksFor(n, 128), Dim3{128}, 0, U32(n), F32(3), Ptr(bx), Ptr(by), Ptr(by)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := DownloadF32(d, got, by); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if want := 3*x[i] + y[i]; got[i] != want {
			t.Fatalf("saxpy[%d] = %v, want %v (%s)", i, got[i], want, d.Info().Name)
		}
	}
	return m
}

// TestOpenReadsEnvironment: RLXSPLAT_NO_NVRTC=1 through Open switches NVRTC off.
func TestOpenReadsEnvironment(t *testing.T) {
	t.Setenv(EnvNoNVRTC, "1")
	t.Setenv(EnvKernelCache, t.TempDir())
	d, err := Open(KindCUDA)
	if err != nil {
		if !IsUnavailable(err) {
			t.Fatal(err)
		}
		t.Skip("no CUDA device: " + err.Error())
	}
	defer d.Close()
	if !strings.Contains(d.Info().Compiler, "none") {
		t.Fatalf("compiler %q with %s=1", d.Info().Compiler, EnvNoNVRTC)
	}
	if m := runSelfTest(t, d); m.Info().Origin != driver.OriginEmbedded {
		t.Fatalf("origin %q", m.Info().Origin)
	}
}

func TestAutoOrder(t *testing.T) {
	tests := []struct {
		goos string
		want string
	}{
		{"darwin", "metal,cuda"},
		{"linux", "cuda,metal"},
		{"windows", "cuda,metal"},
	}
	for _, tc := range tests {
		if got := strings.Join(AutoOrder(tc.goos), ","); got != tc.want {
			t.Errorf("AutoOrder(%s) = %s, want %s", tc.goos, got, tc.want)
		}
	}
}

func TestPreludePerBackend(t *testing.T) {
	tests := []struct {
		backend, want string
		ok            bool
	}{
		{KindCUDA, "prelude_cuda.h", true},
		{KindEmu, "prelude_emu.h", true},
		{KindMetal, "prelude_metal.h", true},
		{"other", "", false},
	}
	for _, tc := range tests {
		got, err := Prelude(tc.backend)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("Prelude(%q) = %q, %v", tc.backend, got, err)
		}
	}
	// Every prelude but Metal's (written with the Metal sources) is embedded.
	for _, b := range []string{KindCUDA, KindEmu} {
		p, _ := Prelude(b)
		if _, err := fs.Stat(shaders.Sources(), p); err != nil {
			t.Errorf("%s prelude %s not embedded: %v", b, p, err)
		}
	}
}

func TestOpenEmu(t *testing.T) {
	d, err := OpenWith(KindEmu, Options{CacheDir: t.TempDir()})
	if errors.Is(err, ErrNoDevice) {
		t.Skip("no host emulator: " + err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if b := d.Info().Backend; b != KindEmu {
		t.Fatalf("backend %q", b)
	}
	// A unit including the backend-neutral prelude compiles against the emulator's.
	emuPrelude, err := fs.ReadFile(shaders.Sources(), "prelude_emu.h")
	if err != nil {
		t.Fatal(err)
	}
	emuRuntime, err := fs.ReadFile(shaders.Sources(), "emu_runtime.h")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"prelude_emu.h": {Data: emuPrelude},
		"emu_runtime.h": {Data: emuRuntime},
		"k.cu": {Data: []byte(`#include "prelude.h"
KERNEL fill(u32* dst, u32 n, u32 v) { u32 i = BID * BDIM + TID; if (i < n) dst[i] = v; }
`)},
	}
	m, err := CompileFile(d, fsys, "k.cu")
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Kernel("fill")
	if err != nil {
		t.Fatal(err)
	}
	buf, _ := AllocSlice[uint32](d, 5)
	if err := d.Launch(k, BlocksFor(5, 4), Dim3{4}, 0, Ptr(buf), U32(5), U32(7)); err != nil {
		t.Fatal(err)
	}
	out := make([]uint32, 5)
	if err := DownloadU32(d, out, buf); err != nil || [5]uint32(out) != [5]uint32{7, 7, 7, 7, 7} {
		t.Fatalf("fill: %v %v", out, err)
	}
}

func TestUnknownKind(t *testing.T) {
	if _, err := OpenWith("vulkan", Options{}); err == nil || !strings.Contains(err.Error(), `"emu"`) {
		t.Fatalf("unknown kind: %v", err)
	}
}

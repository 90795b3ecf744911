//go:build linux || darwin

package emu

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// open returns an emulator with a temporary kernel directory, or skips without a C++ compiler.
func open(t *testing.T, c Config) *Device {
	t.Helper()
	c.CacheDir = t.TempDir()
	d, err := New(c)
	if err != nil {
		if errors.Is(err, driver.ErrNoDevice) {
			t.Skip("no host emulator: " + err.Error())
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// A unit in the backend-neutral form: it includes prelude.h and defines its entry point with
// the prelude's KERNEL macro, as the emulator's wrapper expects of hand-written kernels.
const testUnit = `#include "prelude.h"
KERNEL scale_add(u32 n, float a, const float* x, float* y)
{
    u32 i = BID * BDIM + TID;
    if (i >= n) return;
    y[i] = a * x[i] + y[i];
}
`

func compileTest(t *testing.T, d *Device) driver.Kernel {
	t.Helper()
	src, err := driver.SourceFromFSFor(testFS(t), "t.cu", Prelude)
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Kernel("scale_add")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// overlay is the shaders directory with t.cu added.
type overlay struct {
	fs.FS
	extra map[string]string
}

func (o overlay) Open(name string) (fs.File, error) {
	if _, ok := o.extra[name]; ok {
		return nil, fs.ErrInvalid // ReadFile below serves these
	}
	return o.FS.Open(name)
}

func (o overlay) ReadFile(name string) ([]byte, error) {
	if s, ok := o.extra[name]; ok {
		return []byte(s), nil
	}
	return fs.ReadFile(o.FS, name)
}

func testFS(t *testing.T) fs.FS {
	t.Helper()
	return overlay{FS: shaders.Sources(), extra: map[string]string{"t.cu": testUnit}}
}

func f32bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func TestLaunchComputesOnHost(t *testing.T) {
	d := open(t, Config{})
	k := compileTest(t, d)
	const n = 100
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), float32(2*i+1)
	}
	bx, _ := d.Alloc(4 * n)
	by, _ := d.Alloc(4 * n)
	if err := d.Upload(bx, 0, f32bytes(x)); err != nil {
		t.Fatal(err)
	}
	if err := d.Upload(by, 0, f32bytes(y)); err != nil {
		t.Fatal(err)
	}
	// 4 blocks of 32 threads: the last block has threads past n.
	if err := d.Launch(k, driver.Dim3{4}, driver.Dim3{32}, 0, driver.U32(n), driver.F32(0.5), driver.Ptr(bx), driver.Ptr(by)); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	if err := d.Download(f32bytes(out), by, 0); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if want := 0.5*x[i] + y[i]; out[i] != want {
			t.Fatalf("y[%d] = %v, want %v", i, out[i], want)
		}
	}
}

func TestCompileKeepsMappedPreludeAndCaches(t *testing.T) {
	d := open(t, Config{})
	src, err := driver.SourceFromFSFor(testFS(t), "t.cu", Prelude)
	if err != nil {
		t.Fatal(err)
	}
	emuText, _ := fs.ReadFile(shaders.Sources(), Prelude)
	if src.Headers[driver.PreludeInclude] != string(emuText) {
		t.Fatalf("prelude.h was not mapped to %s", Prelude)
	}
	cudaSrc, err := driver.SourceFromFSFor(testFS(t), "t.cu", "prelude_cuda.h")
	if err != nil {
		t.Fatal(err)
	}
	if cudaSrc.Hash() == src.Hash() {
		t.Fatal("the source hash does not cover the mapped prelude")
	}
	m1, err := d.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if o := m1.Info().Origin; o != driver.OriginCompiled {
		t.Fatalf("first compile: origin %s", o)
	}
	// A second device on the same directory finds the built unit.
	d2, err := New(Config{CacheDir: d.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	m2, err := d2.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if o := m2.Info().Origin; o != driver.OriginCache {
		t.Fatalf("second compile: origin %s, want %s", o, driver.OriginCache)
	}
}

func TestCompileErrorNamesUnit(t *testing.T) {
	d := open(t, Config{})
	_, err := d.Compile(driver.Source{Name: "bad.cu", Code: "this is not C++\n"})
	var ce *driver.CompileError
	if !errors.As(err, &ce) || ce.Source != "bad.cu" || ce.Log == "" {
		t.Fatalf("want a CompileError for bad.cu with the compiler's log, got %v", err)
	}
}

func TestBufferChecks(t *testing.T) {
	d := open(t, Config{})
	b, err := d.Alloc(10)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
	}{
		{"upload past the end", d.Upload(b, 8, make([]byte, 4))},
		{"negative offset", d.Download(make([]byte, 1), b, -1)},
		{"memset past the end", d.Memset(b, 0, 11, 0)},
		{"negative alloc", func() error { _, err := d.Alloc(-1); return err }()},
	}
	for _, tc := range tests {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if err := d.Memset(b, 2, 8, 7); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 10)
	if err := d.Download(got, b, 0); err != nil || got[1] == 7 || got[2] != 7 || got[9] != 7 {
		t.Fatalf("memset: %v %v", got, err)
	}
	// The buffer ends within 15 bytes of its guard page (so that overruns fault).
	eb := b.(*buffer)
	end := uintptr(unsafe.Pointer(&eb.data[0])) + uintptr(len(eb.data))
	guard := uintptr(unsafe.Pointer(&eb.mapping[0])) + uintptr(len(eb.mapping)) - uintptr(os.Getpagesize())
	if end > guard || guard-end > 15 {
		t.Fatalf("buffer ends %d bytes before its guard page", int(guard)-int(end))
	}
	other := open(t, Config{})
	if err := other.Upload(b, 0, []byte{1}); !errors.Is(err, driver.ErrForeignHandle) {
		t.Fatalf("another device's buffer: %v", err)
	}
	if err := d.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := d.Upload(b, 0, []byte{1}); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("freed buffer: %v", err)
	}
}

func TestGraphCaptureReplaysAndUpdates(t *testing.T) {
	d := open(t, Config{})
	k := compileTest(t, d)
	x := []float32{1, 2, 3, 4}
	bx, _ := d.Alloc(16)
	by, _ := d.Alloc(16)
	d.Upload(bx, 0, f32bytes(x))
	d.Memset(by, 0, 16, 0)
	capture := func(a float32, extraMemset bool) driver.Graph {
		t.Helper()
		if err := d.BeginCapture(); err != nil {
			t.Fatal(err)
		}
		if err := d.Launch(k, driver.Dim3{1}, driver.Dim3{4}, 0, driver.U32(4), driver.F32(a), driver.Ptr(bx), driver.Ptr(by)); err != nil {
			t.Fatal(err)
		}
		if err := d.Upload(by, 0, []byte{0}); err == nil {
			t.Fatal("upload accepted during capture")
		}
		if extraMemset {
			d.Memset(by, 0, 4, 0)
		}
		g, err := d.EndCapture()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := capture(1, false)
	y := make([]float32, 4)
	d.Download(f32bytes(y), by, 0)
	if y[0] != 0 {
		t.Fatal("a captured launch ran during the capture")
	}
	for range 2 {
		if err := g.Launch(); err != nil {
			t.Fatal(err)
		}
	}
	d.Download(f32bytes(y), by, 0)
	if y[3] != 8 {
		t.Fatalf("two replays of y += x: y[3] = %v, want 8", y[3])
	}
	if err := g.Update(capture(10, false)); err != nil {
		t.Fatal(err)
	}
	g.Launch()
	d.Download(f32bytes(y), by, 0)
	if y[3] != 48 {
		t.Fatalf("after update (a = 10): y[3] = %v, want 48", y[3])
	}
	if err := g.Update(capture(1, true)); !errors.Is(err, driver.ErrGraphChanged) {
		t.Fatalf("update from another shape: %v", err)
	}
}

func TestCapabilitiesSwitchOff(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		// graphs and events say whether each is expected to work.
		graphs, events bool
	}{
		{"all", Config{}, true, true},
		{"no graphs", Config{NoGraphs: true}, false, true},
		{"no events", Config{NoEvents: true}, true, false},
		{"neither", Config{NoGraphs: true, NoEvents: true}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := open(t, tc.cfg)
			err := d.BeginCapture()
			if tc.graphs != (err == nil) || (!tc.graphs && !errors.Is(err, driver.ErrUnsupported)) {
				t.Fatalf("BeginCapture: %v", err)
			}
			if err == nil {
				if _, err := d.EndCapture(); err != nil {
					t.Fatal(err)
				}
			}
			ev, err := d.NewEvent()
			if tc.events != (err == nil) || (!tc.events && !errors.Is(err, driver.ErrUnsupported)) {
				t.Fatalf("NewEvent: %v", err)
			}
			if err == nil {
				ev2, _ := d.NewEvent()
				if d.Record(ev) != nil || d.Record(ev2) != nil {
					t.Fatal("record failed")
				}
				if ms, err := d.ElapsedMs(ev, ev2); err != nil || ms < 0 || math.IsNaN(float64(ms)) {
					t.Fatalf("elapsed %v ms: %v", ms, err)
				}
			}
		})
	}
}

func TestNoCompilerIsNoDevice(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New(Config{CacheDir: t.TempDir()})
	if !errors.Is(err, driver.ErrNoDevice) || !strings.Contains(err.Error(), "g++ or clang++") {
		t.Fatalf("without a C++ compiler: %v", err)
	}
}

func TestCacheOffUsesTemporaryDirectory(t *testing.T) {
	d, err := New(Config{CacheDir: driver.CacheOff})
	if err != nil {
		t.Skip("no host emulator: " + err.Error())
	}
	dir := d.dir
	if !d.tempDir || !strings.Contains(dir, "rlxsplat-emu-") {
		t.Fatalf("cache off: directory %q", dir)
	}
	b, err := d.Alloc(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Upload(b, 0, []byte{1}); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("a buffer of a closed device: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("%s not removed by Close", dir)
	}
}

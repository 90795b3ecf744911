package metal

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/fakemtl"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mtl"
)

// newTestDevice opens the backend over a fake runtime and, at the end of the test, closes it
// and requires that Metal was never misused and every object was released.
func newTestDevice(t *testing.T, o fakemtl.Options, opts driver.Options) (*Device, *fakemtl.Runtime) {
	t.Helper()
	if o.Compiler == nil {
		o.Compiler = testKernels()
	}
	rt := fakemtl.New(o)
	d, err := New(rt, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		st := rt.Stats()
		for _, m := range st.Misuse {
			t.Errorf("Metal misuse: %s", m)
		}
		if st.Live != 0 {
			t.Errorf("%d Metal objects left unreleased after Close", st.Live)
		}
		if st.Threads > 1 {
			t.Errorf("Metal called from %d OS threads", st.Threads)
		}
	})
	return d, rt
}

func testModule(t *testing.T, d *Device) driver.Module {
	t.Helper()
	m, err := d.Compile(driver.Source{Name: "k.metal", Code: testSource, Headers: map[string]string{"prelude.h": "#pragma once\n"}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func floats(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func floatBytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestBufferTransfers(t *testing.T) {
	d, _ := newTestDevice(t, fakemtl.Options{}, driver.Options{})
	b, err := d.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Upload(b, 0, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}); err != nil {
		t.Fatal(err)
	}
	if err := d.Memset(b, 4, 8, 0xee); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 14)
	if err := d.Download(got, b, 2); err != nil {
		t.Fatal(err)
	}
	want := []byte{3, 4, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 13, 14, 15, 16}
	if string(got) != string(want) {
		t.Fatalf("download = %v, want %v", got, want)
	}
	for _, err := range []error{
		d.Upload(b, 10, make([]byte, 7)),
		d.Download(make([]byte, 1), b, 16),
		d.Memset(b, -1, 2, 0),
	} {
		if err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("out-of-range transfer: err = %v", err)
		}
	}
	z, err := d.Alloc(0)
	if err != nil || z.Size() != 0 {
		t.Fatalf("zero-length Alloc = %v, %v", z, err)
	}
	if err := d.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := d.Upload(b, 0, []byte{1}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("upload after Free: err = %v, want ErrClosed", err)
	}
	if _, err := d.Alloc(1 << 40); !errors.Is(err, driver.ErrOutOfMemory) {
		t.Errorf("huge Alloc: err = %v, want ErrOutOfMemory", err)
	}
}

// TestBatching: launches, memsets and uploads made while the GPU is busy are encoded into one
// command buffer that nothing commits or waits for until the readout.
func TestBatching(t *testing.T) {
	d, rt := newTestDevice(t, fakemtl.Options{}, driver.Options{})
	k, err := testModule(t, d).Kernel("scale")
	if err != nil {
		t.Fatal(err)
	}
	x, _ := d.Alloc(16)
	if err := d.Upload(x, 0, floatBytes(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := d.Launch(k, driver.Dim3{1}, driver.Dim3{4}, 0, driver.Ptr(x), driver.F32(2), driver.U32(4)); err != nil {
			t.Fatal(err)
		}
	}
	// Queued after the launches: the launches must not see it; the next one must.
	if err := d.Upload(x, 4, floatBytes(100)); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(k, driver.Dim3{1}, driver.Dim3{4}, 0, driver.Ptr(x), driver.F32(0.5), driver.U32(4)); err != nil {
		t.Fatal(err)
	}
	if st := rt.Stats(); st.Commits != 0 || st.Waits != 0 || st.CommandBuffers != 1 || st.Copies != 1 {
		t.Fatalf("before the readout: %+v; want one command buffer, a staged copy, no commit or wait", st)
	}
	got := make([]byte, 16)
	if err := d.Download(got, x, 0); err != nil {
		t.Fatal(err)
	}
	if f := floats(got); f[0] != 4 || f[1] != 50 || f[2] != 12 || f[3] != 16 {
		t.Fatalf("result %v, want [4 50 12 16]", f)
	}
	if st := rt.Stats(); st.Commits != 1 || st.Waits != 1 || st.Dispatches != 4 {
		t.Fatalf("after the readout: %+v; want 1 commit, 1 wait, 4 dispatches", st)
	}
}

func TestThreadgroupMemory(t *testing.T) {
	d, _ := newTestDevice(t, fakemtl.Options{}, driver.Options{})
	k, err := testModule(t, d).Kernel("blocksum")
	if err != nil {
		t.Fatal(err)
	}
	in, _ := d.Alloc(32)
	out, _ := d.Alloc(8)
	if err := d.Upload(in, 0, floatBytes(1, 2, 3, 4, 5, 6, 7, 8)); err != nil {
		t.Fatal(err)
	}
	// 4 floats = 16 bytes asked as 13: rounded up to Metal's multiple of 16.
	if err := d.Launch(k, driver.Dim3{2}, driver.Dim3{4}, 13, driver.Ptr(in), driver.Ptr(out)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	if err := d.Download(got, out, 0); err != nil {
		t.Fatal(err)
	}
	if f := floats(got); f[0] != 10 || f[1] != 26 {
		t.Fatalf("block sums %v, want [10 26]", f)
	}
}

func TestEvents(t *testing.T) {
	d, rt := newTestDevice(t, fakemtl.Options{}, driver.Options{})
	k, err := testModule(t, d).Kernel("scale")
	if err != nil {
		t.Fatal(err)
	}
	x, _ := d.Alloc(4)
	y, _ := d.Alloc(4)
	_ = d.Upload(x, 0, floatBytes(3))
	_ = d.Upload(y, 0, floatBytes(5))
	start, _ := d.NewEvent()
	mid, _ := d.NewEvent()
	end, _ := d.NewEvent()
	defer start.Close()
	defer mid.Close()
	defer end.Close()
	if err := d.Record(start); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_ = d.Launch(k, driver.Dim3{1}, driver.Dim3{1}, 0, driver.Ptr(x), driver.F32(2), driver.U32(1))
	}
	_ = d.Record(mid)
	_ = d.Launch(k, driver.Dim3{1}, driver.Dim3{1}, 0, driver.Ptr(y), driver.F32(2), driver.U32(1))
	// x is final at mid; y's launch stays encoded and uncommitted.
	got := make([]byte, 4)
	if err := d.DownloadAfter(got, x, 0, mid); err != nil {
		t.Fatal(err)
	}
	if f := floats(got); f[0] != 24 {
		t.Fatalf("x after mid = %v, want 24", f[0])
	}
	if st := rt.Stats(); st.Commits != 1 {
		t.Fatalf("DownloadAfter committed %d command buffers, want only the one before the event", st.Commits)
	}
	_ = d.Record(end)
	ms, err := d.ElapsedMs(start, mid)
	if err != nil {
		t.Fatal(err)
	}
	if want := float32(3 * fakemtl.DispatchSeconds * 1000); math.Abs(float64(ms-want)) > 1e-3 {
		t.Errorf("start→mid = %g ms, want %g (three dispatches)", ms, want)
	}
	if ms, err := d.ElapsedMs(start, end); err != nil || math.Abs(float64(ms-4)) > 1e-3 {
		t.Errorf("start→end = %g ms, %v; want 4", ms, err)
	}
	if ms, err := d.ElapsedMs(end, end); err != nil || ms != 0 {
		t.Errorf("end→end = %g, %v; want 0", ms, err)
	}
	if _, err := d.ElapsedMs(end, start); err == nil {
		t.Error("an end recorded before its start is accepted")
	}
}

func TestLimits(t *testing.T) {
	d, _ := newTestDevice(t, fakemtl.Options{}, driver.Options{})
	m := testModule(t, d)
	blocksum, _ := m.Kernel("blocksum")
	buf, _ := d.Alloc(64)
	many := make([]driver.Arg, 32)
	for i := range many {
		many[i] = driver.U32(1)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"threads", d.Launch(blocksum, driver.Dim3{1}, driver.Dim3{512}, 0, driver.Ptr(buf), driver.Ptr(buf)), "launch blocksum: 512 threads per threadgroup, the pipeline allows 256"},
		{"threadgroup memory", d.Launch(blocksum, driver.Dim3{1}, driver.Dim3{64}, 32<<10, driver.Ptr(buf), driver.Ptr(buf)), "launch blocksum: 32784 bytes of threadgroup memory (16 static + 32768 dynamic), the device allows 32768"},
		{"buffer slots", d.Launch(blocksum, driver.Dim3{1}, driver.Dim3{1}, 0, many...), "launch blocksum: metal: 32 arguments, Metal binds at most 31"},
		{"inline bytes", d.Launch(blocksum, driver.Dim3{1}, driver.Dim3{1}, 0, driver.Bytes(make([]byte, 4097))), "launch blocksum: metal: argument 0: 4097 bytes inline, Metal allows 4096"},
		{"static threadgroup memory", kernelErr(m, "heavy"), "kernel heavy: 40960 bytes of static threadgroup memory, the device allows 32768"},
		{"missing function", kernelErr(m, "nope"), `kernel nope of k.metal`},
	}
	for _, tc := range tests {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

func kernelErr(m driver.Module, name string) error {
	_, err := m.Kernel(name)
	return err
}

func TestSIMDWidth(t *testing.T) {
	d, _ := newTestDevice(t, fakemtl.Options{SIMDWidth: 64}, driver.Options{})
	_, err := testModule(t, d).Kernel("scale")
	if err == nil || !strings.Contains(err.Error(), "kernel scale: SIMD width 64, the kernels' warp helpers assume 32") {
		t.Fatalf("err = %v", err)
	}
}

func TestCompile(t *testing.T) {
	d, rt := newTestDevice(t, fakemtl.Options{}, driver.Options{})
	src := driver.Source{Name: "k.metal", Code: testSource, Headers: map[string]string{"prelude.h": "#pragma once\n"}, Options: []string{"-DTILE=16"}}
	m1, err := d.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := d.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if m1.Info().Origin != driver.OriginCompiled || m2.Info().Origin != originMemory || m2.Info().Format != "msl" {
		t.Errorf("origins %q then %q, want compiled then %q", m1.Info().Origin, m2.Info().Origin, originMemory)
	}
	src.Options = []string{"-DTILE=32"}
	if _, err := d.Compile(src); err != nil {
		t.Fatal(err)
	}
	st := rt.Stats()
	if st.Compiles != 2 {
		t.Errorf("%d compiles, want 2 (the repeat is cached)", st.Compiles)
	}
	want, _ := MSL(src)
	if st.Sources[1] != want || !strings.Contains(want, "#pragma METAL fp contract(off)\n#define TILE 32\n") {
		t.Errorf("compiled text is not MSL(src):\n%s", st.Sources[1])
	}
	if st.LastCompileOptions != (mtl.CompileOptions{LanguageVersion: mtl.LanguageVersion3_0}) {
		t.Errorf("compile options %+v, want MSL 3.0 without fast math", st.LastCompileOptions)
	}

	bad := driver.Source{Name: "bad.metal", Code: "#include \"h.h\"\nkernel void scale() {}\n", Headers: map[string]string{"h.h": "int a;\ndouble b;\n"}}
	_, err = d.Compile(bad)
	var ce *driver.CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CompileError", err)
	}
	if len(ce.Diagnostics) != 1 || ce.Diagnostics[0].File != "h.h" || ce.Diagnostics[0].Line != 2 || !strings.Contains(ce.Log, "'double'") {
		t.Errorf("diagnostics %+v from log %q, want h.h:2", ce.Diagnostics, ce.Log)
	}
	if _, err := MSL(driver.Source{Name: "k", Options: []string{"--use_fast_math"}}); err == nil {
		t.Error("a non -D option is accepted")
	}
}

func TestNoCompiler(t *testing.T) {
	d, _ := newTestDevice(t, fakemtl.Options{}, driver.Options{NoCompiler: true})
	if _, err := d.Compile(driver.Source{Name: "k.metal", Code: testSource}); !errors.Is(err, driver.ErrNoCompiler) {
		t.Errorf("NoCompiler: err = %v", err)
	}
	rt := fakemtl.New(fakemtl.Options{})
	d2, err := New(rt, driver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if _, err := d2.Compile(driver.Source{Name: "k.metal", Code: "kernel void wide() {}"}); !errors.Is(err, driver.ErrNoCompiler) {
		t.Errorf("runtime without a compiler: err = %v", err)
	}
}

func TestNoDevice(t *testing.T) {
	for _, o := range []fakemtl.Options{{NoDevice: true}, {Family: mtl.GPUFamilyApple1 + 5}} {
		_, err := New(fakemtl.New(o), driver.Options{})
		if !errors.Is(err, driver.ErrNoDevice) {
			t.Errorf("%+v: err = %v, want ErrNoDevice", o, err)
		}
		if o.Family != 0 && !strings.Contains(err.Error(), "Apple6; the kernels need Apple7") {
			t.Errorf("old GPU: %v", err)
		}
	}
}

func TestCommandBufferFault(t *testing.T) {
	d, _ := newTestDevice(t, fakemtl.Options{}, driver.Options{})
	m := testModule(t, d)
	fault, _ := m.Kernel("fault")
	wide, _ := m.Kernel("wide")
	_ = d.Launch(wide, driver.Dim3{1}, driver.Dim3{1}, 0)
	_ = d.Launch(fault, driver.Dim3{1}, driver.Dim3{1}, 0)
	err := d.Sync()
	if err == nil || !strings.Contains(err.Error(), "command buffer with wide, fault failed") || !strings.Contains(err.Error(), "0xdead") {
		t.Fatalf("Sync = %v", err)
	}
	if err := d.Sync(); err != nil {
		t.Errorf("the failure is reported twice: %v", err)
	}
}

// TestOneThread calls the device from many goroutines: Metal must see one OS thread, inside
// pools (the cleanup checks both).
func TestOneThread(t *testing.T) {
	d, _ := newTestDevice(t, fakemtl.Options{}, driver.Options{})
	b, _ := d.Alloc(64)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				_ = d.Memset(b, i*8, 8, byte(j))
				_ = d.Download(make([]byte, 8), b, i*8)
			}
		})
	}
	wg.Wait()
	if err := d.BeginCapture(); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("BeginCapture = %v, want ErrUnsupported", err)
	}
}

package cuda

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// Tests below need a CUDA device; they skip, naming the reason, when there is none (CI, and
// this project's development machines). Run them on a GPU machine with
// `CGO_ENABLED=0 go test -c -o bin/gputest/cuda.test ./internal/gpu/cuda` and the binary.

const seed = 20241202 // fixed, so a failure reproduces

// openTest opens device 0 with a private kernel cache; no device or driver skips the test,
// any other failure fails it (a GPU machine whose backend cannot open is a bug).
func openTest(t *testing.T, opts driver.Options) *Device {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = t.TempDir()
	}
	if opts.PTX == nil {
		opts.PTX = shaders.PTX()
		// Lets a GPU run test PTX that genptx has just written, before it is embedded.
		if dir := os.Getenv("RLXSPLAT_TEST_PTX_DIR"); dir != "" {
			opts.PTX = os.DirFS(dir)
		}
	}
	d, err := Open(opts)
	if err != nil {
		if errors.Is(err, driver.ErrNoDevice) {
			t.Skip("no CUDA device: " + err.Error())
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d
}

func selftest(t *testing.T) driver.Source {
	t.Helper()
	src, err := driver.SourceFromFS(shaders.Sources(), "selftest.cu")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func kernelOf(t *testing.T, d *Device, src driver.Source, name string) driver.Kernel {
	t.Helper()
	m, err := d.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Kernel(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func f32bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func upload(t *testing.T, d *Device, v []float32) driver.Buffer {
	t.Helper()
	b, err := d.Alloc(4 * len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Upload(b, 0, f32bytes(v)); err != nil {
		t.Fatal(err)
	}
	return b
}

func download(t *testing.T, d *Device, b driver.Buffer, n int) []float32 {
	t.Helper()
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(math.NaN()) // poison: a missing copy cannot pass as data
	}
	if err := d.Download(f32bytes(out), b, 0); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInfo(t *testing.T) {
	d := openTest(t, driver.Options{})
	info := d.Info()
	t.Logf("device: %+v", info)
	if info.Backend != "cuda" || info.Name == "" || !strings.HasPrefix(info.Arch, "sm_") || info.MemTotal <= 0 || info.Driver == "" {
		t.Fatalf("incomplete info %+v", info)
	}
	free, total, err := d.MemInfo()
	if err != nil || free <= 0 || total <= 0 || free > total {
		t.Fatalf("MemInfo = %d, %d, %v", free, total, err)
	}
	if d.CompilerError() != nil {
		t.Logf("NVRTC unavailable: %v", d.CompilerError())
	}
}

func TestErrorNamesMatchDriver(t *testing.T) {
	d := openTest(t, driver.Options{})
	for code, name := range resultNames {
		if code == 0 {
			continue
		}
		var e *Error
		if !errors.As(d.check(int32(code), "probe", ""), &e) {
			t.Fatalf("check(%d) is not an *Error", code)
		}
		if e.Name != name {
			t.Errorf("code %d: driver says %s, table says %s", code, e.Name, name)
		}
		if e.Message == "" {
			// Seen for CUDA_ERROR_INSUFFICIENT_DRIVER with driver 580: the name still comes.
			t.Logf("code %d (%s): the driver has no description", code, e.Name)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	d := openTest(t, driver.Options{})
	rng := rand.New(rand.NewPCG(seed, 1))
	// Downloads from stageMin bytes on pass through the page-locked stage in halves: sizes
	// below, at and across its halves.
	for _, size := range []int{1, 3, 4096, stageMin - 1, stageMin, 1<<20 + 7, stageBytes / 2, 3*stageBytes/2 + 7} {
		for _, off := range []int{0, 5} {
			t.Run(fmt.Sprintf("%d@%d", size, off), func(t *testing.T) {
				b, err := d.Alloc(size + off + 11)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Free(b)
				if err := d.Memset(b, 0, b.Size(), 0xCD); err != nil {
					t.Fatal(err)
				}
				in := make([]byte, size)
				for i := range in {
					in[i] = byte(rng.Uint32())
				}
				if err := d.Upload(b, off, in); err != nil {
					t.Fatal(err)
				}
				out := bytes.Repeat([]byte{0xA5}, size)
				if err := d.Download(out, b, off); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(in, out) {
					t.Fatal("downloaded bytes differ from uploaded ones")
				}
				// The bytes around the upload keep the memset value.
				edge := make([]byte, off+11)
				if err := d.Download(edge[:off], b, 0); err != nil {
					t.Fatal(err)
				}
				if err := d.Download(edge[off:], b, off+size); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(edge, bytes.Repeat([]byte{0xCD}, len(edge))) {
					t.Fatalf("bytes outside the upload changed: %x", edge)
				}
			})
		}
	}
}

func TestBufferMisuse(t *testing.T) {
	d := openTest(t, driver.Options{})
	b, err := d.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"upload past end", d.Upload(b, 8, make([]byte, 9)), "upload 9 bytes at offset 8 of a 16-byte buffer"},
		{"download negative offset", d.Download(make([]byte, 1), b, -1), "out of range"},
		{"memset past end", d.Memset(b, 0, 17, 0), "memset 17 bytes"},
		{"negative alloc", func() error { _, err := d.Alloc(-1); return err }(), "negative size"},
		{"foreign buffer", d.Upload(&foreignBuf{}, 0, []byte{1}), "another device"},
	}
	for _, tc := range tests {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	if err := d.Free(b); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(b); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("double Free: %v", err)
	}
	if err := d.Upload(b, 0, []byte{1}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("use after Free: %v", err)
	}
	z, err := d.Alloc(0)
	if err != nil || z.Size() != 0 {
		t.Fatalf("zero-size Alloc: %v", err)
	}
	if err := d.Upload(z, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(z); err != nil {
		t.Fatal(err)
	}
}

type foreignBuf struct{}

func (*foreignBuf) Size() int { return 64 }

func TestOutOfMemory(t *testing.T) {
	d := openTest(t, driver.Options{})
	const huge = 1 << 50 // 1 PiB: no GPU has it
	_, err := d.Alloc(huge)
	if !errors.Is(err, driver.ErrOutOfMemory) {
		t.Fatalf("err = %v, want ErrOutOfMemory", err)
	}
	var oom *driver.OOMError
	if !errors.As(err, &oom) || oom.Requested != huge || oom.Free <= 0 || oom.Total <= 0 {
		t.Fatalf("OOMError = %+v", oom)
	}
	if msg := err.Error(); !strings.Contains(msg, "1125899906842624 bytes") || !strings.Contains(msg, "free of") {
		t.Fatalf("message %q lacks the size asked for or the free memory", msg)
	}
	t.Log(err)
	// The device still works after a failed allocation.
	if b, err := d.Alloc(1024); err != nil {
		t.Fatalf("Alloc after OOM: %v", err)
	} else {
		d.Free(b)
	}
}

func TestKernelsAgainstCPU(t *testing.T) {
	d := openTest(t, driver.Options{})
	src := selftest(t)
	m, err := d.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("module: %+v", m.Info())
	rng := rand.New(rand.NewPCG(seed, 2))
	const n = 100_003 // not a multiple of the block size
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()*8 - 4
		y[i] = rng.Float32()*8 - 4
	}
	bx, by := upload(t, d, x), upload(t, d, y)
	out, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	kernel := func(name string) driver.Kernel {
		k, err := m.Kernel(name)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}

	t.Run("saxpy", func(t *testing.T) {
		const a = float32(-1.75)
		if err := d.Launch(kernel("saxpy"), driver.Dim3{(n + 255) / 256}, driver.Dim3{256}, 0,
			driver.U32(n), driver.F32(a), driver.Ptr(bx), driver.Ptr(by), driver.Ptr(out)); err != nil {
			t.Fatal(err)
		}
		got := download(t, d, out, n)
		for i := range got {
			// One fused multiply-add on the GPU, possibly two roundings on the CPU: allow
			// one ulp-ish of the magnitude involved.
			want := a*x[i] + y[i]
			if diff := math.Abs(float64(got[i] - want)); diff > 1e-6*(math.Abs(float64(a*x[i]))+math.Abs(float64(y[i])))+1e-7 {
				t.Fatalf("saxpy[%d] = %v, want %v", i, got[i], want)
			}
		}
	})

	t.Run("by-value struct", func(t *testing.T) {
		st := make([]byte, 16)
		binary.LittleEndian.PutUint32(st[0:], math.Float32bits(2))
		binary.LittleEndian.PutUint32(st[4:], math.Float32bits(0.5))
		binary.LittleEndian.PutUint32(st[8:], n)
		v := upload(t, d, x)
		if err := d.Launch(kernel("affine"), driver.Dim3{(n + 127) / 128}, driver.Dim3{128}, 0, driver.Bytes(st), driver.Ptr(v)); err != nil {
			t.Fatal(err)
		}
		got := download(t, d, v, n)
		for i := range got {
			if want := x[i]*2 + 0.5; got[i] != want {
				t.Fatalf("affine[%d] = %v, want %v", i, got[i], want)
			}
		}
	})

	t.Run("fill with offset pointer", func(t *testing.T) {
		u, err := d.Alloc(4 * 64)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Memset(u, 0, u.Size(), 0); err != nil {
			t.Fatal(err)
		}
		if err := d.Launch(kernel("fill_u32"), driver.Dim3{1}, driver.Dim3{64}, 0, driver.PtrAt(u, 4*10), driver.U32(20), driver.U32(0xDEADBEEF)); err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, u.Size())
		if err := d.Download(raw, u, 0); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 64; i++ {
			want := uint32(0)
			if i >= 10 && i < 30 {
				want = 0xDEADBEEF
			}
			if got := binary.LittleEndian.Uint32(raw[4*i:]); got != want {
				t.Fatalf("element %d = %#x, want %#x", i, got, want)
			}
		}
	})

	t.Run("shared memory beyond 48 KiB", func(t *testing.T) {
		sum, err := d.Alloc(4)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Memset(sum, 0, 4, 0); err != nil {
			t.Fatal(err)
		}
		const block = 512
		// The kernel needs block*4 bytes; asking for 64 KiB exercises the opt-in path.
		if err := d.Launch(kernel("block_sum"), driver.Dim3{(n + block - 1) / block}, driver.Dim3{block}, 64<<10,
			driver.Ptr(bx), driver.U32(n), driver.Ptr(sum)); err != nil {
			t.Fatal(err)
		}
		got := download(t, d, sum, 1)[0]
		var want float64
		for _, v := range x {
			want += float64(v)
		}
		if math.Abs(float64(got)-want) > 1e-3*math.Max(1, math.Abs(want))+0.05 {
			t.Fatalf("block_sum = %v, want %v", got, want)
		}
	})
}

func TestLaunchChecksArguments(t *testing.T) {
	d := openTest(t, driver.Options{})
	k := kernelOf(t, d, selftest(t), "saxpy")
	if k.(*kernel).params == nil {
		t.Skip("driver cannot report kernel parameters (cuFuncGetParamInfo needs CUDA 12.4+)")
	}
	if got := k.(*kernel).params; fmt.Sprint(got) != "[4 4 8 8 8]" {
		t.Fatalf("saxpy parameter sizes %v, want [4 4 8 8 8]", got)
	}
	b, _ := d.Alloc(16)
	defer d.Free(b)
	tests := []struct {
		name string
		args []driver.Arg
		want string
	}{
		{"too few", []driver.Arg{driver.U32(1)}, "1 arguments given, the kernel takes 5"},
		{"float for pointer", []driver.Arg{driver.U32(1), driver.F32(1), driver.F32(0), driver.Ptr(b), driver.Ptr(b)}, "argument 2 is f32(0) (4 bytes)"},
	}
	for _, tc := range tests {
		err := d.Launch(k, driver.Dim3{1}, driver.Dim3{1}, 0, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "saxpy") {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestPostedLaunchFailureReported checks that a launch the driver refuses (a block of more
// threads than the device has per block), which Launch only queues, is reported once, by the
// next call that waits, naming the driver call and the kernel.
func TestPostedLaunchFailureReported(t *testing.T) {
	d := openTest(t, driver.Options{})
	k := kernelOf(t, d, selftest(t), "saxpy")
	b := upload(t, d, []float32{1})
	if err := d.Launch(k, driver.Dim3{1}, driver.Dim3{4096}, 0, driver.U32(1), driver.F32(1), driver.Ptr(b), driver.Ptr(b), driver.Ptr(b)); err != nil {
		t.Fatalf("Launch queues the call and should not fail itself: %v", err)
	}
	err := d.Sync()
	if err == nil || !strings.Contains(err.Error(), "cuLaunchKernel(saxpy)") {
		t.Fatalf("Sync after a refused launch: %v, want the launch's error", err)
	}
	if err := d.Sync(); err != nil {
		t.Fatalf("the failure was reported twice: %v", err)
	}
	if got := download(t, d, b, 1)[0]; got != 1 {
		t.Fatalf("the refused launch ran: %v", got)
	}
}

func TestKernelNotFound(t *testing.T) {
	d := openTest(t, driver.Options{})
	m, err := d.Compile(selftest(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Kernel("no_such_kernel")
	if err == nil || !strings.Contains(err.Error(), "cuModuleGetFunction(no_such_kernel)") || !strings.Contains(err.Error(), "CUDA_ERROR_NOT_FOUND") {
		t.Fatalf("err = %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Kernel("saxpy"); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Kernel after Close: %v", err)
	}
}

func TestKernelResources(t *testing.T) {
	d := openTest(t, driver.Options{})
	if d.nv == nil {
		t.Skip("no NVRTC: " + d.CompilerError().Error())
	}
	// 4000 bytes of static shared memory and nothing spilled.
	src := driver.Source{Name: "resources.cu", Code: `extern "C" __global__ void probe(float* o, int i)
{
    __shared__ float s[1000];
    s[threadIdx.x] = o[threadIdx.x];
    __syncthreads();
    o[threadIdx.x] = s[(threadIdx.x + i) % 1000u];
}
`}
	k := kernelOf(t, d, src, "probe")
	rr, ok := k.(driver.ResourceReporter)
	if !ok {
		t.Fatal("the CUDA kernel does not report its resources")
	}
	r, err := rr.Resources(256)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if r.SharedBytes != 4000 || r.LocalBytes != 0 || r.Registers < 1 || r.Registers > 255 || r.BlocksPerSM < 1 || r.BlocksPerSM > 64 {
		t.Fatalf("resources %+v: want 4000 shared bytes, no local memory, 1..255 registers, 1..64 blocks an SM", r)
	}
	// A block of 1024 threads fits fewer times.
	big, err := rr.Resources(1024)
	if err != nil {
		t.Fatal(err)
	}
	if big.BlocksPerSM < 1 || big.BlocksPerSM >= r.BlocksPerSM {
		t.Fatalf("blocks an SM: %d of 1024 threads, %d of 256", big.BlocksPerSM, r.BlocksPerSM)
	}
}

func TestCompileErrorCarriesLog(t *testing.T) {
	d := openTest(t, driver.Options{})
	if d.nv == nil {
		t.Skip("no NVRTC: " + d.CompilerError().Error())
	}
	src := driver.Source{Name: "broken_kernel.cu", Code: "extern \"C\" __global__ void k(float* o)\n{\n    o[0] = undefined_name;\n}\n"}
	_, err := d.Compile(src)
	var ce *driver.CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CompileError", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "broken_kernel.cu(3)") || !strings.Contains(err.Error(), "undefined_name") {
		t.Fatalf("message lacks the NVRTC log with file and line:\n%v", err)
	}
	if len(ce.Diagnostics) == 0 || ce.Diagnostics[0].File != "broken_kernel.cu" || ce.Diagnostics[0].Line != 3 || ce.Diagnostics[0].Severity != "error" {
		t.Fatalf("diagnostics %+v", ce.Diagnostics)
	}
	// Errors in an included header name the header.
	hdr := driver.Source{Name: "uses_header.cu", Code: "#include \"bad.h\"\nextern \"C\" __global__ void k() {}\n",
		Headers: map[string]string{"bad.h": "\nint x = not_declared;\n"}}
	_, err = d.Compile(hdr)
	if err == nil || !strings.Contains(err.Error(), "bad.h(2)") {
		t.Fatalf("header error lacks bad.h(2): %v", err)
	}
}

func TestDiskCache(t *testing.T) {
	dir := t.TempDir()
	d := openTest(t, driver.Options{CacheDir: dir})
	if d.nv == nil {
		t.Skip("no NVRTC: " + d.CompilerError().Error())
	}
	src := selftest(t)
	origin := func() driver.ModuleOrigin {
		t.Helper()
		m, err := d.Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		return m.Info().Origin
	}
	if o := origin(); o != driver.OriginCompiled {
		t.Fatalf("first compile: origin %q", o)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
	if len(entries) != 1 {
		t.Fatalf("cache has %d entries, want 1", len(entries))
	}
	if o := origin(); o != driver.OriginCache {
		t.Fatalf("second compile: origin %q, want a cache hit", o)
	}
	// A corrupt entry is ignored and rebuilt.
	if err := os.WriteFile(entries[0], []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if o := origin(); o != driver.OriginCompiled {
		t.Fatalf("after corruption: origin %q, want a rebuild", o)
	}
	if o := origin(); o != driver.OriginCache {
		t.Fatalf("after rebuild: origin %q, want a cache hit", o)
	}
	// Different options are a different entry.
	src.Options = []string{"-DRLX_UNUSED=1"}
	if o := origin(); o != driver.OriginCompiled {
		t.Fatalf("new options: origin %q", o)
	}
}

func TestEmbeddedPTXFallback(t *testing.T) {
	d := openTest(t, driver.Options{NoCompiler: true})
	if d.nv != nil || !errors.Is(d.CompilerError(), driver.ErrNoCompiler) {
		t.Fatal("NoCompiler did not switch NVRTC off")
	}
	src := selftest(t)
	m, err := d.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if m.Info().Origin != driver.OriginEmbedded || m.Info().Format != "ptx" {
		t.Fatalf("module info %+v", m.Info())
	}
	k, err := m.Kernel("saxpy")
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 2, 3, 4}
	bx, by := upload(t, d, x), upload(t, d, []float32{10, 20, 30, 40})
	if err := d.Launch(k, driver.Dim3{1}, driver.Dim3{32}, 0, driver.U32(4), driver.F32(2), driver.Ptr(bx), driver.Ptr(by), driver.Ptr(by)); err != nil {
		t.Fatal(err)
	}
	if got := download(t, d, by, 4); fmt.Sprint(got) != "[12 24 36 48]" {
		t.Fatalf("saxpy from embedded PTX = %v", got)
	}
	// A source the PTX was not built from is refused, as ErrNoCompiler, naming the reason. The
	// edit is code: the source hash ignores comments, so a comment would not make it stale.
	src.Code += "\n__device__ int edited;\n"
	_, err = d.Compile(src)
	if !errors.Is(err, driver.ErrNoCompiler) || !errors.Is(err, driver.ErrStalePrebuilt) {
		t.Fatalf("stale source: err = %v", err)
	}
	other := driver.Source{Name: "not_embedded.cu", Code: "x"}
	if _, err := d.Compile(other); !errors.Is(err, driver.ErrNoCompiler) || !strings.Contains(err.Error(), "not_embedded") {
		t.Fatalf("missing PTX: err = %v", err)
	}
}

func TestEventsTimeAKernel(t *testing.T) {
	d := openTest(t, driver.Options{})
	k := kernelOf(t, d, selftest(t), "saxpy")
	const n = 1 << 24
	x, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Memset(x, 0, 4*n, 0); err != nil {
		t.Fatal(err)
	}
	start, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	end, _ := d.NewEvent()
	defer start.Close()
	defer end.Close()
	if err := d.Record(start); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if err := d.Launch(k, driver.Dim3{n / 256}, driver.Dim3{256}, 0, driver.U32(n), driver.F32(1), driver.Ptr(x), driver.Ptr(x), driver.Ptr(x)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Record(end); err != nil {
		t.Fatal(err)
	}
	ms, err := d.ElapsedMs(start, end)
	if err != nil {
		t.Fatal(err)
	}
	// Not a timing assertion: only that the events measured something real.
	if !(ms > 0) || math.IsInf(float64(ms), 0) {
		t.Fatalf("elapsed %v ms", ms)
	}
	t.Logf("4 × saxpy over %d floats: %.3f ms", n, ms)
}

// TestDownloadAfter reads a buffer as of an event while more work is queued behind it: the
// copy must see the event's work, the later work must still complete, and a foreign or
// closed event must be refused.
func TestDownloadAfter(t *testing.T) {
	d := openTest(t, driver.Options{})
	k := kernelOf(t, d, selftest(t), "saxpy")
	const n = 1 << 22
	rng := rand.New(rand.NewPCG(seed, 7))
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = rng.Float32()
	}
	x, z := upload(t, d, xs), upload(t, d, xs)
	ev, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	// x = 2·x, then the event, then z doubled 64 times behind it.
	if err := d.Launch(k, driver.Dim3{n / 256}, driver.Dim3{256}, 0, driver.U32(n), driver.F32(1), driver.Ptr(x), driver.Ptr(x), driver.Ptr(x)); err != nil {
		t.Fatal(err)
	}
	if err := d.Record(ev); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 64; i++ {
		if err := d.Launch(k, driver.Dim3{n / 256}, driver.Dim3{256}, 0, driver.U32(n), driver.F32(1), driver.Ptr(z), driver.Ptr(z), driver.Ptr(z)); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]float32, n)
	for i := range got {
		got[i] = float32(math.NaN()) // poison: a missing copy cannot pass as data
	}
	if err := d.DownloadAfter(f32bytes(got), x, 0, ev); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 2*xs[i] {
			t.Fatalf("x[%d] = %v after the event, want %v", i, v, 2*xs[i])
		}
	}
	for i, v := range download(t, d, z, n) {
		if want := xs[i] * (1 << 64); v != want {
			t.Fatalf("z[%d] = %v after 64 doublings, want %v", i, v, want)
		}
	}
	other := openTest(t, driver.Options{})
	foreign, err := other.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	b := f32bytes(got)
	if err := d.DownloadAfter(b[:4], x, 0, foreign); !errors.Is(err, driver.ErrForeignHandle) {
		t.Errorf("foreign event: %v, want ErrForeignHandle", err)
	}
	foreign.Close()
	if err := d.DownloadAfter(b[:8], x, 4*n-4, ev); err == nil {
		t.Error("a download past the buffer's end was accepted")
	}
	ev.Close()
	if err := d.DownloadAfter(b[:4], x, 0, ev); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("closed event: %v, want ErrClosed", err)
	}
}

func TestGraphCapture(t *testing.T) {
	d := openTest(t, driver.Options{})
	k := kernelOf(t, d, selftest(t), "saxpy")
	x, y := []float32{1, 2, 3}, []float32{0, 0, 0}
	bx, by := upload(t, d, x), upload(t, d, y)
	if err := d.BeginCapture(); err != nil {
		if errors.Is(err, driver.ErrUnsupported) {
			t.Skip(err.Error())
		}
		t.Fatal(err)
	}
	// y += 2x, twice per replay; nothing runs during capture.
	for i := 0; i < 2; i++ {
		if err := d.Launch(k, driver.Dim3{1}, driver.Dim3{32}, 0, driver.U32(3), driver.F32(2), driver.Ptr(bx), driver.Ptr(by), driver.Ptr(by)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Upload(by, 0, make([]byte, 4)); err == nil || !strings.Contains(err.Error(), "capture") {
		t.Fatalf("upload during capture: %v", err)
	}
	g, err := d.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := download(t, d, by, 3); fmt.Sprint(got) != "[0 0 0]" {
		t.Fatalf("captured work ran during capture: %v", got)
	}
	for i := 0; i < 3; i++ {
		if err := g.Launch(); err != nil {
			t.Fatal(err)
		}
	}
	if got := download(t, d, by, 3); fmt.Sprint(got) != "[12 24 36]" {
		t.Fatalf("after 3 replays y = %v, want [12 24 36]", got)
	}
}

// TestGraphUpdate replays a graph, updates it from a capture with other arguments, and checks
// that the replay follows the update, and that a capture of another shape is refused without
// touching the graph.
func TestGraphUpdate(t *testing.T) {
	d := openTest(t, driver.Options{})
	k := kernelOf(t, d, selftest(t), "saxpy")
	bx, by := upload(t, d, []float32{1, 2, 3}), upload(t, d, []float32{0, 0, 0})
	capture := func(launches int, a float32) driver.Graph {
		t.Helper()
		if err := d.BeginCapture(); err != nil {
			if errors.Is(err, driver.ErrUnsupported) {
				t.Skip(err.Error())
			}
			t.Fatal(err)
		}
		for i := 0; i < launches; i++ {
			if err := d.Launch(k, driver.Dim3{1}, driver.Dim3{32}, 0, driver.U32(3), driver.F32(a), driver.Ptr(bx), driver.Ptr(by), driver.Ptr(by)); err != nil {
				t.Fatal(err)
			}
		}
		g, err := d.EndCapture()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g := capture(1, 2)
	defer g.Close()
	if err := g.Launch(); err != nil { // y = 2x
		t.Fatal(err)
	}
	if err := g.Update(capture(1, 10)); err != nil {
		if errors.Is(err, driver.ErrUnsupported) {
			t.Skip(err.Error())
		}
		t.Fatal(err)
	}
	if err := g.Launch(); err != nil { // y += 10x
		t.Fatal(err)
	}
	other := capture(2, 100)
	defer other.Close()
	if err := g.Update(other); !errors.Is(err, driver.ErrGraphChanged) {
		t.Fatalf("update from a capture of two launches into a graph of one: %v, want ErrGraphChanged", err)
	}
	if err := g.Launch(); err != nil { // still y += 10x
		t.Fatal(err)
	}
	if got := download(t, d, by, 3); fmt.Sprint(got) != "[22 44 66]" {
		t.Fatalf("y = %v, want [22 44 66] (2x, then 10x twice)", got)
	}
	if err := other.Launch(); err != nil { // the refused capture is still a graph of its own
		t.Fatal(err)
	}
	if got := download(t, d, by, 3); fmt.Sprint(got) != "[222 444 666]" {
		t.Fatalf("y = %v, want [222 444 666]", got)
	}
}

func TestConcurrentCallers(t *testing.T) {
	d := openTest(t, driver.Options{})
	k := kernelOf(t, d, selftest(t), "saxpy")
	const workers, rounds, n = 8, 20, 777
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- func() error {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(i + w)
				}
				bx, err := d.Alloc(4 * n)
				if err != nil {
					return err
				}
				defer d.Free(bx)
				by, err := d.Alloc(4 * n)
				if err != nil {
					return err
				}
				defer d.Free(by)
				if err := d.Upload(bx, 0, f32bytes(x)); err != nil {
					return err
				}
				for r := 0; r < rounds; r++ {
					if err := d.Memset(by, 0, 4*n, 0); err != nil {
						return err
					}
					a := float32(r + 1)
					if err := d.Launch(k, driver.Dim3{(n + 63) / 64}, driver.Dim3{64}, 0, driver.U32(n), driver.F32(a), driver.Ptr(bx), driver.Ptr(by), driver.Ptr(by)); err != nil {
						return err
					}
					got := make([]float32, n)
					if err := d.Download(f32bytes(got), by, 0); err != nil {
						return err
					}
					for i := range got {
						if got[i] != a*x[i] {
							return fmt.Errorf("worker %d round %d: y[%d] = %v, want %v", w, r, i, got[i], a*x[i])
						}
					}
				}
				return nil
			}()
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func TestDebugModeAndClose(t *testing.T) {
	d, err := Open(driver.Options{Debug: true, CacheDir: t.TempDir(), PTX: shaders.PTX()})
	if err != nil {
		if errors.Is(err, driver.ErrNoDevice) {
			t.Skip("no CUDA device: " + err.Error())
		}
		t.Fatal(err)
	}
	k := kernelOf(t, d, selftest(t), "saxpy")
	b := upload(t, d, []float32{1})
	if err := d.Launch(k, driver.Dim3{1}, driver.Dim3{1}, 0, driver.U32(1), driver.F32(1), driver.Ptr(b), driver.Ptr(b), driver.Ptr(b)); err != nil {
		t.Fatal(err)
	}
	if got := download(t, d, b, 1)[0]; got != 2 {
		t.Fatalf("got %v", got)
	}
	// b is still allocated: Close frees it.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := d.Alloc(4); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
	if err := d.Launch(k, driver.Dim3{1}, driver.Dim3{1}, 0, driver.U32(1), driver.F32(1), driver.Ptr(b), driver.Ptr(b), driver.Ptr(b)); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Launch after Close: %v", err)
	}
}

// TestGeneratePTX needs only NVRTC, no GPU.
func TestGeneratePTX(t *testing.T) {
	ptx, compiler, err := GeneratePTX(selftest(t), "compute_75")
	if err != nil {
		if errors.Is(err, driver.ErrNoCompiler) {
			t.Skip("no NVRTC: " + err.Error())
		}
		t.Fatal(err)
	}
	if !strings.HasPrefix(compiler, "nvrtc ") || !bytes.Contains(ptx, []byte(".target sm_75")) || !bytes.Contains(ptx, []byte(".entry saxpy")) {
		t.Fatalf("compiler %q, PTX head %q", compiler, ptx[:min(200, len(ptx))])
	}
	if ptx[len(ptx)-1] == 0 {
		t.Fatal("PTX keeps its NUL terminator")
	}
}

// TestDebugModeNamesFaultingKernel runs a kernel that writes to an unmapped address in a child
// process (the fault poisons the CUDA context for the rest of the process) and checks that
// debug mode reports it against that kernel with the driver's own name and text.
func TestDebugModeNamesFaultingKernel(t *testing.T) {
	const childEnv = "RLXSPLAT_TEST_FAULT_CHILD"
	if os.Getenv(childEnv) == "1" {
		// Not openTest: after the fault every call fails, Close included, and that is expected.
		d, err := Open(driver.Options{Debug: true, CacheDir: t.TempDir()})
		if err != nil {
			t.Skip(err.Error())
		}
		defer d.Close() // its error is expected: the context is poisoned on purpose
		if d.nv == nil {
			t.Skip("no NVRTC")
		}
		src := driver.Source{Name: "fault.cu", Code: "extern \"C\" __global__ void bad_write(float* p) { p[threadIdx.x] = 1.0f; }\n"}
		k := kernelOf(t, d, src, "bad_write")
		err = d.Launch(k, driver.Dim3{1}, driver.Dim3{32}, 0, driver.U64(0xdead0000000))
		fmt.Printf("FAULT-ERROR: %v\n", err)
		return
	}
	d := openTest(t, driver.Options{})
	if d.nv == nil {
		t.Skip("no NVRTC: " + d.CompilerError().Error())
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestDebugModeNamesFaultingKernel$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, _ := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	for _, want := range []string{"FAULT-ERROR: cuda: cuStreamSynchronize(after bad_write): CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("child output lacks %q", want)
		}
	}
}

// BenchmarkLaunch separates the host cost of one kernel launch into its layers, each on the
// same tiny kernel (one block of saxpy over 32 floats, so the device is never the bound):
//   - api:   Device.Launch as the engine calls it (argument checks, packing, the owner-thread
//     hop, the driver call);
//   - raw:   the driver's cuLaunchKernel alone, called in a loop on the owner thread;
//   - graph: one replay of a captured graph of 100 launches, reported per launch.
//
// Each reports host ns per launch (ns/op) and, as launches/s, what the stream sustained
// including the final wait.
func BenchmarkLaunch(b *testing.B) {
	d, err := Open(driver.Options{CacheDir: b.TempDir(), PTX: shaders.PTX()})
	if err != nil {
		if errors.Is(err, driver.ErrNoDevice) {
			b.Skip("no CUDA device: " + err.Error())
		}
		b.Fatal(err)
	}
	defer d.Close()
	src, err := driver.SourceFromFS(shaders.Sources(), "selftest.cu")
	if err != nil {
		b.Fatal(err)
	}
	m, err := d.Compile(src)
	if err != nil {
		b.Fatal(err)
	}
	k, err := m.Kernel("saxpy")
	if err != nil {
		b.Fatal(err)
	}
	x, err := d.Alloc(4 * 32)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Memset(x, 0, 4*32, 0); err != nil {
		b.Fatal(err)
	}
	args := []driver.Arg{driver.U32(32), driver.F32(1), driver.Ptr(x), driver.Ptr(x), driver.Ptr(x)}
	launch := func() error { return d.Launch(k, driver.Dim3{1}, driver.Dim3{32}, 0, args...) }

	b.Run("api", func(b *testing.B) {
		for b.Loop() {
			if err := launch(); err != nil {
				b.Fatal(err)
			}
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("raw", func(b *testing.B) {
		ck := k.(*kernel)
		var lerr error
		if err := d.th.Call(func() {
			packed, err := driver.Pack(args, d.addr)
			if err != nil {
				lerr = err
				return
			}
			var pin runtime.Pinner
			defer pin.Unpin()
			ptrs := make([]uintptr, len(args))
			pin.Pin(&packed.Words[0])
			for i := range args {
				ptrs[i] = uintptr(unsafe.Pointer(&packed.Bytes(i)[0]))
			}
			pin.Pin(&ptrs[0])
			for b.Loop() {
				r := d.api.cuLaunchKernel(ck.fn, 1, 1, 1, 32, 1, 1, 0, d.stream, unsafe.Pointer(&ptrs[0]), nil)
				if r != cudaSuccess {
					lerr = d.check(r, "cuLaunchKernel", ck.name)
					return
				}
			}
			lerr = d.check(d.api.cuStreamSynchronize(d.stream), "cuStreamSynchronize", "")
		}); err != nil {
			b.Fatal(err)
		}
		if lerr != nil {
			b.Fatal(lerr)
		}
	})
	b.Run("api+sync", func(b *testing.B) { // a launch and a wait: what a lone call costs
		for b.Loop() {
			if err := launch(); err != nil {
				b.Fatal(err)
			}
			if err := d.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("graph", func(b *testing.B) {
		const perGraph = 100
		if err := d.BeginCapture(); err != nil {
			if errors.Is(err, driver.ErrUnsupported) {
				b.Skip(err.Error())
			}
			b.Fatal(err)
		}
		for i := 0; i < perGraph; i++ {
			if err := launch(); err != nil {
				b.Fatal(err)
			}
		}
		g, err := d.EndCapture()
		if err != nil {
			b.Fatal(err)
		}
		defer g.Close()
		n := 0
		for b.Loop() {
			if err := g.Launch(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*perGraph), "ns/launch")
	})
}

package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// Device is an open CUDA device. Its methods are safe for concurrent use.
type Device struct {
	api   cuAPI
	nv    *nvrtc // nil when NVRTC is missing or switched off
	nvErr error  // why nv is nil
	opts  driver.Options
	cache *driver.Cache
	th    *ownerThread
	info  driver.Info
	cc    int // compute capability, major*10+minor

	closeOnce sync.Once
	closeErr  error

	// Owner-thread state: read and written only on the owner thread.
	deferred  error // the first failure of a posted call, not yet reported
	dev       int32
	ctx       uintptr
	stream    uintptr
	readback  uintptr // a non-blocking stream for DownloadAfter's copies, beside the work
	closed    bool
	capturing bool
	buffers   map[*buffer]struct{}
	modules   map[*module]struct{}
	// stage is the page-locked host buffer large downloads pass through (stageBytes, made at
	// the first such download); stageOff says it could not be made, and they go straight to Go
	// memory, which the driver copies through its own staging at a fraction of the speed.
	stage    []byte
	stageOff bool
}

var _ driver.Device = (*Device)(nil)

// Open loads the driver, makes device opts.Ordinal's primary context current on a new owner
// thread, creates the device's stream and loads NVRTC (unless opts.NoCompiler). With no driver
// it returns an error wrapping gpu.ErrNoDriver; with no device, gpu.ErrNoDevice.
func Open(opts driver.Options) (*Device, error) {
	lib, used, err := openFirst(driverCandidates())
	if err != nil {
		return nil, fmt.Errorf("cuda: load the driver library (libcuda): %w:\n%w", driver.ErrNoDriver, err)
	}
	d := &Device{opts: opts, buffers: map[*buffer]struct{}{}, modules: map[*module]struct{}{}}
	if err := bind(lib, used, d.api.symbols()); err != nil {
		return nil, fmt.Errorf("%w: %w", driver.ErrNoDriver, err)
	}
	d.th, err = newOwnerThread(d.setup)
	if err != nil {
		return nil, err
	}
	if opts.NoCompiler {
		d.nvErr = fmt.Errorf("cuda: NVRTC switched off (RLXSPLAT_NO_NVRTC): %w", driver.ErrNoCompiler)
	} else {
		d.nv, d.nvErr = loadNVRTC(os.Getenv)
	}
	if d.nv != nil {
		d.info.Compiler = d.nv.version
	} else {
		d.info.Compiler = "none (embedded PTX only)"
	}
	d.cache = driver.NewCache(opts.CacheDir)
	return d, nil
}

// setup runs first on the owner thread.
func (d *Device) setup() (err error) {
	a := &d.api
	if err := d.check(a.cuInit(0), "cuInit", ""); err != nil {
		return err
	}
	var count, ver int32
	if err := d.check(a.cuDeviceGetCount(&count), "cuDeviceGetCount", ""); err != nil {
		return err
	}
	if count == 0 {
		return fmt.Errorf("cuda: the driver reports no CUDA device: %w", driver.ErrNoDevice)
	}
	if d.opts.Ordinal < 0 || d.opts.Ordinal >= int(count) {
		return fmt.Errorf("cuda: device %d asked for, %d present: %w", d.opts.Ordinal, count, driver.ErrNoDevice)
	}
	if err := d.check(a.cuDeviceGet(&d.dev, int32(d.opts.Ordinal)), "cuDeviceGet", ""); err != nil {
		return err
	}
	if err := d.check(a.cuDevicePrimaryCtxRetain(&d.ctx, d.dev), "cuDevicePrimaryCtxRetain", ""); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			a.cuDevicePrimaryCtxRelease(d.dev)
		}
	}()
	if err := d.check(a.cuCtxSetCurrent(d.ctx), "cuCtxSetCurrent", ""); err != nil {
		return err
	}
	// A blocking stream (flags 0): it also orders against the legacy default stream, which
	// keeps any library that uses stream 0 on this context from racing our work.
	if err := d.check(a.cuStreamCreate(&d.stream, 0), "cuStreamCreate", ""); err != nil {
		return err
	}
	// DownloadAfter copies on a stream of its own, non-blocking (it must not order against
	// the work stream, whose later work it is there to overlap).
	if err := d.check(a.cuStreamCreate(&d.readback, streamNonBlocking), "cuStreamCreate", "readback stream"); err != nil {
		return err
	}
	var name [256]byte
	if err := d.check(a.cuDeviceGetName(&name[0], int32(len(name)), d.dev), "cuDeviceGetName", ""); err != nil {
		return err
	}
	var major, minor int32
	if err := d.check(a.cuDeviceGetAttribute(&major, attrComputeCapabilityMajor, d.dev), "cuDeviceGetAttribute", "compute capability"); err != nil {
		return err
	}
	if err := d.check(a.cuDeviceGetAttribute(&minor, attrComputeCapabilityMinor, d.dev), "cuDeviceGetAttribute", "compute capability"); err != nil {
		return err
	}
	var total uintptr
	if err := d.check(a.cuDeviceTotalMem(&total, d.dev), "cuDeviceTotalMem_v2", ""); err != nil {
		return err
	}
	if err := d.check(a.cuDriverGetVersion(&ver), "cuDriverGetVersion", ""); err != nil {
		return err
	}
	d.cc = int(major)*10 + int(minor)
	d.info = driver.Info{
		Backend:  "cuda",
		Name:     cString(name[:]),
		Arch:     archName(int(major), int(minor)),
		Driver:   fmt.Sprintf("%d.%d", ver/1000, ver%1000/10),
		MemTotal: int64(total),
	}
	return nil
}

// check turns a CUresult into an *Error with the driver's own name and description.
func (d *Device) check(r int32, call, subject string) error {
	if r == cudaSuccess {
		return nil
	}
	e := &Error{Call: call, Subject: subject, Code: int(r)}
	var p *byte
	if d.api.cuGetErrorName(r, &p) == cudaSuccess {
		e.Name = goString(p)
	} else {
		e.Name = fallbackName(int(r))
	}
	p = nil
	if d.api.cuGetErrorString(r, &p) == cudaSuccess {
		e.Message = goString(p)
	}
	return e
}

// do runs fn on the owner thread unless the device is closed, and waits for it. A posted
// call's failure not yet reported is reported with fn's result.
func (d *Device) do(fn func() error) error {
	var err error
	if cerr := d.th.Call(func() {
		if d.closed {
			err = driver.ErrClosed
			return
		}
		err = fn()
		if d.deferred != nil {
			err = errors.Join(fmt.Errorf("an earlier call failed: %w", d.deferred), err)
			d.deferred = nil
		}
	}); cerr != nil {
		return cerr
	}
	return err
}

// post queues fn to run on the owner thread without waiting for it (in Debug mode it waits,
// so that an error names its call at once). fn's failure is kept and reported by the next
// call that waits, as the driver itself reports a kernel's fault.
func (d *Device) post(fn func() error) error {
	if d.opts.Debug {
		return d.do(fn)
	}
	return d.th.Post(func() {
		if d.closed {
			return // Close reports nothing for work it cancelled
		}
		if err := fn(); err != nil && d.deferred == nil {
			d.deferred = err
		}
	})
}

// Info describes the device.
func (d *Device) Info() driver.Info { return d.info }

// CompilerError says why NVRTC is not used (nil when it is).
func (d *Device) CompilerError() error { return d.nvErr }

// MemInfo returns free and total device memory in bytes.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.do(func() error {
		var f, t uintptr
		if err := d.check(d.api.cuMemGetInfo(&f, &t), "cuMemGetInfo_v2", ""); err != nil {
			return err
		}
		free, total = int64(f), int64(t)
		return nil
	})
	return free, total, err
}

// buffer is a device allocation. ptr is 0 for a zero-length buffer.
type buffer struct {
	dev   *Device
	ptr   uint64
	size  int
	freed atomic.Bool // set on the owner thread, read by callers checking their arguments
}

func (b *buffer) Size() int { return b.size }

// Alloc allocates n bytes of device memory.
func (d *Device) Alloc(n int) (driver.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: alloc %d bytes: negative size", n)
	}
	b := &buffer{dev: d, size: n}
	err := d.do(func() error {
		if n > 0 {
			r := d.api.cuMemAlloc(&b.ptr, uintptr(n))
			if r == cudaErrorOutOfMemory {
				oom := &driver.OOMError{Backend: "cuda", Requested: int64(n), Free: -1, Total: -1,
					Err: d.check(r, "cuMemAlloc_v2", "")}
				var f, t uintptr
				if d.api.cuMemGetInfo(&f, &t) == cudaSuccess {
					oom.Free, oom.Total = int64(f), int64(t)
				}
				return oom
			}
			if err := d.check(r, "cuMemAlloc_v2", fmt.Sprintf("%d bytes", n)); err != nil {
				return err
			}
		}
		d.buffers[b] = struct{}{}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// own returns b as this device's buffer.
func (d *Device) own(b driver.Buffer) (*buffer, error) {
	cb, ok := b.(*buffer)
	if !ok || cb == nil || cb.dev != d {
		return nil, fmt.Errorf("cuda: %w", driver.ErrForeignHandle)
	}
	if cb.freed.Load() {
		return nil, fmt.Errorf("cuda: buffer of %d bytes used after Free: %w", cb.size, driver.ErrClosed)
	}
	return cb, nil
}

// Free releases b.
func (d *Device) Free(b driver.Buffer) error {
	return d.do(func() error {
		cb, err := d.own(b)
		if err != nil {
			return err
		}
		cb.freed.Store(true)
		delete(d.buffers, cb)
		if cb.ptr == 0 {
			return nil
		}
		return d.check(d.api.cuMemFree(cb.ptr), "cuMemFree_v2", "")
	})
}

func checkRange(op string, off, n, size int) error {
	if off < 0 || n < 0 || off > size || n > size-off {
		return fmt.Errorf("cuda: %s %d bytes at offset %d of a %d-byte buffer: out of range", op, n, off, size)
	}
	return nil
}

// Upload copies src into dst at off. The copy is queued on the stream; src is staged by the
// driver before this returns (pageable host memory), so the caller may reuse it at once.
func (d *Device) Upload(dst driver.Buffer, off int, src []byte) error {
	return d.do(func() error {
		b, err := d.own(dst)
		if err != nil {
			return err
		}
		if err := checkRange("upload", off, len(src), b.size); err != nil {
			return err
		}
		if len(src) == 0 {
			return nil
		}
		if d.capturing {
			return fmt.Errorf("cuda: upload during graph capture: host copies cannot be captured")
		}
		var pin runtime.Pinner
		defer pin.Unpin()
		pin.Pin(&src[0])
		return d.check(d.api.cuMemcpyHtoDAsync(b.ptr+uint64(off), unsafe.Pointer(&src[0]), uintptr(len(src)), d.stream),
			"cuMemcpyHtoDAsync_v2", "")
	})
}

// Download copies len(dst) bytes from src at off into dst, after all queued work.
func (d *Device) Download(dst []byte, src driver.Buffer, off int) error {
	return d.do(func() error {
		b, err := d.own(src)
		if err != nil {
			return err
		}
		if err := checkRange("download", off, len(dst), b.size); err != nil {
			return err
		}
		if len(dst) == 0 {
			return nil
		}
		if d.capturing {
			return fmt.Errorf("cuda: download during graph capture: host copies cannot be captured")
		}
		return d.copyToHost(dst, b.ptr+uint64(off), d.stream, "")
	})
}

// copyToHost copies len(dst) > 0 bytes from device address src into dst on stream and waits
// for it. The driver returns from a copy into pageable memory once it is done; the sync makes
// that a guarantee, because dst belongs to the caller as soon as we return. dst is pinned for
// the copy so that the Go runtime cannot move it while the driver writes. Owner thread only.
func (d *Device) copyToHost(dst []byte, src uint64, stream uintptr, where string) error {
	if len(dst) >= stageMin {
		if st := d.staging(); st != nil {
			return d.copyToHostStaged(dst, src, stream, st, where)
		}
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&dst[0])
	if err := d.check(d.api.cuMemcpyDtoHAsync(unsafe.Pointer(&dst[0]), src, uintptr(len(dst)), stream),
		"cuMemcpyDtoHAsync_v2", where); err != nil {
		return err
	}
	return d.check(d.api.cuStreamSynchronize(stream), "cuStreamSynchronize", "after download")
}

// Downloads of stageMin bytes or more pass through the page-locked stage, in halves of
// stageBytes/2: into Go memory, a refinement's statistics (10 MB at 0.8M splats) took 4–7 ms
// on an H100 host (about 1.5–2.5 GB/s), the driver copying through its own staging; into page-locked memory the copy runs at the link's speed, and the copy out of it
// into Go memory overlaps the transfer of the next half.
const (
	stageBytes = 16 << 20
	stageMin   = 256 << 10
)

// staging returns the stage, making it at the first call; nil where page-locked memory is not
// to be had (the driver lacks cuMemAllocHost or refused it), which is not an error: downloads
// then take the direct path. Owner thread only.
func (d *Device) staging() []byte {
	if d.stage != nil || d.stageOff {
		return d.stage
	}
	if d.api.cuMemAllocHost == nil || d.api.cuMemFreeHost == nil {
		d.stageOff = true
		return nil
	}
	var p unsafe.Pointer
	if d.api.cuMemAllocHost(&p, stageBytes) != cudaSuccess || p == nil {
		d.stageOff = true
		return nil
	}
	d.stage = unsafe.Slice((*byte)(p), stageBytes)
	return d.stage
}

// copyToHostStaged is copyToHost through the stage st: each half is filled by the device while
// the host copies the other out.
func (d *Device) copyToHostStaged(dst []byte, src uint64, stream uintptr, st []byte, where string) error {
	half := len(st) / 2
	fill := func(k, off int) (int, error) { // the chunk at off into half k
		n := min(half, len(dst)-off)
		return n, d.check(d.api.cuMemcpyDtoHAsync(unsafe.Pointer(&st[k*half]), src+uint64(off), uintptr(n), stream),
			"cuMemcpyDtoHAsync_v2", where)
	}
	wait := func() error {
		return d.check(d.api.cuStreamSynchronize(stream), "cuStreamSynchronize", "after download")
	}
	n, err := fill(0, 0)
	if err != nil {
		return err
	}
	if err := wait(); err != nil {
		return err
	}
	for off, k := 0, 0; off < len(dst); k ^= 1 {
		next, nn := off+n, 0
		if next < len(dst) {
			if nn, err = fill(k^1, next); err != nil {
				return err
			}
		}
		copy(dst[off:next], st[k*half:k*half+n])
		if next < len(dst) {
			if err := wait(); err != nil {
				return err
			}
		}
		off, n = next, nn
	}
	return nil
}

// DownloadAfter waits for the event after, then copies len(dst) bytes from src at off into dst
// on the readback stream, so that work queued on the stream behind after goes on meanwhile.
func (d *Device) DownloadAfter(dst []byte, src driver.Buffer, off int, after driver.Event) error {
	return d.do(func() error {
		b, err := d.own(src)
		if err != nil {
			return err
		}
		ev, err := d.ownEvent(after)
		if err != nil {
			return err
		}
		if err := checkRange("download", off, len(dst), b.size); err != nil {
			return err
		}
		if d.capturing {
			return fmt.Errorf("cuda: download during graph capture: host copies cannot be captured")
		}
		// The event's work has completed (and its faults are reported here) once this returns;
		// its writes are then visible to a copy on any stream.
		if err := d.check(d.api.cuEventSynchronize(ev.ev), "cuEventSynchronize", "before download"); err != nil {
			return err
		}
		if len(dst) == 0 {
			return nil
		}
		return d.copyToHost(dst, b.ptr+uint64(off), d.readback, "readback stream")
	})
}

// Memset sets n bytes of dst from off to value.
// It is posted: its arguments are checked here, a driver failure by the next call that waits.
func (d *Device) Memset(dst driver.Buffer, off, n int, value byte) error {
	b, err := d.own(dst)
	if err != nil {
		return err
	}
	if err := checkRange("memset", off, n, b.size); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return d.post(func() error {
		return d.check(d.api.cuMemsetD8Async(b.ptr+uint64(off), value, uintptr(n), d.stream), "cuMemsetD8Async", "")
	})
}

// Sync waits for all queued work.
func (d *Device) Sync() error {
	return d.do(func() error {
		return d.check(d.api.cuStreamSynchronize(d.stream), "cuStreamSynchronize", "")
	})
}

// module is a loaded CUmodule.
type module struct {
	dev      *Device
	mod      uintptr
	info     driver.ModuleInfo
	kernels  map[string]*kernel // owner-thread state
	unloaded bool               // owner-thread state
}

func (m *module) Info() driver.ModuleInfo { return m.info }

// kernel is a CUfunction with what the driver told us about its parameters.
type kernel struct {
	mod       *module
	fn        uintptr
	name      string
	params    []int // parameter sizes in bytes; nil when the driver cannot tell
	sharedMax int   // dynamic shared memory limit already raised to (owner-thread state)
}

func (k *kernel) Name() string { return k.name }

// Resources reports the kernel's registers, local and static shared memory, and how many
// blocks of blockSize threads fit on one multiprocessor (driver.ResourceReporter).
func (k *kernel) Resources(blockSize int) (driver.KernelResources, error) {
	d := k.mod.dev
	var r driver.KernelResources
	err := d.do(func() error {
		if d.api.cuFuncGetAttribute == nil || d.api.cuOccupancyMaxActiveBlocks == nil {
			return fmt.Errorf("cuda: kernel %s resources: %w", k.name, driver.ErrUnsupported)
		}
		for _, a := range []struct {
			attr int32
			dst  *int
			name string
		}{{funcAttrNumRegs, &r.Registers, "NUM_REGS"}, {funcAttrLocalBytes, &r.LocalBytes, "LOCAL_SIZE_BYTES"},
			{funcAttrSharedBytes, &r.SharedBytes, "SHARED_SIZE_BYTES"}} {
			var v int32
			if err := d.check(d.api.cuFuncGetAttribute(&v, a.attr, k.fn), "cuFuncGetAttribute", k.name+" "+a.name); err != nil {
				return err
			}
			*a.dst = int(v)
		}
		var b int32
		if err := d.check(d.api.cuOccupancyMaxActiveBlocks(&b, k.fn, int32(blockSize), 0),
			"cuOccupancyMaxActiveBlocksPerMultiprocessor", k.name); err != nil {
			return err
		}
		r.BlocksPerSM = int(b)
		return nil
	})
	return r, err
}

// Compile builds src for this device: from the disk cache when an image for the same source,
// options, NVRTC version and target exists, else with NVRTC (then cached); without NVRTC,
// from the prebuilt PTX in opts.PTX if it was built from exactly this source.
func (d *Device) Compile(src driver.Source) (driver.Module, error) {
	if src.Name == "" {
		return nil, fmt.Errorf("cuda: compile: source has no name")
	}
	hash := src.Hash()
	if d.nv == nil {
		img, hdr, err := driver.LoadPrebuilt(d.opts.PTX, src)
		if err != nil {
			return nil, fmt.Errorf("cuda: compile %s: %w (no NVRTC: %v): %w", src.Name, driver.ErrNoCompiler, d.nvErr, err)
		}
		info := driver.ModuleInfo{Source: src.Name, Hash: hash, Target: hdr.Target, Format: "ptx", Origin: driver.OriginEmbedded}
		m, err := d.load(img, info)
		var ce *Error
		if errors.As(err, &ce) && ce.Code == cudaErrorUnsupportedPTX {
			return nil, fmt.Errorf("%w (the embedded PTX was made by %s and needs a driver at least that new; "+
				"install NVRTC or update the driver)", err, hdr.Compiler)
		}
		return m, err
	}
	target, format, err := chooseTarget(d.cc, d.nv.supported)
	if err != nil {
		return nil, fmt.Errorf("cuda: compile %s: %w", src.Name, err)
	}
	opts := compileOptions(target, src.Options)
	key := driver.CacheKey(hash, strings.Join(opts, "\x00"), d.nv.version, target, format)
	info := driver.ModuleInfo{Source: src.Name, Hash: hash, Target: target, Format: format}
	if img, ok := d.cache.Get(key); ok {
		info.Origin = driver.OriginCache
		if m, err := d.load(img, info); err == nil {
			return m, nil
		}
		// An entry the driver rejects (say, written by a different driver) is rebuilt below.
	}
	img, err := d.nv.compile(src, target, format, opts)
	if err != nil {
		return nil, err
	}
	info.Origin = driver.OriginCompiled
	m, err := d.load(img, info)
	if err != nil {
		return nil, err
	}
	// A cache that cannot be written only costs a recompile next time; it is not an error.
	_ = d.cache.Put(key, img)
	return m, nil
}

// load turns an image (CUBIN or NUL-terminated PTX) into a module; JIT errors carry the
// driver's log.
func (d *Device) load(img []byte, info driver.ModuleInfo) (driver.Module, error) {
	m := &module{dev: d, info: info, kernels: map[string]*kernel{}}
	err := d.do(func() error {
		var pin runtime.Pinner
		defer pin.Unpin()
		logBuf := make([]byte, 32<<10)
		opts := []int32{jitErrorLogBuffer, jitErrorLogBufferSize}
		vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
		pin.Pin(&img[0])
		pin.Pin(&logBuf[0])
		pin.Pin(&opts[0])
		pin.Pin(&vals[0])
		r := d.api.cuModuleLoadDataEx(&m.mod, unsafe.Pointer(&img[0]), uint32(len(opts)),
			unsafe.Pointer(&opts[0]), unsafe.Pointer(&vals[0]))
		if err := d.check(r, "cuModuleLoadDataEx", info.Source); err != nil {
			if log := cString(logBuf); log != "" {
				return &driver.CompileError{Backend: "cuda", Source: info.Source, Target: d.info.Arch,
					Log: log, Diagnostics: driver.ParseDiagnostics(log), Err: err}
			}
			return err
		}
		d.modules[m] = struct{}{}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Kernel looks up an entry point and reads its parameter sizes when the driver can tell.
func (m *module) Kernel(name string) (driver.Kernel, error) {
	d := m.dev
	var k *kernel
	err := d.do(func() error {
		if m.unloaded {
			return fmt.Errorf("cuda: kernel %s: module %s unloaded: %w", name, m.info.Source, driver.ErrClosed)
		}
		if k = m.kernels[name]; k != nil {
			return nil
		}
		var fn uintptr
		if err := d.check(d.api.cuModuleGetFunction(&fn, m.mod, name), "cuModuleGetFunction", name); err != nil {
			return fmt.Errorf("%w (in %s; kernels must be extern \"C\")", err, m.info.Source)
		}
		k = &kernel{mod: m, fn: fn, name: name, params: d.paramSizes(fn)}
		m.kernels[name] = k
		return nil
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// paramSizes asks the driver for each parameter's size (CUDA 12.4+); nil when unsupported.
func (d *Device) paramSizes(fn uintptr) []int {
	if d.api.cuFuncGetParamInfo == nil {
		return nil
	}
	sizes := []int{}
	for i := uintptr(0); i < 1024; i++ {
		var off, size uintptr
		r := d.api.cuFuncGetParamInfo(fn, i, &off, &size)
		if r == cudaErrorInvalidValue {
			return sizes // past the last parameter
		}
		if r != cudaSuccess {
			return nil
		}
		sizes = append(sizes, int(size))
	}
	return nil
}

// Close unloads the module.
func (m *module) Close() error {
	d := m.dev
	return d.do(func() error {
		if m.unloaded {
			return nil
		}
		m.unloaded = true
		delete(d.modules, m)
		return d.check(d.api.cuModuleUnload(m.mod), "cuModuleUnload", m.info.Source)
	})
}

// Launch queues k. Arguments are checked against the kernel's parameter sizes when known, and
// buffers against their device and Free, before Launch returns; the launch itself is posted,
// and the driver's verdict on it comes with the next call that waits.
func (d *Device) Launch(k driver.Kernel, grid, block driver.Dim3, shared int, args ...driver.Arg) error {
	ck, ok := k.(*kernel)
	if !ok || ck == nil || ck.mod.dev != d {
		return fmt.Errorf("cuda: launch: %w", driver.ErrForeignHandle)
	}
	grid, block = grid.Norm(), block.Norm()
	if shared < 0 {
		return fmt.Errorf("cuda: launch %s: negative shared memory %d", ck.name, shared)
	}
	if ck.params != nil {
		if err := driver.CheckSignature(ck.name, ck.params, args); err != nil {
			return fmt.Errorf("cuda: %w", err)
		}
	}
	packed, err := driver.Pack(args, d.addr)
	if err != nil {
		return fmt.Errorf("cuda: launch %s: %w", ck.name, err)
	}
	n := len(args)
	return d.post(func() error {
		if ck.mod.unloaded {
			return fmt.Errorf("cuda: launch %s: module unloaded: %w", ck.name, driver.ErrClosed)
		}
		if shared > defaultSharedLimit && shared > ck.sharedMax {
			// Above 48 KiB a kernel must opt in to more dynamic shared memory.
			if err := d.check(d.api.cuFuncSetAttribute(ck.fn, funcAttrMaxDynamicShared, int32(shared)),
				"cuFuncSetAttribute", ck.name); err != nil {
				return err
			}
			ck.sharedMax = shared
		}
		var pin runtime.Pinner
		defer pin.Unpin()
		var params unsafe.Pointer
		if n > 0 {
			// kernelParams is an array of pointers, one per argument, to the values; both it
			// and the values are Go memory pinned until the call returns.
			ptrs := make([]uintptr, n)
			pin.Pin(&packed.Words[0])
			for i := range n {
				ptrs[i] = uintptr(unsafe.Pointer(&packed.Bytes(i)[0]))
			}
			pin.Pin(&ptrs[0])
			params = unsafe.Pointer(&ptrs[0])
		}
		r := d.api.cuLaunchKernel(ck.fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
			uint32(shared), d.stream, params, nil)
		if err := d.check(r, "cuLaunchKernel", ck.name); err != nil {
			return err
		}
		if d.opts.Debug && !d.capturing {
			return d.check(d.api.cuStreamSynchronize(d.stream), "cuStreamSynchronize", "after "+ck.name)
		}
		return nil
	})
}

// addr resolves a buffer argument (its address never changes while it is not freed).
func (d *Device) addr(b driver.Buffer, off int) (uint64, error) {
	cb, err := d.own(b)
	if err != nil {
		return 0, err
	}
	if cb.ptr == 0 {
		return 0, nil // zero-length buffer: a null pointer the kernel must not dereference
	}
	return cb.ptr + uint64(off), nil
}

// event is a CUevent.
type event struct {
	dev       *Device
	ev        uintptr
	destroyed bool // owner-thread state
}

// NewEvent creates a timing event.
func (d *Device) NewEvent() (driver.Event, error) {
	e := &event{dev: d}
	if err := d.do(func() error { return d.check(d.api.cuEventCreate(&e.ev, 0), "cuEventCreate", "") }); err != nil {
		return nil, err
	}
	return e, nil
}

func (d *Device) ownEvent(e driver.Event) (*event, error) {
	ce, ok := e.(*event)
	if !ok || ce == nil || ce.dev != d {
		return nil, fmt.Errorf("cuda: event: %w", driver.ErrForeignHandle)
	}
	if ce.destroyed {
		return nil, fmt.Errorf("cuda: event used after Close: %w", driver.ErrClosed)
	}
	return ce, nil
}

// Record queues e on the stream (posted, as Launch).
func (d *Device) Record(e driver.Event) error {
	ce, ok := e.(*event)
	if !ok || ce == nil || ce.dev != d {
		return fmt.Errorf("cuda: event: %w", driver.ErrForeignHandle)
	}
	return d.post(func() error {
		ce, err := d.ownEvent(e)
		if err != nil {
			return err
		}
		return d.check(d.api.cuEventRecord(ce.ev, d.stream), "cuEventRecord", "")
	})
}

// ElapsedMs waits for end and returns the milliseconds from start to end.
func (d *Device) ElapsedMs(start, end driver.Event) (float32, error) {
	var ms float32
	err := d.do(func() error {
		s, err := d.ownEvent(start)
		if err != nil {
			return err
		}
		e, err := d.ownEvent(end)
		if err != nil {
			return err
		}
		if err := d.check(d.api.cuEventSynchronize(e.ev), "cuEventSynchronize", ""); err != nil {
			return err
		}
		return d.check(d.api.cuEventElapsedTime(&ms, s.ev, e.ev), "cuEventElapsedTime", "")
	})
	return ms, err
}

// Close destroys the event.
func (e *event) Close() error {
	d := e.dev
	return d.do(func() error {
		if e.destroyed {
			return nil
		}
		e.destroyed = true
		return d.check(d.api.cuEventDestroy(e.ev), "cuEventDestroy_v2", "")
	})
}

// graph is a captured CUDA graph: the template the capture produced and, from its first
// launch on, the executable instantiated from it.
type graph struct {
	dev    *Device
	g      uintptr // CUgraph
	exec   uintptr // CUgraphExec, 0 until the first launch
	closed bool    // owner-thread state
}

func (d *Device) graphsSupported() error {
	a := &d.api
	if a.cuStreamBeginCapture == nil || a.cuStreamEndCapture == nil || a.cuGraphInstantiateWithFlag == nil ||
		a.cuGraphLaunch == nil || a.cuGraphExecDestroy == nil || a.cuGraphDestroy == nil {
		return fmt.Errorf("cuda: graph capture needs CUDA 11.4+ driver entry points: %w", driver.ErrUnsupported)
	}
	return nil
}

// BeginCapture starts capturing the stream's work into a graph. Relaxed mode, so that Alloc
// and Free stay legal while capturing (they are not stream work and are not captured).
func (d *Device) BeginCapture() error {
	if err := d.graphsSupported(); err != nil {
		return err
	}
	return d.do(func() error {
		if d.capturing {
			return fmt.Errorf("cuda: BeginCapture: already capturing")
		}
		if err := d.check(d.api.cuStreamBeginCapture(d.stream, streamCaptureModeRelaxed), "cuStreamBeginCapture_v2", ""); err != nil {
			return err
		}
		d.capturing = true
		return nil
	})
}

// EndCapture ends the capture. The graph is instantiated at its first launch, so that a capture
// that only serves to Update another graph never pays for an instantiation.
func (d *Device) EndCapture() (driver.Graph, error) {
	if err := d.graphsSupported(); err != nil {
		return nil, err
	}
	g := &graph{dev: d}
	err := d.do(func() error {
		if !d.capturing {
			return fmt.Errorf("cuda: EndCapture without BeginCapture")
		}
		d.capturing = false
		return d.check(d.api.cuStreamEndCapture(d.stream, &g.g), "cuStreamEndCapture", "")
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// Launch queues one replay of the graph on the device's stream (posted, as Device.Launch).
func (g *graph) Launch() error {
	d := g.dev
	return d.post(func() error {
		if g.closed {
			return fmt.Errorf("cuda: graph launched after Close: %w", driver.ErrClosed)
		}
		if g.exec == 0 {
			if err := d.check(d.api.cuGraphInstantiateWithFlag(&g.exec, g.g, 0), "cuGraphInstantiateWithFlags", ""); err != nil {
				g.exec = 0
				return err
			}
		}
		if err := d.check(d.api.cuGraphLaunch(g.exec, d.stream), "cuGraphLaunch", ""); err != nil {
			return err
		}
		if d.opts.Debug && !d.capturing {
			return d.check(d.api.cuStreamSynchronize(d.stream), "cuStreamSynchronize", "after graph")
		}
		return nil
	})
}

// Update makes g replay from's work: the executable is updated in place (cuGraphExecUpdate),
// which costs far less than instantiating from. On success from is consumed (closed); when the
// shapes differ the error wraps driver.ErrGraphChanged and both graphs are left as they were.
func (g *graph) Update(from driver.Graph) error {
	d := g.dev
	f, ok := from.(*graph)
	if !ok || f == nil || f.dev != d {
		return fmt.Errorf("cuda: graph update: %w", driver.ErrForeignHandle)
	}
	if f == g {
		return nil
	}
	if d.api.cuGraphExecUpdate == nil {
		return fmt.Errorf("cuda: graph update needs the CUDA 12 driver entry point cuGraphExecUpdate_v2: %w", driver.ErrUnsupported)
	}
	return d.do(func() error {
		if g.closed || f.closed {
			return fmt.Errorf("cuda: graph update after Close: %w", driver.ErrClosed)
		}
		if g.exec != 0 {
			var info graphExecUpdateInfo
			r := d.api.cuGraphExecUpdate(g.exec, f.g, &info)
			if r == cudaErrorGraphExecUpdate {
				return fmt.Errorf("cuda: graph update (result %d): %w", info.result, driver.ErrGraphChanged)
			}
			if err := d.check(r, "cuGraphExecUpdate_v2", ""); err != nil {
				return err
			}
		}
		// g now replays f's template; keep that one (the next update compares against it).
		err := d.check(d.api.cuGraphDestroy(g.g), "cuGraphDestroy", "")
		g.g, f.g = f.g, 0
		if f.exec != 0 {
			err = errors.Join(err, d.check(d.api.cuGraphExecDestroy(f.exec), "cuGraphExecDestroy", ""))
			f.exec = 0
		}
		f.closed = true
		return err
	})
}

// Close destroys the graph.
func (g *graph) Close() error {
	d := g.dev
	return d.do(func() error {
		if g.closed {
			return nil
		}
		g.closed = true
		var errs []error
		if g.exec != 0 {
			errs = append(errs, d.check(d.api.cuGraphExecDestroy(g.exec), "cuGraphExecDestroy", ""))
		}
		if g.g != 0 {
			errs = append(errs, d.check(d.api.cuGraphDestroy(g.g), "cuGraphDestroy", ""))
		}
		return errors.Join(errs...)
	})
}

// Close waits for queued work, frees what is still allocated, releases the primary context
// and stops the owner thread. Idempotent.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		var errs []error
		cerr := d.th.Call(func() {
			a := &d.api
			errs = append(errs, d.deferred)
			if d.capturing {
				var g uintptr
				if a.cuStreamEndCapture(d.stream, &g) == cudaSuccess && g != 0 {
					a.cuGraphDestroy(g)
				}
				d.capturing = false
			}
			errs = append(errs, d.check(a.cuStreamSynchronize(d.stream), "cuStreamSynchronize", "at close"))
			for b := range d.buffers {
				b.freed.Store(true)
				if b.ptr != 0 {
					errs = append(errs, d.check(a.cuMemFree(b.ptr), "cuMemFree_v2", "at close"))
				}
			}
			for m := range d.modules {
				m.unloaded = true
				errs = append(errs, d.check(a.cuModuleUnload(m.mod), "cuModuleUnload", m.info.Source))
			}
			d.buffers, d.modules = nil, nil
			if d.stage != nil {
				errs = append(errs, d.check(a.cuMemFreeHost(unsafe.Pointer(&d.stage[0])), "cuMemFreeHost", "at close"))
				d.stage = nil
			}
			errs = append(errs,
				d.check(a.cuStreamDestroy(d.readback), "cuStreamDestroy_v2", "readback stream"),
				d.check(a.cuStreamDestroy(d.stream), "cuStreamDestroy_v2", ""),
				d.check(a.cuDevicePrimaryCtxRelease(d.dev), "cuDevicePrimaryCtxRelease_v2", ""))
			d.closed = true
		})
		d.th.stop()
		d.closeErr = errors.Join(append(errs, cerr)...)
	})
	return d.closeErr
}

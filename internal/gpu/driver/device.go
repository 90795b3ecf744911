package driver

import "io/fs"

// Dim3 is a grid or block size in threads (x, y, z); zero components count as 1.
type Dim3 [3]uint32

// Norm returns d with zero components replaced by 1.
func (d Dim3) Norm() Dim3 {
	for i := range d {
		if d[i] == 0 {
			d[i] = 1
		}
	}
	return d
}

// Device is one GPU with one in-order queue of work (a CUDA stream, a Metal command queue).
// Every method is safe for concurrent use; the work of concurrent callers is serialised on the
// device's queue in the order the calls happen to arrive.
//
// Offsets and sizes are in bytes. Launch, Memset, Record and (on CUDA) Upload are asynchronous
// with respect to the host: Download and Sync wait for earlier work. A backend may queue the
// asynchronous calls themselves: then they check their arguments at once, and a failure of
// the call (not only of the work) is reported by the next call that waits.
type Device interface {
	// Info says what the device is and how it compiles kernels.
	Info() Info
	// MemInfo returns the free and total device memory in bytes.
	MemInfo() (free, total int64, err error)

	// Alloc returns a device buffer of n bytes (contents undefined). A failure for lack of
	// memory is an *OOMError (errors.Is(err, ErrOutOfMemory)).
	Alloc(n int) (Buffer, error)
	// Free releases b; using b afterwards returns ErrClosed.
	Free(b Buffer) error
	// Upload copies src into dst at byte offset off. src may be reused as soon as it returns.
	Upload(dst Buffer, off int, src []byte) error
	// Download copies len(dst) bytes from src at byte offset off, after all earlier work.
	Download(dst []byte, src Buffer, off int) error
	// DownloadAfter copies len(dst) bytes from src at byte offset off once the recorded event
	// after has completed, without waiting for the work queued behind after: the host reads
	// one step's results while the device runs the next. The caller must not queue anything
	// that writes that part of src between after and this call.
	DownloadAfter(dst []byte, src Buffer, off int, after Event) error
	// Memset sets n bytes of dst from offset off to value.
	Memset(dst Buffer, off, n int, value byte) error

	// Compile builds a module from source (or, without a compiler, from a prebuilt image that
	// matches the source's hash).
	Compile(src Source) (Module, error)
	// Launch queues k on a grid of grid blocks of block threads with shared bytes of dynamic
	// shared memory. The arguments are checked against the kernel's signature when the
	// backend can read it.
	Launch(k Kernel, grid, block Dim3, shared int, args ...Arg) error
	// Sync waits for all queued work and reports any asynchronous error.
	Sync() error

	// NewEvent creates a timing event; Record queues it; ElapsedMs waits for end and returns
	// the milliseconds between two recorded events.
	NewEvent() (Event, error)
	Record(e Event) error
	ElapsedMs(start, end Event) (float32, error)

	// BeginCapture starts recording the queue's launches and memsets into a graph instead of
	// running them; EndCapture returns the graph. Host copies are not capturable.
	BeginCapture() error
	EndCapture() (Graph, error)

	// Close waits for queued work, releases the device and stops its owner thread.
	// Handles are invalid afterwards. Close is idempotent.
	Close() error
}

// Info describes a device.
type Info struct {
	Backend  string // "cuda", "metal"
	Name     string // e.g. "NVIDIA H200"
	Arch     string // e.g. "sm_90", "apple7"
	Driver   string // driver version, e.g. "13.0"
	Compiler string // e.g. "nvrtc 13.0", or "none (embedded PTX)"
	MemTotal int64  // bytes
}

// Buffer is a region of device memory.
type Buffer interface {
	// Size is the buffer's length in bytes.
	Size() int
}

// Module is a compiled unit holding one or more kernels.
type Module interface {
	// Kernel looks up an entry point (an extern "C" function name).
	Kernel(name string) (Kernel, error)
	// Info says how the module was obtained.
	Info() ModuleInfo
	// Close unloads the module; its kernels become invalid.
	Close() error
}

// ModuleOrigin says where a module's image came from.
type ModuleOrigin string

const (
	OriginCompiled ModuleOrigin = "compiled"     // compiled now by the runtime compiler
	OriginCache    ModuleOrigin = "disk-cache"   // loaded from the on-disk kernel cache
	OriginEmbedded ModuleOrigin = "embedded-ptx" // prebuilt image shipped in the binary
)

// ModuleInfo describes how a module was obtained.
type ModuleInfo struct {
	Source string       // Source.Name
	Hash   string       // Source.Hash()
	Target string       // "sm_90", "compute_75", ...
	Format string       // "cubin", "ptx", "metallib", "msl"
	Origin ModuleOrigin // where the image came from
}

// Kernel is one entry point of a module.
type Kernel interface {
	Name() string
}

// KernelResources is what one compiled entry point takes of a multiprocessor, as the backend's
// compiler reports it: the numbers that decide how many blocks run at once.
type KernelResources struct {
	Registers   int // per thread
	LocalBytes  int // per thread: spilled registers and local arrays (0 is the aim)
	SharedBytes int // static shared (threadgroup) memory per block
	BlocksPerSM int // blocks of the asked size resident on one multiprocessor at once
}

// ResourceReporter is a Kernel that can report its resources (CUDA's can; others may not:
// callers type-assert and go without).
type ResourceReporter interface {
	Resources(blockSize int) (KernelResources, error)
}

// Event is a point in the device's queue, used for timing.
type Event interface {
	Close() error
}

// Graph is a captured sequence of launches that can be replayed with one call.
type Graph interface {
	// Launch queues one replay.
	Launch() error
	// Update makes the graph replay another capture of the same shape (the same launches,
	// memsets and order; arguments and grid sizes may differ) and consumes that capture. It
	// is much cheaper than replacing the graph by the new capture, the point of capturing a
	// step whose arguments change every time. A capture of another shape: ErrGraphChanged,
	// and nothing changes.
	Update(from Graph) error
	Close() error
}

// Options configure how a backend opens a device. The zero value is usable.
type Options struct {
	// Ordinal picks the device when there are several (0 = first).
	Ordinal int
	// CacheDir is the compiled-kernel cache; "" means DefaultCacheDir(), "off" disables it.
	CacheDir string
	// NoCompiler simulates a machine without the runtime compiler (RLXSPLAT_NO_NVRTC=1):
	// only prebuilt images from PTX are used.
	NoCompiler bool
	// Debug synchronises and checks after every launch so that an asynchronous fault is
	// reported against the kernel that caused it (RLXSPLAT_GPU_DEBUG=1). Slow.
	Debug bool
	// PTX holds prebuilt PTX files (NAME.ptx for source NAME.cu, with a header written by
	// internal/gpu/cmd/genptx) used when no compiler is available. May be nil.
	PTX fs.FS
}

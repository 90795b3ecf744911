package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/rlxsplat/rlxsplat/internal/gpu/cuda"
	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/internal/gpu/emu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// The device layer's types, defined in internal/gpu/driver so that the backends can share
// them; see there for their documentation.
type (
	Device = driver.Device
	Buffer = driver.Buffer
	Module = driver.Module
	Kernel = driver.Kernel
	// KernelResources and ResourceReporter: see package driver.
	KernelResources  = driver.KernelResources
	ResourceReporter = driver.ResourceReporter
	Event            = driver.Event
	Graph            = driver.Graph
	Dim3             = driver.Dim3
	Arg              = driver.Arg
	Source           = driver.Source
	Info             = driver.Info
	ModuleInfo       = driver.ModuleInfo
	Options          = driver.Options
	OOMError         = driver.OOMError
	CompileError     = driver.CompileError
	Diagnostic       = driver.Diagnostic
)

// Sentinel errors (see package driver).
var (
	ErrNoDevice      = driver.ErrNoDevice
	ErrNoDriver      = driver.ErrNoDriver
	ErrNoCompiler    = driver.ErrNoCompiler
	ErrOutOfMemory   = driver.ErrOutOfMemory
	ErrClosed        = driver.ErrClosed
	ErrUnsupported   = driver.ErrUnsupported
	ErrGraphChanged  = driver.ErrGraphChanged
	ErrForeignHandle = driver.ErrForeignHandle
)

// Ptr passes the device address of b to a kernel.
func Ptr(b Buffer) Arg { return driver.Ptr(b) }

// PtrAt passes the device address of b plus off bytes.
func PtrAt(b Buffer, off int) Arg { return driver.PtrAt(b, off) }

// U32 passes an unsigned 32-bit integer.
func U32(v uint32) Arg { return driver.U32(v) }

// I32 passes a signed 32-bit integer.
func I32(v int32) Arg { return driver.I32(v) }

// F32 passes a 32-bit float.
func F32(v float32) Arg { return driver.F32(v) }

// U64 passes an unsigned 64-bit integer.
func U64(v uint64) Arg { return driver.U64(v) }

// Bytes passes a by-value struct given as its little-endian bytes, C padding included.
func Bytes(structBytes []byte) Arg { return driver.Bytes(structBytes) }

// BlocksFor is the 1-D grid that covers n threads with blocks of per threads.
func BlocksFor(n, per uint32) Dim3 { return Dim3{(n + per - 1) / per, 1, 1} }

// IsUnavailable reports whether err means there is no usable GPU (no device or no driver),
// the case in which `device: auto` falls back to the CPU engine.
func IsUnavailable(err error) bool { return errors.Is(err, ErrNoDevice) }

// Backend kinds accepted by Open. KindEmu is the host emulator (internal/gpu/emu): a slow,
// exact checking device that needs only a C++ compiler; "auto" never picks it.
const (
	KindAuto  = "auto"
	KindCUDA  = "cuda"
	KindMetal = "metal"
	KindEmu   = "emu"
)

// Each backend's prelude: the file that the backend-neutral driver.PreludeInclude of a kernel
// unit maps to when CompileFile reads the unit for a device of that backend.
var preludes = map[string]string{
	KindCUDA:  "prelude_cuda.h",
	KindMetal: "prelude_metal.h",
	KindEmu:   emu.Prelude,
}

// Prelude is the prelude file that units compile against on backend (Info().Backend).
func Prelude(backend string) (string, error) {
	p, ok := preludes[backend]
	if !ok {
		return "", fmt.Errorf("gpu: backend %q has no kernel prelude (want %s, %s or %s)", backend, KindCUDA, KindMetal, KindEmu)
	}
	return p, nil
}

// Environment variables read by OptionsFromEnv.
const (
	EnvNoNVRTC     = "RLXSPLAT_NO_NVRTC"
	EnvDebug       = "RLXSPLAT_GPU_DEBUG"
	EnvKernelCache = "RLXSPLAT_KERNEL_CACHE"
	// EnvShaderDir names a directory of kernel sources that CompileShader reads instead of
	// the embedded ones (see ShaderSources).
	EnvShaderDir = "RLXSPLAT_SHADER_DIR"
)

// Open opens a device of the given kind ("auto", "cuda", "metal", "emu") with options from
// the environment. With "auto" it tries Metal first on macOS, then CUDA (see AutoOrder); if
// none has a device the error satisfies errors.Is(err, ErrNoDevice) and joins each backend's
// reason.
func Open(kind string) (Device, error) {
	o, err := OptionsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return OpenWith(kind, o)
}

// OpenWith is Open with explicit options. A nil o.PTX means the PTX embedded from shaders/ptx.
func OpenWith(kind string, o Options) (Device, error) {
	if o.PTX == nil {
		o.PTX = shaders.PTX()
	}
	switch strings.ToLower(kind) {
	case KindCUDA:
		return openCUDA(o)
	case KindMetal:
		return openMetal(o)
	case KindEmu:
		return openEmu(o)
	case KindAuto, "":
		var reasons []error
		for _, k := range AutoOrder(runtime.GOOS) {
			d, err := OpenWith(k, o)
			if err == nil {
				return d, nil
			}
			if !errors.Is(err, ErrNoDevice) {
				return nil, err // a GPU is there but broken: say so rather than hide it
			}
			reasons = append(reasons, err)
		}
		return nil, fmt.Errorf("gpu: no GPU found (device: auto):\n%w", errors.Join(reasons...))
	}
	return nil, fmt.Errorf("gpu: unknown device kind %q (want %q, %q, %q or %q)", kind, KindAuto, KindCUDA, KindMetal, KindEmu)
}

// AutoOrder is the order in which "auto" tries the GPU backends on goos: Metal first on macOS
// (where CUDA does not exist), CUDA first elsewhere. The emulator is never tried: it is a
// checking device, far too slow to train on.
func AutoOrder(goos string) []string {
	if goos == "darwin" {
		return []string{KindMetal, KindCUDA}
	}
	return []string{KindCUDA, KindMetal}
}

// The backends return concrete pointers; convert here so that a nil pointer never becomes a
// non-nil interface.
func openCUDA(o Options) (Device, error) {
	d, err := cuda.Open(o)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func openEmu(o Options) (Device, error) {
	d, err := emu.Open(o)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func openMetal(o Options) (Device, error) {
	d, err := metal.Open(o)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// OptionsFromEnv reads RLXSPLAT_NO_NVRTC, RLXSPLAT_GPU_DEBUG and RLXSPLAT_KERNEL_CACHE through
// getenv. Boolean variables accept 1/0, true/false, yes/no, on/off (empty = off); anything else
// is an error naming the variable.
func OptionsFromEnv(getenv func(string) string) (Options, error) {
	var o Options
	var err error
	if o.NoCompiler, err = envBool(getenv, EnvNoNVRTC); err != nil {
		return o, err
	}
	if o.Debug, err = envBool(getenv, EnvDebug); err != nil {
		return o, err
	}
	o.CacheDir = getenv(EnvKernelCache)
	return o, nil
}

func envBool(getenv func(string) string, key string) (bool, error) {
	switch v := strings.ToLower(strings.TrimSpace(getenv(key))); v {
	case "", "0", "false", "no", "off":
		return false, nil
	case "1", "true", "yes", "on":
		return true, nil
	default:
		return false, fmt.Errorf("gpu: environment variable %s=%q: want 1/0, true/false, yes/no or on/off", key, v)
	}
}

// CompileFile reads the unit name (and the headers it includes, the backend-neutral prelude
// mapped to d's: see Prelude) from fsys and compiles it on d.
func CompileFile(d Device, fsys fs.FS, name string) (Module, error) {
	src, err := SourceFor(d, fsys, name)
	if err != nil {
		return nil, err
	}
	return d.Compile(src)
}

// SourceFor reads the unit name from fsys as d's backend compiles it: driver.PreludeInclude
// maps to the backend's prelude. A backend without a prelude of its own (a test double) reads
// the prelude include as it is.
func SourceFor(d Device, fsys fs.FS, name string) (Source, error) {
	prelude, err := Prelude(d.Info().Backend)
	if err != nil {
		prelude = ""
	}
	return driver.SourceFromFSFor(fsys, name, prelude)
}

// CompileShader compiles one of the kernel units in shaders/, e.g. "selftest.cu", from the
// sources that ShaderSources picks.
func CompileShader(d Device, name string) (Module, error) {
	fsys, _ := ShaderSources(os.Getenv)
	return CompileFile(d, fsys, name)
}

// ShaderSources is the kernel source tree that CompileShader reads: the sources embedded from
// shaders/, or the directory that RLXSPLAT_SHADER_DIR names, and that directory ("" for the
// embedded ones). The directory is for kernel work: edit a .cu file and run the same binary
// again, or compare several source trees in one session on a GPU machine. It needs the
// runtime compiler: the embedded PTX matches only the embedded sources, so with NVRTC missing
// a changed unit fails to load rather than run old code.
func ShaderSources(getenv func(string) string) (fs.FS, string) {
	dir := strings.TrimSpace(getenv(EnvShaderDir))
	if dir == "" {
		return shaders.Sources(), ""
	}
	return os.DirFS(dir), dir
}

// SourceFromFS reads a kernel unit and its included headers (see driver.SourceFromFS).
func SourceFromFS(fsys fs.FS, name string) (Source, error) { return driver.SourceFromFS(fsys, name) }

// Elem is an element type that typed transfers accept: fixed-size numbers, laid out on the
// device exactly as in Go memory (every supported host is little-endian, like the GPUs).
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

func asBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

func elemOffset[T Elem](elemOff int) (int, error) {
	var zero T
	if elemOff < 0 {
		return 0, fmt.Errorf("gpu: negative element offset %d", elemOff)
	}
	return elemOff * int(unsafe.Sizeof(zero)), nil
}

// AllocSlice allocates room for n elements of T.
func AllocSlice[T Elem](d Device, n int) (Buffer, error) {
	var zero T
	if n < 0 {
		return nil, fmt.Errorf("gpu: alloc %d elements: negative count", n)
	}
	return d.Alloc(n * int(unsafe.Sizeof(zero)))
}

// UploadSlice copies src into dst starting at element elemOff.
func UploadSlice[T Elem](d Device, dst Buffer, elemOff int, src []T) error {
	off, err := elemOffset[T](elemOff)
	if err != nil {
		return err
	}
	return d.Upload(dst, off, asBytes(src))
}

// DownloadSlice fills dst from src starting at element elemOff.
func DownloadSlice[T Elem](d Device, dst []T, src Buffer, elemOff int) error {
	off, err := elemOffset[T](elemOff)
	if err != nil {
		return err
	}
	return d.Download(asBytes(dst), src, off)
}

// UploadF32 copies src to the start of dst.
func UploadF32(d Device, dst Buffer, src []float32) error { return UploadSlice(d, dst, 0, src) }

// DownloadF32 fills dst from the start of src.
func DownloadF32(d Device, dst []float32, src Buffer) error { return DownloadSlice(d, dst, src, 0) }

// UploadU32 copies src to the start of dst.
func UploadU32(d Device, dst Buffer, src []uint32) error { return UploadSlice(d, dst, 0, src) }

// DownloadU32 fills dst from the start of src.
func DownloadU32(d Device, dst []uint32, src Buffer) error { return DownloadSlice(d, dst, src, 0) }

// Zero clears the whole buffer.
func Zero(d Device, b Buffer) error { return d.Memset(b, 0, b.Size(), 0) }

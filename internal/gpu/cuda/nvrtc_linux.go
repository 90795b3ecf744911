package cuda

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// nvrtcAPI is the part of NVRTC this backend uses. nvrtcResult is int32, nvrtcProgram uintptr.
type nvrtcAPI struct {
	nvrtcVersion              func(major, minor *int32) int32
	nvrtcGetErrorString       func(r int32) *byte
	nvrtcCreateProgram        func(prog *uintptr, src unsafe.Pointer, name unsafe.Pointer, nheaders int32, headers unsafe.Pointer, names unsafe.Pointer) int32
	nvrtcDestroyProgram       func(prog *uintptr) int32
	nvrtcCompileProgram       func(prog uintptr, nopts int32, opts unsafe.Pointer) int32
	nvrtcGetProgramLogSize    func(prog uintptr, n *uintptr) int32
	nvrtcGetProgramLog        func(prog uintptr, buf *byte) int32
	nvrtcGetPTXSize           func(prog uintptr, n *uintptr) int32
	nvrtcGetPTX               func(prog uintptr, buf *byte) int32
	nvrtcGetCUBINSize         func(prog uintptr, n *uintptr) int32 // optional (NVRTC 11.1+)
	nvrtcGetCUBIN             func(prog uintptr, buf *byte) int32  // optional
	nvrtcGetNumSupportedArchs func(n *int32) int32                 // optional (NVRTC 11.2+)
	nvrtcGetSupportedArchs    func(archs *int32) int32             // optional
}

func (a *nvrtcAPI) symbols() []symbol {
	return []symbol{
		sym(&a.nvrtcVersion, "nvrtcVersion"),
		sym(&a.nvrtcGetErrorString, "nvrtcGetErrorString"),
		sym(&a.nvrtcCreateProgram, "nvrtcCreateProgram"),
		sym(&a.nvrtcDestroyProgram, "nvrtcDestroyProgram"),
		sym(&a.nvrtcCompileProgram, "nvrtcCompileProgram"),
		sym(&a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize"),
		sym(&a.nvrtcGetProgramLog, "nvrtcGetProgramLog"),
		sym(&a.nvrtcGetPTXSize, "nvrtcGetPTXSize"),
		sym(&a.nvrtcGetPTX, "nvrtcGetPTX"),
		optSym(&a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize"),
		optSym(&a.nvrtcGetCUBIN, "nvrtcGetCUBIN"),
		optSym(&a.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs"),
		optSym(&a.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs"),
	}
}

// nvrtc is a loaded NVRTC. Compilation needs no GPU and no context, so it runs on the
// caller's goroutine (keeping the device's owner thread free), and programs compile at once on
// NVRTC 12 and later, which NVIDIA's own libraries call from several threads (CCCL's
// cuda.compute relies on it; cuda-python's NVRTC bindings release the GIL for it). mu
// serialises the programs of older releases, which are not known to allow it.
type nvrtc struct {
	api       nvrtcAPI
	path      string // the library file that was loaded
	version   string // "nvrtc 13.0"
	supported []int  // compute capabilities NVRTC can target (nil: unknown)
	serial    bool   // one program at a time (before NVRTC 12)
	mu        sync.Mutex
}

// loadNVRTC dlopens the first NVRTC that loads and binds it. The error wraps ErrNoCompiler
// and lists every attempt.
func loadNVRTC(getenv func(string) string) (*nvrtc, error) {
	lib, used, err := openFirst(nvrtcCandidates(getenv))
	if err != nil {
		return nil, fmt.Errorf("cuda: load NVRTC: %w:\n%w", driver.ErrNoCompiler, err)
	}
	n := &nvrtc{path: used}
	if err := bind(lib, used, n.api.symbols()); err != nil {
		return nil, fmt.Errorf("%w: %w", driver.ErrNoCompiler, err)
	}
	var major, minor int32
	if err := n.check(n.api.nvrtcVersion(&major, &minor), "nvrtcVersion", ""); err != nil {
		return nil, fmt.Errorf("%w: %w", driver.ErrNoCompiler, err)
	}
	n.version = fmt.Sprintf("nvrtc %d.%d", major, minor)
	n.serial = major < 12
	if n.api.nvrtcGetNumSupportedArchs != nil && n.api.nvrtcGetSupportedArchs != nil {
		var cnt int32
		if n.api.nvrtcGetNumSupportedArchs(&cnt) == 0 && cnt > 0 {
			archs := make([]int32, cnt)
			if n.api.nvrtcGetSupportedArchs(&archs[0]) == 0 {
				n.supported = make([]int, cnt)
				for i, a := range archs {
					n.supported[i] = int(a)
				}
				sort.Ints(n.supported)
			}
		}
	}
	return n, nil
}

func (n *nvrtc) check(r int32, call, subject string) error {
	if r == 0 {
		return nil
	}
	name := goString(n.api.nvrtcGetErrorString(r))
	return &Error{Call: call, Subject: subject, Code: int(r), Name: name}
}

// cArena makes NUL-terminated copies of Go strings and arrays of pointers to them, pinned so
// that the memory handed to C stays put and alive until free.
type cArena struct{ pin runtime.Pinner }

func (a *cArena) str(s string) unsafe.Pointer {
	b := make([]byte, len(s)+1)
	copy(b, s)
	a.pin.Pin(&b[0])
	return unsafe.Pointer(&b[0])
}

func (a *cArena) strs(ss []string) unsafe.Pointer {
	if len(ss) == 0 {
		return nil
	}
	arr := make([]uintptr, len(ss))
	for i, s := range ss {
		arr[i] = uintptr(a.str(s))
	}
	a.pin.Pin(&arr[0])
	return unsafe.Pointer(&arr[0])
}

func (a *cArena) free() { a.pin.Unpin() }

// compile builds src with opts and returns a CUBIN (format "cubin") or NUL-terminated PTX
// ("ptx"). A failed compilation is a *driver.CompileError carrying NVRTC's log.
func (n *nvrtc) compile(src driver.Source, target, format string, opts []string) ([]byte, error) {
	if n.serial {
		n.mu.Lock()
		defer n.mu.Unlock()
	}

	var arena cArena
	defer arena.free()
	names := make([]string, 0, len(src.Headers))
	for h := range src.Headers {
		names = append(names, h)
	}
	sort.Strings(names)
	texts := make([]string, len(names))
	for i, h := range names {
		texts[i] = src.Headers[h]
	}

	var prog uintptr
	r := n.api.nvrtcCreateProgram(&prog, arena.str(src.Code), arena.str(src.Name),
		int32(len(names)), arena.strs(texts), arena.strs(names))
	if err := n.check(r, "nvrtcCreateProgram", src.Name); err != nil {
		return nil, err
	}
	defer n.api.nvrtcDestroyProgram(&prog)

	r = n.api.nvrtcCompileProgram(prog, int32(len(opts)), arena.strs(opts))
	log := n.log(prog)
	if err := n.check(r, "nvrtcCompileProgram", ""); err != nil {
		return nil, &driver.CompileError{Backend: "cuda", Source: src.Name, Target: target,
			Log: log, Diagnostics: driver.ParseDiagnostics(log), Err: err}
	}

	getSize, get, call := n.api.nvrtcGetPTXSize, n.api.nvrtcGetPTX, "nvrtcGetPTX"
	if format == "cubin" {
		if n.api.nvrtcGetCUBIN == nil || n.api.nvrtcGetCUBINSize == nil {
			return nil, fmt.Errorf("cuda: %s cannot emit CUBIN (nvrtcGetCUBIN missing)", n.version)
		}
		getSize, get, call = n.api.nvrtcGetCUBINSize, n.api.nvrtcGetCUBIN, "nvrtcGetCUBIN"
	}
	var size uintptr
	if err := n.check(getSize(prog, &size), call+"Size", src.Name); err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, fmt.Errorf("cuda: %s(%s) returned an empty image", call, src.Name)
	}
	img := make([]byte, size)
	if err := n.check(get(prog, &img[0]), call, src.Name); err != nil {
		return nil, err
	}
	if format == "ptx" && img[len(img)-1] != 0 {
		img = append(img, 0) // cuModuleLoadData wants NUL-terminated PTX
	}
	return img, nil
}

// log returns the program log (warnings, or errors with file(line) positions).
func (n *nvrtc) log(prog uintptr) string {
	var size uintptr
	if n.api.nvrtcGetProgramLogSize(prog, &size) != 0 || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if n.api.nvrtcGetProgramLog(prog, &buf[0]) != 0 {
		return ""
	}
	return cString(buf)
}

// GeneratePTX compiles src to PTX for a virtual architecture such as "compute_75" with the
// NVRTC found on this machine (no GPU needed). It returns the PTX without its NUL terminator
// and the compiler version, for internal/gpu/cmd/genptx.
func GeneratePTX(src driver.Source, target string) (ptx []byte, compiler string, err error) {
	n, err := loadNVRTC(os.Getenv)
	if err != nil {
		return nil, "", err
	}
	img, err := n.compile(src, target, "ptx", compileOptions(target, src.Options))
	if err != nil {
		return nil, "", err
	}
	for len(img) > 0 && img[len(img)-1] == 0 {
		img = img[:len(img)-1]
	}
	return img, n.version, nil
}

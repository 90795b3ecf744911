//go:build linux || darwin

package emu

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// Prelude is the header that kernel units compile against on this backend, in place of the
// backend-neutral prelude they include.
const Prelude = "prelude_emu.h"

// Config configures New.
type Config struct {
	// CacheDir holds the compiled units, keyed by source hash: "" means a directory "emu"
	// beside the default kernel cache, driver.CacheOff a temporary directory removed by Close.
	CacheDir string
	// NoGraphs makes BeginCapture return driver.ErrUnsupported, as a backend without graph
	// capture does (Metal's).
	NoGraphs bool
	// NoEvents makes NewEvent return driver.ErrUnsupported: no timing events.
	NoEvents bool
}

// Device is the emulated device. Every method is safe for concurrent use.
type Device struct {
	mu       sync.Mutex
	cfg      Config
	cxx      string // the C++ compiler's path
	dir      string
	tempDir  bool // dir is removed by Close
	bufs     map[*buffer]struct{}
	capture  *graph // non-nil while capturing: launches and memsets are recorded, not run
	closed   bool
	compiled map[string]*module // by cache key, so that a unit is loaded once per device
}

// Open opens the emulator with the device layer's options (only CacheDir applies).
func Open(o driver.Options) (*Device, error) {
	return New(Config{CacheDir: o.CacheDir})
}

// FindCompiler returns the C++ compiler the emulator uses: g++, else clang++, on PATH. Without
// one the error wraps driver.ErrNoDevice and names what is missing.
func FindCompiler() (string, error) {
	var errs []string
	for _, name := range []string{"g++", "clang++"} {
		p, err := exec.LookPath(name)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err.Error())
	}
	return "", fmt.Errorf("emu: the host emulator needs a C++ compiler (g++ or clang++) on PATH to build the kernels, and none was found (%s): %w",
		strings.Join(errs, "; "), driver.ErrNoDevice)
}

// New opens the emulator.
func New(c Config) (*Device, error) {
	cxx, err := FindCompiler()
	if err != nil {
		return nil, err
	}
	d := &Device{cfg: c, cxx: cxx, bufs: map[*buffer]struct{}{}, compiled: map[string]*module{}}
	switch c.CacheDir {
	case driver.CacheOff:
		if d.dir, err = os.MkdirTemp("", "rlxsplat-emu-"); err != nil {
			return nil, fmt.Errorf("emu: a directory for the compiled kernels: %w", err)
		}
		d.tempDir = true
	case "":
		base, err := driver.DefaultCacheDir()
		if err != nil {
			return nil, fmt.Errorf("emu: no cache directory for the compiled kernels (set %s): %w", "RLXSPLAT_KERNEL_CACHE", err)
		}
		d.dir = filepath.Join(base, "emu")
	default:
		d.dir = c.CacheDir
	}
	return d, nil
}

// graph is a recorded sequence of launches and memsets, replayed in order. Its shape is the
// sequence of operations and kernels, what CUDA's graph update requires to be unchanged.
type graph struct {
	dev    *Device
	shape  []string
	ops    []func() error
	closed bool
}

func (g *graph) Launch() error {
	if g.closed {
		return driver.ErrClosed
	}
	for _, op := range g.ops {
		if err := op(); err != nil {
			return err
		}
	}
	return nil
}

func (g *graph) Update(from driver.Graph) error {
	f, ok := from.(*graph)
	if !ok || f.dev != g.dev {
		return driver.ErrForeignHandle
	}
	if g.closed || f.closed {
		return driver.ErrClosed
	}
	if !slices.Equal(g.shape, f.shape) {
		return fmt.Errorf("emu: graph update: %w", driver.ErrGraphChanged)
	}
	g.ops, f.closed = f.ops, true
	return nil
}

func (g *graph) Close() error { g.closed = true; return nil }

// record adds op to the capture and reports true, or reports false when not capturing.
func (d *Device) record(shape string, op func() error) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capture == nil {
		return false
	}
	d.capture.shape = append(d.capture.shape, shape)
	d.capture.ops = append(d.capture.ops, op)
	return true
}

func (d *Device) capturing() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.capture != nil
}

type buffer struct {
	mapping []byte // the whole mapping, guard page included
	data    []byte // the buffer: it ends at the guard page
	freed   bool
}

func (b *buffer) Size() int { return len(b.data) }

type module struct {
	lib  uintptr
	info driver.ModuleInfo
}

type kernel struct {
	name string
	fn   uintptr
}

func (k *kernel) Name() string { return k.name }

type event struct{ t time.Time }

func (*event) Close() error { return nil }

// Info says what the device is.
func (d *Device) Info() driver.Info {
	return driver.Info{Backend: "emu", Name: "host emulation", Arch: runtime.GOARCH, Compiler: filepath.Base(d.cxx)}
}

// MemInfo reports a nominal 16 GiB: host memory is not the emulator's to budget.
func (d *Device) MemInfo() (int64, int64, error) { return 1 << 34, 1 << 34, nil }

// Alloc maps n bytes followed by a guard page.
func (d *Device) Alloc(n int) (driver.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("emu: alloc %d bytes: negative size", n)
	}
	page := os.Getpagesize()
	body := (n + 15) / 16 * 16
	size := (body+page-1)/page*page + page
	m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, &driver.OOMError{Backend: "emu", Requested: int64(n), Free: -1, Total: -1, Err: fmt.Errorf("mmap %d bytes: %w", size, err)}
	}
	if err := syscall.Mprotect(m[size-page:], syscall.PROT_NONE); err != nil {
		syscall.Munmap(m)
		return nil, fmt.Errorf("emu: guard page: %w", err)
	}
	// Start the buffer 16-aligned so that it ends within 15 bytes of the guard page.
	start := size - page - body
	b := &buffer{mapping: m, data: m[start : start+n : start+n]}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		syscall.Munmap(m)
		return nil, driver.ErrClosed
	}
	d.bufs[b] = struct{}{}
	return b, nil
}

func (d *Device) own(b driver.Buffer) (*buffer, error) {
	eb, ok := b.(*buffer)
	if !ok || eb == nil {
		return nil, driver.ErrForeignHandle
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if eb.freed || d.closed {
		return nil, driver.ErrClosed
	}
	if _, mine := d.bufs[eb]; !mine {
		return nil, driver.ErrForeignHandle
	}
	return eb, nil
}

// Free unmaps b.
func (d *Device) Free(b driver.Buffer) error {
	eb, err := d.own(b)
	if err != nil {
		return err
	}
	d.mu.Lock()
	eb.freed = true
	delete(d.bufs, eb)
	d.mu.Unlock()
	return syscall.Munmap(eb.mapping)
}

// Upload copies src into dst at off.
func (d *Device) Upload(dst driver.Buffer, off int, src []byte) error {
	if d.capturing() {
		return fmt.Errorf("emu: upload during graph capture (host copies are not capturable)")
	}
	b, err := d.own(dst)
	if err != nil {
		return err
	}
	if off < 0 || off+len(src) > len(b.data) {
		return fmt.Errorf("emu: upload %d bytes at %d into a buffer of %d", len(src), off, len(b.data))
	}
	copy(b.data[off:], src)
	return nil
}

// Download copies from src at off into dst.
func (d *Device) Download(dst []byte, src driver.Buffer, off int) error {
	if d.capturing() {
		return fmt.Errorf("emu: download during graph capture (host copies are not capturable)")
	}
	b, err := d.own(src)
	if err != nil {
		return err
	}
	if off < 0 || off+len(dst) > len(b.data) {
		return fmt.Errorf("emu: download %d bytes at %d from a buffer of %d", len(dst), off, len(b.data))
	}
	copy(dst, b.data[off:])
	return nil
}

// DownloadAfter is Download: the emulator runs every launch to completion as it is queued.
func (d *Device) DownloadAfter(dst []byte, src driver.Buffer, off int, _ driver.Event) error {
	return d.Download(dst, src, off)
}

// Memset sets n bytes of dst from off to v.
func (d *Device) Memset(dst driver.Buffer, off, n int, v byte) error {
	if d.record("memset", func() error { return d.memset(dst, off, n, v) }) {
		return nil
	}
	return d.memset(dst, off, n, v)
}

func (d *Device) memset(dst driver.Buffer, off, n int, v byte) error {
	b, err := d.own(dst)
	if err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > len(b.data) {
		return fmt.Errorf("emu: memset %d bytes at %d in a buffer of %d", n, off, len(b.data))
	}
	s := b.data[off : off+n]
	for i := range s {
		s[i] = v
	}
	return nil
}

var kernelRe = regexp.MustCompile(`KERNEL\s+(?:BOUNDS\([^)]*\)\s+)?(\w+)\s*\(`)

// legacyPrelude is the CUDA prelude's name: a unit that includes it by name gets the
// emulator's prelude in its place.
const legacyPrelude = "prelude_cuda.h"

// Compile builds src into a shared library (or loads it from the cache) against the
// emulator's prelude.
func (d *Device) Compile(src driver.Source) (driver.Module, error) {
	emuPrelude, err := fs.ReadFile(shaders.Sources(), Prelude)
	if err != nil {
		return nil, fmt.Errorf("emu: %s: %w", Prelude, err)
	}
	hash := src.Hash()
	// The source's hash covers the prelude it was read with; key the cache on the emulator's
	// prelude and the compiler too, so that an edit to either rebuilds.
	key := sha256.Sum256([]byte(hash + "\x00" + string(emuPrelude) + "\x00" + d.cxx))
	keyHex := hex.EncodeToString(key[:8])
	d.mu.Lock()
	if m, ok := d.compiled[keyHex]; ok {
		d.mu.Unlock()
		return m, nil
	}
	d.mu.Unlock()
	dir := filepath.Join(d.dir, keyHex)
	so := filepath.Join(dir, "unit.so")
	origin := driver.OriginCache
	if _, err := os.Stat(so); err != nil {
		origin = driver.OriginCompiled
		if err := d.build(src, dir, so, emuPrelude); err != nil {
			return nil, err
		}
	}
	lib, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("emu: load %s (built from %s): %w", so, src.Name, err)
	}
	m := &module{lib: lib, info: driver.ModuleInfo{Source: src.Name, Hash: hash, Target: "host", Format: "so", Origin: origin}}
	d.mu.Lock()
	d.compiled[keyHex] = m
	d.mu.Unlock()
	return m, nil
}

// build writes the unit, its headers and a wrapper that exports each kernel's launcher, and
// compiles them into so.
func (d *Device) build(src driver.Source, dir, so string, emuPrelude []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("emu: %s: %w", src.Name, err)
	}
	for name, text := range src.Headers {
		if name == legacyPrelude || name == driver.PreludeInclude {
			text = string(emuPrelude)
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		// Generated entry wrappers are included as "entries/UNIT.h".
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("emu: %s: header %s: %w", src.Name, name, err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return fmt.Errorf("emu: %s: header %s: %w", src.Name, name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, src.Name), []byte(src.Code), 0o644); err != nil {
		return fmt.Errorf("emu: %s: %w", src.Name, err)
	}
	wrap := fmt.Sprintf("#include %q\n", src.Name)
	for _, m := range kernelRe.FindAllStringSubmatch(src.Code, -1) {
		wrap += fmt.Sprintf("extern \"C\" void emu_launch_%s(const u32* dims, void** args) { emu::launch(%s, dims, args); }\n", m[1], m[1])
	}
	wfile := filepath.Join(dir, "wrap.cpp")
	if err := os.WriteFile(wfile, []byte(wrap), 0o644); err != nil {
		return fmt.Errorf("emu: %s: %w", src.Name, err)
	}
	// A temporary name per process, renamed into place: concurrent test binaries share the
	// cache.
	tmp := fmt.Sprintf("%s.%d.tmp", so, os.Getpid())
	args := append([]string{"-std=c++17", "-O1", "-g", "-fPIC", "-shared", "-ffp-contract=off",
		"-fno-strict-aliasing", "-o", tmp, wfile}, src.Options...)
	if out, err := exec.Command(d.cxx, args...).CombinedOutput(); err != nil {
		return &driver.CompileError{Backend: "emu", Source: src.Name, Log: string(out), Err: err}
	}
	if err := os.Rename(tmp, so); err != nil {
		return fmt.Errorf("emu: %s: %w", src.Name, err)
	}
	return nil
}

func (m *module) Kernel(name string) (driver.Kernel, error) {
	fn, err := purego.Dlsym(m.lib, "emu_launch_"+name)
	if err != nil {
		return nil, fmt.Errorf("emu: kernel %s not in %s: %w", name, m.info.Source, err)
	}
	return &kernel{name: name, fn: fn}, nil
}

func (m *module) Info() driver.ModuleInfo { return m.info }

// Close keeps the library loaded: a device loads each unit once and reuses it.
func (m *module) Close() error { return nil }

// Launch runs k at once, or records it while capturing.
func (d *Device) Launch(k driver.Kernel, grid, block driver.Dim3, shared int, args ...driver.Arg) error {
	ek, ok := k.(*kernel)
	if !ok || ek == nil {
		return driver.ErrForeignHandle
	}
	args = slices.Clone(args)
	if d.record("launch "+ek.name, func() error { return d.launch(ek, grid, block, args) }) {
		return nil
	}
	return d.launch(ek, grid, block, args)
}

// launchMu runs one launch at a time in the process: a unit's runtime keeps its block's state
// in statics (shaders/emu_runtime.h), and devices that load the same unit from the same cache
// share its library, so launches on two devices at once (data-parallel ranks, internal/multi)
// would run in the same statics.
var launchMu sync.Mutex

func (d *Device) launch(ek *kernel, grid, block driver.Dim3, args []driver.Arg) error {
	grid, block = grid.Norm(), block.Norm()
	if block[1] != 1 || block[2] != 1 {
		return fmt.Errorf("emu: launch %s: only 1-D blocks are emulated (block %v)", ek.name, block)
	}
	packed, err := driver.Pack(args, func(b driver.Buffer, off int) (uint64, error) {
		eb, err := d.own(b)
		if err != nil {
			return 0, err
		}
		if len(eb.data) == 0 {
			return 0, nil
		}
		return uint64(uintptr(unsafe.Pointer(&eb.data[0]))) + uint64(off), nil
	})
	if err != nil {
		return fmt.Errorf("emu: launch %s: %w", ek.name, err)
	}
	dims := []uint32{grid[0], grid[1], grid[2], block[0], block[1], block[2]}
	var pin runtime.Pinner
	defer pin.Unpin()
	ptrs := make([]uintptr, max(len(args), 1))
	if len(args) > 0 {
		pin.Pin(&packed.Words[0])
		for i := range args {
			ptrs[i] = uintptr(unsafe.Pointer(&packed.Bytes(i)[0]))
		}
	}
	pin.Pin(&ptrs[0])
	pin.Pin(&dims[0])
	launchMu.Lock()
	purego.SyscallN(ek.fn, uintptr(unsafe.Pointer(&dims[0])), uintptr(unsafe.Pointer(&ptrs[0])))
	launchMu.Unlock()
	return nil
}

// Sync returns at once: every launch has run when Launch returns.
func (d *Device) Sync() error { return nil }

// NewEvent returns a wall-clock event, or ErrUnsupported when events are off (Config).
func (d *Device) NewEvent() (driver.Event, error) {
	if d.cfg.NoEvents {
		return nil, fmt.Errorf("emu: events are switched off: %w", driver.ErrUnsupported)
	}
	return &event{}, nil
}

// Record stamps e with the wall clock.
func (d *Device) Record(e driver.Event) error {
	ev, ok := e.(*event)
	if !ok || ev == nil {
		return driver.ErrForeignHandle
	}
	if d.capturing() {
		return fmt.Errorf("emu: event recorded during graph capture (a stage boundary cannot be timed inside a graph)")
	}
	ev.t = time.Now()
	return nil
}

// ElapsedMs is the wall time between two recorded events.
func (d *Device) ElapsedMs(start, end driver.Event) (float32, error) {
	s, ok1 := start.(*event)
	e, ok2 := end.(*event)
	if !ok1 || !ok2 || s == nil || e == nil {
		return 0, driver.ErrForeignHandle
	}
	return float32(e.t.Sub(s.t).Seconds() * 1000), nil
}

// BeginCapture starts recording, or returns ErrUnsupported when graphs are off (Config).
func (d *Device) BeginCapture() error {
	if d.cfg.NoGraphs {
		return fmt.Errorf("emu: graph capture is switched off: %w", driver.ErrUnsupported)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capture != nil {
		return fmt.Errorf("emu: BeginCapture: already capturing")
	}
	d.capture = &graph{dev: d}
	return nil
}

// EndCapture returns the recorded graph.
func (d *Device) EndCapture() (driver.Graph, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.capture
	if g == nil {
		return nil, fmt.Errorf("emu: EndCapture without BeginCapture")
	}
	d.capture = nil
	return g, nil
}

// Close unmaps every buffer and removes a temporary kernel directory.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	for b := range d.bufs {
		b.freed = true
		syscall.Munmap(b.mapping)
	}
	d.bufs = nil
	if d.tempDir {
		return os.RemoveAll(d.dir)
	}
	return nil
}

var _ driver.Device = (*Device)(nil)

//go:build linux || darwin

package fused

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
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// emuDevice is a gpu.Device that runs the shared kernel bodies on the host: each unit is
// compiled with g++ against shaders/prelude_emu.h (in place of prelude_cuda.h) into a shared
// library that purego loads. It is for developing and checking the kernels on machines without
// a GPU (RLXSPLAT_FUSED_EMU=1); it is slow, single-threaded and exact (no fused multiply-add).
//
// Buffers are mmap'ed with a PROT_NONE page right after their end, so that a kernel reading or
// writing past a buffer faults at once instead of corrupting a neighbour.
type emuDevice struct {
	mu      sync.Mutex
	dir     string
	bufs    map[*emuBuf]struct{}
	capture *emuGraph // non-nil while capturing: launches and memsets are recorded, not run
}

// emuGraph is a recorded sequence of launches and memsets, replayed in order. Its shape is the
// sequence of operations and kernels, what CUDA's graph update requires to be unchanged.
type emuGraph struct {
	dev    *emuDevice
	shape  []string
	ops    []func() error
	closed bool
}

func (g *emuGraph) Launch() error {
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

func (g *emuGraph) Update(from driver.Graph) error {
	f, ok := from.(*emuGraph)
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

func (g *emuGraph) Close() error { g.closed = true; return nil }

// record adds op to the capture and reports true, or reports false when not capturing.
func (d *emuDevice) record(shape string, op func() error) bool {
	if d.capture == nil {
		return false
	}
	d.capture.shape = append(d.capture.shape, shape)
	d.capture.ops = append(d.capture.ops, op)
	return true
}

type emuBuf struct {
	mapping []byte // the whole mapping, guard page included
	data    []byte // the buffer: it ends at the guard page
	freed   bool
}

func (b *emuBuf) Size() int { return len(b.data) }

type emuModule struct {
	lib  uintptr
	info driver.ModuleInfo
}

type emuKernel struct {
	name string
	fn   uintptr
}

func (k *emuKernel) Name() string { return k.name }

type emuEvent struct{ t time.Time }

func (*emuEvent) Close() error { return nil }

func newEmuDevice(dir string) (*emuDevice, error) {
	if _, err := exec.LookPath("g++"); err != nil {
		return nil, fmt.Errorf("emu: no g++ to compile the kernels: %w", err)
	}
	return &emuDevice{dir: dir, bufs: map[*emuBuf]struct{}{}}, nil
}

func (d *emuDevice) Info() driver.Info {
	return driver.Info{Backend: "emu", Name: "host emulation", Arch: runtime.GOARCH, Compiler: "g++"}
}

func (d *emuDevice) MemInfo() (int64, int64, error) { return 1 << 34, 1 << 34, nil }

func (d *emuDevice) Alloc(n int) (driver.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("emu: alloc %d bytes", n)
	}
	page := os.Getpagesize()
	body := (n + 15) / 16 * 16
	size := (body+page-1)/page*page + page
	m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("emu: mmap %d bytes: %w", size, err)
	}
	if err := syscall.Mprotect(m[size-page:], syscall.PROT_NONE); err != nil {
		return nil, fmt.Errorf("emu: guard page: %w", err)
	}
	// Start the buffer 16-aligned so that it ends within 15 bytes of the guard page.
	start := size - page - body
	b := &emuBuf{mapping: m, data: m[start : start+n : start+n]}
	d.mu.Lock()
	d.bufs[b] = struct{}{}
	d.mu.Unlock()
	return b, nil
}

func (d *emuDevice) own(b driver.Buffer) (*emuBuf, error) {
	eb, ok := b.(*emuBuf)
	if !ok || eb == nil {
		return nil, driver.ErrForeignHandle
	}
	if eb.freed {
		return nil, driver.ErrClosed
	}
	return eb, nil
}

func (d *emuDevice) Free(b driver.Buffer) error {
	eb, err := d.own(b)
	if err != nil {
		return err
	}
	eb.freed = true
	d.mu.Lock()
	delete(d.bufs, eb)
	d.mu.Unlock()
	return syscall.Munmap(eb.mapping)
}

func (d *emuDevice) Upload(dst driver.Buffer, off int, src []byte) error {
	if d.capture != nil {
		return fmt.Errorf("emu: upload during graph capture")
	}
	b, err := d.own(dst)
	if err != nil {
		return err
	}
	if off < 0 || off+len(src) > len(b.data) {
		return fmt.Errorf("emu: upload %d bytes at %d into %d", len(src), off, len(b.data))
	}
	copy(b.data[off:], src)
	return nil
}

func (d *emuDevice) Download(dst []byte, src driver.Buffer, off int) error {
	if d.capture != nil {
		return fmt.Errorf("emu: download during graph capture")
	}
	b, err := d.own(src)
	if err != nil {
		return err
	}
	if off < 0 || off+len(dst) > len(b.data) {
		return fmt.Errorf("emu: download %d bytes at %d from %d", len(dst), off, len(b.data))
	}
	copy(dst, b.data[off:])
	return nil
}

// DownloadAfter is Download: the emulator runs every launch to completion as it is queued.
func (d *emuDevice) DownloadAfter(dst []byte, src driver.Buffer, off int, _ driver.Event) error {
	return d.Download(dst, src, off)
}

func (d *emuDevice) Memset(dst driver.Buffer, off, n int, v byte) error {
	if d.record("memset", func() error { return d.memset(dst, off, n, v) }) {
		return nil
	}
	return d.memset(dst, off, n, v)
}

func (d *emuDevice) memset(dst driver.Buffer, off, n int, v byte) error {
	b, err := d.own(dst)
	if err != nil {
		return err
	}
	if off < 0 || n < 0 || off+n > len(b.data) {
		return fmt.Errorf("emu: memset %d bytes at %d in %d", n, off, len(b.data))
	}
	s := b.data[off : off+n]
	for i := range s {
		s[i] = v
	}
	return nil
}

var kernelRe = regexp.MustCompile(`KERNEL\s+(?:BOUNDS\([^)]*\)\s+)?(\w+)\s*\(`)

func (d *emuDevice) Compile(src driver.Source) (driver.Module, error) {
	hash := src.Hash()
	emuPrelude, err := fs.ReadFile(shaders.Sources(), "prelude_emu.h")
	if err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	emuRuntime, err := fs.ReadFile(shaders.Sources(), "emu_runtime.h")
	if err != nil {
		return nil, fmt.Errorf("emu: %w", err)
	}
	// The unit is built against prelude_emu.h and emu_runtime.h, which the source's hash does
	// not cover (it names prelude_cuda.h): key the cache on all, so that an edit to the
	// emulator rebuilds.
	key := sha256.Sum256([]byte(hash + "\x00" + string(emuPrelude) + "\x00" + string(emuRuntime)))
	dir := filepath.Join(d.dir, hex.EncodeToString(key[:8]))
	so := filepath.Join(dir, "unit.so")
	if _, err := os.Stat(so); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		for name, text := range src.Headers {
			if name == "prelude_cuda.h" {
				text = string(emuPrelude)
			}
			// Generated entry wrappers are included as "entries/UNIT.h".
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				return nil, err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "emu_runtime.h"), emuRuntime, 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, src.Name), []byte(src.Code), 0o644); err != nil {
			return nil, err
		}
		wrap := fmt.Sprintf("#include %q\n", src.Name)
		for _, m := range kernelRe.FindAllStringSubmatch(src.Code, -1) {
			wrap += fmt.Sprintf("extern \"C\" void emu_launch_%s(const u32* dims, void** args) { emu::launch(%s, dims, args); }\n", m[1], m[1])
		}
		wfile := filepath.Join(dir, "wrap.cpp")
		if err := os.WriteFile(wfile, []byte(wrap), 0o644); err != nil {
			return nil, err
		}
		tmp := so + ".tmp"
		cmd := exec.Command("g++", "-std=c++17", "-O1", "-g", "-fPIC", "-shared", "-ffp-contract=off",
			"-fno-strict-aliasing", "-o", tmp, wfile)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, &driver.CompileError{Backend: "emu", Source: src.Name, Log: string(out), Err: err}
		}
		if err := os.Rename(tmp, so); err != nil {
			return nil, err
		}
	}
	lib, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("emu: load %s: %w", so, err)
	}
	return &emuModule{lib: lib, info: driver.ModuleInfo{Source: src.Name, Hash: hash, Target: "host", Format: "so", Origin: driver.OriginCompiled}}, nil
}

func (m *emuModule) Kernel(name string) (driver.Kernel, error) {
	fn, err := purego.Dlsym(m.lib, "emu_launch_"+name)
	if err != nil {
		return nil, fmt.Errorf("emu: kernel %s not in %s: %w", name, m.info.Source, err)
	}
	return &emuKernel{name: name, fn: fn}, nil
}

func (m *emuModule) Info() driver.ModuleInfo { return m.info }
func (m *emuModule) Close() error            { return nil }

func (d *emuDevice) Launch(k driver.Kernel, grid, block driver.Dim3, shared int, args ...driver.Arg) error {
	ek, ok := k.(*emuKernel)
	if !ok {
		return driver.ErrForeignHandle
	}
	args = slices.Clone(args)
	if d.record("launch "+ek.name, func() error { return d.launch(ek, grid, block, args) }) {
		return nil
	}
	return d.launch(ek, grid, block, args)
}

func (d *emuDevice) launch(ek *emuKernel, grid, block driver.Dim3, args []driver.Arg) error {
	grid, block = grid.Norm(), block.Norm()
	if block[1] != 1 || block[2] != 1 {
		return fmt.Errorf("emu: launch %s: only 1-D blocks are emulated", ek.name)
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
	purego.SyscallN(ek.fn, uintptr(unsafe.Pointer(&dims[0])), uintptr(unsafe.Pointer(&ptrs[0])))
	return nil
}

func (d *emuDevice) Sync() error { return nil }

func (d *emuDevice) NewEvent() (driver.Event, error) { return &emuEvent{}, nil }

func (d *emuDevice) Record(e driver.Event) error {
	if d.capture != nil {
		return fmt.Errorf("emu: event recorded during graph capture (a stage boundary cannot be timed inside a graph)")
	}
	e.(*emuEvent).t = time.Now()
	return nil
}

func (d *emuDevice) ElapsedMs(start, end driver.Event) (float32, error) {
	return float32(end.(*emuEvent).t.Sub(start.(*emuEvent).t).Seconds() * 1000), nil
}

func (d *emuDevice) BeginCapture() error {
	if d.capture != nil {
		return fmt.Errorf("emu: BeginCapture: already capturing")
	}
	d.capture = &emuGraph{dev: d}
	return nil
}

func (d *emuDevice) EndCapture() (driver.Graph, error) {
	g := d.capture
	if g == nil {
		return nil, fmt.Errorf("emu: EndCapture without BeginCapture")
	}
	d.capture = nil
	return g, nil
}
func (d *emuDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for b := range d.bufs {
		b.freed = true
		syscall.Munmap(b.mapping)
	}
	d.bufs = nil
	return nil
}

var _ gpu.Device = (*emuDevice)(nil)

// emuCacheDir is a per-user directory for the compiled units, keyed by source hash, so that
// repeated test runs do not recompile.
func emuCacheDir() string {
	h := sha256.Sum256([]byte(os.Getenv("USER")))
	return filepath.Join(os.TempDir(), "rlxsplat-emu-"+hex.EncodeToString(h[:4]))
}

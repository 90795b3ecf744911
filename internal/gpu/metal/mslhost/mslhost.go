//go:build linux || darwin

// Package mslhost compiles MSL text for the host, so that the fake Metal runtime
// (internal/gpu/metal/fakemtl) runs the very kernels the Metal backend would hand to Apple's
// compiler: the text is built unchanged by g++ against shaders/metal_host.h, a stand-in for
// <metal_stdlib> that gives Metal's address spaces, atomics, barriers and SIMD-group functions
// their meaning on the host emulator's fibers (shaders/emu_runtime.h). Each kernel gets a
// launcher that binds [[buffer(i)]] slots and [[threadgroup(i)]] memory by index and hands
// every thread its Metal builtins, parsed from the kernel's own signature.
//
// It checks semantics (the bodies under Metal's vocabulary, the wrappers' argument binding,
// the host code's encoding), not Apple's compiler: what only a Mac reveals is listed in
// ../shared/docs/metal.md and the README.
//
// Non-goals: speed (one fiber per thread, blocks one after another); 2-D/3-D threadgroups.
package mslhost

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
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/fakemtl"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// Compiler is a fakemtl.Compiler that builds MSL for the host. Dir caches the compiled
// libraries by the hash of everything that goes into them.
type Compiler struct {
	Dir string
	// CXX is the C++ compiler; empty means g++, else clang++, whichever is on PATH first.
	CXX string
}

// New returns a Compiler caching under dir, or an error naming what is missing.
func New(dir string) (*Compiler, error) {
	c := &Compiler{Dir: dir}
	if _, err := c.cxx(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Compiler) cxx() (string, error) {
	if c.CXX != "" {
		return exec.LookPath(c.CXX)
	}
	for _, name := range []string{"g++", "clang++"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("mslhost: no C++ compiler (g++ or clang++) on PATH to build MSL for the host")
}

// kernelRe finds a kernel's declaration with the attributes before it (group 1) and its name
// (group 2); its parameter list is read by scanning brackets.
var kernelRe = regexp.MustCompile(`(?m)^[ \t]*((?:\[\[[^\]]*\]\][ \t]*)*)kernel\s+void\s+(\w+)\s*\(`)

// param is one kernel parameter: its declared type and how the launcher fills it.
type param struct {
	typ  string // the declaration without its name and attribute, e.g. "device const u32*"
	attr string // the Metal attribute, e.g. "buffer(3)", "thread_position_in_threadgroup"
}

type kernelDecl struct {
	name       string
	params     []param
	maxThreads int
}

// builtins maps a Metal builtin attribute to the launcher's expression for it (th is the
// emulator's emu::Thr of the thread).
var builtins = map[string]string{
	"thread_position_in_threadgroup": "th.tid",
	"threadgroup_position_in_grid":   "th.bid",
	"threads_per_threadgroup":        "th.bdim",
	"threadgroups_per_grid":          "th.nblocks",
	"thread_index_in_simdgroup":      "th.lane",
	"simdgroup_index_in_threadgroup": "th.warp",
	"thread_position_in_grid":        "(th.bid * th.bdim + th.tid)",
	"threads_per_grid":               "(th.nblocks * th.bdim)",
	"threads_per_simdgroup":          "32u",
	"simdgroups_per_threadgroup":     "((th.bdim + 31u) / 32u)",
}

var (
	attrRe      = regexp.MustCompile(`\[\[\s*([^\]]+?)\s*\]\]`)
	slotRe      = regexp.MustCompile(`^(buffer|threadgroup)\((\d+)\)$`)
	maxThreadRe = regexp.MustCompile(`max_total_threads_per_threadgroup\((\d+)\)`)
	identEndRe  = regexp.MustCompile(`\s*\b(\w+)\s*$`)
)

// parseKernels reads every kernel's parameters from the MSL text.
func parseKernels(msl string) ([]kernelDecl, error) {
	var out []kernelDecl
	for _, m := range kernelRe.FindAllStringSubmatchIndex(msl, -1) {
		name := msl[m[4]:m[5]]
		open := m[1] - 1
		end, err := matchParen(msl, open)
		if err != nil {
			return nil, fmt.Errorf("kernel %s: %w", name, err)
		}
		k := kernelDecl{name: name, maxThreads: 1024} // Apple GPUs' threadgroup limit
		if mt := maxThreadRe.FindStringSubmatch(msl[m[2]:m[3]]); mt != nil {
			k.maxThreads, _ = strconv.Atoi(mt[1])
		}
		for _, p := range splitTop(msl[open+1 : end]) {
			p = strings.TrimSpace(p)
			if p == "" || p == "void" {
				continue
			}
			a := attrRe.FindStringSubmatchIndex(p)
			if a == nil {
				return nil, fmt.Errorf("kernel %s: parameter %q has no Metal attribute", name, p)
			}
			decl := strings.TrimSpace(p[:a[0]])
			attr := p[a[2]:a[3]]
			id := identEndRe.FindStringSubmatchIndex(decl)
			if id == nil {
				return nil, fmt.Errorf("kernel %s: parameter %q has no name", name, p)
			}
			k.params = append(k.params, param{typ: strings.TrimSpace(decl[:id[2]]), attr: attr})
		}
		out = append(out, k)
	}
	return out, nil
}

// matchParen returns the index of the parenthesis closing the one at open.
func matchParen(s string, open int) (int, error) {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced parameter list")
}

// splitTop splits a parameter list at the commas outside brackets and template arguments.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '<':
			depth++
		case ')', ']', '>':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// launchers writes, for every kernel, `extern "C" void mslhost_launch_NAME(dims, bufs, tgs)`.
func launchers(ks []kernelDecl) (string, error) {
	var b strings.Builder
	b.WriteString(`
// Launchers written by internal/gpu/metal/mslhost for the host build of this MSL text.
namespace mslhost {
template <class T> struct Arg;
template <class T> struct Arg<T*> {
    static T* get(void* p) { return (T*)p; }
};
template <class T> struct Arg<T&> {
    static T& get(void* p) { return *(T*)p; }
};
} // namespace mslhost
`)
	for _, k := range ks {
		var args []string
		for _, p := range k.params {
			if sm := slotRe.FindStringSubmatch(p.attr); sm != nil {
				src := "bufs"
				if sm[1] == "threadgroup" {
					src = "tgs"
				}
				args = append(args, fmt.Sprintf("mslhost::Arg<%s>::get(%s[%s])", p.typ, src, sm[2]))
				continue
			}
			expr, ok := builtins[p.attr]
			if !ok {
				return "", fmt.Errorf("kernel %s: attribute [[%s]] is not emulated", k.name, p.attr)
			}
			args = append(args, expr)
		}
		fmt.Fprintf(&b, "extern \"C\" void mslhost_launch_%s(const u32* dims, void** bufs, void** tgs)\n{\n", k.name)
		b.WriteString("    (void)bufs;\n    (void)tgs;\n")
		fmt.Fprintf(&b, "    emu::launch_body(dims, [&](emu::Thr th) {\n        (void)th;\n        %s(%s);\n    });\n}\n", k.name, strings.Join(args, ", "))
	}
	return b.String(), nil
}

// Compile builds msl into a host library.
func (c *Compiler) Compile(msl string) (fakemtl.Library, error) {
	ks, err := parseKernels(msl)
	if err != nil {
		return nil, fmt.Errorf("mslhost: %w", err)
	}
	glue, err := launchers(ks)
	if err != nil {
		return nil, fmt.Errorf("mslhost: %w", err)
	}
	shim, err := fs.ReadFile(shaders.Sources(), "metal_host.h")
	if err != nil {
		return nil, fmt.Errorf("mslhost: %w", err)
	}
	rt, err := fs.ReadFile(shaders.Sources(), "emu_runtime.h")
	if err != nil {
		return nil, fmt.Errorf("mslhost: %w", err)
	}
	cxx, err := c.cxx()
	if err != nil {
		return nil, err
	}
	key := sha256.Sum256([]byte(msl + "\x00" + glue + "\x00" + string(shim) + "\x00" + string(rt) + "\x00" + cxx))
	dir := filepath.Join(c.Dir, hex.EncodeToString(key[:10]))
	so := filepath.Join(dir, "unit.so")
	if _, err := os.Stat(so); err != nil {
		if err := c.build(cxx, dir, so, msl+"\n"+glue, shim, rt); err != nil {
			return nil, err
		}
	}
	h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("mslhost: load %s: %w", so, err)
	}
	lib := &library{fns: map[string]*function{}}
	for _, k := range ks {
		fn, err := purego.Dlsym(h, "mslhost_launch_"+k.name)
		if err != nil {
			return nil, fmt.Errorf("mslhost: %s: %w", k.name, err)
		}
		lib.fns[k.name] = &function{name: k.name, fn: fn, decl: k, lib: lib}
	}
	return lib, nil
}

func (c *Compiler) build(cxx, dir, so, unit string, shim, rt []byte) error {
	if err := os.MkdirAll(filepath.Join(dir, "include"), 0o755); err != nil {
		return fmt.Errorf("mslhost: %w", err)
	}
	files := map[string][]byte{
		"include/metal_stdlib":  []byte("#include \"metal_host.h\"\n"),
		"include/metal_host.h":  shim,
		"include/emu_runtime.h": rt,
		"unit.cpp":              []byte(unit),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("mslhost: %w", err)
		}
	}
	tmp := so + ".tmp"
	// -ffp-contract=off: the text's `#pragma METAL fp contract(off)` is Metal's word for it.
	cmd := exec.Command(cxx, "-std=c++17", "-O1", "-g", "-fPIC", "-shared", "-ffp-contract=off", "-fno-strict-aliasing",
		"-Wno-attributes", "-Wno-unknown-pragmas", "-I", filepath.Join(dir, "include"), "-o", tmp, filepath.Join(dir, "unit.cpp"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mslhost: %s: %w\n%s", filepath.Base(cxx), err, out)
	}
	if err := os.Rename(tmp, so); err != nil {
		return fmt.Errorf("mslhost: %w", err)
	}
	return nil
}

type library struct {
	mu  sync.Mutex // the emulator's block state is one per library: one dispatch at a time
	fns map[string]*function
}

func (l *library) Function(name string) (fakemtl.Function, error) {
	f := l.fns[name]
	if f == nil {
		return nil, fmt.Errorf("mslhost: no kernel %q in the library", name)
	}
	return f, nil
}

type function struct {
	name string
	fn   uintptr
	decl kernelDecl
	lib  *library
}

func (f *function) MaxThreads() int { return f.decl.maxThreads }

// StaticThreadgroupBytes is 0: the host build cannot see the size of the arrays a kernel
// declares in threadgroup memory (they are function-level statics here). The budget of each
// kernel's threadgroup memory is checked from the interface declaration instead.
func (f *function) StaticThreadgroupBytes() int { return 0 }

func (f *function) Dispatch(grid, block [3]uint32, binds []fakemtl.Binding, tgBytes []int) error {
	if block[1] > 1 || block[2] > 1 {
		return fmt.Errorf("mslhost: %s: only 1-D threadgroups are emulated (block %v)", f.name, block)
	}
	bufs := make([]uintptr, fakemtl.MaxBufferSlots)
	var pin runtime.Pinner
	defer pin.Unpin()
	bound := map[int]bool{}
	for _, b := range binds {
		if b.Index < 0 || b.Index >= len(bufs) {
			return fmt.Errorf("mslhost: %s: buffer index %d", f.name, b.Index)
		}
		bound[b.Index] = true
		if len(b.Data) > 0 {
			pin.Pin(&b.Data[0])
			bufs[b.Index] = uintptr(unsafe.Pointer(&b.Data[0]))
		}
	}
	for _, p := range f.decl.params {
		if sm := slotRe.FindStringSubmatch(p.attr); sm != nil && sm[1] == "buffer" {
			i, _ := strconv.Atoi(sm[2])
			if !bound[i] {
				return fmt.Errorf("mslhost: %s: [[buffer(%d)]] (%s) is not bound", f.name, i, p.typ)
			}
		}
	}
	tgs := make([]uintptr, max(len(tgBytes), 1))
	mem := make([][]byte, len(tgBytes))
	for i, n := range tgBytes {
		if n > 0 {
			mem[i] = make([]byte, n)
			pin.Pin(&mem[i][0])
			tgs[i] = uintptr(unsafe.Pointer(&mem[i][0]))
		}
	}
	dims := []uint32{grid[0], max(grid[1], 1), max(grid[2], 1), block[0], 1, 1}
	pin.Pin(&bufs[0])
	pin.Pin(&tgs[0])
	pin.Pin(&dims[0])
	f.lib.mu.Lock()
	defer f.lib.mu.Unlock()
	purego.SyscallN(f.fn, uintptr(unsafe.Pointer(&dims[0])), uintptr(unsafe.Pointer(&bufs[0])), uintptr(unsafe.Pointer(&tgs[0])))
	return nil
}

// Package fakemtl is a Metal runtime in Go (an mtl.Runtime) for running the Metal backend's
// host code where there is no Mac: buffers are host memory, command buffers run their commands
// when committed, GPU times come from a virtual clock, and kernels run through a pluggable
// Compiler. It also acts as Metal's API validation layer: each misuse the real runtime would
// reject or crash on (encoding into a committed buffer, two open encoders, a wait on a buffer
// never committed, over-large setBytes, threadgroup memory past the limit or not a multiple of
// 16, a call outside an autorelease pool or from a second OS thread, use after release) is
// recorded in Stats.Misuse for tests to assert empty.
package fakemtl

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mtl"
)

// Compiler turns MSL text into a Library. The text is exactly what the backend would hand to
// Metal's newLibraryWithSource.
type Compiler interface {
	Compile(msl string) (Library, error)
}

// Library is a compiled unit.
type Library interface {
	Function(name string) (Function, error)
}

// Function is one kernel of a Library.
type Function interface {
	// MaxThreads is the pipeline's maxTotalThreadsPerThreadgroup.
	MaxThreads() int
	// StaticThreadgroupBytes is the pipeline's staticThreadgroupMemoryLength.
	StaticThreadgroupBytes() int
	// Dispatch runs the kernel on grid threadgroups of block threads. threadgroupBytes[i] is the
	// length set for [[threadgroup(i)]].
	Dispatch(grid, block [3]uint32, bindings []Binding, threadgroupBytes []int) error
}

// Binding is what one [[buffer(Index)]] slot held at dispatch.
type Binding struct {
	Index  int
	Data   []byte // a buffer's memory from the bound offset to its end, or the inline bytes
	Inline bool   // set with setBytes (a copy made at encoding)
}

// Virtual GPU durations of each command, in seconds.
const (
	DispatchSeconds = 1e-3
	BlitSeconds     = 1e-4
)

// Metal's limits that the fake enforces.
const (
	MaxInlineBytes  = 4096
	MaxBufferSlots  = 31
	threadgroupStep = 16
)

// Options describe the fake device.
type Options struct {
	Name string // default "fake Apple GPU"
	// Family is the newest GPU family the device supports (default Apple9).
	Family mtl.GPUFamily
	// NoDevice makes DefaultDevice fail, as on a Mac without a usable GPU.
	NoDevice bool
	// WorkingSet is recommendedMaxWorkingSetSize (default 16 GiB); an allocation past it fails.
	WorkingSet uint64
	// MaxThreadgroupMemory is maxThreadgroupMemoryLength (default 32 KiB).
	MaxThreadgroupMemory uint64
	// SIMDWidth is every pipeline's threadExecutionWidth (default 32).
	SIMDWidth int
	// Compiler runs newLibraryWithSource; nil fails it with driver.ErrNoCompiler.
	Compiler Compiler
}

// Stats count what the runtime was asked to do.
type Stats struct {
	CommandBuffers, Commits, Waits int
	Dispatches, Fills, Copies      int
	Compiles                       int
	Live                           int      // objects created and not yet released
	Threads                        int      // distinct OS threads that called (0 where unknown)
	Misuse                         []string // API misuse, in order
	Sources                        []string // the MSL of every compile, in order
	LastCompileOptions             mtl.CompileOptions
}

// Runtime is the fake. Safe for concurrent use (the calls are serialised), though any call
// from a second OS thread is recorded as misuse.
type Runtime struct {
	mu        sync.Mutex
	o         Options
	st        Stats
	threads   map[int]bool
	pools     int
	clock     float64
	allocated uint64
}

var _ mtl.Runtime = (*Runtime)(nil)

// New returns a fake runtime.
func New(o Options) *Runtime {
	if o.Name == "" {
		o.Name = "fake Apple GPU"
	}
	if o.Family == 0 {
		o.Family = mtl.GPUFamilyApple9
	}
	if o.WorkingSet == 0 {
		o.WorkingSet = 16 << 30
	}
	if o.MaxThreadgroupMemory == 0 {
		o.MaxThreadgroupMemory = 32 << 10
	}
	if o.SIMDWidth == 0 {
		o.SIMDWidth = 32
	}
	return &Runtime{o: o, threads: map[int]bool{}, clock: 1000}
}

// Stats returns a copy of the counters.
func (r *Runtime) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.st
	s.Misuse = append([]string(nil), s.Misuse...)
	s.Sources = append([]string(nil), s.Sources...)
	s.Threads = len(r.threads)
	if r.threads[0] {
		s.Threads = 0
	}
	return s
}

// enter starts every call: it takes the lock and checks the thread and the pool.
func (r *Runtime) enter(what string) {
	r.mu.Lock()
	tid := threadID()
	r.threads[tid] = true
	if len(r.threads) > 1 && !r.threads[0] {
		r.misuse("%s: called from OS thread %d, a second thread", what, tid)
	}
	if r.pools == 0 {
		r.misuse("%s: called outside an autorelease pool", what)
	}
}

func (r *Runtime) leave() { r.mu.Unlock() }

func (r *Runtime) misuse(format string, args ...any) {
	r.st.Misuse = append(r.st.Misuse, fmt.Sprintf(format, args...))
}

// object is the reference bookkeeping shared by every fake object.
type object struct {
	r        *Runtime
	kind     string
	released bool
}

func (r *Runtime) newObject(kind string) object {
	r.st.Live++
	return object{r: r, kind: kind}
}

// alive records use after release; call with the lock held.
func (o *object) alive(what string) bool {
	if o.released {
		o.r.misuse("%s on a released %s", what, o.kind)
		return false
	}
	return true
}

func (o *object) Release() {
	o.r.enter("release")
	defer o.r.leave()
	if o.alive("release") {
		o.released = true
		o.r.st.Live--
	}
}

type pool struct {
	r       *Runtime
	drained bool
}

// PushPool opens an autorelease pool. Pools may be opened without one.
func (r *Runtime) PushPool() mtl.Pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pools++
	return &pool{r: r}
}

func (p *pool) Drain() {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if p.drained {
		p.r.misuse("pool drained twice")
		return
	}
	p.drained = true
	p.r.pools--
}

// DefaultDevice returns the device, or fails as MTLCreateSystemDefaultDevice does without one.
func (r *Runtime) DefaultDevice() (mtl.Device, error) {
	r.enter("MTLCreateSystemDefaultDevice")
	defer r.leave()
	if r.o.NoDevice {
		return nil, fmt.Errorf("fakemtl: MTLCreateSystemDefaultDevice returned nil")
	}
	return &device{object: r.newObject("device")}, nil
}

type device struct{ object }

func (d *device) Name() string { return d.r.o.Name }

func (d *device) SupportsFamily(f mtl.GPUFamily) bool {
	d.r.enter("supportsFamily:")
	defer d.r.leave()
	return f >= mtl.GPUFamilyApple1 && f <= d.r.o.Family
}

func (d *device) RecommendedMaxWorkingSetSize() uint64 { return d.r.o.WorkingSet }

func (d *device) CurrentAllocatedSize() uint64 {
	d.r.enter("currentAllocatedSize")
	defer d.r.leave()
	return d.r.allocated
}

func (d *device) MaxThreadgroupMemoryLength() uint64 { return d.r.o.MaxThreadgroupMemory }

func (d *device) NewCommandQueue() (mtl.CommandQueue, error) {
	d.r.enter("newCommandQueue")
	defer d.r.leave()
	if !d.alive("newCommandQueue") {
		return nil, fmt.Errorf("fakemtl: device released")
	}
	return &queue{object: d.r.newObject("command queue")}, nil
}

type buffer struct {
	object
	mem []byte
}

func (d *device) NewBuffer(length uint64, opts mtl.ResourceOptions) (mtl.Buffer, error) {
	d.r.enter("newBufferWithLength:options:")
	defer d.r.leave()
	if opts != mtl.ResourceStorageModeShared {
		d.r.misuse("newBufferWithLength: options %d, the backend uses shared storage", opts)
	}
	if length == 0 {
		d.r.misuse("newBufferWithLength:0 (Metal returns nil)")
		return nil, fmt.Errorf("fakemtl: zero-length buffer")
	}
	if d.r.allocated+length > d.r.o.WorkingSet {
		return nil, fmt.Errorf("fakemtl: newBufferWithLength:%d returned nil", length)
	}
	d.r.allocated += length
	return &buffer{object: d.r.newObject("buffer"), mem: aligned(int(length))}, nil
}

// aligned returns n bytes of zeroed host memory starting on a 16-byte boundary, as Metal's
// buffers do (kernels compiled for the host may load vectors from it).
func aligned(n int) []byte {
	words := make([]uint64, (n+15)/8+2)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	skip := int((16 - uintptr(unsafe.Pointer(&b[0]))%16) % 16)
	return b[skip : skip+n : skip+n]
}

func (b *buffer) Length() uint64 { return uint64(len(b.mem)) }

func (b *buffer) Contents() []byte {
	b.r.enter("contents")
	defer b.r.leave()
	if !b.alive("contents") {
		return nil
	}
	return b.mem
}

func (b *buffer) Release() {
	b.r.enter("release")
	if !b.released {
		b.r.allocated -= uint64(len(b.mem))
	}
	b.r.leave()
	b.object.Release()
}

type library struct {
	object
	lib Library
}

func (d *device) NewLibraryWithSource(source string, opts mtl.CompileOptions) (mtl.Library, error) {
	d.r.enter("newLibraryWithSource:options:error:")
	defer d.r.leave()
	d.r.st.Compiles++
	d.r.st.Sources = append(d.r.st.Sources, source)
	d.r.st.LastCompileOptions = opts
	if d.r.o.Compiler == nil {
		return nil, fmt.Errorf("fakemtl: no MSL compiler plugged in: %w", driver.ErrNoCompiler)
	}
	lib, err := d.r.o.Compiler.Compile(source)
	if err != nil {
		return nil, &mtl.NSError{Op: "newLibraryWithSource:options:error:", Description: err.Error()}
	}
	return &library{object: d.r.newObject("library"), lib: lib}, nil
}

type function struct {
	object
	name string
	fn   Function
}

func (l *library) NewFunction(name string) (mtl.Function, error) {
	l.r.enter("newFunctionWithName:")
	defer l.r.leave()
	if !l.alive("newFunctionWithName:") {
		return nil, fmt.Errorf("fakemtl: library released")
	}
	fn, err := l.lib.Function(name)
	if err != nil {
		return nil, err
	}
	return &function{object: l.r.newObject("function"), name: name, fn: fn}, nil
}

type pipeline struct {
	object
	name string
	fn   Function
	simd int
}

func (d *device) NewComputePipelineState(f mtl.Function) (mtl.ComputePipelineState, error) {
	d.r.enter("newComputePipelineStateWithFunction:error:")
	defer d.r.leave()
	fn, ok := f.(*function)
	if !ok || !fn.alive("newComputePipelineStateWithFunction:") {
		return nil, &mtl.NSError{Op: "newComputePipelineStateWithFunction:error:", Description: "not a live function of this device"}
	}
	return &pipeline{object: d.r.newObject("pipeline"), name: fn.name, fn: fn.fn, simd: d.r.o.SIMDWidth}, nil
}

func (p *pipeline) MaxTotalThreadsPerThreadgroup() int { return p.fn.MaxThreads() }
func (p *pipeline) ThreadExecutionWidth() int          { return p.simd }
func (p *pipeline) StaticThreadgroupMemoryLength() int { return p.fn.StaticThreadgroupBytes() }

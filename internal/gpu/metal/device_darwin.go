//go:build darwin

package metal

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// UNTESTED: see doc.go. Every selector below is from Apple's Metal and Foundation references.

// Metal enum values.
const (
	resourceStorageModeShared = 0 // MTLResourceStorageModeShared
	commandBufferStatusError  = 5 // MTLCommandBufferStatusError
)

// mtlSize mirrors MTLSize {NSUInteger width, height, depth}.
type mtlSize struct{ Width, Height, Depth uint64 }

// sels holds the selectors, registered once per Open (RegisterName takes the runtime lock).
type sels struct {
	alloc, init, release, retain, drain                                    objc.SEL
	stringWithUTF8String, utf8String, localizedDescription                 objc.SEL
	name, newCommandQueue, newBufferWithLength, contents                   objc.SEL
	newLibraryWithSource, newFunctionWithName, newComputePipelineState     objc.SEL
	maxTotalThreads, recommendedMaxWorkingSetSize, currentAllocatedSize    objc.SEL
	commandBuffer, computeCommandEncoder, setComputePipelineState          objc.SEL
	setBuffer, setBytes, setThreadgroupMemoryLength, dispatchThreadgroups  objc.SEL
	endEncoding, commit, waitUntilCompleted, status, errorSel, supportsFam objc.SEL
}

func newSels() *sels {
	r := objc.RegisterName
	return &sels{
		alloc: r("alloc"), init: r("init"), release: r("release"), retain: r("retain"), drain: r("drain"),
		stringWithUTF8String: r("stringWithUTF8String:"), utf8String: r("UTF8String"),
		localizedDescription: r("localizedDescription"),
		name:                 r("name"), newCommandQueue: r("newCommandQueue"),
		newBufferWithLength: r("newBufferWithLength:options:"), contents: r("contents"),
		newLibraryWithSource:         r("newLibraryWithSource:options:error:"),
		newFunctionWithName:          r("newFunctionWithName:"),
		newComputePipelineState:      r("newComputePipelineStateWithFunction:error:"),
		maxTotalThreads:              r("maxTotalThreadsPerThreadgroup"),
		recommendedMaxWorkingSetSize: r("recommendedMaxWorkingSetSize"),
		currentAllocatedSize:         r("currentAllocatedSize"),
		commandBuffer:                r("commandBuffer"), computeCommandEncoder: r("computeCommandEncoder"),
		setComputePipelineState:    r("setComputePipelineState:"),
		setBuffer:                  r("setBuffer:offset:atIndex:"),
		setBytes:                   r("setBytes:length:atIndex:"),
		setThreadgroupMemoryLength: r("setThreadgroupMemoryLength:atIndex:"),
		dispatchThreadgroups:       r("dispatchThreadgroups:threadsPerThreadgroup:"),
		endEncoding:                r("endEncoding"), commit: r("commit"),
		waitUntilCompleted: r("waitUntilCompleted"), status: r("status"), errorSel: r("error"),
		supportsFam: r("supportsFamily:"),
	}
}

// Device is a Metal device with one command queue. A mutex serialises all use, because a
// command encoder must not be used from two threads at once.
type Device struct {
	mu     sync.Mutex
	s      *sels
	dev    objc.ID
	queue  objc.ID
	info   driver.Info
	cmd    objc.ID // open command buffer (retained), 0 if none
	enc    objc.ID // its open compute encoder (retained), 0 if none
	closed bool
}

var _ driver.Device = (*Device)(nil)

// Open creates the system default Metal device.
func Open(opts driver.Options) (*Device, error) {
	lib, err := purego.Dlopen("/System/Library/Frameworks/Metal.framework/Metal", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("metal: load Metal.framework: %w: %w", driver.ErrNoDriver, err)
	}
	// Command-line programs get no default device unless CoreGraphics is loaded too.
	_, _ = purego.Dlopen("/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	fn, err := purego.Dlsym(lib, "MTLCreateSystemDefaultDevice")
	if err != nil || fn == 0 {
		return nil, fmt.Errorf("metal: Metal.framework has no MTLCreateSystemDefaultDevice: %w", driver.ErrNoDriver)
	}
	var create func() objc.ID
	purego.RegisterFunc(&create, fn)
	d := &Device{s: newSels()}
	pool := d.pool()
	defer d.drain(pool)
	d.dev = create()
	if d.dev == 0 {
		return nil, fmt.Errorf("metal: MTLCreateSystemDefaultDevice returned nil: %w", driver.ErrNoDevice)
	}
	d.queue = d.dev.Send(d.s.newCommandQueue)
	if d.queue == 0 {
		d.dev.Send(d.s.release)
		return nil, fmt.Errorf("metal: newCommandQueue returned nil")
	}
	d.info = driver.Info{
		Backend:  "metal",
		Name:     d.goString(d.dev.Send(d.s.name)),
		Arch:     d.family(),
		Driver:   "Metal",
		Compiler: "Metal runtime compiler",
		MemTotal: int64(objc.Send[uint64](d.dev, d.s.recommendedMaxWorkingSetSize)),
	}
	return d, nil
}

// pool opens an autorelease pool: objects returned by non-new/alloc methods are autoreleased
// and would leak on this thread without one.
func (d *Device) pool() objc.ID {
	return objc.ID(objc.GetClass("NSAutoreleasePool")).Send(d.s.alloc).Send(d.s.init)
}

func (d *Device) drain(pool objc.ID) { pool.Send(d.s.drain) }

func (d *Device) nsString(s string) objc.ID {
	return objc.ID(objc.GetClass("NSString")).Send(d.s.stringWithUTF8String, s)
}

func (d *Device) goString(ns objc.ID) string {
	if ns == 0 {
		return ""
	}
	return objc.Send[string](ns, d.s.utf8String)
}

func (d *Device) nsErrorText(e objc.ID) string {
	if e == 0 {
		return "unknown error"
	}
	return d.goString(e.Send(d.s.localizedDescription))
}

// family names the newest Apple GPU family the device supports (MTLGPUFamilyApple1 = 1001).
func (d *Device) family() string {
	for f := 1012; f >= 1001; f-- {
		if objc.Send[bool](d.dev, d.s.supportsFam, int64(f)) {
			return fmt.Sprintf("apple%d", f-1000)
		}
	}
	return "metal"
}

func (d *Device) lock() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return driver.ErrClosed
	}
	return nil
}

// Info describes the device.
func (d *Device) Info() driver.Info { return d.info }

// MemInfo reports Metal's recommended working set as total and what is left of it as free.
func (d *Device) MemInfo() (free, total int64, err error) {
	if err := d.lock(); err != nil {
		return 0, 0, err
	}
	defer d.mu.Unlock()
	total = int64(objc.Send[uint64](d.dev, d.s.recommendedMaxWorkingSetSize))
	used := int64(objc.Send[uint64](d.dev, d.s.currentAllocatedSize))
	return max(total-used, 0), total, nil
}

type buffer struct {
	dev   *Device
	buf   objc.ID // 0 for a zero-length buffer
	size  int
	freed bool
}

func (b *buffer) Size() int { return b.size }

func (d *Device) own(b driver.Buffer) (*buffer, error) {
	mb, ok := b.(*buffer)
	if !ok || mb == nil || mb.dev != d {
		return nil, fmt.Errorf("metal: %w", driver.ErrForeignHandle)
	}
	if mb.freed {
		return nil, fmt.Errorf("metal: buffer used after Free: %w", driver.ErrClosed)
	}
	return mb, nil
}

// Alloc creates a shared-storage buffer (CPU-visible; Apple GPUs have unified memory).
func (d *Device) Alloc(n int) (driver.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("metal: alloc %d bytes: negative size", n)
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	b := &buffer{dev: d, size: n}
	if n == 0 {
		return b, nil
	}
	b.buf = d.dev.Send(d.s.newBufferWithLength, uint64(n), uint64(resourceStorageModeShared))
	if b.buf == 0 {
		total := int64(objc.Send[uint64](d.dev, d.s.recommendedMaxWorkingSetSize))
		used := int64(objc.Send[uint64](d.dev, d.s.currentAllocatedSize))
		return nil, &driver.OOMError{Backend: "metal", Requested: int64(n), Free: max(total-used, 0), Total: total}
	}
	return b, nil
}

// Free releases b.
func (d *Device) Free(b driver.Buffer) error {
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	mb, err := d.own(b)
	if err != nil {
		return err
	}
	// The GPU may still read it from the open command buffer.
	if err := d.flush(); err != nil {
		return err
	}
	mb.freed = true
	if mb.buf != 0 {
		mb.buf.Send(d.s.release)
	}
	return nil
}

// hostView waits for queued GPU work and returns the buffer's memory as bytes.
func (d *Device) hostView(b driver.Buffer, op string, off, n int) ([]byte, error) {
	mb, err := d.own(b)
	if err != nil {
		return nil, err
	}
	if off < 0 || n < 0 || off > mb.size || n > mb.size-off {
		return nil, fmt.Errorf("metal: %s %d bytes at offset %d of a %d-byte buffer: out of range", op, n, off, mb.size)
	}
	if n == 0 {
		return nil, nil
	}
	if err := d.flush(); err != nil {
		return nil, err
	}
	p := objc.Send[unsafe.Pointer](mb.buf, d.s.contents)
	if p == nil {
		return nil, fmt.Errorf("metal: %s: buffer has no CPU-visible contents", op)
	}
	return unsafe.Slice((*byte)(p), mb.size)[off : off+n], nil
}

// Upload copies src into dst at off (after queued work, through the shared mapping).
func (d *Device) Upload(dst driver.Buffer, off int, src []byte) error {
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	view, err := d.hostView(dst, "upload", off, len(src))
	if err != nil {
		return err
	}
	copy(view, src)
	return nil
}

// Download copies from src at off into dst (after queued work).
func (d *Device) Download(dst []byte, src driver.Buffer, off int) error {
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	view, err := d.hostView(src, "download", off, len(dst))
	if err != nil {
		return err
	}
	copy(dst, view)
	return nil
}

// DownloadAfter is Download: without events on this backend yet it waits for all queued
// work rather than for after alone (correct, without the overlap).
func (d *Device) DownloadAfter(dst []byte, src driver.Buffer, off int, _ driver.Event) error {
	return d.Download(dst, src, off)
}

// Memset fills n bytes of dst from off (on the CPU, after queued work).
func (d *Device) Memset(dst driver.Buffer, off, n int, value byte) error {
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	view, err := d.hostView(dst, "memset", off, n)
	if err != nil {
		return err
	}
	for i := range view {
		view[i] = value
	}
	return nil
}

type module struct {
	dev     *Device
	lib     objc.ID
	info    driver.ModuleInfo
	kernels map[string]*kernel
	closed  bool
}

type kernel struct {
	mod      *module
	name     string
	pipeline objc.ID
	maxTPG   int
}

func (k *kernel) Name() string { return k.name }

func (m *module) Info() driver.ModuleInfo { return m.info }

// Compile builds a library from Metal Shading Language source. Source.Headers are not
// supported by Metal's runtime compiler: callers must inline them.
func (d *Device) Compile(src driver.Source) (driver.Module, error) {
	if len(src.Headers) > 0 {
		return nil, fmt.Errorf("metal: compile %s: headers must be inlined for Metal: %w", src.Name, driver.ErrUnsupported)
	}
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	pool := d.pool()
	defer d.drain(pool)
	var nserr objc.ID
	lib := d.dev.Send(d.s.newLibraryWithSource, d.nsString(src.Code), objc.ID(0), &nserr)
	if lib == 0 {
		log := d.nsErrorText(nserr)
		return nil, &driver.CompileError{Backend: "metal", Source: src.Name, Target: d.info.Arch,
			Log: log, Diagnostics: driver.ParseDiagnostics(log), Err: errors.New("newLibraryWithSource failed")}
	}
	return &module{dev: d, lib: lib, kernels: map[string]*kernel{}, info: driver.ModuleInfo{
		Source: src.Name, Hash: src.Hash(), Target: d.info.Arch, Format: "msl", Origin: driver.OriginCompiled,
	}}, nil
}

// Kernel creates (once) the compute pipeline for a function of the library.
func (m *module) Kernel(name string) (driver.Kernel, error) {
	d := m.dev
	if err := d.lock(); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("metal: kernel %s: module closed: %w", name, driver.ErrClosed)
	}
	if k := m.kernels[name]; k != nil {
		return k, nil
	}
	pool := d.pool()
	defer d.drain(pool)
	fn := m.lib.Send(d.s.newFunctionWithName, d.nsString(name))
	if fn == 0 {
		return nil, fmt.Errorf("metal: no kernel function %q in %s", name, m.info.Source)
	}
	defer fn.Send(d.s.release)
	var nserr objc.ID
	p := d.dev.Send(d.s.newComputePipelineState, fn, &nserr)
	if p == 0 {
		return nil, fmt.Errorf("metal: compute pipeline for %s: %s", name, d.nsErrorText(nserr))
	}
	k := &kernel{mod: m, name: name, pipeline: p, maxTPG: int(objc.Send[uint64](p, d.s.maxTotalThreads))}
	m.kernels[name] = k
	return k, nil
}

// Close releases the library and its pipelines.
func (m *module) Close() error {
	d := m.dev
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	if m.closed {
		return nil
	}
	if err := d.flush(); err != nil {
		return err
	}
	m.closed = true
	for _, k := range m.kernels {
		k.pipeline.Send(d.s.release)
	}
	m.lib.Send(d.s.release)
	return nil
}

// Launch encodes a dispatch into the open command buffer; it runs at the next flush.
func (d *Device) Launch(k driver.Kernel, grid, block driver.Dim3, shared int, args ...driver.Arg) error {
	mk, ok := k.(*kernel)
	if !ok || mk == nil || mk.mod.dev != d {
		return fmt.Errorf("metal: launch: %w", driver.ErrForeignHandle)
	}
	grid, block = grid.Norm(), block.Norm()
	if n := int(block[0]) * int(block[1]) * int(block[2]); n > mk.maxTPG {
		return fmt.Errorf("metal: launch %s: %d threads per threadgroup, the pipeline allows %d", mk.name, n, mk.maxTPG)
	}
	binds, err := planBindings(args)
	if err != nil {
		return fmt.Errorf("metal: launch %s: %w", mk.name, err)
	}
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	if mk.mod.closed {
		return fmt.Errorf("metal: launch %s: module closed: %w", mk.name, driver.ErrClosed)
	}
	pool := d.pool()
	defer d.drain(pool)
	if d.enc == 0 {
		d.cmd = d.queue.Send(d.s.commandBuffer).Send(d.s.retain)
		d.enc = d.cmd.Send(d.s.computeCommandEncoder).Send(d.s.retain)
	}
	d.enc.Send(d.s.setComputePipelineState, mk.pipeline)
	for _, b := range binds {
		if b.Buffer != nil {
			mb, err := d.own(b.Buffer)
			if err != nil {
				return fmt.Errorf("metal: launch %s: argument %d: %w", mk.name, b.Index, err)
			}
			d.enc.Send(d.s.setBuffer, mb.buf, uint64(b.Offset), uint64(b.Index))
			continue
		}
		d.enc.Send(d.s.setBytes, unsafe.Pointer(&b.Bytes[0]), uint64(len(b.Bytes)), uint64(b.Index))
	}
	if shared > 0 {
		d.enc.Send(d.s.setThreadgroupMemoryLength, uint64(shared), uint64(0))
	}
	d.enc.Send(d.s.dispatchThreadgroups,
		mtlSize{uint64(grid[0]), uint64(grid[1]), uint64(grid[2])},
		mtlSize{uint64(block[0]), uint64(block[1]), uint64(block[2])})
	return nil
}

// flush commits the open command buffer and waits for it; call with d.mu held.
func (d *Device) flush() error {
	if d.cmd == 0 {
		return nil
	}
	pool := d.pool()
	defer d.drain(pool)
	d.enc.Send(d.s.endEncoding)
	d.cmd.Send(d.s.commit)
	d.cmd.Send(d.s.waitUntilCompleted)
	var err error
	if objc.Send[uint64](d.cmd, d.s.status) == commandBufferStatusError {
		err = fmt.Errorf("metal: command buffer failed: %s", d.nsErrorText(d.cmd.Send(d.s.errorSel)))
	}
	d.enc.Send(d.s.release)
	d.cmd.Send(d.s.release)
	d.enc, d.cmd = 0, 0
	return err
}

// Sync commits queued launches and waits for them.
func (d *Device) Sync() error {
	if err := d.lock(); err != nil {
		return err
	}
	defer d.mu.Unlock()
	return d.flush()
}

// NewEvent is not implemented for Metal yet.
func (d *Device) NewEvent() (driver.Event, error) {
	return nil, fmt.Errorf("metal: events: %w", driver.ErrUnsupported)
}

// Record is not implemented for Metal yet.
func (d *Device) Record(driver.Event) error {
	return fmt.Errorf("metal: events: %w", driver.ErrUnsupported)
}

// ElapsedMs is not implemented for Metal yet.
func (d *Device) ElapsedMs(driver.Event, driver.Event) (float32, error) {
	return 0, fmt.Errorf("metal: events: %w", driver.ErrUnsupported)
}

// BeginCapture is not implemented: Metal's equivalent (indirect command buffers) differs.
func (d *Device) BeginCapture() error {
	return fmt.Errorf("metal: graph capture: %w", driver.ErrUnsupported)
}

// EndCapture is not implemented.
func (d *Device) EndCapture() (driver.Graph, error) {
	return nil, fmt.Errorf("metal: graph capture: %w", driver.ErrUnsupported)
}

// Close waits for queued work and releases the queue and device. Buffers and modules not
// freed by then are leaked.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	err := d.flush()
	d.closed = true
	d.queue.Send(d.s.release)
	d.dev.Send(d.s.release)
	return err
}

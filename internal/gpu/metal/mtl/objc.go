package mtl

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Sender sends Objective-C messages. The darwin implementation is purego's objc_msgSend; tests
// use one that holds every send to the selector table.
type Sender interface {
	// Class is objc_getClass (0 when there is no such class).
	Class(name string) ID
	// Send sends sel to recv with args, each of the Go type the table gives for its kind, and
	// returns the result in the field of Ret that the table's result kind names.
	Send(recv ID, sel Sel, args ...any) Ret
}

// Ret holds a message's result.
type Ret struct {
	ID ID             // KindID
	U  uint64         // KindUInt
	B  bool           // KindBool
	F  float64        // KindF64
	P  unsafe.Pointer // KindPtr
}

// NewObjCRuntime is the Runtime that talks to Metal by sending messages through s, with
// createDevice standing for MTLCreateSystemDefaultDevice.
func NewObjCRuntime(s Sender, createDevice func() ID) Runtime {
	return &objcRuntime{s: s, create: createDevice}
}

type objcRuntime struct {
	s      Sender
	create func() ID
}

func (r *objcRuntime) send(recv ID, sel Sel, args ...any) Ret { return r.s.Send(recv, sel, args...) }

// obj is any object the caller owns.
type obj struct {
	r  *objcRuntime
	id ID
}

// idOf is the object behind a handle of this runtime (0, which Metal takes as nil, for any
// other value).
func idOf(v any) ID {
	if o, ok := v.(interface{ objcID() ID }); ok {
		return o.objcID()
	}
	return 0
}

func (o obj) objcID() ID { return o.id }

func (o obj) Release() {
	if o.id != 0 {
		o.r.send(o.id, SelRelease)
	}
}

// retained takes ownership of an object that Metal returned autoreleased.
func (r *objcRuntime) retained(id ID) ID {
	if id == 0 {
		return 0
	}
	return r.send(id, SelRetain).ID
}

func (r *objcRuntime) nsString(s string) ID {
	return r.send(r.s.Class("NSString"), SelStringWithUTF8String, s).ID
}

func (r *objcRuntime) goString(ns ID) string {
	if ns == 0 {
		return ""
	}
	return cString(r.send(ns, SelUTF8String).P)
}

func (r *objcRuntime) nsError(op string, e ID) error {
	if e == 0 {
		return &NSError{Op: op, Description: "failed without an NSError"}
	}
	return &NSError{Op: op, Description: r.goString(r.send(e, SelLocalizedDescription).ID)}
}

func (r *objcRuntime) DefaultDevice() (Device, error) {
	id := r.create()
	if id == 0 {
		return nil, fmt.Errorf("mtl: MTLCreateSystemDefaultDevice returned nil")
	}
	return &objcDevice{obj{r, id}}, nil
}

type objcPool struct{ obj }

func (p objcPool) Drain() { p.r.send(p.id, SelDrain) }

func (r *objcRuntime) PushPool() Pool {
	id := r.send(r.send(r.s.Class("NSAutoreleasePool"), SelAlloc).ID, SelInit).ID
	return objcPool{obj{r, id}}
}

type objcDevice struct{ obj }

func (d *objcDevice) Name() string { return d.r.goString(d.r.send(d.id, SelName).ID) }

func (d *objcDevice) SupportsFamily(f GPUFamily) bool {
	return d.r.send(d.id, SelSupportsFamily, int64(f)).B
}

func (d *objcDevice) RecommendedMaxWorkingSetSize() uint64 {
	return d.r.send(d.id, SelRecommendedMaxWorkingSetSize).U
}

func (d *objcDevice) CurrentAllocatedSize() uint64 {
	return d.r.send(d.id, SelCurrentAllocatedSize).U
}

func (d *objcDevice) MaxThreadgroupMemoryLength() uint64 {
	return d.r.send(d.id, SelMaxThreadgroupMemoryLength).U
}

func (d *objcDevice) NewCommandQueue() (CommandQueue, error) {
	id := d.r.send(d.id, SelNewCommandQueue).ID
	if id == 0 {
		return nil, fmt.Errorf("mtl: newCommandQueue returned nil")
	}
	return &objcQueue{obj{d.r, id}}, nil
}

func (d *objcDevice) NewBuffer(length uint64, opts ResourceOptions) (Buffer, error) {
	id := d.r.send(d.id, SelNewBufferWithLength, length, uint64(opts)).ID
	if id == 0 {
		return nil, fmt.Errorf("mtl: newBufferWithLength:%d options:%d returned nil", length, opts)
	}
	return &objcBuffer{obj{d.r, id}}, nil
}

func (d *objcDevice) NewLibraryWithSource(source string, opts CompileOptions) (Library, error) {
	r := d.r
	o := r.send(r.send(r.s.Class("MTLCompileOptions"), SelAlloc).ID, SelInit).ID
	if o == 0 {
		return nil, fmt.Errorf("mtl: MTLCompileOptions alloc/init returned nil")
	}
	defer r.send(o, SelRelease)
	r.send(o, SelSetLanguageVersion, uint64(opts.LanguageVersion))
	r.send(o, SelSetFastMathEnabled, opts.FastMath)
	// mathMode exists from macOS 15; an unknown selector would raise, so ask first.
	if !opts.FastMath && r.send(o, SelRespondsToSelector, SelSetMathMode).B {
		r.send(o, SelSetMathMode, MathModeSafe)
	}
	var nserr ID
	id := r.send(d.id, SelNewLibraryWithSource, r.nsString(source), o, &nserr).ID
	if id == 0 {
		return nil, r.nsError(Selectors[SelNewLibraryWithSource].Name, nserr)
	}
	return &objcLibrary{obj{r, id}}, nil
}

func (d *objcDevice) NewComputePipelineState(fn Function) (ComputePipelineState, error) {
	f := idOf(fn)
	if f == 0 {
		return nil, fmt.Errorf("mtl: pipeline from a %T, not a function of this runtime", fn)
	}
	var nserr ID
	id := d.r.send(d.id, SelNewComputePipelineState, f, &nserr).ID
	if id == 0 {
		return nil, d.r.nsError(Selectors[SelNewComputePipelineState].Name, nserr)
	}
	return &objcPipeline{obj{d.r, id}}, nil
}

type objcBuffer struct{ obj }

func (b *objcBuffer) Length() uint64 { return b.r.send(b.id, SelLength).U }

func (b *objcBuffer) Contents() []byte {
	p := b.r.send(b.id, SelContents).P
	n := b.Length()
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

type objcLibrary struct{ obj }

func (l *objcLibrary) NewFunction(name string) (Function, error) {
	id := l.r.send(l.id, SelNewFunctionWithName, l.r.nsString(name)).ID
	if id == 0 {
		return nil, fmt.Errorf("mtl: no function %q in the library", name)
	}
	return &objcFunction{obj{l.r, id}}, nil
}

type objcFunction struct{ obj }

type objcPipeline struct{ obj }

func (p *objcPipeline) MaxTotalThreadsPerThreadgroup() int {
	return int(p.r.send(p.id, SelMaxTotalThreadsPerThreadgroup).U)
}

func (p *objcPipeline) ThreadExecutionWidth() int {
	return int(p.r.send(p.id, SelThreadExecutionWidth).U)
}

func (p *objcPipeline) StaticThreadgroupMemoryLength() int {
	return int(p.r.send(p.id, SelStaticThreadgroupMemoryLength).U)
}

type objcQueue struct{ obj }

func (q *objcQueue) CommandBuffer() (CommandBuffer, error) {
	id := q.r.retained(q.r.send(q.id, SelCommandBuffer).ID)
	if id == 0 {
		return nil, fmt.Errorf("mtl: commandBuffer returned nil")
	}
	return &objcCommandBuffer{obj{q.r, id}}, nil
}

type objcCommandBuffer struct{ obj }

func (c *objcCommandBuffer) ComputeCommandEncoder() (ComputeCommandEncoder, error) {
	id := c.r.retained(c.r.send(c.id, SelComputeCommandEncoder).ID)
	if id == 0 {
		return nil, fmt.Errorf("mtl: computeCommandEncoder returned nil")
	}
	return &objcCompute{obj{c.r, id}}, nil
}

func (c *objcCommandBuffer) BlitCommandEncoder() (BlitCommandEncoder, error) {
	id := c.r.retained(c.r.send(c.id, SelBlitCommandEncoder).ID)
	if id == 0 {
		return nil, fmt.Errorf("mtl: blitCommandEncoder returned nil")
	}
	return &objcBlit{obj{c.r, id}}, nil
}

func (c *objcCommandBuffer) Commit()             { c.r.send(c.id, SelCommit) }
func (c *objcCommandBuffer) WaitUntilCompleted() { c.r.send(c.id, SelWaitUntilCompleted) }

func (c *objcCommandBuffer) Status() CommandBufferStatus {
	return CommandBufferStatus(c.r.send(c.id, SelStatus).U)
}

func (c *objcCommandBuffer) Error() error {
	if c.Status() != StatusError {
		return nil
	}
	return c.r.nsError("command buffer", c.r.send(c.id, SelError).ID)
}

func (c *objcCommandBuffer) GPUStartTime() float64 { return c.r.send(c.id, SelGPUStartTime).F }
func (c *objcCommandBuffer) GPUEndTime() float64   { return c.r.send(c.id, SelGPUEndTime).F }

type objcCompute struct{ obj }

func (e *objcCompute) SetComputePipelineState(p ComputePipelineState) {
	e.r.send(e.id, SelSetComputePipelineState, idOf(p))
}

func (e *objcCompute) SetBuffer(b Buffer, offset uint64, index int) {
	e.r.send(e.id, SelSetBuffer, idOf(b), offset, uint64(index))
}

func (e *objcCompute) SetBytes(b []byte, index int) {
	if len(b) == 0 {
		return
	}
	e.r.send(e.id, SelSetBytes, unsafe.Pointer(&b[0]), uint64(len(b)), uint64(index))
	runtime.KeepAlive(b) // Metal copies the bytes before setBytes returns
}

func (e *objcCompute) SetThreadgroupMemoryLength(length uint64, index int) {
	e.r.send(e.id, SelSetThreadgroupMemoryLength, length, uint64(index))
}

func (e *objcCompute) DispatchThreadgroups(grid, threadsPerGroup Size) {
	e.r.send(e.id, SelDispatchThreadgroups, grid, threadsPerGroup)
}

func (e *objcCompute) EndEncoding() { e.r.send(e.id, SelEndEncoding) }

type objcBlit struct{ obj }

func (e *objcBlit) FillBuffer(b Buffer, r Range, value byte) {
	e.r.send(e.id, SelFillBuffer, idOf(b), r, value)
}

func (e *objcBlit) CopyFromBuffer(src Buffer, srcOffset uint64, dst Buffer, dstOffset, size uint64) {
	e.r.send(e.id, SelCopyFromBuffer, idOf(src), srcOffset, idOf(dst), dstOffset, size)
}

func (e *objcBlit) EndEncoding() { e.r.send(e.id, SelEndEncoding) }

package fakemtl

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mtl"
)

type queue struct{ object }

type commandBuffer struct {
	object
	status     mtl.CommandBufferStatus
	commands   []func() error
	seconds    float64 // virtual GPU time of the commands
	open       bool    // an encoder is open
	err        error
	start, end float64
}

func (q *queue) CommandBuffer() (mtl.CommandBuffer, error) {
	q.r.enter("commandBuffer")
	defer q.r.leave()
	if !q.alive("commandBuffer") {
		return nil, fmt.Errorf("fakemtl: queue released")
	}
	q.r.st.CommandBuffers++
	return &commandBuffer{object: q.r.newObject("command buffer")}, nil
}

// encodable checks that a new encoder may start; call with the lock held.
func (c *commandBuffer) encodable(what string) bool {
	if !c.alive(what) {
		return false
	}
	if c.status != mtl.StatusNotEnqueued {
		c.r.misuse("%s on a command buffer already committed", what)
		return false
	}
	if c.open {
		c.r.misuse("%s while another encoder of the command buffer is open", what)
		return false
	}
	c.open = true
	return true
}

func (c *commandBuffer) ComputeCommandEncoder() (mtl.ComputeCommandEncoder, error) {
	c.r.enter("computeCommandEncoder")
	defer c.r.leave()
	if !c.encodable("computeCommandEncoder") {
		return nil, fmt.Errorf("fakemtl: cannot encode")
	}
	return &compute{encoder: encoder{object: c.r.newObject("compute encoder"), cb: c}}, nil
}

func (c *commandBuffer) BlitCommandEncoder() (mtl.BlitCommandEncoder, error) {
	c.r.enter("blitCommandEncoder")
	defer c.r.leave()
	if !c.encodable("blitCommandEncoder") {
		return nil, fmt.Errorf("fakemtl: cannot encode")
	}
	return &blit{encoder{object: c.r.newObject("blit encoder"), cb: c}}, nil
}

// Commit runs the commands in order, stopping at the first that fails, and advances the
// virtual clock by their durations.
func (c *commandBuffer) Commit() {
	c.r.enter("commit")
	defer c.r.leave()
	if !c.alive("commit") {
		return
	}
	if c.status != mtl.StatusNotEnqueued {
		c.r.misuse("commit of a command buffer already committed")
		return
	}
	if c.open {
		c.r.misuse("commit with an encoder still open (endEncoding first)")
	}
	c.r.st.Commits++
	c.start = c.r.clock
	c.status = mtl.StatusCompleted
	for _, run := range c.commands {
		if err := run(); err != nil {
			c.status, c.err = mtl.StatusError, err
			break
		}
	}
	c.r.clock += c.seconds
	c.end = c.r.clock
	c.commands = nil
}

func (c *commandBuffer) WaitUntilCompleted() {
	c.r.enter("waitUntilCompleted")
	defer c.r.leave()
	if !c.alive("waitUntilCompleted") {
		return
	}
	if c.status == mtl.StatusNotEnqueued {
		c.r.misuse("waitUntilCompleted on a command buffer never committed (waits forever)")
	}
	c.r.st.Waits++
}

func (c *commandBuffer) Status() mtl.CommandBufferStatus {
	c.r.enter("status")
	defer c.r.leave()
	c.alive("status")
	return c.status
}

func (c *commandBuffer) Error() error {
	c.r.enter("error")
	defer c.r.leave()
	if c.err == nil {
		return nil
	}
	return &mtl.NSError{Op: "command buffer", Description: c.err.Error()}
}

func (c *commandBuffer) GPUStartTime() float64 { return c.times("GPUStartTime", c.start) }
func (c *commandBuffer) GPUEndTime() float64   { return c.times("GPUEndTime", c.end) }

func (c *commandBuffer) times(what string, v float64) float64 {
	c.r.enter(what)
	defer c.r.leave()
	if c.alive(what) && c.status < mtl.StatusCompleted {
		c.r.misuse("%s of a command buffer not completed (it reads 0)", what)
		return 0
	}
	return v
}

// encoder is what compute and blit encoders share.
type encoder struct {
	object
	cb    *commandBuffer
	ended bool
}

// usable checks that the encoder may encode; call with the lock held.
func (e *encoder) usable(what string) bool {
	if !e.alive(what) {
		return false
	}
	if e.ended {
		e.r.misuse("%s after endEncoding", what)
		return false
	}
	return true
}

func (e *encoder) EndEncoding() {
	e.r.enter("endEncoding")
	defer e.r.leave()
	if e.usable("endEncoding") {
		e.ended = true
		e.cb.open = false
	}
}

type compute struct {
	encoder
	pipe  *pipeline
	slots [MaxBufferSlots]*Binding
	tg    []int
}

func (e *compute) SetComputePipelineState(p mtl.ComputePipelineState) {
	e.r.enter("setComputePipelineState:")
	defer e.r.leave()
	pp, ok := p.(*pipeline)
	if !e.usable("setComputePipelineState:") || !ok || !pp.alive("setComputePipelineState:") {
		return
	}
	e.pipe = pp
}

func (e *compute) slot(what string, index int) bool {
	if !e.usable(what) {
		return false
	}
	if index < 0 || index >= MaxBufferSlots {
		e.r.misuse("%s at index %d: Metal has buffer slots 0..%d", what, index, MaxBufferSlots-1)
		return false
	}
	return true
}

func (e *compute) SetBuffer(b mtl.Buffer, offset uint64, index int) {
	e.r.enter("setBuffer:offset:atIndex:")
	defer e.r.leave()
	bb, ok := b.(*buffer)
	if !e.slot("setBuffer:offset:atIndex:", index) || !ok || !bb.alive("setBuffer:") {
		return
	}
	if offset > uint64(len(bb.mem)) {
		e.r.misuse("setBuffer: offset %d past the end of a %d-byte buffer", offset, len(bb.mem))
		return
	}
	e.slots[index] = &Binding{Index: index, Data: bb.mem[offset:]}
}

func (e *compute) SetBytes(b []byte, index int) {
	e.r.enter("setBytes:length:atIndex:")
	defer e.r.leave()
	if !e.slot("setBytes:length:atIndex:", index) {
		return
	}
	if len(b) > MaxInlineBytes {
		e.r.misuse("setBytes: %d bytes, Metal allows %d", len(b), MaxInlineBytes)
		return
	}
	e.slots[index] = &Binding{Index: index, Data: append([]byte(nil), b...), Inline: true}
}

func (e *compute) SetThreadgroupMemoryLength(length uint64, index int) {
	e.r.enter("setThreadgroupMemoryLength:atIndex:")
	defer e.r.leave()
	if !e.usable("setThreadgroupMemoryLength:atIndex:") {
		return
	}
	if length%threadgroupStep != 0 {
		e.r.misuse("setThreadgroupMemoryLength:%d, not a multiple of %d", length, threadgroupStep)
	}
	for len(e.tg) <= index {
		e.tg = append(e.tg, 0)
	}
	e.tg[index] = int(length)
}

func (e *compute) DispatchThreadgroups(grid, block mtl.Size) {
	e.r.enter("dispatchThreadgroups:threadsPerThreadgroup:")
	defer e.r.leave()
	if !e.usable("dispatchThreadgroups:") {
		return
	}
	p := e.pipe
	if p == nil {
		e.r.misuse("dispatch without a pipeline state")
		return
	}
	threads := block.Width * block.Height * block.Depth
	if threads == 0 || threads > uint64(p.fn.MaxThreads()) {
		e.r.misuse("dispatch of %s: %d threads per threadgroup, the pipeline allows %d", p.name, threads, p.fn.MaxThreads())
		return
	}
	tgTotal := p.fn.StaticThreadgroupBytes()
	for _, n := range e.tg {
		tgTotal += n
	}
	if uint64(tgTotal) > e.r.o.MaxThreadgroupMemory {
		e.r.misuse("dispatch of %s: %d bytes of threadgroup memory, the device allows %d", p.name, tgTotal, e.r.o.MaxThreadgroupMemory)
		return
	}
	var binds []Binding
	for _, s := range e.slots {
		if s != nil {
			binds = append(binds, *s)
		}
	}
	g := [3]uint32{uint32(grid.Width), uint32(grid.Height), uint32(grid.Depth)}
	bl := [3]uint32{uint32(block.Width), uint32(block.Height), uint32(block.Depth)}
	tg := append([]int(nil), e.tg...)
	fn, name := p.fn, p.name
	e.r.st.Dispatches++
	e.cb.seconds += DispatchSeconds
	e.cb.commands = append(e.cb.commands, func() error {
		if err := fn.Dispatch(g, bl, binds, tg); err != nil {
			return fmt.Errorf("kernel %s: %w", name, err)
		}
		return nil
	})
}

type blit struct{ encoder }

// span checks that [off, off+n) lies in b; call with the lock held.
func (e *blit) span(what string, b mtl.Buffer, off, n uint64) ([]byte, bool) {
	bb, ok := b.(*buffer)
	if !e.usable(what) || !ok || !bb.alive(what) {
		return nil, false
	}
	if off > uint64(len(bb.mem)) || n > uint64(len(bb.mem))-off {
		e.r.misuse("%s: %d bytes at %d of a %d-byte buffer", what, n, off, len(bb.mem))
		return nil, false
	}
	return bb.mem[off : off+n], true
}

func (e *blit) FillBuffer(b mtl.Buffer, r mtl.Range, value byte) {
	e.r.enter("fillBuffer:range:value:")
	defer e.r.leave()
	dst, ok := e.span("fillBuffer:range:value:", b, r.Location, r.Length)
	if !ok {
		return
	}
	e.r.st.Fills++
	e.cb.seconds += BlitSeconds
	e.cb.commands = append(e.cb.commands, func() error {
		for i := range dst {
			dst[i] = value
		}
		return nil
	})
}

func (e *blit) CopyFromBuffer(src mtl.Buffer, srcOff uint64, dst mtl.Buffer, dstOff, size uint64) {
	e.r.enter("copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:")
	defer e.r.leave()
	from, ok1 := e.span("copyFromBuffer: source", src, srcOff, size)
	to, ok2 := e.span("copyFromBuffer: destination", dst, dstOff, size)
	if !ok1 || !ok2 {
		return
	}
	e.r.st.Copies++
	e.cb.seconds += BlitSeconds
	e.cb.commands = append(e.cb.commands, func() error {
		copy(to, from)
		return nil
	})
}

package mtl

import (
	"strings"
	"testing"
	"unsafe"
)

// checkSender answers messages like a minimal Objective-C runtime and holds every send to the
// selector table. It counts references of the objects the caller owns, so that a missing
// release or retain shows.
type checkSender struct {
	t       *testing.T
	next    ID
	refs    map[ID]int    // owned objects: +1 from alloc/new*/retain, -1 from release
	strs    map[ID][]byte // NSString contents, NUL-terminated
	bufs    map[ID][]byte // MTLBuffer contents
	sent    map[Sel]int
	failLib bool // newLibraryWithSource fails with an NSError
}

func newCheckSender(t *testing.T) *checkSender {
	return &checkSender{t: t, next: 0x1000, refs: map[ID]int{}, strs: map[ID][]byte{}, bufs: map[ID][]byte{}, sent: map[Sel]int{}}
}

func (c *checkSender) Class(name string) ID { return ID(len(name)) } // any nonzero value

func (c *checkSender) fresh(owned bool) ID {
	c.next += 16
	if owned {
		c.refs[c.next] = 1
	}
	return c.next
}

func (c *checkSender) str(s string) ID {
	id := c.fresh(false)
	c.strs[id] = append([]byte(s), 0)
	return id
}

func (c *checkSender) Send(recv ID, sel Sel, args ...any) Ret {
	c.t.Helper()
	if recv == 0 {
		c.t.Errorf("%s sent to nil", Selectors[sel].Name)
	}
	if err := CheckSend(sel, Selectors[sel].Ret, args); err != nil {
		c.t.Error(err)
		return Ret{}
	}
	c.sent[sel]++
	switch sel {
	case SelAlloc, SelNewCommandQueue, SelNewFunctionWithName, SelNewComputePipelineState:
		return Ret{ID: c.fresh(true)}
	case SelInit:
		return Ret{ID: recv}
	case SelRetain:
		if c.refs[recv] < 0 {
			c.t.Errorf("retain of a released object %#x", recv)
		}
		c.refs[recv]++
		return Ret{ID: recv}
	case SelRelease, SelDrain:
		if c.refs[recv] <= 0 {
			c.t.Errorf("%s of %#x, which the caller does not own", Selectors[sel].Name, recv)
		}
		c.refs[recv]--
	case SelStringWithUTF8String:
		return Ret{ID: c.str(args[0].(string))}
	case SelUTF8String:
		b := c.strs[recv]
		if b == nil {
			c.t.Errorf("UTF8String sent to %#x, not a string", recv)
			return Ret{}
		}
		return Ret{P: unsafe.Pointer(&b[0])}
	case SelLocalizedDescription:
		return Ret{ID: c.str("program_source:3:1: error: unknown type name 'double'")}
	case SelName:
		return Ret{ID: c.str("Apple M1")}
	case SelSupportsFamily:
		return Ret{B: args[0].(int64) <= int64(GPUFamilyApple7)}
	case SelRespondsToSelector:
		return Ret{B: true}
	case SelRecommendedMaxWorkingSetSize:
		return Ret{U: 8 << 30}
	case SelCurrentAllocatedSize:
		return Ret{U: 1 << 20}
	case SelMaxThreadgroupMemoryLength:
		return Ret{U: 32 << 10}
	case SelNewBufferWithLength:
		id := c.fresh(true)
		c.bufs[id] = make([]byte, args[0].(uint64))
		return Ret{ID: id}
	case SelLength:
		return Ret{U: uint64(len(c.bufs[recv]))}
	case SelContents:
		return Ret{P: unsafe.Pointer(&c.bufs[recv][0])}
	case SelNewLibraryWithSource:
		if c.failLib {
			*args[2].(*ID) = c.fresh(false)
			return Ret{}
		}
		return Ret{ID: c.fresh(true)}
	case SelMaxTotalThreadsPerThreadgroup:
		return Ret{U: 1024}
	case SelThreadExecutionWidth:
		return Ret{U: 32}
	case SelStaticThreadgroupMemoryLength:
		return Ret{U: 4096}
	case SelCommandBuffer, SelComputeCommandEncoder, SelBlitCommandEncoder:
		return Ret{ID: c.fresh(false)} // autoreleased: the runtime must retain
	case SelStatus:
		return Ret{U: uint64(StatusError)}
	case SelError:
		return Ret{ID: c.fresh(false)}
	case SelGPUStartTime:
		return Ret{F: 1.5}
	case SelGPUEndTime:
		return Ret{F: 1.75}
	}
	return Ret{}
}

// TestObjCRuntimeSends drives every method of the Objective-C Runtime once through the
// checking sender: each message must match the table, every selector of the table must be
// used (no stale entries, no method untested), and every owned object must be released.
func TestObjCRuntimeSends(t *testing.T) {
	cs := newCheckSender(t)
	rt := NewObjCRuntime(cs, func() ID { return cs.fresh(true) })
	pool := rt.PushPool()
	dev, err := rt.DefaultDevice()
	if err != nil {
		t.Fatal(err)
	}
	if got := dev.Name(); got != "Apple M1" {
		t.Errorf("Name() = %q", got)
	}
	if !dev.SupportsFamily(GPUFamilyApple7) || dev.SupportsFamily(GPUFamilyApple9) {
		t.Error("SupportsFamily does not pass the family through")
	}
	if dev.RecommendedMaxWorkingSetSize() != 8<<30 || dev.CurrentAllocatedSize() != 1<<20 || dev.MaxThreadgroupMemoryLength() != 32<<10 {
		t.Error("device sizes not passed through")
	}
	q, err := dev.NewCommandQueue()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := dev.NewBuffer(64, ResourceStorageModeShared)
	if err != nil {
		t.Fatal(err)
	}
	if b := buf.Contents(); len(b) != 64 {
		t.Errorf("Contents() has %d bytes, want 64", len(b))
	}
	lib, err := dev.NewLibraryWithSource("kernel void k() {}", CompileOptions{LanguageVersion: LanguageVersion3_0})
	if err != nil {
		t.Fatal(err)
	}
	fn, err := lib.NewFunction("k")
	if err != nil {
		t.Fatal(err)
	}
	p, err := dev.NewComputePipelineState(fn)
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxTotalThreadsPerThreadgroup() != 1024 || p.ThreadExecutionWidth() != 32 || p.StaticThreadgroupMemoryLength() != 4096 {
		t.Error("pipeline limits not passed through")
	}
	cb, err := q.CommandBuffer()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := cb.ComputeCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	enc.SetComputePipelineState(p)
	enc.SetBuffer(buf, 16, 0)
	enc.SetBytes([]byte{1, 2, 3, 4}, 1)
	enc.SetThreadgroupMemoryLength(256, 0)
	enc.DispatchThreadgroups(Size{4, 1, 1}, Size{256, 1, 1})
	enc.EndEncoding()
	enc.Release()
	blit, err := cb.BlitCommandEncoder()
	if err != nil {
		t.Fatal(err)
	}
	blit.FillBuffer(buf, Range{0, 64}, 0xff)
	blit.CopyFromBuffer(buf, 0, buf, 32, 16)
	blit.EndEncoding()
	blit.Release()
	cb.Commit()
	cb.WaitUntilCompleted()
	if cb.Status() != StatusError {
		t.Error("Status not passed through")
	}
	if err := cb.Error(); err == nil || !strings.Contains(err.Error(), "unknown type name 'double'") {
		t.Errorf("command buffer Error() = %v", err)
	}
	if cb.GPUEndTime()-cb.GPUStartTime() != 0.25 {
		t.Error("GPU times not passed through")
	}
	cs.failLib = true
	_, err = dev.NewLibraryWithSource("bad", CompileOptions{})
	if err == nil || !strings.Contains(err.Error(), "program_source:3:1: error") {
		t.Errorf("failed compile: err = %v, want the log from the NSError", err)
	}
	for _, o := range []Object{cb, p, fn, lib, buf, q, dev} {
		o.Release()
	}
	pool.Drain()

	for i, s := range Selectors {
		if cs.sent[Sel(i)] == 0 {
			t.Errorf("selector %s is in the table but never sent", s.Name)
		}
	}
	for id, n := range cs.refs {
		if n != 0 {
			t.Errorf("object %#x left with %d references", id, n)
		}
	}
}

package metal

import (
	"fmt"
	"strings"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mtl"
)

// MinFamily is the oldest GPU family the kernels run on: Apple7 (M1, A14) brings float atomic
// add on device memory, which the backward passes use.
const MinFamily = mtl.GPUFamilyApple7

// SIMDWidth is the SIMD-group width the kernels' warp helpers assume.
const SIMDWidth = 32

// languageVersion: MSL 3.0 is the first with float atomics; the default version rejects them.
const languageVersion = mtl.LanguageVersion3_0

// originMemory marks a module whose library this device had already compiled: Metal's runtime
// compiler yields no image that the on-disk cache could keep (that would take a binary archive,
// an API of its own), so libraries are cached in memory, by the hash of their MSL text.
const originMemory driver.ModuleOrigin = "memory-cache"

// Device is a Metal device with one command queue. Launches, memsets and uploads are encoded
// into one open command buffer, which is committed only when something must wait (a download,
// Sync, Close) or an event marks a boundary; the CPU waits only for readouts.
type Device struct {
	mu     sync.Mutex // serialises every call; all Metal calls then run on th
	rt     mtl.Runtime
	th     *ownerThread
	opts   driver.Options
	closed bool

	dev   mtl.Device
	queue mtl.CommandQueue
	info  driver.Info
	tgMax int // threadgroup memory per threadgroup, bytes

	libs    map[string]mtl.Library // by MSL hash
	buffers map[*buffer]bool       // live, released at Close if not freed
	modules map[*module]bool
	events  map[*event]bool

	// The open command buffer and its open encoder (at most one of compute and blit).
	cb      mtl.CommandBuffer
	compute mtl.ComputeCommandEncoder
	blit    mtl.BlitCommandEncoder
	cur     *flight // what the open command buffer holds

	inflight []*flight // committed and not yet seen complete, oldest first
	last     *flight   // the most recently committed
	seq      int       // command buffers committed so far
	waiting  []*event  // recorded events whose next command buffer is not committed yet
	asyncErr error     // a failed command buffer not yet reported
}

// flight is one command buffer from encoding to release: the kernels in it (for error
// messages), the staging buffers it reads, and how many events still need its GPU times.
type flight struct {
	cb      mtl.CommandBuffer
	kernels []string
	staging []mtl.Buffer
	refs    int // events that point at it
	retired bool
}

var _ driver.Device = (*Device)(nil)

// New opens the default device of rt. A runtime without a device, or with a GPU older than
// MinFamily, gives an error for which errors.Is(err, driver.ErrNoDevice) holds, so that
// `device: auto` falls back to the CPU engine.
func New(rt mtl.Runtime, opts driver.Options) (*Device, error) {
	d := &Device{rt: rt, th: newOwnerThread(), opts: opts,
		libs: map[string]mtl.Library{}, buffers: map[*buffer]bool{}, modules: map[*module]bool{}, events: map[*event]bool{}}
	var err error
	d.th.run(func() {
		p := rt.PushPool()
		defer p.Drain()
		err = d.open()
	})
	if err != nil {
		d.th.stop()
		return nil, err
	}
	return d, nil
}

func (d *Device) open() error {
	dev, err := d.rt.DefaultDevice()
	if err != nil {
		return fmt.Errorf("metal: no Metal device: %w: %w", driver.ErrNoDevice, err)
	}
	fam := 0
	for f := mtl.GPUFamilyAppleNewest; f >= mtl.GPUFamilyApple1; f-- {
		if dev.SupportsFamily(f) {
			fam = int(f - mtl.GPUFamilyApple1 + 1)
			break
		}
	}
	name := dev.Name()
	if !dev.SupportsFamily(MinFamily) {
		dev.Release()
		have := "no Apple GPU family"
		if fam > 0 {
			have = fmt.Sprintf("GPU family Apple%d", fam)
		}
		return fmt.Errorf("metal: %s has %s; the kernels need Apple%d or later (M1 and newer) for float atomics: %w",
			name, have, MinFamily-mtl.GPUFamilyApple1+1, driver.ErrNoDevice)
	}
	q, err := dev.NewCommandQueue()
	if err != nil {
		dev.Release()
		return fmt.Errorf("metal: %w", err)
	}
	d.dev, d.queue = dev, q
	d.tgMax = int(dev.MaxThreadgroupMemoryLength())
	d.info = driver.Info{
		Backend:  "metal",
		Name:     name,
		Arch:     fmt.Sprintf("apple%d", fam),
		Driver:   "Metal",
		Compiler: "Metal runtime compiler (" + languageVersion.String() + ")",
		MemTotal: int64(dev.RecommendedMaxWorkingSetSize()),
	}
	if d.opts.NoCompiler {
		d.info.Compiler = "none"
	}
	return nil
}

// do runs fn on the owner thread inside an autorelease pool, with the device locked.
func (d *Device) do(fn func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return driver.ErrClosed
	}
	var err error
	d.th.run(func() {
		p := d.rt.PushPool()
		defer p.Drain()
		err = fn()
	})
	return err
}

// Info describes the device.
func (d *Device) Info() driver.Info { return d.info }

// MemInfo reports Metal's recommended working set as the total and what is left of it as free.
func (d *Device) MemInfo() (free, total int64, err error) {
	err = d.do(func() error {
		free, total = d.memInfo()
		return nil
	})
	return free, total, err
}

func (d *Device) memInfo() (free, total int64) {
	total = int64(d.dev.RecommendedMaxWorkingSetSize())
	return max(total-int64(d.dev.CurrentAllocatedSize()), 0), total
}

type buffer struct {
	dev   *Device
	mb    mtl.Buffer // nil for a zero-length buffer
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

// Alloc creates a shared-storage buffer: Apple GPUs share memory with the CPU, so uploads
// and downloads are plain copies through the buffer's contents.
func (d *Device) Alloc(n int) (driver.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("metal: alloc %d bytes: negative size", n)
	}
	var out *buffer
	err := d.do(func() error {
		b := &buffer{dev: d, size: n}
		if n > 0 {
			mb, err := d.dev.NewBuffer(uint64(n), mtl.ResourceStorageModeShared)
			if err != nil {
				free, total := d.memInfo()
				return &driver.OOMError{Backend: "metal", Requested: int64(n), Free: free, Total: total, Err: err}
			}
			b.mb = mb
		}
		d.buffers[b] = true
		out = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Free releases b. It need not wait: a command buffer keeps the buffers it uses alive until
// it completes.
func (d *Device) Free(b driver.Buffer) error {
	return d.do(func() error {
		mb, err := d.own(b)
		if err != nil {
			return err
		}
		d.release(mb)
		return nil
	})
}

func (d *Device) release(b *buffer) {
	b.freed = true
	if b.mb != nil {
		b.mb.Release()
	}
	delete(d.buffers, b)
}

func (d *Device) span(op string, b driver.Buffer, off, n int) (*buffer, error) {
	mb, err := d.own(b)
	if err != nil {
		return nil, fmt.Errorf("metal: %s: %w", op, err)
	}
	if off < 0 || n < 0 || off > mb.size || n > mb.size-off {
		return nil, fmt.Errorf("metal: %s %d bytes at offset %d of a %d-byte buffer: out of range", op, n, off, mb.size)
	}
	return mb, nil
}

// busy reports whether the GPU may still touch memory: an open command buffer, or committed
// ones not yet seen complete (those seen complete are retired on the way).
func (d *Device) busy() bool {
	d.retireCompleted()
	return d.cb != nil || len(d.inflight) > 0
}

// Upload copies src into dst at off, in queue order: straight into the shared memory when the
// GPU is idle, else through a staging buffer and a blit copy in the open command buffer, so
// that the caller never waits for the GPU to write.
func (d *Device) Upload(dst driver.Buffer, off int, src []byte) error {
	return d.do(func() error {
		mb, err := d.span("upload", dst, off, len(src))
		if err != nil || len(src) == 0 {
			return err
		}
		if !d.busy() {
			copy(mb.mb.Contents()[off:], src)
			return nil
		}
		st, err := d.dev.NewBuffer(uint64(len(src)), mtl.ResourceStorageModeShared)
		if err != nil {
			free, total := d.memInfo()
			return &driver.OOMError{Backend: "metal", Requested: int64(len(src)), Free: free, Total: total, Err: fmt.Errorf("upload staging: %w", err)}
		}
		copy(st.Contents(), src)
		enc, err := d.blitEncoder()
		if err != nil {
			st.Release()
			return err
		}
		enc.CopyFromBuffer(st, 0, mb.mb, uint64(off), uint64(len(src)))
		d.cur.staging = append(d.cur.staging, st)
		return nil
	})
}

// Download copies from src at off into dst after all queued work.
func (d *Device) Download(dst []byte, src driver.Buffer, off int) error {
	return d.do(func() error {
		mb, err := d.span("download", src, off, len(dst))
		if err != nil {
			return err
		}
		if err := d.wait(); err != nil {
			return err
		}
		if len(dst) > 0 {
			copy(dst, mb.mb.Contents()[off:])
		}
		return nil
	})
}

// DownloadAfter copies once the command buffer before the event has completed, without
// waiting for the work encoded or committed after it.
func (d *Device) DownloadAfter(dst []byte, src driver.Buffer, off int, after driver.Event) error {
	return d.do(func() error {
		e, err := d.ownEvent(after)
		if err != nil {
			return err
		}
		if !e.recorded {
			return fmt.Errorf("metal: download after an event never recorded")
		}
		mb, err := d.span("download", src, off, len(dst))
		if err != nil {
			return err
		}
		if e.prev != nil {
			e.prev.cb.WaitUntilCompleted()
			if err := flightError(e.prev); err != nil {
				return err
			}
		}
		if len(dst) > 0 {
			copy(dst, mb.mb.Contents()[off:])
		}
		return nil
	})
}

// Memset fills n bytes of dst from off with a blit fill in the open command buffer.
func (d *Device) Memset(dst driver.Buffer, off, n int, value byte) error {
	return d.do(func() error {
		mb, err := d.span("memset", dst, off, n)
		if err != nil || n == 0 {
			return err
		}
		enc, err := d.blitEncoder()
		if err != nil {
			return err
		}
		enc.FillBuffer(mb.mb, mtl.Range{Location: uint64(off), Length: uint64(n)}, value)
		return d.debugWait()
	})
}

// openBuffer starts a command buffer if none is open.
func (d *Device) openBuffer() error {
	if d.cb != nil {
		return nil
	}
	cb, err := d.queue.CommandBuffer()
	if err != nil {
		return fmt.Errorf("metal: %w", err)
	}
	d.cb, d.cur = cb, &flight{cb: cb}
	return nil
}

func (d *Device) endEncoder() {
	if d.compute != nil {
		d.compute.EndEncoding()
		d.compute.Release()
		d.compute = nil
	}
	if d.blit != nil {
		d.blit.EndEncoding()
		d.blit.Release()
		d.blit = nil
	}
}

func (d *Device) computeEncoder() (mtl.ComputeCommandEncoder, error) {
	if d.compute != nil {
		return d.compute, nil
	}
	if err := d.openBuffer(); err != nil {
		return nil, err
	}
	d.endEncoder()
	enc, err := d.cb.ComputeCommandEncoder()
	if err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	d.compute = enc
	return enc, nil
}

func (d *Device) blitEncoder() (mtl.BlitCommandEncoder, error) {
	if d.blit != nil {
		return d.blit, nil
	}
	if err := d.openBuffer(); err != nil {
		return nil, err
	}
	d.endEncoder()
	enc, err := d.cb.BlitCommandEncoder()
	if err != nil {
		return nil, fmt.Errorf("metal: %w", err)
	}
	d.blit = enc
	return enc, nil
}

// commit ends the open command buffer and commits it without waiting.
func (d *Device) commit() {
	if d.cb == nil {
		return
	}
	d.endEncoder()
	d.cb.Commit()
	f := d.cur
	d.cb, d.cur = nil, nil
	d.inflight = append(d.inflight, f)
	// The last buffer stays alive for the next event to point at.
	f.refs++
	if d.last != nil {
		d.drop(d.last, 1)
	}
	d.last = f
	d.seq++
	for _, e := range d.waiting {
		e.next = f
		f.refs++
	}
	d.waiting = d.waiting[:0]
}

// flightError is a failed command buffer's error, naming the kernels it held (Metal does not
// say which of them failed).
func flightError(f *flight) error {
	if f.cb.Status() != mtl.StatusError {
		return nil
	}
	return fmt.Errorf("metal: command buffer with %s failed: %w", strings.Join(f.kernels, ", "), f.cb.Error())
}

// wait commits the open command buffer, waits for every committed one and returns the first
// failure among them (or one seen earlier and not yet reported).
func (d *Device) wait() error {
	d.commit()
	for _, f := range d.inflight {
		f.cb.WaitUntilCompleted()
		d.retire(f)
	}
	d.inflight = d.inflight[:0]
	err := d.asyncErr
	d.asyncErr = nil
	return err
}

// retireCompleted retires the committed buffers that have completed, oldest first, without
// waiting.
func (d *Device) retireCompleted() {
	n := 0
	for _, f := range d.inflight {
		if f.cb.Status() < mtl.StatusCompleted {
			break
		}
		d.retire(f)
		n++
	}
	d.inflight = append(d.inflight[:0], d.inflight[n:]...)
}

// retire records a completed buffer's failure and releases what it held once no event needs
// its times.
func (d *Device) retire(f *flight) {
	if err := flightError(f); err != nil && d.asyncErr == nil {
		d.asyncErr = err
	}
	for _, s := range f.staging {
		s.Release()
	}
	f.staging = nil
	f.retired = true
	d.drop(f, 0)
}

// drop removes n event references from f and releases its command buffer when none remain.
func (d *Device) drop(f *flight, n int) {
	f.refs -= n
	if f.retired && f.refs == 0 && f.cb != nil {
		f.cb.Release()
		f.cb = nil
	}
}

func (d *Device) debugWait() error {
	if !d.opts.Debug {
		return nil
	}
	return d.wait()
}

// Sync commits queued work, waits for it and reports any failure.
func (d *Device) Sync() error { return d.do(d.wait) }

// BeginCapture: Metal's nearest equivalent (indirect command buffers) is another model; the
// fused engine runs its step uncaptured here.
func (d *Device) BeginCapture() error {
	return fmt.Errorf("metal: graph capture: %w", driver.ErrUnsupported)
}

// EndCapture: see BeginCapture.
func (d *Device) EndCapture() (driver.Graph, error) {
	return nil, fmt.Errorf("metal: graph capture: %w", driver.ErrUnsupported)
}

// Close waits for queued work and releases every object the device still holds.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	var err error
	d.th.run(func() {
		p := d.rt.PushPool()
		defer p.Drain()
		err = d.wait()
		for e := range d.events {
			e.forget()
		}
		if d.last != nil {
			d.drop(d.last, 1)
			d.last = nil
		}
		for m := range d.modules {
			m.release()
		}
		for b := range d.buffers {
			d.release(b)
		}
		for _, l := range d.libs {
			l.Release()
		}
		d.libs = nil
		d.queue.Release()
		d.dev.Release()
	})
	d.closed = true
	d.th.stop()
	return err
}

package cuda

import "github.com/rlxsplat/rlxsplat/internal/gpu/driver"

// RunOnStream runs fn on the device's owner thread, with the device's context current there,
// after every call queued before it (launches included: they have reached the stream by
// then), and waits for it. fn gets the device's stream (a CUstream) and ptr, which turns one
// of this device's buffers into its device address (0 for a zero-length buffer).
//
// It exists for libraries that queue their own work on a stream of ours and take the device
// from the calling thread's current context, such as an NCCL all-reduce of the gradients,
// which must run on this stream in order with the kernels that wrote them. fn must not call
// this Device's methods: it runs on the thread that would serve them. fn may block until
// other devices' owner threads make a matching call (an NCCL collective's first call waits
// for every rank); the caller then starts those RunOnStream calls at the same time, one
// goroutine per device. A failure of fn is returned as is, joined with any posted call's
// failure not yet reported. With Options.Debug the stream is synchronised after fn, as after
// a launch, so that a fault names this call.
func (d *Device) RunOnStream(fn func(stream uintptr, ptr func(driver.Buffer) (uint64, error)) error) error {
	ptr := func(b driver.Buffer) (uint64, error) { return d.addr(b, 0) }
	return d.do(func() error {
		if err := fn(d.stream, ptr); err != nil {
			return err
		}
		if d.opts.Debug && !d.capturing {
			return d.check(d.api.cuStreamSynchronize(d.stream), "cuStreamSynchronize", "after RunOnStream")
		}
		return nil
	})
}

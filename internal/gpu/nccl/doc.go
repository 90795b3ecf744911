// Package nccl binds NVIDIA's collective communication library (libnccl.so.2, loaded with
// purego, no cgo) for data-parallel training over the GPUs of one host: one process drives N
// GPUs, each through its own internal/gpu/cuda Device, and the gradients are summed across
// them with an all-reduce queued on each device's own stream, in order with its kernels.
//
// How it is meant to be used:
//
//	lib, err := nccl.Open(os.Getenv)        // also turns NVLink multicast off (NCCL_NVLS_ENABLE=0)
//	comms, err := lib.InitAll([]int{0, 1})  // one Comm per device, rank i on devices[i]
//	// per step, one goroutine per rank i, all at once:
//	err := devs[i].RunOnStream(func(stream uintptr, ptr func(driver.Buffer) (uint64, error)) error {
//		p, err := ptr(grad[i])
//		if err != nil {
//			return err
//		}
//		return comms[i].AllReduce(uintptr(p), uintptr(p), n, nccl.Float32, nccl.Sum, stream)
//	})
//
// Threading: an NCCL call on a communicator expects that communicator's device current on
// the calling OS thread, and a collective's call may block its thread until every rank has
// called too (the first collective sets up the connections between ranks). So the calls for
// the N ranks of one collective must be in flight together: either one per device, each on
// its device's owner thread (cuda.Device.RunOnStream) from N goroutines at once, which is the
// path the trainer takes because it keeps each all-reduce in its device's queue behind the
// kernels that produced the gradient; or all from one goroutine inside Lib.Group, which
// NCCL then launches together (tests and tools; the caller must first make sure that each
// device has issued the work the collective depends on). Calling the ranks one after the
// other, outside a group, from one thread, deadlocks.
//
// Errors: every call's ncclResult_t is checked; an *Error names the call, the result code and
// NCCL's own text for it (and ncclGetLastError's detail when there is one). When the library
// cannot be loaded (not installed, not Linux), errors.Is(err, ErrUnavailable) holds, so a
// caller can fall back to one GPU; the not-found message lists where it looked and how to
// install NCCL.
//
// Non-goals: bootstrapping across processes or hosts (InitRank exists, but carrying the
// UniqueID between processes is the caller's business), point-to-point send/receive, buffer
// registration, non-blocking communicators, and NVLink multicast (NVLS), which Open switches
// off. The library is never unloaded: NCCL starts threads of its own.
package nccl

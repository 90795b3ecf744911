package multi

import (
	"errors"
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/nccl"
)

// streamRunner is a device that runs a function on its own thread with its stream (the CUDA
// device's RunOnStream), where NCCL's calls must be made.
type streamRunner interface {
	RunOnStream(fn func(stream uintptr, ptr func(gpu.Buffer) (uint64, error)) error) error
}

// NCCLReducer all-reduces on the devices' own streams with NCCL, in order with the steps'
// kernels: the host waits for nothing.
type NCCLReducer struct {
	comms []*nccl.Comm
}

// NewNCCLReducer makes one NCCL communicator per device of devs (ordinals) through lib. The
// devices passed to Reduce must be CUDA devices (RunOnStream) with those ordinals, rank k on
// ordinal devs[k].
func NewNCCLReducer(lib *nccl.Lib, devs []int) (*NCCLReducer, error) {
	comms, err := lib.InitAll(devs)
	if err != nil {
		return nil, fmt.Errorf("multi: NCCL communicators for GPUs %v: %w", devs, err)
	}
	return &NCCLReducer{comms: comms}, nil
}

// Reduce is the Reducer's: the gradients summed, the seen flags and the overflow flag maxed,
// each an all-reduce on the rank's stream. Every rank issues its three from its own device's
// thread at the same time (multi.Engine runs the ranks' steps at once), as NCCL requires.
func (n *NCCLReducer) Reduce(rank int, dev gpu.Device, r fused.Reduction) error {
	if rank < 0 || rank >= len(n.comms) {
		return fmt.Errorf("multi: NCCL reduction: rank %d of %d", rank, len(n.comms))
	}
	sr, ok := dev.(streamRunner)
	if !ok {
		return fmt.Errorf("multi: NCCL reduction: rank %d's device (%s) has no stream to run NCCL on", rank, dev.Info().Backend)
	}
	c := n.comms[rank]
	return sr.RunOnStream(func(stream uintptr, ptr func(gpu.Buffer) (uint64, error)) error {
		g, err1 := ptr(r.Grads)
		s, err2 := ptr(r.Seen)
		ro, err3 := ptr(r.Readout)
		gOut, err4 := ptr(r.GradsOut)
		sOut, err5 := ptr(r.SeenOut)
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return err
		}
		return errors.Join(
			c.AllReduce(uintptr(g), uintptr(gOut), r.N*abi.ParamFloats, nccl.Float32, nccl.Sum, stream),
			c.AllReduce(uintptr(s), uintptr(sOut), r.N, nccl.Uint32, nccl.Max, stream),
			c.AllReduce(uintptr(ro)+uintptr(r.AbortOff), uintptr(ro)+uintptr(r.PeerOff), 1, nccl.Uint32, nccl.Max, stream))
	})
}

// Close destroys the communicators.
func (n *NCCLReducer) Close() error {
	var errs []error
	for _, c := range n.comms {
		errs = append(errs, c.Close())
	}
	n.comms = nil
	return errors.Join(errs...)
}

package multi

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// HostReducer reduces through the host: every rank downloads its buffers (waiting for its
// queued work), and once all have, each sums the ranks' gradients in rank order, so that every
// rank gets the very same bits, and uploads the result. It works with any device (the
// emulator's included) and needs no library, at the cost of two copies of the gradients
// across the bus a step: the fallback where NCCL is missing, and the reducer the tests use.
type HostReducer struct {
	ranks int
	round *rendezvous[reducePost, reduced]
}

// reducePost is what a rank downloaded for a round (or why it could not); reduced is the
// round's result, shared read-only by its ranks.
type reducePost struct {
	grads []float32
	seen  []uint32
	abort uint32
	err   error
}

type reduced struct {
	sum     []float32
	seenMax []uint32
	peer    uint32
	err     error
}

// NewHostReducer returns a host reducer for ranks ranks.
func NewHostReducer(ranks int) *HostReducer {
	return &HostReducer{ranks: ranks, round: newRendezvous(ranks, combine)}
}

// Reduce is the Reducer's: rank's share of one round.
func (h *HostReducer) Reduce(rank int, dev gpu.Device, r fused.Reduction) error {
	if rank < 0 || rank >= h.ranks {
		return fmt.Errorf("multi: host reduction: rank %d of %d", rank, h.ranks)
	}
	g := make([]float32, r.N*abi.ParamFloats)
	s := make([]uint32, r.N)
	w := make([]byte, 4)
	err := errors.Join(gpu.DownloadF32(dev, g, r.Grads), gpu.DownloadSlice(dev, s, r.Seen, 0), dev.Download(w, r.Readout, r.AbortOff))
	res := h.round.meet(rank, reducePost{grads: g, seen: s, abort: binary.LittleEndian.Uint32(w), err: err})
	if res.err != nil {
		return res.err
	}
	binary.LittleEndian.PutUint32(w, res.peer)
	return errors.Join(gpu.UploadF32(dev, r.GradsOut, res.sum), gpu.UploadSlice(dev, r.SeenOut, 0, res.seenMax), dev.Upload(r.Readout, r.PeerOff, w))
}

// combine sums a round's gradients in rank order, so that every rank gets the very same bits,
// and maxes the seen flags and the overflow flags.
func combine(in []reducePost) reduced {
	var out reduced
	for k, p := range in {
		if p.err != nil {
			out.err = errors.Join(out.err, fmt.Errorf("multi: host reduction: rank %d: %w", k, p.err))
		}
	}
	n := len(in[0].grads)
	for k, p := range in {
		if len(p.grads) != n || len(p.seen) != len(in[0].seen) {
			out.err = errors.Join(out.err, fmt.Errorf("multi: host reduction: rank %d has %d gradients, rank 0 %d", k, len(p.grads), n))
		}
	}
	if out.err != nil {
		return out
	}
	out.sum, out.seenMax = make([]float32, n), make([]uint32, len(in[0].seen))
	for _, p := range in {
		for i, x := range p.grads {
			out.sum[i] += x
		}
		for i, x := range p.seen {
			out.seenMax[i] = max(out.seenMax[i], x)
		}
		out.peer = max(out.peer, p.abort)
	}
	return out
}

// Close is the Reducer's; a host reducer holds nothing.
func (h *HostReducer) Close() error { return nil }

package multi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

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
	mu    sync.Mutex
	cond  *sync.Cond
	// The round under way: what each rank downloaded, how many ranks have arrived and how
	// many have taken the result; gen counts the rounds whose result is ready.
	grads   [][]float32
	seen    [][]uint32
	abort   []uint32
	errs    []error
	arrived int
	left    int
	gen     int
	// The last round's result, shared read-only by its ranks (a new round makes new slices).
	sum     []float32
	seenMax []uint32
	peer    uint32
	err     error
}

// NewHostReducer returns a host reducer for ranks ranks.
func NewHostReducer(ranks int) *HostReducer {
	h := &HostReducer{ranks: ranks, grads: make([][]float32, ranks), seen: make([][]uint32, ranks), abort: make([]uint32, ranks),
		errs: make([]error, ranks)}
	h.cond = sync.NewCond(&h.mu)
	return h
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

	h.mu.Lock()
	for h.arrived == h.ranks { // the last round's ranks are still taking its result
		h.cond.Wait()
	}
	h.grads[rank], h.seen[rank], h.abort[rank], h.errs[rank] = g, s, binary.LittleEndian.Uint32(w), err
	h.arrived++
	gen := h.gen
	if h.arrived == h.ranks {
		h.combine()
		h.gen++
		h.cond.Broadcast()
	}
	for h.gen == gen {
		h.cond.Wait()
	}
	sum, seen, peer, failed := h.sum, h.seenMax, h.peer, h.err
	h.left++
	if h.left == h.ranks {
		h.arrived, h.left = 0, 0
		h.cond.Broadcast()
	}
	h.mu.Unlock()
	if failed != nil {
		return failed
	}
	binary.LittleEndian.PutUint32(w, peer)
	return errors.Join(gpu.UploadF32(dev, r.GradsOut, sum), gpu.UploadSlice(dev, r.SeenOut, 0, seen), dev.Upload(r.Readout, r.PeerOff, w))
}

// combine sums the round's gradients in rank order, maxes the seen flags and the overflow
// flags, and drops the ranks' downloads; h.mu is held.
func (h *HostReducer) combine() {
	h.sum, h.seenMax, h.peer, h.err = nil, nil, 0, nil
	for k, err := range h.errs {
		if err != nil {
			h.err = errors.Join(h.err, fmt.Errorf("multi: host reduction: rank %d: %w", k, err))
		}
	}
	n := len(h.grads[0])
	for k := range h.grads {
		if len(h.grads[k]) != n || len(h.seen[k]) != len(h.seen[0]) {
			h.err = errors.Join(h.err, fmt.Errorf("multi: host reduction: rank %d has %d gradients, rank 0 %d", k, len(h.grads[k]), n))
		}
	}
	if h.err == nil {
		h.sum, h.seenMax = make([]float32, n), make([]uint32, len(h.seen[0]))
		for k := range h.grads {
			for i, x := range h.grads[k] {
				h.sum[i] += x
			}
			for i, x := range h.seen[k] {
				h.seenMax[i] = max(h.seenMax[i], x)
			}
			h.peer = max(h.peer, h.abort[k])
		}
	}
	clear(h.grads)
	clear(h.seen)
	clear(h.errs)
}

// Close is the Reducer's; a host reducer holds nothing.
func (h *HostReducer) Close() error { return nil }

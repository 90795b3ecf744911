package multi

import (
	"errors"
	"fmt"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/nccl"
)

// Exchange is one rank's share of an all-to-all of 32-bit words with a count for every pair
// of ranks: the exchange Gaussian sharding makes of projected splats and of their gradients
// (docs/sharding.md, steps 2 and 4). Send holds the words for every rank, rank d's
// SendCounts[d] of them, back to back in rank order from word 0 (this rank's own included).
// The exchange leaves in Recv the words every rank sent this one, rank s's RecvCounts[s] of
// them, back to back in rank order from word 0, and sets RecvCounts. Recv holds RecvCap words.
type Exchange struct {
	Send       gpu.Buffer
	SendCounts []int
	Recv       gpu.Buffer
	RecvCap    int
	RecvCounts []int
}

// Exchanger runs Exchanges: every rank calls Exchange at the same point, each on its own
// goroutine with its rank and device, and it returns once Recv holds the words (in order with
// the device's queued work) or, for a stream-ordered exchanger, once the copies are queued
// ahead of the device's next work. The counts are the host's (a sharded step reads its
// record counts back before the records move). A round that cannot run, because some rank's
// counts are malformed or its Recv too small, fails on every rank, so that none waits for
// words that will not come.
type Exchanger interface {
	Exchange(rank int, dev gpu.Device, x *Exchange) error
	Close() error
}

// countRounds gives every rank the whole table of the ranks' send counts at once: the
// rendezvous both exchangers start with. A round is judged as a whole: if any rank's counts or
// room are wrong, every rank gets the same error.
type countRounds struct {
	ranks int
	mu    sync.Mutex
	cond  *sync.Cond
	// The round under way: each rank's send counts and receive room, how many ranks have
	// arrived and how many have taken the result; gen counts the rounds whose result is ready.
	counts  [][]int
	room    []int
	bad     []error
	arrived int
	left    int
	gen     int
	// The last round's table (rows by sender) and verdict, read-only once published.
	table [][]int
	err   error
}

func newCountRounds(ranks int) *countRounds {
	c := &countRounds{ranks: ranks, counts: make([][]int, ranks), room: make([]int, ranks), bad: make([]error, ranks)}
	c.cond = sync.NewCond(&c.mu)
	return c
}

// meet posts rank's send counts and receive room and returns the round's table, row s the
// counts rank s sends to each rank. A rank that cannot take part (bad) still meets the
// others, so that the round fails on all of them.
func (c *countRounds) meet(rank int, send []int, room int, bad error) ([][]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.arrived == c.ranks { // the last round's ranks are still taking its table
		c.cond.Wait()
	}
	c.counts[rank], c.room[rank], c.bad[rank] = append([]int(nil), send...), room, bad
	c.arrived++
	gen := c.gen
	if c.arrived == c.ranks {
		c.table, c.err = c.counts, c.judge()
		c.counts, c.bad = make([][]int, c.ranks), make([]error, c.ranks)
		c.gen++
		c.cond.Broadcast()
	}
	for c.gen == gen {
		c.cond.Wait()
	}
	table, err := c.table, c.err
	c.left++
	if c.left == c.ranks {
		c.arrived, c.left = 0, 0
		c.cond.Broadcast()
	}
	return table, err
}

// judge checks the round's counts: one per rank, none negative, and every rank's incoming
// words within its room; c.mu is held.
func (c *countRounds) judge() error {
	var errs []error
	for s, row := range c.counts {
		if c.bad[s] != nil {
			errs = append(errs, fmt.Errorf("rank %d: %w", s, c.bad[s]))
		}
		if len(row) != c.ranks {
			errs = append(errs, fmt.Errorf("rank %d gave %d send counts for %d ranks", s, len(row), c.ranks))
			continue
		}
		for d, n := range row {
			if n < 0 {
				errs = append(errs, fmt.Errorf("rank %d's send count for rank %d is %d", s, d, n))
			}
		}
	}
	if len(errs) == 0 {
		for d := range c.ranks {
			in := 0
			for s := range c.ranks {
				in += c.counts[s][d]
			}
			if in > c.room[d] {
				errs = append(errs, fmt.Errorf("rank %d receives %d words, room for %d", d, in, c.room[d]))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("multi: exchange: %w", err)
	}
	return nil
}

// receive sets x.RecvCounts from the table's column for rank.
func receive(x *Exchange, table [][]int, rank int) {
	x.RecvCounts = x.RecvCounts[:0]
	for s := range table {
		x.RecvCounts = append(x.RecvCounts, table[s][rank])
	}
}

// before is how many words sender s sends to ranks below d: where d's run starts in s's Send.
func before(row []int, d int) int {
	n := 0
	for _, c := range row[:d] {
		n += c
	}
	return n
}

// HostExchanger exchanges through the host: every rank downloads its Send (waiting for its
// queued work), and once all have, each gathers the runs sent to it in rank order and uploads
// them into its Recv. It works with any device (the emulator's included) and needs no library:
// what the emulator's tests of sharding run on, and the fallback without NCCL.
type HostExchanger struct {
	counts *countRounds
	mu     sync.Mutex
	cond   *sync.Cond
	// The round under way: each rank's downloaded words (or its error), how many have
	// arrived and how many have taken what they need; gen counts the rounds ready.
	words   [][]uint32
	errs    []error
	arrived int
	left    int
	gen     int
	// The last round's words, shared read-only by its ranks, and its error.
	sent [][]uint32
	err  error
}

// NewHostExchanger returns a host exchanger for ranks ranks.
func NewHostExchanger(ranks int) *HostExchanger {
	h := &HostExchanger{counts: newCountRounds(ranks), words: make([][]uint32, ranks), errs: make([]error, ranks)}
	h.cond = sync.NewCond(&h.mu)
	return h
}

// Exchange is the Exchanger's: rank's share of one round.
func (h *HostExchanger) Exchange(rank int, dev gpu.Device, x *Exchange) error {
	if rank < 0 || rank >= h.counts.ranks {
		return fmt.Errorf("multi: host exchange: rank %d of %d", rank, h.counts.ranks)
	}
	table, err := h.counts.meet(rank, x.SendCounts, x.RecvCap, nil)
	if err != nil {
		return err
	}
	out := before(table[rank], len(table))
	words := make([]uint32, out)
	var derr error
	if out > 0 {
		derr = gpu.DownloadSlice(dev, words, x.Send, 0)
	}

	h.mu.Lock()
	for h.arrived == h.counts.ranks {
		h.cond.Wait()
	}
	h.words[rank], h.errs[rank] = words, derr
	h.arrived++
	gen := h.gen
	if h.arrived == h.counts.ranks {
		h.sent, h.err = h.words, nil
		for k, e := range h.errs {
			if e != nil {
				h.err = errors.Join(h.err, fmt.Errorf("multi: host exchange: rank %d's send buffer: %w", k, e))
			}
		}
		h.words, h.errs = make([][]uint32, h.counts.ranks), make([]error, h.counts.ranks)
		h.gen++
		h.cond.Broadcast()
	}
	for h.gen == gen {
		h.cond.Wait()
	}
	sent, failed := h.sent, h.err
	h.left++
	if h.left == h.counts.ranks {
		h.arrived, h.left = 0, 0
		h.cond.Broadcast()
	}
	h.mu.Unlock()
	if failed != nil {
		return failed
	}
	var in []uint32
	for s := range table {
		at := before(table[s], rank)
		in = append(in, sent[s][at:at+table[s][rank]]...)
	}
	receive(x, table, rank)
	if len(in) == 0 {
		return nil
	}
	if err := gpu.UploadSlice(dev, x.Recv, 0, in); err != nil {
		return fmt.Errorf("multi: host exchange: rank %d's receive buffer: %w", rank, err)
	}
	return nil
}

// Close is the Exchanger's; a host exchanger holds nothing.
func (h *HostExchanger) Close() error { return nil }

// NCCLExchanger exchanges with NCCL's point-to-point calls on the devices' own streams, in
// order with their kernels: after the counts' rendezvous on the host, every rank issues, in one
// group, a send of its run for each rank and a receive of each rank's run for it (NCCL has no
// all-to-all with counts; this grouped form is how its documentation builds one). Runs of no
// words are neither sent nor received, on both sides alike.
type NCCLExchanger struct {
	lib    *nccl.Lib
	comms  []*nccl.Comm
	counts *countRounds
}

// NewNCCLExchanger makes one NCCL communicator per device of devs (ordinals) through lib; rank
// k's device passed to Exchange must be a CUDA device (RunOnStream) with ordinal devs[k].
func NewNCCLExchanger(lib *nccl.Lib, devs []int) (*NCCLExchanger, error) {
	comms, err := lib.InitAll(devs)
	if err != nil {
		return nil, fmt.Errorf("multi: NCCL communicators for GPUs %v: %w", devs, err)
	}
	return &NCCLExchanger{lib: lib, comms: comms, counts: newCountRounds(len(comms))}, nil
}

// Exchange is the Exchanger's: the counts' rendezvous, then rank's sends and receives queued
// on its device's stream from the device's thread. Every rank must call it at once (a
// multi-rank engine runs the ranks' steps at once), as NCCL pairs the ranks' calls. A rank
// whose calls fail after the rendezvous leaves its peers' unmatched: abort the communicators
// (nccl.Comm.Abort) rather than wait on them.
func (n *NCCLExchanger) Exchange(rank int, dev gpu.Device, x *Exchange) error {
	if rank < 0 || rank >= len(n.comms) {
		return fmt.Errorf("multi: NCCL exchange: rank %d of %d", rank, len(n.comms))
	}
	sr, ok := dev.(streamRunner)
	var bad error
	if !ok {
		bad = fmt.Errorf("its device (%s) has no stream to run NCCL on", dev.Info().Backend)
	}
	table, err := n.counts.meet(rank, x.SendCounts, x.RecvCap, bad)
	if err != nil {
		return err
	}
	c := n.comms[rank]
	err = sr.RunOnStream(func(stream uintptr, ptr func(gpu.Buffer) (uint64, error)) error {
		send, err1 := ptr(x.Send)
		recv, err2 := ptr(x.Recv)
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		return n.lib.Group(func() error {
			var errs []error
			at := 0
			for peer := range table {
				if k := table[rank][peer]; k > 0 {
					errs = append(errs, c.Send(uintptr(send)+uintptr(4*before(table[rank], peer)), k, nccl.Uint32, peer, stream))
				}
				if k := table[peer][rank]; k > 0 {
					errs = append(errs, c.Recv(uintptr(recv)+uintptr(4*at), k, nccl.Uint32, peer, stream))
					at += k
				}
			}
			return errors.Join(errs...)
		})
	})
	if err != nil {
		return fmt.Errorf("multi: NCCL exchange: rank %d: %w", rank, err)
	}
	receive(x, table, rank)
	return nil
}

// Close destroys the communicators.
func (n *NCCLExchanger) Close() error {
	var errs []error
	for _, c := range n.comms {
		errs = append(errs, c.Close())
	}
	n.comms = nil
	return errors.Join(errs...)
}

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

// rendezvous is the host's meeting point for the ranks' goroutines, round after round: every
// rank hands in a value, the last to arrive combines them (in rank order), and every rank gets
// the combined result; a new round waits until every rank has taken the last one's.
type rendezvous[T, R any] struct {
	mu      sync.Mutex
	cond    *sync.Cond
	in      []T
	arrived int
	left    int
	gen     int // rounds combined so far
	out     R   // the last round's result, read-only once published
	combine func(in []T) R
}

func newRendezvous[T, R any](ranks int, combine func(in []T) R) *rendezvous[T, R] {
	z := &rendezvous[T, R]{in: make([]T, ranks), combine: combine}
	z.cond = sync.NewCond(&z.mu)
	return z
}

// meet hands in rank's value and returns the round's result.
func (z *rendezvous[T, R]) meet(rank int, v T) R {
	z.mu.Lock()
	defer z.mu.Unlock()
	for z.arrived == len(z.in) { // the last round's ranks are still taking its result
		z.cond.Wait()
	}
	z.in[rank] = v
	z.arrived++
	gen := z.gen
	if z.arrived == len(z.in) {
		z.out = z.combine(z.in)
		z.in = make([]T, len(z.in))
		z.gen++
		z.cond.Broadcast()
	}
	for z.gen == gen {
		z.cond.Wait()
	}
	out := z.out
	z.left++
	if z.left == len(z.in) {
		z.arrived, z.left = 0, 0
		z.cond.Broadcast()
	}
	return out
}

// countPost is what a rank brings to an exchange's first round: its send counts, its receive
// room, and why it cannot take part, if it cannot.
type countPost struct {
	send []int
	room int
	bad  error
}

// countTable is the first round's result: row s the counts rank s sends to each rank, or why
// the round cannot run (the same error for every rank, so that none waits for words that will
// not come).
type countTable struct {
	rows [][]int
	err  error
}

func newCountRounds(ranks int) *rendezvous[countPost, countTable] {
	return newRendezvous(ranks, judgeCounts)
}

// judgeCounts checks a round's counts: one per rank, none negative, and every rank's incoming
// words within its room.
func judgeCounts(in []countPost) countTable {
	var errs []error
	ranks := len(in)
	rows := make([][]int, ranks)
	for s, p := range in {
		rows[s] = p.send
		if p.bad != nil {
			errs = append(errs, fmt.Errorf("rank %d: %w", s, p.bad))
		}
		if len(p.send) != ranks {
			errs = append(errs, fmt.Errorf("rank %d gave %d send counts for %d ranks", s, len(p.send), ranks))
			continue
		}
		for d, n := range p.send {
			if n < 0 {
				errs = append(errs, fmt.Errorf("rank %d's send count for rank %d is %d", s, d, n))
			}
		}
	}
	if len(errs) == 0 {
		for d := range ranks {
			recv := 0
			for s := range ranks {
				recv += rows[s][d]
			}
			if recv > in[d].room {
				errs = append(errs, fmt.Errorf("rank %d receives %d words, room for %d", d, recv, in[d].room))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return countTable{err: fmt.Errorf("multi: exchange: %w", err)}
	}
	return countTable{rows: rows}
}

// meetCounts runs an exchange's first round for rank.
func meetCounts(z *rendezvous[countPost, countTable], rank int, x *Exchange, bad error) ([][]int, error) {
	t := z.meet(rank, countPost{send: append([]int(nil), x.SendCounts...), room: x.RecvCap, bad: bad})
	return t.rows, t.err
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
	ranks  int
	counts *rendezvous[countPost, countTable]
	words  *rendezvous[wordPost, wordRound]
}

// wordPost is a rank's Send as downloaded (or why it could not be); wordRound every rank's,
// or the round's error.
type wordPost struct {
	words []uint32
	err   error
}

type wordRound struct {
	sent [][]uint32
	err  error
}

// NewHostExchanger returns a host exchanger for ranks ranks.
func NewHostExchanger(ranks int) *HostExchanger {
	return &HostExchanger{ranks: ranks, counts: newCountRounds(ranks), words: newRendezvous(ranks, func(in []wordPost) wordRound {
		r := wordRound{sent: make([][]uint32, len(in))}
		for k, p := range in {
			r.sent[k] = p.words
			if p.err != nil {
				r.err = errors.Join(r.err, fmt.Errorf("multi: host exchange: rank %d's send buffer: %w", k, p.err))
			}
		}
		return r
	})}
}

// Exchange is the Exchanger's: rank's share of one round.
func (h *HostExchanger) Exchange(rank int, dev gpu.Device, x *Exchange) error {
	if rank < 0 || rank >= h.ranks {
		return fmt.Errorf("multi: host exchange: rank %d of %d", rank, h.ranks)
	}
	table, err := meetCounts(h.counts, rank, x, nil)
	if err != nil {
		return err
	}
	words := make([]uint32, before(table[rank], len(table)))
	var derr error
	if len(words) > 0 {
		derr = gpu.DownloadSlice(dev, words, x.Send, 0)
	}
	round := h.words.meet(rank, wordPost{words: words, err: derr})
	if round.err != nil {
		return round.err
	}
	var in []uint32
	for s := range table {
		at := before(table[s], rank)
		in = append(in, round.sent[s][at:at+table[s][rank]]...)
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
	counts *rendezvous[countPost, countTable]
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
	table, err := meetCounts(n.counts, rank, x, bad)
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

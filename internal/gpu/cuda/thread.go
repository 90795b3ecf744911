package cuda

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// ownerThread runs functions on one goroutine locked to one OS thread. CUDA keeps the current
// context per OS thread, and Go moves goroutines between threads, so every driver call of a
// device goes through its ownerThread, where the context was made current once.
//
// A training step makes about a hundred driver calls, each a hop to the owner thread and
// back. Parking and waking the two OS threads made a hop cost 14 µs on the H200's host;
// when both sides spin for a short while before they park (the owner waiting for the next
// call, the caller for its result) it costs 3.6 µs (BenchmarkOwnerThreadCall). The spins are
// bounded (spinFor), and they are switched off where there are too few processors for two
// goroutines to spin side by side.
type ownerThread struct {
	calls chan *call
	quit  chan struct{}
	done  chan struct{} // closed when the loop has exited
	spin  time.Duration // 0: park at once
}

type call struct {
	fn       func()
	finished atomic.Bool
	wake     chan struct{} // closed after finished is set
}

// spinFor bounds each spin: long enough to span the gap between two launches of one step
// as the engine enqueues them, short enough that an idle device costs no noticeable CPU.
const spinFor = 50 * time.Microsecond

// newOwnerThread starts the loop and runs setup on it first (there, the context is made
// current); if setup fails the loop stops and the error is returned.
// With spin false both sides park at once.
func newOwnerThread(setup func() error, spin bool) (*ownerThread, error) {
	// The owner and a caller each need a processor to spin on, and more keep the rest of the
	// program running; below that, spinning only delays the side it waits for.
	var d time.Duration
	if spin && runtime.GOMAXPROCS(0) >= 4 && runtime.NumCPU() >= 4 {
		d = spinFor
	}
	return startOwnerThread(setup, d)
}

// startOwnerThread is newOwnerThread with the spin given as is (0: none).
func startOwnerThread(setup func() error, spin time.Duration) (*ownerThread, error) {
	t := &ownerThread{calls: make(chan *call, 1), quit: make(chan struct{}), done: make(chan struct{}), spin: spin}
	started := make(chan error, 1)
	go t.loop(setup, started)
	if err := <-started; err != nil {
		<-t.done
		return nil, err
	}
	return t, nil
}

func (t *ownerThread) loop(setup func() error, started chan<- error) {
	// Never unlocked: when the loop exits, the goroutine ends while locked and the runtime
	// retires the OS thread with whatever context was current on it.
	runtime.LockOSThread()
	defer close(t.done)
	if err := setup(); err != nil {
		started <- err
		return
	}
	started <- nil
	for {
		c := t.next()
		if c == nil {
			return
		}
		c.fn()
		c.finished.Store(true)
		close(c.wake)
	}
}

// next returns the next call, or nil once stop was called. It polls for up to t.spin before
// parking.
func (t *ownerThread) next() *call {
	if t.spin > 0 {
		deadline := time.Now().Add(t.spin)
		for i := 0; ; i++ {
			select {
			case c := <-t.calls:
				return c
			case <-t.quit:
				return nil
			default:
			}
			if i%64 == 63 && time.Now().After(deadline) {
				break
			}
		}
	}
	select {
	case c := <-t.calls:
		return c
	case <-t.quit:
		return nil
	}
}

// Call runs fn on the owner thread and waits for it. After stop it returns ErrClosed without
// running fn. Safe for concurrent use; calls run one at a time in arrival order.
func (t *ownerThread) Call(fn func()) error {
	select {
	case <-t.quit:
		return driver.ErrClosed
	default:
	}
	c := &call{fn: fn, wake: make(chan struct{})}
	select {
	case t.calls <- c:
	case <-t.quit:
		return driver.ErrClosed
	}
	if t.spin > 0 {
		deadline := time.Now().Add(t.spin)
		for i := 0; !c.finished.Load(); i++ {
			if i%64 == 63 && time.Now().After(deadline) {
				break
			}
		}
	}
	// The channel has room for one call, so a send can succeed just as stop ends the loop;
	// such a call never runs, and done tells.
	select {
	case <-c.wake:
		return nil
	case <-t.done:
		if c.finished.Load() {
			return nil
		}
		return driver.ErrClosed
	}
}

// stop ends the loop after the call in progress; later Calls return ErrClosed. Idempotent only
// under the device's close guard.
func (t *ownerThread) stop() {
	close(t.quit)
	<-t.done
}

package cuda

import (
	"runtime"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// ownerThread runs functions on one goroutine locked to one OS thread. CUDA keeps the current
// context per OS thread, and Go moves goroutines between threads, so every driver call of a
// device goes through its ownerThread, where the context was made current once.
//
// A hop there and back costs about 20 µs on the H200's host (BenchmarkOwnerThreadCall), three
// times the driver's own launch (7 µs); a training step makes ~60 launches. So the calls
// whose results nobody waits for (launches, memsets, event records: the device runs them
// later anyway) are posted: the caller queues them and goes on, and the owner works through
// the queue while the caller prepares the next. Spinning both threads instead of parking
// them was tried: it made a hop cheaper in isolation and a whole step twice as slow.
type ownerThread struct {
	calls chan *call
	quit  chan struct{}
	done  chan struct{} // closed when the loop has exited
}

type call struct {
	fn   func()
	wake chan struct{} // closed after fn ran; nil for a posted call
}

// postDepth bounds the posted calls waiting: enough for a training step's launches, so that
// the caller runs ahead by about a step before it waits for room.
const postDepth = 256

// newOwnerThread starts the loop and runs setup on it first (there, the context is made
// current); if setup fails the loop stops and the error is returned.
func newOwnerThread(setup func() error) (*ownerThread, error) {
	t := &ownerThread{calls: make(chan *call, postDepth), quit: make(chan struct{}), done: make(chan struct{})}
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
		select {
		case c := <-t.calls:
			c.fn()
			if c.wake != nil {
				close(c.wake)
			}
		case <-t.quit:
			return
		}
	}
}

// Call runs fn on the owner thread after every call queued before it, and waits for it. After
// stop it returns ErrClosed without running fn. Safe for concurrent use.
func (t *ownerThread) Call(fn func()) error {
	c := &call{fn: fn, wake: make(chan struct{})}
	if err := t.send(c); err != nil {
		return err
	}
	select {
	case <-c.wake:
		return nil
	case <-t.done:
		// Stop can end the loop with this call still queued; then it never ran.
		select {
		case <-c.wake:
			return nil
		default:
			return driver.ErrClosed
		}
	}
}

// Post queues fn to run on the owner thread after every call queued before it, and returns
// without waiting (it waits only for room in the queue). fn must report its own failure.
func (t *ownerThread) Post(fn func()) error { return t.send(&call{fn: fn}) }

func (t *ownerThread) send(c *call) error {
	select {
	case <-t.quit:
		return driver.ErrClosed
	default:
	}
	select {
	case t.calls <- c:
		return nil
	case <-t.quit:
		return driver.ErrClosed
	}
}

// stop ends the loop after the call in progress; calls still queued never run, and later calls
// return ErrClosed. Idempotent only under the device's close guard.
func (t *ownerThread) stop() {
	close(t.quit)
	<-t.done
}

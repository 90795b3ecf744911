package cuda

import (
	"runtime"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// ownerThread runs functions on one goroutine locked to one OS thread. CUDA keeps the current
// context per OS thread, and Go moves goroutines between threads, so every driver call of a
// device goes through its ownerThread, where the context was made current once.
type ownerThread struct {
	calls chan call
	quit  chan struct{}
	done  chan struct{} // closed when the loop has exited
}

type call struct {
	fn   func()
	done chan struct{}
}

// newOwnerThread starts the loop and runs setup on it first (there, the context is made
// current); if setup fails the loop stops and the error is returned.
func newOwnerThread(setup func() error) (*ownerThread, error) {
	t := &ownerThread{calls: make(chan call), quit: make(chan struct{}), done: make(chan struct{})}
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
			close(c.done)
		case <-t.quit:
			return
		}
	}
}

// Call runs fn on the owner thread and waits for it. After stop it returns ErrClosed without
// running fn. Safe for concurrent use; calls run one at a time in arrival order.
func (t *ownerThread) Call(fn func()) error {
	c := call{fn: fn, done: make(chan struct{})}
	select {
	case t.calls <- c:
	case <-t.quit:
		return driver.ErrClosed
	}
	<-c.done
	return nil
}

// stop ends the loop after the call in progress; later Calls return ErrClosed. Idempotent only
// under the device's close guard.
func (t *ownerThread) stop() {
	close(t.quit)
	<-t.done
}

package metal

import "runtime"

// ownerThread runs every Metal call on one goroutine locked to one OS thread: autorelease
// pools belong to a thread, and Go would otherwise move the caller between threads so that an
// object autoreleased on one is drained on another (or never).
type ownerThread struct {
	calls chan func()
	done  chan struct{}
}

func newOwnerThread() *ownerThread {
	t := &ownerThread{calls: make(chan func()), done: make(chan struct{})}
	go t.loop()
	return t
}

func (t *ownerThread) loop() {
	// Never unlocked: the thread ends with the goroutine, whatever Metal left on it.
	runtime.LockOSThread()
	defer close(t.done)
	for fn := range t.calls {
		fn()
	}
}

// run runs fn on the owner thread and waits for it. The caller serialises calls (the device
// mutex), so one channel round trip per call is all the synchronisation there is.
func (t *ownerThread) run(fn func()) {
	wake := make(chan struct{})
	t.calls <- func() { fn(); close(wake) }
	<-wake
}

// stop ends the loop; run must not be called afterwards.
func (t *ownerThread) stop() {
	close(t.calls)
	<-t.done
}

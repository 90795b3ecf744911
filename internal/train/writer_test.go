package train

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// TestWriter checks that writes run in order and off the caller's goroutine, that at most two
// are outstanding, that their events reach emit through collect and close, and that a failed
// write's error is returned once.
func TestWriter(t *testing.T) {
	w := newWriter()
	var running, maxRunning atomic.Int32
	release := make(chan struct{})
	var order []int
	job := func(i int, fail bool) func() (Saved, error) {
		return func() (Saved, error) {
			if n := running.Add(1); n > maxRunning.Load() {
				maxRunning.Store(n)
			}
			defer running.Add(-1)
			if i == 0 {
				<-release // holds the goroutine until the loop has queued behind it
			}
			if fail {
				return Saved{}, errors.New("disk full")
			}
			return Saved{Kind: "preview", Path: fmt.Sprint(i)}, nil
		}
	}
	emit := func(e Event) {
		var i int
		fmt.Sscan(e.(Saved).Path, &i)
		order = append(order, i)
	}
	if err := w.queue(job(0, false), emit); err != nil {
		t.Fatal(err)
	}
	if err := w.queue(job(1, false), emit); err != nil {
		t.Fatal(err)
	}
	if w.pending != 2 {
		t.Fatalf("pending %d after two queued, want 2", w.pending)
	}
	if err := w.collect(false, emit); err != nil || len(order) != 0 {
		t.Fatalf("collect while the first write is held: %v, events %v", err, order)
	}
	close(release)
	// A third write must wait for room: queue receives the first result on the way.
	if err := w.queue(job(2, true), emit); err != nil {
		t.Fatal(err)
	}
	// The failure comes back once: from this queue (if 2 finished by then) or from close.
	qerr := w.queue(job(3, false), emit)
	cerr := w.close(emit)
	if err := errors.Join(qerr, cerr); err == nil || err.Error() != "disk full" {
		t.Errorf("errors %v and %v, want one \"disk full\"", qerr, cerr)
	}
	if fmt.Sprint(order) != "[0 1 3]" {
		t.Errorf("events in order %v, want [0 1 3] (2 failed)", order)
	}
	if n := maxRunning.Load(); n != 1 {
		t.Errorf("%d writes ran at once, want 1", n)
	}
	if w.pending != 0 {
		t.Errorf("pending %d after close", w.pending)
	}
}

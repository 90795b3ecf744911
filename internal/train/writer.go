package train

import "errors"

// writer runs the file writes of a run (a preview's PNG encoding, a checkpoint's
// serialisation and sync) on one goroutine beside the training loop, so that the device goes
// on training while they are written. Jobs run in the order queued. At most one waits while
// another runs: a queued checkpoint holds a copy of the whole state, and a second one would
// double that.
//
// Results come back through collect, on the loop's goroutine, so that events are emitted
// where the loop emits its own, and a failed write stops the run at the next step.
type writer struct {
	jobs    chan func() (Saved, error)
	results chan writeResult
	pending int // queued or running, counted by the loop's goroutine
}

type writeResult struct {
	saved Saved
	err   error
}

func newWriter() *writer {
	w := &writer{jobs: make(chan func() (Saved, error), 1), results: make(chan writeResult, 2)}
	go func() {
		for job := range w.jobs {
			s, err := job()
			w.results <- writeResult{s, err}
		}
	}()
	return w
}

// queue hands job to the writing goroutine, first waiting for results while the queue is
// full; they are passed to emit as collect does.
func (w *writer) queue(job func() (Saved, error), emit func(Event)) error {
	var errs []error
	for w.pending >= 2 {
		errs = append(errs, w.receive(emit))
	}
	w.pending++
	w.jobs <- job
	return errors.Join(errs...)
}

// collect emits the Saved event of every write finished so far (all of them when wait) and
// returns the errors of those that failed.
func (w *writer) collect(wait bool, emit func(Event)) error {
	var errs []error
	for w.pending > 0 {
		if !wait {
			select {
			case r := <-w.results:
				errs = append(errs, w.handle(r, emit))
				continue
			default:
				return errors.Join(errs...)
			}
		}
		errs = append(errs, w.receive(emit))
	}
	return errors.Join(errs...)
}

func (w *writer) receive(emit func(Event)) error { return w.handle(<-w.results, emit) }

func (w *writer) handle(r writeResult, emit func(Event)) error {
	w.pending--
	if r.err != nil {
		return r.err
	}
	emit(r.saved)
	return nil
}

// close waits for every queued write, emits their events and stops the goroutine.
func (w *writer) close(emit func(Event)) error {
	err := w.collect(true, emit)
	close(w.jobs)
	return err
}

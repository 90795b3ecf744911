package metal

import (
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// event is a boundary between command buffers: recording one commits the open command buffer,
// so that the work before it and the work after it have GPU times of their own. It keeps the
// last buffer committed before it (prev: DownloadAfter waits for it; an elapsed time ends at
// its GPUEndTime) and the first committed after it (next: an elapsed time starts at its
// GPUStartTime). The times therefore cover the GPU's work between two events, idle gaps
// between its command buffers included, as CUDA's events do.
type event struct {
	dev        *Device
	recorded   bool
	seq        int // command buffers committed before it
	prev, next *flight
	closed     bool
}

// NewEvent creates an event.
func (d *Device) NewEvent() (driver.Event, error) {
	var e *event
	err := d.do(func() error {
		e = &event{dev: d}
		d.events[e] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (d *Device) ownEvent(ev driver.Event) (*event, error) {
	e, ok := ev.(*event)
	if !ok || e == nil || e.dev != d {
		return nil, fmt.Errorf("metal: event: %w", driver.ErrForeignHandle)
	}
	if e.closed {
		return nil, fmt.Errorf("metal: event used after Close: %w", driver.ErrClosed)
	}
	return e, nil
}

// forget drops the event's hold on command buffers and its place among those waiting.
func (e *event) forget() {
	d := e.dev
	if e.prev != nil {
		d.drop(e.prev, 1)
	}
	if e.next != nil {
		d.drop(e.next, 1)
	}
	e.prev, e.next, e.recorded = nil, nil, false
	for i, w := range d.waiting {
		if w == e {
			d.waiting = append(d.waiting[:i], d.waiting[i+1:]...)
			break
		}
	}
}

// Record marks the current point of the queue: it commits the open command buffer (without
// waiting) so that the next work starts a new one.
func (d *Device) Record(ev driver.Event) error {
	return d.do(func() error {
		e, err := d.ownEvent(ev)
		if err != nil {
			return err
		}
		e.forget()
		d.commit()
		e.recorded, e.seq, e.prev = true, d.seq, d.last
		if e.prev != nil {
			e.prev.refs++
		}
		d.waiting = append(d.waiting, e)
		return nil
	})
}

// ElapsedMs waits for the work before end and returns the GPU milliseconds from the first
// command buffer after start to the last before end (0 when none ran between them).
func (d *Device) ElapsedMs(start, end driver.Event) (float32, error) {
	var ms float32
	err := d.do(func() error {
		s, err := d.ownEvent(start)
		if err != nil {
			return err
		}
		e, err := d.ownEvent(end)
		if err != nil {
			return err
		}
		if !s.recorded || !e.recorded {
			return fmt.Errorf("metal: elapsed time between events not both recorded")
		}
		if e.seq < s.seq {
			return fmt.Errorf("metal: elapsed time: the end event was recorded before the start")
		}
		if e.seq == s.seq {
			return nil
		}
		// Both exist: a buffer was committed after start and before end.
		e.prev.cb.WaitUntilCompleted()
		if err := flightError(e.prev); err != nil {
			return err
		}
		ms = float32((e.prev.cb.GPUEndTime() - s.next.cb.GPUStartTime()) * 1000)
		return nil
	})
	return ms, err
}

// Close releases the event.
func (e *event) Close() error {
	return e.dev.do(func() error {
		if e.closed {
			return nil
		}
		e.forget()
		e.closed = true
		delete(e.dev.events, e)
		return nil
	})
}

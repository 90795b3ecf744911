package fused

import (
	"errors"
	"fmt"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// LaunchTime is one kernel launch of a step and its device time.
type LaunchTime struct {
	Index  int    // the launch's place in the step, from 0
	Kernel string // the entry point
	Ms     float32
	Block  int // threads a block
	// The kernel's registers, local memory and occupancy for this block size, where the
	// backend reports them (zero values otherwise).
	Resources gpu.KernelResources
}

// launchTimer is a device that records an event on either side of every launch, so that a
// stage's time (one event pair around several launches) can be split by kernel: bin, say, is
// some 30 launches. The events themselves add a few µs of device time per launch,
// so the times are for finding where a stage goes, not for the stage totals.
type launchTimer struct {
	gpu.Device
	names  []string
	blocks []int
	res    []gpu.KernelResources
	known  map[resKey]gpu.KernelResources // asked once per kernel and block size
	events []gpu.Event                    // 2 per launch, kept from step to step
}

type resKey struct {
	k     gpu.Kernel
	block int
}

func (d *launchTimer) Launch(k gpu.Kernel, grid, block gpu.Dim3, shared int, args ...gpu.Arg) error {
	i := len(d.names)
	for len(d.events) < 2*(i+1) {
		ev, err := d.NewEvent()
		if err != nil {
			return err
		}
		d.events = append(d.events, ev)
	}
	d.names = append(d.names, k.Name())
	b := block.Norm()
	threads := int(b[0] * b[1] * b[2])
	d.blocks = append(d.blocks, threads)
	d.res = append(d.res, d.resources(k, threads))
	if err := d.Record(d.events[2*i]); err != nil {
		return err
	}
	if err := d.Device.Launch(k, grid, block, shared, args...); err != nil {
		return err
	}
	return d.Record(d.events[2*i+1])
}

// resources reports k's resources at this block size, or zero values where the backend cannot
// (they only annotate the times).
func (d *launchTimer) resources(k gpu.Kernel, block int) gpu.KernelResources {
	key := resKey{k, block}
	if r, ok := d.known[key]; ok {
		return r
	}
	var r gpu.KernelResources
	if rr, ok := k.(gpu.ResourceReporter); ok {
		if got, err := rr.Resources(block); err == nil {
			r = got
		}
	}
	if d.known == nil {
		d.known = map[resKey]gpu.KernelResources{}
	}
	d.known[key] = r
	return r
}

// take returns the launches recorded since the last take, with their times (waiting for them).
func (d *launchTimer) take() ([]LaunchTime, error) {
	out := make([]LaunchTime, len(d.names))
	for i, name := range d.names {
		ms, err := d.ElapsedMs(d.events[2*i], d.events[2*i+1])
		if err != nil {
			return nil, fmt.Errorf("fused: timing launch %d (%s): %w", i, name, err)
		}
		out[i] = LaunchTime{Index: i, Kernel: name, Ms: ms, Block: d.blocks[i], Resources: d.res[i]}
	}
	d.names, d.blocks, d.res = d.names[:0], d.blocks[:0], d.res[:0]
	return out, nil
}

func (d *launchTimer) close() error {
	var errs []error
	for _, ev := range d.events {
		errs = append(errs, ev.Close())
	}
	d.events = nil
	return errors.Join(errs...)
}

// TimeLaunches switches the timing of every kernel launch on or off (graphs must be off: a
// captured step has no launches to time). LaunchTimes then reads the last step's.
func (e *Engine) TimeLaunches(on bool) error {
	lt, timing := e.dev.(*launchTimer)
	switch {
	case on && !timing:
		if e.graphs {
			return errors.New("fused: time launches: steps run as graphs (SetGraphs(false) first)")
		}
		if e.noEvents {
			return fmt.Errorf("fused: time launches: the %s device has no timing events: %w", e.dev.Info().Backend, gpu.ErrUnsupported)
		}
		e.dev = &launchTimer{Device: e.dev}
		e.k.SetDevice(e.dev)
	case !on && timing:
		e.dev = lt.Device
		e.k.SetDevice(e.dev)
		return lt.close()
	}
	return nil
}

// LaunchTimes returns every kernel launch since the last call (the last step's, called after
// each step) with its device time; TimeLaunches must be on.
func (e *Engine) LaunchTimes() ([]LaunchTime, error) {
	lt, ok := e.dev.(*launchTimer)
	if !ok {
		return nil, errors.New("fused: launch times: TimeLaunches is off")
	}
	return lt.take()
}

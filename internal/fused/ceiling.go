package fused

import (
	"errors"
	"fmt"
	"sort"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// Ceilings are a device's measured limits, the roofline's two roofs: what a plain copy through
// device memory achieves and what a stream of independent FP32 fused multiply-adds achieves
// (shaders/ceiling.cu). They are measured rather than taken from a data sheet, so that a
// stage's fraction of them is a fraction of what this device, clocks and driver can really do.
type Ceilings struct {
	CopyGBs    float64 // device memory bandwidth: bytes read + bytes written per second, / 1e9
	FP32GFlops float64 // FP32 arithmetic rate: 2 flops per FMA, per second, / 1e9
	CopyMs     float64 // median device time of one timed copy repetition
	FMAMs      float64 // median device time of one FMA launch
	Options    CeilingOptions
}

// CeilingOptions size the measurement; zero fields take the defaults (DefaultCeilingOptions),
// which suit a large GPU. The tests pass tiny sizes for the host emulator.
type CeilingOptions struct {
	CopyBytes    int // bytes of each of the two copy buffers (source and destination)
	CopyLaunches int // copies per timed repetition (back to back, so launch gaps are a small share)
	FMABlocks    int // blocks of ceilingThreads threads of the FMA kernel
	FMAIters     int // iterations per thread, 64 FMAs each
	Reps         int // timed repetitions; the result is their median
}

// ceilingThreads is the block size of both kernels; copyMaxBlocks caps the copy's grid (the
// kernel is grid-stride: more blocks than the device holds at once only add scheduling).
const (
	ceilingThreads = 256
	copyMaxBlocks  = 8192
	fmaPerIter     = 64 // ceiling.cu: 8 chains × 8 steps per iteration
)

// DefaultCeilingOptions: 256 MiB buffers (far beyond any L2, so the copy streams DRAM), ten
// copies per repetition (≈ 1.4 ms on an H200), and 32768 blocks × 256 threads × 256 iterations
// × 64 FMAs ≈ 275 GFLOP per FMA launch (≈ 5 ms on an H200; many waves of blocks, so a
// partial last wave costs little).
func DefaultCeilingOptions() CeilingOptions {
	return CeilingOptions{CopyBytes: 256 << 20, CopyLaunches: 10, FMABlocks: 32768, FMAIters: 256, Reps: 5}
}

func (o CeilingOptions) withDefaults() CeilingOptions {
	d := DefaultCeilingOptions()
	if o.CopyBytes == 0 {
		o.CopyBytes = d.CopyBytes
	}
	if o.CopyLaunches == 0 {
		o.CopyLaunches = d.CopyLaunches
	}
	if o.FMABlocks == 0 {
		o.FMABlocks = d.FMABlocks
	}
	if o.FMAIters == 0 {
		o.FMAIters = d.FMAIters
	}
	if o.Reps == 0 {
		o.Reps = d.Reps
	}
	return o
}

func (o CeilingOptions) check() error {
	// ceiling_copy indexes in u32 and needs n + 4·threads < 2³²: 2 GiB buffers keep it there.
	if o.CopyBytes < 4 || o.CopyBytes > 1<<31 {
		return fmt.Errorf("fused: ceilings: copy buffers of %d bytes, want 4 bytes to 2 GiB", o.CopyBytes)
	}
	if o.CopyLaunches < 1 || o.FMABlocks < 1 || o.FMABlocks > 1<<20 || o.FMAIters < 1 || o.FMAIters > 1<<24 || o.Reps < 1 {
		return fmt.Errorf("fused: ceilings: %d copy launches, %d FMA blocks, %d FMA iterations, %d repetitions out of range",
			o.CopyLaunches, o.FMABlocks, o.FMAIters, o.Reps)
	}
	return nil
}

// Ceilings measures the engine's device (see MeasureCeilings). It allocates its own buffers
// (2 × o.CopyBytes and the FMA output) and frees them before it returns; run it outside a
// timed step.
func (e *Engine) Ceilings(o CeilingOptions) (Ceilings, error) { return MeasureCeilings(e.dev, o) }

// DeviceBytes returns the device memory the engine's buffers hold now and the most they have
// held at once since the engine started, in bytes (the kernels' code, the driver's context and
// a few fixed words are not counted).
func (e *Engine) DeviceBytes() (current, peak int64) { return e.devBytes, e.devPeak }

// MeasureCeilings times ceiling.cu's copy and FMA kernels on dev with the device's events: one
// untimed run of each first (module load, JIT, first touch of the buffers), then o.Reps timed
// repetitions, of which it keeps the median.
func MeasureCeilings(dev gpu.Device, o CeilingOptions) (c Ceilings, err error) {
	o = o.withDefaults()
	if err := o.check(); err != nil {
		return Ceilings{}, err
	}
	ck, err := loadCeilingKernels(dev)
	if err != nil {
		return Ceilings{}, err
	}
	var held []gpu.Buffer
	var events []gpu.Event
	defer func() {
		errs := []error{err}
		for _, b := range held {
			errs = append(errs, dev.Free(b))
		}
		for _, ev := range events {
			errs = append(errs, ev.Close())
		}
		errs = append(errs, ck.close())
		err = errors.Join(errs...)
	}()
	alloc := func(n int) (gpu.Buffer, error) {
		b, err := dev.Alloc(n)
		if err != nil {
			return nil, fmt.Errorf("fused: ceilings: %w", err)
		}
		held = append(held, b)
		return b, nil
	}
	n := o.CopyBytes / 4
	src, err := alloc(n * 4)
	if err != nil {
		return Ceilings{}, err
	}
	dst, err := alloc(n * 4)
	if err != nil {
		return Ceilings{}, err
	}
	out, err := alloc(o.FMABlocks * ceilingThreads * 4)
	if err != nil {
		return Ceilings{}, err
	}
	for i := 0; i < 2; i++ {
		ev, err := dev.NewEvent()
		if err != nil {
			return Ceilings{}, fmt.Errorf("fused: ceilings: %w", err)
		}
		events = append(events, ev)
	}
	copyOnce := func() error {
		for i := 0; i < o.CopyLaunches; i++ {
			if err := ck.launchCopy(src, dst, n, copyBlocks(n)); err != nil {
				return err
			}
		}
		return nil
	}
	fmaOnce := func() error { return ck.launchFMA(out, o.FMABlocks, o.FMAIters) }
	if c.CopyMs, err = timeMedian(dev, events[0], events[1], o.Reps, copyOnce); err != nil {
		return Ceilings{}, fmt.Errorf("fused: ceilings: copy: %w", err)
	}
	if c.FMAMs, err = timeMedian(dev, events[0], events[1], o.Reps, fmaOnce); err != nil {
		return Ceilings{}, fmt.Errorf("fused: ceilings: FMA: %w", err)
	}
	moved := 2 * float64(n) * 4 * float64(o.CopyLaunches) // every element read once and written once
	flops := 2 * float64(fmaPerIter) * float64(o.FMAIters) * float64(o.FMABlocks) * ceilingThreads
	// A device too fast for its timer's resolution at these sizes would give 0 ms: report it
	// rather than an infinite rate.
	if !(c.CopyMs > 0 && c.FMAMs > 0) {
		return Ceilings{}, fmt.Errorf("fused: ceilings: copy %.4f ms, FMA %.4f ms: too short to time, use larger sizes", c.CopyMs, c.FMAMs)
	}
	c.CopyGBs = moved / (c.CopyMs * 1e-3) / 1e9
	c.FP32GFlops = flops / (c.FMAMs * 1e-3) / 1e9
	c.Options = o
	return c, nil
}

// copyBlocks is the copy's grid for n floats, at most copyMaxBlocks: rounded down to whole
// sweeps of 4 floats a thread, so that those sweeps, not the one-float tail, carry the copy.
func copyBlocks(n int) int { return min(max(n/(4*ceilingThreads), 1), copyMaxBlocks) }

// ceilingKernels are ceiling.cu's measuring kernels (see Ceilings). They are loaded on their
// own, when a measurement asks for them, rather than with the engine's kernels: no step needs
// them, and a device that can only use the embedded PTX must still train when that PTX lacks
// ceiling.ptx.
type ceilingKernels struct{ *abi.CeilingKernels }

func loadCeilingKernels(dev gpu.Device) (*ceilingKernels, error) {
	k, err := abi.LoadCeilingKernels(dev)
	if err != nil {
		return nil, err
	}
	return &ceilingKernels{k}, nil
}

func (ck *ceilingKernels) close() error { return ck.Close() }

// launchCopy queues ceiling_copy of n floats from src to dst on blocks blocks.
func (ck *ceilingKernels) launchCopy(src, dst gpu.Buffer, n, blocks int) error {
	return ck.CeilingCopy(gpu.Dim3{uint32(blocks)}, gpu.Dim3{ceilingThreads}, abi.CeilingCopyArgs{
		Src: abi.B(src), Dst: abi.B(dst), N: uint32(n)})
}

// FMA chain coefficients: a ← a·fmaX + fmaY converges to fmaY/(1 − fmaX) = 1 from any start in
// [0, 1], so the chains stay normal numbers however many iterations run. Both are exact in
// float32 (1 − 2⁻¹⁰ and 2⁻¹⁰).
const (
	fmaX = float32(1 - 1.0/1024)
	fmaY = float32(1.0 / 1024)
)

// launchFMA queues ceiling_fma on blocks blocks; out holds blocks·ceilingThreads floats.
func (ck *ceilingKernels) launchFMA(out gpu.Buffer, blocks, iters int) error {
	return ck.CeilingFma(gpu.Dim3{uint32(blocks)}, gpu.Dim3{ceilingThreads}, abi.CeilingFmaArgs{
		Iters: uint32(iters), X: fmaX, Y: fmaY, Out: abi.B(out)})
}

// timeMedian runs work once untimed, then reps times between the events start and end, and
// returns the median device milliseconds.
func timeMedian(dev gpu.Device, start, end gpu.Event, reps int, work func() error) (float64, error) {
	if err := work(); err != nil {
		return 0, err
	}
	ms := make([]float64, 0, reps)
	for r := 0; r < reps; r++ {
		if err := dev.Record(start); err != nil {
			return 0, err
		}
		if err := work(); err != nil {
			return 0, err
		}
		if err := dev.Record(end); err != nil {
			return 0, err
		}
		t, err := dev.ElapsedMs(start, end)
		if err != nil {
			return 0, err
		}
		ms = append(ms, float64(t))
	}
	sort.Float64s(ms)
	return ms[len(ms)/2], nil
}

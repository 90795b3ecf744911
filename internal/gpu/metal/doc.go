// Package metal is the Apple backend of internal/gpu. New builds a driver.Device over any
// mtl.Runtime; Open (darwin) passes the real one, Metal.framework through purego's objc.
//
// Kernels are compiled at run time from the exact text MSL(src) returns (the fp-contract
// pragma, the -D defines, the unit with its headers inlined and shaders/prelude_metal.h in
// place of the CUDA prelude), with MSL 3.0 and safe math, and
// the libraries are cached in memory by the hash of that text. Buffers use shared storage.
// Launches, memsets (blit fills) and uploads made while the GPU is busy (staged, then a blit
// copy) are encoded into one command buffer, committed only at a readout, Sync, Close or an
// event; events are command-buffer boundaries timed by GPUStartTime/GPUEndTime. Every Metal
// call runs on one locked OS thread inside an autorelease pool. Launches are checked against
// the pipeline's maxTotalThreadsPerThreadgroup, the device's threadgroup memory (32 KB), 31
// buffer slots and 4 KB of inline bytes, with errors naming the kernel and the limit. GPUs
// older than Apple7 (no float atomics) and Macs without a GPU give an error that satisfies
// errors.Is(err, driver.ErrNoDevice), so `device: auto` falls back to the CPU. Graph capture
// is ErrUnsupported: callers run uncaptured.
//
// Kernel convention: launch argument i binds to [[buffer(i)]] (buffers with setBuffer,
// scalars and structs with setBytes); dynamic shared memory is [[threadgroup(0)]].
//
// How it is verified without a Mac: this host code runs on Linux over
// internal/gpu/metal/fakemtl (a Go runtime that also flags Metal API misuse), the
// Objective-C layer's every message is checked against mtl's selector table, and the MSL of
// every unit with generated entry wrappers is compiled by clang in OpenCL C++ mode against a
// stand-in metal_stdlib (testdata/clang; it catches double, address-space and atomic misuse,
// not every MSL rule). What only a
// Mac can reveal: whether Apple's compiler accepts the generated MSL and rounds as the CPU
// engine does; the purego ABI of the by-value structs and NSError out-parameters; per-pipeline
// thread limits; the GPU watchdog on long command buffers; and the cost of a command buffer
// per event.
//
// On other operating systems Open returns an error satisfying driver.ErrNoDevice.
package metal

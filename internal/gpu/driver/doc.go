// Package driver holds the contracts that every GPU backend of rlxsplat implements and the
// host-side plumbing they share: the Device interface and its typed handles (Buffer, Module,
// Kernel, Event, Graph), kernel launch arguments and their packing, kernel sources with their
// content hash, the on-disk compiled-kernel cache, and the sentinel and structured errors.
//
// It exists so that the backends (internal/gpu/cuda, internal/gpu/metal) and the facade
// (internal/gpu) can share types without an import cycle; callers use the facade, which
// re-exports everything here under the same names.
//
// Non-goals: it loads no library and talks to no driver; it knows nothing about splats or
// about which kernels exist (that is shaders/ and internal/fused).
package driver

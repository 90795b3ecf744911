// Package emu is the host emulator backend of the device layer: a gpu.Device that runs the
// kernel bodies on the CPU, slowly and exactly, for checking kernels on machines without a GPU.
// Each unit is compiled by a C++ compiler found on PATH (g++, else clang++) against
// shaders/prelude_emu.h into a shared library that purego loads; blocks run one after another,
// their threads as ucontext fibers (see the prelude). Nothing is contracted into fused
// multiply-adds (-ffp-contract=off), so results are those of the CPU twins bit for bit where
// the kernels promise it.
//
// It is a checking device, not a fast one: `--device emu` runs the fused engine through it,
// and the fused engine's tests choose it with RLXSPLAT_FUSED_EMU=1 when there is no GPU.
//
// Buffers are mmap'ed with a PROT_NONE page right after their end, so that a kernel reading or
// writing past a buffer faults at once instead of corrupting a neighbour. Compiled units are
// cached on disk by source hash. Graph capture records launches and memsets and replays them;
// Config can switch graphs or events off (ErrUnsupported, as a backend without them answers),
// so that callers' fallbacks are tested on Linux.
//
// Linux and macOS only (mmap guard pages, ucontext, dlopen); elsewhere Open reports
// ErrNoDevice.
package emu

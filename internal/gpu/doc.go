// Package gpu is rlxsplat's device layer: a few verbs over one GPU (alloc/free, upload/
// download/memset, compile → module → kernel, launch, sync, events, graph capture, close) with
// typed handles, and Open, which picks a backend: "cuda" (Linux; libcuda + NVRTC loaded with
// purego, no cgo), "metal" (macOS; Metal.framework through purego's objc; its host code is
// tested on Linux over a fake Metal runtime and has not yet run on Apple hardware), "emu"
// (internal/gpu/emu: the kernels on the host through a C++ compiler, slow and exact, for
// checking without a GPU) or "auto" (Metal first on macOS, then CUDA; never the emulator).
//
// Preludes: kernel units include the backend-neutral "prelude.h"; CompileFile and
// CompileShader read it as the device's own prelude (Prelude: prelude_cuda.h, prelude_metal.h,
// prelude_emu.h), so a source's hash, which keys the kernel cache and the prebuilt PTX, covers
// what that backend compiles.
//
// Errors: with no GPU or no driver, Open returns an error for which errors.Is(err,
// ErrNoDevice) holds (ErrNoDriver is a kind of ErrNoDevice), which is what `device: auto` uses
// to fall back to the CPU engine. A failed allocation is an *OOMError (ErrOutOfMemory) that
// says how many bytes were asked for and how many were free; a failed compilation is a
// *CompileError carrying the compiler's log with file and line; a missing compiler with no
// matching prebuilt kernel is ErrNoCompiler.
//
// Environment (read by Open, see OptionsFromEnv): RLXSPLAT_NO_NVRTC=1 pretends NVRTC is
// absent (the embedded PTX from shaders/ptx is used), RLXSPLAT_GPU_DEBUG=1 synchronises after
// every launch so that faults name their kernel, RLXSPLAT_KERNEL_CACHE sets the compiled-
// kernel cache directory ("off" disables it; default $XDG_CACHE_HOME/rlxsplat/kernels), and
// RLXSPLAT_SHADER_DIR (read by CompileShader) replaces the embedded kernel sources.
//
// Non-goals: it knows nothing about splats, tiles or training (internal/fused does), holds no
// global state, and never prints, logs or exits.
package gpu

// Package metal is the Apple backend of internal/gpu: Metal.framework driven through purego's
// objc package (no cgo), with shared-storage buffers, kernels compiled at run time from Metal
// Shading Language source, and one command queue whose launches are batched into a command
// buffer until the next Sync, Download, Upload or Memset.
//
// STATUS — UNTESTED SKELETON. None of the darwin code here has ever run: rlxsplat's machines
// have no Mac. It builds and passes `go vet` for darwin/arm64 (CI checks that), and the
// argument-binding plan (binding.go) is tested on every OS. Everything that touches Metal —
// device creation, buffer contents, library compilation, pipeline creation, dispatch, error
// reporting from NSError and command-buffer status — is written from Apple's documentation
// and must be verified on a Mac before the fused engine relies on it. Not implemented at all:
// events/timing and graph capture (ErrUnsupported), a prebuilt-library fallback, a compiled-
// kernel cache.
//
// Kernel convention: launch argument i binds to [[buffer(i)]] (buffers with setBuffer,
// scalars and structs with setBytes); dynamic shared memory is threadgroup memory index 0.
//
// On other operating systems Open returns gpu.ErrNoDevice.
package metal

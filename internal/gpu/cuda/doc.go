// Package cuda is the NVIDIA backend of internal/gpu: it drives the GPU through the CUDA driver
// API (libcuda) and compiles kernels at run time with NVRTC, both loaded with purego, so that
// CGO_ENABLED=0 builds work and one binary runs on machines with and without a GPU.
//
// How it is built:
//   - Loading: Open tries libcuda.so.1 then libcuda.so (and a few known directories), joining
//     the errors; every symbol is probed with Dlsym before it is registered, so a driver that
//     is too old gives an error naming the first missing entry point instead of a panic. The
//     _v2 entry points are used where the driver API has them. No init() touches a driver.
//   - Threading: a CUDA context is current per OS thread, so each Device owns one goroutine
//     locked to its OS thread, with the device's primary context current on it; every driver
//     call is sent there and waited for. Callers never see it.
//   - Work: one stream per device; Upload/Memset/Launch are queued on it in call order.
//   - Errors: every driver call goes through one checker that produces messages like
//     `cuda: cuLaunchKernel(raster_fwd): CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access
//     was encountered`, with the driver's own name and text (cuGetErrorName/String). NVRTC
//     failures carry the program log, whose lines name the source file and line.
//   - Kernels: NVRTC compiles to a CUBIN for the device's sm_XX when it supports it, else to
//     PTX for the newest compute_XX it knows, which the driver JIT-compiles. Images are cached
//     on disk keyed by source hash, options, NVRTC version, target and format. Without NVRTC
//     (or with RLXSPLAT_NO_NVRTC=1) the prebuilt PTX embedded from shaders/ptx is used after
//     checking that it was built from exactly the source asked for.
//   - RLXSPLAT_GPU_DEBUG=1 synchronises after every launch so that a fault names its kernel.
//
// Non-goals: multiple streams, peer access, unified memory, the runtime API (libcudart).
// On operating systems other than Linux, Open returns gpu.ErrNoDevice (Windows would need
// nvcuda.dll loading, which is not written yet).
package cuda

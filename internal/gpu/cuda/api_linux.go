package cuda

import (
	"unsafe"
)

// cuAPI is the part of the CUDA driver API this backend uses, bound at Open. Types follow
// cuda.h on 64-bit Linux: CUresult/CUdevice/enums are int32, CUdeviceptr is uint64, size_t is
// uintptr, and opaque handles (CUcontext, CUstream, ...) are uintptr.
type cuAPI struct {
	cuInit                     func(flags uint32) int32
	cuDriverGetVersion         func(v *int32) int32
	cuDeviceGetCount           func(n *int32) int32
	cuDeviceGet                func(dev *int32, ordinal int32) int32
	cuDeviceGetName            func(name *byte, n int32, dev int32) int32
	cuDeviceGetAttribute       func(v *int32, attr int32, dev int32) int32
	cuDeviceTotalMem           func(bytes *uintptr, dev int32) int32
	cuDevicePrimaryCtxRetain   func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease  func(dev int32) int32
	cuCtxSetCurrent            func(ctx uintptr) int32
	cuGetErrorName             func(r int32, s **byte) int32
	cuGetErrorString           func(r int32, s **byte) int32
	cuMemAlloc                 func(p *uint64, n uintptr) int32
	cuMemFree                  func(p uint64) int32
	cuMemGetInfo               func(free, total *uintptr) int32
	cuMemcpyHtoDAsync          func(dst uint64, src unsafe.Pointer, n uintptr, stream uintptr) int32
	cuMemcpyDtoHAsync          func(dst unsafe.Pointer, src uint64, n uintptr, stream uintptr) int32
	cuMemsetD8Async            func(dst uint64, v uint8, n uintptr, stream uintptr) int32
	cuStreamCreate             func(s *uintptr, flags uint32) int32
	cuStreamDestroy            func(s uintptr) int32
	cuStreamSynchronize        func(s uintptr) int32
	cuModuleLoadDataEx         func(m *uintptr, image unsafe.Pointer, nopts uint32, opts unsafe.Pointer, vals unsafe.Pointer) int32
	cuModuleUnload             func(m uintptr) int32
	cuModuleGetFunction        func(f *uintptr, m uintptr, name string) int32
	cuFuncSetAttribute         func(f uintptr, attr int32, v int32) int32
	cuLaunchKernel             func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra unsafe.Pointer) int32
	cuEventCreate              func(e *uintptr, flags uint32) int32
	cuEventDestroy             func(e uintptr) int32
	cuEventRecord              func(e uintptr, s uintptr) int32
	cuEventSynchronize         func(e uintptr) int32
	cuEventElapsedTime         func(ms *float32, start, end uintptr) int32
	cuFuncGetParamInfo         func(f uintptr, index uintptr, off *uintptr, size *uintptr) int32 // optional (CUDA 12.4+)
	cuFuncGetAttribute         func(v *int32, attr int32, f uintptr) int32                       // optional
	cuOccupancyMaxActiveBlocks func(n *int32, f uintptr, block int32, dynShared uintptr) int32   // optional
	cuStreamBeginCapture       func(s uintptr, mode int32) int32                                 // optional
	cuStreamEndCapture         func(s uintptr, g *uintptr) int32                                 // optional
	cuGraphInstantiateWithFlag func(exec *uintptr, g uintptr, flags uint64) int32                // optional
	cuGraphLaunch              func(exec uintptr, s uintptr) int32                               // optional
	cuGraphExecDestroy         func(exec uintptr) int32                                          // optional
	cuGraphDestroy             func(g uintptr) int32                                             // optional
	cuGraphExecUpdate          func(exec uintptr, g uintptr, info *graphExecUpdateInfo) int32    // optional (CUDA 12+)
	cuMemAllocHost             func(p *unsafe.Pointer, n uintptr) int32                          // optional
	cuMemFreeHost              func(p unsafe.Pointer) int32                                      // optional
}

// graphExecUpdateInfo is CUgraphExecUpdateResultInfo: the result and the nodes it names.
type graphExecUpdateInfo struct {
	result    int32
	_         int32
	errorNode uintptr
	errorFrom uintptr
}

func (a *cuAPI) symbols() []symbol {
	return []symbol{
		sym(&a.cuInit, "cuInit"),
		sym(&a.cuDriverGetVersion, "cuDriverGetVersion"),
		sym(&a.cuDeviceGetCount, "cuDeviceGetCount"),
		sym(&a.cuDeviceGet, "cuDeviceGet"),
		sym(&a.cuDeviceGetName, "cuDeviceGetName"),
		sym(&a.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
		sym(&a.cuDeviceTotalMem, "cuDeviceTotalMem_v2"),
		sym(&a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		sym(&a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
		sym(&a.cuCtxSetCurrent, "cuCtxSetCurrent"),
		sym(&a.cuGetErrorName, "cuGetErrorName"),
		sym(&a.cuGetErrorString, "cuGetErrorString"),
		sym(&a.cuMemAlloc, "cuMemAlloc_v2"),
		sym(&a.cuMemFree, "cuMemFree_v2"),
		sym(&a.cuMemGetInfo, "cuMemGetInfo_v2"),
		sym(&a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		sym(&a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		sym(&a.cuMemsetD8Async, "cuMemsetD8Async"),
		sym(&a.cuStreamCreate, "cuStreamCreate"),
		sym(&a.cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy"),
		sym(&a.cuStreamSynchronize, "cuStreamSynchronize"),
		sym(&a.cuModuleLoadDataEx, "cuModuleLoadDataEx"),
		sym(&a.cuModuleUnload, "cuModuleUnload"),
		sym(&a.cuModuleGetFunction, "cuModuleGetFunction"),
		sym(&a.cuFuncSetAttribute, "cuFuncSetAttribute"),
		sym(&a.cuLaunchKernel, "cuLaunchKernel"),
		sym(&a.cuEventCreate, "cuEventCreate"),
		sym(&a.cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
		sym(&a.cuEventRecord, "cuEventRecord"),
		sym(&a.cuEventSynchronize, "cuEventSynchronize"),
		sym(&a.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
		optSym(&a.cuFuncGetParamInfo, "cuFuncGetParamInfo"),
		optSym(&a.cuFuncGetAttribute, "cuFuncGetAttribute"),
		optSym(&a.cuOccupancyMaxActiveBlocks, "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
		optSym(&a.cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
		optSym(&a.cuStreamEndCapture, "cuStreamEndCapture"),
		optSym(&a.cuGraphInstantiateWithFlag, "cuGraphInstantiateWithFlags"),
		optSym(&a.cuGraphLaunch, "cuGraphLaunch"),
		optSym(&a.cuGraphExecDestroy, "cuGraphExecDestroy"),
		optSym(&a.cuGraphDestroy, "cuGraphDestroy"),
		optSym(&a.cuGraphExecUpdate, "cuGraphExecUpdate_v2"),
		optSym(&a.cuMemAllocHost, "cuMemAllocHost_v2"),
		optSym(&a.cuMemFreeHost, "cuMemFreeHost"),
	}
}

// Enum values from cuda.h.
const (
	streamNonBlocking          = 1  // CU_STREAM_NON_BLOCKING
	attrComputeCapabilityMajor = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrComputeCapabilityMinor = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	funcAttrMaxDynamicShared   = 8  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	funcAttrSharedBytes        = 1  // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	funcAttrLocalBytes         = 3  // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
	funcAttrNumRegs            = 4  // CU_FUNC_ATTRIBUTE_NUM_REGS
	jitErrorLogBuffer          = 5  // CU_JIT_ERROR_LOG_BUFFER
	jitErrorLogBufferSize      = 6  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
	streamCaptureModeRelaxed   = 2  // CU_STREAM_CAPTURE_MODE_RELAXED
	defaultSharedLimit         = 48 << 10
)

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cString returns the text of a NUL-terminated Go buffer (a log written by the driver).
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

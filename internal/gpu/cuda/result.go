package cuda

import (
	"fmt"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// Driver API result codes this package treats specially (values from cuda.h's CUresult).
const (
	cudaSuccess              = 0
	cudaErrorInvalidValue    = 1
	cudaErrorOutOfMemory     = 2
	cudaErrorNotInitialized  = 3
	cudaErrorStubLibrary     = 34
	cudaErrorInsufficientDr  = 35
	cudaErrorNoDevice        = 100
	cudaErrorInvalidDevice   = 101
	cudaErrorUnsupportedPTX  = 222
	cudaErrorNotReady        = 600
	cudaErrorDriverMismatch  = 803
	cudaErrorGraphExecUpdate = 910 // CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE
)

// resultNames is a fallback for when cuGetErrorName itself fails (a broken or partial driver);
// normally the driver's own name and text are used. A GPU test checks it against the driver.
var resultNames = map[int]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	35:  "CUDA_ERROR_INSUFFICIENT_DRIVER",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	218: "CUDA_ERROR_INVALID_PTX",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	400: "CUDA_ERROR_INVALID_HANDLE",
	500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	999: "CUDA_ERROR_UNKNOWN",
}

// Error is a failed driver or NVRTC call.
type Error struct {
	Call    string // entry point, e.g. "cuLaunchKernel"
	Subject string // what it acted on, e.g. the kernel name; may be ""
	Code    int    // CUresult or nvrtcResult
	Name    string // e.g. "CUDA_ERROR_ILLEGAL_ADDRESS"
	Message string // the library's description; may be ""
}

func (e *Error) Error() string {
	call := e.Call
	if e.Subject != "" {
		call += "(" + e.Subject + ")"
	}
	name := e.Name
	if name == "" {
		name = fmt.Sprintf("error %d", e.Code)
	}
	if e.Message == "" || e.Message == name {
		return fmt.Sprintf("cuda: %s: %s", call, name)
	}
	return fmt.Sprintf("cuda: %s: %s: %s", call, name, e.Message)
}

// Is maps driver results onto the gpu sentinels, so that callers can test errors.Is(err,
// gpu.ErrNoDevice) without knowing CUDA codes.
func (e *Error) Is(target error) bool {
	if strings.HasPrefix(e.Name, "NVRTC_") {
		return false // NVRTC codes overlap the driver's numerically
	}
	switch target {
	case driver.ErrOutOfMemory:
		return e.Code == cudaErrorOutOfMemory
	case driver.ErrNoDriver:
		return e.Code == cudaErrorStubLibrary || e.Code == cudaErrorInsufficientDr || e.Code == cudaErrorDriverMismatch
	case driver.ErrNoDevice:
		switch e.Code {
		case cudaErrorNoDevice, cudaErrorInvalidDevice, cudaErrorStubLibrary, cudaErrorInsufficientDr, cudaErrorDriverMismatch:
			return true
		}
	}
	return false
}

// fallbackName returns the name of a CUresult from the built-in table.
func fallbackName(code int) string {
	if n, ok := resultNames[code]; ok {
		return n
	}
	return fmt.Sprintf("CUresult(%d)", code)
}

package cuda

import (
	"errors"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		e    Error
		want string
	}{
		{Error{Call: "cuLaunchKernel", Subject: "raster_fwd", Code: 700, Name: "CUDA_ERROR_ILLEGAL_ADDRESS", Message: "an illegal memory access was encountered"},
			"cuda: cuLaunchKernel(raster_fwd): CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"},
		{Error{Call: "cuInit", Code: 100, Name: "CUDA_ERROR_NO_DEVICE"}, "cuda: cuInit: CUDA_ERROR_NO_DEVICE"},
		{Error{Call: "cuInit", Code: 12345}, "cuda: cuInit: error 12345"},
		{Error{Call: "nvrtcCompileProgram", Subject: "bad.cu", Code: 6, Name: "NVRTC_ERROR_COMPILATION", Message: "NVRTC_ERROR_COMPILATION"},
			"cuda: nvrtcCompileProgram(bad.cu): NVRTC_ERROR_COMPILATION"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

func TestErrorSentinels(t *testing.T) {
	tests := []struct {
		code              int
		name              string
		oom, dev, drvMiss bool
	}{
		{2, "CUDA_ERROR_OUT_OF_MEMORY", true, false, false},
		{100, "CUDA_ERROR_NO_DEVICE", false, true, false},
		{101, "CUDA_ERROR_INVALID_DEVICE", false, true, false},
		{35, "CUDA_ERROR_INSUFFICIENT_DRIVER", false, true, true},
		{34, "CUDA_ERROR_STUB_LIBRARY", false, true, true},
		{700, "CUDA_ERROR_ILLEGAL_ADDRESS", false, false, false},
		{2, "NVRTC_ERROR_INVALID_INPUT", false, false, false}, // NVRTC code 2 is not OOM
	}
	for _, tc := range tests {
		var err error = &Error{Call: "x", Code: tc.code, Name: tc.name}
		if got := errors.Is(err, driver.ErrOutOfMemory); got != tc.oom {
			t.Errorf("%s: Is(ErrOutOfMemory) = %v", tc.name, got)
		}
		if got := errors.Is(err, driver.ErrNoDevice); got != tc.dev {
			t.Errorf("%s: Is(ErrNoDevice) = %v", tc.name, got)
		}
		if got := errors.Is(err, driver.ErrNoDriver); got != tc.drvMiss {
			t.Errorf("%s: Is(ErrNoDriver) = %v", tc.name, got)
		}
	}
	if fallbackName(700) != "CUDA_ERROR_ILLEGAL_ADDRESS" || fallbackName(4242) != "CUresult(4242)" {
		t.Error("fallbackName")
	}
}

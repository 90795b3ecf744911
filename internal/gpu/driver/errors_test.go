package driver

import (
	"errors"
	"strings"
	"testing"
)

func TestSentinels(t *testing.T) {
	if !errors.Is(ErrNoDriver, ErrNoDevice) {
		t.Error("ErrNoDriver must satisfy errors.Is(_, ErrNoDevice) so that device: auto falls back")
	}
	if errors.Is(ErrNoDevice, ErrNoDriver) {
		t.Error("ErrNoDevice must not be ErrNoDriver")
	}
}

func TestOOMError(t *testing.T) {
	drv := errors.New("cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY: out of memory")
	e := &OOMError{Backend: "cuda", Requested: 1 << 50, Free: 3 << 30, Total: 140 << 30, Err: drv}
	var err error = e
	if !errors.Is(err, ErrOutOfMemory) || !errors.Is(err, drv) {
		t.Fatalf("errors.Is fails on %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"cuda: out of device memory", "1125899906842624 bytes", "1.0 PiB", "3.0 GiB free of 140.0 GiB", "CUDA_ERROR_OUT_OF_MEMORY"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	unknown := (&OOMError{Backend: "metal", Requested: 10, Free: -1, Total: -1}).Error()
	if strings.Contains(unknown, "free of") {
		t.Errorf("unknown free/total printed: %q", unknown)
	}
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"}, {5 << 20, "5.0 MiB"}, {1 << 40, "1.0 TiB"},
	}
	for _, tc := range tests {
		if got := HumanBytes(tc.n); got != tc.want {
			t.Errorf("HumanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestParseDiagnostics(t *testing.T) {
	log := "bad.cu(3): error: identifier \"y\" is undefined\n" +
		"bad.cu(7): warning #177-D: variable \"z\" was declared but never referenced\n" +
		"\n1 error detected in the compilation of \"bad.cu\".\n" +
		"program_source:12:5: error: use of undeclared identifier 'q'\n" +
		"prelude_cuda.h(40): catastrophic error: cannot open source file \"nope.h\"\n"
	want := []Diagnostic{
		{"bad.cu", 3, "error", `identifier "y" is undefined`},
		{"bad.cu", 7, "warning", `variable "z" was declared but never referenced`},
		{"program_source", 12, "error", "use of undeclared identifier 'q'"},
		{"prelude_cuda.h", 40, "catastrophic error", `cannot open source file "nope.h"`},
	}
	got := ParseDiagnostics(log)
	if len(got) != len(want) {
		t.Fatalf("got %d diagnostics %v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("diagnostic %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestCompileErrorMessage(t *testing.T) {
	call := errors.New("nvrtcCompileProgram: NVRTC_ERROR_COMPILATION")
	e := &CompileError{Backend: "cuda", Source: "bad.cu", Target: "sm_90", Log: "bad.cu(3): error: oops\n", Err: call}
	msg := e.Error()
	for _, want := range []string{"cuda: compile bad.cu for sm_90", "NVRTC_ERROR_COMPILATION", "\nbad.cu(3): error: oops"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if !errors.Is(e, call) {
		t.Error("CompileError does not unwrap to the failing call")
	}
}

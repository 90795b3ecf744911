package nccl

import (
	"errors"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{
			&Error{Call: "ncclAllReduce", Code: InvalidArgument, Message: "invalid argument (run with NCCL_DEBUG=WARN for details)",
				Detail: "AllReduce : invalid type 99"},
			"nccl: ncclAllReduce: ncclInvalidArgument (4): invalid argument (run with NCCL_DEBUG=WARN for details): AllReduce : invalid type 99",
		},
		{
			&Error{Call: "ncclCommInitAll", Code: UnhandledCudaError, Message: "unhandled cuda error"},
			"nccl: ncclCommInitAll: ncclUnhandledCudaError (1): unhandled cuda error",
		},
		{
			&Error{Call: "ncclGroupEnd", Code: SystemError, Message: "unhandled system error", Detail: "unhandled system error"},
			"nccl: ncclGroupEnd: ncclSystemError (2): unhandled system error",
		},
		{&Error{Call: "ncclCommDestroy", Code: 42}, "nccl: ncclCommDestroy: ncclResult(42) (42)"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got  %q\nwant %q", got, tt.want)
		}
	}
	var e *Error
	if !errors.As(error(tests[0].err), &e) || e.Code != InvalidArgument {
		t.Fatal("errors.As does not find *Error")
	}
}

// The names and numbers are nccl.h's; a shifted table would send the wrong type or op.
func TestEnumNames(t *testing.T) {
	results := map[Result]string{
		0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
		4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress",
		8: "ncclTimeout", 9: "ncclResult(9)", -1: "ncclResult(-1)",
	}
	for r, want := range results {
		if got := r.String(); got != want {
			t.Errorf("Result(%d) = %q, want %q", int32(r), got, want)
		}
	}
	types := []struct {
		t    DataType
		code int32
		name string
		size int
	}{
		{Int8, 0, "int8", 1}, {Uint8, 1, "uint8", 1}, {Int32, 2, "int32", 4}, {Uint32, 3, "uint32", 4},
		{Int64, 4, "int64", 8}, {Uint64, 5, "uint64", 8}, {Float16, 6, "float16", 2}, {Float32, 7, "float32", 4},
		{Float64, 8, "float64", 8}, {Bfloat16, 9, "bfloat16", 2}, {DataType(12), 12, "DataType(12)", 0},
	}
	for _, tt := range types {
		if int32(tt.t) != tt.code || tt.t.String() != tt.name || tt.t.Size() != tt.size {
			t.Errorf("%v: code %d size %d, want %s = %d of %d bytes", tt.t, int32(tt.t), tt.t.Size(), tt.name, tt.code, tt.size)
		}
	}
	ops := []struct {
		op   Op
		code int32
		name string
	}{{Sum, 0, "sum"}, {Prod, 1, "prod"}, {Max, 2, "max"}, {Min, 3, "min"}, {Avg, 4, "avg"}, {Op(5), 5, "Op(5)"}}
	for _, tt := range ops {
		if int32(tt.op) != tt.code || tt.op.String() != tt.name {
			t.Errorf("%v = %d, want %s = %d", tt.op, int32(tt.op), tt.name, tt.code)
		}
	}
}

func TestVersionString(t *testing.T) {
	for code, want := range map[int]string{2708: "2.7.8", 2804: "2.8.4", 20903: "2.9.3", 22105: "2.21.5", 22703: "2.27.3"} {
		if got := VersionString(code); got != want {
			t.Errorf("VersionString(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestCheckCount(t *testing.T) {
	if err := checkCount("ncclAllReduce", 0); err != nil {
		t.Fatal(err)
	}
	if err := checkCount("ncclAllReduce", -1); err == nil {
		t.Fatal("a negative count passed")
	}
}

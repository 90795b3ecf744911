package nccl

import (
	"errors"
	"fmt"
)

// ErrUnavailable is wrapped by every error that means this process cannot use NCCL at all:
// the library is absent or too old, or the OS is not Linux.
var ErrUnavailable = errors.New("nccl: NCCL is not available")

// DataType is ncclDataType_t: the element type of a collective's buffers.
type DataType int32

// Values from nccl.h.
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	Bfloat16 DataType = 9 // NCCL 2.10+ built with CUDA 11+
)

var dataTypes = [...]struct {
	name string
	size int
}{
	Int8: {"int8", 1}, Uint8: {"uint8", 1}, Int32: {"int32", 4}, Uint32: {"uint32", 4},
	Int64: {"int64", 8}, Uint64: {"uint64", 8}, Float16: {"float16", 2}, Float32: {"float32", 4},
	Float64: {"float64", 8}, Bfloat16: {"bfloat16", 2},
}

func (t DataType) String() string {
	if t >= 0 && int(t) < len(dataTypes) {
		return dataTypes[t].name
	}
	return fmt.Sprintf("DataType(%d)", int32(t))
}

// Size is the element size in bytes (0 for a value this package does not know).
func (t DataType) Size() int {
	if t >= 0 && int(t) < len(dataTypes) {
		return dataTypes[t].size
	}
	return 0
}

// Op is ncclRedOp_t: how a reduction combines the ranks' elements.
type Op int32

// Values from nccl.h.
const (
	Sum  Op = 0
	Prod Op = 1
	Max  Op = 2
	Min  Op = 3
	Avg  Op = 4 // NCCL 2.10+
)

var opNames = [...]string{Sum: "sum", Prod: "prod", Max: "max", Min: "min", Avg: "avg"}

func (o Op) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int32(o))
}

// Result is ncclResult_t.
type Result int32

// Values from nccl.h.
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
	Timeout            Result = 8 // newer releases only
)

var resultNames = [...]string{
	Success:            "ncclSuccess",
	UnhandledCudaError: "ncclUnhandledCudaError",
	SystemError:        "ncclSystemError",
	InternalError:      "ncclInternalError",
	InvalidArgument:    "ncclInvalidArgument",
	InvalidUsage:       "ncclInvalidUsage",
	RemoteError:        "ncclRemoteError",
	InProgress:         "ncclInProgress",
	Timeout:            "ncclTimeout",
}

func (r Result) String() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("ncclResult(%d)", int32(r))
}

// Error is a failed NCCL call.
type Error struct {
	Call    string // entry point, e.g. "ncclAllReduce"
	Code    Result
	Message string // ncclGetErrorString's text for Code; may be ""
	Detail  string // ncclGetLastError's text (what went wrong this time); may be ""
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nccl: %s: %s (%d)", e.Call, e.Code, int32(e.Code))
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Detail != "" && e.Detail != e.Message {
		s += ": " + e.Detail
	}
	return s
}

// UniqueIDBytes is NCCL_UNIQUE_ID_BYTES.
const UniqueIDBytes = 128

// UniqueID is ncclUniqueId: what every rank of a communicator made with InitRank must be
// given. It is plain bytes so that it can be sent to other processes as is.
type UniqueID [UniqueIDBytes]byte

// VersionString renders an NCCL_VERSION_CODE ("2.21.5"). The code packs major, minor and
// patch as X*1000+Y*100+Z up to 2.8 and as X*10000+Y*100+Z from 2.9 on.
func VersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code/100%100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/1000, code/100%10, code%100)
}

// checkCount rejects what size_t cannot hold before it reaches the library.
func checkCount(call string, count int) error {
	if count < 0 {
		return fmt.Errorf("nccl: %s: negative element count %d", call, count)
	}
	return nil
}

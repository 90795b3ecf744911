package driver

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Sentinel errors, usable with errors.Is. Under `device: auto` the caller falls back to the CPU
// engine when errors.Is(err, ErrNoDevice) holds.
var (
	// ErrNoDevice: no usable GPU (none present, none of the requested kind, or the backend does
	// not exist on this OS).
	ErrNoDevice = errors.New("gpu: no GPU device")
	// ErrNoDriver: the GPU driver library could not be loaded or is too old. It wraps
	// ErrNoDevice, because without a driver there is no usable device either.
	ErrNoDriver = fmt.Errorf("%w: GPU driver library not available", ErrNoDevice)
	// ErrNoCompiler: the runtime kernel compiler (NVRTC) is missing or was switched off and no
	// prebuilt kernel matches the source.
	ErrNoCompiler = errors.New("gpu: no kernel compiler")
	// ErrOutOfMemory: a device allocation failed for lack of memory; the error is an *OOMError.
	ErrOutOfMemory = errors.New("gpu: out of device memory")
	// ErrClosed: the device (or the handle) was used after Close / Free.
	ErrClosed = errors.New("gpu: device or handle already closed")
	// ErrUnsupported: the backend does not implement this verb (yet).
	ErrUnsupported = errors.New("gpu: not supported by this backend")
	// ErrGraphChanged: Graph.Update was given a capture whose shape (its launches, copies and
	// their order) differs from the graph's; capture anew and replace the graph instead.
	ErrGraphChanged = errors.New("gpu: the captured work differs in shape from the graph's")
	// ErrForeignHandle: a handle was passed to a device that did not create it.
	ErrForeignHandle = errors.New("gpu: handle belongs to another device or backend")
)

// OOMError reports a failed allocation with the size asked for and the memory the device had.
type OOMError struct {
	Backend   string // "cuda", "metal"
	Requested int64  // bytes asked for
	Free      int64  // bytes free when it failed (-1 if unknown)
	Total     int64  // bytes on the device (-1 if unknown)
	Err       error  // the driver's own error, if any
}

func (e *OOMError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: out of device memory: asked for %s (%d bytes)", e.Backend, HumanBytes(e.Requested), e.Requested)
	if e.Free >= 0 && e.Total >= 0 {
		fmt.Fprintf(&b, ", %s free of %s", HumanBytes(e.Free), HumanBytes(e.Total))
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap lets errors.Is find both ErrOutOfMemory and the driver error.
func (e *OOMError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrOutOfMemory}
	}
	return []error{ErrOutOfMemory, e.Err}
}

// HumanBytes formats a byte count with a binary unit (for messages only).
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Diagnostic is one message of a compiler log, parsed from lines like
// `raster_fwd.cu(42): error: identifier "x" is undefined`.
type Diagnostic struct {
	File     string
	Line     int
	Severity string // "error", "warning", ...
	Message  string
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", d.File, d.Line, d.Severity, d.Message)
}

// NVRTC (and nvcc's front end) print `file(line): severity: message`; Metal prints
// `program_source:line:col: severity: message`. Both are accepted.
var (
	diagParen = regexp.MustCompile(`^(.+?)\((\d+)\): (catastrophic error|error|warning|remark|note)[^:]*: (.*)$`)
	diagColon = regexp.MustCompile(`^(.+?):(\d+):(?:\d+:)? (fatal error|error|warning|note): (.*)$`)
)

// ParseDiagnostics extracts the file:line messages from a compiler log; lines it does not
// recognise are skipped (the full log stays in CompileError.Log).
func ParseDiagnostics(log string) []Diagnostic {
	var out []Diagnostic
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimRight(line, "\r")
		m := diagParen.FindStringSubmatch(line)
		if m == nil {
			m = diagColon.FindStringSubmatch(line)
		}
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			continue
		}
		out = append(out, Diagnostic{File: m[1], Line: n, Severity: m[3], Message: m[4]})
	}
	return out
}

// CompileError is a failed kernel compilation, carrying the compiler's log (whose messages name
// the source file and line) and the diagnostics parsed from it.
type CompileError struct {
	Backend     string // "cuda", "metal"
	Source      string // Source.Name
	Target      string // e.g. "sm_90", "compute_75"
	Log         string // the compiler's whole log
	Diagnostics []Diagnostic
	Err         error // the failing call, e.g. nvrtcCompileProgram: NVRTC_ERROR_COMPILATION
}

func (e *CompileError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: compile %s", e.Backend, e.Source)
	if e.Target != "" {
		fmt.Fprintf(&b, " for %s", e.Target)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if log := strings.TrimSpace(e.Log); log != "" {
		b.WriteString("\n")
		b.WriteString(log)
	}
	return b.String()
}

func (e *CompileError) Unwrap() error { return e.Err }

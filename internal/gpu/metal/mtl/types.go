package mtl

import (
	"fmt"
	"unsafe"
)

// ID is an Objective-C object pointer (0 is nil).
type ID uintptr

// Size mirrors MTLSize: three NSUInteger (64-bit on every Mac Go supports), 24 bytes.
type Size struct{ Width, Height, Depth uint64 }

// Range mirrors NSRange: {NSUInteger location, length}, 16 bytes.
type Range struct{ Location, Length uint64 }

// ResourceOptions is MTLResourceOptions (NSUInteger).
type ResourceOptions uint64

// ResourceStorageModeShared: CPU and GPU share the memory (MTLStorageModeShared << 4 = 0).
const ResourceStorageModeShared ResourceOptions = 0

// CommandBufferStatus is MTLCommandBufferStatus (NSUInteger).
type CommandBufferStatus uint64

// The command buffer states, in Apple's order.
const (
	StatusNotEnqueued CommandBufferStatus = iota
	StatusEnqueued
	StatusCommitted
	StatusScheduled
	StatusCompleted
	StatusError
)

func (s CommandBufferStatus) String() string {
	names := [...]string{"not enqueued", "enqueued", "committed", "scheduled", "completed", "error"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("status(%d)", uint64(s))
}

// GPUFamily is MTLGPUFamily (NSInteger).
type GPUFamily int64

// Apple GPU families: Apple7 (M1, A14) is the first with float atomics on device memory.
const (
	GPUFamilyApple1 GPUFamily = 1001
	GPUFamilyApple7 GPUFamily = 1007
	GPUFamilyApple9 GPUFamily = 1009
	// GPUFamilyAppleNewest bounds the probe for the device's family name.
	GPUFamilyAppleNewest GPUFamily = 1012
)

// LanguageVersion is MTLLanguageVersion (NSUInteger): major << 16 | minor.
type LanguageVersion uint64

// LanguageVersion3_0 is MSL 3.0: the first version with float atomics on device memory.
const LanguageVersion3_0 LanguageVersion = 3<<16 | 0

func (v LanguageVersion) String() string { return fmt.Sprintf("MSL %d.%d", v>>16, v&0xffff) }

// MathModeSafe is MTLMathModeSafe (NSInteger; macOS 15 and later).
const MathModeSafe int64 = 0

// CompileOptions are the MTLCompileOptions the backend sets.
type CompileOptions struct {
	LanguageVersion LanguageVersion
	// FastMath false asks for IEEE-conforming math: setFastMathEnabled:NO, and on systems that
	// have it setMathMode:MTLMathModeSafe. Neither stops a*b+c becoming an FMA; the source's
	// `#pragma METAL fp contract(off)` does.
	FastMath bool
}

// NSError is an error reported by Metal through an NSError (or a command buffer's error).
type NSError struct {
	Op          string // the call, e.g. "newLibraryWithSource:options:error:"
	Description string // localizedDescription: for a compilation, the compiler's log
}

func (e *NSError) Error() string { return fmt.Sprintf("mtl: %s: %s", e.Op, e.Description) }

// cString reads a NUL-terminated C string (as returned by -[NSString UTF8String]).
func cString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

package mtl

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// Kind is how one argument or result of a message crosses the Objective-C boundary.
type Kind uint8

// The kinds, each with exactly one Go type (GoType) that a send must use for it.
const (
	KindVoid    Kind = iota // result only
	KindID                  // an object: ID
	KindUInt                // NSUInteger: uint64
	KindInt                 // NSInteger: int64
	KindBool                // BOOL: bool
	KindByte                // uint8_t: uint8
	KindF64                 // double / CFTimeInterval: float64 (result only)
	KindPtr                 // a C pointer: unsafe.Pointer
	KindCString             // const char * made from a Go string: string
	KindOutID               // NSError ** and similar: *ID
	KindSel                 // SEL: Sel
	KindSize                // MTLSize by value: Size
	KindRange               // NSRange by value: Range
)

var kindTypes = [...]reflect.Type{
	KindID:      reflect.TypeFor[ID](),
	KindUInt:    reflect.TypeFor[uint64](),
	KindInt:     reflect.TypeFor[int64](),
	KindBool:    reflect.TypeFor[bool](),
	KindByte:    reflect.TypeFor[uint8](),
	KindF64:     reflect.TypeFor[float64](),
	KindPtr:     reflect.TypeFor[unsafe.Pointer](),
	KindCString: reflect.TypeFor[string](),
	KindOutID:   reflect.TypeFor[*ID](),
	KindSel:     reflect.TypeFor[Sel](),
	KindSize:    reflect.TypeFor[Size](),
	KindRange:   reflect.TypeFor[Range](),
}

// GoType is the Go type a value of kind k has in a send (nil for KindVoid).
func (k Kind) GoType() reflect.Type {
	if int(k) < len(kindTypes) {
		return kindTypes[k]
	}
	return nil
}

// Sel names one selector of the table.
type Sel int

// Selector is one message the backend sends: its name and the kinds of its arguments and
// result.
type Selector struct {
	Name string
	Args []Kind
	Ret  Kind
}

// The selectors, one per message sent anywhere in this package.
const (
	SelAlloc Sel = iota
	SelInit
	SelRelease
	SelRetain
	SelDrain
	SelRespondsToSelector
	SelStringWithUTF8String
	SelUTF8String
	SelLocalizedDescription
	SelName
	SelSupportsFamily
	SelRecommendedMaxWorkingSetSize
	SelCurrentAllocatedSize
	SelMaxThreadgroupMemoryLength
	SelNewCommandQueue
	SelNewBufferWithLength
	SelLength
	SelContents
	SelSetLanguageVersion
	SelSetFastMathEnabled
	SelSetMathMode
	SelNewLibraryWithSource
	SelNewFunctionWithName
	SelNewComputePipelineState
	SelMaxTotalThreadsPerThreadgroup
	SelThreadExecutionWidth
	SelStaticThreadgroupMemoryLength
	SelCommandBuffer
	SelComputeCommandEncoder
	SelBlitCommandEncoder
	SelCommit
	SelWaitUntilCompleted
	SelStatus
	SelError
	SelGPUStartTime
	SelGPUEndTime
	SelSetComputePipelineState
	SelSetBuffer
	SelSetBytes
	SelSetThreadgroupMemoryLength
	SelDispatchThreadgroups
	SelEndEncoding
	SelFillBuffer
	SelCopyFromBuffer
	numSels
)

// Selectors is the table, indexed by Sel. Names and argument types are from Apple's Metal and
// Foundation references.
var Selectors = [numSels]Selector{
	SelAlloc:                         {"alloc", nil, KindID},
	SelInit:                          {"init", nil, KindID},
	SelRelease:                       {"release", nil, KindVoid},
	SelRetain:                        {"retain", nil, KindID},
	SelDrain:                         {"drain", nil, KindVoid},
	SelRespondsToSelector:            {"respondsToSelector:", []Kind{KindSel}, KindBool},
	SelStringWithUTF8String:          {"stringWithUTF8String:", []Kind{KindCString}, KindID},
	SelUTF8String:                    {"UTF8String", nil, KindPtr},
	SelLocalizedDescription:          {"localizedDescription", nil, KindID},
	SelName:                          {"name", nil, KindID},
	SelSupportsFamily:                {"supportsFamily:", []Kind{KindInt}, KindBool},
	SelRecommendedMaxWorkingSetSize:  {"recommendedMaxWorkingSetSize", nil, KindUInt},
	SelCurrentAllocatedSize:          {"currentAllocatedSize", nil, KindUInt},
	SelMaxThreadgroupMemoryLength:    {"maxThreadgroupMemoryLength", nil, KindUInt},
	SelNewCommandQueue:               {"newCommandQueue", nil, KindID},
	SelNewBufferWithLength:           {"newBufferWithLength:options:", []Kind{KindUInt, KindUInt}, KindID},
	SelLength:                        {"length", nil, KindUInt},
	SelContents:                      {"contents", nil, KindPtr},
	SelSetLanguageVersion:            {"setLanguageVersion:", []Kind{KindUInt}, KindVoid},
	SelSetFastMathEnabled:            {"setFastMathEnabled:", []Kind{KindBool}, KindVoid},
	SelSetMathMode:                   {"setMathMode:", []Kind{KindInt}, KindVoid},
	SelNewLibraryWithSource:          {"newLibraryWithSource:options:error:", []Kind{KindID, KindID, KindOutID}, KindID},
	SelNewFunctionWithName:           {"newFunctionWithName:", []Kind{KindID}, KindID},
	SelNewComputePipelineState:       {"newComputePipelineStateWithFunction:error:", []Kind{KindID, KindOutID}, KindID},
	SelMaxTotalThreadsPerThreadgroup: {"maxTotalThreadsPerThreadgroup", nil, KindUInt},
	SelThreadExecutionWidth:          {"threadExecutionWidth", nil, KindUInt},
	SelStaticThreadgroupMemoryLength: {"staticThreadgroupMemoryLength", nil, KindUInt},
	SelCommandBuffer:                 {"commandBuffer", nil, KindID},
	SelComputeCommandEncoder:         {"computeCommandEncoder", nil, KindID},
	SelBlitCommandEncoder:            {"blitCommandEncoder", nil, KindID},
	SelCommit:                        {"commit", nil, KindVoid},
	SelWaitUntilCompleted:            {"waitUntilCompleted", nil, KindVoid},
	SelStatus:                        {"status", nil, KindUInt},
	SelError:                         {"error", nil, KindID},
	SelGPUStartTime:                  {"GPUStartTime", nil, KindF64},
	SelGPUEndTime:                    {"GPUEndTime", nil, KindF64},
	SelSetComputePipelineState:       {"setComputePipelineState:", []Kind{KindID}, KindVoid},
	SelSetBuffer:                     {"setBuffer:offset:atIndex:", []Kind{KindID, KindUInt, KindUInt}, KindVoid},
	SelSetBytes:                      {"setBytes:length:atIndex:", []Kind{KindPtr, KindUInt, KindUInt}, KindVoid},
	SelSetThreadgroupMemoryLength:    {"setThreadgroupMemoryLength:atIndex:", []Kind{KindUInt, KindUInt}, KindVoid},
	SelDispatchThreadgroups:          {"dispatchThreadgroups:threadsPerThreadgroup:", []Kind{KindSize, KindSize}, KindVoid},
	SelEndEncoding:                   {"endEncoding", nil, KindVoid},
	SelFillBuffer:                    {"fillBuffer:range:value:", []Kind{KindID, KindRange, KindByte}, KindVoid},
	SelCopyFromBuffer:                {"copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:", []Kind{KindID, KindUInt, KindID, KindUInt, KindUInt}, KindVoid},
}

// Check validates the table: every selector named, its colon count equal to its argument
// count, result kinds that can be results and argument kinds that can be arguments, and the
// by-value structs with Apple's layout. It returns every problem joined.
func Check() error {
	var bad []string
	for i, s := range Selectors {
		if s.Name == "" {
			bad = append(bad, fmt.Sprintf("selector %d has no name", i))
			continue
		}
		if n := strings.Count(s.Name, ":"); n != len(s.Args) {
			bad = append(bad, fmt.Sprintf("%s: %d colons but %d arguments", s.Name, n, len(s.Args)))
		}
		for j, k := range s.Args {
			if k == KindVoid || k == KindF64 || k.GoType() == nil {
				bad = append(bad, fmt.Sprintf("%s: argument %d has kind %d, which cannot be an argument", s.Name, j, k))
			}
		}
		if s.Ret != KindVoid && (s.Ret.GoType() == nil || s.Ret == KindCString || s.Ret == KindOutID || s.Ret == KindSel) {
			bad = append(bad, fmt.Sprintf("%s: result kind %d cannot be a result", s.Name, s.Ret))
		}
	}
	bad = append(bad, checkLayout()...)
	if len(bad) > 0 {
		return fmt.Errorf("mtl: selector table: %s", strings.Join(bad, "; "))
	}
	return nil
}

// checkLayout compares the Go mirrors of Apple's by-value types with the C layouts on 64-bit
// Apple platforms (NSUInteger is unsigned long, 8 bytes, 8-aligned).
func checkLayout() []string {
	var bad []string
	want := func(name string, got, exp uintptr) {
		if got != exp {
			bad = append(bad, fmt.Sprintf("%s is %d, Apple's is %d", name, got, exp))
		}
	}
	var s Size
	want("sizeof(MTLSize)", unsafe.Sizeof(s), 24)
	want("offsetof(MTLSize.height)", unsafe.Offsetof(s.Height), 8)
	want("offsetof(MTLSize.depth)", unsafe.Offsetof(s.Depth), 16)
	var r Range
	want("sizeof(NSRange)", unsafe.Sizeof(r), 16)
	want("offsetof(NSRange.length)", unsafe.Offsetof(r.Length), 8)
	want("sizeof(NSUInteger)", KindUInt.GoType().Size(), 8)
	want("sizeof(NSInteger)", KindInt.GoType().Size(), 8)
	want("sizeof(id)", KindID.GoType().Size(), unsafe.Sizeof(uintptr(0)))
	return bad
}

// CheckSend reports whether a send of sel with args, expecting a result of kind ret, matches
// the table: the argument count and each argument's Go type.
func CheckSend(sel Sel, ret Kind, args []any) error {
	if sel < 0 || sel >= numSels {
		return fmt.Errorf("mtl: selector %d is not in the table", sel)
	}
	s := Selectors[sel]
	if ret != s.Ret {
		return fmt.Errorf("mtl: %s: result read as kind %d, the table says %d", s.Name, ret, s.Ret)
	}
	if len(args) != len(s.Args) {
		return fmt.Errorf("mtl: %s: sent with %d arguments, it takes %d", s.Name, len(args), len(s.Args))
	}
	for i, a := range args {
		if got, want := reflect.TypeOf(a), s.Args[i].GoType(); got != want {
			return fmt.Errorf("mtl: %s: argument %d is %v, the table says %v", s.Name, i, got, want)
		}
	}
	return nil
}

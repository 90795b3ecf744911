package driver

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ArgKind tells what a launch argument holds.
type ArgKind uint8

const (
	ArgInvalid ArgKind = iota
	ArgBuffer          // a device pointer (buffer base plus a byte offset)
	ArgU32
	ArgI32
	ArgF32
	ArgU64
	ArgBytes // a small by-value struct, laid out by the caller exactly as the kernel declares it
)

func (k ArgKind) String() string {
	switch k {
	case ArgBuffer:
		return "buffer"
	case ArgU32:
		return "u32"
	case ArgI32:
		return "i32"
	case ArgF32:
		return "f32"
	case ArgU64:
		return "u64"
	case ArgBytes:
		return "bytes"
	}
	return "invalid"
}

// Arg is one kernel argument. Build it with Ptr, PtrAt, U32, I32, F32, U64 or Bytes.
type Arg struct {
	kind   ArgKind
	scalar uint64
	buf    Buffer
	off    int
	bytes  []byte
}

// Ptr passes the device address of b.
func Ptr(b Buffer) Arg { return Arg{kind: ArgBuffer, buf: b} }

// PtrAt passes the device address of b plus off bytes.
func PtrAt(b Buffer, off int) Arg { return Arg{kind: ArgBuffer, buf: b, off: off} }

// U32 passes an unsigned 32-bit integer.
func U32(v uint32) Arg { return Arg{kind: ArgU32, scalar: uint64(v)} }

// I32 passes a signed 32-bit integer.
func I32(v int32) Arg { return Arg{kind: ArgI32, scalar: uint64(uint32(v))} }

// F32 passes a 32-bit float.
func F32(v float32) Arg { return Arg{kind: ArgF32, scalar: uint64(math.Float32bits(v))} }

// U64 passes an unsigned 64-bit integer.
func U64(v uint64) Arg { return Arg{kind: ArgU64, scalar: v} }

// Bytes passes a by-value struct whose little-endian bytes (with the C padding included) are b.
// b is copied when the launch is packed.
func Bytes(b []byte) Arg { return Arg{kind: ArgBytes, bytes: b} }

// Kind reports what the argument holds.
func (a Arg) Kind() ArgKind { return a.kind }

// Buffer returns the buffer and byte offset of an ArgBuffer argument.
func (a Arg) Buffer() (Buffer, int) { return a.buf, a.off }

// Size is the argument's size in bytes as the kernel sees it.
func (a Arg) Size() int {
	switch a.kind {
	case ArgBuffer, ArgU64:
		return 8
	case ArgU32, ArgI32, ArgF32:
		return 4
	case ArgBytes:
		return len(a.bytes)
	}
	return 0
}

func (a Arg) String() string {
	switch a.kind {
	case ArgBuffer:
		if a.off != 0 {
			return fmt.Sprintf("buffer+%d", a.off)
		}
		return "buffer"
	case ArgU32:
		return fmt.Sprintf("u32(%d)", uint32(a.scalar))
	case ArgI32:
		return fmt.Sprintf("i32(%d)", int32(uint32(a.scalar)))
	case ArgF32:
		return fmt.Sprintf("f32(%g)", math.Float32frombits(uint32(a.scalar)))
	case ArgU64:
		return fmt.Sprintf("u64(%d)", a.scalar)
	case ArgBytes:
		return fmt.Sprintf("bytes[%d]", len(a.bytes))
	}
	return "invalid"
}

// argAlign is the alignment of every packed value. The driver reads each argument through its
// own pointer, so 16 (the largest CUDA vector alignment) is enough for any by-value struct.
const argAlign = 16

// Packed is a launch's argument values laid out in one block of host memory, ready to be
// handed to a driver as an array of pointers (CUDA's kernelParams) or as per-index byte ranges
// (Metal's setBytes). Words is uint64-backed so that every offset is 8-byte aligned in memory.
type Packed struct {
	Words   []uint64 // backing store; values are at byte Offsets
	Offsets []int    // byte offset of each argument in Words
	Sizes   []int    // byte size of each argument
}

// Bytes returns argument i's bytes (a view into Words).
func (p *Packed) Bytes(i int) []byte {
	all := wordsAsBytes(p.Words)
	return all[p.Offsets[i] : p.Offsets[i]+p.Sizes[i]]
}

// AddrFunc resolves a buffer argument to its device address; it must reject foreign, freed or
// out-of-range buffers with an error.
type AddrFunc func(b Buffer, off int) (uint64, error)

// Pack lays out args, resolving buffers with addr. Errors name the argument index.
func Pack(args []Arg, addr AddrFunc) (*Packed, error) {
	p := &Packed{Offsets: make([]int, len(args)), Sizes: make([]int, len(args))}
	total := 0
	for i, a := range args {
		sz := a.Size()
		if a.kind == ArgInvalid {
			return nil, fmt.Errorf("gpu: argument %d: zero Arg (build it with gpu.Ptr, gpu.F32, ...)", i)
		}
		if a.kind == ArgBytes && sz == 0 {
			return nil, fmt.Errorf("gpu: argument %d: empty by-value struct", i)
		}
		p.Offsets[i] = total
		p.Sizes[i] = sz
		total += (sz + argAlign - 1) / argAlign * argAlign
	}
	p.Words = make([]uint64, (total+7)/8)
	buf := wordsAsBytes(p.Words)
	for i, a := range args {
		dst := buf[p.Offsets[i] : p.Offsets[i]+p.Sizes[i]]
		switch a.kind {
		case ArgBuffer:
			if a.buf == nil {
				return nil, fmt.Errorf("gpu: argument %d: nil buffer", i)
			}
			if a.off < 0 || a.off > a.buf.Size() {
				return nil, fmt.Errorf("gpu: argument %d: offset %d outside a %d-byte buffer", i, a.off, a.buf.Size())
			}
			v, err := addr(a.buf, a.off)
			if err != nil {
				return nil, fmt.Errorf("gpu: argument %d: %w", i, err)
			}
			binary.LittleEndian.PutUint64(dst, v)
		case ArgU32, ArgI32, ArgF32:
			binary.LittleEndian.PutUint32(dst, uint32(a.scalar))
		case ArgU64:
			binary.LittleEndian.PutUint64(dst, a.scalar)
		case ArgBytes:
			copy(dst, a.bytes)
		}
	}
	return p, nil
}

// CheckSignature compares args with a kernel's parameter sizes in bytes (as the driver reports
// them); it returns an error naming the kernel and the first mismatch.
func CheckSignature(kernel string, params []int, args []Arg) error {
	if len(params) != len(args) {
		return fmt.Errorf("gpu: launch %s: %d arguments given, the kernel takes %d", kernel, len(args), len(params))
	}
	for i, a := range args {
		if a.Size() != params[i] {
			return fmt.Errorf("gpu: launch %s: argument %d is %s (%d bytes), the kernel's parameter %d is %d bytes",
				kernel, i, a, a.Size(), i, params[i])
		}
	}
	return nil
}

// Package abi is the fused engine's host side of the host–kernel interface, generated from its
// one declaration (internal/fused/abi/spec): the layout constants, the by-value structs with
// their exact bytes, one argument struct per kernel and a typed, checked launch method per
// entry point. The kernels' side (shaders/abi.h, shaders/entries/) comes from the same
// declaration, so the two cannot drift; a test fails when the generated files are stale.
//
// This file holds what the generated code calls; abi_gen.go is written by
// `go generate ./internal/fused/abi`.
//
// Non-goals: no engine logic (grids and buffers are internal/fused's); no device code.
package abi

//go:generate go run ./gen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// Buf is a buffer argument: a device buffer and a byte offset into it.
type Buf struct {
	B   gpu.Buffer
	Off int
}

// B passes buffer b from its start.
func B(b gpu.Buffer) Buf { return Buf{B: b} }

// At passes buffer b from byte off.
func At(b gpu.Buffer, off int) Buf { return Buf{B: b, Off: off} }

// KernelInfo is what the declaration says about one entry point.
type KernelInfo struct {
	Name, Unit  string
	Params      int // parameters (Metal: buffer slots)
	InlineBytes int // bytes the launch passes by value: structs, scalars and 8 per buffer address
	SharedBytes int // block-shared memory its wrapper declares
	Block       int // the only block size it runs with; 0: any
	MaxThreads  int // its launch bound; 0: none declared
}

func putU32(b []byte, v uint32)  { binary.LittleEndian.PutUint32(b, v) }
func putI32(b []byte, v int32)   { binary.LittleEndian.PutUint32(b, uint32(v)) }
func putF32(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) }

// launch gathers one launch's arguments; the first problem found is kept and reported by run,
// naming the kernel and the parameter.
type launch struct {
	kernel      string
	grid, block gpu.Dim3
	args        []gpu.Arg
	err         error
}

// maxThreads is the most threads a block may have on every backend.
const maxThreads = 1024

// newLaunch checks the launch shape: a 1-D block, of exactly block threads when the kernel
// requires it, within its launch bound.
func newLaunch(kernel string, grid, block gpu.Dim3, exact, bound, nargs int) *launch {
	l := &launch{kernel: kernel, grid: grid, block: block, args: make([]gpu.Arg, 0, nargs)}
	b := block.Norm()
	threads := int(b[0]) * int(b[1]) * int(b[2])
	switch {
	case b[1] != 1 || b[2] != 1:
		l.err = fmt.Errorf("block %v: the kernels index 1-D blocks only", block)
	case exact > 0 && threads != exact:
		l.err = fmt.Errorf("block of %d threads: the kernel is written for exactly %d", threads, exact)
	case bound > 0 && threads > bound:
		l.err = fmt.Errorf("block of %d threads: above the kernel's launch bound %d", threads, bound)
	case threads > maxThreads:
		l.err = fmt.Errorf("block of %d threads: above %d", threads, maxThreads)
	}
	return l
}

// buf adds a buffer argument of elem-byte elements.
func (l *launch) buf(name string, v Buf, elem int) {
	switch {
	case l.err != nil:
	case v.B == nil:
		l.err = fmt.Errorf("%s: no buffer", name)
	case v.Off < 0 || v.Off > v.B.Size() || v.Off%elem != 0:
		l.err = fmt.Errorf("%s: offset %d into a buffer of %d bytes (elements of %d bytes)", name, v.Off, v.B.Size(), elem)
	}
	l.args = append(l.args, gpu.PtrAt(v.B, v.Off))
}

func (l *launch) u32(v uint32)   { l.args = append(l.args, gpu.U32(v)) }
func (l *launch) i32(v int32)    { l.args = append(l.args, gpu.I32(v)) }
func (l *launch) f32(v float32)  { l.args = append(l.args, gpu.F32(v)) }
func (l *launch) bytes(b []byte) { l.args = append(l.args, gpu.Bytes(b)) }

func (l *launch) run(dev gpu.Device, k gpu.Kernel) error {
	if l.err != nil {
		return fmt.Errorf("fused: launch %s: %w", l.kernel, l.err)
	}
	return dev.Launch(k, l.grid, l.block, 0, l.args...)
}

// unit is a kernel file and the entry points to look up in it.
type unit struct {
	file    string
	entries []entry
}

type entry struct {
	name string
	dst  *gpu.Kernel
}

// loadUnits compiles the units and looks up their entry points; on failure nothing stays
// loaded. The units compile at once: a device's Compile is safe for concurrent use, and CUDA's
// runs NVRTC on the caller's goroutine, so a cold kernel cache (a first run) costs about the
// longest unit's compile instead of the sum of all of them.
func loadUnits(dev gpu.Device, units []unit) ([]gpu.Module, error) {
	mods := make([]gpu.Module, len(units))
	errs := make([]error, len(units))
	var wg sync.WaitGroup
	for i, u := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mods[i], errs[i] = gpu.CompileShader(dev, u.file)
		}()
	}
	wg.Wait()
	loaded := make([]gpu.Module, 0, len(units))
	for _, m := range mods {
		if m != nil {
			loaded = append(loaded, m)
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeModules(&loaded)
		return nil, fmt.Errorf("fused: %w", err)
	}
	for i, u := range units {
		for _, e := range u.entries {
			k, err := mods[i].Kernel(e.name)
			if err != nil {
				closeModules(&loaded)
				return nil, fmt.Errorf("fused: %s: %w", u.file, err)
			}
			*e.dst = k
		}
	}
	return loaded, nil
}

// closeModules closes every module and empties the list; it returns the first error.
func closeModules(mods *[]gpu.Module) error {
	var first error
	for _, m := range *mods {
		if err := m.Close(); err != nil && first == nil {
			first = err
		}
	}
	*mods = nil
	return first
}

// Package shaders holds the GPU kernel sources, embedded into the binary, and the prebuilt PTX
// that the CUDA backend falls back to on machines without NVRTC.
//
// Layout: NAME.cu are kernel translation units (one per pipeline stage, plus selftest.cu for
// the device layer's own tests); headers they include with `#include "x.h"` sit beside them,
// generated entry points in entries/NAME.h;
// ptx/NAME.ptx is NAME.cu compiled to PTX by internal/gpu/cmd/genptx (`make ptx`), with the
// SHA-256 of the source it was built from in its header. A test fails when a PTX file is
// stale or missing, so the fallback can never silently run old code.
//
// Non-goals: no host logic lives here (launchers are in internal/fused), and nothing here
// compiles anything.
package shaders

import (
	"embed"
	"io/fs"
)

// Headers (*.h) are embedded with the units: the preludes, the bodies several units share, and
// the generated interface (abi.h, entries/UNIT.h: internal/fused/abi/gen writes them).
// Add `*.metal` here when the Metal sources land.
//
//go:embed *.cu *.h entries ptx
var files embed.FS

// Sources is the directory of kernel sources (NAME.cu at its root).
func Sources() fs.FS { return files }

// PTX is the directory of prebuilt PTX files (NAME.ptx at its root).
func PTX() fs.FS {
	// fs.Sub fails only for an invalid path and "ptx" is valid; a nil FS would make the
	// CUDA fallback report that no PTX is embedded.
	sub, _ := fs.Sub(files, "ptx")
	return sub
}

// CUDAUnits lists the kernel translation units (*.cu) by file name, sorted.
func CUDAUnits() ([]string, error) {
	names, err := fs.Glob(files, "*.cu")
	if err != nil {
		return nil, err
	}
	return names, nil
}

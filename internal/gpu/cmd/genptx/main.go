// Command genptx regenerates the prebuilt PTX in shaders/ptx from the kernel sources in
// shaders/, with NVRTC (no GPU needed, no nvcc needed). It is what the Makefile's `ptx` target
// runs; the CUDA backend falls back to these files on machines without NVRTC, and
// `go test ./shaders/` fails when they are stale.
//
// Usage (from the repository root):
//
//	go run ./internal/gpu/cmd/genptx [-dir shaders] [-target compute_75] [-check]
//
// -check only reports which files are stale and exits 1 if any is.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/cuda"
	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
)

// defaultTarget is the oldest architecture CUDA 13 still supports (Turing): the driver
// JIT-compiles compute_75 PTX for any newer GPU, so one file serves every supported card.
const defaultTarget = "compute_75"

// cudaPrelude is the file that a unit's backend-neutral prelude include maps to for CUDA: the
// prebuilt PTX records the hash of the source as the CUDA backend reads it (gpu.SourceFor).
var cudaPrelude, _ = gpu.Prelude(gpu.KindCUDA)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("genptx", flag.ContinueOnError)
	fl.SetOutput(stderr)
	dir := fl.String("dir", "shaders", "kernel source directory (PTX goes to DIR/ptx)")
	target := fl.String("target", defaultTarget, "virtual architecture to compile for")
	check := fl.Bool("check", false, "only report stale or missing PTX; exit 1 if any")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	srcFS := os.DirFS(*dir)
	ptxDir := filepath.Join(*dir, "ptx")
	units, err := fs.Glob(srcFS, "*.cu")
	if err != nil || len(units) == 0 {
		fmt.Fprintf(stderr, "genptx: no *.cu files in %s (%v)\n", *dir, err)
		return 1
	}
	stale := 0
	for _, name := range units {
		src, err := driver.SourceFromFSFor(srcFS, name, cudaPrelude)
		if err != nil {
			fmt.Fprintf(stderr, "genptx: %v\n", err)
			return 1
		}
		_, _, perr := driver.LoadPrebuilt(os.DirFS(ptxDir), src)
		if *check {
			if perr != nil {
				stale++
				fmt.Fprintf(stdout, "stale   %s: %v\n", name, perr)
			} else {
				fmt.Fprintf(stdout, "ok      %s\n", name)
			}
			continue
		}
		ptx, compiler, err := cuda.GeneratePTX(src, *target)
		if err != nil {
			fmt.Fprintf(stderr, "genptx: %s: %v\n", name, err)
			return 1
		}
		out := driver.FormatPrebuilt(driver.PrebuiltHeader{
			Source: src.Name, SourceHash: src.Hash(), Target: *target, Compiler: compiler,
		}, stableFileNames(ptx))
		path := filepath.Join(ptxDir, driver.PrebuiltName(name))
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, out) {
			fmt.Fprintf(stdout, "same    %s\n", path)
			continue
		}
		if err := writeAtomic(path, out); err != nil {
			fmt.Fprintf(stderr, "genptx: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote   %s (%s, %s, %d bytes)\n", path, *target, compiler, len(out))
	}
	if stale > 0 {
		return 1
	}
	return 0
}

// fileDirective matches a PTX .file directive's path up to its last slash.
var fileDirective = regexp.MustCompile(`(?m)^(\s*\.file\s+\d+\s+")[^"\n]*/([^"/\n]*")`)

// stableFileNames drops the directories from the PTX's .file directives. NVRTC names a unit by
// the compiler's working directory joined with the unit's name, so the same sources gave
// different PTX on every machine or directory they were generated in; the base name is what
// the line information needs.
func stableFileNames(ptx []byte) []byte {
	return fileDirective.ReplaceAll(ptx, []byte("${1}${2}"))
}

// writeAtomic writes path through a synced temporary file, so a failed run leaves the old
// PTX rather than half a file.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, nil)
}

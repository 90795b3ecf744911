package metal

import (
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/fakemtl"
)

// goCompiler is a fakemtl.Compiler whose kernels are Go functions: a library has the kernels
// that the MSL text declares (`kernel void name(`) and this map implements. A line that uses
// `double` fails the compile with a Metal-style log that names the original file and line
// through the #line markers, as Apple's compiler does.
type goCompiler map[string]*goKernel

type goKernel struct {
	maxThreads, static int
	run                func(grid, block [3]uint32, b []fakemtl.Binding, tg []int) error
}

func (k *goKernel) MaxThreads() int             { return k.maxThreads }
func (k *goKernel) StaticThreadgroupBytes() int { return k.static }
func (k *goKernel) Dispatch(grid, block [3]uint32, b []fakemtl.Binding, tg []int) error {
	return k.run(grid, block, b, tg)
}

var (
	declRe   = regexp.MustCompile(`kernel\s+void\s+(\w+)\s*\(`)
	doubleRe = regexp.MustCompile(`\bdouble\b`)
)

type goLibrary struct {
	c     goCompiler
	decls map[string]bool
}

func (c goCompiler) Compile(msl string) (fakemtl.Library, error) {
	file, line := "program_source", 0
	var log []string
	for _, l := range strings.Split(msl, "\n") {
		line++
		if f := strings.Fields(l); len(f) == 3 && f[0] == "#line" {
			n, _ := strconv.Atoi(f[1])
			file, line = strings.Trim(f[2], `"`), n-1
			continue
		}
		if loc := doubleRe.FindStringIndex(l); loc != nil {
			log = append(log, fmt.Sprintf("%s:%d:%d: error: 'double' is not supported in Metal", file, line, loc[0]+1))
		}
	}
	if len(log) > 0 {
		return nil, fmt.Errorf("%s\n%d error(s) generated.", strings.Join(log, "\n"), len(log))
	}
	lib := &goLibrary{c: c, decls: map[string]bool{}}
	for _, m := range declRe.FindAllStringSubmatch(msl, -1) {
		lib.decls[m[1]] = true
	}
	return lib, nil
}

func (l *goLibrary) Function(name string) (fakemtl.Function, error) {
	k := l.c[name]
	if k == nil || !l.decls[name] {
		return nil, fmt.Errorf("no function %q in the library", name)
	}
	return k, nil
}

// slot finds binding index i.
func slot(b []fakemtl.Binding, i int) ([]byte, error) {
	for _, x := range b {
		if x.Index == i {
			return x.Data, nil
		}
	}
	return nil, fmt.Errorf("buffer(%d) not bound", i)
}

func f32(b []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }
func putF32(b []byte, i int, v float32) {
	binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
}

// testKernels: scale multiplies n floats of buffer(0) by the inline float buffer(1);
// blocksum writes each threadgroup's sum of buffer(0) to buffer(1) through threadgroup
// memory of one float per thread; fault fails its command buffer.
func testKernels() goCompiler {
	return goCompiler{
		"scale": {maxThreads: 1024, run: func(grid, block [3]uint32, b []fakemtl.Binding, _ []int) error {
			data, err := slot(b, 0)
			if err != nil {
				return err
			}
			k, err := slot(b, 1)
			if err != nil {
				return err
			}
			nb, err := slot(b, 2)
			if err != nil {
				return err
			}
			n := int(binary.LittleEndian.Uint32(nb))
			for i := 0; i < int(grid[0]*block[0]) && i < n; i++ {
				putF32(data, i, f32(data, i)*f32(k, 0))
			}
			return nil
		}},
		"blocksum": {maxThreads: 256, static: 16, run: func(grid, block [3]uint32, b []fakemtl.Binding, tg []int) error {
			if len(tg) == 0 || tg[0] < 4*int(block[0]) {
				return fmt.Errorf("threadgroup(0) has %v bytes, needs %d", tg, 4*block[0])
			}
			in, err := slot(b, 0)
			if err != nil {
				return err
			}
			out, err := slot(b, 1)
			if err != nil {
				return err
			}
			for g := 0; g < int(grid[0]); g++ {
				var s float32
				for t := 0; t < int(block[0]); t++ {
					s += f32(in, g*int(block[0])+t)
				}
				putF32(out, g, s)
			}
			return nil
		}},
		"fault": {maxThreads: 64, run: func(_, _ [3]uint32, _ []fakemtl.Binding, _ []int) error {
			return fmt.Errorf("out-of-bounds write at 0xdead")
		}},
		"wide":  {maxThreads: 1024, run: func(_, _ [3]uint32, _ []fakemtl.Binding, _ []int) error { return nil }},
		"heavy": {maxThreads: 1024, static: 40 << 10, run: func(_, _ [3]uint32, _ []fakemtl.Binding, _ []int) error { return nil }},
	}
}

// testSource declares the test kernels in MSL as a kernel unit would.
const testSource = `#include "prelude.h"
kernel void scale(device float *x [[buffer(0)]], constant float &k [[buffer(1)]], constant uint &n [[buffer(2)]]) {}
kernel void blocksum(device const float *x [[buffer(0)]], device float *s [[buffer(1)]], threadgroup float *t [[threadgroup(0)]]) {}
kernel void fault() {}
kernel void wide() {}
kernel void heavy() {}
`

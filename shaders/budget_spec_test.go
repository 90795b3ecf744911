package shaders_test

import (
	"io/fs"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi"
	"github.com/rlxsplat/rlxsplat/shaders"
)

// TestSpecSharedMatchesPTX holds the declaration's block-shared bytes of every wrapped kernel
// (internal/fused/abi/spec, the figure Metal's budget is checked against before any compiler
// runs) to what NVRTC allocates: at least as much (a variable the declaration leaves out, or a
// struct whose declared size is too small, shows up here) and at most the padding that
// aligning each variable can add.
func TestSpecSharedMatchesPTX(t *testing.T) {
	ptx := map[string]int{}
	files, err := fs.Glob(shaders.PTX(), "*.ptx")
	if err != nil || len(files) == 0 {
		t.Fatalf("no prebuilt PTX (%v)", err)
	}
	for _, f := range files {
		b, err := fs.ReadFile(shaders.PTX(), f)
		if err != nil {
			t.Fatal(err)
		}
		static, _, err := shaders.PTXSharedBytes(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for k, n := range static {
			ptx[k] = n
		}
	}
	const slack = 64 // alignment padding between a kernel's few shared variables
	checked := 0
	for _, k := range abi.Kernels {
		got, ok := ptx[k.Name]
		if !ok {
			t.Errorf("%s (%s): no entry point in the PTX", k.Name, k.Unit)
			continue
		}
		checked++
		if got < k.SharedBytes || got > k.SharedBytes+slack {
			t.Errorf("%s (%s): the declaration gives %d bytes of shared memory, the PTX %d", k.Name, k.Unit, k.SharedBytes, got)
		} else if testing.Verbose() {
			t.Logf("%s: declared %d, PTX %d", k.Name, k.SharedBytes, got)
		}
	}
	if checked == 0 {
		t.Fatal("no wrapped kernel checked")
	}
}

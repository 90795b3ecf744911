package shaders

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

const regen = "regenerate on a machine with NVRTC: go run ./internal/gpu/cmd/genptx (make ptx)"

// TestPTXUpToDate fails when an embedded PTX file was built from a different source than the
// embedded one (or is missing), so the no-NVRTC fallback can never run stale kernels.
func TestPTXUpToDate(t *testing.T) {
	units, err := CUDAUnits()
	if err != nil {
		t.Fatal(err)
	}
	if len(units) == 0 {
		t.Fatal("no *.cu kernel sources embedded")
	}
	for _, name := range units {
		// As the CUDA backend reads it (gpu.SourceFor): the prelude include maps to CUDA's.
		src, err := driver.SourceFromFSFor(Sources(), name, "prelude_cuda.h")
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		_, hdr, err := driver.LoadPrebuilt(PTX(), src)
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, regen)
			continue
		}
		if !strings.HasPrefix(hdr.Target, "compute_") {
			t.Errorf("%s: prebuilt target %q is not a virtual architecture (compute_XX), so newer GPUs could not JIT it", name, hdr.Target)
		}
		// The check must be live: the same PTX against a changed source is refused.
		changed := src
		changed.Code += "\nstatic int changed;\n"
		if _, _, err := driver.LoadPrebuilt(PTX(), changed); !errors.Is(err, driver.ErrStalePrebuilt) {
			t.Errorf("%s: a changed source is not reported as stale (err = %v)", name, err)
		}
	}
}

// TestNoOrphanPTX fails when a PTX file has no source any more.
func TestNoOrphanPTX(t *testing.T) {
	ptx, err := fs.Glob(PTX(), "*.ptx")
	if err != nil {
		t.Fatal(err)
	}
	units, _ := CUDAUnits()
	have := map[string]bool{}
	for _, u := range units {
		have[driver.PrebuiltName(u)] = true
	}
	for _, p := range ptx {
		if !have[p] {
			t.Errorf("ptx/%s has no source %s; delete it", p, strings.TrimSuffix(p, ".ptx")+".cu")
		}
	}
}

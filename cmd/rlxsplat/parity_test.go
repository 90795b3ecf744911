package main

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// The GPU comparison's flags are checked before any work, and --device cpu skips it in one line.
func TestParityGPUFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"parity", "--device", "tpu"}, "--device"},
		{[]string{"parity", "--downscale", "0"}, "--downscale"},
		{[]string{"parity", "--max-splats", "0"}, "--max-splats"},
	} {
		s, _, errb := testStreams()
		if code := run(c.args, s); code != exitUsage || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d mentioning %q", c.args, code, errb.String(), exitUsage, c.want)
		}
	}
	s, out, _ := testStreams()
	if _, _, err := gpuParity(&parityOptions{device: "cpu"}, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "skipped (--device cpu)") {
		t.Errorf("--device cpu: %q", out.String())
	}
}

// The GPU table counts failures and marks what a row does not measure.
func TestParityCompareTable(t *testing.T) {
	var b bytes.Buffer
	rows := []fused.CompareRow{
		{Name: "image", MaxAbs: 1e-7, RelErr: 2e-7, Cosine: math.NaN(), Tol: fused.TolImage, Pass: true},
		{Name: "tile lists", MaxAbs: math.NaN(), RelErr: math.NaN(), Cosine: math.NaN(), Pass: false, Note: "1 of 9 entries differ"},
		{Name: "params vs cpu step", MaxAbs: 1e-4, RelErr: 1e-5, Cosine: math.NaN(), Tol: math.Inf(1), Pass: true},
	}
	if f := printCompareRows(&b, []string{"a", "a", "a"}, rows); f != 1 {
		t.Errorf("%d failures, want 1", f)
	}
	for _, want := range []string{"FAIL", "exact", "report", "1e-05", "1 of 9 entries differ"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// The dataset view of --data: a capped, anisotropic set of the duck's initial splats.
func TestParityDatasetScene(t *testing.T) {
	dir := sharedtest.Path(t, "data", "duck")
	sc, err := datasetScene(&parityOptions{data: dir, downscale: 8, maxSplats: 500})
	if err != nil {
		t.Fatal(err)
	}
	if n := sc.g.Len(); n == 0 || n > 500 {
		t.Errorf("%d splats, want 1..500", n)
	}
	if err := sc.g.Validate(); err != nil {
		t.Error(err)
	}
	c := sc.v.Camera
	if len(sc.v.Target) != c.Width*c.Height*3 {
		t.Errorf("target of %d floats for a %d×%d view", len(sc.v.Target), c.Width, c.Height)
	}
}

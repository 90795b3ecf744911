//go:build linux || darwin

package fused

import (
	"path/filepath"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/fakemtl"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mslhost"
)

// metalHostDevice opens the Metal backend over a fake Metal runtime whose compiler builds the
// MSL for the host, or skips without a C++ compiler.
func metalHostDevice(t testing.TB) gpu.Device {
	t.Helper()
	c, err := mslhost.New(filepath.Join(emuCacheDir(), "msl"))
	if err != nil {
		t.Skip("no host build of MSL: " + err.Error())
	}
	d, err := metal.New(fakemtl.New(fakemtl.Options{Compiler: c}), gpu.Options{})
	if err != nil {
		t.Fatalf("opening the Metal backend on the fake runtime: %v", err)
	}
	in := d.Info()
	t.Logf("device: %s %s (%s), compiler: %s", in.Backend, in.Name, in.Arch, in.Compiler)
	t.Cleanup(func() { d.Close() })
	return d
}

//go:build !linux && !darwin

package fused

import (
	"runtime"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// metalHostDevice: the host build of MSL loads its libraries with purego's Dlopen, which this
// platform lacks.
func metalHostDevice(t testing.TB) gpu.Device {
	t.Helper()
	t.Skip("the host build of MSL needs Linux or macOS, not " + runtime.GOOS)
	return nil
}

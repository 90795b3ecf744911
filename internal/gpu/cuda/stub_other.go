//go:build !linux

package cuda

import (
	"fmt"
	"runtime"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// Device is never created on this OS; the type exists so that callers compile everywhere.
type Device struct{ driver.Device }

// Open reports that the CUDA backend is not available on this operating system.
func Open(opts driver.Options) (*Device, error) {
	return nil, fmt.Errorf("cuda: the CUDA backend is not available on %s: %w", runtime.GOOS, driver.ErrNoDevice)
}

// GeneratePTX needs NVRTC, which this backend loads only on Linux.
func GeneratePTX(src driver.Source, target string) (ptx []byte, compiler string, err error) {
	return nil, "", fmt.Errorf("cuda: NVRTC is not loaded on %s: %w", runtime.GOOS, driver.ErrNoCompiler)
}

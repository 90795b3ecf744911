//go:build !linux && !darwin

package metal

import (
	"fmt"
	"runtime"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// OpenHost reports that the host build of MSL loads its libraries with dlopen, which this
// platform lacks.
func OpenHost(driver.Options) (*Device, error) {
	return nil, fmt.Errorf("metal-emu: the simulated Metal device runs on Linux and macOS only, not %s: %w", runtime.GOOS, driver.ErrNoDevice)
}

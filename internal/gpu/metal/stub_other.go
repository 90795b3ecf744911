//go:build !darwin

package metal

import (
	"fmt"
	"runtime"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// Device is never created on this OS; the type exists so that callers compile everywhere.
type Device struct{ driver.Device }

// Open reports that Metal exists only on Apple systems.
func Open(opts driver.Options) (*Device, error) {
	return nil, fmt.Errorf("metal: Metal is only available on macOS, not %s: %w", runtime.GOOS, driver.ErrNoDevice)
}

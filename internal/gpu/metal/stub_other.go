//go:build !darwin

package metal

import (
	"fmt"
	"runtime"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// Open reports that Metal exists only on Apple systems. (New runs the backend over any
// mtl.Runtime, such as internal/gpu/metal/fakemtl's, on every OS.)
func Open(opts driver.Options) (*Device, error) {
	return nil, fmt.Errorf("metal: Metal is only available on macOS, not %s: %w", runtime.GOOS, driver.ErrNoDevice)
}

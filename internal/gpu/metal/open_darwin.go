//go:build darwin

package metal

import (
	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mtl"
)

// Open opens the system default Metal device through Metal.framework.
func Open(opts driver.Options) (*Device, error) {
	rt, err := mtl.System()
	if err != nil {
		return nil, err
	}
	return New(rt, opts)
}

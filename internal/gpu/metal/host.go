//go:build linux || darwin

package metal

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/fakemtl"
	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mslhost"
)

// HostName is the device name of OpenHost's simulated GPU.
const HostName = "simulated Apple GPU (MSL built for the host)"

// OpenHost opens this backend on a simulated Metal device: the backend's own host code
// (buffers, encoding, command buffers, limits, readouts) drives fakemtl's runtime, whose
// compiler builds the exact MSL text for the host (mslhost) and runs its kernels on the
// emulator's fibers. It is a checking device, like the emulator (slow, exact): `--device
// metal-emu` shows on any Linux or macOS machine that the Metal path computes what the CPU
// engine computes. It needs a C++ compiler; without one the error wraps driver.ErrNoDevice.
// Compiled libraries are kept in o.CacheDir's "metal-emu" ("" = the default kernel cache).
func OpenHost(o driver.Options) (*Device, error) {
	var dir string
	switch o.CacheDir {
	case driver.CacheOff:
		tmp, err := os.MkdirTemp("", "rlxsplat-metal-emu-")
		if err != nil {
			return nil, fmt.Errorf("metal-emu: a directory for the compiled kernels: %w", err)
		}
		dir = tmp
	case "":
		base, err := driver.DefaultCacheDir()
		if err != nil {
			return nil, fmt.Errorf("metal-emu: no cache directory for the compiled kernels (set RLXSPLAT_KERNEL_CACHE): %w", err)
		}
		dir = filepath.Join(base, "metal-emu")
	default:
		dir = filepath.Join(o.CacheDir, "metal-emu")
	}
	c, err := mslhost.New(dir)
	if err != nil {
		return nil, fmt.Errorf("metal-emu: %w: %w", err, driver.ErrNoDevice)
	}
	return New(fakemtl.New(fakemtl.Options{Name: HostName, Compiler: c}), o)
}

//go:build !linux && !darwin

package emu

import (
	"fmt"
	"runtime"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// Prelude: see emu.go.
const Prelude = "prelude_emu.h"

// Config: see emu.go.
type Config struct {
	CacheDir           string
	NoGraphs, NoEvents bool
}

// Device exists on Linux and macOS only.
type Device struct{ driver.Device }

// Open reports that the emulator needs mmap guard pages, ucontext and dlopen.
func Open(driver.Options) (*Device, error) { return New(Config{}) }

// New reports that the emulator is not built on this OS.
func New(Config) (*Device, error) {
	return nil, fmt.Errorf("emu: the host emulator runs on Linux and macOS only, not %s: %w", runtime.GOOS, driver.ErrNoDevice)
}

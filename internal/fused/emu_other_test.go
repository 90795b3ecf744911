//go:build !linux && !darwin

package fused

import (
	"errors"
	"os"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// The host emulator needs mmap with guard pages and g++; it is not built on this OS.
type emuDevice struct{ gpu.Device }

func newEmuDevice(string) (*emuDevice, error) {
	return nil, errors.New("emu: the kernel emulator runs on Linux and macOS only")
}

func emuCacheDir() string { return os.TempDir() }

//go:build !linux

package nccl

import (
	"fmt"
	"runtime"
)

// errLinuxOnly is what every entry point returns here: NVIDIA ships NCCL for Linux only.
var errLinuxOnly = fmt.Errorf("nccl: NCCL is Linux-only (this is %s/%s): %w", runtime.GOOS, runtime.GOARCH, ErrUnavailable)

// Lib is never created on this OS; the type exists so that callers compile everywhere.
type Lib struct{}

// Open reports that NCCL is not available on this operating system.
func Open(getenv func(string) string) (*Lib, error) { return nil, errLinuxOnly }

func (l *Lib) Path() string                                              { return "" }
func (l *Lib) Version() int                                              { return 0 }
func (l *Lib) InitAll(devices []int) ([]*Comm, error)                    { return nil, errLinuxOnly }
func (l *Lib) UniqueID() (UniqueID, error)                               { return UniqueID{}, errLinuxOnly }
func (l *Lib) InitRank(nranks int, id UniqueID, rank int) (*Comm, error) { return nil, errLinuxOnly }
func (l *Lib) Group(fn func() error) error                               { return errLinuxOnly }

// Comm is never created on this OS.
type Comm struct{}

func (c *Comm) Rank() int   { return 0 }
func (c *Comm) Size() int   { return 0 }
func (c *Comm) Device() int { return -1 }
func (c *Comm) AllReduce(send, recv uintptr, count int, dt DataType, op Op, stream uintptr) error {
	return errLinuxOnly
}
func (c *Comm) Broadcast(send, recv uintptr, count int, dt DataType, root int, stream uintptr) error {
	return errLinuxOnly
}
func (c *Comm) Send(send uintptr, count int, dt DataType, peer int, stream uintptr) error {
	return errLinuxOnly
}
func (c *Comm) Recv(recv uintptr, count int, dt DataType, peer int, stream uintptr) error {
	return errLinuxOnly
}
func (c *Comm) Close() error { return nil }
func (c *Comm) Abort() error { return nil }

package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startProfile starts a Go CPU profile into path and returns its stop function (train's and
// bench's --cpuprofile).
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

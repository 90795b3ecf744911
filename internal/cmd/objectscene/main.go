// Command objectscene writes the demo's object scene as a NeRF-synthetic capture (RGBA views
// over nothing, transforms_train.json and transforms_test.json, no points), the kind of scene
// on which an object's test PSNR is judged:
//
//	go run ./internal/cmd/objectscene -out /tmp/object -size 400 -views 96
//	rlxsplat train --data /tmp/object
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/rlxsplat/rlxsplat/internal/demo"
)

func main() {
	out := flag.String("out", "", "directory to write (required)")
	size := flag.Int("size", 400, "width and height of each view in pixels")
	views := flag.Int("views", 96, "number of views")
	testEvery := flag.Int("test-every", 8, "every Nth view goes to transforms_test.json")
	seed := flag.Uint64("seed", 1, "scene seed")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: objectscene -out DIR [-size N] [-views N] [-test-every N] [-seed N]")
		os.Exit(2)
	}
	ds, err := demo.Object(demo.Options{Views: *views, Width: *size, Height: *size, TestEvery: *testEvery,
		Seed: *seed, Workers: runtime.NumCPU()})
	if err == nil {
		err = demo.WriteNeRF(*out, ds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "objectscene:", err)
		os.Exit(1)
	}
	fmt.Printf("objectscene: %d training and %d test views of %d×%d px in %s\n", len(ds.Train), len(ds.Test), *size, *size, *out)
}

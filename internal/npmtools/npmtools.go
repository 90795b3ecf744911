// Package npmtools finds and runs the npm tools that the interop tests and the scene fuzzer's
// seeds use: PlayCanvas' splat-transform and Khronos' glTF validator, which .ci/run installs
// into .tools/npm at the repository root. It is for tests: nothing in the binary uses it.
package npmtools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Dir is where .ci/run installs the tools, from the repository root.
const Dir = ".tools/npm"

// SplatTransformCLI is splat-transform's entry point under node_modules.
const SplatTransformCLI = "@playcanvas/splat-transform/bin/cli.mjs"

// ErrAbsent is returned (wrapped, with what is missing) when node or a package is not installed.
var ErrAbsent = errors.New("npm tool absent")

// RepoRoot is the nearest directory at or above the working directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("npmtools: no go.mod above %s", dir)
		}
		dir = up
	}
}

// Find returns node and the path of an installed package's file (rel, under node_modules).
func Find(rel string) (node, path string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("%w: node is not on PATH (the npm tools need it)", ErrAbsent)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(root, Dir, "node_modules", rel)
	if _, err := os.Stat(path); err != nil {
		return "", "", fmt.Errorf("%w: %s is absent: run npm install --prefix %s @playcanvas/splat-transform gltf-validator (.ci/run does)", ErrAbsent, path, Dir)
	}
	return node, path, nil
}

// SplatTransform converts in to out with splat-transform, the formats told by the names as
// its command line tells them.
func SplatTransform(in, out string) error {
	node, cli, err := Find(SplatTransformCLI)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if b, err := exec.CommandContext(ctx, node, cli, "-w", in, out).CombinedOutput(); err != nil {
		return fmt.Errorf("splat-transform %s %s: %v\n%s", in, out, err, b)
	}
	return nil
}

package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// npmDir is where .ci/run installs the npm tools, from the repository root.
const npmDir = ".tools/npm"

// repoRoot is the directory holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = up
	}
}

// tool returns node and the path of an installed npm package's file, or
// skips t saying what is missing.
func tool(t *testing.T, rel string) (node, path string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the interop tests run the npm tools (.ci/run installs them)")
	}
	path = filepath.Join(repoRoot(t), npmDir, "node_modules", rel)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is absent: run npm install --prefix %s @playcanvas/splat-transform gltf-validator (.ci/run does)", path, npmDir)
	}
	return node, path
}

// splatTransform converts in to out with splat-transform (format from the
// names, as its command line does).
func splatTransform(t *testing.T, in, out string) {
	t.Helper()
	node, cli := tool(t, "@playcanvas/splat-transform/bin/cli.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, node, cli, "-w", in, out).CombinedOutput()
	if err != nil {
		t.Fatalf("splat-transform %s %s: %v\n%s", in, out, err, b)
	}
}

// sourceScene is the real trained scene the tests start from: the shared
// train-1000 fixture, or the scene file RLXSPLAT_INTEROP_SCENE names (to
// run the same checks on a scene of one's own, a trained duck say).
func sourceScene(t *testing.T) string {
	if p := os.Getenv("RLXSPLAT_INTEROP_SCENE"); p != "" {
		return p
	}
	return sharedtest.Path(t, "fixtures/ply/train-1000.ply")
}

package interop

import (
	"errors"
	"os"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/npmtools"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// tool returns node and the path of an installed npm package's file, or
// skips t saying what is missing.
func tool(t *testing.T, rel string) (node, path string) {
	t.Helper()
	node, path, err := npmtools.Find(rel)
	if errors.Is(err, npmtools.ErrAbsent) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return node, path
}

// splatTransform converts in to out with splat-transform (format from the
// names, as its command line does).
func splatTransform(t *testing.T, in, out string) {
	t.Helper()
	tool(t, npmtools.SplatTransformCLI)
	if err := npmtools.SplatTransform(in, out); err != nil {
		t.Fatal(err)
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

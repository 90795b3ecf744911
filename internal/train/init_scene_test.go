package train

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/spz"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Init mode "scene" starts from the splats of a scene file as read, and a
// missing file is an error naming it.
func TestInitialFromScene(t *testing.T) {
	g := splat.New(4)
	for i := 0; i < 4; i++ {
		g.Means[3*i] = float32(i)
		g.Quats[4*i] = 1
		g.LogScales[3*i+2] = -2
	}
	path := filepath.Join(t.TempDir(), "start.spz")
	if err := spz.WriteFile(path, g, spz.Options{}); err != nil {
		t.Fatal(err)
	}
	opt := Options{InitMode: "scene", InitScene: path}
	got, notice, err := Initial(opt, &dataset.Dataset{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Len() != 4 || !slices.Equal(got.Means, g.Means) || !strings.Contains(notice, "4 splats of "+path+" (spz") {
		t.Fatalf("%d splats, means %v, notice %q", got.Len(), got.Means, notice)
	}
	opt.InitScene = filepath.Join(t.TempDir(), "missing.ply")
	if _, _, err := Initial(opt, &dataset.Dataset{}); err == nil || !strings.Contains(err.Error(), "init.scene") || !strings.Contains(err.Error(), "missing.ply") {
		t.Fatalf("missing file: %v", err)
	}
}

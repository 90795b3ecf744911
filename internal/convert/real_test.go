package convert

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
)

// The real run: realPhotos consecutive bonsai photos (each a few degrees
// around the scene from the last), shrunk realShrink times, through the
// installed COLMAP with CPU SIFT. The shrinking keeps it short: exhaustive
// CPU matching of 16 full-size (800×533) photos alone took 140 s on two cores.
const (
	realPhotos    = 12
	realShrink    = 2
	realMinRegged = 10 // "most": COLMAP 3.8 registered all 12 in each run here (and 14, then 16, of the first 16 at full size)
)

func TestRunRealColmap(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real COLMAP run takes a minute or more")
	}
	exe, err := exec.LookPath("colmap")
	if err != nil {
		t.Skip("colmap is not installed (apt install colmap): the real conversion is not tested")
	}
	src := sharedtest.Path(t, "data/bonsai/input")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if isPhoto(e.Name()) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	if len(names) < realPhotos {
		t.Fatalf("%s holds %d photos, want at least %d", src, len(names), realPhotos)
	}
	photos := filepath.Join(t.TempDir(), "photos")
	if err := os.MkdirAll(photos, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names[:realPhotos] {
		img, err := imageio.Load(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		small, err := imageio.Resize(img, img.W/realShrink, img.H/realShrink)
		if err != nil {
			t.Fatal(err)
		}
		if err := encode(filepath.Join(photos, n), small); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "capture")
	o := DefaultOptions()
	o.Photos, o.Out, o.Colmap = photos, out, exe
	start := time.Now()
	stageStart := map[string]time.Time{}
	res, err := Run(context.Background(), o, func(e Event) {
		switch e := e.(type) {
		case StageStarted:
			stageStart[e.Stage] = time.Now()
		case StageDone:
			t.Logf("%s: %.1fs %s", e.Stage, e.Elapsed.Seconds(), e.Summary)
		case Notice:
			t.Log(e.Text)
		}
	})
	if err != nil {
		if b, rerr := os.ReadFile(filepath.Join(out, "colmap.log")); rerr == nil {
			t.Logf("colmap.log:\n%s", tailString(string(b), 40))
		}
		t.Fatal(err)
	}
	t.Logf("%d of %d photos registered, %d points, %d×%d px, in %.1fs",
		res.Registered, res.Photos, res.Points, res.Width, res.Height, time.Since(start).Seconds())
	if res.Registered < realMinRegged {
		t.Errorf("%d of %d photos registered, want at least %d", res.Registered, res.Photos, realMinRegged)
	}
	if res.Points < 100 {
		t.Errorf("%d points", res.Points)
	}
	ds, err := dataset.Load(out, dataset.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ds.Train) + len(ds.Test); n != res.Registered || len(ds.Test) == 0 || len(ds.Points) != 3*res.Points {
		t.Errorf("loaded %d train + %d test views and %d points; want %d views and %d points",
			len(ds.Train), len(ds.Test), len(ds.Points)/3, res.Registered, res.Points)
	}
	opt := dataset.DefaultOptions()
	opt.Downscale = 2
	if _, err := dataset.Load(out, opt); err != nil {
		t.Errorf("images_2: %v", err)
	}
}

func tailString(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

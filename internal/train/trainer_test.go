package train

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/demo"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// smallDemo is a demo scene small enough for unit tests.
func smallDemo(t *testing.T) *dataset.Dataset {
	t.Helper()
	ds, err := demo.Generate(demo.Options{Views: 10, Width: 48, Height: 36, TestEvery: 5, Seed: 3, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// testOptions densify, reset opacity and split within a few dozen steps so
// that resume is tested across every kind of state change.
func testOptions(out string) Options {
	return Options{
		Iterations: 60, Seed: 9, SHDegree: 3, SHInterval: 10,
		MeansLR: 1.6e-4, MeansLRFinal: 1.6e-6, ScalesLR: 5e-3, QuatsLR: 1e-3, OpacityLR: 5e-2, SHDCLR: 2.5e-3, SHRestLR: 1.25e-4,
		Densify: DensifyOptions{Enabled: true, From: 5, Until: 50, Every: 5, GradThreshold: 2e-5, PercentDense: 0.01,
			SplitN: 2, PruneOpacity: 0.005, ResetEvery: 20, OpacityReset: true, MaxScreenSize: 20, MaxWorldScale: 0.1},
		InitMode: "sfm", InitRandomCount: 500, InitOpacity: 0.1, InitRandomScale: 0.3,
		EvalSteps: []int{30}, LogEvery: 5, PreviewEvery: 30, CheckpointEvery: 25, KeepCheckpoints: 0,
		OutDir: out, ConfigYAML: []byte("test: true\n"), Workers: 2,
	}
}

func newTrainer(t *testing.T, ds *dataset.Dataset, opt Options) *Trainer {
	t.Helper()
	g, _, err := Initial(opt, ds)
	if err != nil {
		t.Fatal(err)
	}
	set := engine.DefaultSettings()
	set.Workers = opt.Workers
	eng, err := cpu.New(set, g)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(opt, ds, eng)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func equalGaussians(t *testing.T, a, b *splat.Gaussians) {
	t.Helper()
	if a.Len() != b.Len() {
		t.Fatalf("%d vs %d Gaussians", a.Len(), b.Len())
	}
	bf := b.Fields()
	for fi, f := range a.Fields() {
		for j, x := range f.Data {
			if x != bf[fi].Data[j] {
				t.Fatalf("%s[%d]: %v vs %v", f.Name, j, x, bf[fi].Data[j])
			}
		}
	}
}

// Resuming from a checkpoint reproduces the uninterrupted run's parameters
// exactly, across densification, splits and an opacity reset.
func TestResumeIsExact(t *testing.T) {
	ds := smallDemo(t)
	dirA := t.TempDir()
	a := newTrainer(t, ds, testOptions(dirA))
	if err := a.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	want, _ := a.eng.Gaussians()
	if want.Len() == smallInitLen(t, ds) {
		t.Fatalf("densification did not change the count (%d): the test does not exercise it", want.Len())
	}

	checkRefinementCounts(t, filepath.Join(dirA, "metrics.jsonl"), smallInitLen(t, ds), want.Len(), testOptions(dirA).Densify.SplitN)

	dirB := t.TempDir()
	equalGaussians(t, resumedRun(t, ds, testOptions(dirB), dirA), want)

	// The final PLY is what the engine holds.
	g, info, err := ply.ReadFile(filepath.Join(dirB, "point_cloud.ply"))
	if err != nil {
		t.Fatal(err)
	}
	if info.SHDegree != 3 {
		t.Fatalf("PLY degree %d", info.SHDegree)
	}
	equalGaussians(t, g, want)
	for _, f := range []string{"config.yaml", "metrics.jsonl", "training_curve.png", "previews/step-00030.png", "checkpoints/step-00060.ckpt"} {
		if _, err := os.Stat(filepath.Join(dirB, f)); err != nil {
			t.Errorf("missing output: %v", err)
		}
	}
}

// checkRefinementCounts follows the splat count through the refinement lines of a run's
// metrics.jsonl: each line's count is the one before, plus its clones and split children, less
// its prunes, and the last is the run's final count.
func checkRefinementCounts(t *testing.T, path string, initial, final, splitN int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, lines := initial, 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Step                                   int
			DensifyMS                              map[string]float64 `json:"densify_ms"`
			Cloned, Split, Pruned, Gaussians, Seen *int
			MeanViews                              *float64 `json:"mean_views"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if r.DensifyMS == nil {
			continue
		}
		if r.Cloned == nil || r.Split == nil || r.Pruned == nil || r.Gaussians == nil || r.Seen == nil || r.MeanViews == nil {
			t.Fatalf("refinement line without its counts: %s", l)
		}
		lines++
		if want := n + *r.Cloned + *r.Split*(splitN-1) - *r.Pruned; *r.Gaussians != want {
			t.Fatalf("step %d: %d Gaussians after %d + %d clones + %d splits - %d prunes", r.Step, *r.Gaussians, n, *r.Cloned, *r.Split, *r.Pruned)
		}
		if *r.Seen > n || (*r.Seen > 0) != (*r.MeanViews >= 1) {
			t.Fatalf("step %d: %d splats seen of %d, over %g views", r.Step, *r.Seen, n, *r.MeanViews)
		}
		n = *r.Gaussians
	}
	if lines == 0 || n != final {
		t.Fatalf("%d refinement lines end at %d Gaussians, the run at %d", lines, n, final)
	}
}

// resumedRun resumes a trainer with opt from the step-25 checkpoint of the run in dirA, runs
// it to its end and returns its Gaussians.
func resumedRun(t *testing.T, ds *dataset.Dataset, opt Options, dirA string) *splat.Gaussians {
	t.Helper()
	b := newTrainer(t, ds, opt)
	if err := b.Resume(filepath.Join(dirA, "checkpoints", "step-00025.ckpt")); err != nil {
		t.Fatal(err)
	}
	if b.Step() != 25 {
		t.Fatalf("resumed at step %d, want 25", b.Step())
	}
	if err := b.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	got, err := b.eng.Gaussians()
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func smallInitLen(t *testing.T, ds *dataset.Dataset) int {
	g, _, err := Initial(testOptions(""), ds)
	if err != nil {
		t.Fatal(err)
	}
	return g.Len()
}

// A crash in the middle of writing a checkpoint leaves the previous one
// readable: the write goes to a temporary file that is renamed last.
func TestInterruptedCheckpointKeepsThePreviousOne(t *testing.T) {
	ds := smallDemo(t)
	dir := t.TempDir()
	opt := testOptions(dir)
	opt.Iterations = 25
	a := newTrainer(t, ds, opt)
	if err := a.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "checkpoints", "step-00025.ckpt")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Simulate a kill during the next write: a half-written temporary file
	// beside the checkpoint, never renamed.
	tmp := filepath.Join(dir, "checkpoints", ".step-00025.ckpt.tmp123")
	if err := os.WriteFile(tmp, before[:len(before)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	b := newTrainer(t, ds, testOptions(t.TempDir()))
	if err := b.Resume(path); err != nil {
		t.Fatalf("previous checkpoint unreadable after an interrupted write: %v", err)
	}
	// A truncated checkpoint is refused with an error, not a panic.
	bad := filepath.Join(dir, "bad.ckpt")
	if err := os.WriteFile(bad, before[:len(before)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := newTrainer(t, ds, testOptions(t.TempDir())).Resume(bad); err == nil {
		t.Fatal("truncated checkpoint accepted")
	}
}

// Cancelling a run writes a checkpoint and says so.
func TestCancelWritesACheckpoint(t *testing.T) {
	ds := smallDemo(t)
	dir := t.TempDir()
	tr := newTrainer(t, ds, testOptions(dir))
	ctx, cancel := context.WithCancel(context.Background())
	err := tr.Run(ctx, func(e Event) {
		if p, ok := e.(Progress); ok && p.Step == 7 {
			cancel()
		}
	})
	if err == nil {
		t.Fatal("cancelled run returned no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoints", "step-00007.ckpt")); err != nil {
		t.Fatalf("no checkpoint after cancel: %v", err)
	}
}

// Training the demo scene raises the test PSNR well above its start.
func TestDemoTrainingImproves(t *testing.T) {
	ds := smallDemo(t)
	opt := testOptions(t.TempDir())
	opt.Iterations = 150
	opt.EvalSteps = []int{1}
	tr := newTrainer(t, ds, opt)
	evals := *runEvals(t, tr)
	if len(evals) != 2 {
		t.Fatalf("%d evaluations, want 2", len(evals))
	}
	if evals[1].PSNR < evals[0].PSNR+3 {
		t.Fatalf("test PSNR %.2f → %.2f dB", evals[0].PSNR, evals[1].PSNR)
	}
}

// An evaluation due at an opacity-reset step sees the step's result before the reset (as the
// original's training report does), not the reset's near-transparent splats.
func TestEvaluationPrecedesOpacityReset(t *testing.T) {
	ds := smallDemo(t)
	opt := testOptions(t.TempDir())
	opt.Iterations, opt.EvalSteps = 41, []int{40}
	opt.Densify.ResetEvery, opt.Densify.Until = 40, 50
	tr := newTrainer(t, ds, opt)
	evals := *runEvals(t, tr)
	// Step 41 is the first after the reset: one step does not bring the opacities back.
	if len(evals) != 2 || evals[0].Step != 40 || evals[1].Step != 41 {
		t.Fatalf("evaluations %+v, want steps 40 and 41", evals)
	}
	if !(evals[0].PSNR > evals[1].PSNR+1) {
		t.Fatalf("evaluation at the reset step: %.2f dB, one step after the reset %.2f dB; want the first clearly higher", evals[0].PSNR, evals[1].PSNR)
	}
}

// Without the opacity reset (gsplat 1.5.3's schedule) no step resets, on any background, and
// the evaluation after a reset_every step reads as the one before it.
func TestOpacityResetOff(t *testing.T) {
	ds := smallDemo(t)
	for _, tc := range []struct {
		name  string
		reset bool
		white bool
		due   []int
	}{
		{"on", true, false, []int{20, 40}},
		{"on, white background", true, true, []int{5, 20, 40}},
		{"off", false, false, nil},
		{"off, white background", false, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := testOptions(t.TempDir())
			opt.Densify.OpacityReset = tc.reset
			if tc.white {
				opt.Background = [3]float32{1, 1, 1}
			}
			tr := newTrainer(t, ds, opt)
			var due []int
			for s := 1; s <= opt.Iterations; s++ {
				if tr.resetDue(s) {
					due = append(due, s)
				}
			}
			if !slices.Equal(due, tc.due) {
				t.Errorf("reset at steps %v, want %v", due, tc.due)
			}
		})
	}
	opt := testOptions(t.TempDir())
	opt.Iterations, opt.EvalSteps = 41, []int{40}
	opt.Densify.ResetEvery, opt.Densify.Until, opt.Densify.OpacityReset = 40, 50, false
	evals := *runEvals(t, newTrainer(t, ds, opt))
	if len(evals) != 2 || math.Abs(evals[0].PSNR-evals[1].PSNR) > 1 {
		t.Fatalf("evaluations %+v at steps 40 and 41 without the reset: want them within 1 dB", evals)
	}
}

// The last step is neither densified nor reset, even where the schedule says so: the scene a
// run writes is the one its final evaluation measured.
func TestLastStepWritesWhatWasEvaluated(t *testing.T) {
	ds := smallDemo(t)
	opt := testOptions(t.TempDir())
	opt.Iterations, opt.EvalSteps = 40, nil
	opt.Densify.ResetEvery, opt.Densify.Every, opt.Densify.Until = 40, 5, 50 // both due at step 40
	tr := newTrainer(t, ds, opt)
	evals := runEvals(t, tr)
	if err := tr.evaluate(opt.Iterations); err != nil {
		t.Fatal(err)
	}
	if got := *evals; len(got) != 2 || got[0].PSNR != got[1].PSNR || got[0].Gaussians != got[1].Gaussians {
		t.Fatalf("evaluations in the run and of the state it ended in: %+v; want the same", got)
	}
	g, _, err := ply.ReadFile(filepath.Join(opt.OutDir, "point_cloud.ply"))
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != (*evals)[0].Gaussians {
		t.Fatalf("point_cloud.ply holds %d splats, the final evaluation %d", g.Len(), (*evals)[0].Gaussians)
	}
}

// runEvals runs tr to the end and returns where its evaluations are collected; evaluations
// made after Run returns are appended there too (the trainer keeps its event sink).
func runEvals(t *testing.T, tr *Trainer) *[]Evaluated {
	t.Helper()
	evals := new([]Evaluated)
	if err := tr.Run(context.Background(), func(e Event) {
		if ev, ok := e.(Evaluated); ok {
			*evals = append(*evals, ev)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return evals
}

// With SaveEvalRenders each evaluation writes one PNG per test view, named after the view, and
// the photos once; the metric reported is the standard SSIM, not the zero-padded one.
func TestSaveEvalRenders(t *testing.T) {
	ds := smallDemo(t)
	opt := testOptions(t.TempDir())
	opt.Iterations, opt.EvalSteps, opt.SaveEvalRenders = 12, []int{6}, true
	opt.Densify.Enabled = false
	tr := newTrainer(t, ds, opt)
	evals := *runEvals(t, tr)
	if len(evals) != 2 {
		t.Fatalf("%d evaluations, want 2", len(evals))
	}
	for _, e := range evals {
		dir := filepath.Join(opt.OutDir, "eval", fmt.Sprintf("step-%05d", e.Step))
		if e.RendersDir != dir {
			t.Errorf("step %d: RendersDir %q, want %q", e.Step, e.RendersDir, dir)
		}
		if e.SSIM == e.SSIM3DGS || !(e.SSIM > 0 && e.SSIM <= 1) {
			t.Errorf("step %d: SSIM %v, 3DGS SSIM %v: want the standard metric, which differs", e.Step, e.SSIM, e.SSIM3DGS)
		}
	}
	for _, sub := range []string{"step-00006", "step-00012", "photos"} {
		for _, v := range ds.Test {
			name := strings.TrimSuffix(filepath.Base(v.Name), filepath.Ext(v.Name)) + ".png"
			img, err := imageio.Load(filepath.Join(opt.OutDir, "eval", sub, name))
			if err != nil {
				t.Fatalf("%s: %v", sub, err)
			}
			if img.W != v.Camera.Width || img.H != v.Camera.Height {
				t.Fatalf("%s/%s: %d×%d, want the view's %d×%d", sub, name, img.W, img.H, v.Camera.Width, v.Camera.Height)
			}
		}
	}
}

// Every file of a run names the run, and a resumed run keeps the name of the one it continues.
func TestRunIDInEveryFile(t *testing.T) {
	ds := smallDemo(t)
	dirA := t.TempDir()
	optA := testOptions(dirA)
	optA.Iterations = 30
	a := newTrainer(t, ds, optA)
	if err := a.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	id := a.RunID()
	if !regexp.MustCompile(`^\d{8}T\d{6}Z-[0-9a-f]{6}$`).MatchString(id) {
		t.Fatalf("run ID %q", id)
	}
	if other := NewRunID(time.Now()); other == id {
		t.Errorf("two run IDs are both %q", id)
	}
	checkRunFiles(t, dirA, id, "step-00025.ckpt", `"started"`)

	dirB := t.TempDir()
	optB := testOptions(dirB)
	optB.RunID = "20000101T000000Z-000000" // what a caller that did not read the checkpoint would pass
	b := newTrainer(t, ds, optB)
	if err := b.Resume(filepath.Join(dirA, "checkpoints", "step-00025.ckpt")); err != nil {
		t.Fatal(err)
	}
	if b.RunID() != id {
		t.Fatalf("resumed run ID %q, want %q", b.RunID(), id)
	}
	if err := b.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	checkRunFiles(t, dirB, id, "step-00060.ckpt", `"resumed_at_step":25`)
}

// checkRunFiles checks that config.yaml, a checkpoint, the PLY header and metrics.jsonl's first
// line in dir carry the run ID id.
func checkRunFiles(t *testing.T, dir, id, ckptName, firstLog string) {
	t.Helper()
	cfg, err := os.ReadFile(filepath.Join(dir, "config.yaml"))
	if err != nil || !strings.HasPrefix(string(cfg), "# run "+id+"\n") {
		t.Errorf("config.yaml starts %q (%v)", firstLine(cfg), err)
	}
	if got, err := CheckpointRunID(filepath.Join(dir, "checkpoints", ckptName)); err != nil || got != id {
		t.Errorf("checkpoint %s: run %q (%v), want %q", ckptName, got, err, id)
	}
	plyData, err := os.ReadFile(filepath.Join(dir, "point_cloud.ply"))
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(plyData), "end_header")
	if !strings.Contains(head, "\ncomment rlxsplat run "+id+"\n") {
		t.Errorf("PLY header lacks the run ID:\n%s", head)
	}
	m, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if l := firstLine(m); err != nil || !strings.Contains(l, `"run":"`+id+`"`) || !strings.Contains(l, firstLog) {
		t.Errorf("metrics.jsonl starts %q (%v)", l, err)
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// A run shorter than preview_every still ends with a preview, at the test view's size with
// the label and caption strips; a view wider than the cap is shrunk to it.
func TestPreviewAtEndOfEveryRun(t *testing.T) {
	ds := smallDemo(t)
	opt := testOptions(t.TempDir())
	opt.Iterations, opt.PreviewEvery, opt.CheckpointEvery, opt.Densify.Enabled = 7, 500, 0, false
	tr := newTrainer(t, ds, opt)
	if err := tr.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(opt.OutDir, "previews", "step-00007.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	c := ds.Test[0].Camera
	if wantW, wantH := 2*c.Width+4, c.Height+36; cfg.Width != wantW || cfg.Height != wantH {
		t.Errorf("preview %d×%d, want %d×%d (two %d×%d views, a gap and two text strips)", cfg.Width, cfg.Height, wantW, wantH, c.Width, c.Height)
	}
	for _, tc := range []struct{ w, h, wantW, wantH int }{{1600, 1200, 800, 600}, {801, 3, 800, 3}, {800, 10, 800, 10}, {20, 10, 20, 10}} {
		m, err := previewHalf(make([]float32, tc.w*tc.h*3), tc.w, tc.h)
		if err != nil || m.Bounds().Dx() != tc.wantW || m.Bounds().Dy() != tc.wantH {
			t.Errorf("%d×%d: %v (%v), want %d×%d", tc.w, tc.h, m.Bounds(), err, tc.wantW, tc.wantH)
		}
	}
}

// Checkpoints after the first read the state into the arrays of an earlier checkpoint whose
// file is written (engine.StateReader). With a checkpoint every step, states come back to the
// trainer while later files are still being written: a state handed back before its file was
// written would put a later step's values into it, and resuming from that file would not
// reproduce the run.
func TestCheckpointsReuseStates(t *testing.T) {
	ds := smallDemo(t)
	opt := testOptions(t.TempDir())
	opt.Iterations, opt.CheckpointEvery, opt.EvalSteps, opt.PreviewEvery = 12, 1, nil, 0
	opt.Densify.From, opt.Densify.Every = 2, 3
	a := newTrainer(t, ds, opt)
	// Each file takes longer to write than a step takes to run, so that states come back
	// while later checkpoints wait.
	a.slowWrite = func() { time.Sleep(20 * time.Millisecond) }
	if err := a.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if a.reused == 0 {
		t.Fatal("no checkpoint reused an earlier one's state: the test does not exercise the reuse")
	}
	want, err := a.eng.Gaussians()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{4, 7, 11} {
		b := newTrainer(t, ds, func() Options { o := opt; o.OutDir = t.TempDir(); return o }())
		if err := b.Resume(filepath.Join(opt.OutDir, "checkpoints", fmt.Sprintf("step-%05d.ckpt", k))); err != nil {
			t.Fatal(err)
		}
		if b.Step() != k {
			t.Fatalf("the step-%d checkpoint resumed at step %d", k, b.Step())
		}
		if err := b.Run(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		got, err := b.eng.Gaussians()
		if err != nil {
			t.Fatal(err)
		}
		equalGaussians(t, got, want)
	}
	t.Logf("%d of %d checkpoints reused a state", a.reused, opt.Iterations)
}

package viewer_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/demo"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/train"
	"github.com/rlxsplat/rlxsplat/internal/viewer"
)

// TestBrowserLiveCurve trains the demo scene with the live page open: the page's loss curve
// must grow while the run goes on, and its pause button must stop the steps.
func TestBrowserLiveCurve(t *testing.T) {
	browserPath(t)
	c, err := config.Load(config.Input{Flags: map[string]string{"train.iterations": "100000", "train.threads": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	opt := demo.DefaultOptions()
	opt.Views, opt.Width, opt.Height = 8, 64, 48
	ds, err := demo.Generate(opt)
	if err != nil {
		t.Fatal(err)
	}
	topt := app.TrainOptions(c, nil)
	topt.OutDir = t.TempDir()
	g, _, err := train.Initial(topt, ds)
	if err != nil {
		t.Fatal(err)
	}
	set, err := app.EngineSettings(c)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := cpu.New(set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	live := viewer.NewLive(time.Second)
	topt.Observer = live
	tr, err := train.New(topt, ds, eng)
	if err != nil {
		t.Fatal(err)
	}
	srv := viewer.New(viewer.Options{Title: "live", Live: live, Loopback: true})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go live.Run(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- tr.Run(ctx, nil) }()
	defer func() { cancel(); <-runDone }()

	bctx := newBrowser(t, 1024, 768)
	openPage(t, bctx, hs.URL+"/")
	curve := func() int {
		st, err := chromedp.Run(bctx, chromedp.Evaluate[pageStatus](`rlx.status()`))
		if err != nil {
			t.Fatal(err)
		}
		return st.Curve
	}
	waitFor := func(what string, ok func() bool) {
		deadline := time.Now().Add(60 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				msg, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("status").textContent + " " + JSON.stringify(rlx.status())`))
				t.Fatalf("timed out waiting for %s (page: %s; server: %+v)", what, msg, liveState(t, hs.URL).Step)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var first int
	waitFor("a curve on the page", func() bool { first = curve(); return first > 1 })
	waitFor("the curve to grow", func() bool { return curve() > first })
	t.Logf("the page's curve grew from %d points past %d", first, curve())

	// Pause from the page: the trainer's step stops advancing; resume starts it again.
	// The button's own click handler, fired from script: a mouse click at the button's
	// coordinates can miss under load, when the status line beside it reflows between the
	// box query and the click.
	clickPause := func() {
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(document.getElementById("pause").click(), true)`)); err != nil {
			t.Fatal(err)
		}
	}
	clickPause()
	step := func() int { return liveStep(t, hs.URL) }
	waitFor("the pause to take", func() bool { return liveState(t, hs.URL).Paused })
	s0 := step()
	time.Sleep(500 * time.Millisecond)
	if s1 := step(); s1 > s0+1 {
		t.Fatalf("paused, yet the step went from %d to %d", s0, s1)
	}
	// The button toggles on the page's own idea of the state, which a live poll already in
	// flight when the pause landed can briefly contradict: click once the page shows "resume".
	button := func() string {
		txt, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("pause").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return txt
	}
	waitFor("the page to offer resume", func() bool { return button() == "resume" })
	clickPause()
	waitFor("training to resume", func() bool { return step() > s0+1 })
}

func liveState(t *testing.T, base string) viewer.LiveState {
	t.Helper()
	resp, b := do(t, "GET", base+"/api/live", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("live: %d", resp.StatusCode)
	}
	var st viewer.LiveState
	if err := jsonUnmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func liveStep(t *testing.T, base string) int { return liveState(t, base).Step }

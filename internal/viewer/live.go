package viewer

import (
	"context"
	"math"
	"os"
	"sync"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/splat"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

// watchWindow is how long after a page last asked for the state it still counts as watching:
// nobody watching, no snapshots, so an idle `train --view` costs nothing but the event calls.
const watchWindow = 10 * time.Second

// maxCurve bounds the curve kept for the page: past it every other point goes and the stride
// doubles, so a run of any length keeps between maxCurve/2 and maxCurve points.
const maxCurve = 2000

// Live is a training run's state as the page sees it, and the train.Observer that gathers it.
// Its Observer methods run on the training goroutine and only take a lock and copy a few
// numbers; the scene copy it is handed is encoded on its own goroutine (Run).
type Live struct {
	every time.Duration
	srv   *Server
	snaps chan snapshot
	now   func() time.Time // the clock, replaced by tests

	mu       sync.Mutex
	last     time.Time // when the last scene copy was taken
	polled   time.Time // when a page last asked for the state
	encoding bool      // a copy is on its way through the encoder
	st       LiveState
	stride   int
	preview  []byte
	reading  bool // a preview file is being read
	paused   bool
	resume   chan struct{} // closed when a pause ends
}

type snapshot struct {
	g   *splat.Gaussians
	deg int
}

// LiveState is what /api/live returns.
type LiveState struct {
	Step         int          `json:"step"`
	Total        int          `json:"total"`
	Gaussians    int          `json:"gaussians"`
	StepsPerSec  float64      `json:"stepsPerSec"`
	ElapsedSec   float64      `json:"elapsedSec"`
	SHDegree     int          `json:"shDegree"`
	Loss         float64      `json:"loss"`
	PSNR         float64      `json:"psnr"`
	Paused       bool         `json:"paused"`
	Done         bool         `json:"done"`
	SceneVersion int          `json:"sceneVersion"`
	SceneStep    int          `json:"sceneStep"`
	PreviewStep  int          `json:"previewStep"`
	Curve        [][3]float64 `json:"curve"` // step, loss, PSNR of the training view
	Evals        []EvalPoint  `json:"evals"`
}

// EvalPoint is one evaluation over the held-out views.
type EvalPoint struct {
	Step  int     `json:"step"`
	Split string  `json:"split"`
	PSNR  float64 `json:"psnr"`
	SSIM  float64 `json:"ssim"`
}

// NewLive returns the live state of a run whose scene is refreshed at most every `every` while
// a page is watching.
func NewLive(every time.Duration) *Live {
	return &Live{every: every, snaps: make(chan snapshot, 1), now: time.Now, stride: 1}
}

// Run encodes the scene copies the trainer hands over until ctx ends.
func (l *Live) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case sn := <-l.snaps:
			if l.srv != nil {
				l.srv.SetScene(sn.g, sn.deg) // a copy the trainer validated as it trained
			}
			l.mu.Lock()
			l.encoding = false
			l.mu.Unlock()
		}
	}
}

// Event records progress, evaluations and previews.
func (l *Live) Event(ev train.Event) {
	switch e := ev.(type) {
	case train.Progress:
		l.mu.Lock()
		st := &l.st
		st.Step, st.Total, st.Gaussians = e.Step, e.Total, e.Gaussians
		st.StepsPerSec, st.ElapsedSec, st.SHDegree = e.StepsPerSec, e.ElapsedSec, e.SHDegree
		st.Loss, st.PSNR = e.Loss, e.PSNR
		st.Done = e.Step >= e.Total
		if e.Step%l.stride == 0 || e.Step == 1 {
			st.Curve = append(st.Curve, [3]float64{float64(e.Step), finite(e.Loss), finite(e.PSNR)})
			if len(st.Curve) >= maxCurve {
				kept := st.Curve[:0]
				for i, p := range st.Curve {
					if i%2 == 0 {
						kept = append(kept, p)
					}
				}
				st.Curve = kept
				l.stride *= 2
			}
		}
		l.mu.Unlock()
	case train.Evaluated:
		l.mu.Lock()
		l.st.Evals = append(l.st.Evals, EvalPoint{Step: e.Step, Split: e.Split, PSNR: finite(e.PSNR), SSIM: finite(e.SSIM)})
		l.mu.Unlock()
	case train.Saved:
		if e.Kind != "preview" {
			return
		}
		l.mu.Lock()
		if l.reading {
			l.mu.Unlock()
			return
		}
		l.reading = true
		l.mu.Unlock()
		// The trainer's own output, read off the training goroutine; no request names a path.
		go func(path string, step int) {
			b, err := os.ReadFile(path)
			l.mu.Lock()
			if err == nil {
				l.preview, l.st.PreviewStep = b, step
			}
			l.reading = false
			l.mu.Unlock()
		}(e.Path, l.stepNow())
	}
}

func (l *Live) stepNow() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st.Step
}

// finite keeps NaN and infinities out of the JSON, which cannot hold them.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return -1
	}
	return v
}

// WantScene asks for a copy at the first step (so that a page opened at any time has a scene)
// and then every l.every while a page is watching and the last copy has been encoded.
func (l *Live) WantScene(s int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.encoding {
		return false
	}
	now := l.now()
	if l.last.IsZero() {
		return true
	}
	return now.Sub(l.polled) < watchWindow && now.Sub(l.last) >= l.every
}

// Scene passes the copy to the encoder.
func (l *Live) Scene(s int, g *splat.Gaussians, deg int) {
	l.mu.Lock()
	l.last, l.encoding = l.now(), true
	l.st.SceneStep = s
	l.mu.Unlock()
	select {
	case l.snaps <- snapshot{g, deg}:
	default: // cannot happen while encoding is set; never block the step
		l.mu.Lock()
		l.encoding = false
		l.mu.Unlock()
	}
}

// Hold waits while the page holds the run paused.
func (l *Live) Hold(ctx context.Context) {
	l.mu.Lock()
	if !l.paused {
		l.mu.Unlock()
		return
	}
	ch := l.resume
	l.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// SetPaused pauses or resumes the run.
func (l *Live) SetPaused(p bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p == l.paused {
		return
	}
	l.paused = p
	if p {
		l.resume = make(chan struct{})
	} else {
		close(l.resume)
	}
}

// state is a copy of the state for the page; asking for it counts as watching.
func (l *Live) state() LiveState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.polled = l.now()
	st := l.st
	st.Paused = l.paused
	st.Curve = append([][3]float64{}, l.st.Curve...) // never nil: the page reads [], not null
	st.Evals = append([]EvalPoint{}, l.st.Evals...)
	return st
}

func (l *Live) previewPNG() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.preview
}

var _ train.Observer = (*Live)(nil)

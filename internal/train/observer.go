package train

import (
	"context"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Observer watches a run from the training goroutine, between steps (a live viewer, say). Its
// methods run inside the step loop, so they must return at once (but for Hold while paused):
// anything slow (encoding, sending) belongs on the observer's own goroutines.
type Observer interface {
	// Event receives every event the run emits, after the run's own emit function.
	Event(ev Event)
	// WantScene says whether the observer wants the Gaussians after step s. It is asked once
	// per step, before the step runs: a true answer keeps a pipelining engine from queueing
	// step s+1 behind s, so that the read-back sees exactly step s.
	WantScene(s int) bool
	// Scene hands over a copy of the Gaussians after step s (the observer owns it) and the
	// SH degree the run renders with at s.
	Scene(s int, g *splat.Gaussians, shDegree int)
	// Hold returns once training may go on: at once unless the observer has paused it, and as
	// soon as ctx ends otherwise.
	Hold(ctx context.Context)
}

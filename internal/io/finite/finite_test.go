package finite

import (
	"math"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

func TestClamp(t *testing.T) {
	tests := []struct {
		v, want float64
		clamped bool
	}{
		{math.Inf(1), LogitBound, true},
		{math.Inf(-1), -LogitBound, true},
		{3.5, 3.5, false},
		{-1e30, -1e30, false},
	}
	for _, tc := range tests {
		got, c := Clamp(tc.v, LogitBound)
		if got != tc.want || c != tc.clamped {
			t.Errorf("Clamp(%g) = %g, %v; want %g, %v", tc.v, got, c, tc.want, tc.clamped)
		}
	}
	if got, _ := Clamp(math.NaN(), LogitBound); !math.IsNaN(got) {
		t.Errorf("Clamp(NaN) = %g, want NaN left for the caller to refuse", got)
	}
}

// The bounds must mean what ±Inf means once activated in float32.
func TestBoundsSaturate(t *testing.T) {
	if s := splat.Sigmoid(LogitBound); s != 1 {
		t.Errorf("sigmoid(%d) = %g, want exactly 1", LogitBound, s)
	}
	if s := splat.Sigmoid(-LogitBound); s > 1e-8 {
		t.Errorf("sigmoid(−%d) = %g, want below 1e−8", LogitBound, s)
	}
	if s := float32(math.Exp(-LogScaleBound)); s > 1e-8 {
		t.Errorf("exp(−%d) = %g, want below 1e−8", LogScaleBound, s)
	}
	if s := float32(math.Exp(LogScaleBound)); math.IsInf(float64(s*s), 0) {
		t.Errorf("exp(%d)² overflows float32", LogScaleBound)
	}
}

func TestWarning(t *testing.T) {
	var c Counter
	if w := c.Warning("a.ply"); w != "" {
		t.Errorf("no clamps: warning %q, want none", w)
	}
	calls := 0
	for i := 0; i < 3; i++ {
		c.Add(func() string { calls++; return "byte 7: vertex 0, property opacity" })
	}
	w := c.Warning("a.ply")
	if !strings.Contains(w, "a.ply: 3 infinite values") || !strings.Contains(w, "byte 7") || calls != 1 {
		t.Errorf("warning %q (where called %d times), want the file, the count 3 and the first place, asked once", w, calls)
	}
}

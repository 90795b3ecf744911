package parity

import (
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/prep"
)

// Every backward agrees with central finite differences of the forward:
// both render models, every loss, SH degrees 0–3, every parameter group.
func TestGradientsMatchFiniteDifferences(t *testing.T) {
	for _, c := range GradCases() {
		t.Run(c.String(), func(t *testing.T) {
			rows, err := CheckGrad(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 5 {
				t.Fatalf("%d rows, want one per parameter group", len(rows))
			}
			for _, r := range rows {
				if !r.Pass {
					t.Errorf("%s: %s", r.Group, r.Note)
				}
			}
		})
	}
}

// The check can fail: a gradient group scaled by 1.01 is caught in every
// group, for both models.
func TestBrokenGradientsFail(t *testing.T) {
	for _, m := range []prep.Model{prep.EWA, prep.Ray} {
		for _, g := range []string{"means", "log_scales", "quats", "opacity_logits", "sh"} {
			c := GradCase{Model: m, Loss: loss.L1SSIM, SHDegree: 3, Seed: 3, Break: g}
			rows, err := CheckGrad(c)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if r.Group == g && r.Pass {
					t.Errorf("%v: gradient of %s scaled by 1.01 passed (rel err %.2g)", m, g, r.RelErr)
				}
				if r.Group != g && !r.Pass {
					t.Errorf("%v: unbroken group %s failed: %s", m, r.Group, r.Note)
				}
			}
		}
	}
}

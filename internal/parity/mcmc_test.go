package parity

import "testing"

// The MCMC regularisers' gradients agree with finite differences, and a group scaled by 1.01
// fails while the other passes.
func TestMCMCRegularizers(t *testing.T) {
	for _, brk := range []string{"", "opacity_logits", "log_scales"} {
		rows := CheckMCMC(brk)
		if len(rows) != 2 {
			t.Fatalf("%d rows, want 2", len(rows))
		}
		for _, r := range rows {
			if broken := r.Group == brk; r.Pass == broken {
				t.Errorf("break %q: %s passed %v (rel err %.2g): %s", brk, r.Group, r.Pass, r.RelErr, r.Note)
			}
		}
	}
}

// Package adam is the CPU optimizer of design.md §5 step 8: Adam with bias
// correction over the splat parameter groups (means, log_scales, quats,
// opacity_logits, sh_dc, sh_rest), with per-group learning rate, optional
// gradient clip, update clamp and value bounds, guards against non-finite
// values, and an optional visible-only ("sparse") update. It also holds the
// learning-rate schedules of the original 3DGS.
//
// The moments live in the same structure of arrays as the parameters
// (*splat.Gaussians), so densification applies the same index edits to
// parameters and moments (Gather, ResetGroup), and checkpoints store them
// like parameters.
//
// Non-goals: no learning-rate values (they come from the run config, the one
// source of defaults), no densification policy, no GPU code (the fused
// engine's Adam kernel takes its settings from Config and is compared
// against Step by the parity checks).
package adam

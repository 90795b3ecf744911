// readout.h — the step's readout block: one small buffer the host reads once per step.
// Words are u32; the three loss sums are two-float sums: float32 hi then lo, the sum hi + lo.
// internal/fused/readout.go mirrors these indices.
#pragma once

#define RO_VISIBLE 0   // splats valid this view (project)
#define RO_ENTRIES 1   // tile-list entries the splats need (bin)
#define RO_ABORT 2     // non-zero: the entries exceed the list capacity; later stages do nothing
#define RO_NONFINITE 3 // gradient or update elements Adam dropped
#define RO_L1 4        // Σ|x−y| (words 4,5)
#define RO_SQ 6        // Σ(x−y)² (words 6,7)
#define RO_SSIM 8      // Σ SSIM map (words 8,9)
#define RO_BIG 10      // splats queued for a warp each (bin)
#define RO_BIGBITS 11  // words of hit bits the queued splats asked for (bin; more than fit: re-tested)
#define RO_WORDS 16

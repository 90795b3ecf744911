// readout.h — the step's readout block: one small buffer the host reads once per step.
// Words are u32; the three loss sums are two-float sums at word pairs: float32 hi then lo, the sum hi + lo. The word
// indices (RO_*) are declared in abi.h, generated with the host's (internal/fused/abi).
#pragma once

#include "abi.h"

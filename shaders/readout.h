// readout.h — the step's readout block: one small buffer the host reads once per step.
// Words are u32; the three loss sums are float64 stored at 8-byte aligned word pairs. The word
// indices (RO_*) are declared in abi.h, generated with the host's (internal/fused/abi).
#pragma once

#include "abi.h"

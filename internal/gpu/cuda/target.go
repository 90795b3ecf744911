package cuda

import (
	"fmt"
	"sort"
)

// baseOptions are the NVRTC options every kernel is built with. --use_fast_math is deliberately
// absent: the GPU engine must match the CPU engine (design.md §1), and fast math changes
// exp/div/sqrt results. Callers add options through Source.Options.
var baseOptions = []string{"-default-device", "--std=c++17", "-lineinfo"}

// compileOptions is the full NVRTC option list for a target such as "sm_90" or "compute_75".
func compileOptions(target string, extra []string) []string {
	opts := make([]string, 0, 1+len(baseOptions)+len(extra))
	opts = append(opts, "--gpu-architecture="+target)
	opts = append(opts, baseOptions...)
	return append(opts, extra...)
}

// chooseTarget picks what NVRTC should produce for a device of compute capability cc (major*10
// + minor): a CUBIN for sm_cc when NVRTC supports it (no JIT at load, exact machine code), else
// PTX for the newest virtual architecture NVRTC supports that is not newer than the device,
// which the driver JIT-compiles. supported nil means NVRTC could not say (old NVRTC): try sm_cc.
func chooseTarget(cc int, supported []int) (target, format string, err error) {
	if supported == nil {
		return fmt.Sprintf("sm_%d", cc), "cubin", nil
	}
	s := append([]int(nil), supported...)
	sort.Ints(s)
	best := -1
	for _, a := range s {
		if a == cc {
			return fmt.Sprintf("sm_%d", cc), "cubin", nil
		}
		if a < cc {
			best = a
		}
	}
	if best < 0 {
		if len(s) == 0 {
			return "", "", fmt.Errorf("cuda: NVRTC reports no supported architectures")
		}
		return "", "", fmt.Errorf("cuda: this GPU is sm_%d but NVRTC only supports sm_%d and newer", cc, s[0])
	}
	return fmt.Sprintf("compute_%d", best), "ptx", nil
}

// archName formats a compute capability as sm_XX.
func archName(major, minor int) string { return fmt.Sprintf("sm_%d%d", major, minor) }

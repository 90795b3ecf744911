package cuda

import (
	"strings"
	"testing"
)

func TestChooseTarget(t *testing.T) {
	nvrtc13 := []int{75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121}
	tests := []struct {
		name       string
		cc         int
		supported  []int
		target     string
		format     string
		errContain string
	}{
		{"exact sm_90", 90, nvrtc13, "sm_90", "cubin", ""},
		{"unsorted list", 86, []int{90, 86, 75}, "sm_86", "cubin", ""},
		{"GPU newer than NVRTC", 130, nvrtc13, "compute_121", "ptx", ""},
		{"gap in list", 85, nvrtc13, "compute_80", "ptx", ""},
		{"unknown list", 90, nil, "sm_90", "cubin", ""},
		{"GPU too old", 61, nvrtc13, "", "", "sm_61 but NVRTC only supports sm_75 and newer"},
		{"empty list", 90, []int{}, "", "", "no supported architectures"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			target, format, err := chooseTarget(tc.cc, tc.supported)
			if tc.errContain != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errContain) {
					t.Fatalf("err = %v, want %q", err, tc.errContain)
				}
				return
			}
			if err != nil || target != tc.target || format != tc.format {
				t.Fatalf("got %s %s %v, want %s %s", target, format, err, tc.target, tc.format)
			}
		})
	}
}

func TestCompileOptions(t *testing.T) {
	got := strings.Join(compileOptions("sm_90", []string{"-DTILE=16"}), " ")
	want := "--gpu-architecture=sm_90 -default-device --std=c++17 -lineinfo -DTILE=16"
	if got != want {
		t.Fatalf("options %q, want %q", got, want)
	}
	if strings.Contains(got, "fast_math") {
		t.Fatal("fast math must not be on by default")
	}
	if archName(9, 0) != "sm_90" {
		t.Fatal(archName(9, 0))
	}
}

package cuda

import (
	"reflect"
	"testing"
)

func TestLibCandidates(t *testing.T) {
	got := libCandidates([]string{"libx.so.2", "libx.so"}, []string{"/a", "/b", "/a"})
	want := []string{"libx.so.2", "/a/libx.so.2", "/b/libx.so.2", "libx.so", "/a/libx.so", "/b/libx.so"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestNVRTCCandidates(t *testing.T) {
	env := map[string]string{"CUDA_PATH": "/opt/cuda-13"}
	got := nvrtcCandidates(func(k string) string { return env[k] })
	if got[0] != "libnvrtc.so.13" {
		t.Fatalf("first candidate %q, want the bare newest SONAME", got[0])
	}
	want := map[string]bool{
		"/opt/cuda-13/lib64/libnvrtc.so.13":    true,
		"/usr/local/cuda/lib64/libnvrtc.so.12": true,
		"libnvrtc.so":                          true,
	}
	for _, c := range got {
		delete(want, c)
	}
	if len(want) != 0 {
		t.Fatalf("missing candidates %v in %q", want, got)
	}
	// .so.13 must be tried everywhere before .so.12 anywhere.
	last13, first12 := -1, len(got)
	for i, c := range got {
		switch {
		case len(c) >= 14 && c[len(c)-14:] == "libnvrtc.so.13":
			last13 = i
		case len(c) >= 14 && c[len(c)-14:] == "libnvrtc.so.12" && i < first12:
			first12 = i
		}
	}
	if last13 > first12 {
		t.Fatalf("order %q", got)
	}
	if d := driverCandidates(); d[0] != "libcuda.so.1" {
		t.Fatalf("driver candidates %q", d)
	}
}

package driver

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

func TestPrebuiltRoundTrip(t *testing.T) {
	src := Source{Name: "selftest.cu", Code: "extern \"C\" __global__ void k() {}"}
	body := []byte(".version 9.0\n.target sm_75\n.address_size 64\n\x00")
	h := PrebuiltHeader{Source: src.Name, SourceHash: src.Hash(), Target: "compute_75", Compiler: "nvrtc 13.0"}
	file := FormatPrebuilt(h, body)
	if strings.Contains(string(file), "\x00") {
		t.Fatal("NUL written into the file")
	}
	gotH, gotBody, err := ParsePrebuilt("selftest.ptx", file)
	if err != nil {
		t.Fatal(err)
	}
	if gotH != h {
		t.Fatalf("header %+v, want %+v", gotH, h)
	}
	if string(gotBody) != ".version 9.0\n.target sm_75\n.address_size 64\n" {
		t.Fatalf("body %q", gotBody)
	}
	fsys := fstest.MapFS{"selftest.ptx": {Data: file}}
	img, _, err := LoadPrebuilt(fsys, src)
	if err != nil {
		t.Fatal(err)
	}
	if img[len(img)-1] != 0 || string(img[:len(img)-1]) != string(gotBody) {
		t.Fatalf("image %q is not the NUL-terminated body", img)
	}
}

func TestPrebuiltStaleAndBroken(t *testing.T) {
	src := Source{Name: "selftest.cu", Code: "v2"}
	old := Source{Name: "selftest.cu", Code: "v1"}
	h := PrebuiltHeader{Source: "selftest.cu", SourceHash: old.Hash(), Target: "compute_75", Compiler: "nvrtc 13.0"}
	tests := []struct {
		name  string
		fsys  fstest.MapFS
		want  string
		stale bool
	}{
		{"stale", fstest.MapFS{"selftest.ptx": {Data: FormatPrebuilt(h, []byte(".version 9.0\n"))}}, "regenerate", true},
		{"missing", fstest.MapFS{}, "prebuilt kernel for selftest.cu", false},
		{"no header", fstest.MapFS{"selftest.ptx": {Data: []byte(".version 9.0\n")}}, "lacks source, source-sha256, target", false},
		{"other source", fstest.MapFS{"selftest.ptx": {Data: FormatPrebuilt(PrebuiltHeader{Source: "x.cu", SourceHash: src.Hash(), Target: "compute_75"}, nil)}}, "built from x.cu", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := LoadPrebuilt(tc.fsys, src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if errors.Is(err, ErrStalePrebuilt) != tc.stale {
				t.Fatalf("errors.Is(ErrStalePrebuilt) = %v", !tc.stale)
			}
		})
	}
	if _, _, err := LoadPrebuilt(nil, src); err == nil {
		t.Fatal("nil FS accepted")
	}
	if PrebuiltName("dir/raster_fwd.cu") != "raster_fwd.ptx" {
		t.Fatal(PrebuiltName("dir/raster_fwd.cu"))
	}
}

package driver

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestSourceHashChangesWithEveryPart(t *testing.T) {
	base := Source{Name: "a.cu", Code: "k", Headers: map[string]string{"h.h": "x"}, Options: []string{"-DA"}}
	variants := map[string]Source{
		"name":         {Name: "b.cu", Code: "k", Headers: map[string]string{"h.h": "x"}, Options: []string{"-DA"}},
		"code":         {Name: "a.cu", Code: "k2", Headers: map[string]string{"h.h": "x"}, Options: []string{"-DA"}},
		"header text":  {Name: "a.cu", Code: "k", Headers: map[string]string{"h.h": "y"}, Options: []string{"-DA"}},
		"header name":  {Name: "a.cu", Code: "k", Headers: map[string]string{"g.h": "x"}, Options: []string{"-DA"}},
		"option":       {Name: "a.cu", Code: "k", Headers: map[string]string{"h.h": "x"}, Options: []string{"-DB"}},
		"no option":    {Name: "a.cu", Code: "k", Headers: map[string]string{"h.h": "x"}},
		"concat shift": {Name: "a.c", Code: "uk", Headers: map[string]string{"h.h": "x"}, Options: []string{"-DA"}},
	}
	h0 := base.Hash()
	if len(h0) != 64 {
		t.Fatalf("hash %q is not hex sha256", h0)
	}
	for name, v := range variants {
		if v.Hash() == h0 {
			t.Errorf("changing the %s does not change the hash", name)
		}
	}
	// Header map order must not matter.
	a := Source{Name: "a.cu", Headers: map[string]string{"1": "a", "2": "b", "3": "c"}}
	b := Source{Name: "a.cu", Headers: map[string]string{"3": "c", "1": "a", "2": "b"}}
	if a.Hash() != b.Hash() {
		t.Error("hash depends on map order")
	}
}

func TestSourceFromFS(t *testing.T) {
	fsys := fstest.MapFS{
		"k.cu":        {Data: []byte("#include \"prelude.h\"\n  #  include \"consts.h\"\n#include <cuda_fp16.h>\nextern \"C\" __global__ void k() {}\n")},
		"prelude.h":   {Data: []byte("#pragma once\n#include \"consts.h\"\n")},
		"consts.h":    {Data: []byte("#define TILE 16\n")},
		"unused.h":    {Data: []byte("never included")},
		"broken.cu":   {Data: []byte("// line 1\n#include \"missing.h\"\n")},
		"loop.cu":     {Data: []byte("#include \"loop_a.h\"\n")},
		"loop_a.h":    {Data: []byte("#include \"loop_b.h\"\n")},
		"loop_b.h":    {Data: []byte("#include \"loop_a.h\"\n")},
		"sub/x.cu":    {Data: []byte("#include \"y.h\"\n")},
		"sub/y.h":     {Data: []byte("y")},
		"plain.cu":    {Data: []byte("extern \"C\" __global__ void p() {}\n")},
		"selftest.cu": {Data: []byte("x")},
	}
	src, err := SourceFromFS(fsys, "k.cu")
	if err != nil {
		t.Fatal(err)
	}
	if src.Name != "k.cu" || len(src.Headers) != 2 || src.Headers["consts.h"] != "#define TILE 16\n" || src.Headers["prelude.h"] == "" {
		t.Fatalf("got %+v", src)
	}
	if _, ok := src.Headers["unused.h"]; ok {
		t.Error("picked up a header that is not included")
	}
	// A header cycle terminates (each name is read once) instead of recursing forever.
	if _, err := SourceFromFS(fsys, "loop.cu"); err != nil {
		t.Fatalf("cycle: %v", err)
	}
	if s, err := SourceFromFS(fsys, "sub/x.cu"); err != nil || s.Name != "x.cu" || s.Headers["y.h"] != "y" {
		t.Fatalf("subdir: %+v, %v", s, err)
	}
	if s, err := SourceFromFS(fsys, "plain.cu"); err != nil || s.Headers != nil {
		t.Fatalf("plain: %+v, %v", s, err)
	}
	_, err = SourceFromFS(fsys, "broken.cu")
	if err == nil || !strings.Contains(err.Error(), "broken.cu:2") || !strings.Contains(err.Error(), "missing.h") {
		t.Fatalf("missing include: err = %v, want file:line and header name", err)
	}
	if _, err := SourceFromFS(fsys, "nope.cu"); err == nil || !strings.Contains(err.Error(), "nope.cu") {
		t.Fatalf("missing unit: err = %v", err)
	}
}

// TestHashIgnoresComments: comment and blank-line edits keep the hash, code edits (also inside
// a string literal that looks like a comment) change it.
func TestHashIgnoresComments(t *testing.T) {
	base := Source{Name: "u.cu", Code: "int a; // one\n/* block\n */ int b;\nconst char* s = \"// x\";\n"}
	same := []string{
		"int a; // two\n/* other\n */ int b;\n\n// new line\nconst char* s = \"// x\";\n",
		"int a;\n/**/ int b;   \nconst char* s = \"// x\";",
	}
	for _, code := range same {
		s := base
		s.Code = code
		if s.Hash() != base.Hash() {
			t.Errorf("comment-only edit changed the hash: %q", code)
		}
	}
	for _, code := range []string{
		"int a; // one\n/* block\n */ int c;\nconst char* s = \"// x\";\n",
		"int a; // one\n/* block\n */ int b;\nconst char* s = \"// y\";\n",
	} {
		s := base
		s.Code = code
		if s.Hash() == base.Hash() {
			t.Errorf("code edit kept the hash: %q", code)
		}
	}
}

func TestSourceFromFSForMapsPrelude(t *testing.T) {
	fsys := fstest.MapFS{
		"k.cu":        {Data: []byte("#include \"prelude.h\"\nKERNEL k() {}\n")},
		"prelude_a.h": {Data: []byte("#pragma once\n#include \"consts.h\"\n#define A 1\n")},
		"prelude_b.h": {Data: []byte("#pragma once\n#define B 1\n")},
		"consts.h":    {Data: []byte("#define TILE 16\n")},
	}
	tests := []struct {
		prelude, want string
		headers       int
	}{
		{"prelude_a.h", "#define A 1", 2},
		{"prelude_b.h", "#define B 1", 1},
	}
	hashes := map[string]bool{}
	for _, tc := range tests {
		src, err := SourceFromFSFor(fsys, "k.cu", tc.prelude)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(src.Headers[PreludeInclude], tc.want) || len(src.Headers) != tc.headers {
			t.Errorf("%s: headers %v", tc.prelude, src.Headers)
		}
		hashes[src.Hash()] = true
	}
	if len(hashes) != len(tests) {
		t.Error("the hash does not tell the mapped preludes apart")
	}
	if _, err := SourceFromFSFor(fsys, "k.cu", "prelude_none.h"); err == nil || !strings.Contains(err.Error(), `"prelude.h"`) {
		t.Errorf("missing mapped prelude: %v", err)
	}
	if _, err := SourceFromFS(fsys, "k.cu"); err == nil {
		t.Error("unmapped prelude.h that the tree lacks was accepted")
	}
}

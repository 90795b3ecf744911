package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckReportsStale(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.cu"), []byte("extern \"C\" __global__ void a() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"-dir", dir, "-check"}, &out, &errb); rc != 1 {
		t.Fatalf("rc %d, out %q, err %q", rc, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "stale   a.cu") {
		t.Fatalf("out %q", out.String())
	}
}

func TestCheckRepositoryShaders(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"-dir", filepath.Join("..", "..", "..", "..", "shaders"), "-check"}, &out, &errb); rc != 0 {
		t.Fatalf("embedded PTX is stale (rc %d):\n%s%s", rc, out.String(), errb.String())
	}
}

func TestBadUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"-nope"}, &out, &errb); rc != 2 {
		t.Fatalf("rc %d", rc)
	}
	if rc := run([]string{"-dir", t.TempDir()}, &out, &errb); rc != 1 || !strings.Contains(errb.String(), "no *.cu files") {
		t.Fatalf("empty dir: %q", errb.String())
	}
}

// The PTX must not depend on the directory genptx ran in.
func TestStableFileNames(t *testing.T) {
	tests := []struct{ in, want string }{
		{"\t.file\t1 \"/tmp/sh/edit.cu\"\n", "\t.file\t1 \"edit.cu\"\n"},
		{"\t.file\t2 \"/work/x/y/common.h\"\n.loc 1 2 3\n", "\t.file\t2 \"common.h\"\n.loc 1 2 3\n"},
		{"\t.file\t1 \"edit.cu\"\n", "\t.file\t1 \"edit.cu\"\n"},
		{"// a comment about /tmp/x/\"q\"\n", "// a comment about /tmp/x/\"q\"\n"},
		{".file 1 \"/a/b.cu\", 1700000000, 12\n", ".file 1 \"b.cu\", 1700000000, 12\n"},
	}
	for _, tt := range tests {
		if got := string(stableFileNames([]byte(tt.in))); got != tt.want {
			t.Errorf("stableFileNames(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

package driver

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Bad input must come back as an error, never a panic: prebuilt files and cache entries are
// read from disk, compiler logs from a library.

func FuzzParsePrebuilt(f *testing.F) {
	src := Source{Name: "a.cu", Code: "x"}
	f.Add(FormatPrebuilt(PrebuiltHeader{Source: "a.cu", SourceHash: src.Hash(), Target: "compute_75", Compiler: "nvrtc 13.0"}, []byte(".version 9.0\n")))
	f.Add([]byte("// source:\n// source-sha256: 12\n"))
	f.Add([]byte("//\n//:\n// target: compute_80\r\n.entry"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, body, err := ParsePrebuilt("f.ptx", data)
		if err != nil {
			return
		}
		if h.Source == "" || len(h.SourceHash) != 64 || h.Target == "" {
			t.Fatalf("accepted incomplete header %+v", h)
		}
		if !bytes.HasSuffix(data, body) {
			t.Fatal("body is not a suffix of the file")
		}
	})
}

func FuzzCacheEntry(f *testing.F) {
	dir := f.TempDir()
	c := NewCache(dir)
	key := CacheKey("fuzz")
	if err := c.Put(key, []byte("payload")); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, key+".bin"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("RLXKCACHE1\n\x07\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		payload, err := decodeEntry(raw)
		if err != nil {
			return
		}
		if len(raw) != cacheHeader+len(payload) {
			t.Fatalf("accepted %d bytes with a %d-byte payload", len(raw), len(payload))
		}
	})
}

func FuzzParseDiagnostics(f *testing.F) {
	f.Add("bad.cu(3): error: x\nprogram_source:1:2: warning: y\n")
	f.Add("((((: error: \n:9999999999999999999999: error: z")
	f.Fuzz(func(t *testing.T, log string) {
		for _, d := range ParseDiagnostics(log) {
			if d.Line < 0 || d.File == "" {
				t.Fatalf("bad diagnostic %+v", d)
			}
		}
	})
}

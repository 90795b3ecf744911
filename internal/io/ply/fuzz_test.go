package ply

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzRead feeds arbitrary bytes to both readers. It is seeded with the
// shared fixtures (train-1000 in its three encodings, the two SuperSplat
// files), whole, cut to a few records and, for the compressed ones, to one
// whole chunk, and with the hand-made files. Neither may panic or
// allocate beyond what the input can hold; a file that reads must hold
// valid splats, read the same without a known size, and survive a
// write/read round trip bit for bit.
func FuzzRead(f *testing.F) {
	if p, ok := sharedFile(fixtureRel); ok {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(cutPLY(f, data, 20))
		names, rows := decodeFloatLE(f, data)
		for _, fm := range []string{"binary_big_endian", "ascii"} {
			f.Add(buildPLY(f, fm, []telem{floatElem(names, rows[:20])}))
		}
	}
	for _, name := range []string{"biker", "guitar"} {
		if p, ok := sharedFile("fixtures/ply/" + name + ".compressed.ply"); ok {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
			f.Add(cutPLY(f, data, 8))
			// One whole chunk: a compressed file small enough to
			// mutate that still decodes.
			f.Add(cutPLYBy(f, data, func(e string) int {
				if e == "chunk" {
					return 1
				}
				return compressedChunk
			}))
		}
	}
	for _, fm := range formats {
		for d := 0; d <= 2; d++ {
			data, _, _, _ := handMade(f, fm, d, 3, true)
			f.Add(data)
		}
		f.Add(pointCloud(f, fm, true))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, info, err := Read(bytes.NewReader(data), "fuzz.ply")
		g2, _, err2 := Read(unsized{bytes.NewReader(data)}, "fuzz.ply")
		_, _, _ = readPointCloud(bytes.NewReader(data), "fuzz.ply")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ply: fuzz.ply: ") {
				t.Fatalf("error without package and file: %v", err)
			}
			if err2 == nil {
				t.Fatalf("sized read failed (%v) but unsized read succeeded", err)
			}
			return
		}
		if err2 != nil {
			t.Fatalf("sized read succeeded but unsized read failed: %v", err2)
		}
		sameBits(t, g2, g)
		if err := g.Validate(); err != nil {
			t.Fatalf("read gave invalid splats: %v", err)
		}
		if g.Len() != info.Count || info.SHDegree < 0 || info.SHDegree > 3 {
			t.Fatalf("%d splats, info %+v", g.Len(), info)
		}
		var buf bytes.Buffer
		if err := Write(&buf, g, info.SHDegree); err != nil {
			t.Fatal(err)
		}
		back, _, err := Read(&buf, "back.ply")
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, back, g)
	})
}

package spz

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/sharedtest"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// seeds are files this package's writer made: every version, every SH
// degree, with and without the antialiasing flag, empty and not, and the
// shared version 4 fixture another tool wrote when it is there.
func seeds(f *testing.F) [][]byte {
	return append(gzipSeeds(f), append(writtenSeeds(f, 4), sharedSeeds()...)...)
}

// gzipSeeds are the seeds of the gzipped versions 2 and 3.
func gzipSeeds(f *testing.F) [][]byte {
	return append(writtenSeeds(f, 2), writtenSeeds(f, 3)...)
}

func sharedSeeds() [][]byte {
	if path, ok := sharedtest.Find("fixtures/spz/biker.spz"); ok {
		if b, err := os.ReadFile(path); err == nil {
			return [][]byte{b}
		}
	}
	return nil
}

func writtenSeeds(f *testing.F, versions ...int) [][]byte {
	var out [][]byte
	for _, v := range versions {
		for deg := 0; deg <= splat.MaxSHDegree; deg++ {
			out = append(out, encodeBytes(f, randomScene(sceneSeed, 3, deg), Options{SHDegree: deg, Version: v, Antialiased: deg%2 == 1}))
		}
	}
	return append(out, encodeBytes(f, splat.New(0), Options{Version: versions[0]}))
}

// FuzzRead feeds arbitrary bytes to Read. It must not panic; its errors
// must name the package and file; and a stream that reads must hold valid
// splats that survive a write and a second read within the quantisation
// bounds (boundsFor) of the fractional bits the rewrite chose.
func FuzzRead(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkRead(t, data) })
}

// FuzzReadPayload is FuzzRead with the mutations made inside the gzip
// layer: most mutations of a compressed file only break its checksum, so
// this is the fuzzer that exercises the header and array checks.
func FuzzReadPayload(f *testing.F) {
	for _, s := range gzipSeeds(f) {
		f.Add(gunzip(f, s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) { checkRead(t, gzipBytes(t, payload)) })
}

func checkRead(t *testing.T, data []byte) {
	g, info, err := Read(bytes.NewReader(data), "fuzz.spz")
	if err != nil {
		if !strings.HasPrefix(err.Error(), "spz: fuzz.spz: ") {
			t.Fatalf("error without package and file: %v", err)
		}
		return
	}
	if err := g.Validate(); err != nil {
		t.Fatalf("read gave invalid splats: %v", err)
	}
	if g.Len() != info.Count || info.SHDegree < 0 || info.SHDegree > maxFileDegree {
		t.Fatalf("%d splats, info %+v", g.Len(), info)
	}
	var buf bytes.Buffer
	deg := min(info.SHDegree, splat.MaxSHDegree)
	if err := Write(&buf, g, Options{SHDegree: deg, Version: info.Version, Antialiased: info.Antialiased}); err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	back, info2, err := Read(&buf, "back.spz")
	if err != nil {
		t.Fatalf("reading the rewrite: %v", err)
	}
	if info2.Count != info.Count || info2.SHDegree != deg || info2.Version != info.Version || info2.Antialiased != info.Antialiased {
		t.Fatalf("rewrite info %+v, first read %+v", info2, info)
	}
	within(t, back, g, deg, boundsFor(info.Version, info2.FractionalBits))
}

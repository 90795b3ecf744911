package gltfsplat

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// FuzzRead feeds arbitrary bytes to Read, seeded with files this package's
// writer made at every SH degree. Read must not panic; its errors must
// name the package and file; and a file that reads must hold valid splats
// that survive a write and a second read as the format keeps them (same).
func FuzzRead(f *testing.F) {
	for deg := 0; deg <= splat.MaxSHDegree; deg++ {
		f.Add(encodeBytes(f, randomScene(sceneSeed, 3, deg), Options{SHDegree: deg}))
	}
	f.Add(encodeBytes(f, randomScene(sceneSeed, 1, 0), Options{}))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, info, err := Read(bytes.NewReader(data), "fuzz.glb")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gltfsplat: fuzz.glb: ") {
				t.Fatalf("error without package and file: %v", err)
			}
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("read gave invalid splats: %v", err)
		}
		if g.Len() != info.Count || info.SHDegree < 0 || info.SHDegree > splat.MaxSHDegree {
			t.Fatalf("%d splats, info %+v", g.Len(), info)
		}
		var buf bytes.Buffer
		if err := Write(&buf, g, Options{SHDegree: info.SHDegree}); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		back, info2, err := Read(&buf, "back.glb")
		if err != nil {
			t.Fatalf("reading the rewrite: %v", err)
		}
		if info2.Count != info.Count || info2.SHDegree != info.SHDegree {
			t.Fatalf("rewrite info %+v, first read %+v", info2, info)
		}
		same(t, back, g, info.SHDegree)
	})
}

package ply

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// randomGaussians fills n splats with every coefficient set, so that a
// write at a lower degree has something to drop.
func randomGaussians(n int) *splat.Gaussians {
	rng := rand.New(rand.NewPCG(testSeed, 7))
	g := splat.New(n)
	for _, f := range g.Fields() {
		for j := range f.Data {
			f.Data[j] = float32(rng.NormFloat64())
		}
	}
	return g
}

func TestWriteHeader(t *testing.T) {
	for d := 0; d <= 3; d++ {
		var buf bytes.Buffer
		if err := Write(&buf, randomGaussians(2), d); err != nil {
			t.Fatal(err)
		}
		want := "ply\nformat binary_little_endian 1.0\nelement vertex 2\n"
		names := inriaNames(d)
		for _, n := range names {
			want += "property float " + n + "\n"
		}
		want += "end_header\n"
		got := buf.String()
		if !strings.HasPrefix(got, want) {
			t.Fatalf("degree %d: header\n%s\nwant\n%s", d, got[:min(len(got), len(want))], want)
		}
		if len(got) != len(want)+2*4*len(names) {
			t.Errorf("degree %d: %d bytes, want %d", d, len(got), len(want)+2*4*len(names))
		}
	}
}

// Header comments go after the format line, the reader skips them, and one with a line break
// (which would end the header early) is refused.
func TestWriteComments(t *testing.T) {
	g := randomGaussians(3)
	var buf bytes.Buffer
	if err := Write(&buf, g, 1, "rlxsplat run 20261205T083000Z-a1b2c3", "second"); err != nil {
		t.Fatal(err)
	}
	want := "ply\nformat binary_little_endian 1.0\ncomment rlxsplat run 20261205T083000Z-a1b2c3\ncomment second\nelement vertex 3\n"
	if !strings.HasPrefix(buf.String(), want) {
		t.Errorf("header starts %q, want %q", buf.String()[:len(want)], want)
	}
	path := filepath.Join(t.TempDir(), "c.ply")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	back, _, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Len() != 3 || back.Means[4] != g.Means[4] {
		t.Errorf("read back %d splats", back.Len())
	}
	for _, bad := range []string{"a\nend_header", "b\r"} {
		buf.Reset()
		if err := Write(&buf, g, 1, bad); err == nil || !strings.Contains(err.Error(), "line break") || buf.Len() != 0 {
			t.Errorf("comment %q: %v, %d bytes", bad, err, buf.Len())
		}
	}
}

// TestWriteLayout decodes the written bytes with the tests' own reader and
// checks each property's value, f_rest channel-major and normals zero.
func TestWriteLayout(t *testing.T) {
	g := randomGaussians(3)
	for i := 0; i < 3; i++ {
		for k := 0; k < 16; k++ {
			for c := 0; c < 3; c++ {
				g.SH[(i*16+k)*3+c] = float32(1000*i + 10*k + c)
			}
		}
	}
	for d := 0; d <= 3; d++ {
		var buf bytes.Buffer
		if err := Write(&buf, g, d); err != nil {
			t.Fatal(err)
		}
		names, rows := decodeFloatLE(t, buf.Bytes())
		km1 := splat.NumCoeffs(d) - 1
		for i, row := range rows {
			for k, n := range names {
				var want float32
				var j, a int
				switch {
				case n == "x" || n == "y" || n == "z":
					want = g.Means[3*i+int(n[0]-'x')]
				case n == "nx" || n == "ny" || n == "nz":
					want = 0
				case sscan(n, "f_dc_%d", &a):
					want = float32(1000*i + a)
				case sscan(n, "f_rest_%d", &j):
					want = float32(1000*i + 10*(j%km1+1) + j/km1)
				case n == "opacity":
					want = g.OpacityLogits[i]
				case sscan(n, "scale_%d", &a):
					want = g.LogScales[3*i+a]
				case sscan(n, "rot_%d", &a):
					want = g.Quats[4*i+a]
				default:
					t.Fatalf("unexpected property %s", n)
				}
				if float32(row[k]) != want {
					t.Errorf("degree %d splat %d %s = %v, want %v", d, i, n, row[k], want)
				}
			}
		}
	}
}

func sscan(s, format string, v *int) bool {
	n, err := fmt.Sscanf(s, format, v)
	return err == nil && n == 1 && fmt.Sprintf(format, *v) == s
}

func TestWriteReadRoundTrip(t *testing.T) {
	g := randomGaussians(50)
	for d := 0; d <= 3; d++ {
		var buf bytes.Buffer
		if err := Write(&buf, g, d); err != nil {
			t.Fatal(err)
		}
		got, info, err := Read(&buf, "rt.ply")
		if err != nil {
			t.Fatal(err)
		}
		if info.SHDegree != d || info.Count != 50 || info.Format != "binary_little_endian" || info.Extra != nil {
			t.Errorf("info %+v", info)
		}
		want := g.Clone()
		k := splat.NumCoeffs(d)
		for i := 0; i < 50; i++ {
			clear(want.SH[(i*16+k)*3 : (i+1)*48])
		}
		sameBits(t, got, want)
	}
}

func TestWriteErrors(t *testing.T) {
	nan := randomGaussians(3)
	nan.OpacityLogits[2] = float32(math.NaN())
	short := randomGaussians(3)
	short.Quats = short.Quats[:11]
	cases := []struct {
		name   string
		g      *splat.Gaussians
		degree int
		want   string
	}{
		{"degree 4", randomGaussians(1), 4, "ply: write: SH degree 4, want 0..3"},
		{"degree -1", randomGaussians(1), -1, "ply: write: SH degree -1, want 0..3"},
		{"NaN", nan, 3, "ply: write: splat: opacity_logits of splat 2 is NaN"},
		{"lengths", short, 3, "ply: write: splat: quats has 11 values, want 12"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		err := Write(&buf, c.g, c.degree)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error", c.name, buf.Len())
		}
	}
	w := failingWriter{after: 100}
	if err := Write(&w, randomGaussians(10), 3); err == nil || !errors.Is(err, errDisk) {
		t.Errorf("failing writer: %v", err)
	}
}

var errDisk = errors.New("disk full")

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.after {
		n := f.after
		f.after = 0
		return n, errDisk
	}
	f.after -= len(p)
	return len(p), nil
}

// tempFiles lists the leftovers of writeAtomic in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".*.tmp*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "point_cloud.ply")
	g := randomGaussians(20)
	if err := WriteFile(path, g, 2); err != nil {
		t.Fatal(err)
	}
	// Overwrite with another degree: the new file replaces the old one.
	if err := WriteFile(path, g, 3); err != nil {
		t.Fatal(err)
	}
	got, info, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.SHDegree != 3 {
		t.Errorf("degree %d", info.SHDegree)
	}
	sameBits(t, got, g)
	if l := tempFiles(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
	if st, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && st.Mode().Perm() != 0o644) {
		t.Errorf("stat: %v %v", st.Mode(), err)
	}
	// A failed write leaves the old file as it was and no temporary file.
	bad := randomGaussians(5)
	bad.Means[4] = float32(math.Inf(1))
	err = WriteFile(path, bad, 3)
	if err == nil || !strings.HasPrefix(err.Error(), "ply: write "+path+": splat: means of splat 1 is +Inf") {
		t.Errorf("bad write: %v", err)
	}
	if again, _, err := ReadFile(path); err != nil || again.Len() != 20 {
		t.Errorf("old file after a failed write: %v", err)
	}
	if l := tempFiles(t, dir); len(l) != 0 {
		t.Errorf("temporary files left: %v", l)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x.ply"), g, 3); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing directory: %v", err)
	}
}

// TestWriteAtomicCrash stands for a crash after the temporary file is
// complete but before the rename: the old file must still be intact.
func TestWriteAtomicCrash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "scene.ply")
	old := randomGaussians(4)
	if err := WriteFile(path, old, 1); err != nil {
		t.Fatal(err)
	}
	crash := errors.New("crash")
	var tmpSeen string
	err := writeAtomic(path, func(w io.Writer) error { return encode(w, randomGaussians(9), 3, nil) }, func(tmp string) error {
		tmpSeen = tmp
		if _, _, err := ReadFile(tmp); err != nil {
			t.Errorf("temporary file is not complete before the rename: %v", err)
		}
		return crash
	})
	if !errors.Is(err, crash) {
		t.Fatalf("err = %v", err)
	}
	if filepath.Dir(tmpSeen) != dir || !strings.HasPrefix(filepath.Base(tmpSeen), ".scene.ply.tmp") {
		t.Errorf("temporary file %s is not a hidden sibling of %s", tmpSeen, path)
	}
	g, info, err := ReadFile(path)
	if err != nil || info.SHDegree != 1 || g.Len() != 4 {
		t.Fatalf("old file after the crash: %v %+v", err, info)
	}
}

func TestWriteEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, splat.New(0), 0); err != nil {
		t.Fatal(err)
	}
	g, info, err := Read(&buf, "empty.ply")
	if err != nil || g.Len() != 0 || info.Count != 0 {
		t.Errorf("%v %+v", err, info)
	}
}

// TestWriteLittleEndian pins the byte order on any host.
func TestWriteLittleEndian(t *testing.T) {
	g := splat.New(1)
	g.Means[0] = 1.5
	var buf bytes.Buffer
	if err := Write(&buf, g, 0); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	body := b[bytes.Index(b, []byte("end_header\n"))+11:]
	if got := binary.LittleEndian.Uint32(body); got != math.Float32bits(1.5) {
		t.Errorf("x bytes % x", body[:4])
	}
}

package ckpt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// sample is a small checkpoint with one section of each kind, an empty one
// and awkward values (NaN, −0, the largest uint64).
func sample() *File {
	var f File
	f.PutFloat32("means", []float32{1, -2.5, float32(math.Inf(1)), float32(math.Copysign(0, -1)), math.MaxFloat32, math.SmallestNonzeroFloat32})
	f.PutUint64("step", []uint64{12345})
	f.PutBytes("config.yaml", []byte("iterations: 30000\n"))
	f.PutUint64("rng", []uint64{0, math.MaxUint64, 1 << 63})
	f.PutFloat32("empty", nil)
	f.PutBytes("ünïcode/名前", []byte{0, 1, 2})
	return &f
}

func encoded(t testing.TB, f *File) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := encode(&buf, f); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodeBytes(b []byte) (*File, error) {
	return decode(bytes.NewReader(b), "test.ckpt", int64(len(b)))
}

// equal fails unless a and b hold the same sections, bit for bit, in order.
func equal(t testing.TB, a, b *File) {
	t.Helper()
	if !reflect.DeepEqual(a.Names(), b.Names()) {
		t.Fatalf("names %q, want %q", a.Names(), b.Names())
	}
	for i := range a.sections {
		x, y := &a.sections[i], &b.sections[i]
		if x.kind != y.kind || x.count() != y.count() {
			t.Fatalf("section %q: %s×%d, want %s×%d", x.name, x.kind, x.count(), y.kind, y.count())
		}
		for j := range x.f32 {
			if math.Float32bits(x.f32[j]) != math.Float32bits(y.f32[j]) {
				t.Fatalf("section %q[%d] = %v, want %v", x.name, j, x.f32[j], y.f32[j])
			}
		}
		if !reflect.DeepEqual(x.u64, y.u64) && x.count() > 0 || !bytes.Equal(x.b, y.b) {
			t.Fatalf("section %q differs", x.name)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	f := sample()
	f.PutFloat32("nan", []float32{float32(math.NaN())})
	path := filepath.Join(t.TempDir(), "step-00100.ckpt")
	if err := WriteFile(path, f); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, f)
	steps, err := got.Uint64("step")
	if err != nil || !reflect.DeepEqual(steps, []uint64{12345}) {
		t.Errorf("step %v %v", steps, err)
	}
	cfg, err := got.Bytes("config.yaml")
	if err != nil || string(cfg) != "iterations: 30000\n" {
		t.Errorf("config %q %v", cfg, err)
	}
	if e, err := got.Float32("empty"); err != nil || len(e) != 0 {
		t.Errorf("empty %v %v", e, err)
	}
	if k, ok := got.Kind("rng"); !ok || k != KindUint64 {
		t.Errorf("kind %v %v", k, ok)
	}
	// Writing what was read gives the same bytes: the encoding is canonical.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encoded(t, got), raw) {
		t.Error("re-encoding a read checkpoint changed its bytes")
	}
}

// TestLayout pins the header and the first section byte for byte, so that
// the documented format and the code cannot drift apart.
func TestLayout(t *testing.T) {
	var f File
	f.PutUint64("ab", []uint64{0x0102030405060708})
	b := encoded(t, &f)
	want := []byte("RLXCKPT\x00")
	want = append(want, 1, 0, 0, 0, 1, 0, 0, 0) // version 1, 1 section
	sec := []byte{byte(KindUint64), 2, 0, 'a', 'b', 1, 0, 0, 0, 0, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1}
	want = append(want, sec...)
	want = binary.LittleEndian.AppendUint32(want, crc32.Checksum(sec, crc32.MakeTable(crc32.Castagnoli)))
	want = binary.LittleEndian.AppendUint32(want, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli)))
	if !bytes.Equal(b, want) {
		t.Errorf("encoding\n% x\nwant\n% x", b, want)
	}
}

func TestPutReplaces(t *testing.T) {
	f := sample()
	f.PutBytes("step", []byte("x"))
	if !reflect.DeepEqual(f.Names(), []string{"means", "step", "config.yaml", "rng", "empty", "ünïcode/名前"}) {
		t.Errorf("names %q", f.Names())
	}
	if _, err := f.Uint64("step"); err == nil || err.Error() != `ckpt: section "step" holds bytes, not uint64` {
		t.Errorf("%v", err)
	}
}

func TestGetterErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.ckpt")
	if err := WriteFile(path, sample()); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		get  func() error
		want string
	}{
		{func() error { _, err := f.Float32("adam_m"); return err }, `ckpt: ` + path + `: no section "adam_m"`},
		{func() error { _, err := f.Uint64("means"); return err }, `ckpt: ` + path + `: section "means" holds float32, not uint64`},
		{func() error { _, err := f.Bytes("rng"); return err }, `ckpt: ` + path + `: section "rng" holds uint64, not bytes`},
		{func() error { _, err := f.Float32("config.yaml"); return err }, `ckpt: ` + path + `: section "config.yaml" holds bytes, not float32`},
	}
	for _, c := range cases {
		if err := c.get(); err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
	var empty File
	if _, err := empty.Bytes("x"); err == nil || err.Error() != `ckpt: no section "x"` {
		t.Errorf("%v", err)
	}
}

func TestWriteBadNames(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"", "empty section name"},
		{strings.Repeat("n", MaxNameLen+1), "is 1025 bytes, more than 1024"},
		{"bad\xff", `section name "bad\xff" is not valid UTF-8`},
	} {
		var f File
		f.PutBytes("ok", nil)
		f.PutBytes(c.name, []byte{1})
		path := filepath.Join(t.TempDir(), "x.ckpt")
		err := WriteFile(path, &f)
		if err == nil || !strings.HasPrefix(err.Error(), "ckpt: write "+path+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.10q: %v, want %q", c.name, err, c.want)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a failed write left %s: %v", path, err)
		}
	}
	var f File
	f.PutBytes(strings.Repeat("n", MaxNameLen), nil)
	if _, err := decodeBytes(encoded(t, &f)); err != nil {
		t.Errorf("longest name: %v", err)
	}
}

// TestTruncated checks that every prefix of a small checkpoint is refused,
// as truncation, at the offset where the data ran out.
func TestTruncated(t *testing.T) {
	b := encoded(t, sample())
	for n := 0; n < len(b); n++ {
		_, err := decodeBytes(b[:n])
		if err == nil {
			t.Fatalf("prefix of %d bytes: no error", n)
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(err.Error(), "ckpt: test.ckpt: byte ") {
			t.Fatalf("prefix of %d bytes: %v", n, err)
		}
	}
	// Named cases: where the message points.
	for _, c := range []struct {
		n    int
		want string
	}{
		{5, "byte 5: magic: file is truncated"},
		{16, "byte 12: section count 6 cannot fit in the 0 bytes that follow"},
		{len(b) - 2, fmt.Sprintf(`section "ünïcode/名前" (#5): length 3 (1-byte elements) does not fit, with the section and file CRCs, in the %d bytes left`, 11-2)},
		{-2, "byte 18: file CRC: file is truncated"},
	} {
		x := b[:max(c.n, 0)]
		if c.n < 0 {
			empty := encoded(t, &File{})
			x = empty[:len(empty)+c.n]
		}
		_, err := decodeBytes(x)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("prefix %d: %v, want %q", c.n, err, c.want)
		}
	}
}

// TestCorrupted flips every bit of a small checkpoint in turn: each must be
// refused.
func TestCorrupted(t *testing.T) {
	b := encoded(t, sample())
	for i := range b {
		for bit := 0; bit < 8; bit++ {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			if _, err := decodeBytes(c); err == nil {
				t.Fatalf("byte %d bit %d flipped: no error", i, bit)
			}
		}
	}
	// Named cases: what the message says.
	means := 16 + 3 + len("means") + 8 // first payload byte of "means"
	payloadEnd := means + 6*4
	for _, c := range []struct {
		at   int
		want string
	}{
		{0, "byte 0: not an rlxsplat checkpoint"},
		{8, "byte 8: unsupported version 0 (this build reads version 1)"},
		{means, fmt.Sprintf(`byte %d: section "means" (#0) (starting at byte 16): CRC mismatch`, payloadEnd)},
		{16, "byte 16: section #0: unknown kind 254"},
		{len(b) - 1, fmt.Sprintf("byte %d: file CRC mismatch", len(b)-4)},
	} {
		x := bytes.Clone(b)
		x[c.at] ^= 0xff
		if c.at == 8 {
			x[8] = 0
		}
		_, err := decodeBytes(x)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("byte %d: %v\n  want %q", c.at, err, c.want)
		}
	}
	// A length too large for the file, with an otherwise valid section
	// header, is refused before anything is allocated.
	x := bytes.Clone(b)
	binary.LittleEndian.PutUint64(x[16+3+len("means"):], 1<<60)
	_, err := decodeBytes(x)
	if err == nil || !strings.Contains(err.Error(), `byte 24: section "means" (#0): length 1152921504606846976 (4-byte elements) does not fit`) {
		t.Errorf("huge length: %v", err)
	}
	// Data after the end.
	_, err = decodeBytes(append(bytes.Clone(b), 0))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("byte %d: unexpected data after the end", len(b))) {
		t.Errorf("trailing byte: %v", err)
	}
}

func TestDuplicateSectionInFile(t *testing.T) {
	var f File
	f.PutBytes("a", []byte{1})
	f.PutBytes("b", []byte{2})
	f.sections[1].name = "a" // only possible by hand: Put replaces
	_, err := decodeBytes(encoded(t, &f))
	if err == nil || !strings.Contains(err.Error(), `section #1: second section named "a"`) {
		t.Errorf("%v", err)
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadFile(filepath.Join(dir, "none.ckpt")); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "ckpt: open ") {
		t.Errorf("absent: %v", err)
	}
	if _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	path := filepath.Join(dir, "bad.ckpt")
	if err := os.WriteFile(path, []byte("PK\x03\x04 a zip, not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path); err == nil || !strings.HasPrefix(err.Error(), "ckpt: "+path+": byte 0: not an rlxsplat checkpoint") {
		t.Errorf("zip: %v", err)
	}
}

// TestLarge crosses the 64 KiB chunk of the payload loops.
func TestLarge(t *testing.T) {
	var f File
	v := make([]float32, 100_003)
	u := make([]uint64, 20_001)
	for i := range v {
		v[i] = float32(i) * 0.5
	}
	for i := range u {
		u[i] = uint64(i) * 0x9E3779B97F4A7C15
	}
	f.PutFloat32("v", v)
	f.PutUint64("u", u)
	got, err := decodeBytes(encoded(t, &f))
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, &f)
}

func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".*.tmp*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestInterruptedWrite stands for crashes during WriteFile: while the
// temporary file is being written, and after it is complete but before the
// rename. Either way the old checkpoint stays at path, intact.
func TestInterruptedWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "step-01000.ckpt")
	old := sample()
	if err := WriteFile(path, old); err != nil {
		t.Fatal(err)
	}
	next := sample()
	next.PutUint64("step", []uint64{2000})

	// 1. The writer fails half way (a full disk).
	errFull := errors.New("no space left on device")
	err := writeAtomic(path, func(w io.Writer) error {
		if _, err := w.Write(encoded(t, next)[:40]); err != nil {
			return err
		}
		return errFull
	}, nil)
	if !errors.Is(err, errFull) {
		t.Fatalf("err = %v", err)
	}
	if l := tempFiles(t, dir); len(l) != 0 {
		t.Errorf("temporary files left after a failed write: %v", l)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, old)

	// 2. The process dies after the temporary file is synced, before the
	// rename: the hook keeps a copy of the temporary file, as a crash
	// would leave it, and stops the write there.
	crash := errors.New("crash")
	kept := filepath.Join(dir, "left-over")
	err = writeAtomic(path, func(w io.Writer) error { return encode(w, next) }, func(tmp string) error {
		if filepath.Dir(tmp) != dir || !strings.HasPrefix(filepath.Base(tmp), ".step-01000.ckpt.tmp") {
			t.Errorf("temporary file %s is not a hidden sibling of %s", tmp, path)
		}
		if err := os.Link(tmp, kept); err != nil {
			return err
		}
		return crash
	})
	if !errors.Is(err, crash) {
		t.Fatalf("err = %v", err)
	}
	got, err = ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, old)
	// What the crash left behind is the complete new checkpoint.
	left, err := ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, left, next)

	// 3. A normal write replaces the file.
	if err := WriteFile(path, next); err != nil {
		t.Fatal(err)
	}
	got, err = ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, got, next)
	if st, err := os.Stat(path); err != nil || (runtime.GOOS != "windows" && st.Mode().Perm() != 0o644) {
		t.Errorf("mode %v %v", st.Mode(), err)
	}
	if err := WriteFile(filepath.Join(dir, "no", "such", "dir.ckpt"), next); err == nil || !strings.HasPrefix(err.Error(), "ckpt: write ") {
		t.Errorf("missing directory: %v", err)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindFloat32: "float32", KindUint64: "uint64", KindBytes: "bytes", 9: "kind(9)"} {
		if k.String() != want {
			t.Errorf("%d: %q", k, k.String())
		}
	}
}

// FuzzRead feeds arbitrary bytes to the reader. It must not panic or
// allocate beyond the input's size, and whatever it accepts must encode
// back to exactly the same bytes (the format has one encoding per content).
func FuzzRead(f *testing.F) {
	f.Add(encoded(f, sample()))
	f.Add(encoded(f, &File{}))
	var one File
	one.PutFloat32("means", []float32{1, 2, 3})
	f.Add(encoded(f, &one))
	b := encoded(f, sample())
	f.Add(b[:len(b)/2])
	f.Add([]byte("RLXCKPT\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeBytes(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "ckpt: test.ckpt: byte ") {
				t.Fatalf("error without file and offset: %v", err)
			}
			return
		}
		if again := encoded(t, got); !bytes.Equal(again, data) {
			t.Fatalf("accepted input re-encodes differently:\n% x\n% x", data, again)
		}
	})
}

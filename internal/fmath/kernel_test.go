package fmath

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rlxsplat/rlxsplat/shaders"
)

// harness evaluates shaders/common.h's functions on float32 bit patterns read from stdin,
// writing exp32, log32, sigmoidd, sqrtd of each to stdout.
const harness = `#include "prelude_emu.h"
#include "common.h"
int main()
{
    u32 b;
    while (fread(&b, 4, 1, stdin) == 1) {
        float x = bits_f32(b);
        float o[4] = {exp32(x), log32(x), sigmoidd(x), sqrtd(x)};
        fwrite(o, 4, 4, stdout);
    }
    return 0;
}
`

// TestKernelTwins compiles the kernels' exp32, log32, sigmoidd and sqrtd with g++ through the
// host emulator's prelude (as the emulated engine does: no contraction) and requires the bits
// of this package's functions on special values, every exponent and random inputs.
func TestKernelTwins(t *testing.T) {
	bin := buildHarness(t, harness)
	var xs []float32
	for _, x := range []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 2, 88, 88.72, 88.73, 89, -87, -87.5, -89, 1e-45, 1e-40,
		math.MaxFloat32, math.Inf(1), math.Inf(-1), math.NaN(), 1.41421356, 0.70710678} {
		xs = append(xs, float32(x))
	}
	for e := uint32(0); e < 256; e++ {
		xs = append(xs, math.Float32frombits(e<<23|0x2a5a5a), math.Float32frombits(e<<23|0x80000000|0x155555))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		xs = append(xs, math.Float32frombits(rng.Uint32()), float32(rng.NormFloat64()*10), rng.Float32()*4)
	}
	in := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(in[4*i:], math.Float32bits(x))
	}
	cmd := exec.Command(bin)
	cmd.Stdin = bytesReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 16*len(xs) {
		t.Fatalf("harness wrote %d bytes, want %d", len(out), 16*len(xs))
	}
	bad := 0
	for i, x := range xs {
		want := [4]float32{Exp(x), Log(x), Sigmoid(x), float32(math.Sqrt(float64(x)))}
		for k, name := range []string{"exp32", "log32", "sigmoidd", "sqrtd"} {
			got := math.Float32frombits(binary.LittleEndian.Uint32(out[16*i+4*k:]))
			if want[k] != want[k] && got != got {
				continue // NaN both: payloads may differ
			}
			if math.Float32bits(got) != math.Float32bits(want[k]) {
				if bad < 10 {
					t.Errorf("%s(%v) = %v (%#x), Go twin %v (%#x)", name, x, got, math.Float32bits(got), want[k], math.Float32bits(want[k]))
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d results differ from the Go twins", bad)
	}
}

// buildHarness compiles src with every shader header beside it, with g++ through the host
// emulator's prelude (as the emulated engine does: no contraction), and returns the binary.
func buildHarness(t *testing.T, src string) string {
	t.Helper()
	if _, err := exec.LookPath("g++"); err != nil {
		t.Skip("no g++ to compile the kernel functions on the host")
	}
	dir := t.TempDir()
	// Every header, not a list: common.h's own includes (abi.h, …) change with the kernels.
	headers, err := fs.Glob(shaders.Sources(), "*.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range headers {
		b, err := fs.ReadFile(shaders.Sources(), name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cpp, bin := filepath.Join(dir, "twins.cpp"), filepath.Join(dir, "twins")
	if err := os.WriteFile(cpp, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("g++", "-std=c++17", "-O1", "-ffp-contract=off", "-o", bin, cpp).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, out)
	}
	return bin
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// normalHarness evaluates shaders/common.h's normal_key and normal32 on (seed, step, splat,
// axis) tuples read from stdin, writing the key and the sample of each.
const normalHarness = `#include "prelude_emu.h"
#include "common.h"
int main()
{
    u32 in[5];
    while (fread(in, 4, 5, stdin) == 5) {
        u32 key = normal_key(in[0], in[1], in[2], in[3], in[4]);
        float x = normal32(key);
        fwrite(&key, 4, 1, stdout);
        fwrite(&x, 4, 1, stdout);
    }
    return 0;
}
`

// TestNormalKernelTwin requires the kernels' normal_key and normal32 to give NormalKey's and
// Normal's bits, over random coordinates (including seeds above 2³² and large steps).
func TestNormalKernelTwin(t *testing.T) {
	bin := buildHarness(t, normalHarness)
	rng := rand.New(rand.NewPCG(7, 7))
	type tuple struct {
		seed              uint64
		step, splat, axis uint32
	}
	var in []byte
	var ts []tuple
	for i := range 50000 {
		tu := tuple{rng.Uint64(), rng.Uint32() % 40000, uint32(i), uint32(i % 3)}
		if i%5 == 0 {
			tu.seed = uint64(rng.IntN(100))
		}
		ts = append(ts, tu)
		for _, v := range []uint32{uint32(tu.seed), uint32(tu.seed >> 32), tu.step, tu.splat, tu.axis} {
			in = binary.LittleEndian.AppendUint32(in, v)
		}
	}
	cmd := exec.Command(bin)
	cmd.Stdin = bytesReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 8*len(ts) {
		t.Fatalf("harness wrote %d bytes, want %d", len(out), 8*len(ts))
	}
	bad := 0
	for i, tu := range ts {
		key := NormalKey(tu.seed, tu.step, tu.splat, tu.axis)
		gotKey := binary.LittleEndian.Uint32(out[8*i:])
		got := binary.LittleEndian.Uint32(out[8*i+4:])
		if gotKey != key || got != math.Float32bits(Normal(key)) {
			if bad < 10 {
				t.Errorf("%+v: kernel key %#x sample %v, Go %#x %v", tu, gotKey, math.Float32frombits(got), key, Normal(key))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d samples differ from the Go twins", bad, len(ts))
	}
}

//go:build linux || darwin

package mslhost

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/fakemtl"
)

// testMSL exercises what the kernels rely on: threadgroup arrays shared by a block, barriers,
// SIMD-group shuffles, ballots and prefix sums, device atomics, builtins, inline bytes, and a
// launch-bound attribute before the declaration.
const testMSL = `// test unit for Metal
#pragma METAL fp contract(off)
#include <metal_stdlib>
using namespace metal;

kernel void blocksum(device const float* x [[buffer(0)]],
    device float* out [[buffer(1)]],
    constant uint& n [[buffer(2)]],
    uint tid [[thread_position_in_threadgroup]],
    uint bid [[threadgroup_position_in_grid]],
    uint bdim [[threads_per_threadgroup]])
{
    SHARED float t[256];
    uint i = bid * bdim + tid;
    t[tid] = i < n ? x[i] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        float s = 0.0f;
        for (uint k = 0; k < bdim; k++) s += t[k];
        out[bid] = s;
    }
}

[[max_total_threads_per_threadgroup(64)]] kernel void simd(device const float* x [[buffer(0)]],
    device uint* out [[buffer(1)]],
    device atomic_uint* count [[buffer(2)]],
    uint gid [[thread_position_in_grid]],
    uint lane [[thread_index_in_simdgroup]])
{
    float v = x[gid];
    float w = simd_shuffle_xor(v, (ushort)1);
    uint ballot = (uint)static_cast<simd_vote::vote_t>(simd_ballot(v > 0.5f));
    uint pre = simd_prefix_exclusive_sum(1u);
    out[gid * 4 + 0] = as_type<uint>(w);
    out[gid * 4 + 1] = ballot;
    out[gid * 4 + 2] = pre == lane ? 1u : 0u;
    out[gid * 4 + 3] = simd_sum(1u);
    atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
}
`

func newCompiler(t *testing.T) *Compiler {
	t.Helper()
	c, err := New(t.TempDir())
	if err != nil {
		t.Skipf("no host C++ compiler: %v", err)
	}
	return c
}

func f32s(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func u32(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }

func TestKernelsRunWithMetalMeaning(t *testing.T) {
	c := newCompiler(t)
	lib, err := c.Compile(testMSL)
	if err != nil {
		t.Fatal(err)
	}
	const n, block = 300, 64
	x := make([]float32, 320)
	for i := range x {
		x[i] = float32(i%7) / 6
	}

	bs, err := lib.Function("blocksum")
	if err != nil {
		t.Fatal(err)
	}
	if bs.MaxThreads() != 1024 {
		t.Errorf("blocksum: MaxThreads %d, want Apple's default 1024", bs.MaxThreads())
	}
	out := make([]byte, 4*5)
	nb := make([]byte, 4)
	binary.LittleEndian.PutUint32(nb, n)
	if err := bs.Dispatch([3]uint32{5, 1, 1}, [3]uint32{block, 1, 1}, []fakemtl.Binding{
		{Index: 0, Data: f32s(x)}, {Index: 1, Data: out}, {Index: 2, Data: nb, Inline: true}}, nil); err != nil {
		t.Fatal(err)
	}
	for g := 0; g < 5; g++ {
		var want float32
		for k := 0; k < block; k++ {
			if i := g*block + k; i < n {
				want += x[i]
			}
		}
		if got := math.Float32frombits(u32(out, g)); got != want {
			t.Errorf("blocksum[%d] = %v, want %v (threads of a block must share the threadgroup array)", g, got, want)
		}
	}

	sd, err := lib.Function("simd")
	if err != nil {
		t.Fatal(err)
	}
	if sd.MaxThreads() != 64 {
		t.Errorf("simd: MaxThreads %d, want the attribute's 64", sd.MaxThreads())
	}
	res := make([]byte, 4*4*128)
	count := make([]byte, 4)
	if err := sd.Dispatch([3]uint32{2, 1, 1}, [3]uint32{block, 1, 1}, []fakemtl.Binding{
		{Index: 0, Data: f32s(x)}, {Index: 1, Data: res}, {Index: 2, Data: count}}, nil); err != nil {
		t.Fatal(err)
	}
	for gid := 0; gid < 128; gid++ {
		if got, want := math.Float32frombits(u32(res, gid*4)), x[gid^1]; got != want {
			t.Errorf("lane %d: simd_shuffle_xor(v, 1) = %v, want %v", gid, got, want)
		}
		var ballot uint32
		for l := 0; l < 32; l++ {
			if x[gid&^31+l] > 0.5 {
				ballot |= 1 << l
			}
		}
		if got := u32(res, gid*4+1); got != ballot {
			t.Errorf("lane %d: ballot %#x, want %#x", gid, got, ballot)
		}
		if u32(res, gid*4+2) != 1 {
			t.Errorf("lane %d: simd_prefix_exclusive_sum(1) is not the lane index", gid)
		}
		if got := u32(res, gid*4+3); got != 32 {
			t.Errorf("lane %d: simd_sum(1) = %d, want 32", gid, got)
		}
	}
	if got := u32(count, 0); got != 128 {
		t.Errorf("atomic count %d, want 128", got)
	}

	// A buffer the kernel declares but the encoder did not bind is an error, not a null read.
	err = sd.Dispatch([3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, []fakemtl.Binding{{Index: 0, Data: f32s(x)}, {Index: 1, Data: res}}, nil)
	if err == nil || !strings.Contains(err.Error(), "[[buffer(2)]]") {
		t.Errorf("dispatch without buffer(2): err = %v, want one naming [[buffer(2)]]", err)
	}
}

func TestCompileErrors(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range []struct{ name, src, want string }{
		{"compiler error", "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float* x [[buffer(0)]]) { x[0] = undefined_word; }\n", "undefined_word"},
		{"a word metal_host.h lacks", "#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float* x [[buffer(0)]]) { x[0] = quad_sum(x[0]); }\n", "quad_sum"},
		{"unknown builtin", "#include <metal_stdlib>\nkernel void k(uint q [[quad_index]]) {}\n", "[[quad_index]]"},
		{"unnamed attribute-less parameter", "#include <metal_stdlib>\nkernel void k(device float* x) {}\n", "no Metal attribute"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Compile(tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseKernels(t *testing.T) {
	ks, err := parseKernels(testMSL)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || ks[0].name != "blocksum" || ks[1].name != "simd" {
		t.Fatalf("kernels %+v", ks)
	}
	want := []param{{"device const float*", "buffer(0)"}, {"device float*", "buffer(1)"}, {"constant uint&", "buffer(2)"},
		{"uint", "thread_position_in_threadgroup"}, {"uint", "threadgroup_position_in_grid"}, {"uint", "threads_per_threadgroup"}}
	if len(ks[0].params) != len(want) {
		t.Fatalf("blocksum params %+v", ks[0].params)
	}
	for i, p := range want {
		if ks[0].params[i] != p {
			t.Errorf("param %d: %+v, want %+v", i, ks[0].params[i], p)
		}
	}
}

func TestNewWithoutCompiler(t *testing.T) {
	c := &Compiler{CXX: "no-such-c++-compiler"}
	if _, err := c.cxx(); err == nil {
		t.Fatal("no error for a missing compiler")
	}
}

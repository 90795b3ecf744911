package fakemtl

import (
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/metal/mtl"
)

// TestMisuseIsRecorded plants each misuse the fake exists to catch: a validator that stays
// silent would let the backend's tests pass over real bugs.
func TestMisuseIsRecorded(t *testing.T) {
	plants := []struct {
		name string
		do   func(d mtl.Device, q mtl.CommandQueue)
		want string
	}{
		{"wait uncommitted", func(_ mtl.Device, q mtl.CommandQueue) {
			cb, _ := q.CommandBuffer()
			cb.WaitUntilCompleted()
		}, "never committed"},
		{"two encoders", func(_ mtl.Device, q mtl.CommandQueue) {
			cb, _ := q.CommandBuffer()
			_, _ = cb.ComputeCommandEncoder()
			_, _ = cb.BlitCommandEncoder()
		}, "another encoder"},
		{"big setBytes", func(_ mtl.Device, q mtl.CommandQueue) {
			cb, _ := q.CommandBuffer()
			e, _ := cb.ComputeCommandEncoder()
			e.SetBytes(make([]byte, 4097), 0)
		}, "4097 bytes"},
		{"slot 31", func(_ mtl.Device, q mtl.CommandQueue) {
			cb, _ := q.CommandBuffer()
			e, _ := cb.ComputeCommandEncoder()
			e.SetBytes([]byte{1}, 31)
		}, "index 31"},
		{"threadgroup step", func(_ mtl.Device, q mtl.CommandQueue) {
			cb, _ := q.CommandBuffer()
			e, _ := cb.ComputeCommandEncoder()
			e.SetThreadgroupMemoryLength(20, 0)
		}, "multiple of 16"},
		{"use after release", func(d mtl.Device, _ mtl.CommandQueue) {
			b, _ := d.NewBuffer(8, mtl.ResourceStorageModeShared)
			b.Release()
			b.Contents()
		}, "released buffer"},
		{"encode after commit", func(_ mtl.Device, q mtl.CommandQueue) {
			cb, _ := q.CommandBuffer()
			cb.Commit()
			_, _ = cb.BlitCommandEncoder()
		}, "already committed"},
	}
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			rt := New(Options{})
			pool := rt.PushPool()
			d, _ := rt.DefaultDevice()
			q, _ := d.NewCommandQueue()
			p.do(d, q)
			pool.Drain()
			m := rt.Stats().Misuse
			if len(m) == 0 || !strings.Contains(strings.Join(m, "\n"), p.want) {
				t.Fatalf("misuse %q, want %q", m, p.want)
			}
		})
	}
	rt := New(Options{})
	if _, err := rt.DefaultDevice(); err != nil {
		t.Fatal(err)
	}
	if m := rt.Stats().Misuse; len(m) != 1 || !strings.Contains(m[0], "outside an autorelease pool") {
		t.Fatalf("a call outside a pool: misuse %q", m)
	}
}

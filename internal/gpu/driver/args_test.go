package driver

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

type fakeBuf struct{ size int }

func (b *fakeBuf) Size() int { return b.size }

func TestPackLayout(t *testing.T) {
	b := &fakeBuf{size: 256}
	addr := func(buf Buffer, off int) (uint64, error) { return 0x7000_0000_1000 + uint64(off), nil }
	st := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	args := []Arg{Ptr(b), PtrAt(b, 64), U32(7), I32(-3), F32(1.5), U64(1 << 40), Bytes(st)}
	p, err := Pack(args, addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Offsets) != len(args) {
		t.Fatalf("got %d offsets", len(p.Offsets))
	}
	for i, off := range p.Offsets {
		if off%argAlign != 0 {
			t.Errorf("arg %d at offset %d, not %d-aligned", i, off, argAlign)
		}
		if i > 0 && off < p.Offsets[i-1]+p.Sizes[i-1] {
			t.Errorf("arg %d overlaps arg %d", i, i-1)
		}
	}
	tests := []struct {
		i    int
		want []byte
	}{
		{0, le64(0x7000_0000_1000)},
		{1, le64(0x7000_0000_1000 + 64)},
		{2, le32(7)},
		{3, le32(uint32(0xFFFFFFFD))},
		{4, le32(math.Float32bits(1.5))},
		{5, le64(1 << 40)},
		{6, st},
	}
	for _, tc := range tests {
		if got := p.Bytes(tc.i); string(got) != string(tc.want) {
			t.Errorf("arg %d (%v): bytes %v, want %v", tc.i, args[tc.i], got, tc.want)
		}
	}
	// The packed copy of a by-value struct must not alias the caller's slice.
	st[0] = 99
	if p.Bytes(6)[0] != 1 {
		t.Error("Bytes argument aliases the caller's slice")
	}
}

func le32(v uint32) []byte { b := make([]byte, 4); binary.LittleEndian.PutUint32(b, v); return b }
func le64(v uint64) []byte { b := make([]byte, 8); binary.LittleEndian.PutUint64(b, v); return b }

func TestPackErrors(t *testing.T) {
	b := &fakeBuf{size: 16}
	ok := func(Buffer, int) (uint64, error) { return 1, nil }
	foreign := errors.New("foreign buffer")
	tests := []struct {
		name string
		args []Arg
		addr AddrFunc
		want string
	}{
		{"zero arg", []Arg{U32(1), {}}, ok, "argument 1: zero Arg"},
		{"empty struct", []Arg{Bytes(nil)}, ok, "argument 0: empty by-value struct"},
		{"nil buffer", []Arg{Ptr(nil)}, ok, "argument 0: nil buffer"},
		{"offset past end", []Arg{PtrAt(b, 17)}, ok, "offset 17 outside a 16-byte buffer"},
		{"negative offset", []Arg{PtrAt(b, -1)}, ok, "offset -1 outside"},
		{"resolver error", []Arg{F32(0), Ptr(b)}, func(Buffer, int) (uint64, error) { return 0, foreign }, "argument 1: foreign buffer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Pack(tc.args, tc.addr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCheckSignature(t *testing.T) {
	b := &fakeBuf{size: 4}
	tests := []struct {
		name   string
		params []int
		args   []Arg
		want   string // "" = ok
	}{
		{"match", []int{8, 4, 4, 12}, []Arg{Ptr(b), U32(1), F32(2), Bytes(make([]byte, 12))}, ""},
		{"count", []int{8, 4}, []Arg{Ptr(b)}, "1 arguments given, the kernel takes 2"},
		{"size", []int{8, 8}, []Arg{Ptr(b), F32(1)}, "argument 1 is f32(1) (4 bytes), the kernel's parameter 1 is 8 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSignature("saxpy", tc.params, tc.args)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "saxpy") {
				t.Fatalf("err = %v, want it to contain %q and the kernel name", err, tc.want)
			}
		})
	}
}

func TestDim3Norm(t *testing.T) {
	if got := (Dim3{4, 0, 0}).Norm(); got != (Dim3{4, 1, 1}) {
		t.Fatalf("Norm = %v", got)
	}
}

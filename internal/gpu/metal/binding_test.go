package metal

import (
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

type hostBuf struct{ n int }

func (b *hostBuf) Size() int { return b.n }

func TestPlanBindings(t *testing.T) {
	b := &hostBuf{n: 64}
	args := []driver.Arg{driver.Ptr(b), driver.U32(5), driver.PtrAt(b, 16), driver.F32(-2), driver.Bytes([]byte{9, 8, 7, 6, 5, 4, 3, 2})}
	got, err := planBindings(args)
	if err != nil {
		t.Fatal(err)
	}
	want := []binding{
		{Index: 0, Buffer: b},
		{Index: 1, Bytes: []byte{5, 0, 0, 0}},
		{Index: 2, Buffer: b, Offset: 16},
		{Index: 3, Bytes: []byte{0, 0, 0, 0xc0}},
		{Index: 4, Bytes: []byte{9, 8, 7, 6, 5, 4, 3, 2}},
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Index != w.Index || g.Buffer != w.Buffer || g.Offset != w.Offset || string(g.Bytes) != string(w.Bytes) {
			t.Errorf("binding %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestPlanBindingsLimits(t *testing.T) {
	many := make([]driver.Arg, 32)
	for i := range many {
		many[i] = driver.U32(uint32(i))
	}
	tests := []struct {
		name string
		args []driver.Arg
		want string
	}{
		{"too many", many, "32 arguments"},
		{"inline too big", []driver.Arg{driver.Bytes(make([]byte, 5000))}, "5000 bytes inline"},
		{"bad arg", []driver.Arg{{}}, "zero Arg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planBindings(tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

package mtl

import (
	"strings"
	"testing"
	"unsafe"
)

func TestSelectorTable(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range Selectors {
		if seen[s.Name] {
			t.Errorf("selector %s listed twice", s.Name)
		}
		seen[s.Name] = true
	}
}

// TestCheckCatches plants each kind of mistake the check exists for.
func TestCheckCatches(t *testing.T) {
	saved := Selectors
	defer func() { Selectors = saved }()
	plants := []struct {
		name string
		edit func()
		want string
	}{
		{"missing argument", func() { Selectors[SelSetBuffer].Args = []Kind{KindID, KindUInt} }, "3 colons but 2 arguments"},
		{"extra argument", func() { Selectors[SelCommit].Args = []Kind{KindUInt} }, "0 colons but 1 arguments"},
		{"double argument", func() { Selectors[SelSetMathMode].Args = []Kind{KindF64} }, "cannot be an argument"},
		{"string result", func() { Selectors[SelName].Ret = KindCString }, "cannot be a result"},
	}
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			Selectors = saved
			p.edit()
			err := Check()
			if err == nil || !strings.Contains(err.Error(), p.want) {
				t.Fatalf("Check() = %v, want %q", err, p.want)
			}
		})
	}
}

func TestCheckSend(t *testing.T) {
	var out ID
	tests := []struct {
		name string
		sel  Sel
		ret  Kind
		args []any
		want string // "" = accepted
	}{
		{"ok", SelSetBuffer, KindVoid, []any{ID(1), uint64(0), uint64(2)}, ""},
		{"ok structs", SelDispatchThreadgroups, KindVoid, []any{Size{1, 1, 1}, Size{32, 1, 1}}, ""},
		{"ok out param", SelNewComputePipelineState, KindID, []any{ID(1), &out}, ""},
		{"32-bit index", SelSetBuffer, KindVoid, []any{ID(1), uint64(0), uint32(2)}, "argument 2 is uint32"},
		{"int offset", SelSetBuffer, KindVoid, []any{ID(1), 0, uint64(2)}, "argument 1 is int"},
		{"short", SelSetBytes, KindVoid, []any{unsafe.Pointer(&out), uint64(8)}, "2 arguments, it takes 3"},
		{"size as array", SelDispatchThreadgroups, KindVoid, []any{[3]uint64{}, Size{}}, "argument 0 is [3]uint64"},
		{"wrong result", SelStatus, KindID, nil, "result read as kind"},
		{"not in table", numSels, KindVoid, nil, "not in the table"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSend(tc.sel, tc.ret, tc.args)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckSend = %v, want %q", err, tc.want)
			}
		})
	}
}

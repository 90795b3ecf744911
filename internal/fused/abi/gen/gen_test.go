package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi/spec"
)

// root is the repository root, from this package's directory.
const root = "../../../.."

// TestGeneratedUpToDate fails when a generated file differs from what the declaration
// generates now: edit internal/fused/abi/spec, then run go generate ./internal/fused/abi.
func TestGeneratedUpToDate(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if stale := staleFiles(root, files); len(stale) > 0 {
		t.Fatalf("stale generated files (run go generate ./internal/fused/abi): %s", strings.Join(stale, ", "))
	}
}

// TestStaleDetected shows the staleness check live: an edited file, a missing one and an
// orphan entry header are each reported.
func TestStaleDetected(t *testing.T) {
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range files {
		if err := writeAtomic(filepath.Join(dir, name), data); err != nil {
			t.Fatal(err)
		}
	}
	if stale := staleFiles(dir, files); len(stale) != 0 {
		t.Fatalf("fresh files reported stale: %v", stale)
	}
	edited := "shaders/abi.h"
	if err := os.WriteFile(filepath.Join(dir, edited), append(files[edited], "// edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := "internal/fused/abi/abi_gen.go"
	if err := os.Remove(filepath.Join(dir, missing)); err != nil {
		t.Fatal(err)
	}
	orphan := "shaders/entries/gone.h"
	if err := os.WriteFile(filepath.Join(dir, orphan), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(staleFiles(dir, files), " ")
	for _, want := range []string{edited, missing, orphan} {
		if !strings.Contains(got, want) {
			t.Errorf("%s not reported stale (got %q)", want, got)
		}
	}
}

// TestLayout checks the C layout rules against hand-computed offsets, padding included.
func TestLayout(t *testing.T) {
	d := &decl{structs: map[string]*layout{}}
	for _, s := range []spec.Struct{
		{Name: "A", Fields: []spec.Field{{Name: "x", Type: spec.I32}, {Name: "y", Type: spec.U64}, {Name: "z", Type: spec.F32, Len: 3}}},
		{Name: "B", Fields: []spec.Field{{Name: "c", Type: spec.U32}, {Name: "a", Type: "A", Len: 2}, {Name: "e", Type: spec.U32}}},
	} {
		if err := d.addStruct(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name        string
		offs        []int
		size, align int
	}{
		{"A", []int{0, 8, 16}, 32, 8},
		{"B", []int{0, 8, 72}, 80, 8},
	} {
		l := d.structs[c.name]
		if l.size != c.size || l.align != c.align || len(l.offs) != len(c.offs) {
			t.Errorf("%s: size %d align %d offsets %v, want %d %d %v", c.name, l.size, l.align, l.offs, c.size, c.align, c.offs)
			continue
		}
		for i := range l.offs {
			if l.offs[i] != c.offs[i] {
				t.Errorf("%s: offsets %v, want %v", c.name, l.offs, c.offs)
				break
			}
		}
	}
}

// TestDeclarationErrors checks that malformed declarations are refused with a message.
func TestDeclarationErrors(t *testing.T) {
	d := &decl{structs: map[string]*layout{}}
	for _, c := range []struct {
		name string
		s    spec.Struct
		want string
	}{
		{"unknown type", spec.Struct{Name: "S", Fields: []spec.Field{{Name: "x", Type: "Nope"}}}, "unknown type"},
		{"duplicate field", spec.Struct{Name: "S", Fields: []spec.Field{{Name: "x", Type: spec.U32}, {Name: "x", Type: spec.U32}}}, "fresh identifier"},
		{"empty", spec.Struct{Name: "S"}, "no fields"},
		{"bad name", spec.Struct{Name: "1S", Fields: []spec.Field{{Name: "x", Type: spec.U32}}}, "not an identifier"},
	} {
		err := d.addStruct(c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		p    spec.Param
		want string
	}{
		{"64-bit scalar", spec.Param{Name: "x", Kind: spec.Scalar, Type: spec.U64}, "scalar type"},
		{"unknown struct", spec.Param{Name: "x", Kind: spec.ByValue, Type: "Nope"}, "unknown struct"},
		{"bad element", spec.Param{Name: "x", Kind: spec.In, Type: "Cam"}, "element type"},
	} {
		err := d.checkParam(c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// overShared are the wrapped kernels still above Metal's 32 KB of threadgroup memory, until
// their bodies are reworked (issue 13, item 1). A kernel that gets under must leave the list.
var overShared = map[string]bool{}

// TestSpecBudgets holds every wrapped kernel to Metal's limits: at most 31 buffer slots and
// 4 KB of inline bytes per launch, at most 32 KB of block-shared memory.
func TestSpecBudgets(t *testing.T) {
	d, err := newDecl()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range spec.Units {
		for _, k := range u.Kernels {
			inline := 0
			for _, q := range k.Params {
				inline += d.paramBytes(q)
			}
			if len(k.Params) > 31 {
				t.Errorf("%s: %d parameters, Metal binds at most 31 buffers", k.Name, len(k.Params))
			}
			if inline > 4096 {
				t.Errorf("%s: %d inline bytes, Metal's setBytes takes at most 4096", k.Name, inline)
			}
			if over := d.sharedBytes(k) > 32<<10; over != overShared[k.Name] {
				t.Errorf("%s: %d bytes of block-shared memory (Metal allows 32 KB); listed as over: %v", k.Name, d.sharedBytes(k), overShared[k.Name])
			}
		}
	}
}

// TestSharedDeclarations checks block-shared variables of struct and template types: sizes
// given once (and asserted in the generated C), malformed ones refused.
func TestSharedDeclarations(t *testing.T) {
	d := &decl{structs: map[string]*layout{}}
	for _, c := range []struct {
		name  string
		types []spec.SharedType
		want  string
	}{
		{"not a type", []spec.SharedType{{C: "Staged<true", Bytes: 16}}, "not a C type"},
		{"operator", []spec.SharedType{{C: "Staged<1+1>", Bytes: 16}}, "not a C type"},
		{"scalar", []spec.SharedType{{C: spec.U32, Bytes: 4}}, "not a C type"},
		{"no size", []spec.SharedType{{C: "Staged<true>", Bytes: 0}}, "bytes"},
		{"twice", []spec.SharedType{{C: "S", Bytes: 4}, {C: "S", Bytes: 4}}, "twice"},
	} {
		err := d.addSharedTypes(c.types)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
	if err := d.addSharedTypes([]spec.SharedType{{C: "Staged<true, CHUNK>", Bytes: 5120}, {C: "Pair", Bytes: 8}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    spec.Shared
		want string // "" for a valid declaration
	}{
		{"template type", spec.Shared{Name: "s", Type: "Staged<true, CHUNK>", Len: 0}, ""},
		{"struct array", spec.Shared{Name: "p", Type: "Pair", Len: 4}, ""},
		{"one scalar", spec.Shared{Name: "alive", Type: spec.U32, Len: 0}, ""},
		{"undeclared type", spec.Shared{Name: "s", Type: "Staged<false, CHUNK>", Len: 0}, "neither a scalar"},
		{"negative length", spec.Shared{Name: "h", Type: spec.U32, Len: -1}, "length"},
	} {
		err := d.checkShared(c.s)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	k := spec.Kernel{Name: "k", Shared: []spec.Shared{{Name: "s", Type: "Staged<true, CHUNK>", Len: 0}, {Name: "p", Type: "Pair", Len: 4}, {Name: "alive", Type: spec.U32, Len: 0}, {Name: "h", Type: spec.U16, Len: 3}}}
	if got, want := d.sharedBytes(k), 5120+8*4+4+2*3; got != want {
		t.Errorf("sharedBytes = %d, want %d", got, want)
	}
	src := string(d.entries(spec.Unit{Name: "u", Kernels: []spec.Kernel{k}}))
	for _, want := range []string{
		"DEVICE void k_body(Thr th, k_args a, SPTR Staged<true, CHUNK>& s, SPTR Pair* p, SPTR u32& alive, SPTR u16* h);",
		`static_assert(sizeof(Staged<true, CHUNK>) == 5120, "entries/u.h: shared Staged<true, CHUNK> is declared as 5120 bytes");`,
		`static_assert(sizeof(Pair) == 8,`,
		"    __shared__ Staged<true, CHUNK> s;\n    __shared__ Pair p[4];\n    __shared__ u32 alive;\n",
		"    SHARED Staged<true, CHUNK> s;\n    SHARED Pair p[4];\n    SHARED u32 alive;\n",
		"        static Staged<true, CHUNK> s;\n        static Pair p[4];\n        static u32 alive;\n",
		"k_body(th, a, s, p, alive, h);",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("generated entries lack %q:\n%s", want, src)
		}
	}
}

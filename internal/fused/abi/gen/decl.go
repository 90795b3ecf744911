package main

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi/spec"
)

// decl is the checked declaration: every struct's layout computed once.
type decl struct {
	structs map[string]*layout
	order   []string       // struct names in declaration order
	shared  map[string]int // spec.SharedTypes: bytes by C type
}

// layout is a struct's C layout: each field's byte offset, the size and alignment.
type layout struct {
	s           spec.Struct
	offs        []int
	size, align int
}

// scalarSize is the bytes (and the alignment) of a scalar type, 0 when t is not one.
func scalarSize(t string) int {
	switch t {
	case spec.U16:
		return 2
	case spec.U32, spec.I32, spec.F32:
		return 4
	case spec.U64:
		return 8
	}
	return 0
}

func newDecl() (*decl, error) {
	d := &decl{structs: map[string]*layout{}}
	for _, s := range spec.Structs {
		if err := d.addStruct(s); err != nil {
			return nil, err
		}
	}
	if err := d.addSharedTypes(spec.SharedTypes); err != nil {
		return nil, err
	}
	if err := checkConsts(); err != nil {
		return nil, err
	}
	if err := d.checkUnits(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *decl) addStruct(s spec.Struct) error {
	if !isIdent(s.Name) {
		return fmt.Errorf("struct %q: not an identifier", s.Name)
	}
	if _, dup := d.structs[s.Name]; dup {
		return fmt.Errorf("struct %s declared twice", s.Name)
	}
	l := &layout{s: s, align: 1}
	seen := map[string]bool{}
	for _, f := range s.Fields {
		if !isIdent(f.Name) || seen[f.Name] {
			return fmt.Errorf("struct %s: field %q is not a fresh identifier", s.Name, f.Name)
		}
		seen[f.Name] = true
		size, align := scalarSize(f.Type), scalarSize(f.Type)
		if size == 0 {
			inner, ok := d.structs[f.Type]
			if !ok {
				return fmt.Errorf("struct %s: field %s: unknown type %q (scalars, or a struct declared before)", s.Name, f.Name, f.Type)
			}
			size, align = inner.size, inner.align
		}
		if f.Len < 0 {
			return fmt.Errorf("struct %s: field %s: length %d", s.Name, f.Name, f.Len)
		}
		off := roundUp(l.size, align)
		l.offs = append(l.offs, off)
		l.size = off + size*max(f.Len, 1)
		l.align = max(l.align, align)
	}
	if len(s.Fields) == 0 {
		return fmt.Errorf("struct %s: no fields", s.Name)
	}
	l.size = roundUp(l.size, l.align)
	d.structs[s.Name] = l
	d.order = append(d.order, s.Name)
	return nil
}

func roundUp(n, a int) int { return (n + a - 1) / a * a }

func checkConsts() error {
	seenC, seenGo := map[string]bool{}, map[string]bool{}
	for _, c := range spec.Consts {
		if !isIdent(c.C) || !isIdent(c.Go) || !unicode.IsUpper(rune(c.Go[0])) {
			return fmt.Errorf("constant %s/%s: not identifiers (the Go name must be exported)", c.C, c.Go)
		}
		if seenC[c.C] || seenGo[c.Go] {
			return fmt.Errorf("constant %s/%s declared twice", c.C, c.Go)
		}
		if c.Unsigned && (c.Value < 0 || c.Value > 1<<32-1) {
			return fmt.Errorf("constant %s = %d does not fit a u32", c.C, c.Value)
		}
		seenC[c.C], seenGo[c.Go] = true, true
	}
	return nil
}

// maxBlockThreads is the most threads a block may have on every backend (CUDA and Metal).
const maxBlockThreads = 1024

func (d *decl) checkUnits() error {
	kernels := map[string]bool{}
	args := map[string][]spec.Param{}
	goConsts := map[string]bool{}
	for _, c := range spec.Consts {
		goConsts[c.Go] = true
	}
	for _, u := range spec.Units {
		if !isIdent(u.Name) || u.Set == "" || !unicode.IsUpper(rune(u.Set[0])) {
			return fmt.Errorf("unit %q: needs an identifier name and an exported Set", u.Name)
		}
		if len(u.Kernels) == 0 {
			return fmt.Errorf("unit %s: no entry points", u.Name)
		}
		for _, k := range u.Kernels {
			where := u.Name + ".cu: " + k.Name
			if !isIdent(k.Name) || kernels[k.Name] {
				return fmt.Errorf("%s: not a fresh identifier", where)
			}
			kernels[k.Name] = true
			if k.Block < 0 || k.Block > maxBlockThreads || k.MaxThreads < 0 || k.MaxThreads > maxBlockThreads || k.MinBlocks < 0 {
				return fmt.Errorf("%s: block %d, launch bounds (%d, %d) out of range", where, k.Block, k.MaxThreads, k.MinBlocks)
			}
			if k.MinBlocks > 0 && k.MaxThreads == 0 {
				return fmt.Errorf("%s: MinBlocks needs MaxThreads", where)
			}
			if k.Block > 0 && k.MaxThreads > 0 && k.Block > k.MaxThreads {
				return fmt.Errorf("%s: block %d exceeds its launch bound %d", where, k.Block, k.MaxThreads)
			}
			if k.Block > 0 && goConsts[blockConst(k)] {
				return fmt.Errorf("%s: its block-size constant %s is also a layout constant's name", where, blockConst(k))
			}
			names := map[string]bool{}
			for _, p := range k.Params {
				if err := d.checkParam(p); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				if names[p.Name] {
					return fmt.Errorf("%s: parameter %s twice", where, p.Name)
				}
				names[p.Name] = true
			}
			for _, s := range k.Shared {
				if !isIdent(s.Name) || names[s.Name] {
					return fmt.Errorf("%s: shared %s %s: not a fresh identifier", where, s.Type, s.Name)
				}
				if err := d.checkShared(s); err != nil {
					return fmt.Errorf("%s: shared %s: %w", where, s.Name, err)
				}
				names[s.Name] = true
			}
			an := argsName(k)
			if prev, ok := args[an]; ok && !slices.Equal(prev, k.Params) {
				return fmt.Errorf("%s: shares argument struct %s with different parameters", where, an)
			}
			args[an] = k.Params
		}
	}
	return nil
}

func (d *decl) checkParam(p spec.Param) error {
	if !isIdent(p.Name) {
		return fmt.Errorf("parameter %q: not an identifier", p.Name)
	}
	switch p.Kind {
	case spec.ByValue:
		if _, ok := d.structs[p.Type]; !ok {
			return fmt.Errorf("parameter %s: unknown struct %q", p.Name, p.Type)
		}
	case spec.Scalar:
		if scalarSize(p.Type) != 4 {
			return fmt.Errorf("parameter %s: scalar type %q (u32, i32 or f32)", p.Name, p.Type)
		}
	case spec.In, spec.Out:
		if scalarSize(p.Type) == 0 {
			return fmt.Errorf("parameter %s: element type %q", p.Name, p.Type)
		}
	default:
		return fmt.Errorf("parameter %s: kind %d", p.Name, p.Kind)
	}
	return nil
}

// argsName is the C base name of a kernel's argument struct.
func argsName(k spec.Kernel) string {
	if k.Args != "" {
		return k.Args
	}
	return k.Name
}

// checkShared checks one block-shared variable's type and length.
func (d *decl) checkShared(s spec.Shared) error {
	if s.Len < 0 {
		return fmt.Errorf("length %d", s.Len)
	}
	if scalarSize(s.Type) == 0 && d.shared[s.Type] == 0 {
		return fmt.Errorf("type %q: neither a scalar nor one of spec.SharedTypes", s.Type)
	}
	return nil
}

// addSharedTypes checks and records the shared types (spec.SharedTypes).
func (d *decl) addSharedTypes(types []spec.SharedType) error {
	d.shared = map[string]int{}
	for _, t := range types {
		if !isCType(t.C) || scalarSize(t.C) > 0 {
			return fmt.Errorf("shared type %q: not a C type name (an identifier, template arguments)", t.C)
		}
		if d.shared[t.C] != 0 {
			return fmt.Errorf("shared type %s declared twice", t.C)
		}
		if t.Bytes <= 0 {
			return fmt.Errorf("shared type %s: %d bytes", t.C, t.Bytes)
		}
		d.shared[t.C] = t.Bytes
	}
	return nil
}

// elemBytes is the size of one element of a block-shared variable.
func (d *decl) elemBytes(s spec.Shared) int {
	if n := scalarSize(s.Type); n > 0 {
		return n
	}
	return d.shared[s.Type]
}

// sharedBytes is the block-shared memory a kernel's wrapper declares (each variable's bytes,
// alignment padding between them left out: at most a few bytes, which the PTX budget test in
// shaders/ counts).
func (d *decl) sharedBytes(k spec.Kernel) int {
	n := 0
	for _, s := range k.Shared {
		n += d.elemBytes(s) * max(s.Len, 1)
	}
	return n
}

// isCType accepts a C type name as the spec may write one: an identifier, optionally with
// template arguments made of identifiers, numbers, commas and spaces ("Staged<true, CHUNK>").
func isCType(t string) bool {
	name, targs, tmpl := strings.Cut(t, "<")
	if !isIdent(name) {
		return false
	}
	if !tmpl {
		return true
	}
	if !strings.HasSuffix(targs, ">") || len(targs) < 2 {
		return false
	}
	for _, r := range targs[:len(targs)-1] {
		if !(r == '_' || r == ',' || r == ' ' || (r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)))) {
			return false
		}
	}
	return true
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || unicode.IsLetter(r) || (i > 0 && unicode.IsDigit(r))) || r > unicode.MaxASCII {
			return false
		}
	}
	return true
}

// camel turns snake_case into CamelCase and upper-cases the first letter: scan_blocks →
// ScanBlocks, blockSums → BlockSums.
func camel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lowerCamel is camel with the first letter lower-cased: scan_blocks → scanBlocks.
func lowerCamel(s string) string {
	c := camel(s)
	return strings.ToLower(c[:1]) + c[1:]
}

package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi/spec"
)

// Metal's per-kernel limits (developer.apple.com/metal/limits, every Apple GPU family).
const (
	metalThreadgroupBytes = 32 << 10 // threadgroup memory per threadgroup
	metalBufferSlots      = 31       // [[buffer(i)]] arguments
	metalInlineBytes      = 4 << 10  // setBytes, per call; held here for the whole launch
	// setThreadgroupMemoryLength takes multiples of 16, and the compiler's static allocation is
	// counted in the same granules.
	metalThreadgroupGranule = 16
)

// metalBudget is what one kernel asks of Metal, computed from its spec alone.
type metalBudget struct {
	threadgroup int // bytes of the threadgroup arrays its wrapper declares, placed and rounded
	slots       int // [[buffer(i)]] arguments: one per parameter, values included
	inline      int // bytes passed with setBytes: by-value structs and scalars
}

// typeBytes is the size and alignment of a type the spec names: a scalar, or a struct the spec
// declares (which covers struct-typed shared arrays). Anything else is an error naming it, so
// a new kind of shared type must bring its size to the spec before this test passes.
func (d *decl) typeBytes(t string) (size, align int, err error) {
	if n := scalarSize(t); n > 0 {
		return n, n, nil
	}
	if l, ok := d.structs[t]; ok {
		return l.size, l.align, nil
	}
	for _, st := range spec.SharedTypes {
		if st.C == t {
			// The staged batches are arrays of 16-byte packets (f4), so aligned to 16.
			return st.Bytes, 16, nil
		}
	}
	return 0, 0, fmt.Errorf("type %q: no size in the spec (neither a scalar, a declared struct nor one of spec.SharedTypes)", t)
}

// metalBudgetOf computes k's budget. Arrays are placed in declaration order, each at its
// alignment, as a compiler lays out a kernel's threadgroup variables; the total is rounded up to
// Metal's granule. No kernel in the spec takes dynamic threadgroup memory (only selftest.cu,
// which is not an engine unit, does), so the static arrays are the whole of it.
func (d *decl) metalBudgetOf(k spec.Kernel) (metalBudget, error) {
	b := metalBudget{slots: len(k.Params)}
	for _, s := range k.Shared {
		size, align, err := d.typeBytes(s.Type)
		if err != nil {
			return b, fmt.Errorf("%s: shared array %s: %w", k.Name, s.Name, err)
		}
		b.threadgroup = roundUp(b.threadgroup, align) + size*max(s.Len, 1) // Len 0: one variable
	}
	b.threadgroup = roundUp(b.threadgroup, metalThreadgroupGranule)
	for _, q := range k.Params {
		switch q.Kind {
		case spec.ByValue:
			size, _, err := d.typeBytes(q.Type)
			if err != nil {
				return b, fmt.Errorf("%s: parameter %s: %w", k.Name, q.Name, err)
			}
			b.inline += size
		case spec.Scalar:
			b.inline += 4
		}
	}
	return b, nil
}

// over lists the limits b exceeds, each naming the kernel, the figure and the limit.
func (b metalBudget) over(kernel string) []string {
	var out []string
	if b.threadgroup > metalThreadgroupBytes {
		out = append(out, fmt.Sprintf("%s: %d bytes of threadgroup memory, Metal allows %d", kernel, b.threadgroup, metalThreadgroupBytes))
	}
	if b.slots > metalBufferSlots {
		out = append(out, fmt.Sprintf("%s: %d buffer slots, Metal has %d", kernel, b.slots, metalBufferSlots))
	}
	if b.inline > metalInlineBytes {
		out = append(out, fmt.Sprintf("%s: %d inline bytes, Metal's setBytes takes at most %d", kernel, b.inline, metalInlineBytes))
	}
	return out
}

// TestMetalBudgets holds every kernel of the spec to Metal's limits and logs the table. Only
// wrapped units declare their threadgroup arrays in the spec; the others declare them in their
// bodies, so their threadgroup column is not known here (shaders/budget_test.go reads it from
// the PTX) and is shown as "body".
func TestMetalBudgets(t *testing.T) {
	d, err := newDecl()
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-18s %-12s %12s %6s %7s\n", "kernel", "unit", "threadgroup", "slots", "inline")
	for _, u := range spec.Units {
		for _, k := range u.Kernels {
			b, err := d.metalBudgetOf(k)
			if err != nil {
				t.Error(err)
				continue
			}
			fmt.Fprintf(&table, "%-18s %-12s %12d %6d %7d\n", k.Name, u.Name, b.threadgroup, b.slots, b.inline)
			for _, o := range b.over(k.Name) {
				t.Error(o)
			}
		}
	}
	t.Logf("Metal budgets per kernel (limits: %d threadgroup bytes, %d slots, %d inline bytes):\n%s",
		metalThreadgroupBytes, metalBufferSlots, metalInlineBytes, table.String())
}

// TestMetalBudgetsPlanted shows each limit failing on a kernel planted just over it, and
// holding just at it.
func TestMetalBudgetsPlanted(t *testing.T) {
	d, err := newDecl()
	if err != nil {
		t.Fatal(err)
	}
	params := func(n int) []spec.Param {
		ps := make([]spec.Param, n)
		for i := range ps {
			ps[i] = spec.Param{Name: fmt.Sprintf("p%d", i), Kind: spec.In, Type: spec.F32}
		}
		return ps
	}
	// Planted structs of exactly 4096 bytes and of 4092 (for one scalar more).
	for _, s := range []spec.Struct{
		{Name: "PlantedBig", Fields: []spec.Field{{Name: "x", Type: spec.F32, Len: 1024}}},
		{Name: "PlantedAlmost", Fields: []spec.Field{{Name: "x", Type: spec.F32, Len: 1023}}},
	} {
		if err := d.addStruct(s); err != nil {
			t.Fatal(err)
		}
	}
	camBytes, _, err := d.typeBytes("Cam")
	if err != nil {
		t.Fatal(err)
	}
	val := func(typ string) spec.Param { return spec.Param{Name: "v", Kind: spec.ByValue, Type: typ} }
	scalar := spec.Param{Name: "s", Kind: spec.Scalar, Type: spec.U32}
	for _, c := range []struct {
		name string
		k    spec.Kernel
		want string // in the one violation expected; "" for none
	}{
		{"threadgroup at the limit", spec.Kernel{Name: "k", Shared: []spec.Shared{{Name: "a", Type: spec.U32, Len: 8192}}}, ""},
		{"threadgroup over", spec.Kernel{Name: "k", Shared: []spec.Shared{{Name: "a", Type: spec.U32, Len: 8192}, {Name: "b", Type: spec.U16, Len: 1}}},
			"32784 bytes of threadgroup memory"},
		{"threadgroup struct array", spec.Kernel{Name: "k", Shared: []spec.Shared{{Name: "a", Type: "Cam", Len: metalThreadgroupBytes/camBytes + 1}}},
			"bytes of threadgroup memory"},
		{"slots at the limit", spec.Kernel{Name: "k", Params: params(31)}, ""},
		{"slots over", spec.Kernel{Name: "k", Params: params(32)}, "32 buffer slots"},
		{"inline at the limit", spec.Kernel{Name: "k", Params: []spec.Param{val("PlantedBig")}}, ""},
		{"inline at the limit with a scalar", spec.Kernel{Name: "k", Params: []spec.Param{val("PlantedAlmost"), scalar}}, ""},
		{"inline over", spec.Kernel{Name: "k", Params: []spec.Param{val("PlantedBig"), scalar}}, "4100 inline bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := d.metalBudgetOf(c.k)
			if err != nil {
				t.Fatal(err)
			}
			got := b.over(c.k.Name)
			if c.want == "" {
				if len(got) > 0 {
					t.Errorf("%+v: %v, want within every limit", b, got)
				}
				return
			}
			hit := false
			for _, g := range got {
				hit = hit || strings.Contains(g, c.want)
			}
			if !hit {
				t.Errorf("%+v: %v, want a violation with %q", b, got, c.want)
			}
			t.Logf("planted %s: %s", c.name, strings.Join(got, "; "))
		})
	}
	if _, err := d.metalBudgetOf(spec.Kernel{Name: "k", Shared: []spec.Shared{{Name: "a", Type: "Unsized", Len: 1}}}); err == nil ||
		!strings.Contains(err.Error(), `"Unsized"`) {
		t.Errorf("a shared type without a size: err = %v, want one naming it", err)
	}
}

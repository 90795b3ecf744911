package driver

import (
	"io/fs"
	"os"
	"strings"
	"testing"
)

func TestFlatten(t *testing.T) {
	src := Source{
		Name: "k.cu",
		Code: "#include \"a.h\"\nint k;\n  # include \"b.h\"\n#include <metal_stdlib>\n#include \"a.h\"\nint end;\n",
		Headers: map[string]string{
			"a.h": "#pragma once\n#include \"b.h\"\nint a;\n",
			"b.h": "  #  pragma   once // guard\nint b;",
		},
	}
	got, err := Flatten(src)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		`#line 1 "k.cu"`,
		`#line 1 "a.h"`,
		``, // a.h:1 #pragma once
		`#line 1 "b.h"`,
		``, // b.h:1 #pragma once
		`int b;`,
		`#line 3 "a.h"`,
		`int a;`,
		`#line 2 "k.cu"`,
		`int k;`,
		``, // b.h again: already inlined
		`#include <metal_stdlib>`,
		``, // a.h again
		`int end;`,
		``,
	}, "\n")
	if got != want {
		t.Fatalf("Flatten =\n%s\nwant\n%s", got, want)
	}
}

// TestFlattenLineNumbers checks the property the #line markers exist for: every line of the
// flattened text that came from a file maps back to that file's own line.
func TestFlattenLineNumbers(t *testing.T) {
	fsys := os.DirFS("../../../shaders")
	units, err := fs.Glob(fsys, "*.cu")
	if err != nil || len(units) == 0 {
		t.Fatalf("no kernel units in shaders/: %v", err)
	}
	for _, u := range units {
		src, err := SourceFromFSFor(fsys, u, "prelude_cuda.h") // any backend's prelude will do
		if err != nil {
			t.Fatal(err)
		}
		flat, err := Flatten(src)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		texts := map[string][]string{src.Name: strings.Split(src.Code, "\n")}
		for n, h := range src.Headers {
			texts[n] = strings.Split(h, "\n")
		}
		file, line := "", 0
		for i, l := range strings.Split(strings.TrimSuffix(flat, "\n"), "\n") {
			if strings.HasPrefix(l, "#line ") {
				f := strings.Fields(l)
				file = strings.Trim(f[2], `"`)
				line = atoi(t, f[1])
				continue
			}
			orig := texts[file]
			if line < 1 || line > len(orig) {
				t.Fatalf("%s: flattened line %d maps to %s:%d, past its end", u, i+1, file, line)
			}
			if o := orig[line-1]; l != o && l != "" {
				t.Fatalf("%s: flattened line %d %q maps to %s:%d %q", u, i+1, l, file, line, o)
			}
			line++
		}
		if strings.Contains(flat, "#include \"") {
			t.Errorf("%s: a quoted include survived flattening", u)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("bad #line number %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func TestFlattenErrors(t *testing.T) {
	tests := []struct {
		name string
		src  Source
		want string
	}{
		{"missing header", Source{Name: "k.cu", Code: "int x;\n#include \"gone.h\"\n"}, `k.cu:2: include "gone.h"`},
		{"missing in header", Source{Name: "k.cu", Code: "#include \"a.h\"\n", Headers: map[string]string{"a.h": "\n\n#include \"z.h\""}}, `a.h:3: include "z.h"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Flatten(tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A cycle of headers without guards ends, because each header is inlined once.
func TestFlattenCycle(t *testing.T) {
	src := Source{Name: "k.cu", Code: "#include \"a.h\"\n", Headers: map[string]string{"a.h": "#include \"b.h\"\n", "b.h": "#include \"a.h\"\n"}}
	if _, err := Flatten(src); err != nil {
		t.Fatal(err)
	}
}

func FuzzFlatten(f *testing.F) {
	fsys := os.DirFS("../../../shaders")
	for _, u := range []string{"raster_fwd.cu", "loss.cu"} {
		if src, err := SourceFromFSFor(fsys, u, "prelude_cuda.h"); err == nil {
			f.Add(src.Code, src.Headers["common.h"])
		}
	}
	f.Add("#include \"h.h\"\n#include \"h.h\"", "#pragma once\n#include \"h.h\"\n")
	f.Fuzz(func(t *testing.T, code, header string) {
		src := Source{Name: "k.cu", Code: code, Headers: map[string]string{"h.h": header, "common.h": header}}
		flat, err := Flatten(src)
		if err != nil {
			return
		}
		if !strings.HasPrefix(flat, "#line 1 \"k.cu\"\n") {
			t.Fatalf("flattened text does not start with the unit's #line: %q", flat)
		}
		for _, l := range strings.Split(flat, "\n") {
			if includeRe.MatchString(l) {
				t.Fatalf("quoted include %q left in the flattened text", l)
			}
		}
	})
}

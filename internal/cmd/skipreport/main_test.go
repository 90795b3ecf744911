package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// A stream as go test -json writes it: a passing test, two skipped for one reason (at two
// source lines, one going on over a second line), one skipped without a reason, a failing test with its log, package lines.
const stream = `{"Action":"start","Package":"m/internal/gpu"}
{"Action":"run","Package":"m/internal/gpu","Test":"TestOpen"}
{"Action":"output","Package":"m/internal/gpu","Test":"TestOpen","Output":"=== RUN   TestOpen\n"}
{"Action":"output","Package":"m/internal/gpu","Test":"TestOpen","Output":"    gpu_test.go:12: no CUDA driver: libcuda.so.1: not found\n"}
{"Action":"output","Package":"m/internal/gpu","Test":"TestOpen","Output":"        /usr/lib/libcuda.so.1: no such file\n"}
{"Action":"output","Package":"m/internal/gpu","Test":"TestOpen","Output":"--- SKIP: TestOpen (0.00s)\n"}
{"Action":"skip","Package":"m/internal/gpu","Test":"TestOpen"}
{"Action":"run","Package":"m/internal/gpu","Test":"TestAdd"}
{"Action":"output","Package":"m/internal/gpu","Test":"TestAdd","Output":"=== RUN   TestAdd\n"}
{"Action":"output","Package":"m/internal/gpu","Test":"TestAdd","Output":"--- PASS: TestAdd (0.00s)\n"}
{"Action":"pass","Package":"m/internal/gpu","Test":"TestAdd"}
{"Action":"output","Package":"m/internal/gpu","Output":"PASS\n"}
{"Action":"output","Package":"m/internal/gpu","Output":"ok  \tm/internal/gpu\t0.01s\n"}
{"Action":"pass","Package":"m/internal/gpu"}
{"Action":"run","Package":"m/internal/fused","Test":"TestKernel/ewa"}
{"Action":"output","Package":"m/internal/fused","Test":"TestKernel/ewa","Output":"    kernel_test.go:40: no CUDA driver: libcuda.so.1: not found\n"}
{"Action":"output","Package":"m/internal/fused","Test":"TestKernel/ewa","Output":"--- SKIP: TestKernel/ewa (0.00s)\n"}
{"Action":"skip","Package":"m/internal/fused","Test":"TestKernel/ewa"}
{"Action":"output","Package":"m/internal/fused","Test":"TestBare","Output":"--- SKIP: TestBare (0.00s)\n"}
{"Action":"skip","Package":"m/internal/fused","Test":"TestBare"}
{"Action":"output","Package":"m/internal/fused","Test":"TestBroken","Output":"=== RUN   TestBroken\n"}
{"Action":"output","Package":"m/internal/fused","Test":"TestBroken","Output":"    broken_test.go:9: got 2, want 3\n"}
{"Action":"output","Package":"m/internal/fused","Test":"TestBroken","Output":"--- FAIL: TestBroken (0.00s)\n"}
{"Action":"fail","Package":"m/internal/fused","Test":"TestBroken"}
{"Action":"output","Package":"m/internal/fused","Output":"FAIL\n"}
{"Action":"output","Package":"m/internal/fused","Output":"FAIL\tm/internal/fused\t0.02s\n"}
{"Action":"fail","Package":"m/internal/fused"}
{"ImportPath":"m/internal/bad","Action":"build-output","Output":"internal/bad/x.go:3:1: syntax error\n"}
not json: a line go test printed itself
`

func TestFilter(t *testing.T) {
	var out bytes.Buffer
	f := newFilter(&out)
	if err := f.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	wantOut := "ok  \tm/internal/gpu\t0.01s\n" +
		"    broken_test.go:9: got 2, want 3\n--- FAIL: TestBroken (0.00s)\nFAIL\nFAIL\tm/internal/fused\t0.02s\n" +
		"internal/bad/x.go:3:1: syntax error\nnot json: a line go test printed itself\n"
	if out.String() != wantOut {
		t.Errorf("plain output:\n%s\nwant:\n%s", out.String(), wantOut)
	}
	wantSkips := []skip{
		{"m/internal/gpu", "TestOpen", "no CUDA driver: libcuda.so.1: not found"},
		{"m/internal/fused", "TestKernel/ewa", "no CUDA driver: libcuda.so.1: not found"},
		{"m/internal/fused", "TestBare", "(no reason given)"},
	}
	if !reflect.DeepEqual(f.skips, wantSkips) {
		t.Errorf("skips %+v\nwant %+v", f.skips, wantSkips)
	}
	var rep bytes.Buffer
	printReport(&rep, f.skips)
	wantRep := `
skipped: 3 tests, 2 reasons
   2  no CUDA driver: libcuda.so.1: not found
        fused: TestKernel/ewa
        gpu: TestOpen
   1  (no reason given)
        fused: TestBare
`
	if rep.String() != wantRep {
		t.Errorf("report:\n%s\nwant:\n%s", rep.String(), wantRep)
	}
}

func TestSplitGroups(t *testing.T) {
	for _, c := range []struct {
		words []string
		want  []group
	}{
		{[]string{"./..."}, []group{{args: []string{"./..."}}}},
		{[]string{"-run=X", "./a", ";", "A_1=1", "B=", "./b", "C=2"},
			[]group{{args: []string{"-run=X", "./a"}}, {env: []string{"A_1=1", "B="}, args: []string{"./b", "C=2"}}}},
		{[]string{";", ";"}, nil},
		{[]string{"=x", "1A=2"}, []group{{args: []string{"=x", "1A=2"}}}},
	} {
		if got := splitGroups(c.words); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v, want %+v", c.words, got, c.want)
		}
	}
}

// The exit status is go test's (the first non-zero one of the groups), every group runs, and
// the report covers them all.
func TestRunAllStatus(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in go command is a shell script")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "go")
	// It echoes one skip event naming its package argument (a pass with $RUN set), and exits
	// with $CODE.
	script := `#!/bin/sh
pkg=$3
if [ -n "$RUN" ]; then
	printf '{"Action":"pass","Package":"m/%s","Test":"TestX"}\n' "$pkg"
	exit 0
fi
printf '{"Action":"output","Package":"m/%s","Test":"TestX","Output":"    x_test.go:1: reason %s\\n"}\n' "$pkg" "$pkg"
printf '{"Action":"skip","Package":"m/%s","Test":"TestX"}\n' "$pkg"
exit ${CODE:-0}
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		groups []group
		want   int
	}{
		{"all pass", []group{{args: []string{"a"}}, {args: []string{"b"}}}, 0},
		{"second fails", []group{{args: []string{"a"}}, {env: []string{"CODE=2"}, args: []string{"b"}}}, 2},
		{"first status wins", []group{{env: []string{"CODE=1"}, args: []string{"a"}}, {env: []string{"CODE=2"}, args: []string{"b"}}}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if got := runAll(fake, c.groups, &out, &errb); got != c.want {
				t.Errorf("exit %d, want %d (stderr %q)", got, c.want, errb.String())
			}
			for _, want := range []string{"skipped: 2 tests, 2 reasons", "reason a", "reason b"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
	// A test skipped in one group and run in another is not listed, only counted.
	var out, errb bytes.Buffer
	groups := []group{{args: []string{"a"}}, {args: []string{"b"}}, {env: []string{"RUN=1"}, args: []string{"a"}}}
	if got := runAll(fake, groups, &out, &errb); got != 0 {
		t.Errorf("exit %d", got)
	}
	for _, want := range []string{"skipped: 1 test, 1 reason", "reason b", "(1 more skipped in one run and run in another: not listed)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "reason a") {
		t.Errorf("a test that ran in another group is listed:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	if got := runAll(filepath.Join(dir, "absent"), []group{{args: []string{"a"}}}, &out, &errb); got != 1 || !strings.Contains(errb.String(), "absent") {
		t.Errorf("missing go command: exit %d, stderr %q", got, errb.String())
	}
}

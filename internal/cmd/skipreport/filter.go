package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, with the build events
// go test adds).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output events
}

// skip is one skipped test and the reason it logged.
type skip struct {
	Package, Test, Reason string
}

// filter turns the event stream back into what plain (non -v) go test prints: package
// results, build errors, and the output of failed tests only. It keeps each test's output
// until the test ends, and records the skipped tests' reasons.
type filter struct {
	out   io.Writer
	tests map[string][]string // output of the tests still running, by package and name
	skips []skip
	ran   map[string]bool // tests that passed or failed, by testKey
}

func newFilter(out io.Writer) *filter {
	return &filter{out: out, tests: map[string][]string{}, ran: map[string]bool{}}
}

// testKey names a test across runs.
func testKey(pkg, test string) string { return pkg + "\x00" + test }

func (f *filter) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			// Not an event (a crash of go test itself): shown as it came.
			fmt.Fprintf(f.out, "%s\n", line)
			continue
		}
		f.event(ev)
	}
	return sc.Err()
}

func (f *filter) event(ev event) {
	key := testKey(ev.Package, ev.Test)
	switch {
	case ev.Action == "build-output":
		io.WriteString(f.out, ev.Output)
	case ev.Test == "" && ev.Action == "output":
		// The package's own lines: "ok", "FAIL", "? … [no test files]". A passing package's
		// bare "PASS" is a line plain go test does not show.
		if ev.Output != "PASS\n" && !strings.HasPrefix(ev.Output, "=== ") {
			io.WriteString(f.out, ev.Output)
		}
	case ev.Test == "":
	case ev.Action == "output":
		f.tests[key] = append(f.tests[key], ev.Output)
	case ev.Action == "fail":
		for _, l := range f.tests[key] {
			if !strings.HasPrefix(l, "=== ") {
				io.WriteString(f.out, l)
			}
		}
		delete(f.tests, key)
		f.ran[key] = true
	case ev.Action == "skip":
		f.skips = append(f.skips, skip{Package: ev.Package, Test: ev.Test, Reason: reason(f.tests[key])})
		delete(f.tests, key)
	case ev.Action == "pass":
		delete(f.tests, key)
		f.ran[key] = true
	}
}

// location is the "file_test.go:12: " that t.Skip puts before the message.
var location = regexp.MustCompile(`^[\w.-]+\.go:\d+: `)

// reason is the first line a skipped test logged, without the source location: tests
// skipped for the same cause group together, and a cause that lists every library path it
// tried (one a line) stays one line in the report.
func reason(lines []string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, "=== ") || strings.HasPrefix(strings.TrimSpace(l), "--- SKIP") {
			continue
		}
		if l = location.ReplaceAllString(strings.TrimSpace(l), ""); l != "" {
			return l
		}
	}
	return "(no reason given)"
}

// printReport lists the skips grouped by reason, the largest group first, each with its
// tests by package.
func printReport(w io.Writer, skips []skip) {
	if len(skips) == 0 {
		fmt.Fprintln(w, "\nskipped: none")
		return
	}
	byReason := map[string][]skip{}
	for _, s := range skips {
		byReason[s.Reason] = append(byReason[s.Reason], s)
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		a, b := len(byReason[reasons[i]]), len(byReason[reasons[j]])
		if a != b {
			return a > b
		}
		return reasons[i] < reasons[j]
	})
	trim := commonDir(skips)
	plural := func(n int, one, many string) string {
		if n == 1 {
			return one
		}
		return many
	}
	fmt.Fprintf(w, "\nskipped: %d %s, %d %s\n", len(skips), plural(len(skips), "test", "tests"),
		len(reasons), plural(len(reasons), "reason", "reasons"))
	for _, r := range reasons {
		g := byReason[r]
		fmt.Fprintf(w, "%4d  %s\n", len(g), r)
		var pkgs []string
		tests := map[string][]string{}
		for _, s := range g {
			p := strings.TrimPrefix(s.Package, trim)
			if tests[p] == nil {
				pkgs = append(pkgs, p)
			}
			tests[p] = append(tests[p], s.Test)
		}
		sort.Strings(pkgs)
		for _, p := range pkgs {
			fmt.Fprintf(w, "        %s: %s\n", p, strings.Join(tests[p], ", "))
		}
	}
}

// commonDir is the import path prefix, ending in "/", that every skipped test's package
// shares (the module path, usually), so that the report names packages as ./internal/… does;
// "" when they share none.
func commonDir(skips []skip) string {
	prefix := strings.Split(skips[0].Package, "/")
	prefix = prefix[:len(prefix)-1]
	for _, s := range skips[1:] {
		parts := strings.Split(s.Package, "/")
		n := 0
		for n < len(prefix) && n < len(parts)-1 && prefix[n] == parts[n] {
			n++
		}
		prefix = prefix[:n]
	}
	if len(prefix) == 0 {
		return ""
	}
	return strings.Join(prefix, "/") + "/"
}

// Command skipreport runs `go test -json` and prints what plain `go test` prints, then every
// skipped test with its reason, grouped by reason and counted. Plain `go test` shows a
// package whose GPU tests all skipped as "ok", so without this the skips and their reasons
// are invisible; the Makefile's test target runs it.
//
// Usage (from the repository root):
//
//	go build -o bin/skipreport ./internal/cmd/skipreport
//	bin/skipreport [-go go] [K=V ...] ARGS... [ ';' [K=V ...] ARGS... ]
//
// Each ';'-separated group is one `go test -json ARGS...` run, with the K=V words before its
// arguments added to its environment. Every group runs, even after one fails, so that one
// report covers them all; the exit status is the first non-zero status of go test (1 when it
// could not be started), or 0.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

func main() {
	goTool := flag.String("go", "go", "the go command")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: skipreport [-go go] [K=V ...] ARGS... [';' [K=V ...] ARGS...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	groups := splitGroups(flag.Args())
	if len(groups) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(runAll(*goTool, groups, os.Stdout, os.Stderr))
}

// group is one go test run: extra environment and go test's arguments.
type group struct {
	env  []string
	args []string
}

// splitGroups splits the words at ";" and takes the leading K=V words of each group as its
// environment. An empty group (two ';' in a row) is dropped.
func splitGroups(words []string) []group {
	var out []group
	var g group
	flush := func() {
		if len(g.args) > 0 || len(g.env) > 0 {
			out = append(out, g)
		}
		g = group{}
	}
	for _, w := range words {
		switch {
		case w == ";":
			flush()
		case len(g.args) == 0 && isAssignment(w):
			g.env = append(g.env, w)
		default:
			g.args = append(g.args, w)
		}
	}
	flush()
	return out
}

// isAssignment says whether w is an environment assignment NAME=VALUE (not a flag such as
// -run=X nor a package pattern).
func isAssignment(w string) bool {
	k, _, ok := strings.Cut(w, "=")
	if !ok || k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// runAll runs each group, streams the plain output to out, then prints the skip report; it
// returns the exit status. A test skipped in one group but run in another (the fused
// engine's GPU tests, skipped without a GPU and then run on the emulator) is not a skip of
// the whole: it is left out of the list and counted in a note.
func runAll(goTool string, groups []group, out, errw io.Writer) int {
	status := 0
	var skips []skip
	ran := map[string]bool{}
	for _, g := range groups {
		code, f := runGroup(goTool, g, out, errw)
		if status == 0 {
			status = code
		}
		skips = append(skips, f.skips...)
		for k := range f.ran {
			ran[k] = true
		}
	}
	kept := skips[:0]
	for _, s := range skips {
		if !ran[testKey(s.Package, s.Test)] {
			kept = append(kept, s)
		}
	}
	printReport(out, kept)
	if n := len(skips) - len(kept); n > 0 {
		fmt.Fprintf(out, "(%d more skipped in one run and run in another: not listed)\n", n)
	}
	return status
}

func runGroup(goTool string, g group, out, errw io.Writer) (int, *filter) {
	args := append([]string{"test", "-json"}, g.args...)
	cmd := exec.Command(goTool, args...)
	cmd.Env = append(os.Environ(), g.env...)
	cmd.Stderr = errw
	f := newFilter(out)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(errw, "skipreport: %s test: %v\n", goTool, err)
		return 1, f
	}
	if len(g.env) > 0 {
		fmt.Fprintf(out, "# %s %s %s\n", strings.Join(g.env, " "), goTool, strings.Join(append([]string{"test"}, g.args...), " "))
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(errw, "skipreport: %s test: %v\n", goTool, err)
		return 1, f
	}
	if err := f.read(pipe); err != nil {
		fmt.Fprintf(errw, "skipreport: reading go test's output: %v\n", err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), f
	}
	if err != nil {
		fmt.Fprintf(errw, "skipreport: %s test: %v\n", goTool, err)
		return 1, f
	}
	return 0, f
}

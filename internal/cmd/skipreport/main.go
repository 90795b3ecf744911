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
// returns the exit status.
func runAll(goTool string, groups []group, out, errw io.Writer) int {
	status := 0
	var skips []skip
	for _, g := range groups {
		code, s := runGroup(goTool, g, out, errw)
		if status == 0 {
			status = code
		}
		skips = append(skips, s...)
	}
	printReport(out, skips)
	return status
}

func runGroup(goTool string, g group, out, errw io.Writer) (int, []skip) {
	args := append([]string{"test", "-json"}, g.args...)
	cmd := exec.Command(goTool, args...)
	cmd.Env = append(os.Environ(), g.env...)
	cmd.Stderr = errw
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(errw, "skipreport: %s test: %v\n", goTool, err)
		return 1, nil
	}
	if len(g.env) > 0 {
		fmt.Fprintf(out, "# %s %s %s\n", strings.Join(g.env, " "), goTool, strings.Join(append([]string{"test"}, g.args...), " "))
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(errw, "skipreport: %s test: %v\n", goTool, err)
		return 1, nil
	}
	f := newFilter(out)
	if err := f.read(pipe); err != nil {
		fmt.Fprintf(errw, "skipreport: reading go test's output: %v\n", err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), f.skips
	}
	if err != nil {
		fmt.Fprintf(errw, "skipreport: %s test: %v\n", goTool, err)
		return 1, f.skips
	}
	return 0, f.skips
}

package convert

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrNoColmap is wrapped by the error of a COLMAP that cannot be found or
// does not run.
var ErrNoColmap = errors.New("COLMAP is not installed")

// installHint says how to get COLMAP.
const installHint = "install it (Debian/Ubuntu: sudo apt install colmap; macOS: brew install colmap; " +
	"others: a release from https://github.com/colmap/colmap/releases) or give its path with --colmap"

// FindColmap returns the COLMAP executable to run: path when given (a file,
// or a name looked up on PATH), else "colmap" on PATH. lookPath is
// exec.LookPath in production; tests pass their own PATH search.
func FindColmap(path string, lookPath func(string) (string, error)) (string, error) {
	if path == "" {
		p, err := lookPath("colmap")
		if err != nil {
			return "", fmt.Errorf("convert: %w: no colmap on PATH: %s", ErrNoColmap, installHint)
		}
		return p, nil
	}
	p, err := lookPath(path)
	if err != nil {
		return "", fmt.Errorf("convert: %w: --colmap %s: %v: %s", ErrNoColmap, path, err, installHint)
	}
	return p, nil
}

// colmapVersion runs `colmap help` and returns its first line ("COLMAP 3.8 --
// Structure-from-Motion and Multi-View Stereo"), which says that the
// executable runs at all (a missing shared library fails here, not half-way).
func colmapVersion(ctx context.Context, exe string, env []string) (string, error) {
	cmd := exec.CommandContext(ctx, exe, "help")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return "", fmt.Errorf("convert: %s help: %w", exe, ctx.Err())
	}
	if err != nil {
		return "", fmt.Errorf("convert: %w: %s does not run (%v): %s; %s", ErrNoColmap, exe, err, lastLines(out, 5), installHint)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return line, nil
		}
	}
	return "COLMAP (version not printed)", nil
}

// StageError is a COLMAP command that failed: it names the stage, the exit
// code, the log and the end of what COLMAP wrote.
type StageError struct {
	Stage    string
	ExitCode int // -1 when COLMAP did not start or was killed by a signal
	Log      string
	Tail     string // COLMAP's last lines of output in this stage
	Err      error
}

func (e *StageError) Error() string {
	msg := fmt.Sprintf("convert: %s: COLMAP failed", e.Stage)
	if e.ExitCode >= 0 {
		msg = fmt.Sprintf("convert: %s: COLMAP exited with status %d", e.Stage, e.ExitCode)
	} else if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	msg += " (its output is in " + e.Log + ")"
	if e.Tail != "" {
		msg += "; last lines:\n" + e.Tail
	}
	return msg
}

func (e *StageError) Unwrap() error { return e.Err }

// tailLines is how many of COLMAP's last lines a failure quotes.
const tailLines = 12

// runner runs COLMAP commands, appending their output to the log.
type runner struct {
	exe     string
	env     []string
	logPath string
	// progress receives the progress COLMAP prints, when the stage has a parser.
	progress func(done, total int)
}

// run executes `colmap args...` for stage, with parse turning output lines
// into progress (nil: none). It returns a *StageError on failure, or the
// context's error (wrapped) when cancelled.
func (r *runner) run(ctx context.Context, stage string, args []string, parse func(line string) (done, total int, ok bool)) error {
	logf, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("convert: %s: %w", stage, err)
	}
	defer logf.Close()
	start := time.Now()
	fmt.Fprintf(logf, "\n=== %s, %s\n$ %s\n", stage, start.UTC().Format(time.RFC3339), commandLine(r.exe, args))

	cmd := exec.CommandContext(ctx, r.exe, args...)
	cmd.Env = r.env
	// Cancelling asks COLMAP to stop as Ctrl-C would, and kills it when it has not
	// stopped a few seconds later (os.Interrupt cannot be sent on Windows: kill at once).
	cmd.Cancel = func() error {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	tail := newTail(tailLines)
	scanned := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sc.Split(scanLines)
		var werr error
		for sc.Scan() {
			line := sc.Text()
			if _, err := fmt.Fprintln(logf, line); err != nil && werr == nil {
				werr = err
			}
			tail.add(line)
			if parse != nil && r.progress != nil {
				if d, t, ok := parse(line); ok {
					r.progress(d, t)
				}
			}
		}
		// Drain whatever a too-long line left, so that COLMAP never blocks on the pipe.
		_, _ = io.Copy(io.Discard, pr)
		if werr == nil {
			werr = sc.Err()
		}
		scanned <- werr
	}()
	runErr := cmd.Run()
	pw.Close()
	logErr := <-scanned
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	fmt.Fprintf(logf, "=== %s: exit status %d after %.1fs\n", stage, code, time.Since(start).Seconds())
	if ctx.Err() != nil {
		return fmt.Errorf("convert: %s: %w", stage, ctx.Err())
	}
	if runErr != nil {
		return &StageError{Stage: stage, ExitCode: code, Log: r.logPath, Tail: tail.String(), Err: runErr}
	}
	if logErr != nil {
		return fmt.Errorf("convert: %s: writing %s: %w", stage, r.logPath, logErr)
	}
	return nil
}

// scanLines splits on \n and on \r, so that progress COLMAP redraws in place
// still arrives line by line.
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// commandLine renders a command for the log, quoting arguments with spaces.
func commandLine(exe string, args []string) string {
	parts := []string{exe}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// tail keeps the last n non-empty lines.
type tail struct {
	n     int
	lines []string
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) add(line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > t.n {
		t.lines = t.lines[len(t.lines)-t.n:]
	}
}

func (t *tail) String() string { return strings.Join(t.lines, "\n") }

// lastLines returns the last n non-empty lines of out.
func lastLines(out []byte, n int) string {
	t := newTail(n)
	for _, l := range strings.Split(string(out), "\n") {
		t.add(l)
	}
	return t.String()
}

// Progress lines COLMAP 3.8 prints: "Processed file [3/16]" (feature
// extraction), "Matching image [3/16]" (sequential matching), "Matching
// block [1/2, 2/2]" (exhaustive matching), "Registering image #7 (5)"
// (mapping: the number of images registered so far in parentheses) and
// "Undistorting image [3/16]".
var (
	reCount    = regexp.MustCompile(`^(?:Processed file|Matching image|Undistorting image) \[(\d+)/(\d+)\]`)
	reBlock    = regexp.MustCompile(`^Matching block \[(\d+)/(\d+), (\d+)/(\d+)\]`)
	reRegister = regexp.MustCompile(`^Registering image #\d+ \((\d+)\)`)
)

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// parseCount reads "[i/n]" progress lines.
func parseCount(line string) (int, int, bool) {
	m := reCount.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return 0, 0, false
	}
	return atoi(m[1]), atoi(m[2]), true
}

// parseBlock reads exhaustive matching's "[i/n, j/n]" blocks as one count
// of n·n blocks.
func parseBlock(line string) (int, int, bool) {
	m := reBlock.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return 0, 0, false
	}
	i, n, j, nj := atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4])
	return (i-1)*nj + j, n * nj, true
}

// parseRegister reads the mapper's registered count, out of total photos.
func parseRegister(total int) func(string) (int, int, bool) {
	return func(line string) (int, int, bool) {
		m := reRegister.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			return 0, 0, false
		}
		return min(atoi(m[1]), total), total, true
	}
}

// Package sharedtest finds the real data the tests read from ../shared
// (beside the module root, never committed) and the module root itself, so
// every test package locates them the same way and skips with the same
// reason when they are absent. It is imported by tests only.
package sharedtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Root returns the module root: the nearest directory above the working
// directory (a test's package directory) that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("sharedtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Find returns ../shared/rel... beside the module root (rel given with
// slashes or as separate elements) and whether it exists.
func Find(rel ...string) (string, bool) {
	root, err := Root()
	if err != nil {
		return "", false
	}
	parts := []string{root, "..", "shared"}
	for _, r := range rel {
		parts = append(parts, filepath.FromSlash(r))
	}
	p := filepath.Join(parts...)
	_, err = os.Stat(p)
	return p, err == nil
}

// Path is Find for tests: it skips t, saying what is missing and where it
// was looked for, when the data is absent.
func Path(t testing.TB, rel ...string) string {
	t.Helper()
	p, ok := Find(rel...)
	if !ok {
		t.Skipf("shared data %s absent (looked for %s): this test needs ../shared beside the repository", filepath.Join(rel...), p)
	}
	return p
}

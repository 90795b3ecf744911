// Command gen writes the fused engine's host–kernel interface from its one declaration,
// internal/fused/abi/spec: the Go launch code (internal/fused/abi/abi_gen.go), the C structs and
// constants the kernels include (shaders/abi.h) and, for every wrapped unit, its entry points
// for each backend (shaders/entries/UNIT.h). `go generate ./internal/fused/abi` runs it;
// with -check it writes nothing and fails when a file differs from what it would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/fused/abi/spec"
)

func main() {
	root := flag.String("root", "", "repository root (default: the directory holding go.mod, searched upwards)")
	check := flag.Bool("check", false, "write nothing; fail when a generated file is stale")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	if root == "" {
		r, err := findRoot()
		if err != nil {
			return err
		}
		root = r
	}
	files, err := generate()
	if err != nil {
		return err
	}
	if check {
		if stale := staleFiles(root, files); len(stale) > 0 {
			return fmt.Errorf("stale generated files (run go generate ./internal/fused/abi): %s", strings.Join(stale, ", "))
		}
		return nil
	}
	for _, name := range sortedKeys(files) {
		if err := writeAtomic(filepath.Join(root, name), files[name]); err != nil {
			return err
		}
	}
	// Entry headers of units that are no longer wrapped would be orphans.
	for _, name := range orphanEntries(root, files) {
		if err := os.Remove(filepath.Join(root, name)); err != nil {
			return err
		}
	}
	return nil
}

// staleFiles lists the generated files whose content on disk differs from files (or that are
// missing), and entry headers nothing generates any more.
func staleFiles(root string, files map[string][]byte) []string {
	var stale []string
	for _, name := range sortedKeys(files) {
		have, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || !bytes.Equal(have, files[name]) {
			stale = append(stale, name)
		}
	}
	return append(stale, orphanEntries(root, files)...)
}

func orphanEntries(root string, files map[string][]byte) []string {
	var orphans []string
	ents, _ := fs.Glob(os.DirFS(root), "shaders/entries/*.h")
	for _, e := range ents {
		if _, ok := files[e]; !ok {
			orphans = append(orphans, e)
		}
	}
	return orphans
}

func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the working directory; pass -root")
		}
		dir = up
	}
}

// writeAtomic writes data to a temporary file beside path and renames it into place, so that
// an interrupted run leaves the old file or the new one, never half of one.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".gen-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// generate returns every generated file by its path from the repository root.
func generate() (map[string][]byte, error) {
	d, err := newDecl()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	goSrc, err := d.goFile()
	if err != nil {
		return nil, err
	}
	files["internal/fused/abi/abi_gen.go"] = goSrc
	files["shaders/abi.h"] = d.abiHeader()
	for _, u := range spec.Units {
		files["shaders/entries/"+u.Name+".h"] = d.entries(u)
	}
	return files, nil
}

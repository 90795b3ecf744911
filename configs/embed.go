// Package configs embeds rlxsplat's configuration presets into the binary.
//
// default.yaml is the one source of every configuration default: the
// internal/config package loads it as the lowest layer, and the command line
// builds its flag help from it. The other files are partial presets (for
// example fast.yaml, a 7 000-step run) that a user selects with --config.
//
// Non-goals: this package does not parse, merge or validate anything; that is
// internal/config's job. It only hands out the embedded bytes.
package configs

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// DefaultName is the file name of the defaults preset.
const DefaultName = "default.yaml"

// files is never written after compilation; it is unexported so that no
// caller can replace it.
//
//go:embed *.yaml
var files embed.FS

// Read returns the contents of the embedded preset name ("fast.yaml"; the
// ".yaml" suffix may be left out).
func Read(name string) ([]byte, error) {
	if !strings.HasSuffix(name, ".yaml") {
		name += ".yaml"
	}
	// Only bare names are presets; refusing separators keeps the lookup from
	// ever meaning a path.
	if name != path.Base(name) || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("configs: %q is not a preset name", name)
	}
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("configs: preset %q (have %s): %w", name, strings.Join(Names(), ", "), err)
	}
	return b, nil
}

// Names lists the embedded presets without their ".yaml" suffix, sorted.
func Names() []string {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") {
			names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
		}
	}
	sort.Strings(names)
	return names
}

package config

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Sources maps every key to the layer that set its value. Keys of a Config
// built by hand, which has no record, are reported as defaults.
func (c *Config) Sources() map[string]Source {
	out := make(map[string]Source)
	for _, key := range Keys() {
		s, ok := c.sources[key]
		if !ok {
			s = Source{Layer: LayerDefault}
		}
		out[key] = s
	}
	return out
}

// Describe lists every resolved key, its value and the layer it came from,
// one key a line, aligned, for --print-config:
//
//	train.iterations    7000       file configs/fast.yaml:13
func (c *Config) Describe() string {
	fields := schema()
	src := c.Sources()
	rows := make([][3]string, 0, len(fields)+1)
	rows = append(rows, [3]string{"KEY", "VALUE", "FROM"})
	for i := range fields {
		f := &fields[i]
		rows = append(rows, [3]string{f.key, formatShow(c.value(f)), src[f.key].String()})
	}
	var w [2]int
	for _, r := range rows {
		w[0] = max(w[0], len(r[0]))
		w[1] = max(w[1], len(r[1]))
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%-*s  %-*s  %s\n", w[0], r[0], w[1], r[1], r[2])
	}
	return b.String()
}

// YAML writes the resolved configuration, every key, in the layout of
// configs/default.yaml, for out/config.yaml and checkpoints. Parse reads it
// back to an equal Config.
func (c *Config) YAML() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# rlxsplat resolved configuration: every key, whatever layer set it.\n")
	buf.WriteString("# configs/default.yaml documents each key.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode YAML: %w", err)
	}
	return buf.Bytes(), nil
}

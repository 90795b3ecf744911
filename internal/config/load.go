package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/rlxsplat/rlxsplat/configs"
)

// EnvPrefix starts every configuration environment variable:
// RLXSPLAT_<SECTION>_<KEY>, upper case, for example RLXSPLAT_RASTER_BIN_MODE.
const EnvPrefix = "RLXSPLAT_"

// EnvForceGPUConic is the seed's switch, kept for compatibility: when it is
// present in the environment with any value (even empty), raster.bin_mode is
// gpu-conic whatever the defaults, the file or the RLXSPLAT_ variables say.
// Only an explicit flag beats it.
const EnvForceGPUConic = "RLX_FUSED_GPU_CONIC_SCANLINE"

// reservedEnvSection is a RLXSPLAT_ prefix that is not configuration: the
// device layer's switches (RLXSPLAT_GPU_DEBUG, style.md §3) live there, and
// "gpu" is no config section, so such variables are skipped rather than
// reported as unknown keys.
const reservedEnvSection = EnvPrefix + "GPU_"

// deviceSwitch reports whether name is one of the device layer's variables
// outside RLXSPLAT_GPU_: they are read by internal/gpu (and the GPU tests),
// not by Load, and must not stop a command as unknown keys.
func deviceSwitch(name string) bool {
	switch name {
	case EnvPrefix + "NO_NVRTC", EnvPrefix + "KERNEL_CACHE", EnvPrefix + "SHADER_DIR", EnvPrefix + "FUSED_EMU":
		return true
	}
	return strings.HasPrefix(name, reservedEnvSection)
}

// Input is everything Load reads. Nothing comes from the process itself, so
// tests can build any situation.
type Input struct {
	// File is the --config file: a YAML path, or, when no such file exists
	// and the name has no directory, an embedded preset ("fast" or
	// "fast.yaml"). Empty for none.
	File string
	// FileData, when not nil, is the file layer's content given directly
	// (a checkpoint's stored config, so that on resume the environment and
	// flags still apply over it); it is used instead of File.
	FileData []byte
	// FileName names FileData in messages and Describe ("config data" when
	// empty).
	FileName string
	// Env holds KEY=VALUE entries, as os.Environ returns them. Entries that
	// are not configuration variables are ignored.
	Env []string
	// Flags maps config keys ("train.iterations") to the text of the flags
	// the user set; flags left at their default must not be in it.
	Flags map[string]string
}

// Load resolves the configuration: defaults < file < environment < flags.
// It returns every problem at once (unknown keys with a suggestion, values
// of the wrong type, values out of range), joined; each is an *Error.
func Load(in Input) (*Config, error) {
	l, err := newLoader()
	if err != nil {
		return nil, err
	}
	if in.FileData != nil {
		name := in.FileName
		if name == "" {
			name = "config data"
		}
		l.file(in.FileData, name)
	} else if in.File != "" {
		data, name, err := readConfigFile(in.File)
		if err != nil {
			l.errs = append(l.errs, err)
		} else {
			l.file(data, name)
		}
	}
	l.env(in.Env)
	l.flags(in.Flags)
	return l.finish()
}

// Parse reads a configuration written by YAML (for example from a
// checkpoint). Keys missing from data keep their defaults, so a file written
// before a key existed still loads; unknown keys and bad values are errors.
func Parse(data []byte) (*Config, error) {
	l, err := newLoader()
	if err != nil {
		return nil, err
	}
	l.file(data, "parsed YAML")
	return l.finish()
}

// loader carries one resolution. Its viper instance is private to it, so two
// loads never share state.
type loader struct {
	fields []field
	byKey  map[string]*field
	keys   []string
	v      *viper.Viper
	src    map[string]Source
	errs   []error
}

func newLoader() (*loader, error) {
	l, err := bareLoader()
	if err != nil {
		return nil, err
	}
	defs, err := embeddedDefaults()
	if err != nil {
		return nil, err
	}
	for _, f := range l.fields {
		l.v.SetDefault(f.key, defs.vals[f.key])
		// Defaults are reported without file and line: "default" says it all.
		l.src[f.key] = Source{Layer: LayerDefault}
	}
	return l, nil
}

// bareLoader is a loader with no layer applied yet.
func bareLoader() (*loader, error) {
	fields := schema()
	l := &loader{
		fields: fields,
		byKey:  fieldMap(fields),
		v:      viper.New(),
		src:    make(map[string]Source, len(fields)),
	}
	for _, f := range fields {
		if f.kind == kindInvalid {
			return nil, fmt.Errorf("config: internal: key %s has an unsupported Go type", f.key)
		}
		l.keys = append(l.keys, f.key)
	}
	return l, nil
}

// defaultsTable is the embedded default.yaml, converted.
type defaultsTable struct {
	vals map[string]any    // key → value in the loader's value types
	help map[string]string // key → its comment, one line
}

// embeddedDefaults parses the embedded default.yaml once per process. It is
// a cache of data compiled into the binary, computed on first use and never
// written again, so it is not mutable state; it spares every Load (and each
// Default and Help call made while building flag help) a parse of the
// commented file. Callers must not modify the maps or the lists in them
// (Config.set copies lists).
var embeddedDefaults = sync.OnceValues(func() (*defaultsTable, error) {
	l, err := bareLoader()
	if err != nil {
		return nil, err
	}
	data, err := configs.Read(configs.DefaultName)
	if err != nil {
		return nil, fmt.Errorf("config: embedded defaults: %w", err)
	}
	vals, errs := l.parseYAML(data, Source{Layer: LayerDefault, Name: configs.DefaultName})
	if len(errs) > 0 {
		return nil, fmt.Errorf("config: embedded %s is broken: %w", configs.DefaultName, errors.Join(errs...))
	}
	t := &defaultsTable{vals: map[string]any{}, help: helpComments(data)}
	for _, f := range l.fields {
		s, ok := vals[f.key]
		if !ok {
			return nil, fmt.Errorf("config: embedded %s has no value for %s", configs.DefaultName, f.key)
		}
		t.vals[f.key] = s.val
	}
	return t, nil
})

// setting is one converted value and where it came from.
type setting struct {
	val any
	src Source
}

// readConfigFile reads a --config file, falling back to an embedded preset.
func readConfigFile(name string) ([]byte, string, error) {
	data, err := os.ReadFile(name)
	if err == nil {
		return data, name, nil
	}
	if errors.Is(err, fs.ErrNotExist) && filepath.Base(name) == name {
		if b, perr := configs.Read(name); perr == nil {
			preset := strings.TrimSuffix(name, ".yaml") + ".yaml"
			return b, preset + " (embedded preset)", nil
		}
	}
	return nil, "", &Error{
		Msg: fmt.Sprintf("config file %q", name),
		Err: fmt.Errorf("%w (embedded presets: %s)", err, strings.Join(configs.Names(), ", ")),
	}
}

// file applies one YAML document as the file layer.
func (l *loader) file(data []byte, name string) {
	vals, errs := l.parseYAML(data, Source{Layer: LayerFile, Name: name})
	l.errs = append(l.errs, errs...)
	if len(vals) == 0 {
		return
	}
	nested := map[string]any{}
	for _, f := range l.fields {
		s, ok := vals[f.key]
		if !ok {
			continue
		}
		sec, _ := nested[f.section].(map[string]any)
		if sec == nil {
			sec = map[string]any{}
			nested[f.section] = sec
		}
		sec[f.name] = s.val
		l.src[f.key] = s.src
	}
	if err := l.v.MergeConfigMap(nested); err != nil {
		l.errs = append(l.errs, &Error{Source: Source{Layer: LayerFile, Name: name}, Msg: "merge", Err: err})
	}
}

// parseYAML converts a document of sections of keys, reporting unknown
// keys, duplicates and bad values with their line. It never stops at the
// first problem.
func (l *loader) parseYAML(data []byte, src Source) (map[string]setting, []error) {
	fileErr := func(line int, msg string, err error) error {
		s := src
		s.Line = line
		return &Error{Source: s, Msg: msg, Err: err}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // an empty file sets nothing
		}
		return nil, []error{fileErr(0, "YAML syntax", err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, []error{fileErr(extra.Line, "more than one YAML document; want one", err)}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := resolveAlias(doc.Content[0])
	if root == nil || (root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null") {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, []error{fileErr(root.Line, "want a mapping of sections (data:, train:, …), got "+describeNode(root), nil)}
	}
	vals := map[string]setting{}
	var errs []error
	seenSec := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn, vn := root.Content[i], resolveAlias(root.Content[i+1])
		sec := kn.Value
		if prev, dup := seenSec[sec]; dup {
			errs = append(errs, &Error{Key: sec, Source: withLine(src, kn.Line),
				Msg: fmt.Sprintf("section given twice (first at line %d)", prev)})
			continue
		}
		seenSec[sec] = kn.Line
		if !l.isSection(sec) {
			errs = append(errs, l.unknownSection(sec, withLine(src, kn.Line)))
			continue
		}
		if vn == nil || (vn.Kind == yaml.ScalarNode && vn.ShortTag() == "!!null") {
			continue // "train:" with nothing under it
		}
		if vn.Kind != yaml.MappingNode {
			errs = append(errs, &Error{Key: sec, Source: withLine(src, kn.Line),
				Msg: "want a mapping of keys, got " + describeNode(vn)})
			continue
		}
		seen := map[string]int{}
		for j := 0; j+1 < len(vn.Content); j += 2 {
			kk, kv := vn.Content[j], vn.Content[j+1]
			key := sec + "." + kk.Value
			at := withLine(src, kk.Line)
			if prev, dup := seen[kk.Value]; dup {
				errs = append(errs, &Error{Key: key, Source: at,
					Msg: fmt.Sprintf("key given twice (first at line %d)", prev)})
				continue
			}
			seen[kk.Value] = kk.Line
			f, ok := l.byKey[key]
			if !ok {
				errs = append(errs, l.unknown(key, at))
				continue
			}
			val, err := fromNode(f.kind, kv)
			if err != nil {
				errs = append(errs, &Error{Key: key, Source: at, Msg: err.Error()})
				continue
			}
			vals[key] = setting{val: val, src: at}
		}
	}
	return vals, errs
}

func withLine(s Source, line int) Source {
	s.Line = line
	return s
}

func (l *loader) isSection(name string) bool {
	for _, f := range l.fields {
		if f.section == name {
			return true
		}
	}
	return false
}

// unknown reports a name that is no key, with the closest key.
func (l *loader) unknown(name string, src Source) error {
	msg := "unknown key"
	if s := suggest(name, l.keys); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", s)
	}
	return &Error{Key: name, Source: src, Msg: msg}
}

// unknownSection reports a top-level name that is no section. A dotted
// name that is a key ("train.iterations: 5") gets the nested spelling.
func (l *loader) unknownSection(name string, src Source) error {
	if f, ok := l.byKey[name]; ok {
		return &Error{Key: name, Source: src,
			Msg: fmt.Sprintf("unknown section; keys nest under their section: %s: {%s: …}", f.section, f.name)}
	}
	var secs []string
	for _, f := range l.fields {
		if len(secs) == 0 || secs[len(secs)-1] != f.section {
			secs = append(secs, f.section)
		}
	}
	msg := "unknown section"
	if strings.Contains(name, ".") {
		// Probably a key written flat with a typo: suggest among keys.
		msg = "unknown key"
		secs = l.keys
	}
	if s := suggest(name, secs); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", s)
	}
	return &Error{Key: name, Source: src, Msg: msg}
}

// env applies the environment layer: every RLXSPLAT_ variable in the order
// given (a later duplicate wins, as in a shell), then the seed's override.
func (l *loader) env(env []string) {
	forced := false
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if name == EnvForceGPUConic {
			forced = true
			continue
		}
		if !strings.HasPrefix(name, EnvPrefix) || deviceSwitch(name) {
			continue
		}
		src := Source{Layer: LayerEnv, Name: name}
		rest := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
		sec, key, _ := strings.Cut(rest, "_")
		full := sec + "." + key
		f, ok := l.byKey[full]
		if !ok {
			l.errs = append(l.errs, l.unknown(full, src))
			continue
		}
		l.setText(f, val, src)
	}
	if forced {
		l.v.Set("raster.bin_mode", string(BinGPUConic))
		l.src["raster.bin_mode"] = Source{Layer: LayerEnv, Name: EnvForceGPUConic}
	}
}

// flags applies the flag layer, in key order so that errors come out in a
// stable order.
func (l *loader) flags(flags map[string]string) {
	names := make([]string, 0, len(flags))
	for k := range flags {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		src := Source{Layer: LayerFlag}
		f, ok := l.byKey[k]
		if !ok {
			l.errs = append(l.errs, l.unknown(k, src))
			continue
		}
		l.setText(f, flags[k], src)
	}
}

// setText converts and applies one environment variable or flag.
func (l *loader) setText(f *field, text string, src Source) {
	val, err := fromText(f.kind, text)
	if err != nil {
		l.errs = append(l.errs, &Error{Key: f.key, Source: src, Msg: err.Error()})
		return
	}
	// Viper's override register holds both upper layers; flags are applied
	// after the environment, so a flag overwrites an environment value.
	l.v.Set(f.key, val)
	l.src[f.key] = src
}

// finish reads the merged values back from viper into a Config and
// validates it, joining every problem found on the way.
func (l *loader) finish() (*Config, error) {
	c := &Config{sources: l.src}
	for i := range l.fields {
		f := &l.fields[i]
		if err := c.set(f, l.v.Get(f.key)); err != nil {
			return nil, fmt.Errorf("config: internal: %s: %w", f.key, err)
		}
	}
	errs := append(l.errs, c.problems()...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

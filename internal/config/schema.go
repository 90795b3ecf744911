package config

import (
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// kind is the value type of a key, as the loader converts it.
type kind int

const (
	kindInvalid kind = iota
	kindString
	kindInt
	kindFloat
	kindBool
	kindInts
	kindFloats
	kindStrings
)

// String names the kind as Type reports it and as conversion errors word it.
func (k kind) String() string {
	switch k {
	case kindString:
		return "string"
	case kindInt:
		return "int"
	case kindFloat:
		return "float"
	case kindBool:
		return "bool"
	case kindInts:
		return "[]int"
	case kindFloats:
		return "[]float"
	case kindStrings:
		return "[]string"
	}
	return "invalid"
}

// field is one configuration key, derived from the Config struct so that
// the struct is the only list of keys (default.yaml must then set each one;
// a test checks it).
type field struct {
	key     string // "section.name"
	section string
	name    string
	index   []int // reflect field index path inside Config
	kind    kind
}

// schema lists every key in struct order (the order of default.yaml).
func schema() []field {
	var out []field
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		sec := yamlName(sf)
		if !sf.IsExported() || sec == "" || sf.Type.Kind() != reflect.Struct {
			continue
		}
		for j := 0; j < sf.Type.NumField(); j++ {
			kf := sf.Type.Field(j)
			name := yamlName(kf)
			if !kf.IsExported() || name == "" {
				continue
			}
			out = append(out, field{
				key:     sec + "." + name,
				section: sec,
				name:    name,
				index:   []int{i, j},
				kind:    kindOf(kf.Type),
			})
		}
	}
	return out
}

// yamlName is the key name in a struct field's yaml tag ("" when untagged).
func yamlName(sf reflect.StructField) string {
	tag := sf.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	return name
}

func kindOf(t reflect.Type) kind {
	switch t.Kind() {
	case reflect.String:
		return kindString
	case reflect.Int, reflect.Int64:
		return kindInt
	case reflect.Float64:
		return kindFloat
	case reflect.Bool:
		return kindBool
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.Int:
			return kindInts
		case reflect.Float64:
			return kindFloats
		case reflect.String:
			return kindStrings
		}
	}
	return kindInvalid
}

// fieldMap indexes fields by key.
func fieldMap(fields []field) map[string]*field {
	m := make(map[string]*field, len(fields))
	for i := range fields {
		m[fields[i].key] = &fields[i]
	}
	return m
}

// Keys lists every configuration key ("section.name") in the order of
// configs/default.yaml.
func Keys() []string {
	fields := schema()
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return keys
}

// Type names the value type of key: string, int, float, bool, []int, []float
// or []string ("" for an unknown key). Lists are written comma-separated in
// flags and environment variables.
func Type(key string) string {
	for _, f := range schema() {
		if f.key == key {
			return f.kind.String()
		}
	}
	return ""
}

// Default returns key's default from the embedded configs/default.yaml, in
// the text form that flags and environment variables accept (lists
// comma-separated), or "" for an unknown key. It is meant for flag help, so
// that defaults are written down once.
func Default(key string) string {
	defs, err := embeddedDefaults()
	if err != nil {
		return ""
	}
	v, ok := defs.vals[key]
	if !ok {
		return ""
	}
	return formatText(v)
}

// Defaults returns the configuration made of the embedded defaults alone.
// An error means the embedded file itself is broken (a build defect).
func Defaults() (*Config, error) {
	return Load(Input{})
}

// Help returns the comment that documents key in configs/default.yaml, as
// one line of text ("" for an unknown key), for flag help.
func Help(key string) string {
	defs, err := embeddedDefaults()
	if err != nil {
		return ""
	}
	return defs.help[key]
}

// helpComments collects the comment of every section.key in a YAML file.
func helpComments(data []byte) map[string]string {
	out := map[string]string{}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return out
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		sec, m := root.Content[i].Value, root.Content[i+1]
		if m.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(m.Content); j += 2 {
			k := m.Content[j]
			out[sec+"."+k.Value] = commentText(k.HeadComment + "\n" + k.LineComment)
		}
	}
	return out
}

// commentText turns YAML comment lines into one line of prose.
func commentText(s string) string {
	var words []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimSpace(strings.TrimLeft(line, "#"))
		if line != "" {
			words = append(words, line)
		}
	}
	return strings.Join(words, " ")
}

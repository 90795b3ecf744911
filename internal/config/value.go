package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Values travel between the layers in these Go types only: string, int64,
// float64, bool, []int, []float64, []string. Converting strictly here, before
// viper sees anything, is what keeps viper's lenient casts (1.9 → 1,
// "yes" → true) out of the result.

// fromText converts the text of an environment variable or flag.
func fromText(k kind, s string) (any, error) {
	switch k {
	case kindString:
		return s, nil
	case kindInt:
		return parseInt(s)
	case kindFloat:
		return parseFloat(s)
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", s)
		}
		return b, nil
	case kindInts, kindFloats, kindStrings:
		return listFromText(k, s)
	}
	return nil, fmt.Errorf("unsupported key type %v", k)
}

func parseInt(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if i, err := strconv.ParseInt(t, 10, 64); err == nil {
		return i, nil
	}
	// Accept integral numbers in float notation ("1e5" for 100000), which
	// YAML users write naturally; reject anything with a fraction.
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		if i, ok := integral(f); ok {
			return i, nil
		}
	}
	return 0, fmt.Errorf("want an integer, got %q", s)
}

// integral reports f as an int64 when it is a whole number in range.
func integral(f float64) (int64, bool) {
	if f != math.Trunc(f) || math.IsInf(f, 0) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("want a number, got %q", s)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("want a finite number, got %q", s)
	}
	return f, nil
}

// listFromText splits a comma-separated list; surrounding brackets are
// allowed ("[7000,30000]") and an empty text is an empty list.
func listFromText(k kind, s string) (any, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
		t = strings.TrimSpace(t[1 : len(t)-1])
	}
	var parts []string
	if t != "" {
		parts = strings.Split(t, ",")
	}
	return buildList(k, len(parts), func(i int) (any, error) {
		p := strings.TrimSpace(parts[i])
		if k == kindStrings && p == "" {
			return nil, fmt.Errorf("empty entry")
		}
		return fromText(elemKind(k), p)
	})
}

func elemKind(k kind) kind {
	switch k {
	case kindInts:
		return kindInt
	case kindFloats:
		return kindFloat
	case kindStrings:
		return kindString
	}
	return kindInvalid
}

// buildList converts n entries with conv into the list type of k.
func buildList(k kind, n int, conv func(i int) (any, error)) (any, error) {
	ints := make([]int, 0, n)
	floats := make([]float64, 0, n)
	strs := make([]string, 0, n)
	for i := 0; i < n; i++ {
		v, err := conv(i)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i+1, err)
		}
		switch x := v.(type) {
		case int64:
			if int64(int(x)) != x {
				return nil, fmt.Errorf("entry %d: %d does not fit an int", i+1, x)
			}
			ints = append(ints, int(x))
		case float64:
			floats = append(floats, x)
		case string:
			strs = append(strs, x)
		}
	}
	switch k {
	case kindInts:
		return ints, nil
	case kindFloats:
		return floats, nil
	case kindStrings:
		return strs, nil
	}
	return nil, fmt.Errorf("unsupported key type %v", k)
}

// fromNode converts a YAML value node.
func fromNode(k kind, n *yaml.Node) (any, error) {
	n = resolveAlias(n)
	if n == nil {
		return nil, fmt.Errorf("alias loop")
	}
	switch k {
	case kindInts, kindFloats, kindStrings:
		switch n.Kind {
		case yaml.SequenceNode:
			return buildList(k, len(n.Content), func(i int) (any, error) {
				e := resolveAlias(n.Content[i])
				if e == nil || e.Kind != yaml.ScalarNode || e.ShortTag() == "!!null" {
					return nil, fmt.Errorf("want a %s, got %s", elemKind(k).wordy(), describeNode(e))
				}
				return fromNode(elemKind(k), e)
			})
		case yaml.ScalarNode:
			if n.ShortTag() == "!!null" {
				return buildList(k, 0, nil)
			}
			// A lone scalar is a one-entry list: "formats: ply".
			return buildList(k, 1, func(int) (any, error) { return fromNode(elemKind(k), n) })
		}
		return nil, fmt.Errorf("want a list of %ss, got %s", elemKind(k).wordy(), describeNode(n))
	}
	if n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("want a %s, got %s", k.wordy(), describeNode(n))
	}
	tag := n.ShortTag()
	switch k {
	case kindString:
		if tag == "!!null" {
			return "", nil
		}
		// Any scalar is text here, so that "dir: 2024" names a folder.
		return n.Value, nil
	case kindInt:
		switch tag {
		case "!!int":
			var i int64
			if err := n.Decode(&i); err == nil {
				return i, nil
			}
		case "!!float":
			var f float64
			if err := n.Decode(&f); err == nil {
				if i, ok := integral(f); ok {
					return i, nil
				}
			}
		}
		return nil, fmt.Errorf("want an integer, got %s", describeNode(n))
	case kindFloat:
		if tag == "!!int" || tag == "!!float" {
			var f float64
			if err := n.Decode(&f); err == nil {
				if math.IsNaN(f) || math.IsInf(f, 0) {
					return nil, fmt.Errorf("want a finite number, got %s", describeNode(n))
				}
				return f, nil
			}
		}
		return nil, fmt.Errorf("want a number, got %s", describeNode(n))
	case kindBool:
		if tag == "!!bool" {
			var b bool
			if err := n.Decode(&b); err == nil {
				return b, nil
			}
		}
		return nil, fmt.Errorf("want true or false, got %s", describeNode(n))
	}
	return nil, fmt.Errorf("unsupported key type %v", k)
}

// wordy names a kind in an error message.
func (k kind) wordy() string {
	switch k {
	case kindString:
		return "string"
	case kindInt:
		return "integer"
	case kindFloat:
		return "number"
	case kindBool:
		return "boolean"
	}
	return "list"
}

// resolveAlias follows YAML aliases (*name) to the anchored node; nil on a
// loop, which a malicious file could build.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			return nil
		}
		n = n.Alias
	}
	return n
}

func describeNode(n *yaml.Node) string {
	if n == nil {
		return "nothing"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "an empty value"
		}
		return strconv.Quote(n.Value)
	}
	return "an unexpected YAML node"
}

// formatText writes a value in the text form fromText reads back.
func formatText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case []int:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = strconv.Itoa(e)
		}
		return strings.Join(parts, ",")
	case []float64:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = strconv.FormatFloat(e, 'g', -1, 64)
		}
		return strings.Join(parts, ",")
	case []string:
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v)
}

// formatShow writes a value for people (Describe): strings quoted, lists in
// brackets.
func formatShow(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case []int, []float64:
		return "[" + strings.ReplaceAll(formatText(x), ",", ", ") + "]"
	case []string:
		q := make([]string, len(x))
		for i, e := range x {
			q[i] = strconv.Quote(e)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return formatText(v)
}

// value reads key f of c in the loader's value types.
func (c *Config) value(f *field) any {
	v := reflect.ValueOf(c).Elem().FieldByIndex(f.index)
	switch f.kind {
	case kindString:
		return v.String()
	case kindInt:
		return v.Int()
	case kindFloat:
		return v.Float()
	case kindBool:
		return v.Bool()
	case kindInts:
		return append([]int(nil), v.Interface().([]int)...)
	case kindFloats:
		return append([]float64(nil), v.Interface().([]float64)...)
	case kindStrings:
		return append([]string(nil), v.Interface().([]string)...)
	}
	return nil
}

// set stores val (one of the loader's value types) into key f of c.
func (c *Config) set(f *field, val any) error {
	v := reflect.ValueOf(c).Elem().FieldByIndex(f.index)
	switch x := val.(type) {
	case string:
		if f.kind == kindString {
			v.SetString(x)
			return nil
		}
	case int64:
		if f.kind == kindInt {
			if v.OverflowInt(x) {
				return fmt.Errorf("%d does not fit an int", x)
			}
			v.SetInt(x)
			return nil
		}
	case float64:
		if f.kind == kindFloat {
			v.SetFloat(x)
			return nil
		}
	case bool:
		if f.kind == kindBool {
			v.SetBool(x)
			return nil
		}
	case []int:
		if f.kind == kindInts {
			v.Set(reflect.ValueOf(append([]int{}, x...)))
			return nil
		}
	case []float64:
		if f.kind == kindFloats {
			v.Set(reflect.ValueOf(append([]float64{}, x...)))
			return nil
		}
	case []string:
		if f.kind == kindStrings {
			v.Set(reflect.ValueOf(append([]string{}, x...)))
			return nil
		}
	}
	return fmt.Errorf("internal: value %v (%T) for a %v key", val, val, f.kind)
}

package config

import (
	"errors"
	"strconv"
	"strings"
)

// Layer is one level of the configuration precedence.
type Layer string

// Layers, lowest precedence first.
const (
	LayerDefault Layer = "default" // the embedded configs/default.yaml
	LayerFile    Layer = "file"    // Input.File, or the YAML given to Parse
	LayerEnv     Layer = "env"     // Input.Env
	LayerFlag    Layer = "flag"    // Input.Flags
)

// Source says where a value came from.
type Source struct {
	Layer Layer
	// Name is the file path (or preset), or the environment variable; empty
	// for defaults and flags.
	Name string
	// Line is the 1-based line in the file, 0 when unknown or not a file.
	Line int
}

// String is "default", "file cfg.yaml:3", "env RLXSPLAT_TRAIN_ITERATIONS"
// or "flag".
func (s Source) String() string {
	var b strings.Builder
	b.WriteString(string(s.Layer))
	if s.Name != "" {
		b.WriteString(" ")
		b.WriteString(s.Name)
	}
	if s.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(s.Line))
	}
	return b.String()
}

// ErrInvalid is matched (errors.Is) by every configuration problem, so that
// the command line can give them their own exit code.
var ErrInvalid = errors.New("config: invalid configuration")

// Error is one configuration problem. Load, Parse and Validate return
// several of them joined with errors.Join.
type Error struct {
	// Key is the configuration key, or the unknown name as the user wrote it;
	// empty when the problem concerns a whole file.
	Key string
	// Source is where the offending value came from; the zero Source for a
	// hand-built Config or a default.
	Source Source
	// Msg says what is wrong and what is allowed.
	Msg string
	// Err is an underlying error (a file system or YAML syntax error).
	Err error
}

// Error reads "config: <key>: <problem> (from <source>)".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		if e.Msg != "" {
			b.WriteString(": ")
		}
		b.WriteString(e.Err.Error())
	}
	if e.Source.Layer != "" && e.Source.Layer != LayerDefault {
		b.WriteString(" (from ")
		b.WriteString(e.Source.String())
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1 // the run failed
	exitUsage  = 2 // bad flags or configuration
	exitCheck  = 3 // a parity check failed
	exitCancel = 130
)

// streams holds everything a command reads from or writes to the process,
// so tests can run commands in memory.
type streams struct {
	Out, Err io.Writer
	Env      []string
	// TTY says whether Err is a terminal (progress bars redraw in place).
	TTY bool
}

func newStreams() *streams {
	fi, err := os.Stderr.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	return &streams{Out: os.Stdout, Err: os.Stderr, Env: os.Environ(), TTY: tty}
}

// usageError marks errors that are the user's input: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// checkError marks a failed check: exit code 3, table already printed.
type checkError struct{ msg string }

func (e checkError) Error() string { return e.msg }

func run(args []string, s *streams) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ce checkError
	var ue usageError
	switch {
	case errors.As(err, &ce):
		fmt.Fprintln(s.Err, "rlxsplat:", err)
		return exitCheck
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(s.Err, "rlxsplat:", err)
		return exitCancel
	case errors.As(err, &ue) || errors.Is(err, config.ErrInvalid):
		fmt.Fprintln(s.Err, "rlxsplat:", err)
		fmt.Fprintln(s.Err, "Run 'rlxsplat --help' for usage; configs/default.yaml documents every key.")
		return exitUsage
	default:
		fmt.Fprintln(s.Err, "rlxsplat:", err)
		return exitError
	}
}

func newRootCmd(s *streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "rlxsplat",
		Short: "Train 3D Gaussian Splatting scenes on the GPU or the CPU",
		Long: `rlxsplat trains 3D Gaussian Splatting scenes from COLMAP captures or
NeRF-style transforms.json sets, writes INRIA-layout PLY files, renders them,
and checks every gradient against finite differences.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Numbers from kernels built from other sources than the binary's own must not pass for
	// the binary's: say so before any command runs.
	root.PersistentPreRun = func(*cobra.Command, []string) {
		if dir := envValue(s.Env, gpu.EnvShaderDir); dir != "" {
			fmt.Fprintf(s.Err, "rlxsplat: %s=%s: GPU kernels are compiled from that directory, not from the sources built into this binary\n", gpu.EnvShaderDir, dir)
		}
	}
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newTrainCmd(s, nil), newRenderCmd(s, nil), newExportCmd(s, nil), newBenchCmd(s, nil), newParityCmd(s, nil), newViewCmd(s, nil))
	return root
}

// envValue is the last value of key in env (KEY=VALUE entries), trimmed; "" when unset.
func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = strings.TrimSpace(val)
		}
	}
	return v
}

// configFlags are the flags every command that reads the configuration has.
type configFlags struct {
	file string
	// fileData, when set, is the file layer's content (a checkpoint's
	// config), named fileName in messages.
	fileData    []byte
	fileName    string
	set         []string
	printConfig bool
	// keyOf maps a flag name to the config key it sets.
	keyOf map[string]string
}

func addConfigFlags(fs *pflag.FlagSet, cf *configFlags) {
	fs.StringVarP(&cf.file, "config", "c", "", "config file (YAML) or preset name (fast) over the defaults")
	fs.StringArrayVar(&cf.set, "set", nil, "set any config key: --set train.iterations=500 (repeatable)")
	fs.BoolVar(&cf.printConfig, "print-config", false, "print every resolved key, its value and where it came from, then exit")
	cf.keyOf = map[string]string{}
}

// bindKey declares a flag that sets a config key; its help shows the
// default from configs/default.yaml (the one source of defaults).
func (cf *configFlags) bindKey(fs *pflag.FlagSet, name, key, usage string) {
	cf.keyOf[name] = key
	fs.String(name, "", fmt.Sprintf("%s (config %s, default %s)", usage, key, config.Default(key)))
}

// resolved loads the configuration and handles --print-config: it returns
// a nil Config, and no error, when it has printed it and the command has
// nothing more to do.
func (cf *configFlags) resolved(cmd *cobra.Command, s *streams) (*config.Config, error) {
	c, err := cf.load(cmd.Flags(), s)
	if err != nil || !cf.printConfig {
		return c, err
	}
	fmt.Fprint(s.Out, c.Describe())
	return nil, nil
}

// load resolves the configuration: defaults < --config < env < flags.
func (cf *configFlags) load(fs *pflag.FlagSet, s *streams) (*config.Config, error) {
	flags := map[string]string{}
	for _, kv := range cf.set {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageError{fmt.Errorf("--set %q: want key=value", kv)}
		}
		flags[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	names := make([]string, 0, len(cf.keyOf))
	for n := range cf.keyOf {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if f := fs.Lookup(n); f != nil && f.Changed {
			flags[cf.keyOf[n]] = f.Value.String()
		}
	}
	return config.Load(config.Input{File: cf.file, FileData: cf.fileData, FileName: cf.fileName, Env: s.Env, Flags: flags})
}

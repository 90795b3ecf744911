package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlxsplat/rlxsplat/configs"
	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/convert"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
)

// Exit codes, one per kind of failure (listed in the root command's help and the README).
const (
	exitOK     = 0
	exitError  = 1   // the run failed: an input that cannot be read, a write that fails
	exitUsage  = 2   // bad flags, arguments or configuration, or an --out that holds another run
	exitCheck  = 3   // a parity check failed
	exitDevice = 4   // the device asked for cannot be used (--device cuda without a GPU, metal off macOS, emu without a C++ compiler), or COLMAP is missing
	exitCancel = 130 // interrupted (Ctrl-C or SIGTERM)
)

// exitCodesHelp documents the exit codes in the root command's help.
const exitCodesHelp = `Exit status: 0 success; 1 the run failed (an input that cannot be read, a
failed write); 2 bad flags, arguments or configuration; 3 a parity check
failed; 4 the device asked for cannot be used, or COLMAP (for convert) is
missing; 130 interrupted.`

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
	// The first signal asks the command to stop cleanly (train saves, bench and parity stop
	// between steps); once it has, the signals are the runtime's again, so a second Ctrl-C
	// ends whatever is still running at once.
	go func() { <-ctx.Done(); stop() }()
	root := newRootCmd(s)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	// Errors start with the command the user ran ("rlxsplat render: ..."), whichever
	// package the failure came from.
	msg := strings.TrimPrefix(err.Error(), cmd.Name()+": ")
	fmt.Fprintf(s.Err, "%s: %s\n", cmd.CommandPath(), msg)
	var ce checkError
	var ue usageError
	switch {
	case errors.As(err, &ce):
		return exitCheck
	case errors.Is(err, context.Canceled):
		return exitCancel
	case errors.Is(err, convert.ErrNoColmap):
		return exitDevice
	case errors.Is(err, app.ErrNoGPU):
		fmt.Fprintln(s.Err, "Hint: run on the CPU with --device cpu, or --device auto to use a GPU only when one works.")
		return exitDevice
	case errors.As(err, &ue) || errors.Is(err, config.ErrInvalid):
		fmt.Fprintf(s.Err, "Run '%s --help' for usage; configs/default.yaml documents every key.\n", cmd.CommandPath())
		return exitUsage
	default:
		return exitError
	}
}

// usageArgs wraps a positional-argument check so that its failure exits as a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func newRootCmd(s *streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "rlxsplat",
		Short: "Train 3D Gaussian Splatting scenes on the GPU or the CPU",
		Long: `rlxsplat trains 3D Gaussian Splatting scenes from COLMAP captures or
NeRF-style transforms.json sets, writes INRIA-layout PLY files, renders them,
and checks every gradient against finite differences.

` + exitCodesHelp,
		Version:       versionString(),
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
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newTrainCmd(s, nil), newRenderCmd(s, nil), newExportCmd(s, nil), newBenchCmd(s, nil), newParityCmd(s, nil), newViewCmd(s, nil), newConvertCmd(s, nil))
	for _, c := range root.Commands() {
		if c.Args == nil {
			c.Args = cobra.NoArgs
		}
		c.Args = usageArgs(c.Args)
		addCompletions(c)
	}
	return root
}

// deviceHelp is the help text of every --device flag bound to train.device, from the same
// list the configuration validates against.
func deviceHelp() string {
	n := config.DeviceNames()
	return "device: " + strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// addCompletions gives shell completion the values of the flags that take one of a known
// set, and the kind of file or directory of those that name one, on every command that has
// them.
func addCompletions(c *cobra.Command) {
	fixed := func(vals ...string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return vals, cobra.ShellCompDirectiveNoFileComp
		}
	}
	dirs := func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	}
	files := func(exts ...string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return exts, cobra.ShellCompDirectiveFilterFileExt
		}
	}
	sceneFiles := files(sceneExts...)
	values := map[string]cobra.CompletionFunc{
		"device":   fixed(config.DeviceNames()...),
		"render":   fixed(string(config.RenderEWA), string(config.RenderRay)),
		"bin-mode": fixed(string(config.BinGPUConic), string(config.BinGPURadiusAABB), string(config.BinCPUConic)),
		"split":    fixed("test", "train", "all"),
		"config":   completeConfig,
		"data":     dirs,
		"scene":    sceneFiles,
		"ply":      sceneFiles,
		"ckpt":     sceneFiles,
		"resume":   files("ckpt"),
	}
	// A command's own set where it takes fewer values than the configuration does.
	switch c.Name() {
	case "train":
		values["out"] = dirs
	case "render":
		values["out"] = dirs
		values["format"] = fixed(orbitFormats...)
	case "export":
		values["out"] = files(exportExts...)
		values["format"] = fixed(exportExts...)
	}
	for name, f := range values {
		if c.Flags().Lookup(name) != nil {
			_ = c.RegisterFlagCompletionFunc(name, f)
		}
	}
}

// sceneExts are the extensions of the scene files the readers take (they tell the format
// by content; completion offers the usual names).
var sceneExts = []string{"ply", "spz", "splat", "glb", "ckpt"}

// exportExts are the formats export writes, also their extensions.
var exportExts = []string{"spz", "splat", "ply", "glb"}

// completeConfig offers the embedded presets and the YAML files and directories that start
// with what has been typed: --config takes either.
func completeConfig(_ *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	if !strings.ContainsAny(typed, `/\`) {
		for _, n := range configs.Names() {
			if strings.HasPrefix(n, typed) {
				out = append(out, n)
			}
		}
	}
	matches, _ := filepath.Glob(globEscape(typed) + "*")
	dir := false
	for _, m := range matches {
		fi, err := os.Stat(m)
		switch {
		case err != nil:
		case fi.IsDir():
			out = append(out, m+string(filepath.Separator))
			dir = true
		case strings.HasSuffix(m, ".yaml") || strings.HasSuffix(m, ".yml"):
			out = append(out, m)
		}
	}
	// A directory is a step on the way to a file: no space after it.
	if dir {
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// globEscape quotes the characters filepath.Match treats as patterns.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s)
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
// The flag has the key's type, so that help says `--iterations int` and pflag rejects
// "--iterations x" itself; its own zero default is never used (only flags the user set
// reach the configuration), so help shows the configuration's default in the text.
func (cf *configFlags) bindKey(fs *pflag.FlagSet, name, key, usage string) {
	cf.keyOf[name] = key
	usage = fmt.Sprintf("%s (config %s, default %s)", usage, key, config.Default(key))
	switch config.Type(key) {
	case "int":
		fs.Int(name, 0, usage)
	case "float":
		fs.Float64(name, 0, usage)
	case "bool":
		fs.Bool(name, false, usage)
	default:
		fs.String(name, "", usage)
	}
}

// resolved loads the configuration and handles --print-config: it returns
// a nil Config, and no error, when it has printed it and the command has
// nothing more to do.
func (cf *configFlags) resolved(cmd *cobra.Command, s *streams) (*config.Config, error) {
	c, err := cf.load(cmd.Flags(), s)
	if err != nil {
		return nil, err
	}
	if cf.printConfig {
		fmt.Fprint(s.Out, c.Describe())
		return nil, nil
	}
	// A required GPU that is not there fails now, not after the dataset has loaded.
	if err := app.CheckDevice(c); err != nil {
		return nil, err
	}
	return c, nil
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

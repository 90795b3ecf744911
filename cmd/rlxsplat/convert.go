package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/rlxsplat/rlxsplat/internal/convert"
)

// convertOptions are the parsed flags and arguments of `convert`.
type convertOptions struct {
	opt convert.Options
	// colmap is --colmap as given ("" = colmap on PATH).
	colmap string
}

func newConvertCmd(s *streams, runF func(*convertOptions) error) *cobra.Command {
	o := &convertOptions{opt: convert.DefaultOptions()}
	cmd := &cobra.Command{
		Use:   "convert PHOTOS_DIR [--out CAPTURE] [flags]",
		Short: "Turn a folder of photos into a capture to train, with COLMAP",
		Long: `Convert runs COLMAP on a folder of photos (JPEG or PNG, directly inside it)
as the original 3DGS preparation does: SIFT features with one shared camera
(OPENCV unless --camera-model says otherwise), matching (exhaustive for up to
--exhaustive-max photos, sequential above that or with --matcher sequential,
the choice for video frames), incremental mapping (the largest model when
COLMAP splits the scene), undistortion to PINHOLE cameras, and images_2/4/8
copies at half, quarter and eighth size (area averaging). The capture it
writes trains as is: rlxsplat train --data CAPTURE.

The photos are hard-linked (or copied) into CAPTURE/input; their folder is
never written to. COLMAP's own output goes to CAPTURE/colmap.log, stage by
stage with each command line. A video is not read: extract its frames first
(for example ffmpeg -i clip.mp4 -qscale:v 1 -vf fps=2 frames/%04d.jpg) and
convert them with --matcher sequential.

COLMAP comes from Debian/Ubuntu's colmap package (apt install colmap), macOS's
Homebrew (brew install colmap) or a release from
https://github.com/colmap/colmap/releases; without it convert exits with
status 4.`,
		Example: `  rlxsplat convert photos/ --out capture
  rlxsplat train --data capture
  rlxsplat convert frames/ --out capture --matcher sequential --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.opt.Photos = args[0]
			if o.opt.Out == "" {
				return usageError{fmt.Errorf("convert: --out is empty")}
			}
			if runF != nil {
				return runF(o)
			}
			return runConvert(cmd, o, s)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.opt.Out, "out", "o", "capture", "capture directory to write (input/, images/, sparse/0, images_2/4/8, colmap.log)")
	fs.StringVar(&o.colmap, "colmap", "", "COLMAP executable (default: colmap on PATH)")
	fs.StringVar(&o.opt.CameraModel, "camera-model", o.opt.CameraModel, "COLMAP camera model shared by the photos (OPENCV, SIMPLE_RADIAL, PINHOLE, ...)")
	fs.BoolVar(&o.opt.GPU, "gpu", false, "extract and match features on the GPU (needs a COLMAP built with CUDA)")
	fs.StringVar(&o.opt.Matcher, "matcher", o.opt.Matcher, "feature matching: auto, exhaustive or sequential (video frames)")
	fs.IntVar(&o.opt.ExhaustiveMax, "exhaustive-max", o.opt.ExhaustiveMax, "with --matcher auto, match exhaustively up to this many photos, sequentially above")
	fs.IntVar(&o.opt.MinRegistered, "min-registered", 0, "fewest registered photos accepted (0 = half the photos, at least 3)")
	fs.BoolVar(&o.opt.Force, "force", false, "replace the earlier conversion an --out directory holds")
	fixed := func(vals ...string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return vals, cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = cmd.RegisterFlagCompletionFunc("matcher", fixed(convert.MatcherAuto, convert.MatcherExhaustive, convert.MatcherSequential))
	_ = cmd.RegisterFlagCompletionFunc("camera-model", fixed(convert.CameraModels()...))
	cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveFilterDirs
	}
	return cmd
}

func runConvert(cmd *cobra.Command, o *convertOptions, s *streams) error {
	// A mistyped flag is reported before a missing COLMAP, which takes longer to fix.
	o.opt.Colmap = "colmap"
	if err := o.opt.Check(); err != nil {
		return usageError{err}
	}
	exe, err := convert.FindColmap(o.colmap, lookPathIn(s.Env))
	if err != nil {
		return err
	}
	o.opt.Colmap = exe
	o.opt.Env = s.Env
	p := newStageProgress(s)
	res, err := convert.Run(cmd.Context(), o.opt, p.event)
	p.finish()
	if errors.Is(err, convert.ErrUsage) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(s.Err, "rlxsplat: %s: %d of %d photos registered, %d points, %d×%d px; train it with\n  rlxsplat train --data %s\n",
		res.Dir, res.Registered, res.Photos, res.Points, res.Width, res.Height, res.Dir)
	return nil
}

// lookPathIn searches the PATH of env (the command's environment, which
// tests replace) for a command name; a name with a slash is taken as a path.
func lookPathIn(env []string) func(string) (string, error) {
	return func(name string) (string, error) {
		if strings.ContainsRune(name, filepath.Separator) || strings.ContainsRune(name, '/') {
			return exec.LookPath(name)
		}
		for _, dir := range filepath.SplitList(envValue(env, "PATH")) {
			if dir == "" {
				continue
			}
			if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s: not found on PATH", name)
	}
}

// stageProgress prints a line as each stage starts and ends, and on a
// terminal a progress bar for the stage's photos; off a terminal, a plain
// line at most every plainEvery instead of the bar.
type stageProgress struct {
	s     *streams
	bar   *progressbar.ProgressBar
	stage string
	last  time.Time
}

func newStageProgress(s *streams) *stageProgress { return &stageProgress{s: s} }

func (p *stageProgress) event(ev convert.Event) {
	switch e := ev.(type) {
	case convert.StageStarted:
		p.finish()
		p.stage, p.last = e.Stage, time.Now()
		fmt.Fprintf(p.s.Err, "rlxsplat: [%d/%d] %s: %s\n", e.Index, e.Count, e.Stage, e.Detail)
	case convert.StageProgress:
		if !p.s.TTY {
			if time.Since(p.last) >= plainEvery {
				p.last = time.Now()
				fmt.Fprintf(p.s.Err, "rlxsplat: %s: %d/%d\n", e.Stage, e.Done, e.Total)
			}
			return
		}
		if p.bar == nil {
			p.bar = progressbar.NewOptions(e.Total,
				progressbar.OptionSetWriter(p.s.Err),
				progressbar.OptionSetDescription(e.Stage),
				progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(24),
				progressbar.OptionThrottle(250*time.Millisecond),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.s.Err) }))
		}
		if e.Total != p.bar.GetMax() {
			p.bar.ChangeMax(e.Total)
		}
		_ = p.bar.Set(e.Done)
	case convert.StageDone:
		p.finish()
		msg := fmt.Sprintf("rlxsplat: %s done in %.1fs", e.Stage, e.Elapsed.Seconds())
		if e.Summary != "" {
			msg += ": " + e.Summary
		}
		fmt.Fprintln(p.s.Err, msg)
	case convert.Notice:
		if p.bar != nil {
			_ = p.bar.Clear()
		}
		fmt.Fprintln(p.s.Err, "rlxsplat:", e.Text)
	}
}

// finish removes the current stage's bar, if any.
func (p *stageProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Exit()
		p.bar = nil
	}
}

package anim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
)

// ErrNoFFmpeg says that no ffmpeg is on PATH, so no MP4 can be written.
var ErrNoFFmpeg = errors.New("anim: no ffmpeg on PATH (install it, e.g. apt install ffmpeg, or write a GIF with --format gif)")

// FindFFmpeg returns the ffmpeg on PATH, or ErrNoFFmpeg: callers check it before rendering
// any frame.
func FindFFmpeg() (string, error) {
	p, err := exec.LookPath("ffmpeg")
	if err != nil {
		return "", ErrNoFFmpeg
	}
	return p, nil
}

// WriteMP4 encodes the frames in dir (FrameName) as an H.264 MP4 at fps frames per second
// with ffmpeg, into dir first, then copies it to path atomically. yuv420p and even sizes
// make a file every player opens; ffmpeg's own log goes into the error when it fails.
func WriteMP4(ctx context.Context, ffmpeg, path, dir string, fps float64) error {
	if !(fps > 0) {
		return fmt.Errorf("anim: %s: %g frames per second, want > 0", path, fps)
	}
	tmp := filepath.Join(dir, "out.mp4")
	rate := strconv.FormatFloat(fps, 'g', -1, 64)
	cmd := exec.CommandContext(ctx, ffmpeg, "-hide_banner", "-loglevel", "error", "-y",
		"-framerate", rate, "-i", filepath.Join(dir, framePattern),
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2",
		"-movflags", "+faststart", tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("anim: %s: ffmpeg: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	f, err := os.Open(tmp)
	if err != nil {
		return fmt.Errorf("anim: %s: ffmpeg wrote no file: %w", path, err)
	}
	defer f.Close()
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := io.Copy(w, f); return err }, nil); err != nil {
		return fmt.Errorf("anim: %s: %w", path, err)
	}
	return nil
}

package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/rlxsplat/rlxsplat/internal/io/scene"
	"github.com/rlxsplat/rlxsplat/internal/train"
)

// sceneFlags binds --scene and the older --ply and --ckpt, which now take
// any scene file too: the format comes from the file's content.
type sceneFlags struct{ scene, ply, ckpt string }

func (f *sceneFlags) add(fs *pflag.FlagSet, what string) {
	fs.StringVar(&f.scene, "scene", "", what+": a PLY (INRIA or compressed), SPZ, .splat, .glb or checkpoint, told apart by content")
	fs.StringVar(&f.ply, "ply", "", "the same as --scene (kept for scripts)")
	fs.StringVar(&f.ckpt, "ckpt", "", "the same as --scene (kept for scripts)")
}

// path returns the one scene file given; "" when none is and it is
// optional.
func (f *sceneFlags) path(cmd string, required bool) (string, error) {
	var given []string
	for _, p := range []string{f.scene, f.ply, f.ckpt} {
		if p != "" {
			given = append(given, p)
		}
	}
	switch {
	case len(given) > 1:
		return "", usageError{fmt.Errorf("%s: give one scene: --scene, --ply and --ckpt name the same thing", cmd)}
	case len(given) == 0 && required:
		return "", usageError{fmt.Errorf("%s: give the scene to read with --scene FILE", cmd)}
	case len(given) == 0:
		return "", nil
	}
	return given[0], nil
}

// readScene reads a scene file of any format and prints the reader's
// warnings (clamped values, dropped coefficients) to errw.
func readScene(path string, errw io.Writer) (*scene.Scene, error) {
	s, err := scene.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, w := range s.Warnings {
		fmt.Fprintln(errw, "rlxsplat: warning:", w)
	}
	return s, nil
}

// checkpointConfigDefault makes a checkpoint's stored config the base configuration when the
// scene is a checkpoint and no --config was given, so that it renders as it was trained.
func (cf *configFlags) checkpointConfigDefault(path string) error {
	if cf.file != "" {
		return nil
	}
	if f, err := scene.DetectFile(path); err != nil || f != scene.Checkpoint {
		return nil // an unreadable file is reported by the scene reader, with its reason
	}
	yaml, err := train.CheckpointConfig(path)
	if err != nil {
		return err
	}
	cf.fileData, cf.fileName = yaml, path+" (config)"
	return nil
}

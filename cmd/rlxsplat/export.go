package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rlxsplat/rlxsplat/internal/io/dotsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/gltfsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/io/spz"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Export formats, named as --format takes them and as the file extension.
const (
	formatSPZ   = "spz"
	formatSplat = "splat"
	formatPLY   = "ply"
	formatGLB   = "glb"
)

type exportOptions struct {
	sf    sceneFlags
	scene string // the scene file, from --scene (or --ply, --ckpt)
	out   string
	// format is spz, splat, ply or glb: --format, or else out's extension.
	format string
	// shDegree is the SH degree to write; −1 keeps the input's.
	shDegree int
	// antialiased sets the SPZ antialiasing flag; a checkpoint's config
	// (model.antialiased) or an SPZ's flag sets it too. glTF has no field
	// for it.
	antialiased bool
	// spzVersion is the SPZ version written: 4 (the default, what
	// Niantic's library writes), or 3 and 2 for older viewers.
	spzVersion int
}

func newExportCmd(s *streams, runF func(*exportOptions) error) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export --scene FILE --out FILE.{spz,splat,ply,glb} [flags]",
		Short: "Convert a scene (PLY, SPZ, .splat, .glb or checkpoint) to SPZ, .splat, PLY or glTF for viewers",
		Long: `Export converts a trained scene to another splat file: SPZ (Niantic's
compressed format, about a tenth of the PLY), antimatter15's .splat (32 bytes a
splat, no view-dependent colour), the INRIA PLY or binary glTF (.glb) with the
KHR_gaussian_splatting extension (axes converted to glTF's y-up; viewers
without the extension show a coloured point cloud). The input may be any scene
file rlxsplat reads, told apart by its content. The format written comes from
the extension of --out unless --format names it. The file is written to a
temporary file, synced and renamed, so an existing one is never left half
written.`,
		Example: `  rlxsplat export --scene out/point_cloud.ply --out scene.spz
  rlxsplat export --scene out/point_cloud.ply --out scene.spz --spz-version 3
  rlxsplat export --scene out/checkpoints/step-30000.ckpt --out scene.splat
  rlxsplat export --scene biker.compressed.ply --out scene.glb`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.scene, err = o.sf.path("export", true); err != nil {
				return err
			}
			if o.out == "" {
				return usageError{fmt.Errorf("export: --out is required")}
			}
			if o.format == "" {
				o.format = strings.TrimPrefix(strings.ToLower(filepath.Ext(o.out)), ".")
				if !validFormat(o.format) {
					return usageError{fmt.Errorf("export: cannot tell the format of %s from its extension; name it with --format spz|splat|ply|glb", o.out)}
				}
			} else if !validFormat(o.format) {
				return usageError{fmt.Errorf("export: --format %q is not one of spz, splat, ply, glb", o.format)}
			}
			if o.spzVersion < 2 || o.spzVersion > 4 {
				return usageError{fmt.Errorf("export: --spz-version %d, want 2, 3 or 4", o.spzVersion)}
			}
			if o.shDegree < -1 || o.shDegree > splat.MaxSHDegree {
				return usageError{fmt.Errorf("export: --sh-degree %d, want 0..%d (or -1 for the input's)", o.shDegree, splat.MaxSHDegree)}
			}
			if runF != nil {
				return runF(o)
			}
			return runExport(o, s)
		},
	}
	fs := cmd.Flags()
	o.sf.add(fs, "scene to export")
	fs.StringVar(&o.out, "out", "", "file to write (.spz, .splat, .ply or .glb)")
	fs.StringVar(&o.format, "format", "", "spz, splat, ply or glb (default: from the extension of --out)")
	fs.IntVar(&o.shDegree, "sh-degree", -1, "SH degree to write, 0..3 (-1: the input's; .splat always holds 0)")
	fs.BoolVar(&o.antialiased, "antialiased", false, "mark an SPZ as trained with the Mip-Splatting filter (a checkpoint's config sets it)")
	fs.IntVar(&o.spzVersion, "spz-version", spz.DefaultVersion, "SPZ version to write: 4 (zstd, what Niantic's library writes), 3 or 2 (gzip, for older viewers)")
	return cmd
}

func validFormat(f string) bool {
	return f == formatSPZ || f == formatSplat || f == formatPLY || f == formatGLB
}

func runExport(o *exportOptions, s *streams) error {
	sc, err := readScene(o.scene, s.Err)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	g, deg, aa, in := sc.Gaussians, sc.SHDegree, sc.Antialiased, o.scene
	if o.shDegree >= 0 {
		deg = o.shDegree
	}
	aa = aa || o.antialiased
	switch o.format {
	case formatSPZ:
		warn := func(m string) { fmt.Fprintln(s.Err, "rlxsplat: warning: export:", m) }
		err = spz.WriteFile(o.out, g, spz.Options{SHDegree: deg, Antialiased: aa, Version: o.spzVersion, Warn: warn})
	case formatSplat:
		deg = 0
		err = dotsplat.WriteFile(o.out, g)
	case formatPLY:
		err = ply.WriteFile(o.out, g, deg)
	case formatGLB:
		if aa {
			// Say so rather than drop it silently: without the filter the scene renders
			// differently from how it was trained, and nothing in the file can ask for it.
			fmt.Fprintln(s.Err, "rlxsplat: export: KHR_gaussian_splatting has no field for the Mip-Splatting 2D filter; viewers will render this antialiased scene without it")
		}
		err = gltfsplat.WriteFile(o.out, g, gltfsplat.Options{SHDegree: deg})
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	size := ""
	if fi, err := os.Stat(o.out); err == nil {
		size = fmt.Sprintf(", %.1f MB", float64(fi.Size())/1e6)
	}
	fmt.Fprintf(s.Out, "wrote %d splats (SH degree %d) from %s to %s (%s%s)\n", g.Len(), deg, in, o.out, o.format, size)
	return nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rlxsplat/rlxsplat/internal/app"
	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/train"
	"github.com/rlxsplat/rlxsplat/internal/viewer"
)

// viewFlags are the server flags `view` and `train --view` share.
type viewFlags struct {
	on   bool // train only: --view
	host string
	port int
	open bool
}

func addViewFlags(fs *pflag.FlagSet, f *viewFlags, prefix string, port int) {
	fs.StringVar(&f.host, prefix+"host", "127.0.0.1", "address to serve the viewer on (anything but loopback exposes it to the network)")
	fs.IntVar(&f.port, prefix+"port", port, "port to serve the viewer on (0 picks a free one)")
	fs.BoolVar(&f.open, prefix+"open", false, "open the viewer in the system browser")
}

type viewOptions struct {
	cf    configFlags
	scene string
	vf    viewFlags
}

func newViewCmd(s *streams, runF func(*viewOptions, *config.Config) error) *cobra.Command {
	o := &viewOptions{}
	cmd := &cobra.Command{
		Use:   "view SCENE [flags]",
		Short: "Look at a splat file or checkpoint in the browser",
		Long: `View serves a page that renders SCENE (PLY, SPZ, .splat, .glb or a checkpoint)
with WebGL2 in the browser: orbit and fly controls, field of view, background,
and with --data a list of the dataset's cameras to snap to, beside their photos.
SCENE may be any file rlxsplat reads (INRIA or compressed PLY, SPZ 2-4,
.splat, .glb, checkpoint), told apart by its content. It listens on the
loopback address unless --host says otherwise, and runs until interrupted
(Ctrl-C).`,
		Example: `  rlxsplat view out/point_cloud.ply --open
  rlxsplat view out/checkpoints/step-07000.ckpt --data ../shared/data/duck --downscale 2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.scene = args[0]
			if err := o.cf.checkpointConfigDefault(o.scene); err != nil {
				return err
			}
			c, err := o.cf.resolved(cmd, s)
			if err != nil || c == nil {
				return err
			}
			if runF != nil {
				return runF(o, c)
			}
			return runView(cmd.Context(), o, c, s)
		},
	}
	fs := cmd.Flags()
	addConfigFlags(fs, &o.cf)
	o.cf.bindKey(fs, "data", "data.dir", "dataset whose cameras (and photos) the page offers to snap to")
	o.cf.bindKey(fs, "downscale", "data.downscale", "divide the dataset's image size by N")
	addViewFlags(fs, &o.vf, "", 8080)
	return cmd
}

func runView(ctx context.Context, o *viewOptions, c *config.Config, s *streams) error {
	sc, err := readScene(o.scene, s.Err)
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	g, deg := sc.Gaussians, sc.SHDegree
	var views []viewer.View
	if c.Data.Dir != "" {
		ds, err := app.LoadDataset(c)
		if err != nil {
			return err
		}
		views = datasetViews(ds)
	}
	srv := viewer.New(viewer.Options{Title: filepath.Base(o.scene), Views: views, Background: app.Background(c)})
	if err := srv.SetScene(g, deg); err != nil {
		return fmt.Errorf("view: %w", err)
	}
	fmt.Fprintf(s.Err, "rlxsplat: %s: %d splats, SH degree %d\n", o.scene, g.Len(), deg)
	return serveView(ctx, srv, &o.vf, s, func(url string) {
		fmt.Fprintf(s.Err, "rlxsplat: viewer at %s (Ctrl-C to stop)\n", url)
	})
}

// datasetViews lists a dataset's training and test views for the page's camera list.
func datasetViews(ds *dataset.Dataset) []viewer.View {
	var out []viewer.View
	for _, v := range append(append([]dataset.View(nil), ds.Train...), ds.Test...) {
		out = append(out, viewer.View{Name: v.Name, Camera: v.Camera, Photo: v.Image})
	}
	return out
}

// serveView listens as f says, warns loudly about a non-loopback address, opens the browser
// when asked, and serves until ctx ends.
func serveView(ctx context.Context, srv *viewer.Server, f *viewFlags, s *streams, started func(url string)) error {
	ln, url, loopback, err := viewer.Listen(f.host, f.port)
	if err != nil {
		return err
	}
	srv.SetLoopback(loopback)
	if !loopback {
		warnExposed(s.Err, ln.Addr().String())
	}
	started(url)
	if f.open {
		if err := openBrowser(url); err != nil {
			fmt.Fprintf(s.Err, "rlxsplat: could not open a browser (%v): open %s yourself\n", err, url)
		}
	}
	return srv.Serve(ctx, ln)
}

func warnExposed(w io.Writer, addr string) {
	line := strings.Repeat("!", 78)
	fmt.Fprintf(w, "%s\nrlxsplat: WARNING: the viewer listens on %s, reachable from other machines.\n"+
		"rlxsplat: Anyone who can reach it sees the scene and, during training, can pause it.\n"+
		"rlxsplat: Leave --host at 127.0.0.1 unless this network is trusted.\n%s\n", line, addr, line)
}

// openBrowser hands url to the system's opener; it does not wait for the browser.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() // reap it
	return nil
}

// liveRefresh is how often `train --view` refreshes the scene while a page is watching.
const liveRefresh = 3 * time.Second

// startTrainView serves the live page of a training run when --view asks for it: it becomes
// opt's Observer, and stop shuts the server down (when the run ends).
func startTrainView(ctx context.Context, f *viewFlags, opt *train.Options, ds *dataset.Dataset, title string, s *streams) (stop func(), err error) {
	if !f.on {
		return func() {}, nil
	}
	live := viewer.NewLive(liveRefresh)
	srv := viewer.New(viewer.Options{Title: title, Views: datasetViews(ds), Background: opt.Background, Live: live})
	ctx, cancel := context.WithCancel(ctx)
	go live.Run(ctx)
	ready := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- serveView(ctx, srv, f, s, func(url string) {
			fmt.Fprintf(s.Err, "rlxsplat: live viewer at %s\n", url)
			ready <- nil
		})
	}()
	select {
	case err := <-done: // failed to listen
		cancel()
		return nil, err
	case <-ready:
	}
	opt.Observer = live
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(s.Err, "rlxsplat:", err)
		}
	}, nil
}

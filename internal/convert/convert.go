package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/io/colmap"
)

// Matchers (Options.Matcher).
const (
	MatcherAuto       = "auto"
	MatcherExhaustive = "exhaustive"
	MatcherSequential = "sequential"
)

// Stage names, in the order they run; events and errors use them.
const (
	StageInput     = "input"
	StageFeatures  = "features"
	StageMatching  = "matching"
	StageMapping   = "mapping"
	StageUndistort = "undistort"
	StageResize    = "resize"
)

// Stages lists the stages in order.
func Stages() []string {
	return []string{StageInput, StageFeatures, StageMatching, StageMapping, StageUndistort, StageResize}
}

// baGlobalFunctionTolerance is the mapper's global bundle-adjustment stopping
// tolerance the original 3DGS preparation sets: each global adjustment stops
// once an iteration changes the cost by less than this fraction, where
// COLMAP's default (0) runs it to its iteration limit.
const baGlobalFunctionTolerance = "0.000001"

// DefaultExhaustiveMax is the largest photo count matched exhaustively when
// the matcher is auto: every pair of n photos is n(n−1)/2 matches, cheap for
// a hundred photos and slow for a thousand, where the sequential matcher's
// neighbours-in-name-order (with quadratic overlap) keeps it linear.
const DefaultExhaustiveMax = 100

// ErrUsage is wrapped by errors in the options or the output directory: the
// caller's input, not a failure of the run.
var ErrUsage = errors.New("usage")

// ErrTooFewRegistered is wrapped by the error of a mapping that registered
// fewer photos than Options.MinRegistered asks for.
var ErrTooFewRegistered = errors.New("too few photos registered")

// Options says what Run does. Start from DefaultOptions.
type Options struct {
	// Photos is the folder of photos (JPEG or PNG, directly inside it).
	Photos string
	// Out is the capture directory to write.
	Out string
	// Colmap is the COLMAP executable (see FindColmap).
	Colmap string
	// CameraModel is the COLMAP camera model the photos share (OPENCV: focal
	// lengths, principal point, two radial and two tangential terms).
	CameraModel string
	// GPU lets COLMAP extract and match SIFT features on the GPU (it needs a
	// CUDA build of COLMAP, or OpenGL with a display).
	GPU bool
	// Matcher is MatcherAuto, MatcherExhaustive or MatcherSequential; auto
	// matches exhaustively up to ExhaustiveMax photos (0: DefaultExhaustiveMax),
	// sequentially above.
	Matcher       string
	ExhaustiveMax int
	// MinRegistered is the fewest registered photos accepted; 0 means half
	// the photos (rounded up), and never fewer than 3.
	MinRegistered int
	// Force removes an earlier conversion's files from Out first.
	Force bool
	// Env is COLMAP's environment (KEY=VALUE); nil means this process's.
	Env []string
	// Workers is the number of images resized at once; ≤ 0 means one per CPU.
	Workers int
}

// DefaultOptions returns the options of the original 3DGS preparation.
func DefaultOptions() Options {
	return Options{CameraModel: "OPENCV", Matcher: MatcherAuto, ExhaustiveMax: DefaultExhaustiveMax}
}

// Event reports progress; Run calls its callback from one goroutine at a time.
type Event interface{ event() }

// StageStarted: a stage begins (Index counts from 1 to Count).
type StageStarted struct {
	Stage        string
	Index, Count int
	// Detail says what the stage does this time ("exhaustive matching of 16 photos").
	Detail string
}

// StageProgress: Done of Total units of a stage (photos, blocks).
type StageProgress struct {
	Stage       string
	Done, Total int
}

// StageDone: a stage finished.
type StageDone struct {
	Stage   string
	Elapsed time.Duration
	// Summary is its outcome in words ("14 of 16 photos registered").
	Summary string
}

// Notice is a one-line remark (the COLMAP version, a skipped file).
type Notice struct{ Text string }

func (StageStarted) event()  {}
func (StageProgress) event() {}
func (StageDone) event()     {}
func (Notice) event()        {}

// Result describes the capture Run wrote.
type Result struct {
	Dir    string
	Photos int
	// Registered is the number of photos in the model used; Models how many
	// models COLMAP wrote (more than one when it could not join the scene).
	Registered, Models int
	Points             int
	Width, Height      int // undistorted size of the first image
	Log                string
}

// outputs are the entries a conversion writes into Out; an earlier conversion
// is recognised by them and Force removes only them.
var outputs = []string{"input", "distorted", "images", "images_2", "images_4", "images_8", "sparse", "stereo",
	"run-colmap-geometric.sh", "run-colmap-photometric.sh", "colmap.log"}

// Check validates the options that need neither the file system nor COLMAP
// (Run checks them too); its errors wrap ErrUsage.
func (o *Options) Check() error {
	switch {
	case o.Photos == "":
		return fmt.Errorf("convert: %w: no photo folder given", ErrUsage)
	case o.Out == "":
		return fmt.Errorf("convert: %w: no output directory given", ErrUsage)
	case o.Colmap == "":
		return fmt.Errorf("convert: %w: no COLMAP executable given", ErrUsage)
	case o.ExhaustiveMax < 0:
		return fmt.Errorf("convert: %w: --exhaustive-max %d: want 0 or more", ErrUsage, o.ExhaustiveMax)
	case o.MinRegistered < 0:
		return fmt.Errorf("convert: %w: --min-registered %d: want 0 (half the photos) or more", ErrUsage, o.MinRegistered)
	}
	switch o.Matcher {
	case "", MatcherAuto, MatcherExhaustive, MatcherSequential:
	default:
		return fmt.Errorf("convert: %w: --matcher %q: want auto, exhaustive or sequential", ErrUsage, o.Matcher)
	}
	if m, ok := colmap.ModelByName(o.CameraModel); !ok || m.NumFocal == 0 {
		return fmt.Errorf("convert: %w: --camera-model %q: want one of %s", ErrUsage, o.CameraModel, strings.Join(CameraModels(), ", "))
	}
	return nil
}

// CameraModels lists the camera models --camera-model accepts: COLMAP's
// models that image_undistorter turns into PINHOLE.
func CameraModels() []string {
	var out []string
	for _, m := range colmap.CameraModels() {
		// COLMAP 3.8 knows the first twelve; the newer ones would fail in it.
		if m.ID <= 11 {
			out = append(out, m.Name)
		}
	}
	return out
}

// matcher resolves the matcher for n photos.
func (o *Options) matcher(n int) string {
	if o.Matcher == MatcherExhaustive || o.Matcher == MatcherSequential {
		return o.Matcher
	}
	max := o.ExhaustiveMax
	if max == 0 {
		max = DefaultExhaustiveMax
	}
	if n <= max {
		return MatcherExhaustive
	}
	return MatcherSequential
}

// minRegistered is the fewest registered photos accepted out of n.
func (o *Options) minRegistered(n int) int {
	if o.MinRegistered > 0 {
		return o.MinRegistered
	}
	return max(3, (n+1)/2)
}

// minPhotos is the fewest photos worth converting: COLMAP needs two to start
// a model, and the trainer holds one view in eight out for testing.
const minPhotos = 3

// Run converts o.Photos into the capture o.Out, reporting to emit (nil:
// nothing). A cancelled ctx stops COLMAP and returns an error wrapping
// ctx.Err(). Whatever it has written stays on failure.
func Run(ctx context.Context, o Options, emit func(Event)) (*Result, error) {
	if emit == nil {
		emit = func(Event) {}
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	photosDir, err := filepath.Abs(o.Photos)
	if err != nil {
		return nil, fmt.Errorf("convert: %s: %w", o.Photos, err)
	}
	out, err := filepath.Abs(o.Out)
	if err != nil {
		return nil, fmt.Errorf("convert: %s: %w", o.Out, err)
	}
	if fi, err := os.Stat(photosDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("convert: %w: %s is not a folder of photos", ErrUsage, o.Photos)
	}
	if samePath(photosDir, out) {
		return nil, fmt.Errorf("convert: %w: --out %s is the photo folder itself: give a new directory (the photos are linked into its input/)", ErrUsage, o.Out)
	}
	input := filepath.Join(out, "input")
	// The 3DGS habit of putting the photos into CAPTURE/input first: use them in place.
	inPlace := samePath(photosDir, input)
	photos, skipped, err := listPhotos(photosDir)
	if err != nil {
		return nil, err
	}
	if len(photos) < minPhotos {
		return nil, fmt.Errorf("convert: %w: %s holds %d JPEG or PNG photos: at least %d are needed (and dozens for a good capture)",
			ErrUsage, o.Photos, len(photos), minPhotos)
	}
	if err := claimOut(out, inPlace, o.Force, emit); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(out, "distorted", "sparse"), 0o755); err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	r := &runner{exe: o.Colmap, env: env, logPath: filepath.Join(out, "colmap.log")}
	version, err := colmapVersion(ctx, o.Colmap, env)
	if err != nil {
		return nil, err
	}
	emit(Notice{Text: fmt.Sprintf("%s (%s); its output goes to %s", version, o.Colmap, r.logPath)})
	if skipped > 0 {
		emit(Notice{Text: fmt.Sprintf("%s: skipped %d files that are not .jpg, .jpeg or .png", o.Photos, skipped)})
	}

	res := &Result{Dir: out, Photos: len(photos), Log: r.logPath}
	stages := Stages()
	idx := map[string]int{}
	for i, s := range stages {
		idx[s] = i + 1
	}
	var started time.Time
	begin := func(stage, detail string) {
		started = time.Now()
		emit(StageStarted{Stage: stage, Index: idx[stage], Count: len(stages), Detail: detail})
		r.progress = func(done, total int) { emit(StageProgress{Stage: stage, Done: done, Total: total}) }
	}
	end := func(stage, summary string) {
		emit(StageDone{Stage: stage, Elapsed: time.Since(started), Summary: summary})
	}

	// Input.
	if inPlace {
		begin(StageInput, fmt.Sprintf("%d photos, already in %s", len(photos), input))
	} else {
		begin(StageInput, fmt.Sprintf("linking %d photos into %s", len(photos), input))
		if err := placePhotos(photosDir, input, photos, r.progress); err != nil {
			return res, err
		}
	}
	end(StageInput, fmt.Sprintf("%d photos", len(photos)))

	// Features: one camera for all photos, as a single device took them, unless
	// their sizes say otherwise.
	single := "1"
	for _, p := range photos[1:] {
		if p.w != photos[0].w || p.h != photos[0].h {
			single = "0"
			emit(Notice{Text: fmt.Sprintf("photos differ in size (%s is %d×%d, %s is %d×%d): one camera per photo size instead of one for all",
				photos[0].name, photos[0].w, photos[0].h, p.name, p.w, p.h)})
			break
		}
	}
	db := filepath.Join(out, "distorted", "database.db")
	gpu := "0"
	if o.GPU {
		gpu = "1"
	}
	begin(StageFeatures, fmt.Sprintf("SIFT features of %d photos (%s camera, %s)", len(photos), o.CameraModel, map[bool]string{true: "GPU", false: "CPU"}[o.GPU]))
	// A database left by an interrupted earlier run would add its images twice.
	if err := os.Remove(db); err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, fmt.Errorf("convert: %w", err)
	}
	err = r.run(ctx, StageFeatures, []string{"feature_extractor",
		"--database_path", db, "--image_path", input,
		"--ImageReader.single_camera", single, "--ImageReader.camera_model", o.CameraModel,
		"--SiftExtraction.use_gpu", gpu}, parseCount)
	if err != nil {
		return res, err
	}
	end(StageFeatures, "")

	// Matching.
	m := o.matcher(len(photos))
	begin(StageMatching, fmt.Sprintf("%s matching of %d photos", m, len(photos)))
	parse := parseBlock
	if m == MatcherSequential {
		parse = parseCount
	}
	if err := r.run(ctx, StageMatching, []string{m + "_matcher", "--database_path", db, "--SiftMatching.use_gpu", gpu}, parse); err != nil {
		return res, err
	}
	end(StageMatching, "")

	// Mapping.
	sparse := filepath.Join(out, "distorted", "sparse")
	begin(StageMapping, "incremental mapping")
	err = r.run(ctx, StageMapping, []string{"mapper", "--database_path", db, "--image_path", input,
		"--output_path", sparse, "--Mapper.ba_global_function_tolerance", baGlobalFunctionTolerance}, parseRegister(len(photos)))
	if err != nil {
		return res, err
	}
	best, reg, models, err := largestModel(sparse)
	if err != nil {
		return res, err
	}
	res.Registered, res.Models = reg, models
	need := o.minRegistered(len(photos))
	if reg < need {
		what := "no model"
		if models > 0 {
			what = fmt.Sprintf("only %d of %d photos in its largest model (%s, of %d)", reg, len(photos), best, models)
		}
		return res, fmt.Errorf("convert: %w: COLMAP registered %s, fewer than the %d asked for (--min-registered). "+
			"This usually means too little overlap between neighbouring photos (each part of the scene should appear in several "+
			"photos taken a step apart), motion blur or changing exposure, or too few photos. The partial output stays in %s (COLMAP's log: %s)",
			ErrTooFewRegistered, what, need, out, r.logPath)
	}
	summary := fmt.Sprintf("%d of %d photos registered", reg, len(photos))
	if models > 1 {
		summary += fmt.Sprintf(" (largest of %d models: %s)", models, best)
	}
	end(StageMapping, summary)

	// Undistortion into images/ and sparse/, then sparse/0 as trainers expect.
	begin(StageUndistort, "undistorting to PINHOLE cameras")
	err = r.run(ctx, StageUndistort, []string{"image_undistorter", "--image_path", input,
		"--input_path", filepath.Join(sparse, best), "--output_path", out, "--output_type", "COLMAP"}, parseCount)
	if err != nil {
		return res, err
	}
	model, err := moveSparse(out)
	if err != nil {
		return res, err
	}
	res.Points = len(model.Points)
	for _, c := range model.Cameras {
		if c.Model != "PINHOLE" {
			return res, fmt.Errorf("convert: undistort: %s: camera %d is %s, not PINHOLE", filepath.Join(out, "sparse", "0"), c.ID, c.Model)
		}
	}
	if len(model.Images) > 0 {
		if c, ok := model.Cameras[model.Images[0].CameraID]; ok {
			res.Width, res.Height = int(c.Width), int(c.Height)
		}
	}
	end(StageUndistort, fmt.Sprintf("%d images of %d×%d px, %d points", len(model.Images), res.Width, res.Height, res.Points))

	begin(StageResize, "images_2, images_4 and images_8 (area averaging)")
	if err := writeDownscaled(ctx, out, o.Workers, r.progress); err != nil {
		return res, err
	}
	end(StageResize, "")
	return res, nil
}

// largestModel returns the name of the model under sparse with the most
// registered images, that count, and how many models there are. COLMAP writes
// several when it cannot join all photos into one scene.
func largestModel(sparse string) (name string, registered, models int, err error) {
	entries, err := os.ReadDir(sparse)
	if err != nil {
		return "", 0, 0, fmt.Errorf("convert: mapping: %w", err)
	}
	var names []string
	for _, e := range entries {
		if _, perr := strconv.Atoi(e.Name()); e.IsDir() && perr == nil {
			names = append(names, e.Name())
		}
	}
	sort.Slice(names, func(i, j int) bool { a, _ := strconv.Atoi(names[i]); b, _ := strconv.Atoi(names[j]); return a < b })
	registered = -1
	for _, n := range names {
		m, err := colmap.ReadModel(filepath.Join(sparse, n))
		if err != nil {
			return "", 0, 0, fmt.Errorf("convert: mapping: %w", err)
		}
		if len(m.Images) > registered {
			name, registered = n, len(m.Images)
		}
	}
	return name, max(registered, 0), len(names), nil
}

// moveSparse moves the model image_undistorter writes into out/sparse to
// out/sparse/0, where trainers look, and reads it.
func moveSparse(out string) (*colmap.Model, error) {
	sparse := filepath.Join(out, "sparse")
	dst := filepath.Join(sparse, "0")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fmt.Errorf("convert: undistort: %w", err)
	}
	entries, err := os.ReadDir(sparse)
	if err != nil {
		return nil, fmt.Errorf("convert: undistort: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if err := os.Rename(filepath.Join(sparse, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return nil, fmt.Errorf("convert: undistort: %w", err)
		}
	}
	m, err := colmap.ReadModel(dst)
	if err != nil {
		return nil, fmt.Errorf("convert: undistort: %w", err)
	}
	return m, nil
}

// claimOut refuses an output directory holding an earlier conversion unless
// force says to remove it (only the entries a conversion writes; photos used
// in place in out/input are kept).
func claimOut(out string, inPlace, force bool, emit func(Event)) error {
	var found []string
	for _, name := range outputs {
		if name == "input" && inPlace {
			continue
		}
		p := filepath.Join(out, name)
		if _, err := os.Lstat(p); err == nil {
			found = append(found, p)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("convert: --out: %w", err)
		}
	}
	if len(found) == 0 {
		return nil
	}
	if !force {
		return fmt.Errorf("convert: %w: --out %s holds an earlier conversion (%s): give another --out, or --force to replace it",
			ErrUsage, out, filepath.Base(found[0]))
	}
	for _, p := range found {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("convert: --force: %w", err)
		}
	}
	emit(Notice{Text: fmt.Sprintf("--force: removed the earlier conversion in %s", out)})
	return nil
}

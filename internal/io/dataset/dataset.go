package dataset

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
)

// Format names, as Options.Format takes them and Dataset.Format reports.
const (
	FormatCOLMAP     = "colmap"
	FormatTransforms = "transforms"
)

// Options controls Load. Start from DefaultOptions: the zero value of
// TestEvery means "no test split", not "every 8th".
type Options struct {
	// Format is "" (detect), "colmap" or "transforms". Detection prefers
	// COLMAP when a directory has both.
	Format string
	// Downscale 0 shrinks images wider than MaxWidth to MaxWidth; N ≥ 1
	// divides both sides by N (rounded), reading <ImagesDir>_N/ when it
	// exists and area-averaging the full images otherwise.
	Downscale int
	// MaxWidth is the auto-downscale threshold in pixels; ≤ 0 means 1600.
	MaxWidth int
	// ImagesDir is the COLMAP image folder, relative to the dataset
	// directory; "" means "images". (transforms files name their images.)
	ImagesDir string
	// SparseDir is the COLMAP model folder, relative to the dataset
	// directory; "" means the first of sparse/0 and sparse holding a
	// cameras.bin or cameras.txt.
	SparseDir string
	// TestEvery puts every TestEvery-th view (sorted by name, starting with
	// the first) in the test set; 0 means no test set. NeRF-synthetic
	// captures with a transforms_test.json use that file's views instead
	// (and none when TestEvery is 0).
	TestEvery int
	// Background is the colour RGBA images are composited over.
	Background [3]float32
	// AllowDistortion accepts cameras with lens distortion (for the ray
	// render model); otherwise they are an error.
	AllowDistortion bool
	// Workers is the number of images decoded at once; ≤ 0 means one per
	// CPU (GOMAXPROCS).
	Workers int
}

// DefaultOptions returns the options a 3DGS user expects (design.md §6):
// auto-downscale above 1600 px, images/ and the default sparse folders,
// every 8th view held out for testing, black background, no distortion.
func DefaultOptions() Options {
	return Options{MaxWidth: defaultMaxWidth, ImagesDir: "images", TestEvery: 8}
}

const defaultMaxWidth = 1600

// View is one training or test image with its camera.
type View struct {
	// Name identifies the view: the image name in the COLMAP model, or the
	// image path relative to the dataset directory (slash-separated) for
	// transforms files.
	Name string
	// Camera is scaled to the loaded image (camera.Scaled).
	Camera camera.Camera
	// Image is the target: RGB already composited over Options.Background,
	// Alpha nil.
	Image *imageio.Image
	// Alpha is the source image's coverage, [H*W], or nil when it was
	// opaque. It lets a trainer re-composite over another background bg':
	// target' = RGB + (1 − Alpha)·(bg' − Background).
	Alpha []float32
}

// Dataset is a loaded capture.
type Dataset struct {
	Train, Test []View
	// Points are the initial points [M,3] (COLMAP points3D, or nerfstudio's
	// ply_file_path); nil when the capture has none (NeRF-synthetic: the
	// trainer initialises randomly).
	Points []float32
	// PointColors are the points' colours [M,3] in [0,1] (mid grey for a
	// PLY without colours); nil when Points is nil.
	PointColors []float32
	// Extent is 1.1 × the largest distance of a camera centre (all views)
	// from their mean (design.md §6).
	Extent float64
	// Format is "colmap" or "transforms".
	Format string
	// Dir is the dataset directory as given to Load.
	Dir string
	// Background is Options.Background, which the targets are composited
	// over.
	Background [3]float32
}

// viewSpec is a view before its image is read.
type viewSpec struct {
	name string
	path string        // full-resolution image
	cam  camera.Camera // full resolution; Width 0 until the image gives the size
	// resolve builds the camera once the full-resolution size is known,
	// for transforms frames without w/h; nil otherwise.
	resolve func(w, h int) (camera.Camera, error)
	split   int    // splitAuto, splitTrain or splitTest
	origin  string // where the image was named, for error messages
}

const (
	splitAuto = iota
	splitTrain
	splitTest
)

// Load reads the capture in dir: it detects the format (or takes
// opt.Format), reads the cameras and points, decodes and downscales every
// image, and splits the views. Any unreadable or inconsistent input is an
// error naming the file; so is a capture with no views or no training
// views.
func Load(dir string, opt Options) (*Dataset, error) {
	if err := opt.normalize(); err != nil {
		return nil, err
	}
	format, sparse, nerfFile, err := detect(dir, opt)
	if err != nil {
		return nil, err
	}
	ds := &Dataset{Format: format, Dir: dir, Background: opt.Background}
	var specs []viewSpec
	var folderOf func(string) string
	switch format {
	case FormatCOLMAP:
		specs, ds.Points, ds.PointColors, err = colmapSpecs(dir, sparse, opt)
		imagesDir := joinDir(dir, opt.ImagesDir)
		folderOf = func(string) string { return imagesDir }
	default:
		specs, ds.Points, ds.PointColors, err = transformsSpecs(dir, nerfFile, opt)
		folderOf = filepath.Dir
	}
	if err != nil {
		return nil, err
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("dataset: %s: no views", dir)
	}
	plan, err := planFolders(specs, folderOf, opt.Downscale)
	if err != nil {
		return nil, err
	}
	src, err := sources(specs, plan, folderOf)
	if err != nil {
		return nil, err
	}
	views, err := loadViews(specs, src, opt)
	if err != nil {
		return nil, err
	}

	auto := 0
	for i, s := range specs {
		test := false
		switch s.split {
		case splitTest:
			test = true
		case splitAuto:
			test = opt.TestEvery > 0 && auto%opt.TestEvery == 0
			auto++
		}
		if test {
			ds.Test = append(ds.Test, views[i])
		} else {
			ds.Train = append(ds.Train, views[i])
		}
	}
	if len(ds.Train) == 0 {
		return nil, fmt.Errorf("dataset: %s: no training views: all %d views are test views (TestEvery 0 trains on every view)", dir, len(ds.Test))
	}
	ds.Extent = extent(views)
	return ds, nil
}

func (o *Options) normalize() error {
	switch o.Format {
	case "", FormatCOLMAP, FormatTransforms:
	default:
		return fmt.Errorf("dataset: unknown format %q (want \"\" to detect, %q or %q)", o.Format, FormatCOLMAP, FormatTransforms)
	}
	if o.Downscale < 0 {
		return fmt.Errorf("dataset: downscale %d: want 0 (auto) or a factor ≥ 1", o.Downscale)
	}
	if o.TestEvery < 0 {
		return fmt.Errorf("dataset: test-every %d: want 0 (no test set) or ≥ 1", o.TestEvery)
	}
	for i, v := range o.Background {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("dataset: background channel %d is %v, want a value in [0,1]", i, v)
		}
	}
	if o.MaxWidth <= 0 {
		o.MaxWidth = defaultMaxWidth
	}
	if o.ImagesDir == "" {
		o.ImagesDir = "images"
	}
	return nil
}

func joinDir(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, filepath.FromSlash(p))
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// hasModel reports whether d holds a COLMAP cameras file.
func hasModel(d string) bool {
	return isFile(filepath.Join(d, "cameras.bin")) || isFile(filepath.Join(d, "cameras.txt"))
}

// detect picks the format and the files it reads from.
func detect(dir string, opt Options) (format, sparse, nerfFile string, err error) {
	if !isDir(dir) {
		if _, err := os.Stat(dir); err != nil {
			return "", "", "", fmt.Errorf("dataset: %w", err)
		}
		return "", "", "", fmt.Errorf("dataset: %s is not a directory", dir)
	}
	if opt.SparseDir != "" {
		if d := joinDir(dir, opt.SparseDir); hasModel(d) {
			sparse = d
		} else if opt.Format != FormatTransforms {
			return "", "", "", fmt.Errorf("dataset: %s: no cameras.bin or cameras.txt in the sparse folder %s", dir, d)
		}
	} else {
		for _, c := range []string{"sparse/0", "sparse"} {
			if d := joinDir(dir, c); hasModel(d) {
				sparse = d
				break
			}
		}
	}
	for _, c := range []string{"transforms.json", "transforms_train.json"} {
		if p := filepath.Join(dir, c); isFile(p) {
			nerfFile = p
			break
		}
	}
	switch {
	case opt.Format == FormatCOLMAP && sparse == "":
		return "", "", "", fmt.Errorf("dataset: %s: format colmap, but no COLMAP model in sparse/0 or sparse (cameras.bin or cameras.txt)", dir)
	case opt.Format == FormatTransforms && nerfFile == "":
		return "", "", "", fmt.Errorf("dataset: %s: format transforms, but no transforms.json or transforms_train.json", dir)
	case opt.Format == FormatTransforms:
		return FormatTransforms, "", nerfFile, nil
	case sparse != "":
		return FormatCOLMAP, sparse, "", nil
	case nerfFile != "":
		return FormatTransforms, "", nerfFile, nil
	}
	return "", "", "", fmt.Errorf("dataset: %s: no COLMAP model (sparse/0 or sparse with cameras.bin or cameras.txt) and no transforms.json or transforms_train.json", dir)
}

// planFolders decides, per image folder, whether a downscale N reads the
// pre-shrunk sibling folder <folder>_N (as the original 3DGS's convert.py
// writes it). The choice is made per folder, not per image, so that a
// half-written images_N is reported as missing images instead of being
// silently mixed with resized originals.
func planFolders(specs []viewSpec, folderOf func(string) string, n int) (map[string]string, error) {
	plan := map[string]string{}
	if n < 2 {
		return plan, nil
	}
	for _, s := range specs {
		folder := folderOf(s.path)
		if _, seen := plan[folder]; seen {
			continue
		}
		alt := fmt.Sprintf("%s_%d", filepath.Clean(folder), n)
		st, err := os.Stat(alt)
		switch {
		case err == nil && st.IsDir():
			plan[folder] = alt
		case err == nil || errors.Is(err, fs.ErrNotExist):
			plan[folder] = ""
		default:
			return nil, fmt.Errorf("dataset: %w", err)
		}
	}
	// Only folders with a pre-shrunk sibling stay in the plan.
	for k, v := range plan {
		if v == "" {
			delete(plan, k)
		}
	}
	return plan, nil
}

// extent is 1.1 × the largest distance of a camera centre from the mean
// centre.
func extent(views []View) float64 {
	if len(views) == 0 {
		return 0
	}
	var mean [3]float64
	centres := make([][3]float64, len(views))
	for i := range views {
		centres[i] = views[i].Camera.Center()
		for k := 0; k < 3; k++ {
			mean[k] += centres[i][k]
		}
	}
	for k := range mean {
		mean[k] /= float64(len(views))
	}
	var far float64
	for _, c := range centres {
		far = max(far, math.Sqrt((c[0]-mean[0])*(c[0]-mean[0])+(c[1]-mean[1])*(c[1]-mean[1])+(c[2]-mean[2])*(c[2]-mean[2])))
	}
	return 1.1 * far
}

// sortSpecs orders views by name (the test split is taken in this order).
func sortSpecs(specs []viewSpec) {
	sort.SliceStable(specs, func(i, j int) bool { return specs[i].name < specs[j].name })
}

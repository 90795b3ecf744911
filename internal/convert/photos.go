package convert

import (
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // photos are JPEG or PNG
	_ "image/png"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// photo is one input photo.
type photo struct {
	name string // file name, as COLMAP names the image
	w, h int
}

// isPhoto says whether a file name has a photo extension COLMAP and the
// trainer both read (case-insensitive: cameras write .JPG).
func isPhoto(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".jpg", ".jpeg", ".png":
		return true
	}
	return false
}

// listPhotos returns the photos directly inside dir, sorted by name, with
// their sizes (from the headers: a file that is not a readable image is an
// error now rather than a COLMAP failure later), and how many other files
// were skipped.
func listPhotos(dir string) ([]photo, int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("convert: photos: %w", err)
	}
	var out []photo
	skipped := 0
	for _, e := range entries {
		if !isPhoto(e.Name()) || e.IsDir() {
			if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				skipped++
			}
			continue
		}
		p := filepath.Join(dir, e.Name())
		w, h, err := photoSize(p)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, photo{name: e.Name(), w: w, h: h})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, skipped, nil
}

func photoSize(path string) (int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("convert: photo: %w", err)
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return 0, 0, fmt.Errorf("convert: photo %s: not a readable JPEG or PNG: %w", path, err)
	}
	return cfg.Width, cfg.Height, nil
}

// samePath says whether a and b name the same existing directory.
func samePath(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(fa, fb)
}

// placePhotos puts the photos into dst: a hard link where the file system
// allows one (no copy, and the user's file is never written: COLMAP only
// reads its input), else a copy.
func placePhotos(src, dst string, photos []photo, progress func(done, total int)) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("convert: input: %w", err)
	}
	for i, p := range photos {
		from, to := filepath.Join(src, p.name), filepath.Join(dst, p.name)
		// A hard link to a symbolic link would be that link, broken when it is relative:
		// link (or copy) the file it points to.
		if real, err := filepath.EvalSymlinks(from); err == nil {
			from = real
		}
		if err := os.Link(from, to); err != nil {
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("convert: input: %w", err)
			}
			if err := copyFile(from, to); err != nil {
				return err
			}
		}
		if progress != nil {
			progress(i+1, len(photos))
		}
	}
	return nil
}

func copyFile(from, to string) (err error) {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("convert: input: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("convert: input: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("convert: input: %s: %w", to, cerr)
		}
	}()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("convert: input: copying %s to %s: %w", from, to, err)
	}
	return nil
}

package convert

import (
	"bufio"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
	"github.com/rlxsplat/rlxsplat/internal/par"
)

// Factors are the downscaled copies written beside images/ (images_2, ...),
// the sizes `train --downscale N` reads.
var factors = [...]int{2, 4, 8}

// jpegQuality is the quality of the downscaled JPEGs: high enough that
// re-encoding adds far less error than a trained scene's.
const jpegQuality = 95

// writeDownscaled writes images_N/ for every factor from the images in
// dir/images. The filter is area averaging (imageio.Resize), the same the
// dataset loader applies when a capture has no images_N: `--downscale N`
// then trains on the same pixels with or without these copies, and for
// integer factors area averaging is the exact box filter, with no ringing.
// Sizes are round(W/N)×round(H/N), as the loader expects.
func writeDownscaled(ctx context.Context, dir string, workers int, progress func(done, total int)) error {
	src := filepath.Join(dir, "images")
	var names []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isPhoto(d.Name()) {
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			names = append(names, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("convert: resize: %w", err)
	}
	var mu sync.Mutex // progress sees the counts in order
	done := 0
	return par.Each(len(names), workers, func(i int) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("convert: resize: %w", err)
		}
		if err := downscaleOne(dir, names[i]); err != nil {
			return err
		}
		if progress != nil {
			mu.Lock()
			done++
			progress(done, len(names))
			mu.Unlock()
		}
		return nil
	})
}

// downscaleOne writes every factor's copy of images/name.
func downscaleOne(dir, name string) error {
	img, err := imageio.Load(filepath.Join(dir, "images", name))
	if err != nil {
		return fmt.Errorf("convert: resize: %w", err)
	}
	for _, n := range factors {
		w := max(1, int(math.Round(float64(img.W)/float64(n))))
		h := max(1, int(math.Round(float64(img.H)/float64(n))))
		small, err := imageio.Resize(img, w, h)
		if err != nil {
			return fmt.Errorf("convert: resize %s: %w", name, err)
		}
		out := filepath.Join(dir, fmt.Sprintf("images_%d", n), name)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return fmt.Errorf("convert: resize: %w", err)
		}
		if err := encode(out, small); err != nil {
			return err
		}
	}
	return nil
}

// encode writes img in the format its extension names: JPEG (quality
// jpegQuality; an alpha channel is composited over black, the trainer's
// default background) or PNG (keeping an alpha channel when there is one).
func encode(path string, img *imageio.Image) error {
	jpg := strings.EqualFold(filepath.Ext(path), ".jpg") || strings.EqualFold(filepath.Ext(path), ".jpeg")
	var m image.Image
	if img.Alpha != nil && !jpg {
		nm := image.NewNRGBA(image.Rect(0, 0, img.W, img.H))
		for i := 0; i < img.W*img.H; i++ {
			nm.Pix[4*i] = to8(img.RGB[3*i])
			nm.Pix[4*i+1] = to8(img.RGB[3*i+1])
			nm.Pix[4*i+2] = to8(img.RGB[3*i+2])
			nm.Pix[4*i+3] = to8(img.Alpha[i])
		}
		m = nm
	} else {
		rgb := img.Composite([3]float32{})
		rm := image.NewRGBA(image.Rect(0, 0, img.W, img.H))
		for i := 0; i < img.W*img.H; i++ {
			rm.Pix[4*i] = to8(rgb[3*i])
			rm.Pix[4*i+1] = to8(rgb[3*i+1])
			rm.Pix[4*i+2] = to8(rgb[3*i+2])
			rm.Pix[4*i+3] = 0xff
		}
		m = rm
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("convert: resize: %w", err)
	}
	w := bufio.NewWriter(f)
	if jpg {
		err = jpeg.Encode(w, m, &jpeg.Options{Quality: jpegQuality})
	} else {
		err = png.Encode(w, m)
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("convert: resize: writing %s: %w", path, err)
	}
	return nil
}

// to8 quantises a [0,1] value to 8 bits, rounding to the nearest level.
func to8(v float32) uint8 {
	if !(v > 0) {
		return 0
	}
	if v >= 1 {
		return 0xff
	}
	return uint8(v*255 + 0.5)
}

package colmap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// ReadModel reads the sparse model in dir (for example "sparse/0"). For
// each of cameras, images and points3D it reads the .bin file when present,
// else the .txt file. It checks that every image's camera exists, and
// returns the images sorted by name (ties by ID) and the points in file
// order.
func ReadModel(dir string) (*Model, error) {
	m := &Model{}
	camPath, err := readPart(dir, "cameras", func(r io.Reader, name string, bin bool) error {
		var err error
		if bin {
			m.Cameras, err = ReadCamerasBinary(r, name)
		} else {
			m.Cameras, err = ReadCamerasText(r, name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	imgPath, err := readPart(dir, "images", func(r io.Reader, name string, bin bool) error {
		var err error
		if bin {
			m.Images, err = ReadImagesBinary(r, name)
		} else {
			m.Images, err = ReadImagesText(r, name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if _, err := readPart(dir, "points3D", func(r io.Reader, name string, bin bool) error {
		var err error
		if bin {
			m.Points, err = ReadPoints3DBinary(r, name)
		} else {
			m.Points, err = ReadPoints3DText(r, name)
		}
		return err
	}); err != nil {
		return nil, err
	}
	for _, img := range m.Images {
		if _, ok := m.Cameras[img.CameraID]; !ok {
			return nil, fmt.Errorf("colmap: %s: image %d (%s): camera %d is not in %s",
				imgPath, img.ID, img.Name, img.CameraID, camPath)
		}
	}
	sort.SliceStable(m.Images, func(i, j int) bool {
		a, b := &m.Images[i], &m.Images[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
	return m, nil
}

// readPart opens dir/base.bin, or dir/base.txt when there is no .bin, and
// hands it to read; it returns the path it read.
func readPart(dir, base string, read func(r io.Reader, name string, bin bool) error) (string, error) {
	binPath := filepath.Join(dir, base+".bin")
	txtPath := filepath.Join(dir, base+".txt")
	path, bin := binPath, true
	if _, err := os.Stat(binPath); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("colmap: %w", err)
		}
		path, bin = txtPath, false
		if _, err := os.Stat(txtPath); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", fmt.Errorf("colmap: %s: neither %s.bin nor %s.txt: %w", dir, base, base, fs.ErrNotExist)
			}
			return "", fmt.Errorf("colmap: %w", err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("colmap: %w", err)
	}
	defer f.Close()
	if err := read(bufio.NewReaderSize(f, 1<<20), path, bin); err != nil {
		return "", err
	}
	return path, nil
}

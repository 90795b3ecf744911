package scene

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/rlxsplat/rlxsplat/internal/config"
	"github.com/rlxsplat/rlxsplat/internal/io/ckpt"
	"github.com/rlxsplat/rlxsplat/internal/io/dotsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/gltfsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/io/spz"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// Format names a scene file format as Detect tells it.
type Format string

// The formats ReadFile reads.
const (
	PLY           Format = "ply"
	CompressedPLY Format = "compressed-ply"
	SPZ           Format = "spz"
	GLB           Format = "glb"
	Splat         Format = "splat"
	Checkpoint    Format = "checkpoint"
)

// Checkpoint sections the trainer (internal/train) writes: the parameters
// under this prefix and the resolved config. A test in this package checks
// them against a checkpoint the trainer wrote.
const (
	ckptParams = "params"
	ckptConfig = "config/yaml"
)

// Scene is a scene as read.
type Scene struct {
	Gaussians *splat.Gaussians
	// SHDegree is the degree of view-dependent colour the file holds (a
	// checkpoint's from its config); coefficients above it are zero.
	SHDegree int
	Format   Format
	// Antialiased is true when the file says the scene was trained with
	// the Mip-Splatting 2D filter (SPZ flag, checkpoint config).
	Antialiased bool
	// Warnings are things the reader changed or could not keep, one line
	// each, for the caller to show (clamped infinities, dropped SH
	// degree 4).
	Warnings []string
}

// headLen is how much of a file Detect needs: the longest magic, and for a
// PLY enough header to see an element chunk.
const headLen = 4096

// Detect tells a scene file's format from its first bytes (up to 4 KiB)
// and its size in bytes. It names what it found when it cannot tell.
func Detect(head []byte, size int64) (Format, error) {
	switch {
	case bytes.HasPrefix(head, []byte("ply\n")) || bytes.HasPrefix(head, []byte("ply\r\n")):
		if end := bytes.Index(head, []byte("end_header")); end >= 0 {
			head = head[:end]
		}
		if bytes.Contains(head, []byte("\nelement chunk ")) {
			return CompressedPLY, nil
		}
		return PLY, nil
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}), bytes.HasPrefix(head, []byte("NGSP")):
		return SPZ, nil
	case bytes.HasPrefix(head, []byte("glTF")):
		return GLB, nil
	case bytes.HasPrefix(head, []byte("RLXCKPT\x00")):
		return Checkpoint, nil
	case bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n\ufeff"), []byte("{")):
		return "", fmt.Errorf("a JSON file (a .gltf?): only binary glTF (.glb) is read; convert it with a glTF tool")
	case size > 0 && size%dotsplat.RecordSize == 0:
		// .splat has no header at all; a whole number of records is the
		// only sign of one.
		return Splat, nil
	}
	return "", fmt.Errorf("not a scene file rlxsplat knows: no PLY, SPZ, glTF or checkpoint magic at byte 0, and %d bytes is not a whole number of 32-byte .splat records", size)
}

// ReadFile reads the scene in the file at path, whatever its format, and
// checks it (splat.Gaussians.Validate). Errors name the file and, as the
// format readers do, where in it the problem is.
func ReadFile(path string) (*Scene, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("scene: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("scene: %w", err)
	}
	head := make([]byte, headLen)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("scene: %s: %w", path, err)
	}
	format, err := Detect(head[:n], fi.Size())
	if err != nil {
		return nil, fmt.Errorf("scene: %s: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("scene: %s: %w", path, err)
	}
	s, err := read(f, path, format)
	if err != nil {
		return nil, err
	}
	if err := s.Gaussians.Validate(); err != nil {
		return nil, fmt.Errorf("scene: %s: %w", path, err)
	}
	return s, nil
}

// read runs the reader of format on f, positioned at its start.
func read(f *os.File, path string, format Format) (*Scene, error) {
	s := &Scene{Format: format}
	warn := func(w string) {
		if w != "" {
			s.Warnings = append(s.Warnings, w)
		}
	}
	switch format {
	case PLY, CompressedPLY:
		g, info, err := ply.Read(f, path)
		if err != nil {
			return nil, err
		}
		s.Gaussians, s.SHDegree = g, info.SHDegree
		warn(info.Warning)
	case SPZ:
		g, info, err := spz.Read(f, path)
		if err != nil {
			return nil, err
		}
		s.Gaussians, s.SHDegree, s.Antialiased = g, min(info.SHDegree, splat.MaxSHDegree), info.Antialiased
		if info.SHDegree > splat.MaxSHDegree {
			warn(fmt.Sprintf("spz: %s: SH degree %d: coefficients above degree %d dropped", path, info.SHDegree, splat.MaxSHDegree))
		}
	case GLB:
		g, info, err := gltfsplat.Read(f, path)
		if err != nil {
			return nil, err
		}
		s.Gaussians, s.SHDegree = g, info.SHDegree
		if info.Warning != "" {
			warn(path + ": " + info.Warning)
		}
		if info.ColorSpace == gltfsplat.ColorSpaceLinear {
			// rlxsplat blends colours as trained on sRGB photographs;
			// linear colours cannot be converted splat by splat (the
			// transfer function does not commute with blending).
			warn(fmt.Sprintf("gltfsplat: %s: colorSpace %s: colours are used as they are, as if sRGB, so the scene renders darker than its writer meant", path, gltfsplat.ColorSpaceLinear))
		}
	case Splat:
		g, err := dotsplat.Read(f, path)
		if err != nil {
			return nil, err
		}
		s.Gaussians = g
	case Checkpoint:
		return readCheckpoint(path)
	}
	return s, nil
}

// readCheckpoint takes the parameters of a training checkpoint, and the SH
// degree and antialiasing from the config stored beside them.
func readCheckpoint(path string) (*Scene, error) {
	f, err := ckpt.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scene: %w", err)
	}
	g, err := f.Gaussians(ckptParams)
	if err != nil {
		return nil, fmt.Errorf("scene: %s: %w", path, err)
	}
	yaml, err := f.Bytes(ckptConfig)
	if err != nil {
		return nil, fmt.Errorf("scene: %s: %w", path, err)
	}
	c, err := config.Load(config.Input{FileData: yaml, FileName: path + " (config)"})
	if err != nil {
		return nil, fmt.Errorf("scene: %w", err)
	}
	return &Scene{Gaussians: g, SHDegree: c.Model.SHDegree, Format: Checkpoint, Antialiased: c.Model.Antialiased}, nil
}

// DetectFile tells the format of the file at path as ReadFile would, reading
// only its first bytes.
func DetectFile(path string) (Format, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("scene: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("scene: %w", err)
	}
	head := make([]byte, headLen)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return "", fmt.Errorf("scene: %s: %w", path, err)
	}
	format, err := Detect(head[:n], fi.Size())
	if err != nil {
		return "", fmt.Errorf("scene: %s: %w", path, err)
	}
	return format, nil
}

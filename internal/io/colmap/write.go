package colmap

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/rlxsplat/rlxsplat/internal/io/atomicfile"
)

// WriteBinary writes m as COLMAP's binary sparse model (cameras.bin, images.bin,
// points3D.bin) into dir, creating it; each file is written atomically. The layout is
// the one the readers take (binary.go).
func WriteBinary(dir string, m *Model) error {
	cams, err := EncodeCamerasBinary(m.Cameras)
	if err != nil {
		return fmt.Errorf("colmap: %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("colmap: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"cameras.bin", cams},
		{"images.bin", EncodeImagesBinary(m.Images)},
		{"points3D.bin", EncodePoints3DBinary(m.Points)},
	} {
		path := filepath.Join(dir, f.name)
		if err := atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(f.data); return err }, nil); err != nil {
			return fmt.Errorf("colmap: writing %s: %w", path, err)
		}
	}
	return nil
}

// EncodeCamerasBinary is cameras.bin for cams, in camera-ID order.
func EncodeCamerasBinary(cams map[uint32]Camera) ([]byte, error) {
	le := binary.LittleEndian
	b := le.AppendUint64(nil, uint64(len(cams)))
	for _, id := range sortedCameraIDs(cams) {
		c := cams[id]
		m, ok := ModelByName(c.Model)
		if !ok {
			return nil, fmt.Errorf("camera %d: unknown camera model %q", c.ID, c.Model)
		}
		if len(c.Params) != m.NumParams {
			return nil, fmt.Errorf("camera %d: model %s takes %d parameters, have %d", c.ID, c.Model, m.NumParams, len(c.Params))
		}
		b = le.AppendUint32(b, c.ID)
		b = le.AppendUint32(b, uint32(m.ID))
		b = le.AppendUint64(b, c.Width)
		b = le.AppendUint64(b, c.Height)
		b = appendF64s(b, c.Params...)
	}
	return b, nil
}

// EncodeImagesBinary is images.bin for imgs, in their order.
func EncodeImagesBinary(imgs []Image) []byte {
	le := binary.LittleEndian
	b := le.AppendUint64(nil, uint64(len(imgs)))
	for _, im := range imgs {
		b = le.AppendUint32(b, im.ID)
		b = appendF64s(b, im.Q[:]...)
		b = appendF64s(b, im.T[:]...)
		b = le.AppendUint32(b, im.CameraID)
		b = append(b, im.Name...)
		b = append(b, 0)
		b = le.AppendUint64(b, uint64(len(im.Points2D)))
		for _, p := range im.Points2D {
			b = appendF64s(b, p.X, p.Y)
			b = le.AppendUint64(b, uint64(p.Point3DID))
		}
	}
	return b
}

// EncodePoints3DBinary is points3D.bin for pts, in their order.
func EncodePoints3DBinary(pts []Point3D) []byte {
	le := binary.LittleEndian
	b := le.AppendUint64(nil, uint64(len(pts)))
	for _, p := range pts {
		b = le.AppendUint64(b, p.ID)
		b = appendF64s(b, p.XYZ[:]...)
		b = append(b, p.RGB[:]...)
		b = appendF64s(b, p.Error)
		b = le.AppendUint64(b, uint64(len(p.Track)))
		for _, e := range p.Track {
			b = le.AppendUint32(b, e.ImageID)
			b = le.AppendUint32(b, e.Point2DIdx)
		}
	}
	return b
}

// appendF64s appends vs as little-endian float64s, COLMAP's binary reals.
func appendF64s(b []byte, vs ...float64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func sortedCameraIDs(cams map[uint32]Camera) []uint32 {
	ids := make([]uint32, 0, len(cams))
	for id := range cams {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

package colmap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Smallest encodings of one record, used to reject counts that the rest of
// a file cannot hold before allocating for them.
const (
	minCameraBytes  = 4 + 4 + 8 + 8             // id, model, width, height (no params)
	minImageBytes   = 4 + 4*8 + 3*8 + 4 + 1 + 8 // id, q, t, camera, "\x00", num_points2D
	point2DBytes    = 8 + 8 + 8                 // x, y, point3D_id
	minPoint3DBytes = 8 + 3*8 + 3 + 8 + 8       // id, xyz, rgb, error, track_length
	trackElemBytes  = 4 + 4                     // image_id, point2D_idx
)

// binReader decodes little-endian fields from a whole file held in memory,
// tracking the byte offset for error messages. Holding the whole file is
// what lets every count be checked against the bytes that remain.
type binReader struct {
	name string
	buf  []byte
	off  int
}

func newBinReader(r io.Reader, name string) (*binReader, error) {
	buf, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("colmap: %s: read: %w", name, err)
	}
	return &binReader{name: name, buf: buf}, nil
}

func (b *binReader) left() int { return len(b.buf) - b.off }

// errAt formats an error at a byte offset; ctx (may be empty) names the
// record, e.g. "image 17".
func (b *binReader) errAt(off int, ctx, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if ctx != "" {
		msg = ctx + ": " + msg
	}
	return fmt.Errorf("colmap: %s: offset %d: %s", b.name, off, msg)
}

// take returns the next n bytes, or an error naming the field wanted.
func (b *binReader) take(n int, ctx, what string) ([]byte, error) {
	if b.left() < n {
		err := b.errAt(b.off, ctx, "want %s (%d bytes), only %d left before end of file", what, n, b.left())
		return nil, fmt.Errorf("%w: %w", err, io.ErrUnexpectedEOF)
	}
	p := b.buf[b.off : b.off+n]
	b.off += n
	return p, nil
}

func (b *binReader) u32(ctx, what string) (uint32, error) {
	p, err := b.take(4, ctx, what+" (u32)")
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (b *binReader) u64(ctx, what string) (uint64, error) {
	p, err := b.take(8, ctx, what+" (u64)")
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

func (b *binReader) f64s(dst []float64, ctx, what string) error {
	p, err := b.take(8*len(dst), ctx, fmt.Sprintf("%s (%d × f64)", what, len(dst)))
	if err != nil {
		return err
	}
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(p[8*i:]))
	}
	return nil
}

// count reads a u64 count and checks that the rest of the file can hold
// that many records of at least minBytes each.
func (b *binReader) count(ctx, what string, minBytes int) (int, error) {
	off := b.off
	n, err := b.u64(ctx, what)
	if err != nil {
		return 0, err
	}
	if n > uint64(b.left()/minBytes) {
		return 0, b.errAt(off, ctx, "%s = %d needs at least %d bytes each, only %d bytes left (corrupted count?)",
			what, n, minBytes, b.left())
	}
	return int(n), nil
}

// end checks that the whole file was used: trailing bytes mean a count
// earlier in the file was wrong.
func (b *binReader) end(what string) error {
	if b.left() != 0 {
		return b.errAt(b.off, "", "%d unexpected bytes after the last %s (corrupted count?)", b.left(), what)
	}
	return nil
}

// ReadCamerasBinary reads cameras.bin; name is used in error messages.
// Layout (little-endian): num_cameras u64, then per camera: camera_id u32,
// model_id i32, width u64, height u64, params f64 × the model's count.
func ReadCamerasBinary(r io.Reader, name string) (map[uint32]Camera, error) {
	b, err := newBinReader(r, name)
	if err != nil {
		return nil, err
	}
	n, err := b.count("", "num_cameras", minCameraBytes)
	if err != nil {
		return nil, err
	}
	cams := make(map[uint32]Camera, n)
	for i := 0; i < n; i++ {
		start := b.off
		id, err := b.u32(fmt.Sprintf("camera #%d", i), "camera_id")
		if err != nil {
			return nil, err
		}
		ctx := fmt.Sprintf("camera %d", id)
		modelOff := b.off
		mid, err := b.u32(ctx, "model_id")
		if err != nil {
			return nil, err
		}
		m, ok := ModelByID(int32(mid))
		if !ok {
			return nil, b.errAt(modelOff, ctx, "unknown camera model id %d", int32(mid))
		}
		c := Camera{ID: id, Model: m.Name}
		if c.Width, err = b.u64(ctx, "width"); err != nil {
			return nil, err
		}
		if c.Height, err = b.u64(ctx, "height"); err != nil {
			return nil, err
		}
		c.Params = make([]float64, m.NumParams)
		if err := b.f64s(c.Params, ctx, m.Name+" params"); err != nil {
			return nil, err
		}
		if _, dup := cams[id]; dup {
			return nil, b.errAt(start, ctx, "duplicate camera_id")
		}
		cams[id] = c
	}
	if err := b.end("camera"); err != nil {
		return nil, err
	}
	return cams, nil
}

// ReadImagesBinary reads images.bin in file order; name is used in error
// messages. Layout (little-endian): num_reg_images u64, then per image:
// image_id u32, qvec f64×4 (w,x,y,z), tvec f64×3, camera_id u32, the name
// NUL-terminated, num_points2D u64, then (x f64, y f64, point3D_id i64)
// per keypoint.
func ReadImagesBinary(r io.Reader, name string) ([]Image, error) {
	b, err := newBinReader(r, name)
	if err != nil {
		return nil, err
	}
	n, err := b.count("", "num_reg_images", minImageBytes)
	if err != nil {
		return nil, err
	}
	images := make([]Image, 0, n)
	seen := make(map[uint32]struct{}, n)
	var qt [7]float64
	for i := 0; i < n; i++ {
		start := b.off
		id, err := b.u32(fmt.Sprintf("image #%d", i), "image_id")
		if err != nil {
			return nil, err
		}
		ctx := fmt.Sprintf("image %d", id)
		if _, dup := seen[id]; dup {
			return nil, b.errAt(start, ctx, "duplicate image_id")
		}
		seen[id] = struct{}{}
		if err := b.f64s(qt[:], ctx, "qvec and tvec"); err != nil {
			return nil, err
		}
		img := Image{ID: id}
		copy(img.Q[:], qt[:4])
		copy(img.T[:], qt[4:])
		if img.CameraID, err = b.u32(ctx, "camera_id"); err != nil {
			return nil, err
		}
		nul := bytes.IndexByte(b.buf[b.off:], 0)
		if nul < 0 {
			return nil, b.errAt(b.off, ctx, "name not NUL-terminated before end of file")
		}
		img.Name = string(b.buf[b.off : b.off+nul])
		b.off += nul + 1
		np, err := b.count(ctx, "num_points2D", point2DBytes)
		if err != nil {
			return nil, err
		}
		if np > 0 {
			img.Points2D = make([]Point2D, np)
			p := b.buf[b.off : b.off+np*point2DBytes]
			for k := range img.Points2D {
				q := p[k*point2DBytes:]
				img.Points2D[k] = Point2D{
					X:         math.Float64frombits(binary.LittleEndian.Uint64(q)),
					Y:         math.Float64frombits(binary.LittleEndian.Uint64(q[8:])),
					Point3DID: int64(binary.LittleEndian.Uint64(q[16:])),
				}
			}
			b.off += np * point2DBytes
		}
		images = append(images, img)
	}
	if err := b.end("image"); err != nil {
		return nil, err
	}
	return images, nil
}

// ReadPoints3DBinary reads points3D.bin in file order; name is used in
// error messages. Layout (little-endian): num_points u64, then per point:
// point3D_id u64, xyz f64×3, rgb u8×3, error f64, track_length u64, then
// (image_id u32, point2D_idx u32) per observation.
func ReadPoints3DBinary(r io.Reader, name string) ([]Point3D, error) {
	b, err := newBinReader(r, name)
	if err != nil {
		return nil, err
	}
	n, err := b.count("", "num_points", minPoint3DBytes)
	if err != nil {
		return nil, err
	}
	points := make([]Point3D, 0, n)
	seen := make(map[uint64]struct{}, n)
	for i := 0; i < n; i++ {
		start := b.off
		id, err := b.u64(fmt.Sprintf("point #%d", i), "point3D_id")
		if err != nil {
			return nil, err
		}
		ctx := fmt.Sprintf("point %d", id)
		if _, dup := seen[id]; dup {
			return nil, b.errAt(start, ctx, "duplicate point3D_id")
		}
		seen[id] = struct{}{}
		p := Point3D{ID: id}
		if err := b.f64s(p.XYZ[:], ctx, "xyz"); err != nil {
			return nil, err
		}
		rgb, err := b.take(3, ctx, "rgb (3 × u8)")
		if err != nil {
			return nil, err
		}
		copy(p.RGB[:], rgb)
		var e [1]float64
		if err := b.f64s(e[:], ctx, "error"); err != nil {
			return nil, err
		}
		p.Error = e[0]
		nt, err := b.count(ctx, "track_length", trackElemBytes)
		if err != nil {
			return nil, err
		}
		if nt > 0 {
			p.Track = make([]TrackElem, nt)
			q := b.buf[b.off : b.off+nt*trackElemBytes]
			for k := range p.Track {
				p.Track[k] = TrackElem{
					ImageID:    binary.LittleEndian.Uint32(q[k*trackElemBytes:]),
					Point2DIdx: binary.LittleEndian.Uint32(q[k*trackElemBytes+4:]),
				}
			}
			b.off += nt * trackElemBytes
		}
		points = append(points, p)
	}
	if err := b.end("point"); err != nil {
		return nil, err
	}
	return points, nil
}

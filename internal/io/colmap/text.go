package colmap

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// lineReader yields the lines of a text model with their 1-based numbers.
// Lines may be of any length (an image's keypoint line often exceeds
// bufio.Scanner's default limit).
type lineReader struct {
	name string
	r    *bufio.Reader
	line int
	eof  bool
}

func newLineReader(r io.Reader, name string) *lineReader {
	return &lineReader{name: name, r: bufio.NewReaderSize(r, 1<<16)}
}

// next returns the next raw line without its line ending, or io.EOF.
func (l *lineReader) next() (string, error) {
	if l.eof {
		return "", io.EOF
	}
	s, err := l.r.ReadString('\n')
	if err != nil {
		if !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("colmap: %s: line %d: read: %w", l.name, l.line+1, err)
		}
		l.eof = true
		if s == "" {
			return "", io.EOF
		}
	}
	l.line++
	s = strings.TrimSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\r")
	return s, nil
}

// nextData returns the next line that is neither blank nor a '#' comment.
func (l *lineReader) nextData() (string, error) {
	for {
		s, err := l.next()
		if err != nil {
			return "", err
		}
		t := strings.TrimSpace(s)
		if t == "" || t[0] == '#' {
			continue
		}
		return s, nil
	}
}

// errf formats an error at the current line; ctx (may be empty) names the
// record, e.g. "image 17".
func (l *lineReader) errf(ctx, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if ctx != "" {
		msg = ctx + ": " + msg
	}
	return fmt.Errorf("colmap: %s: line %d: %s", l.name, l.line, msg)
}

// wrapf is errf for an underlying error, kept for errors.Is/As.
func (l *lineReader) wrapf(err error, ctx, format string, args ...any) error {
	return fmt.Errorf("%w: %w", l.errf(ctx, format, args...), err)
}

// Field parsers: the error names the field and quotes the text, and wraps
// strconv's ErrSyntax or ErrRange.

func (l *lineReader) parseU32(ctx, field, s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, l.wrapf(numErr(err), ctx, "%s: want an unsigned 32-bit integer, got %q", field, s)
	}
	return uint32(v), nil
}

func (l *lineReader) parseU64(ctx, field, s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, l.wrapf(numErr(err), ctx, "%s: want an unsigned 64-bit integer, got %q", field, s)
	}
	return v, nil
}

func (l *lineReader) parseU8(ctx, field, s string) (uint8, error) {
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, l.wrapf(numErr(err), ctx, "%s: want an integer in 0..255, got %q", field, s)
	}
	return uint8(v), nil
}

func (l *lineReader) parseF64(ctx, field, s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, l.wrapf(numErr(err), ctx, "%s: want a number, got %q", field, s)
	}
	return v, nil
}

// numErr keeps strconv's reason (ErrSyntax, ErrRange) without repeating
// the quoted input, which the message already shows.
func numErr(err error) error {
	var ne *strconv.NumError
	if errors.As(err, &ne) {
		return ne.Err
	}
	return err
}

// ReadCamerasText reads cameras.txt; name is used in error messages. One
// camera per line: CAMERA_ID MODEL WIDTH HEIGHT PARAMS[]; blank lines and
// '#' comments are skipped.
func ReadCamerasText(r io.Reader, name string) (map[uint32]Camera, error) {
	l := newLineReader(r, name)
	cams := make(map[uint32]Camera)
	for {
		s, err := l.nextData()
		if errors.Is(err, io.EOF) {
			return cams, nil
		}
		if err != nil {
			return nil, err
		}
		f := strings.Fields(s)
		if len(f) < 4 {
			return nil, l.errf("", "want CAMERA_ID MODEL WIDTH HEIGHT PARAMS[], got %d fields", len(f))
		}
		id, err := l.parseU32("", "CAMERA_ID", f[0])
		if err != nil {
			return nil, err
		}
		ctx := fmt.Sprintf("camera %d", id)
		m, ok := ModelByName(f[1])
		if !ok {
			return nil, l.errf(ctx, "unknown camera model %q", f[1])
		}
		c := Camera{ID: id, Model: m.Name}
		if c.Width, err = l.parseU64(ctx, "WIDTH", f[2]); err != nil {
			return nil, err
		}
		if c.Height, err = l.parseU64(ctx, "HEIGHT", f[3]); err != nil {
			return nil, err
		}
		if got := len(f) - 4; got != m.NumParams {
			return nil, l.errf(ctx, "model %s takes %d parameters, got %d", m.Name, m.NumParams, got)
		}
		c.Params = make([]float64, m.NumParams)
		for i := range c.Params {
			if c.Params[i], err = l.parseF64(ctx, fmt.Sprintf("PARAMS[%d]", i), f[4+i]); err != nil {
				return nil, err
			}
		}
		if _, dup := cams[id]; dup {
			return nil, l.errf(ctx, "duplicate CAMERA_ID")
		}
		cams[id] = c
	}
}

// imageHeaderFields is the number of whitespace-separated fields before
// NAME on an image's first line.
const imageHeaderFields = 9

// ReadImagesText reads images.txt in file order; name is used in error
// messages. Two lines per image: IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID
// NAME, then POINTS2D[] as (X Y POINT3D_ID) triples, possibly empty. The
// second line is taken as it is (it is never a comment), and a file that
// ends right after an image's first line gives that image no keypoints.
// NAME is the rest of the first line, so a name may contain spaces.
func ReadImagesText(r io.Reader, name string) ([]Image, error) {
	l := newLineReader(r, name)
	var images []Image
	seen := make(map[uint32]struct{})
	for {
		s, err := l.nextData()
		if errors.Is(err, io.EOF) {
			return images, nil
		}
		if err != nil {
			return nil, err
		}
		head, rest := splitFields(s, imageHeaderFields)
		imgName := strings.TrimSpace(rest)
		if len(head) < imageHeaderFields || imgName == "" {
			return nil, l.errf("", "want IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME, got %d fields",
				len(head)+len(strings.Fields(rest)))
		}
		id, err := l.parseU32("", "IMAGE_ID", head[0])
		if err != nil {
			return nil, err
		}
		ctx := fmt.Sprintf("image %d", id)
		if _, dup := seen[id]; dup {
			return nil, l.errf(ctx, "duplicate IMAGE_ID")
		}
		seen[id] = struct{}{}
		img := Image{ID: id, Name: imgName}
		for i, fn := range [...]string{"QW", "QX", "QY", "QZ"} {
			if img.Q[i], err = l.parseF64(ctx, fn, head[1+i]); err != nil {
				return nil, err
			}
		}
		for i, fn := range [...]string{"TX", "TY", "TZ"} {
			if img.T[i], err = l.parseF64(ctx, fn, head[5+i]); err != nil {
				return nil, err
			}
		}
		if img.CameraID, err = l.parseU32(ctx, "CAMERA_ID", head[8]); err != nil {
			return nil, err
		}

		pts, err := l.next()
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if err == nil {
			f := strings.Fields(pts)
			if len(f)%3 != 0 {
				return nil, l.errf(ctx, "POINTS2D: want (X Y POINT3D_ID) triples, got %d values", len(f))
			}
			if len(f) > 0 {
				img.Points2D = make([]Point2D, len(f)/3)
			}
			// Keypoint lines hold thousands of values: parse them inline and
			// build the field name only on error.
			for k := range img.Points2D {
				p := &img.Points2D[k]
				x, y, pid := f[3*k], f[3*k+1], f[3*k+2]
				var ex, ey, ep error
				p.X, ex = strconv.ParseFloat(x, 64)
				p.Y, ey = strconv.ParseFloat(y, 64)
				p.Point3DID, ep = strconv.ParseInt(pid, 10, 64)
				switch {
				case ex != nil:
					return nil, l.wrapf(numErr(ex), ctx, "POINTS2D[%d].X: want a number, got %q", k, x)
				case ey != nil:
					return nil, l.wrapf(numErr(ey), ctx, "POINTS2D[%d].Y: want a number, got %q", k, y)
				case ep != nil:
					return nil, l.wrapf(numErr(ep), ctx, "POINTS2D[%d].POINT3D_ID: want a signed 64-bit integer, got %q", k, pid)
				}
			}
		}
		images = append(images, img)
	}
}

// splitFields returns up to n leading whitespace-separated fields of s and
// the rest of s after them (with its leading whitespace removed).
func splitFields(s string, n int) (fields []string, rest string) {
	rest = strings.TrimLeft(s, " \t")
	for len(fields) < n && rest != "" {
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			fields = append(fields, rest)
			return fields, ""
		}
		fields = append(fields, rest[:i])
		rest = strings.TrimLeft(rest[i:], " \t")
	}
	return fields, rest
}

// ReadPoints3DText reads points3D.txt in file order; name is used in error
// messages. One point per line: POINT3D_ID X Y Z R G B ERROR TRACK[] as
// (IMAGE_ID POINT2D_IDX) pairs; blank lines and '#' comments are skipped.
func ReadPoints3DText(r io.Reader, name string) ([]Point3D, error) {
	l := newLineReader(r, name)
	var points []Point3D
	seen := make(map[uint64]struct{})
	for {
		s, err := l.nextData()
		if errors.Is(err, io.EOF) {
			return points, nil
		}
		if err != nil {
			return nil, err
		}
		f := strings.Fields(s)
		if len(f) < 8 {
			return nil, l.errf("", "want POINT3D_ID X Y Z R G B ERROR TRACK[], got %d fields", len(f))
		}
		id, err := l.parseU64("", "POINT3D_ID", f[0])
		if err != nil {
			return nil, err
		}
		ctx := fmt.Sprintf("point %d", id)
		if _, dup := seen[id]; dup {
			return nil, l.errf(ctx, "duplicate POINT3D_ID")
		}
		seen[id] = struct{}{}
		p := Point3D{ID: id}
		for i, fn := range [...]string{"X", "Y", "Z"} {
			if p.XYZ[i], err = l.parseF64(ctx, fn, f[1+i]); err != nil {
				return nil, err
			}
		}
		for i, fn := range [...]string{"R", "G", "B"} {
			if p.RGB[i], err = l.parseU8(ctx, fn, f[4+i]); err != nil {
				return nil, err
			}
		}
		if p.Error, err = l.parseF64(ctx, "ERROR", f[7]); err != nil {
			return nil, err
		}
		tr := f[8:]
		if len(tr)%2 != 0 {
			return nil, l.errf(ctx, "TRACK: want (IMAGE_ID POINT2D_IDX) pairs, got %d values", len(tr))
		}
		if len(tr) > 0 {
			p.Track = make([]TrackElem, len(tr)/2)
		}
		for k := range p.Track {
			im, ei := strconv.ParseUint(tr[2*k], 10, 32)
			idx, ex := strconv.ParseUint(tr[2*k+1], 10, 32)
			switch {
			case ei != nil:
				return nil, l.wrapf(numErr(ei), ctx, "TRACK[%d].IMAGE_ID: want an unsigned 32-bit integer, got %q", k, tr[2*k])
			case ex != nil:
				return nil, l.wrapf(numErr(ex), ctx, "TRACK[%d].POINT2D_IDX: want an unsigned 32-bit integer, got %q", k, tr[2*k+1])
			}
			p.Track[k] = TrackElem{ImageID: uint32(im), Point2DIdx: uint32(idx)}
		}
		points = append(points, p)
	}
}

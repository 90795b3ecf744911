package colmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// readBinary runs the binary reader for file and drops its result.
func readBinary(file string, d []byte) error {
	var err error
	switch file {
	case "cameras.bin":
		_, err = ReadCamerasBinary(bytes.NewReader(d), file)
	case "images.bin":
		_, err = ReadImagesBinary(bytes.NewReader(d), file)
	case "points3D.bin":
		_, err = ReadPoints3DBinary(bytes.NewReader(d), file)
	default:
		panic("no reader for " + file)
	}
	return err
}

func tinyBinaries(t *testing.T) map[string][]byte {
	m := tinyModel()
	return map[string][]byte{
		"cameras.bin":  writeCamerasBinary(t, m.Cameras),
		"images.bin":   writeImagesBinary(m.Images),
		"points3D.bin": writePoints3DBinary(m.Points),
	}
}

// TestBinaryTruncated cuts each tiny binary file at every byte: every
// strict prefix must fail with an error naming the file and an offset.
func TestBinaryTruncated(t *testing.T) {
	for name, data := range tinyBinaries(t) {
		read := func(d []byte) error { return readBinary(name, d) }
		if err := read(data); err != nil {
			t.Fatalf("%s: the whole file fails: %v", name, err)
		}
		for cut := 0; cut < len(data); cut++ {
			err := read(data[:cut])
			if err == nil {
				t.Errorf("%s cut at %d of %d bytes: no error", name, cut, len(data))
				continue
			}
			if prefix := "colmap: " + name + ": offset "; !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("%s cut at %d: error %q does not start with %q", name, cut, err, prefix)
			}
		}
		// One byte too many is a wrong count too.
		if err := read(append(append([]byte(nil), data...), 0)); err == nil ||
			!strings.Contains(err.Error(), fmt.Sprintf("offset %d: 1 unexpected bytes", len(data))) {
			t.Errorf("%s with a trailing byte: error %v, want one at offset %d", name, err, len(data))
		}
	}
}

func TestBinaryCorrupt(t *testing.T) {
	bins := tinyBinaries(t)
	le := binary.LittleEndian
	// patch returns a copy of file with v written at off.
	patch := func(file string, off int, v any) []byte {
		d := append([]byte(nil), bins[file]...)
		switch x := v.(type) {
		case uint64:
			le.PutUint64(d[off:], x)
		case uint32:
			le.PutUint32(d[off:], x)
		}
		return d
	}
	// Offsets in the tiny files: cameras: count 0, id 8, model 12.
	// images: count 0, id 8, q/t 12, camera 68, name 72 ("im.png\x00"),
	// num_points2D 79. points: count 0, id 8, ..., track_length 8+8+24+3+8=51.
	const (
		imgNameOff  = 8 + 4 + 56 + 4
		imgNumPtOff = imgNameOff + len("im.png") + 1
		ptTrackOff  = 8 + 8 + 24 + 3 + 8
	)
	// The name's NUL and everything after it overwritten: long enough to
	// pass the count check, with no terminator anywhere.
	noNUL := append([]byte(nil), bins["images.bin"]...)
	for i := imgNumPtOff - 1; i < len(noNUL); i++ {
		noNUL[i] = 'x'
	}
	cases := []struct {
		name, file string
		data       []byte
		want       string
		eof        bool
	}{
		{"huge camera count", "cameras.bin", patch("cameras.bin", 0, uint64(1)<<62),
			"colmap: cameras.bin: offset 0: num_cameras = 4611686018427387904 needs at least 24 bytes each", false},
		{"camera count too small", "cameras.bin", patch("cameras.bin", 0, uint64(0)),
			"colmap: cameras.bin: offset 8: 88 unexpected bytes after the last camera", false},
		{"camera count one too many", "cameras.bin", patch("cameras.bin", 0, uint64(2)),
			"colmap: cameras.bin: offset 96: camera #1: want camera_id (u32) (4 bytes), only 0 left before end of file", true},
		{"camera count far too many", "cameras.bin", patch("cameras.bin", 0, uint64(4)),
			"colmap: cameras.bin: offset 0: num_cameras = 4 needs at least 24 bytes each, only 88 bytes left", false},
		{"bad model id", "cameras.bin", patch("cameras.bin", 12, uint32(99)),
			"colmap: cameras.bin: offset 12: camera 1: unknown camera model id 99", false},
		{"negative model id", "cameras.bin", patch("cameras.bin", 12, uint32(0xffffffff)),
			"colmap: cameras.bin: offset 12: camera 1: unknown camera model id -1", false},
		{"model with more params than the file", "cameras.bin", patch("cameras.bin", 12, uint32(11)),
			"colmap: cameras.bin: offset 32: camera 1: want RAD_TAN_THIN_PRISM_FISHEYE params (16 × f64) (128 bytes), only 64 left", true},
		{"huge keypoint count", "images.bin", patch("images.bin", imgNumPtOff, ^uint64(0)),
			fmt.Sprintf("colmap: images.bin: offset %d: image 17: num_points2D = 18446744073709551615 needs at least 24 bytes each", imgNumPtOff), false},
		{"keypoint count one too many", "images.bin", patch("images.bin", imgNumPtOff, uint64(3)),
			fmt.Sprintf("colmap: images.bin: offset %d: image 17: num_points2D = 3 needs at least 24 bytes each, only 48 bytes left", imgNumPtOff), false},
		{"huge image count", "images.bin", patch("images.bin", 0, uint64(1)<<40),
			"colmap: images.bin: offset 0: num_reg_images = 1099511627776 needs at least 73 bytes each", false},
		{"name without NUL", "images.bin", noNUL,
			fmt.Sprintf("colmap: images.bin: offset %d: image 17: name not NUL-terminated before end of file", imgNameOff), false},
		{"huge track", "points3D.bin", patch("points3D.bin", ptTrackOff, uint64(1)<<61),
			fmt.Sprintf("colmap: points3D.bin: offset %d: point 5: track_length = 2305843009213693952 needs at least 8 bytes each", ptTrackOff), false},
		{"track one too short", "points3D.bin", patch("points3D.bin", ptTrackOff, uint64(1)),
			fmt.Sprintf("colmap: points3D.bin: offset %d: 8 unexpected bytes after the last point", ptTrackOff+8+8), false},
		{"huge point count", "points3D.bin", patch("points3D.bin", 0, uint64(1)<<50),
			"colmap: points3D.bin: offset 0: num_points = 1125899906842624 needs at least 51 bytes each", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := readBinary(tc.file, tc.data)
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\ndoes not contain %q", err, tc.want)
			}
			if got := errors.Is(err, io.ErrUnexpectedEOF); got != tc.eof {
				t.Errorf("errors.Is(err, io.ErrUnexpectedEOF) = %v, want %v", got, tc.eof)
			}
		})
	}
}

// TestBinaryDuplicates checks that an ID used twice is an error at the
// second record.
func TestBinaryDuplicates(t *testing.T) {
	m := tinyModel()
	c := m.Cameras[1]
	c2 := c
	c2.ID = 2
	camData := writeCamerasBinary(t, map[uint32]Camera{1: c, 2: c2})
	binary.LittleEndian.PutUint32(camData[8+88:], 1) // second camera's id := 1
	img := m.Images[0]
	imgData := writeImagesBinary([]Image{img, img})
	ptData := writePoints3DBinary([]Point3D{m.Points[0], m.Points[0]})
	cases := []struct {
		file string
		data []byte
		want string
	}{
		{"cameras.bin", camData, "colmap: cameras.bin: offset 96: camera 1: duplicate camera_id"},
		{"images.bin", imgData, fmt.Sprintf("colmap: images.bin: offset %d: image 17: duplicate image_id", 8+(len(imgData)-8)/2)},
		{"points3D.bin", ptData, fmt.Sprintf("colmap: points3D.bin: offset %d: point 5: duplicate point3D_id", 8+(len(ptData)-8)/2)},
	}
	for _, tc := range cases {
		err := readBinary(tc.file, tc.data)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.file, err, tc.want)
		}
	}
}

func TestTextBad(t *testing.T) {
	readers := map[string]func(string) error{
		"cameras.txt": func(s string) error {
			_, err := ReadCamerasText(strings.NewReader(s), "cameras.txt")
			return err
		},
		"images.txt": func(s string) error {
			_, err := ReadImagesText(strings.NewReader(s), "images.txt")
			return err
		},
		"points3D.txt": func(s string) error {
			_, err := ReadPoints3DText(strings.NewReader(s), "points3D.txt")
			return err
		},
	}
	const img = "1 1 0 0 0 0 0 0 1 a.png\n"
	cases := []struct {
		name, file, data, want string
	}{
		{"unknown model", "cameras.txt", "# c\n1 PINHOLE 4 4 1 1 2 2\n2 PINHOLES 4 4 1 1 2 2\n",
			`colmap: cameras.txt: line 3: camera 2: unknown camera model "PINHOLES"`},
		{"too few params", "cameras.txt", "1 OPENCV 800 600 1 1 2 2 0 0 0\n",
			"colmap: cameras.txt: line 1: camera 1: model OPENCV takes 8 parameters, got 7"},
		{"too many params", "cameras.txt", "\n\n1 SIMPLE_PINHOLE 800 600 1 2 3 4\n",
			"colmap: cameras.txt: line 3: camera 1: model SIMPLE_PINHOLE takes 3 parameters, got 4"},
		{"non-numeric width", "cameras.txt", "1 PINHOLE 8o0 600 1 1 2 2\n",
			`colmap: cameras.txt: line 1: camera 1: WIDTH: want an unsigned 64-bit integer, got "8o0": invalid syntax`},
		{"non-numeric param", "cameras.txt", "1 PINHOLE 800 600 1 1 2 x\n",
			`colmap: cameras.txt: line 1: camera 1: PARAMS[3]: want a number, got "x"`},
		{"negative id", "cameras.txt", "-1 PINHOLE 800 600 1 1 2 2\n",
			`colmap: cameras.txt: line 1: CAMERA_ID: want an unsigned 32-bit integer, got "-1"`},
		{"id out of range", "cameras.txt", "4294967296 PINHOLE 800 600 1 1 2 2\n",
			`colmap: cameras.txt: line 1: CAMERA_ID: want an unsigned 32-bit integer, got "4294967296": value out of range`},
		{"short camera line", "cameras.txt", "1 PINHOLE 800\n",
			"colmap: cameras.txt: line 1: want CAMERA_ID MODEL WIDTH HEIGHT PARAMS[], got 3 fields"},
		{"duplicate camera", "cameras.txt", "1 PINHOLE 8 6 1 1 2 2\n1 PINHOLE 8 6 1 1 2 2\n",
			"colmap: cameras.txt: line 2: camera 1: duplicate CAMERA_ID"},
		{"short image line", "images.txt", "1 1 0 0 0 0 0 0 1\n\n",
			"colmap: images.txt: line 1: want IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME, got 9 fields"},
		{"non-numeric quaternion", "images.txt", "# h\n1 1 0 zero 0 0 0 0 1 a.png\n\n",
			`colmap: images.txt: line 2: image 1: QY: want a number, got "zero"`},
		{"non-numeric camera id", "images.txt", "1 1 0 0 0 0 0 0 one a.png\n\n",
			`colmap: images.txt: line 1: image 1: CAMERA_ID: want an unsigned 32-bit integer, got "one"`},
		{"keypoints not in triples", "images.txt", img + "1 2 -1 3 4\n",
			"colmap: images.txt: line 2: image 1: POINTS2D: want (X Y POINT3D_ID) triples, got 5 values"},
		{"non-numeric keypoint", "images.txt", img + "1 2 -1 3 y 5\n",
			`colmap: images.txt: line 2: image 1: POINTS2D[1].Y: want a number, got "y"`},
		{"fractional point id", "images.txt", img + "1 2 -1 3 4 5.5\n",
			`colmap: images.txt: line 2: image 1: POINTS2D[1].POINT3D_ID: want a signed 64-bit integer, got "5.5"`},
		{"second image bad", "images.txt", img + "\n2 1 0 0 0 0 0 nan? 1 b.png\n\n",
			`colmap: images.txt: line 3: image 2: TZ: want a number, got "nan?"`},
		{"duplicate image", "images.txt", img + "\n" + img + "\n",
			"colmap: images.txt: line 3: image 1: duplicate IMAGE_ID"},
		{"rgb out of range", "points3D.txt", "1 0 0 0 1 256 3 0.5 1 0 2 0\n",
			`colmap: points3D.txt: line 1: point 1: G: want an integer in 0..255, got "256": value out of range`},
		{"non-numeric xyz", "points3D.txt", "# x\n\n1 0 y 0 1 2 3 0.5\n",
			`colmap: points3D.txt: line 3: point 1: Y: want a number, got "y"`},
		{"odd track", "points3D.txt", "1 0 0 0 1 2 3 0.5 1 0 2\n",
			"colmap: points3D.txt: line 1: point 1: TRACK: want (IMAGE_ID POINT2D_IDX) pairs, got 3 values"},
		{"non-numeric track", "points3D.txt", "1 0 0 0 1 2 3 0.5 1 0 2 x\n",
			`colmap: points3D.txt: line 1: point 1: TRACK[1].POINT2D_IDX: want an unsigned 32-bit integer, got "x"`},
		{"short point line", "points3D.txt", "1 0 0 0 1 2 3\n",
			"colmap: points3D.txt: line 1: want POINT3D_ID X Y Z R G B ERROR TRACK[], got 7 fields"},
		{"duplicate point", "points3D.txt", "1 0 0 0 1 2 3 0.5\n1 0 0 0 1 2 3 0.5\n",
			"colmap: points3D.txt: line 2: point 1: duplicate POINT3D_ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := readers[tc.file](tc.data)
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %q\ndoes not start with %q", err, tc.want)
			}
		})
	}
}

// TestImagesTextSecondLine covers the two-line layout: an empty keypoint
// line, CRLF line endings, a file ending after an image's first line, and
// comment-looking text that is the keypoint line itself.
func TestImagesTextSecondLine(t *testing.T) {
	cases := []struct {
		name, data string
		want       []int // keypoints per image
	}{
		{"empty second line", "1 1 0 0 0 0 0 0 1 a.png\n\n2 1 0 0 0 0 0 0 1 b.png\n1 2 3\n", []int{0, 1}},
		{"crlf", "1 1 0 0 0 0 0 0 1 a.png\r\n1 2 -1 3 4 -1\r\n2 1 0 0 0 0 0 0 1 b.png\r\n\r\n", []int{2, 0}},
		{"eof after first line", "1 1 0 0 0 0 0 0 1 a.png\n", []int{0}},
		{"eof after first line, no newline", "1 1 0 0 0 0 0 0 1 a.png", []int{0}},
		{"no trailing newline", "1 1 0 0 0 0 0 0 1 a.png\n7 8 9", []int{1}},
		{"blank lines between images", "1 1 0 0 0 0 0 0 1 a.png\n\n\n\n# c\n2 1 0 0 0 0 0 0 1 b.png\n\n", []int{0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			imgs, err := ReadImagesText(strings.NewReader(tc.data), "images.txt")
			if err != nil {
				t.Fatal(err)
			}
			if len(imgs) != len(tc.want) {
				t.Fatalf("%d images, want %d", len(imgs), len(tc.want))
			}
			for i, n := range tc.want {
				if len(imgs[i].Points2D) != n {
					t.Errorf("image %d: %d keypoints, want %d", imgs[i].ID, len(imgs[i].Points2D), n)
				}
			}
		})
	}
	// The line after an image line is its keypoint line even if it looks
	// like a comment: it must fail, not be skipped.
	_, err := ReadImagesText(strings.NewReader("1 1 0 0 0 0 0 0 1 a.png\n# not a comment\n"), "images.txt")
	if err == nil || !strings.Contains(err.Error(), "line 2: image 1: POINTS2D") {
		t.Errorf("comment as keypoint line: error %v, want one at line 2 about POINTS2D", err)
	}
	// Names keep inner spaces; trailing blanks are not part of the name.
	imgs, err := ReadImagesText(strings.NewReader("5 1 0 0 0 0 0 0 1   my photo 1.png \t\n\n"), "images.txt")
	if err != nil || len(imgs) != 1 || imgs[0].Name != "my photo 1.png" {
		t.Errorf("name with spaces: %+v, %v; want name %q", imgs, err, "my photo 1.png")
	}
}

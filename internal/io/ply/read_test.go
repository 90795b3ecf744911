package ply

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/io/finite"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

const (
	fixtureRel = "fixtures/ply/train-1000.ply"
	// testSeed seeds the generated values of the hand-made files.
	testSeed = 20240611
)

var formats = []string{"binary_little_endian", "binary_big_endian", "ascii"}

// expectFromRows is the tests' own reading of the INRIA layout: it maps
// rows of named values to Gaussians (file f_rest channel-major,
// splat SH coefficient-major), independently of the reader's slot table.
func expectFromRows(t testing.TB, names []string, rows [][]float64) *splat.Gaussians {
	t.Helper()
	nRest := 0
	for _, n := range names {
		if strings.HasPrefix(n, "f_rest_") {
			nRest++
		}
	}
	km1 := nRest / 3 // K−1 coefficients per channel besides DC
	g := splat.New(len(rows))
	for i, row := range rows {
		sh := g.SH[i*48 : (i+1)*48]
		for k, n := range names {
			v := float32(row[k])
			var j int
			switch {
			case n == "x" || n == "y" || n == "z":
				g.Means[3*i+int(n[0]-'x')] = v
			case strings.HasPrefix(n, "f_dc_"):
				j, _ = strconv.Atoi(n[5:])
				sh[j] = v
			case strings.HasPrefix(n, "f_rest_"):
				j, _ = strconv.Atoi(n[7:])
				c, coef := j/km1, j%km1+1
				sh[coef*3+c] = v
			case n == "opacity":
				g.OpacityLogits[i] = v
			case strings.HasPrefix(n, "scale_"):
				j, _ = strconv.Atoi(n[6:])
				g.LogScales[3*i+j] = v
			case strings.HasPrefix(n, "rot_"):
				j, _ = strconv.Atoi(n[4:])
				g.Quats[4*i+j] = v
			}
		}
	}
	return g
}

// sameBits fails unless every field of got equals want bit for bit.
func sameBits(t testing.TB, got, want *splat.Gaussians) {
	t.Helper()
	if got.Len() != want.Len() {
		t.Fatalf("got %d splats, want %d", got.Len(), want.Len())
	}
	gf, wf := got.Fields(), want.Fields()
	for k := range gf {
		if len(gf[k].Data) != len(wf[k].Data) {
			t.Fatalf("%s: %d values, want %d", gf[k].Name, len(gf[k].Data), len(wf[k].Data))
		}
		for j := range gf[k].Data {
			if math.Float32bits(gf[k].Data[j]) != math.Float32bits(wf[k].Data[j]) {
				t.Fatalf("%s[%d] (splat %d) = %v, want %v", gf[k].Name, j, j/gf[k].Width, gf[k].Data[j], wf[k].Data[j])
			}
		}
	}
}

func TestReadFixture(t *testing.T) {
	data := readShared(t, fixtureRel)
	g, info, err := Read(bytes.NewReader(data), "train-1000.ply")
	if err != nil {
		t.Fatal(err)
	}
	want := Info{Format: "binary_little_endian", SHDegree: 3, Count: 1000}
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("info = %+v, want %+v", info, want)
	}
	names, rows := decodeFloatLE(t, data)
	sameBits(t, g, expectFromRows(t, names, rows))
	// Spot values read off the file with an independent tool (Python's
	// struct): splat 0's x, f_rest_15 (coefficient 1, green) and rot_0.
	if g.Means[0] != 2.0958523750305176 || g.SH[1*3+1] != 0.026168817654252052 || g.Quats[0] != 1.0164928436279297 {
		t.Errorf("splat 0: x=%v sh[1][1]=%v w=%v", g.Means[0], g.SH[4], g.Quats[0])
	}
	if err := g.Validate(); err != nil {
		t.Error(err)
	}
}

func TestReadFileFixture(t *testing.T) {
	path := needShared(t, fixtureRel)
	g, info, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data := readShared(t, fixtureRel)
	g2, _, err := Read(unsized{bytes.NewReader(data)}, "pipe")
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, g, g2)
	if info.Count != 1000 {
		t.Errorf("count %d", info.Count)
	}
	_, _, err = ReadFile(filepath.Join(t.TempDir(), "absent.ply"))
	if err == nil || !strings.HasPrefix(err.Error(), "ply: open ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

// TestRoundTripFixture writes what was read and checks that the bytes are
// the input file's: the fixture is itself in the exact layout Write uses
// (float properties in INRIA order, zero normals, the same header lines).
func TestRoundTripFixture(t *testing.T) {
	data := readShared(t, fixtureRel)
	g, _, err := Read(bytes.NewReader(data), "train-1000.ply")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, g, 3); err != nil {
		t.Fatal(err)
	}
	out := buf.Bytes()
	if !bytes.Equal(out, data) {
		n := 0
		for n < len(out) && n < len(data) && out[n] == data[n] {
			n++
		}
		t.Errorf("written file differs from the input at byte %d (lengths %d and %d)", n, len(out), len(data))
	}
	g2, info, err := Read(bytes.NewReader(out), "written.ply")
	if err != nil {
		t.Fatal(err)
	}
	if info.SHDegree != 3 || info.Count != 1000 {
		t.Errorf("info %+v", info)
	}
	sameBits(t, g2, g)
}

// TestFixtureFormats converts the fixture to big-endian and ASCII and checks
// that both read back bit-identically.
func TestFixtureFormats(t *testing.T) {
	data := readShared(t, fixtureRel)
	ref, _, err := Read(bytes.NewReader(data), "le")
	if err != nil {
		t.Fatal(err)
	}
	names, rows := decodeFloatLE(t, data)
	for _, f := range formats {
		t.Run(f, func(t *testing.T) {
			conv := buildPLY(t, f, []telem{floatElem(names, rows)})
			g, info, err := Read(bytes.NewReader(conv), f)
			if err != nil {
				t.Fatal(err)
			}
			if info.Format != f || info.SHDegree != 3 || info.Count != 1000 {
				t.Errorf("info %+v", info)
			}
			sameBits(t, g, ref)
		})
	}
}

// handMade builds a degree-d splat file in format f. With fancy set it
// drops the normals, shuffles the properties, mixes types, adds unknown
// properties (one a list) and other elements before and after vertex.
func handMade(t testing.TB, f string, d, n int, fancy bool) (data []byte, names []string, rows [][]float64, extra []string) {
	rng := rand.New(rand.NewPCG(testSeed, uint64(d)))
	names = inriaNames(d)
	if !fancy {
		for i := 0; i < n; i++ {
			row := make([]float64, len(names))
			for k := range row {
				row[k] = float64(float32(rng.NormFloat64()))
			}
			rows = append(rows, row)
		}
		return buildPLY(t, f, []telem{floatElem(names, rows)}), names, rows, nil
	}
	names = append([]string{"x", "y", "z"}, names[6:]...) // no normals
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	types := map[string]string{"x": "double", "y": "short", "z": "uchar", "f_dc_1": "float64", "opacity": "int8", "rot_3": "uint16"}
	v := telem{name: "vertex"}
	var vnames []string
	// Unknown properties at the front, the middle and the end.
	extra = []string{"alpha", "segments", "confidence"}
	all := append([]string{"alpha"}, names[:len(names)/2]...)
	all = append(all, "segments")
	all = append(all, names[len(names)/2:]...)
	all = append(all, "confidence")
	for _, nm := range all {
		switch nm {
		case "alpha":
			v.props = append(v.props, tprop{name: nm, typ: "uchar"})
		case "segments":
			v.props = append(v.props, tprop{name: nm, typ: "int", list: "uchar"})
		case "confidence":
			v.props = append(v.props, tprop{name: nm, typ: "double"})
		default:
			typ := types[nm]
			if typ == "" {
				typ = "float"
			}
			v.props = append(v.props, tprop{name: nm, typ: typ})
			vnames = append(vnames, nm)
		}
	}
	for i := 0; i < n; i++ {
		var fileRow, row []float64
		for _, p := range v.props {
			switch p.name {
			case "alpha":
				fileRow = append(fileRow, 200)
			case "segments":
				c := i % 3
				fileRow = append(fileRow, float64(c))
				for k := 0; k < c; k++ {
					fileRow = append(fileRow, float64(-7*k))
				}
			case "confidence":
				fileRow = append(fileRow, math.Pi)
			default:
				var x float64
				switch p.typ {
				case "short":
					x = float64(rng.IntN(60000) - 30000)
				case "uchar":
					x = float64(rng.IntN(256))
				case "int8":
					x = float64(rng.IntN(256) - 128)
				case "uint16":
					x = float64(rng.IntN(65536))
				case "double", "float64":
					x = rng.NormFloat64() // not a float32: the reader rounds
				default:
					x = float64(float32(rng.NormFloat64()))
				}
				fileRow = append(fileRow, x)
				row = append(row, x)
			}
		}
		v.rows = append(v.rows, fileRow)
		rows = append(rows, row)
	}
	face := telem{name: "face", props: []tprop{{name: "vertex_indices", typ: "int", list: "uchar"}, {name: "flags", typ: "ushort"}},
		rows: [][]float64{{3, 0, 1, 2, 7}, {0, 1}, {4, 1, 2, 3, 0, 65535}}}
	edge := telem{name: "edge", props: []tprop{{name: "v1", typ: "int"}, {name: "v2", typ: "uint"}, {name: "w", typ: "double"}},
		rows: [][]float64{{0, 1, 0.5}, {1, 2, -1e300}}}
	empty := telem{name: "material", props: []tprop{{name: "r", typ: "float"}}}
	data = buildPLY(t, f, []telem{face, empty, v, edge},
		"comment made by the rlxsplat tests", "obj_info generated", "comment", "")
	return data, vnames, rows, extra
}

func TestReadHandMade(t *testing.T) {
	for _, f := range formats {
		for d := 0; d <= 2; d++ {
			for _, fancy := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/degree%d/fancy=%v", f, d, fancy), func(t *testing.T) {
					data, names, rows, extra := handMade(t, f, d, 5, fancy)
					g, info, err := Read(bytes.NewReader(data), "hand.ply")
					if err != nil {
						t.Fatal(err)
					}
					want := Info{Format: f, SHDegree: d, Count: 5, Extra: extra}
					if !reflect.DeepEqual(info, want) {
						t.Errorf("info = %+v, want %+v", info, want)
					}
					sameBits(t, g, expectFromRows(t, names, rows))
					// Above the file's degree the coefficients are zero.
					k := splat.NumCoeffs(d)
					for i := 0; i < g.Len(); i++ {
						for j := k * 3; j < 48; j++ {
							if g.SH[i*48+j] != 0 {
								t.Fatalf("splat %d SH[%d] = %v above degree %d", i, j, g.SH[i*48+j], d)
							}
						}
					}
					// The same file without a known size reads the same.
					g2, _, err := Read(unsized{bytes.NewReader(data)}, "hand.ply")
					if err != nil {
						t.Fatal(err)
					}
					sameBits(t, g2, g)
				})
			}
		}
	}
}

// TestFRestOrder reads files whose f_rest_i holds i and checks where each
// lands in the coefficient-major SH array: index c·(K−1) + k−1.
func TestFRestOrder(t *testing.T) {
	for d := 1; d <= 3; d++ {
		names := inriaNames(d)
		row := make([]float64, len(names))
		for k, n := range names {
			if j, ok := strings.CutPrefix(n, "f_rest_"); ok {
				row[k], _ = strconv.ParseFloat(j, 64)
			}
		}
		g, info, err := Read(bytes.NewReader(buildPLY(t, "binary_little_endian", []telem{floatElem(names, [][]float64{row})})), "order.ply")
		if err != nil {
			t.Fatal(err)
		}
		if info.SHDegree != d {
			t.Fatalf("degree %d, want %d", info.SHDegree, d)
		}
		km1 := splat.NumCoeffs(d) - 1
		for coef := 1; coef < 16; coef++ {
			for c := 0; c < 3; c++ {
				got := g.SH[coef*3+c]
				want := float32(c*km1 + coef - 1)
				if coef > km1 {
					want = 0
				}
				if got != want {
					t.Errorf("degree %d: SH coefficient %d channel %d = %v, want %v", d, coef, c, got, want)
				}
			}
		}
	}
	// One literal case, so that the formula above is not the only oracle:
	// degree 3, coefficient 2, green is f_rest_16; blue coefficient 15 is
	// f_rest_44; red coefficient 1 is f_rest_0.
	names := inriaNames(3)
	row := make([]float64, len(names))
	for k := range names {
		row[k] = float64(k - 9) // f_rest_j sits at k = 9+j
	}
	g, _, err := Read(bytes.NewReader(buildPLY(t, "ascii", []telem{floatElem(names, [][]float64{row})})), "order.ply")
	if err != nil {
		t.Fatal(err)
	}
	if g.SH[2*3+1] != 16 || g.SH[15*3+2] != 44 || g.SH[1*3+0] != 0 || g.SH[1*3+1] != 15 {
		t.Errorf("SH = %v", g.SH[:48])
	}
}

func TestReadEmptyScene(t *testing.T) {
	for _, f := range formats {
		data := buildPLY(t, f, []telem{floatElem(inriaNames(3), nil)})
		g, info, err := Read(bytes.NewReader(data), "empty.ply")
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if g.Len() != 0 || info.Count != 0 || info.SHDegree != 3 || g.Validate() != nil {
			t.Errorf("%s: %d splats, info %+v", f, g.Len(), info)
		}
	}
}

func TestReadCRLFHeader(t *testing.T) {
	data, names, rows, _ := handMade(t, "binary_little_endian", 1, 3, false)
	end := bytes.Index(data, []byte("end_header\n")) + len("end_header\n")
	crlf := append(bytes.ReplaceAll(data[:end], []byte("\n"), []byte("\r\n")), data[end:]...)
	g, _, err := Read(bytes.NewReader(crlf), "crlf.ply")
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, g, expectFromRows(t, names, rows))
}

// TestReadGrowth reads more splats than the first allocation of the
// unknown-size path holds.
func TestReadGrowth(t *testing.T) {
	data, names, rows, _ := handMade(t, "binary_big_endian", 0, 10000, false)
	g, _, err := Read(unsized{bytes.NewReader(data)}, "big.ply")
	if err != nil {
		t.Fatal(err)
	}
	sameBits(t, g, expectFromRows(t, names, rows))
}

func lines(l ...string) []byte { return []byte(strings.Join(l, "\n") + "\n") }

// degree0 is a valid degree-0 header's property lines.
func degree0() []string {
	var l []string
	for _, n := range inriaNames(0) {
		l = append(l, "property float "+n)
	}
	return l
}

func header0(format string, count int64, extra ...string) []string {
	l := []string{"ply", "format " + format + " 1.0", fmt.Sprintf("element vertex %d", count)}
	l = append(l, degree0()...)
	return append(append(l, extra...), "end_header")
}

func without(l []string, drop ...string) []string {
	var out []string
outer:
	for _, s := range l {
		for _, d := range drop {
			if s == d {
				continue outer
			}
		}
		out = append(out, s)
	}
	return out
}

func TestReadErrors(t *testing.T) {
	le := "binary_little_endian"
	d0 := inriaNames(0) // 17 properties: opacity at 9, scale_1 at 11
	okRow := func() []float64 {
		r := make([]float64, 17)
		r[13] = 1
		return r
	}
	withValue := func(f string, typ map[string]string, rowIdx, prop int, v float64) []byte {
		e := floatElem(d0, [][]float64{okRow(), okRow()})
		for k := range e.props {
			if tp, ok := typ[e.props[k].name]; ok {
				e.props[k].typ = tp
			}
		}
		e.rows[rowIdx][prop] = v
		return buildPLY(t, f, []telem{e})
	}
	hdrLen := len(buildPLY(t, le, []telem{floatElem(d0, [][]float64{okRow(), okRow()})})) - 2*68
	asciiHdrLines := len(header0("ascii", 2))
	rest8 := header0(le, 0)
	rest8 = append(rest8[:len(rest8)-1], "property float f_rest_0", "property float f_rest_1", "property float f_rest_2",
		"property float f_rest_3", "property float f_rest_4", "property float f_rest_5", "property float f_rest_6", "property float f_rest_7", "end_header")
	gap := append(rest8[:len(rest8)-1:len(rest8)-1], "property float f_rest_9", "end_header")
	compressed := []string{"ply", "format binary_little_endian 1.0", "element chunk 0", "property float min_x",
		"element vertex 0", "property uint packed_position", "property uint packed_rotation", "end_header"}

	bigDouble := withValue("binary_big_endian", map[string]string{"z": "double"}, 1, 2, 1e300)
	faceHdr := lines(append([]string{"ply", "format binary_little_endian 1.0", "element face 1", "property list char int idx"}, header0(le, 0)[2:]...)...)

	cases := []struct {
		name string
		data []byte
		want []string
	}{
		{"empty file", nil, []string{"not a PLY file"}},
		{"not ply", []byte("solid cube\nfacet normal 0 0 1\n"), []string{`not a PLY file: first line is "solid cube"`}},
		{"no end_header", lines(header0(le, 0)[:5]...), []string{"header line 6: end of file before end_header"}},
		{"bad format", lines(append([]string{"ply", "format binary_middle_endian 1.0"}, header0(le, 0)[2:]...)...), []string{`header line 2: unknown format "binary_middle_endian"`}},
		{"bad version", lines(append([]string{"ply", "format ascii 2.0"}, header0(le, 0)[2:]...)...), []string{`header line 2: unsupported PLY version "2.0"`}},
		{"short format", lines("ply", "format ascii", "end_header"), []string{"header line 2: format line"}},
		{"two formats", lines("ply", "format ascii 1.0", "format ascii 1.0", "end_header"), []string{"header line 3: second format line"}},
		{"no format", lines(append([]string{"ply"}, header0(le, 0)[2:]...)...), []string{"end_header before any format line"}},
		{"bad type", lines(append(header0(le, 0)[:3], "property flaot x", "end_header")...), []string{`header line 4: property x: unknown type "flaot"`}},
		{"bad list type", lines(append(header0(le, 0)[:3], "property list uchar integer idx", "end_header")...), []string{`header line 4: property idx: unknown type "integer"`}},
		{"float list count", lines(append(header0(le, 0)[:3], "property list float int idx", "end_header")...), []string{"header line 4: property idx: list count type float is not an integer type"}},
		{"short list", lines(append(header0(le, 0)[:3], "property list uchar idx", "end_header")...), []string{"header line 4: list property line"}},
		{"property first", lines("ply", "format ascii 1.0", "property float x", "end_header"), []string{"header line 3: property before any element"}},
		{"negative count", lines(append([]string{"ply", "format ascii 1.0", "element vertex -3"}, degree0()...)...), []string{`header line 3: element vertex: bad count "-3"`}},
		{"word count", lines("ply", "format ascii 1.0", "element vertex many", "end_header"), []string{`header line 3: element vertex: bad count "many"`}},
		{"element words", lines("ply", "format ascii 1.0", "element vertex", "end_header"), []string{"header line 3: element line"}},
		{"second vertex", lines(append(header0(le, 0)[:len(header0(le, 0))-1], "element vertex 0", "end_header")...), []string{`header line 21: second element "vertex"`}},
		{"second property", lines(append(header0(le, 0)[:len(header0(le, 0))-1], "property double y", "end_header")...), []string{`header line 21: element vertex: second property "y" (first on line 5)`}},
		{"unknown keyword", lines("ply", "format ascii 1.0", "elemnt vertex 0", "end_header"), []string{`header line 3: unknown keyword "elemnt"`}},
		{"end_header words", lines("ply", "format ascii 1.0", "end_header now"), []string{"header line 3: end_header line"}},
		{"long line", lines("ply", "comment "+strings.Repeat("x", maxLineBytes)), []string{"header line 2: line longer than"}},
		{"binary junk", bytes.Repeat([]byte{0xff}, 2*maxLineBytes), []string{`not a PLY file: first line is "\xff\xff`}},
		{"no vertex", lines("ply", "format ascii 1.0", "element face 0", "property list uchar int idx", "end_header"), []string{"no element vertex in the header"}},
		{"missing", lines(without(header0(le, 0), "property float opacity", "property float rot_0", "property float y")...), []string{"header line 3: element vertex: missing properties y, opacity, rot_0"}},
		{"list layout property", lines(append(without(header0(le, 0), "property float opacity", "end_header"), "property list uchar float opacity", "end_header")...), []string{"property opacity (line 20) is a list"}},
		{"f_rest count", lines(rest8...), []string{"element vertex: 8 f_rest properties, want 0, 9, 24 or 45"}},
		{"f_rest gap", lines(gap...), []string{"property f_rest_9 is out of range for 9 f_rest properties"}},
		{"f_rest name", lines(append(header0(le, 0)[:len(header0(le, 0))-1], "property float f_rest_07", "end_header")...), []string{`property f_rest_07 (line 21): "07" is not an f_rest index`}},
		{"compressed", lines(compressed...), []string{"header line 3: compressed PLY: element chunk lacks min_y"}},
		{"absurd count", append(lines(header0(le, 1000000000)...), make([]byte, 68*3)...),
			[]string{"header line 3: element vertex has count 1000000000, which needs at least 1000000000×68 bytes, but only 204 bytes follow the header"}},
		{"absurd face count", append(lines(append([]string{"ply", "format binary_big_endian 1.0", "element face 4611686018427387904", "property list uchar int idx"}, header0(le, 0)[2:]...)...), 0, 0),
			[]string{"header line 3: element face has count 4611686018427387904"}},
		{"NaN", withValue(le, nil, 1, 9, math.NaN()), []string{fmt.Sprintf("byte %d: vertex 1, property opacity: value is NaN", hdrLen+68+9*4)}},
		{"Inf", withValue(le, nil, 0, 0, math.Inf(-1)), []string{fmt.Sprintf("byte %d: vertex 0, property x: value is -Inf", hdrLen)}},
		{"big double", bigDouble, []string{fmt.Sprintf("byte %d: vertex 1, property z: value 1e+300 is out of float32 range", bytes.Index(bigDouble, []byte("end_header\n"))+11+72+8)}},
		{"ascii Inf", withValue("ascii", nil, 0, 6, math.Inf(1)), []string{fmt.Sprintf("line %d: vertex 0, property f_dc_0: value is +Inf", asciiHdrLines+1)}},
		{"ascii NaN", withValue("ascii", nil, 1, 9, math.NaN()), []string{fmt.Sprintf("line %d: vertex 1, property opacity: value is NaN", asciiHdrLines+2)}},
		{"ascii float range", bytes.Replace(withValue("ascii", nil, 1, 9, 7), []byte(" 7 "), []byte(" 1e39 "), 1), []string{`vertex 1, property opacity: value "1e39" is out of range for float`}},
		{"ascii bad number", bytes.Replace(withValue("ascii", nil, 1, 9, 7), []byte(" 7 "), []byte(" 1.2.3 "), 1), []string{`line 23: vertex 1, property opacity: value "1.2.3" is not a valid float`}},
		{"ascii uchar range", withValue("ascii", map[string]string{"x": "uchar"}, 0, 0, 300), []string{`line 22: vertex 0, property x: value "300" is out of range for uchar`}},
		{"ascii bad list", append(lines(append([]string{"ply", "format ascii 1.0", "element face 1", "property list uchar int idx"}, header0("ascii", 0)[2:]...)...), "-1 5\n"...),
			[]string{`line 24: face 0, property idx: bad list length "-1"`}},
		{"negative binary list", append(faceHdr, 0xff, 0, 0, 0, 0),
			[]string{fmt.Sprintf("byte %d: face 0, property idx: negative list length -1", len(faceHdr))}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []io.Reader{bytes.NewReader(c.data), unsized{bytes.NewReader(c.data)}} {
				_, _, err := Read(r, "bad.ply")
				if err == nil {
					if strings.Contains(c.name, "absurd") {
						t.Fatalf("%T: no error", r)
					}
					t.Fatal("no error")
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, "ply: bad.ply: ") {
					t.Errorf("%q does not start with the package and file name", msg)
				}
				if _, ok := r.(unsized); ok && strings.Contains(c.name, "absurd") {
					// Without a size the count cannot be checked up
					// front; the reader runs out of data instead.
					if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(msg, "file is truncated") {
						t.Errorf("unsized: %v", err)
					}
					continue
				}
				for _, w := range c.want {
					if !strings.Contains(msg, w) {
						t.Errorf("%T: error %q\n  does not contain %q", r, msg, w)
					}
				}
			}
		})
	}
}

// TestAbsurdCountNoHugeAllocation reads a header claiming 10¹² splats from
// an input whose size the reader cannot know, and checks that memory grows
// only with the data really there.
func TestAbsurdCountNoHugeAllocation(t *testing.T) {
	data := append(lines(header0("binary_little_endian", 1000000000000)...), make([]byte, 68*10)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := Read(unsized{bytes.NewReader(data)}, "absurd.ply")
	runtime.ReadMemStats(&after)
	want := "vertex 10, property x: file is truncated"
	if strconv.IntSize == 32 {
		want = "vertex count 1000000000000 is too large"
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 64<<20 {
		t.Errorf("allocated %d bytes for a 1 KiB input", d)
	}
}

// TestTruncated cuts the fixture at many offsets: every byte through the
// header and the first splats, then a stride through the rest.
func TestTruncated(t *testing.T) {
	data := readShared(t, fixtureRel)
	hdr := bytes.Index(data, []byte("end_header\n")) + len("end_header\n")
	const rec = 62 * 4
	var offs []int
	for o := 0; o < hdr+2*rec+8; o++ {
		offs = append(offs, o)
	}
	for o := hdr + 2*rec + 8; o < len(data); o += 997 {
		offs = append(offs, o)
	}
	offs = append(offs, len(data)-1)
	names, _ := decodeFloatLE(t, data)
	for _, o := range offs {
		cut := data[:o]
		_, _, err := Read(bytes.NewReader(cut), "cut.ply")
		if err == nil {
			t.Fatalf("cut at %d: no error", o)
		}
		if o > 3 && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: %v does not wrap io.ErrUnexpectedEOF", o, err)
		}
		if o >= hdr && !strings.Contains(err.Error(), fmt.Sprintf("but only %d bytes follow the header", o-hdr)) {
			t.Fatalf("cut at %d: %v", o, err)
		}
		_, _, err = Read(unsized{bytes.NewReader(cut)}, "cut.ply")
		if err == nil {
			t.Fatalf("unsized, cut at %d: no error", o)
		}
		if o >= hdr {
			i, within := (o-hdr)/rec, (o-hdr)%rec
			want := fmt.Sprintf("ply: cut.ply: byte %d: vertex %d, property %s: file is truncated", o, i, names[within/4])
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("unsized, cut at %d: %v\n  want %q", o, err, want)
			}
		}
	}
}

func TestTruncatedASCII(t *testing.T) {
	data, _, _, _ := handMade(t, "ascii", 2, 20, true)
	// Cutting inside the last token of the file leaves a shorter but valid
	// number, which no reader can tell from the real one; cut before it.
	last := bytes.LastIndexByte(bytes.TrimRight(data, "\n"), ' ')
	for o := 0; o < last; o += 7 {
		_, _, err := Read(unsized{bytes.NewReader(data[:o])}, "cut.ply")
		if err == nil {
			t.Fatalf("cut at %d: no error", o)
		}
		// A cut inside a number may leave an invalid one ("-"); a cut
		// after whitespace must be reported as truncation.
		if o > 3 && isSpace(data[o-1]) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: %v", o, err)
		}
	}
}

// TestTruncatedTrailingElement cuts a file inside the element after vertex:
// the splats are all there, but the file is broken and must not pass.
func TestTruncatedTrailingElement(t *testing.T) {
	for _, f := range []string{"binary_little_endian", "binary_big_endian"} {
		data, _, _, _ := handMade(t, f, 1, 4, true)
		// The edge element (2 × (4+4+8) bytes) is last: cut its last byte.
		_, _, err := Read(unsized{bytes.NewReader(data[:len(data)-1])}, "cut.ply")
		want := fmt.Sprintf("byte %d: edge 1, property w: file is truncated", len(data)-1)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", f, err, want)
		}
	}
}

// TestCutFixtures checks the fuzz seeds made by cutPLY: the cut splat file
// reads as the first splats of the whole one, and the cut SuperSplat files
// are refused as compressed files whose chunk count no longer fits.
func TestCutFixtures(t *testing.T) {
	data := readShared(t, fixtureRel)
	whole, _, err := Read(bytes.NewReader(data), "whole")
	if err != nil {
		t.Fatal(err)
	}
	g, info, err := Read(bytes.NewReader(cutPLY(t, data, 20)), "cut")
	if err != nil || info.Count != 20 {
		t.Fatalf("%v %+v", err, info)
	}
	want := &splat.Gaussians{Means: whole.Means[:60], LogScales: whole.LogScales[:60], Quats: whole.Quats[:80],
		OpacityLogits: whole.OpacityLogits[:20], SH: whole.SH[:20*48]}
	sameBits(t, g, want)
	for _, name := range []string{"biker", "guitar"} {
		_, _, err := Read(bytes.NewReader(cutPLY(t, readShared(t, "fixtures/ply/"+name+".compressed.ply"), 8)), name)
		if err == nil || !strings.Contains(err.Error(), "compressed PLY") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestInfClamped: ±Inf in opacity and scale_* (what other tools write where
// these saturate) is clamped to the finite bounds and reported once with
// the count and the first place; the rest of the file reads unchanged.
func TestInfClamped(t *testing.T) {
	d0 := inriaNames(0) // opacity at 9, scale_0..2 at 10..12
	row := func() []float64 {
		r := make([]float64, 17)
		r[13] = 1
		return r
	}
	for _, f := range []string{"binary_little_endian", "binary_big_endian", "ascii"} {
		rows := [][]float64{row(), row(), row()}
		rows[0][9] = math.Inf(1)
		rows[1][10] = math.Inf(-1)
		rows[2][12] = math.Inf(1)
		rows[2][0] = 4.5
		g, info, err := Read(bytes.NewReader(buildPLY(t, f, []telem{floatElem(d0, rows)})), "inf.ply")
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if g.OpacityLogits[0] != finite.LogitBound || g.LogScales[3] != -finite.LogScaleBound || g.LogScales[8] != finite.LogScaleBound {
			t.Errorf("%s: clamped to %g, %g, %g; want ±%d", f, g.OpacityLogits[0], g.LogScales[3], g.LogScales[8], finite.LogitBound)
		}
		if g.Means[6] != 4.5 {
			t.Errorf("%s: x of vertex 2 = %g, want 4.5", f, g.Means[6])
		}
		if !strings.Contains(info.Warning, "inf.ply: 3 infinite values") || !strings.Contains(info.Warning, "vertex 0, property opacity") {
			t.Errorf("%s: warning %q, want the count 3 and the first place", f, info.Warning)
		}
	}
	g, info, err := Read(bytes.NewReader(buildPLY(t, "binary_little_endian", []telem{floatElem(d0, [][]float64{row()})})), "ok.ply")
	if err != nil || info.Warning != "" || g.Len() != 1 {
		t.Errorf("finite file: %v, warning %q", err, info.Warning)
	}
}

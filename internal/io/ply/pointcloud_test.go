package ply

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func pointCloud(t testing.TB, f string, colour bool) []byte {
	v := telem{name: "vertex", props: []tprop{{"nx", "float", ""}, {"z", "double", ""}, {"x", "float", ""}, {"y", "short", ""}}}
	if colour {
		v.props = append(v.props, tprop{"blue", "uchar", ""}, tprop{"green", "uint8", ""}, tprop{"red", "uchar", ""}, tprop{"alpha", "uchar", ""})
	}
	for i := 0; i < 4; i++ {
		row := []float64{0.5, float64(i) + 0.25, -float64(i), float64(100 * i)}
		if colour {
			row = append(row, float64(10*i), float64(20*i), float64(60*i+5), 255)
		}
		v.rows = append(v.rows, row)
	}
	face := telem{name: "face", props: []tprop{{name: "vertex_indices", typ: "int", list: "uchar"}}, rows: [][]float64{{3, 0, 1, 2}, {3, 1, 2, 3}}}
	return buildPLY(t, f, []telem{v, face}, "comment from a point cloud tool")
}

func TestReadPointCloud(t *testing.T) {
	wantXYZ := []float32{0, 0, 0.25, -1, 100, 1.25, -2, 200, 2.25, -3, 300, 3.25}
	wantRGB := []uint8{5, 0, 0, 65, 20, 10, 125, 40, 20, 185, 60, 30}
	for _, f := range formats {
		for _, colour := range []bool{true, false} {
			xyz, rgb, err := readPointCloud(bytes.NewReader(pointCloud(t, f, colour)), "points.ply")
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if !reflect.DeepEqual(xyz, wantXYZ) {
				t.Errorf("%s: xyz %v", f, xyz)
			}
			switch {
			case colour && !reflect.DeepEqual(rgb, wantRGB):
				t.Errorf("%s: rgb %v", f, rgb)
			case !colour && rgb != nil:
				t.Errorf("%s: rgb %v, want nil", f, rgb)
			}
		}
	}
}

func TestReadPointCloudFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "points3d.ply")
	if err := os.WriteFile(path, pointCloud(t, "binary_little_endian", true), 0o644); err != nil {
		t.Fatal(err)
	}
	xyz, rgb, err := ReadPointCloud(path)
	if err != nil || len(xyz) != 12 || len(rgb) != 12 {
		t.Fatalf("%v %d %d", err, len(xyz), len(rgb))
	}
	// A splat file is also a point cloud (its means, no colours).
	fix := needShared(t, fixtureRel)
	xyz, rgb, err = ReadPointCloud(fix)
	if err != nil {
		t.Fatal(err)
	}
	g, _, err := ReadFile(fix)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(xyz, g.Means) || rgb != nil {
		t.Errorf("fixture as a point cloud: %d values, rgb %v", len(xyz), rgb != nil)
	}
}

func TestReadPointCloudErrors(t *testing.T) {
	cases := []struct {
		name string
		hdr  []string
		want string
	}{
		{"no z", []string{"property float x", "property float y"}, "header line 3: element vertex: missing properties z"},
		{"partial colour", []string{"property float x", "property float y", "property float z", "property uchar red", "property uchar green"}, "missing properties blue"},
		{"float colour", []string{"property float x", "property float y", "property float z", "property float red", "property float green", "property float blue"}, "property red (line 7) is float, want uchar"},
		{"list x", []string{"property list uchar float x", "property float y", "property float z"}, "property x (line 4) is a list"},
	}
	for _, c := range cases {
		data := lines(append(append([]string{"ply", "format ascii 1.0", "element vertex 0"}, c.hdr...), "end_header")...)
		_, _, err := readPointCloud(bytes.NewReader(data), "pc.ply")
		if err == nil || !strings.HasPrefix(err.Error(), "ply: pc.ply: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	_, _, err := readPointCloud(bytes.NewReader(lines("ply", "format ascii 1.0", "element face 0", "end_header")), "pc.ply")
	if err == nil || !strings.Contains(err.Error(), "no element vertex") {
		t.Errorf("no vertex: %v", err)
	}
	data := pointCloud(t, "binary_big_endian", true)
	_, _, err = readPointCloud(unsized{bytes.NewReader(data[:len(data)-30])}, "pc.ply")
	if err == nil || !strings.Contains(err.Error(), "file is truncated") {
		t.Errorf("truncated: %v", err)
	}
	_, _, err = ReadPointCloud(filepath.Join(t.TempDir(), "none.ply"))
	if err == nil || !strings.HasPrefix(err.Error(), "ply: open ") {
		t.Errorf("absent: %v", err)
	}
}

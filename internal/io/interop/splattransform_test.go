package interop

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/engine/cpu"
	"github.com/rlxsplat/rlxsplat/internal/io/dotsplat"
	"github.com/rlxsplat/rlxsplat/internal/io/ply"
	"github.com/rlxsplat/rlxsplat/internal/io/scene"
	"github.com/rlxsplat/rlxsplat/internal/io/spz"
	"github.com/rlxsplat/rlxsplat/internal/loss"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// fieldErr is the largest disagreement per field between two reads of
// the same splats.
type fieldErr struct {
	pos, opacity, logScale, rotDeg, colour, sh float64
}

func (e fieldErr) String() string {
	return fmt.Sprintf("pos %.2e  opacity %.2e  log-scale %.2e  rotation %.3f°  colour %.2e  SH %.2e",
		e.pos, e.opacity, e.logScale, e.rotDeg, e.colour, e.sh)
}

// compare measures a against b: positions, opacity (after sigmoid), log
// scales, the angle between rotations, base colour (SHC0·DC) and SH above
// DC up to degree deg.
func compare(t *testing.T, a, b *splat.Gaussians, deg int) fieldErr {
	t.Helper()
	if a.Len() != b.Len() {
		t.Fatalf("%d splats against %d", a.Len(), b.Len())
	}
	var e fieldErr
	up := func(m *float64, v float64) { *m = max(*m, math.Abs(v)) }
	for i := 0; i < a.Len(); i++ {
		for c := 0; c < 3; c++ {
			up(&e.pos, float64(a.Means[3*i+c]-b.Means[3*i+c]))
			up(&e.logScale, float64(a.LogScales[3*i+c]-b.LogScales[3*i+c]))
			up(&e.colour, splat.SHC0*float64(a.SH[i*splat.SHCoeffs*3+c]-b.SH[i*splat.SHCoeffs*3+c]))
		}
		up(&e.opacity, float64(splat.Sigmoid(a.OpacityLogits[i])-splat.Sigmoid(b.OpacityLogits[i])))
		var dot, na, nb float64
		for c := 0; c < 4; c++ {
			qa, qb := float64(a.Quats[4*i+c]), float64(b.Quats[4*i+c])
			dot, na, nb = dot+qa*qb, na+qa*qa, nb+qb*qb
		}
		// q and −q are one rotation; the angle between them is 2·acos|cos|.
		cos := min(math.Abs(dot)/math.Sqrt(na*nb), 1)
		up(&e.rotDeg, 2*math.Acos(cos)*180/math.Pi)
		for k := 1; k < splat.NumCoeffs(deg); k++ {
			for c := 0; c < 3; c++ {
				up(&e.sh, float64(a.SH[(i*splat.SHCoeffs+k)*3+c]-b.SH[(i*splat.SHCoeffs+k)*3+c]))
			}
		}
	}
	return e
}

func read(t *testing.T, path string) *scene.Scene {
	t.Helper()
	s, err := scene.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOurFilesThroughSplatTransform: each file rlxsplat writes, converted
// by splat-transform to PLY and read back, holds what rlxsplat reads from
// the file itself. Both sides decode the same bytes, so the bounds are
// float rounding plus what splat-transform's decoder does differently:
// it decodes a 255 alpha byte to opacity 1 (logit +Inf), where rlxsplat
// keeps the byte's half step (0.25/255) away from 1, and .splat rotation
// bytes as b/127.5 − 1 where rlxsplat inverts the antimatter15 writer's
// q·128 + 128, up to a byte step (about 0.9°) apart.
//
// splat-transform 2.7.1 does not read .glb (its own .glb is read by
// rlxsplat in TestSplatTransformOutputsRender, and ours is checked by the
// validator in TestGLTFValidator).
func TestOurFilesThroughSplatTransform(t *testing.T) {
	src := read(t, sourceScene(t))
	dir := t.TempDir()
	tests := []struct {
		ext   string
		write func(path string) error
		bound fieldErr
	}{
		{"ply", func(p string) error { return ply.WriteFile(p, src.Gaussians, 3) },
			fieldErr{pos: 0, opacity: 1e-6, logScale: 0, rotDeg: 0.01, colour: 0, sh: 0}},
		{"spz", func(p string) error { return spz.WriteFile(p, src.Gaussians, spz.Options{SHDegree: 3}) },
			fieldErr{pos: 1e-6, opacity: 1e-3, logScale: 1e-5, rotDeg: 0.1, colour: 1e-5, sh: 1e-6}},
		{"splat", func(p string) error { return dotsplat.WriteFile(p, src.Gaussians) },
			fieldErr{pos: 0, opacity: 1e-3, logScale: 1e-5, rotDeg: 1, colour: 1e-5, sh: 0}},
	}
	t.Logf("format → splat-transform → PLY, max |difference| against rlxsplat's own read of the file:")
	for _, tc := range tests {
		t.Run(tc.ext, func(t *testing.T) {
			ours := filepath.Join(dir, "ours."+tc.ext)
			if err := tc.write(ours); err != nil {
				t.Fatal(err)
			}
			back := filepath.Join(dir, "back-"+tc.ext+".ply")
			splatTransform(t, ours, back)
			a, b := read(t, ours), read(t, back)
			if b.SHDegree != a.SHDegree {
				t.Fatalf("SH degree %d back, %d written", b.SHDegree, a.SHDegree)
			}
			e := compare(t, b.Gaussians, a.Gaussians, a.SHDegree)
			t.Logf("%-6s %s", tc.ext, e)
			if tc.ext != "splat" { // .splat reorders the splats by importance
				t.Logf("%-6s against the source (the format's own quantisation): %s", tc.ext, compare(t, b.Gaussians, src.Gaussians, a.SHDegree))
			}
			if e.pos > tc.bound.pos || e.opacity > tc.bound.opacity || e.logScale > tc.bound.logScale ||
				e.rotDeg > tc.bound.rotDeg || e.colour > tc.bound.colour || e.sh > tc.bound.sh {
				t.Errorf("%s: %s beyond %s", tc.ext, e, tc.bound)
			}
		})
	}
}

// views are cameras around the scene's centre, two of them, at a distance
// that frames most of it.
func views(g *splat.Gaussians) []camera.Camera {
	var c [3]float64
	n := float64(g.Len())
	for i := 0; i < g.Len(); i++ {
		for k := 0; k < 3; k++ {
			c[k] += float64(g.Means[3*i+k]) / n
		}
	}
	// The offsets frame train-1000 (RMS radius about 7 units); other
	// scenes scale them by their own radius.
	var ms float64
	for i := 0; i < g.Len(); i++ {
		for k := 0; k < 3; k++ {
			d := float64(g.Means[3*i+k]) - c[k]
			ms += d * d / n
		}
	}
	s := math.Sqrt(ms) / 7
	var cams []camera.Camera
	for _, off := range [][3]float64{{0, -3, -18}, {16, -4, 6}} {
		eye := [3]float64{c[0] + s*off[0], c[1] + s*off[1], c[2] + s*off[2]}
		R, T := camera.LookAt(eye, c, [3]float64{0, 1, 0})
		cams = append(cams, camera.Camera{Width: 240, Height: 180, Fx: 200, Fy: 200, Cx: 120, Cy: 90, R: R, T: T})
	}
	return cams
}

func render(t *testing.T, g *splat.Gaussians, deg int, cams []camera.Camera) [][]float32 {
	t.Helper()
	set := engine.DefaultSettings()
	set.Workers = 2
	e, err := cpu.New(set, g)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var out [][]float32
	for i := range cams {
		img, err := e.Render(&cams[i], deg, [3]float32{0, 0, 0})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, img)
	}
	return out
}

// TestSplatTransformOutputsRender: splat-transform's conversions of a real
// scene, read by rlxsplat, render like the scene (PSNR between renders of
// the same views at the degree the format keeps). The floors are what
// each format's quantisation allows, measured on the shared fixture and on
// a trained duck (RLXSPLAT_INTEROP_SCENE); the logged figures are the ones
// to quote. The fixture's 1000 splats light only a few percent of each view,
// which flatters its PSNR; the duck fills its views. splat-transform 2.7.1 does not write .splat.
func TestSplatTransformOutputsRender(t *testing.T) {
	srcPath := sourceScene(t)
	src := read(t, srcPath)
	cams := views(src.Gaussians)
	dir := t.TempDir()
	tests := []struct {
		out    string
		format scene.Format
		floor  float64 // dB
	}{
		{"out.ply", scene.PLY, 90},
		// 11/10/11-bit positions and log scales within each chunk of
		// 256 and 8-bit colours: 40 dB is out of the format's reach on
		// a dense scene (a trained duck: 34.3 dB; train-1000: 54.2).
		{"out.compressed.ply", scene.CompressedPLY, 30},
		// A trained duck: 45.0 dB; train-1000: 54.1.
		{"out.spz", scene.SPZ, 40},
		{"out.glb", scene.GLB, 90},
	}
	refs := map[int][][]float32{}
	t.Logf("splat-transform %s → format → rlxsplat render, PSNR against the source's render:", filepath.Base(srcPath))
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.out, ".", "_"), func(t *testing.T) {
			path := filepath.Join(dir, tc.out)
			splatTransform(t, srcPath, path)
			s := read(t, path)
			if s.Format != tc.format {
				t.Fatalf("read as %s, want %s", s.Format, tc.format)
			}
			deg := min(s.SHDegree, src.SHDegree)
			if refs[deg] == nil {
				refs[deg] = render(t, src.Gaussians, deg, cams)
				// A view that missed the scene would agree with
				// anything; each must show it. The 1000 small
				// splats of the fixture light a few percent of a
				// view; 1% is the floor.
				for v, img := range refs[deg] {
					lit := 0
					for _, x := range img {
						if x > 0.05 {
							lit++
						}
					}
					if lit < len(img)/100 {
						t.Fatalf("view %d of the source shows almost nothing (%d of %d values lit)", v, lit, len(img))
					}
					if testing.Verbose() {
						t.Logf("view %d: %.0f%% of the values lit", v, 100*float64(lit)/float64(len(img)))
					}
				}
			}
			got := render(t, s.Gaussians, deg, cams)
			worst := math.Inf(1)
			for v := range cams {
				p, err := loss.PSNR(got[v], refs[deg][v])
				if err != nil {
					t.Fatal(err)
				}
				worst = min(worst, p)
			}
			t.Logf("%-20s SH degree %d, %d splats: worst view %.1f dB%s", tc.out, deg, s.Gaussians.Len(), worst, strings.Join(s.Warnings, "; "))
			if worst < tc.floor {
				t.Errorf("%s: %.1f dB, want ≥ %.0f", tc.out, worst, tc.floor)
			}
		})
	}
}

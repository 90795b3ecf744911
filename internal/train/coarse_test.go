package train

import (
	"context"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/io/dataset"
	"github.com/rlxsplat/rlxsplat/internal/io/imageio"
)

func TestCoarseFactor(t *testing.T) {
	tests := []struct {
		scale, until, step, want int
	}{
		{1, 15000, 1, 1},     // off
		{4, 0, 1, 1},         // until 0: off
		{4, 10000, 0, 4},     // the start
		{4, 10000, 1, 4},     // 3.9994
		{4, 10000, 1000, 3},  // 3.482
		{4, 10000, 3300, 3},  // 2.532
		{4, 10000, 3400, 2},  // 2.497
		{4, 10000, 7000, 2},  // 1.516
		{4, 10000, 7100, 1},  // 1.495
		{4, 10000, 10000, 1}, // full size from until on
		{4, 10000, 30000, 1},
		{8, 15000, 1, 8},
		{2, 15000, 6000, 2}, // 1.516
		{2, 15000, 6300, 1}, // 1.495
		{3, 100, 50, 2},     // 1.732
		{100, 1, 0, 100},    // a one-step schedule
		{100, 1, 1, 1},
	}
	for _, tc := range tests {
		o := Options{CoarseScale: tc.scale, CoarseUntil: tc.until}
		if got := o.coarseFactor(tc.step); got != tc.want {
			t.Errorf("coarseFactor(scale %d, until %d, step %d) = %d, want %d", tc.scale, tc.until, tc.step, got, tc.want)
		}
	}
}

// A scaled view is the photo box-filtered (for a factor dividing the size) or cropped to whole
// blocks (for one that does not), with its camera's intrinsics divided by the factor.
func TestScaleViews(t *testing.T) {
	const w, h = 5, 4
	rgb := make([]float32, w*h*3)
	alpha := make([]float32, w*h)
	for i := range alpha {
		alpha[i] = float32(i) / 20
		for c := 0; c < 3; c++ {
			rgb[i*3+c] = float32(i*3+c) / 60
		}
	}
	src := []dataset.View{{Name: "a", Image: &imageio.Image{W: w, H: h, RGB: rgb}, Alpha: alpha}}
	src[0].Camera.Width, src[0].Camera.Height = w, h
	src[0].Camera.Fx, src[0].Camera.Fy, src[0].Camera.Cx, src[0].Camera.Cy = 10, 12, 2.5, 2
	got, err := scaleViews(src, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	v := got[0]
	// ⌊5/2⌋ × ⌊4/2⌋; the camera scales with the image, as camera.Scaled does.
	if v.Image.W != 2 || v.Image.H != 2 || v.Camera.Width != 2 || v.Camera.Height != 2 {
		t.Fatalf("scaled to %d×%d (camera %d×%d), want 2×2", v.Image.W, v.Image.H, v.Camera.Width, v.Camera.Height)
	}
	if want := src[0].Camera.Scaled(2, 2); v.Camera.Fx != want.Fx || v.Camera.Fy != want.Fy || v.Camera.Cx != want.Cx || v.Camera.Cy != want.Cy {
		t.Errorf("camera %+v, want %+v", v.Camera, want)
	}
	if v.Image.Alpha != nil || len(v.Alpha) != 4 || len(v.Image.RGB) != 12 {
		t.Fatalf("scaled image keeps alpha %v, %d alpha values, %d colour values", v.Image.Alpha != nil, len(v.Alpha), len(v.Image.RGB))
	}
	if src[0].Image.W != w || len(src[0].Alpha) != w*h {
		t.Fatal("scaling changed the source view")
	}
	// Resize's area filter from 5 to 2 columns: output column 0 covers source columns [0, 2.5).
	want, err := imageio.Resize(&imageio.Image{W: w, H: h, RGB: rgb}, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.RGB {
		if v.Image.RGB[i] != want.RGB[i] {
			t.Fatalf("colour %d = %v, want %v", i, v.Image.RGB[i], want.RGB[i])
		}
	}
	// Rows [0, 2) of columns [0, 2.5): (0+1+0.5·2 + 5+6+0.5·7)/5 / 20.
	if a, want := v.Alpha[0], float32((0+1+1.0+5+6+3.5)/5)/20; abs32(a-want) > 1e-6 {
		t.Errorf("alpha[0] = %v, want %v", a, want)
	}
	if _, err := scaleViews(src, 9, 1); err != nil { // larger than the photo: 1×1
		t.Fatal(err)
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

// sizes records the image size of every step an engine runs.
type sizes struct {
	engine.Engine
	seen [][2]int
}

func (s *sizes) StepBatch(vs []*engine.View, o engine.StepOptions) (engine.StepResult, error) {
	for _, v := range vs {
		s.seen = append(s.seen, [2]int{v.Camera.Width, v.Camera.Height})
		if len(v.Target) != v.Camera.Width*v.Camera.Height*3 {
			panic("target and camera disagree")
		}
	}
	return s.Engine.StepBatch(vs, o)
}

// A coarse-to-fine run trains at the schedule's sizes and then at full size; the screen-size
// prune and everything else run as usual (the run ends with finite Gaussians).
func TestCoarseToFineRun(t *testing.T) {
	ds := smallDemo(t)
	opt := testOptions(t.TempDir())
	opt.CoarseScale, opt.CoarseUntil = 3, 40
	opt.RandomBackground = true
	tr := newTrainer(t, ds, opt)
	rec := &sizes{Engine: tr.eng}
	tr.eng = rec
	if err := tr.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	w, h := ds.Train[0].Image.W, ds.Train[0].Image.H
	for i, got := range rec.seen {
		s := i + 1
		f := opt.coarseFactor(s)
		if want := [2]int{w / f, h / f}; got != want {
			t.Fatalf("step %d ran at %v, want %v (factor %d)", s, got, want, f)
		}
	}
	if len(rec.seen) != opt.Iterations || rec.seen[0] != [2]int{w / 3, h / 3} || rec.seen[len(rec.seen)-1] != [2]int{w, h} {
		t.Fatalf("%d steps, first at %v, last at %v", len(rec.seen), rec.seen[0], rec.seen[len(rec.seen)-1])
	}
	if tr.coarse != nil {
		t.Error("the scaled views are still held after the schedule ended")
	}
	g, err := tr.eng.Gaussians()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range g.Means {
		if x != x {
			t.Fatal("NaN mean after a coarse-to-fine run")
		}
	}
}

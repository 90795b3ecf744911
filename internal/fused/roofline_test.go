package fused

import (
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/engine"
)

// TestMinimalCosts checks the traffic model on two tiny steps whose costs are worked out by
// hand below, one per render model, between them switching every option.
func TestMinimalCosts(t *testing.T) {
	type cost struct{ bytes, flops int64 }
	tests := []struct {
		name   string
		w      Workload
		passes int
		want   map[string]cost
	}{
		{
			// N 10, V 6, E 20; 20×12 px in 8-px tiles: 3×2 = 6 tiles, 240 px, 40 px a tile on
			// average, 800 pairs; tile ids below 6 take 3 bits, 1 pass; K = 1.
			name:   "ewa conic ssim deg0",
			w:      Workload{Gaussians: 10, Visible: 6, Entries: 20, Width: 20, Height: 12, TileSize: 8, ConicBin: true, SSIM: true},
			passes: 1,
			want: map[string]cost{
				// 4·(10·11 + 6·3 + 10 + 6·20); 10·18 + 6·(260 + 12+3+6).
				engine.StageProject: {1032, 1866},
				// 4·(10 + 6·10 + 4 passes·6·2·2 + 20·2); 20·56.
				engine.StageBin: {824, 1120},
				// 1 pass · 20 · 16 B + 4·7.
				engine.StageSort: {348, 0},
				// 4·(7 + 20 + 6·9) + 4·240·5 + 4·6 tile walks (lists of 20/6 entries: no
				// chunk boundary); 800·9.
				engine.StageRasterFwd: {5148, 7200},
				// 4·240·9; 240·(18 + 1224).
				engine.StageLoss: {8640, 298080},
				// 4·(7 + 20 + 6·9) + 4·(240·5 + 6·9) + 4·6.
				engine.StageRasterBwd: {5364, 7200},
				// 4·(10 + 6 + 6·(11+3+9) + 6·59 + 6); 6·(650 + 12+12+27).
				engine.StageProjectBwd: {2056, 4206},
				// 4·(10 + 6·59 + 10·59·6); 10·59·13.
				engine.StageAdam: {15616, 7670},
			},
		},
		{
			// The first step with its walk measured: the tiles read 4 of the 20 entries,
			// naming 3 splats, and the pixels evaluated 300 pairs.
			name: "ewa walked",
			w: Workload{Gaussians: 10, Visible: 6, Entries: 20, Width: 20, Height: 12, TileSize: 8, ConicBin: true, SSIM: true,
				Walk: Walk{Entries: 4, Pairs: 300, Splats: 3}},
			passes: 1,
			want: map[string]cost{
				engine.StageProject: {1032, 1866},
				engine.StageBin:     {824, 1120},
				engine.StageSort:    {348, 0},
				// 4·(7 + 4 + 3·9) + 4·240·5 + 4·6; 300·9.
				engine.StageRasterFwd: {4976, 2700},
				engine.StageLoss:      {8640, 298080},
				// 4·(7 + 4 + 3·9) + 4·(240·5 + 3·9) + 4·6.
				engine.StageRasterBwd:  {5084, 2700},
				engine.StageProjectBwd: {2056, 4206},
				engine.StageAdam:       {15616, 7670},
			},
		},
		{
			// N 10, V 6, E 4 (so at most 4 splats are rasterized); 16×16 px, one 16-px tile,
			// 1024 pairs; one tile, still 1 pass; K = 16.
			name: "ray box stats visible-only deg3",
			w: Workload{Gaussians: 10, Visible: 6, Entries: 4, Width: 16, Height: 16, TileSize: 16, SHDegree: 3,
				Ray: true, AccumulateStats: true, AdamVisibleOnly: true},
			passes: 1,
			want: map[string]cost{
				// 4·(110 + 6·48 + 10 + 6·29); 180 + 6·(300 + 12+48+96).
				engine.StageProject: {2328, 2916},
				// 4·(10 + 60 + 4·6·2·2 + 4·2); no tile tests.
				engine.StageBin: {696, 0},
				// 1 · 4 · 16 + 4·2.
				engine.StageSort: {72, 0},
				// 4·(2 + 4 + 4·16 + 256·3) + 4·256·5 + 4·1; 1024·29.
				engine.StageRasterFwd: {8476, 29696},
				// 4·256·9; 256·18.
				engine.StageLoss: {9216, 4608},
				// 3352 + 4·(256·5 + 4·16) + 4·1.
				engine.StageRasterBwd: {8732, 29696},
				// 4·(10 + 6 + 6·(11+48+16) + 6·59 + 6 + 6·7); 6·(750 + 12+192+432).
				engine.StageProjectBwd: {3472, 8316},
				// 4·(10 + 6·59 + 6·59·6); 6·59·13.
				engine.StageAdam: {9952, 4602},
			},
		},
		{
			// Lists longer than a chunk (64 entries): N 10, V 6, E 300 in one 16-px tile of
			// 16×16 px, box binning, no SSIM. Measured: the tile read 250 entries naming 6
			// splats, the pixels 30000 pairs, 200 of them walking past 400 chunk boundaries.
			name: "ewa walked chunks",
			w: Workload{Gaussians: 10, Visible: 6, Entries: 300, Width: 16, Height: 16, TileSize: 16,
				Walk: Walk{Entries: 250, Pairs: 30000, Splats: 6, Boundaries: 400, Spanning: 200}},
			passes: 1,
			want: map[string]cost{
				engine.StageProject: {1032, 1866},
				// 4·(10 + 60 + 4·6·2·2 + 300·2).
				engine.StageBin: {3064, 0},
				// 1 · 300 · 16 + 4·2.
				engine.StageSort: {4808, 0},
				// 4·(2 + 250 + 6·9) + 4·256·5 + 4·(1 + 4·400); 30000·9.
				engine.StageRasterFwd: {12748, 270000},
				// 4·256·9; 256·18.
				engine.StageLoss: {9216, 4608},
				// 4·(2 + 250 + 6·9) + 4·(256·5 + 6·9) + 4·(1 + 4·400 + 3·200).
				engine.StageRasterBwd:  {15364, 270000},
				engine.StageProjectBwd: {2056, 4206},
				engine.StageAdam:       {15616, 7670},
			},
		},
		{
			// The same step unmeasured: every pixel walks the whole list of 300 entries, past
			// ⌊299/64⌋ = 4 boundaries: 1024 in all, 256 pixels passing one; 76800 pairs.
			name:   "ewa chunks unmeasured",
			w:      Workload{Gaussians: 10, Visible: 6, Entries: 300, Width: 16, Height: 16, TileSize: 16},
			passes: 1,
			want: map[string]cost{
				engine.StageProject: {1032, 1866},
				engine.StageBin:     {3064, 0},
				engine.StageSort:    {4808, 0},
				// 4·(2 + 300 + 6·9) + 4·256·5 + 4·(1 + 4·1024); 76800·9.
				engine.StageRasterFwd: {22932, 691200},
				engine.StageLoss:      {9216, 4608},
				// 4·(2 + 300 + 6·9) + 4·(256·5 + 6·9) + 4·(1 + 4·1024 + 3·256).
				engine.StageRasterBwd:  {26220, 691200},
				engine.StageProjectBwd: {2056, 4206},
				engine.StageAdam:       {15616, 7670},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p := tt.w.SortPasses(); p != tt.passes {
				t.Errorf("sort passes %d, want %d", p, tt.passes)
			}
			got, err := MinimalCosts(tt.w)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(engine.Stages) {
				t.Fatalf("%d stages, want %d", len(got), len(engine.Stages))
			}
			for i, c := range got {
				if c.Stage != engine.Stages[i] {
					t.Errorf("stage %d is %q, want %q (engine.Stages order)", i, c.Stage, engine.Stages[i])
				}
				w := tt.want[c.Stage]
				if c.Bytes != w.bytes || c.Flops != w.flops {
					t.Errorf("%s: %d bytes, %d flops; want %d, %d", c.Stage, c.Bytes, c.Flops, w.bytes, w.flops)
				}
			}
		})
	}
}

func TestSortPassesBonsai(t *testing.T) {
	// bonsai's 799×532 views in 16-px tiles: 50×34 = 1700 tiles, ids up to 1699 in 11 bits.
	w := Workload{Width: 799, Height: 532, TileSize: 16}
	if w.Tiles() != 1700 || w.SortPasses() != 2 {
		t.Fatalf("%d tiles, %d passes; want 1700, 2", w.Tiles(), w.SortPasses())
	}
	for _, c := range []struct{ tiles, passes int }{{1, 1}, {256, 1}, {257, 2}, {65536, 2}, {65537, 3}} {
		if p := tileSortPasses(c.tiles); p != c.passes {
			t.Errorf("%d tiles: %d passes, want %d", c.tiles, p, c.passes)
		}
	}
}

func TestMinimalCostsRejects(t *testing.T) {
	ok := Workload{Gaussians: 10, Visible: 6, Entries: 20, Width: 20, Height: 12, TileSize: 8}
	for name, edit := range map[string]func(*Workload){
		"visible above N": func(w *Workload) { w.Visible = 11 },
		"no tile size":    func(w *Workload) { w.TileSize = 0 },
		"empty image":     func(w *Workload) { w.Height = 0 },
		"SH degree 4":     func(w *Workload) { w.SHDegree = 4 },
		"negative count":  func(w *Workload) { w.Entries = -1 },
		"walk past lists": func(w *Workload) { w.Walk = Walk{Entries: 21, Pairs: 21, Splats: 6} },
		"walk's splats":   func(w *Workload) { w.Walk = Walk{Entries: 4, Pairs: 4, Splats: 5} },
		"boundaries past the pairs": func(w *Workload) {
			w.Walk = Walk{Entries: 20, Pairs: 127, Splats: 6, Boundaries: 2, Spanning: 1}
		},
		"spanning without a boundary": func(w *Workload) { w.Walk = Walk{Entries: 20, Pairs: 100, Splats: 6, Spanning: 1} },
		"spanning past the pixels": func(w *Workload) {
			w.Walk = Walk{Entries: 20, Pairs: 64 * 300, Splats: 6, Boundaries: 300, Spanning: 241}
		},
	} {
		w := ok
		edit(&w)
		if _, err := MinimalCosts(w); err == nil {
			t.Errorf("%s: no error for %+v", name, w)
		}
	}
	if _, err := MinimalCosts(ok); err != nil {
		t.Fatal(err)
	}
}

func TestRoofline(t *testing.T) {
	ceil := Ceilings{CopyGBs: 1000, FP32GFlops: 10000}
	tests := []struct {
		name        string
		c           StageCost
		ms          float64
		gbs, gflops float64
		bound       string
	}{
		// 1 GB in 2 ms: 500 GB/s, half the copy roof.
		{"memory", StageCost{Bytes: 1e9, Flops: 1e9}, 2, 500, 500, BoundMemory},
		// 80 GFLOP in 10 ms: 8000 GFLOP/s, 0.8 of the FP32 roof; 0.1 GB/s.
		{"compute", StageCost{Bytes: 1e6, Flops: 8e10}, 10, 0.1, 8000, BoundCompute},
		// 0.2 GB and 2 GFLOP in 1 ms: 0.2 and 0.2 of the roofs.
		{"latency", StageCost{Bytes: 2e8, Flops: 2e9}, 1, 200, 2000, BoundLatency},
		// Exactly a quarter of the copy roof is bound by it.
		{"quarter", StageCost{Bytes: 25e7}, 1, 250, 0, BoundMemory},
		{"no time", StageCost{Bytes: 1e9}, 0, 0, 0, BoundUnmeasured},
		// A stage whose kernel runs in the stage before has no cost of its own.
		{"fused", StageCost{}, 0.001, 0, 0, BoundFused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Roofline(tt.c, tt.ms, ceil)
			if !near(r.GBs, tt.gbs) || !near(r.GFlops, tt.gflops) || r.Bound != tt.bound {
				t.Errorf("%.4g GB/s, %.4g GFLOP/s, %q; want %.4g, %.4g, %q", r.GBs, r.GFlops, r.Bound, tt.gbs, tt.gflops, tt.bound)
			}
			if tt.ms > 0 && (!near(r.MemoryFraction, tt.gbs/ceil.CopyGBs) || !near(r.ComputeFraction, tt.gflops/ceil.FP32GFlops)) {
				t.Errorf("fractions %.4g, %.4g", r.MemoryFraction, r.ComputeFraction)
			}
		})
	}
}

func near(a, b float64) bool { return a == b || (a-b)*(a-b) <= 1e-18*(a*a+b*b) }

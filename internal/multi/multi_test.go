package multi

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/check"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/fused"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/emu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/nccl"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// devices opens n devices: CUDA ordinals 0..n-1 when the machine has that many GPUs, else n
// host emulators when RLXSPLAT_FUSED_EMU=1 (emu reports true); otherwise the test is skipped
// with the reason.
func devices(t *testing.T, n int) ([]gpu.Device, bool) {
	t.Helper()
	var devs []gpu.Device
	t.Cleanup(func() {
		for _, d := range devs {
			d.Close()
		}
	})
	o, err := gpu.OptionsFromEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	var cudaErr error
	for k := 0; k < n; k++ {
		o.Ordinal = k
		d, err := gpu.OpenWith(gpu.KindCUDA, o)
		if err != nil {
			cudaErr = fmt.Errorf("CUDA device %d: %w", k, err)
			break
		}
		devs = append(devs, d)
	}
	if cudaErr == nil {
		return devs, false
	}
	for _, d := range devs {
		d.Close()
	}
	devs = nil
	if os.Getenv("RLXSPLAT_FUSED_EMU") != "1" {
		t.Skipf("%d GPUs wanted (%v); RLXSPLAT_FUSED_EMU=1 runs the test on host emulators", n, cudaErr)
	}
	h := sha256.Sum256([]byte(os.Getenv("USER")))
	cache := filepath.Join(os.TempDir(), "rlxsplat-emu-"+hex.EncodeToString(h[:4]))
	for k := 0; k < n; k++ {
		d, err := emu.New(emu.Config{CacheDir: cache})
		if err != nil {
			t.Skipf("no %d GPUs (%v) and no host emulator: %v", n, cudaErr, err)
		}
		devs = append(devs, d)
	}
	return devs, true
}

func testLR() engine.LR {
	return engine.LR{Means: 1e-3, LogScales: 5e-3, Quats: 1e-3, Opacity: 5e-2, SHDC: 2.5e-3, SHRest: 1.25e-4}
}

// TestDataParallelMatchesOneBatch trains two steps of a batch of views data-parallel over two
// ranks (the host reduction) and on one engine, with a densification edit between them: the
// ranks must hold the same bits as each other, the statistics the same counts, and the parameters match the one-engine batch up to
// the order of the gradient sums ((g1+g2)+(g3+g4) against ((g1+g2)+g3)+g4).
func TestDataParallelMatchesOneBatch(t *testing.T) {
	const ranks = 2
	devs, onEmu := devices(t, ranks)
	n, w, h := 3000, 128, 96
	if onEmu {
		n, w, h = 300, 48, 40
	}
	for _, views := range []int{4, 3} {
		t.Run(fmt.Sprintf("%d views", views), func(t *testing.T) {
			g, vs := fused.RandomBatch(uint64(views), n, w, h, views)
			set := engine.DefaultSettings()
			set.Workers = 2
			o := engine.StepOptions{SHDegree: 3, LR: testLR(), AccumulateStats: true}

			// A densification edit between the steps, the same on every rank.
			edit := fused.RandomEdit(rand.New(rand.NewPCG(3, uint64(views))), n)
			one, err := fused.New(devs[0], set, g)
			if err != nil {
				t.Fatal(err)
			}
			for s := 0; s < 2; s++ {
				if _, err := one.StepBatch(vs, o); err != nil {
					t.Fatal(err)
				}
				if s == 0 {
					if err := one.Apply(edit); err != nil {
						t.Fatal(err)
					}
				}
			}
			want, _ := one.Gaussians()
			wantSt, _ := one.Stats()
			one.Close()

			me, err := New(devs, NewHostReducer(ranks), set, g, false)
			if err != nil {
				t.Fatal(err)
			}
			defer me.Close()
			var res engine.StepResult
			for s := 0; s < 2; s++ {
				if res, err = me.StepBatch(vs, o); err != nil {
					t.Fatal(err)
				}
				if s == 0 {
					if err := me.Apply(edit); err != nil {
						t.Fatal(err)
					}
				}
			}
			if res.Visible == 0 || math.IsNaN(res.Loss) {
				t.Fatalf("step result %+v", res)
			}
			got, _ := me.Gaussians()
			for k := 1; k < ranks; k++ {
				other, err := me.ranks[k].Gaussians()
				if err != nil {
					t.Fatal(err)
				}
				if d := differ(got, other); d > 0 {
					t.Fatalf("rank %d differs from rank 0 in %d values: the ranks left lockstep", k, d)
				}
			}
			st, _ := me.Stats()
			bad := 0
			for i := range st.Count {
				if st.Count[i] != wantSt.Count[i] {
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("statistic counts differ for %d of %d splats", bad, len(st.Count))
			}
			if rel := check.RelErr(st.GradAccum, wantSt.GradAccum); rel > 1e-5 {
				t.Errorf("statistic sums: relative L2 %.3g", rel)
			}
			a, b := packed(got), packed(want)
			rel := check.RelErr(a, b)
			t.Logf("parameters after two data-parallel steps against one batch: relative L2 %.3g, max abs %.3g", rel, check.MaxAbs(a, b))
			if rel > 1e-5 {
				t.Errorf("parameters: relative L2 %.3g from the one-engine batch", rel)
			}
		})
	}
}

// One rank with NCCL (a one-rank communicator: the all-reduce copies) gives the one-engine batch
// to the bit: the data-parallel path adds nothing to a step but the reduction.
func TestOneRankNCCLIsTheBatch(t *testing.T) {
	devs, onEmu := devices(t, 1)
	if onEmu {
		t.Skip("NCCL needs a CUDA device")
	}
	lib, err := nccl.Open(os.Getenv)
	if err != nil {
		t.Skipf("no NCCL: %v", err)
	}
	red, err := NewNCCLReducer(lib, []int{0})
	if err != nil {
		t.Fatal(err)
	}
	g, vs := fused.RandomBatch(9, 3000, 128, 96, 3)
	set := engine.DefaultSettings()
	o := engine.StepOptions{SHDegree: 3, LR: testLR(), AccumulateStats: true}
	one, err := fused.New(devs[0], set, g)
	if err != nil {
		t.Fatal(err)
	}
	wantRes, err := one.StepBatch(vs, o)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := one.Gaussians()
	one.Close()
	me, err := New(devs, red, set, g, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { errors.Join(me.Close(), red.Close()) }()
	res, err := me.StepBatch(vs, o)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := me.Gaussians()
	// The rasterizer's atomics sum in no fixed order: compare against the spread of two
	// one-engine runs rather than demand equal bits.
	rel := check.RelErr(packed(got), packed(want))
	t.Logf("one rank through NCCL against one batch: relative L2 %.3g, loss %.9g against %.9g", rel, res.Loss, wantRes.Loss)
	if rel > 1e-5 {
		t.Errorf("parameters: relative L2 %.3g", rel)
	}
}

func TestShares(t *testing.T) {
	for _, c := range []struct {
		b, ranks int
		want     [][2]int
	}{
		{4, 2, [][2]int{{0, 2}, {2, 4}}},
		{5, 2, [][2]int{{0, 3}, {3, 5}}},
		{3, 3, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
		{8, 3, [][2]int{{0, 3}, {3, 6}, {6, 8}}},
	} {
		got := Shares(c.b, c.ranks)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Shares(%d, %d) = %v, want %v", c.b, c.ranks, got, c.want)
		}
	}
}

func differ(a, b *splat.Gaussians) int {
	x, y := packed(a), packed(b)
	d := 0
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			d++
		}
	}
	return d
}

// A data-parallel run saved after a step and restored into fresh ranks goes on as the run that
// was not interrupted: State merges the ranks' statistics and SetState gives them back once.
func TestDataParallelStateRoundTrip(t *testing.T) {
	const ranks = 2
	devs, onEmu := devices(t, ranks)
	n, w, h := 2000, 96, 72
	if onEmu {
		n, w, h = 200, 40, 32
	}
	g, vs := fused.RandomBatch(11, n, w, h, 4)
	set := engine.DefaultSettings()
	o := engine.StepOptions{SHDegree: 1, LR: testLR(), AccumulateStats: true}
	a, err := New(devs, NewHostReducer(ranks), set, g, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.StepBatch(vs, o); err != nil {
		t.Fatal(err)
	}
	st, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.StepBatch(vs, o); err != nil {
		t.Fatal(err)
	}
	want, _ := a.Gaussians()
	wantSt, _ := a.Stats()
	a.Close()

	b, err := New(devs, NewHostReducer(ranks), set, g, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SetState(st); err != nil {
		t.Fatal(err)
	}
	if _, err := b.StepBatch(vs, o); err != nil {
		t.Fatal(err)
	}
	got, _ := b.Gaussians()
	gotSt, _ := b.Stats()
	if d := differ(got, want); d > 0 && !onEmu {
		// The GPU's atomics sum in no fixed order: allow their rounding.
		if rel := check.RelErr(packed(got), packed(want)); rel > 1e-5 {
			t.Errorf("parameters after the restored step: relative L2 %.3g", rel)
		}
	} else if d > 0 {
		t.Errorf("parameters after the restored step differ in %d values", d)
	}
	for i := range gotSt.Count {
		if gotSt.Count[i] != wantSt.Count[i] {
			t.Fatalf("statistics of splat %d: count %d after the restore, %d without", i, gotSt.Count[i], wantSt.Count[i])
		}
	}
}

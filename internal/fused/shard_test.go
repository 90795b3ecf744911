package fused

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/camera"
	"github.com/rlxsplat/rlxsplat/internal/engine"
	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/prep"
	"github.com/rlxsplat/rlxsplat/internal/splat"
)

// shardCase is a scene split between two owners and drawn by a renderer from their records.
type shardCase struct {
	name  string
	model prep.Model
	bin   engine.BinMode
	tile  int
	sh    int
	split float64 // owner 0's share of the splats: ids [0, split·n)
	view  int     // RandomBatch's view; -1: a camera looking away from the scene
	// ties gives owner 1's first splats owner 0's first splats' means (and so their depths):
	// equal depths across the owners, which the depth sort orders by id.
	ties bool
	// hide1 puts owner 1's splats behind the camera: an owner with no record to send.
	hide1 bool
	// ownerRenders draws the records on owner 0's engine, as a rank that both owns and renders
	// does: its own splats must render as before afterwards.
	ownerRenders bool
	seed         uint64
}

var shardCases = []shardCase{
	{name: "ewa/tile16/half/ties", model: prep.EWA, tile: 16, sh: 3, split: 0.5, ties: true, seed: 30},
	{name: "ewa/tile8/uneven/view1/ties/owner-renders", model: prep.EWA, tile: 8, sh: 1, split: 0.2, view: 1, ties: true, ownerRenders: true, seed: 31},
	{name: "ewa/radius-aabb/tile16/uneven/ties", model: prep.EWA, bin: engine.BinGPURadiusAABB, tile: 16, sh: 2, split: 0.7, ties: true, seed: 32},
	{name: "ewa/tile16/owner1-empty", model: prep.EWA, tile: 16, sh: 1, split: 0.6, hide1: true, seed: 33},
	{name: "ewa/tile16/nothing-visible", model: prep.EWA, tile: 16, sh: 0, split: 0.5, view: -1, seed: 34},
	{name: "ray/tile16/half/ties/owner-renders", model: prep.Ray, tile: 16, sh: 3, split: 0.5, ties: true, ownerRenders: true, seed: 35},
	{name: "ray/tile8/uneven/view1/ties", model: prep.Ray, tile: 8, sh: 1, split: 0.3, view: 1, ties: true, seed: 36},
	{name: "ray/tile8/owner1-empty", model: prep.Ray, tile: 8, sh: 2, split: 0.5, hide1: true, seed: 37},
}

// tieSplats is how many of owner 1's first splats take owner 0's first splats' means.
const tieSplats = 24

// TestShardedRender splits a scene between two owner engines, packs each one's visible splats
// (PackVisible), concatenates the records in rank order (what the exchange delivers), draws
// them on a third engine (RenderRecords) and checks, against one engine holding the whole
// scene: the image, bit for bit; the records (the whole engine's visible splats, in id order);
// every projected value the renderer unpacked; and the tile lists, entry for entry. The same
// records with the owners swapped must not give the image where the owners' splats tie in
// depth: the depth sort breaks ties by local id, which is then no longer global-id order.
func TestShardedRender(t *testing.T) {
	dev, emu := testDevice(t)
	n, w, h := 4000, 160, 120
	if emu {
		n, w, h = 2000, 96, 72
	}
	for _, c := range shardCases {
		t.Run(c.name, func(t *testing.T) { checkShardedRender(t, dev, c, n, w, h) })
	}
}

func checkShardedRender(t *testing.T, dev gpu.Device, c shardCase, n, w, h int) {
	g, vs := RandomBatch(c.seed, n, w, h, 2)
	split := int(c.split * float64(n))
	if c.ties {
		for k := range tieSplats {
			copy(g.Means[(split+k)*3:(split+k)*3+3], g.Means[k*3:k*3+3])
		}
	}
	if c.hide1 {
		for i := split; i < n; i++ {
			g.Means[i*3+2] = -6 // behind every camera of the batch, which look along +z
		}
	}
	var cam camera.Camera
	if c.view >= 0 {
		cam = vs[c.view].Camera
	} else {
		R, T := camera.LookAt([3]float64{0, 0, -20}, [3]float64{0, 0, -40}, [3]float64{0, 1, 0})
		cam = vs[0].Camera
		cam.R, cam.T = R, T
	}
	set := engine.DefaultSettings()
	set.Render, set.TileSize = c.model, c.tile
	if c.bin != "" {
		set.BinMode = c.bin
	}
	bg := [3]float32{0.1, 0.4, 0.7}

	whole := newEngine(t, dev, set, g)
	want, err := whole.Render(&cam, c.sh, bg)
	if err != nil {
		t.Fatal(err)
	}
	validWhole := dl[uint32](t, whole, whole.valid, n)
	var visible []uint32
	for i, v := range validWhole {
		if v != 0 {
			visible = append(visible, uint32(i))
		}
	}

	words := RecordWords(c.model)
	var parts [2][]uint32
	var owners [2]*Engine
	for o, r := range [2][2]int{{0, split}, {split, n}} {
		owners[o] = newEngine(t, dev, set, g.Range(r[0], r[1]))
		buf, count, err := owners[o].PackVisible(&cam, c.sh, uint32(r[0]))
		if err != nil {
			t.Fatal(err)
		}
		parts[o] = dl[uint32](t, owners[o], buf, count*words)
		t.Logf("owner %d: splats [%d, %d), %d records", o, r[0], r[1], count)
	}
	var ownImage []float32
	if c.ownerRenders {
		if ownImage, err = owners[0].Render(&cam, c.sh, bg); err != nil {
			t.Fatal(err)
		}
	}
	if c.hide1 && len(parts[1]) != 0 {
		t.Fatalf("owner 1 sent %d words with every splat behind the camera", len(parts[1]))
	}
	if c.view < 0 && len(visible) != 0 {
		t.Fatalf("%d splats visible looking away from the scene", len(visible))
	}

	renderer := owners[0]
	if !c.ownerRenders {
		renderer = newEngine(t, dev, set, splat.New(1))
	}
	draw := func(recs []uint32) []float32 {
		t.Helper()
		buf, err := dev.Alloc(max(len(recs)*4, 16))
		if err != nil {
			t.Fatal(err)
		}
		defer dev.Free(buf)
		if err := gpu.UploadU32(dev, buf, recs); err != nil {
			t.Fatal(err)
		}
		img, err := renderer.RenderRecords(&cam, buf, len(recs)/words, bg)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	recs := slices.Concat(parts[0], parts[1])
	got := draw(recs)
	if i := firstBitDiff(got, want); i >= 0 {
		t.Errorf("image value %d = %v, one engine %v (%d records)", i, got[i], want[i], len(recs)/words)
	}

	count := len(recs) / words
	gids := make([]uint32, count)
	for k := range gids {
		gids[k] = recs[k*words]
	}
	if len(gids) != len(visible) {
		t.Fatalf("%d records, %d splats visible to one engine", len(gids), len(visible))
	}
	for k := range gids {
		if gids[k] != visible[k] {
			t.Fatalf("record %d carries id %d, one engine's visible splat %d is %d", k, gids[k], k, visible[k])
		}
	}
	for _, f := range projectedFields(c.model) {
		wv := dl[uint32](t, whole, f.buf(whole), n*f.width)
		rv := dl[uint32](t, renderer, f.buf(renderer), count*f.width)
		for k, id := range gids {
			a, b := rv[k*f.width:(k+1)*f.width], wv[int(id)*f.width:(int(id)+1)*f.width]
			if !slices.Equal(a, b) {
				t.Errorf("%s of record %d (splat %d): words %x, one engine %x", f.name, k, id, a, b)
				break
			}
		}
	}
	if k := slices.Index(dl[uint32](t, renderer, renderer.valid, count), 0); k >= 0 {
		t.Errorf("unpacked splat %d is not valid", k)
	}
	if err := sameLists(t, whole, renderer, gids); err != nil {
		t.Error(err)
	}

	if c.ties && len(parts[0]) > 0 && len(parts[1]) > 0 {
		swapped := draw(slices.Concat(parts[1], parts[0]))
		if firstBitDiff(swapped, want) < 0 {
			t.Errorf("the owners' records swapped give the same image: the case has no tie that decides the order")
		}
	}
	if c.ownerRenders {
		again, err := owners[0].Render(&cam, c.sh, bg)
		if err != nil {
			t.Fatal(err)
		}
		if i := firstBitDiff(again, ownImage); i >= 0 {
			t.Errorf("owner 0's own image after rendering records: value %d = %v, before %v", i, again[i], ownImage[i])
		}
		if owners[0].capV <= owners[0].capN {
			t.Errorf("owner 0 rendered %d records within its own capacity %d: the case does not grow the view buffers alone", count, owners[0].capN)
		}
	}
}

// newEngine opens an engine for the test on dev, closed at its end.
func newEngine(t *testing.T, dev gpu.Device, set engine.Settings, g *splat.Gaussians) *Engine {
	t.Helper()
	e, err := newOnDevice(dev, set, g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// firstBitDiff is the first index where a and b differ in bits (or length), or −1.
func firstBitDiff(a, b []float32) int {
	for i := range min(len(a), len(b)) {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// projectedField is one per-splat array of the projection that a record carries.
type projectedField struct {
	name  string
	width int
	buf   func(e *Engine) gpu.Buffer
}

func projectedFields(m prep.Model) []projectedField {
	f := []projectedField{
		{"depth", 1, func(e *Engine) gpu.Buffer { return e.depth }},
		{"opacity", 1, func(e *Engine) gpu.Buffer { return e.opacity }},
		{"color", 3, func(e *Engine) gpu.Buffer { return e.color }},
		{"boundCenter", 2, func(e *Engine) gpu.Buffer { return e.boundCenter }},
		{"boundQ", 3, func(e *Engine) gpu.Buffer { return e.boundQ }},
		{"rect", 4, func(e *Engine) gpu.Buffer { return e.rect }},
		{"radius", 1, func(e *Engine) gpu.Buffer { return e.radius }},
	}
	if m == prep.Ray {
		return append(f,
			projectedField{"rayU", 3, func(e *Engine) gpu.Buffer { return e.rayU }},
			projectedField{"rayA", 9, func(e *Engine) gpu.Buffer { return e.rayA }},
			projectedField{"rayHalf", 3, func(e *Engine) gpu.Buffer { return e.rayHalf }})
	}
	return append(f,
		projectedField{"mean2d", 2, func(e *Engine) gpu.Buffer { return e.mean2d }},
		projectedField{"conic", 3, func(e *Engine) gpu.Buffer { return e.conic }})
}

// sameLists compares the last forward's sorted tile lists of the whole engine and of the
// renderer, whose local id k is global id gids[k].
func sameLists(t *testing.T, whole, renderer *Engine, gids []uint32) error {
	t.Helper()
	ts := whole.set.TileSize
	tiles := ((whole.lastW + ts - 1) / ts) * ((whole.lastH + ts - 1) / ts)
	wo := dl[uint32](t, whole, whole.tileOffsets, tiles+1)
	ro := dl[uint32](t, renderer, renderer.tileOffsets, tiles+1)
	for j := range wo {
		if wo[j] != ro[j] {
			return fmt.Errorf("tile %d's list starts at entry %d, one engine's at %d", j, ro[j], wo[j])
		}
	}
	entries := int(wo[tiles])
	if !slices.Equal(dl[uint32](t, renderer, renderer.sortedKeys, entries), dl[uint32](t, whole, whole.sortedKeys, entries)) {
		return fmt.Errorf("the tile keys differ from one engine's")
	}
	longest := uint32(0)
	for j := range tiles {
		longest = max(longest, wo[j+1]-wo[j])
	}
	ro0, err := renderer.readout()
	if err != nil {
		return err
	}
	t.Logf("%d list entries, the longest list %d, %d splats binned a warp each", entries, longest, ro0[roBig])
	wi := dl[uint32](t, whole, whole.sortedIDs, entries)
	ri := dl[uint32](t, renderer, renderer.sortedIDs, entries)
	for j, k := range ri {
		if int(k) >= len(gids) || gids[k] != wi[j] {
			return fmt.Errorf("list entry %d names record %d, one engine splat %d", j, k, wi[j])
		}
	}
	return nil
}

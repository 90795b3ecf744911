// Package spec declares, once, the interface between the fused engine's host code and its
// kernels: the structs passed by value, the layout constants both sides use, and every entry
// point's parameters (name, kind, element type), launch bounds and block-shared arrays.
// internal/fused/abi/gen writes from it the Go launch code (internal/fused/abi) and the C side
// (shaders/abi.h and each unit's shaders/entries/UNIT.h); nothing else may restate it.
//
// Non-goals: no code; kernel bodies stay in shaders/*.cu.
package spec

// Scalar types of struct fields, scalar parameters and buffer elements.
const (
	U32 = "u32"
	I32 = "i32"
	F32 = "f32"
	U16 = "u16" // block-shared arrays only (16-bit counts that keep a kernel within Metal's 32 KB)
	U64 = "u64"
	// No float64: Apple GPUs have none, and every kernel must compile for Metal.
)

// Field is one struct member. Type is a scalar type or the name of an earlier Struct.
type Field struct {
	Name string // the C name; the Go name is it with the first letter upper-cased
	Type string
	Len  int // > 0: an array of Len elements
}

// Struct is a struct passed to kernels by value, laid out by C rules (each scalar aligned to
// its size, the struct to its largest member).
type Struct struct {
	Name   string
	Doc    string
	Fields []Field
}

// Const is a constant both sides use. C is the macro name, Go the Go constant's.
type Const struct {
	C, Go    string
	Value    int64
	Unsigned bool // the C literal carries a u suffix
	Doc      string
}

// Kind is how a parameter reaches the kernel.
type Kind int

const (
	ByValue Kind = iota // a Struct, copied into the launch (Metal: constant reference)
	Scalar              // a 32-bit scalar by value
	In                  // a device buffer the kernel only reads
	Out                 // a device buffer the kernel writes (and may read)
)

// Param is one kernel parameter. Type is the Struct name (ByValue), the scalar type (Scalar)
// or the element type (In, Out).
type Param struct {
	Name string
	Kind Kind
	Type string
}

// Shared is a block-shared (threadgroup) variable the entry wrapper declares and passes to the
// body: Metal allows threadgroup variables only at kernel scope.
type Shared struct {
	Name string
	// Type is a scalar type or one of SharedTypes (a C type the unit declares before including
	// its entries).
	Type string
	// Len > 0: an array of Len elements, passed to the body as an SPTR pointer. 0: one
	// variable, passed as an SPTR reference.
	Len int
}

// SharedType is a C type of block-shared variables that is not a scalar: a struct or a
// template instance such as "Staged<false, CHUNK>", declared by the unit's headers.
type SharedType struct {
	C     string
	Bytes int // sizeof: the generated wrapper asserts it, so budgets from the declaration are the compiler's
}

// Kernel is one entry point.
type Kernel struct {
	Name string
	// Args names the body's argument struct (NAME_args in C, Go's CamelArgs) when entry points
	// of one unit share it; empty means the kernel's own name.
	Args   string
	Params []Param
	// Block, when non-zero, is the only block size (threads) the body is written for.
	Block int
	// MaxThreads and MinBlocks are CUDA's launch bounds (Metal: max threads per threadgroup);
	// zero: none declared. They change register allocation, so they are only set where
	// measurements showed the trade pays.
	MaxThreads, MinBlocks int
	Shared                []Shared
}

// Unit is one kernel file, shaders/NAME.cu.
type Unit struct {
	Name string
	// Set groups units loaded together: "Engine" (every step) or "Ceiling" (bench only).
	Set     string
	Kernels []Kernel
	// Every unit gets generated entry wrappers (shaders/entries/NAME.h) that call its
	// NAME_body functions.
}

func val(name, typ string) Param { return Param{name, ByValue, typ} }
func sc(name, typ string) Param  { return Param{name, Scalar, typ} }
func in(name, typ string) Param  { return Param{name, In, typ} }
func out(name, typ string) Param { return Param{name, Out, typ} }

// Structs are the by-value structs, in dependency order.
var Structs = []Struct{
	{Name: "Cam", Doc: "one view's camera and projection settings (prep.NewCam's float32 values)", Fields: []Field{
		{"R", F32, 9}, // world-to-camera rotation, row-major
		{"T", F32, 3},
		{"fx", F32, 0}, {"fy", F32, 0}, {"cx", F32, 0}, {"cy", F32, 0},
		{"center", F32, 3},                                                                 // camera centre in world coordinates
		{"limXNeg", F32, 0}, {"limXPos", F32, 0}, {"limYNeg", F32, 0}, {"limYPos", F32, 0}, // EWA Jacobian clamp
		{"nearZ", F32, 0},       // cull z below this
		{"radiusScale", F32, 0}, // ray model: sigma = radiusScale * exp(log_scale)
		{"alphaMin", F32, 0},    // float32(prep.AlphaMin)
		{"W", I32, 0}, {"H", I32, 0}, {"tileSize", I32, 0}, {"tilesX", I32, 0}, {"tilesY", I32, 0},
		{"model", I32, 0}, {"shDegree", I32, 0}, {"antialiased", I32, 0}, {"n", I32, 0},
	}},
	{Name: "Raster", Doc: "the rasterizers' launch parameters (model is unread: the host picks the entry point)", Fields: []Field{
		{"W", I32, 0}, {"H", I32, 0}, {"tileSize", I32, 0}, {"tilesX", I32, 0},
		{"model", I32, 0}, {"maxSteps", I32, 0}, {"pad0", I32, 0}, {"pad1", I32, 0},
		{"bg", F32, 3},
		{"alphaMin", F32, 0}, // float32(prep.AlphaMin)
	}},
	{Name: "LossP", Doc: "the loss kernels' coefficients and SSIM window, as internal/loss computes them", Fields: []Field{
		{"W", I32, 0}, {"H", I32, 0}, {"kind", I32, 0}, {"ssim", I32, 0},
		{"pointCoef", F32, 0}, {"ssimCoef", F32, 0},
		{"kern", F32, 11},
	}},
	{Name: "AdamGroup", Doc: "one parameter group's Adam step: lr/(1−β1ᵗ), 1/sqrt(1−β2ᵗ), the gradient clip (0 = off)", Fields: []Field{
		{"stepSize", F32, 0}, {"invSqrtBc2", F32, 0}, {"clip", F32, 0}, {"pad", F32, 0},
	}},
	{Name: "AdamP", Doc: "one Adam step: the six groups, then β1, β2, 1−β1, 1−β2, ε, the splat count, the visible-only groups (bit g for group g), the MCMC regularisers' coefficients (engine.RegCoeffs; 0 = off) and whether they reach the splats in view only (engine.MCMCStep.RegInView), the factor adam_step takes the summed gradients by (1/B for a batch of B views), and how many of a splat's 48 SH floats Adam updates (3(d+1)² for the highest degree d any step has used: the others have zero gradients and zero moments, so their update would leave them as they are)", Fields: []Field{
		{"g", "AdamGroup", 6},
		{"b1", F32, 0}, {"b2", F32, 0}, {"c1", F32, 0}, {"c2", F32, 0}, {"eps", F32, 0},
		{"n", U32, 0}, {"visibleOnly", U32, 0}, {"co", F32, 0}, {"cs", F32, 0}, {"regInView", U32, 0},
		{"gradScale", F32, 0}, {"shLive", U32, 0},
	}},
	{Name: "RayCam", Doc: "the pinhole camera pixel_rays builds each pixel's ray from, every value a float32 pair hi + lo (prep.RayCam)", Fields: []Field{
		{"R", F32, 9}, {"RLo", F32, 9}, // world-to-camera rotation, row-major
		{"f", F32, 4}, {"fLo", F32, 4}, // fx, fy, cx, cy
		{"W", I32, 0}, {"H", I32, 0},
	}},
}

// Consts are the layout constants both sides use.
var Consts = []Const{
	{"PARAM_FLOATS", "ParamFloats", 59, true, "floats per splat in the packed parameter layout (common.h's OFF_*)"},
	{"RO_VISIBLE", "RoVisible", 0, false, "readout word: splats valid this view (project)"},
	{"RO_ENTRIES", "RoEntries", 1, false, "readout word: tile-list entries the splats need (bin)"},
	{"RO_ABORT", "RoAbort", 2, false, "readout word: non-zero when the entries exceed the list capacity; later stages do nothing"},
	{"RO_NONFINITE", "RoNonFinite", 3, false, "readout word: gradient or update elements Adam dropped"},
	{"RO_L1", "RoL1", 4, false, "readout words 4, 5: Σ|x−y| as a two-float sum (float32 hi, lo)"},
	{"RO_SQ", "RoSq", 6, false, "readout words 6, 7: Σ(x−y)² as a two-float sum (float32 hi, lo)"},
	{"RO_SSIM", "RoSSIM", 8, false, "readout words 8, 9: Σ SSIM map as a two-float sum (float32 hi, lo)"},
	{"RO_BIG", "RoBig", 10, false, "readout word: splats bin_count queued for a warp each"},
	{"RO_BIGBITS", "RoBigBits", 11, false, "readout word: words of hit bits the queued splats asked for"},
	{"RO_SEGS", "RoSegs", 12, false, "readout word: segments after the first that raster_fwd's first pass queued for its second"},
	{"RO_PEER", "RoPeer", 13, false, "readout word of a data-parallel step's last view: non-zero when some rank's views overflowed (the ranks' RO_ABORT, max-reduced before the update); Adam and the noise do nothing"},
	{"RO_WORDS", "RoWords", 16, false, "words of the readout block"},
	{"SCAN_BLOCK", "ScanBlock", 1024, true, "elements one scan_blocks block covers (256 threads × 4)"},
	{"SORT_THREADS", "SortThreads", 256, true, "threads of a sort block"},
	{"SORT_ROUNDS", "SortRounds", 12, true, "rounds of SORT_THREADS elements a sort block ranks"},
	{"SORT_CHUNK", "SortChunk", 3072, true, "elements one sort block owns (SORT_THREADS × SORT_ROUNDS)"},
	{"CHUNK", "ChunkEntries", chunk, true, "tile-list entries one raster_bwd block walks (raster.h: chunks and their states)"},
	{"SEGMENT", "SegmentEntries", 512, true, "tile-list entries one raster_fwd block walks (raster.h: segments; internal/raster's SegmentEntries)"},
	{"LOSS_TILE", "LossTile", lossTile, true, "output pixels per edge of loss.cu's square tiles, one block of 256 threads each"},
	{"SH_BLOCK", "ShBlock", shBlock, false, "project_bwd's most threads a block: the rows of SH coefficients it stages"},
	// A record (shard.cu) is one visible splat as an owner sends it to a renderer: 32-bit words,
	// floats as their bits and the rect's ints as words. Both models share words 0–15; EWA then
	// has mean2d and conic, the ray model u, A and the half-plane.
	{"REC_ID", "RecID", 0, true, "record word: the splat's global id"},
	{"REC_DEPTH", "RecDepth", 1, true, "record word: depth (f32 bits)"},
	{"REC_OPACITY", "RecOpacity", 2, true, "record word: effective opacity (f32 bits)"},
	{"REC_COLOR", "RecColor", 3, true, "record words 3–5: SH colour (f32 bits)"},
	{"REC_BOUND_CENTER", "RecBoundCenter", 6, true, "record words 6, 7: the footprint's centre (f32 bits)"},
	{"REC_BOUND_Q", "RecBoundQ", 8, true, "record words 8–10: the footprint's quadratic form (f32 bits)"},
	{"REC_RECT", "RecRect", 11, true, "record words 11–14: the tile box x0, y0, x1, y1 (i32 as words)"},
	{"REC_RADIUS", "RecRadius", 15, true, "record word: the radius in pixels (f32 bits)"},
	{"REC_MEAN2D", "RecMean2D", 16, true, "EWA record words 16, 17: the projected centre (f32 bits)"},
	{"REC_CONIC", "RecConic", 18, true, "EWA record words 18–20: the conic (f32 bits)"},
	{"REC_EWA_WORDS", "RecEWAWords", 21, true, "words of an EWA record"},
	{"REC_RAY_U", "RecRayU", 16, true, "ray record words 16–18: u (f32 bits)"},
	{"REC_RAY_A", "RecRayA", 19, true, "ray record words 19–27: A, row-major (f32 bits)"},
	{"REC_RAY_HALF", "RecRayHalf", 28, true, "ray record words 28–30: the half-plane of rays whose closest approach is behind the camera (f32 bits)"},
	{"REC_RAY_WORDS", "RecRayWords", 31, true, "words of a ray record"},
	// A gradient record (shard.cu) is the loss gradient of one record's prepared data, as the
	// renderer sends it back to the record's owner in the records' order (no id travels back):
	// floats, in raster_bwd's value order (grad_ptr). Both models share words 0–3; EWA then
	// has mean2d, conic and, with absGrad, mean2d's absolute sums, the ray model u and A.
	{"GREC_COLOR", "GradRecColor", 0, true, "gradient record words 0–2: dL/d colour"},
	{"GREC_OPACITY", "GradRecOpacity", 3, true, "gradient record word: dL/d effective opacity"},
	{"GREC_MEAN2D", "GradRecMean2D", 4, true, "EWA gradient record words 4, 5: dL/d projected centre"},
	{"GREC_CONIC", "GradRecConic", 6, true, "EWA gradient record words 6–8: dL/d conic"},
	{"GREC_EWA_WORDS", "GradRecEWAWords", 9, true, "words of an EWA gradient record"},
	{"GREC_MEAN2D_ABS", "GradRecMean2DAbs", 9, true, "EWA gradient record words 9, 10 with absGrad: the pixels' contributions to dL/d projected centre summed by magnitude (AbsGS's statistic)"},
	{"GREC_EWA_ABS_WORDS", "GradRecEWAAbsWords", 11, true, "words of an EWA gradient record with absGrad"},
	{"GREC_RAY_U", "GradRecRayU", 4, true, "ray gradient record words 4–6: dL/du"},
	{"GREC_RAY_A", "GradRecRayA", 7, true, "ray gradient record words 7–15: dL/dA, row-major"},
	{"GREC_RAY_WORDS", "GradRecRayWords", 16, true, "words of a ray gradient record"},
}

// Sizes the shared variables below are declared with.
const (
	chunk    = 64
	lossTile = 16
	shBlock  = 128
	// lossPlane and lossHPX are loss.cu's PLANE and HPX: floats per staged plane of a tile's
	// window ((LOSS_TILE + 10)² + 1) and per plane of its horizontal pass (LOSS_TILE·(LOSS_TILE + 10)).
	lossPlane = (lossTile+10)*(lossTile+10) + 1
	lossHPX   = lossTile * (lossTile + 10)
	shSRow    = 49 // project_bwd.cu's SH_SROW: floats per staged row of SH coefficients
)

// Units are the kernel files and their entry points.
var Units = []Unit{
	{Name: "project", Set: "Engine", Kernels: []Kernel{
		{Name: "project", Params: []Param{val("cam", "Cam"), in("params", F32), out("valid", U32), out("depth", F32),
			out("opacity", F32), out("color", F32), out("mean2d", F32), out("conic", F32), out("rayU", F32), out("rayA", F32),
			out("boundCenter", F32), out("boundQ", F32), out("rect", I32), out("radius", F32), out("readout", U32),
			out("rayHalf", F32)}},
		{Name: "pixel_rays", Params: []Param{val("cam", "RayCam"), out("rays", F32)}},
	}},
	{Name: "bin", Set: "Engine", Kernels: []Kernel{
		{Name: "bin_count", Params: []Param{val("cam", "Cam"), in("valid", U32), in("boundCenter", F32), in("boundQ", F32),
			in("rect", I32), in("rayHalf", F32), sc("conic", U32), sc("bigArea", I32), out("counts", U32), out("readout", U32),
			out("bigList", U32), out("hitMask", U32), out("flags", U32), out("bigOff", U32), sc("bitsCap", U32)}},
		{Name: "bin_count_big", Params: []Param{val("cam", "Cam"), in("boundCenter", F32), in("boundQ", F32), in("rect", I32),
			in("rayHalf", F32), sc("conic", U32), in("readout", U32), in("bigList", U32), out("counts", U32), in("bigOff", U32), out("bigBits", U32)}},
		{Name: "bin_compact", Params: []Param{in("valid", U32), in("depth", F32), in("flags", U32), sc("n", U32),
			out("dkeys", U32), out("order", U32), out("vis", U32)}},
		{Name: "bin_rank", Params: []Param{in("counts", U32), in("order", U32), in("flags", U32), sc("n", U32),
			out("ranked", U32), out("rankOf", U32)}},
		{Name: "bin_total", Params: []Param{in("offsets", U32), sc("n", U32), sc("cap", U32), in("prev", U32), out("readout", U32)}},
		{Name: "bin_emit", Params: []Param{val("cam", "Cam"), in("valid", U32), in("rect", I32), in("hitMask", U32),
			in("ranked", U32), in("rankOf", U32), sc("bigArea", I32), in("readout", U32), out("keys", U32), out("ids", U32)}},
		{Name: "bin_emit_big", Params: []Param{val("cam", "Cam"), in("boundCenter", F32), in("boundQ", F32), in("rect", I32),
			in("rayHalf", F32), sc("conic", U32), in("ranked", U32), in("rankOf", U32), in("readout", U32), in("bigList", U32),
			out("keys", U32), out("ids", U32), in("bigOff", U32), in("bigBits", U32)}},
	}},
	{Name: "scan", Set: "Engine", Kernels: []Kernel{
		{Name: "scan_blocks", Params: []Param{in("in", U32), out("out", U32), sc("n", U32), out("blockSums", U32)},
			Block: 256, Shared: []Shared{{"warpTot", U32, 8}}},
		{Name: "scan_add", Params: []Param{out("out", U32), sc("n", U32), in("blockOffsets", U32)}},
		{Name: "scan_add_sums", Params: []Param{out("out", U32), sc("n", U32), in("blockSums", U32)},
			Block: 256, Shared: []Shared{{"warpTot", U32, 8}}},
	}},
	{Name: "sort", Set: "Engine", Kernels: []Kernel{
		{Name: "sort_hist", Params: []Param{in("keys", U32), in("readout", U32), in("count", U32), sc("shift", U32), sc("nb", U32),
			out("hist", U32)}, Block: 256, Shared: []Shared{{"h", U32, 256}}},
		{Name: "sort_scatter", Params: []Param{in("keysIn", U32), in("valsIn", U32), out("keysOut", U32), out("valsOut", U32),
			in("readout", U32), in("count", U32), sc("shift", U32), sc("nb", U32), in("offsets", U32)}, Block: 256,
			Shared: []Shared{{"skeys", U32, 3072}, {"svals", U32, 3072}, {"wcnt", U16, 8 * 256}, {"gdelta", U32, 256}, {"wsum", U32, 8}}},
	}},
	{Name: "ranges", Set: "Engine", Kernels: []Kernel{
		{Name: "tile_ranges", Params: []Param{in("keys", U32), in("readout", U32), sc("numTiles", U32), out("offsets", U32)}},
		{Name: "tile_order", Params: []Param{in("offsets", U32), in("readout", U32), sc("numTiles", U32), out("order", U32)},
			Block: 1024, Shared: []Shared{{"classes", U32, 128}}},
	}},
	{Name: "raster_fwd", Set: "Engine", Kernels: []Kernel{
		{Name: "raster_fwd_ewa", Args: "raster_fwd", Params: rasterFwdParams,
			Shared: []Shared{{"s", "Staged<false>", 0}, {"alive", U32, 0}, {"longest", U32, 0}}},
		{Name: "raster_fwd_ray", Args: "raster_fwd", Params: rasterFwdParams,
			Shared: []Shared{{"s", "Staged<true>", 0}, {"alive", U32, 0}, {"longest", U32, 0}}},
		{Name: "raster_fwd_join", Params: []Param{val("rp", "Raster"), in("readout", U32), in("tileOffsets", U32),
			in("segState", F32), in("segCount", U32), in("segCont", U32), out("image", F32), out("finalT", F32),
			out("count", U32), out("tileWalk", U32), out("chunkState", F32)}, Shared: []Shared{{"longest", U32, 0}}},
	}},
	{Name: "loss", Set: "Engine", Kernels: []Kernel{
		// loss_map's bounds: 3 blocks an SM rather than 2 (96 registers): 0.056 → 0.050 ms at
		// 799×532 on the H200.
		{Name: "loss_map", Params: []Param{val("lp", "LossP"), in("readout", U32), in("img", F32), in("target", F32),
			out("grad", F32), out("dmap", F32), out("partAbs", F32), out("partSq", F32), out("partSsim", F32)},
			Block: 256, MaxThreads: 256, MinBlocks: 3, Shared: []Shared{{"sIn", F32, 6 * lossPlane}, {"sH", F32, 5 * lossHPX}}},
		{Name: "loss_grad", Params: []Param{val("lp", "LossP"), in("readout", U32), in("dmap", F32), in("img", F32),
			in("target", F32), out("grad", F32)},
			Block: 256, Shared: []Shared{{"sD", F32, 9 * lossPlane}, {"sHd", F32, 3 * lossHPX}}},
		{Name: "loss_finish", Params: []Param{in("partAbs", F32), in("partSq", F32), in("partSsim", F32), sc("blocks", U32),
			out("readout", U32)}, Block: 256, Shared: []Shared{{"s", F32, 1536}}},
	}},
	{Name: "raster_bwd", Set: "Engine", Kernels: []Kernel{
		{Name: "raster_bwd_chunks", Params: []Param{in("readout", U32), in("tileWalk", U32), sc("numTiles", U32),
			out("chunkStart", U32), out("chunkTile", U32)}, Block: 256, Shared: []Shared{{"warpTot", U32, 8}}},
		// raster_bwd_ewa's bounds: two pixels a thread, so a 32-pixel tile's block has 512
		// threads; at 2 such blocks an SM, 64 registers a thread (8 blocks of a 16-pixel tile's
		// 128 threads).
		{Name: "raster_bwd_ewa", Args: "raster_bwd", Params: rasterBwdParams, MaxThreads: 512, MinBlocks: 2,
			Shared: rasterBwdShared("Staged<false, CHUNK>")},
		// raster_bwd_ray's bounds: two pixels a thread, as EWA, so a 32-pixel tile's block has
		// 512 threads; at 2 such blocks an SM, 64 registers a thread (56 bytes spilled; 8 blocks
		// of a 16-pixel tile's 128 threads). H100, 1M splats on bonsai: 2.05 ms at tile size 16
		// and 2.29 at 32, against 2.23 and 2.84 bounded to one block an SM (89 registers), and
		// 2.42 and 2.84 at one pixel a thread (55 registers, unbounded).
		{Name: "raster_bwd_ray", Args: "raster_bwd", Params: rasterBwdParams, MaxThreads: 512, MinBlocks: 2,
			Shared: rasterBwdShared("Staged<true, CHUNK>")},
	}},
	{Name: "project_bwd", Set: "Engine", Kernels: []Kernel{
		// project_bwd's bounds: 6 blocks of 128 an SM rather than the 4 that 128 registers a
		// thread allow: on the H200 at 1M splats, 0.48 → 0.43 ms, although the cap spills (bench
		// --kernels: 80 registers, 160 bytes of local memory); 5 blocks gave 0.43 ms too. The
		// block is at most SH_BLOCK threads: the rows of sSh.
		{Name: "project_bwd", Params: []Param{val("cam", "Cam"), in("readout", U32), in("params", F32), in("valid", U32),
			in("radius", F32), in("gColor", F32), in("gOpacity", F32), in("gMean2d", F32), in("gConic", F32),
			in("gRayU", F32), in("gRayA", F32), sc("absGrad", U32), in("gMean2dAbs", F32), out("grads", F32),
			out("grad2d", F32), sc("accumulate", U32),
			out("statAccum", F32), out("statCount", U32), out("statMaxRadius", F32), sc("later", U32), out("seen", U32),
			in("vis", U32)},
			MaxThreads: shBlock, MinBlocks: 6, Shared: []Shared{{"sSh", F32, shBlock * shSRow}, {"sAdd", U32, shBlock}}},
	}},
	{Name: "adam", Set: "Engine", Kernels: []Kernel{
		{Name: "adam_step", Params: []Param{val("ap", "AdamP"), out("readout", U32), out("params", F32), in("grads", F32),
			out("m", F32), out("v", F32), in("valid", U32)}, Block: 256, Shared: []Shared{{"gtab", F32, 6 * 3}}},
		{Name: "opacity_reset", Params: []Param{out("params", F32), sc("n", U32), sc("maxLogit", F32)}},
	}},
	{Name: "edit", Set: "Engine", Kernels: []Kernel{
		{Name: "gather_rows", Params: []Param{in("src", F32), out("dst", F32), in("srcIdx", I32), sc("oldN", U32), sc("newN", U32),
			sc("fresh", U32), sc("zeroFresh", U32)}},
		{Name: "scatter_shapes", Params: []Param{out("params", F32), sc("n", U32), in("rows", I32), in("logits", F32),
			in("logScales", F32), sc("count", U32)}},
		{Name: "zero_rows", Params: []Param{out("buf", F32), sc("n", U32), in("rows", I32), sc("count", U32)}},
		{Name: "put_rows", Params: []Param{in("src", F32), out("dst", F32), in("rows", I32), sc("n", U32), sc("count", U32)}},
	}},
	{Name: "mcmc", Set: "Engine", Kernels: []Kernel{
		{Name: "mcmc_noise", Params: []Param{out("params", F32), sc("n", U32), sc("scale", F32), sc("seedLo", U32),
			sc("seedHi", U32), sc("step", U32), sc("base", U32), in("readout", U32)}},
	}},
	{Name: "shard", Set: "Engine", Kernels: []Kernel{
		{Name: "pack_flags", Params: []Param{in("valid", U32), sc("n", U32), out("flags", U32)}},
		{Name: "pack_visible", Params: []Param{in("valid", U32), in("flags", U32), sc("n", U32), sc("base", U32), sc("ray", U32),
			in("depth", F32), in("opacity", F32), in("color", F32), in("mean2d", F32), in("conic", F32), in("rayU", F32),
			in("rayA", F32), in("rayHalf", F32), in("boundCenter", F32), in("boundQ", F32), in("rect", I32), in("radius", F32),
			out("recs", U32)}},
		{Name: "unpack", Params: []Param{in("recs", U32), sc("count", U32), sc("ray", U32), out("valid", U32), out("depth", F32),
			out("opacity", F32), out("color", F32), out("mean2d", F32), out("conic", F32), out("rayU", F32), out("rayA", F32),
			out("rayHalf", F32), out("boundCenter", F32), out("boundQ", F32), out("rect", I32), out("radius", F32),
			out("readout", U32)}},
		{Name: "pack_grads", Params: []Param{sc("count", U32), sc("ray", U32), sc("absGrad", U32), in("gColor", F32),
			in("gOpacity", F32), in("gMean2d", F32), in("gConic", F32), in("gRayU", F32), in("gRayA", F32),
			in("gMean2dAbs", F32), out("grecs", F32)}},
		{Name: "scatter_grads", Params: []Param{in("grecs", F32), in("valid", U32), in("flags", U32), sc("n", U32),
			sc("count", U32), sc("ray", U32), sc("absGrad", U32), out("gColor", F32), out("gOpacity", F32),
			out("gMean2d", F32), out("gConic", F32), out("gRayU", F32), out("gRayA", F32), out("gMean2dAbs", F32),
			out("vis", U32), out("readout", U32)}},
	}},
	{Name: "ceiling", Set: "Ceiling", Kernels: []Kernel{
		{Name: "ceiling_copy", Params: []Param{in("src", F32), out("dst", F32), sc("n", U32)}},
		{Name: "ceiling_fma", Params: []Param{sc("iters", U32), sc("x", F32), sc("y", F32), out("out", F32)}},
	}},
}

var rasterFwdParams = []Param{val("rp", "Raster"), out("readout", U32), sc("pass", U32), in("tileOrder", U32), in("tileOffsets", U32),
	in("ids", U32), in("opacity", F32), in("color", F32), in("mean2d", F32), in("conic", F32), in("rayU", F32), in("rayA", F32),
	in("rays", F32), out("image", F32), out("finalT", F32), out("count", U32), out("tileWalk", U32), out("chunkState", F32),
	out("segState", F32), out("segCount", U32), out("segCont", U32), out("segItems", U32)}

var rasterBwdParams = []Param{val("rp", "Raster"), in("readout", U32), sc("numTiles", U32), in("tileOffsets", U32),
	in("ids", U32), in("opacity", F32), in("color", F32), in("mean2d", F32), in("conic", F32), in("rayU", F32),
	in("rayA", F32), in("rays", F32), in("finalT", F32), in("count", U32), in("image", F32), in("tileWalk", U32),
	in("chunkState", F32), in("chunkStart", U32), in("chunkTile", U32), in("dImage", F32), out("gColor", F32),
	out("gOpacity", F32), out("gMean2d", F32), out("gConic", F32), out("gRayU", F32), out("gRayA", F32),
	sc("absGrad", U32), out("gMean2dAbs", F32)}

// rasterBwdShared is what a raster_bwd block stages: one chunk's splats (s, a Staged of the
// model's packets), their ids, and their gradient sums (16 values a splat at most).
func rasterBwdShared(staged string) []Shared {
	return []Shared{{"s", staged, 0}, {"sId", U32, chunk}, {"sGrad", F32, chunk * 16}}
}

// SharedTypes are the non-scalar types of block-shared variables: raster.h's Staged<RAY, N>,
// N splats of 3 (EWA) or 5 (ray) 16-byte packets, N = BATCH (256) by default.
var SharedTypes = []SharedType{
	{"Staged<false>", 256 * 3 * 16},
	{"Staged<true>", 256 * 5 * 16},
	{"Staged<false, CHUNK>", chunk * 3 * 16},
	{"Staged<true, CHUNK>", chunk * 5 * 16},
}

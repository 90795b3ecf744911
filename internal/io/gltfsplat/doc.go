// Package gltfsplat writes and reads Gaussian-splat scenes as binary glTF
// (.glb) with the Khronos KHR_gaussian_splatting extension, which glTF
// viewers and engines (Cesium, Babylon.js, three.js loaders) are adopting.
//
// Format. The file is one GLB container: a JSON chunk and a BIN chunk that
// holds buffer 0. The scene has one node with one mesh whose single
// primitive has mode POINTS and these attributes, one element per splat,
// each in its own tightly packed buffer view:
//
//	POSITION                                  VEC3 float, with min/max
//	COLOR_0                                   VEC4 float: linear(0.5 + SHC0·DC), opacity
//	KHR_gaussian_splatting:SCALE              VEC3 float, linear standard deviations (exp of the log scales)
//	KHR_gaussian_splatting:ROTATION           VEC4 float, unit quaternion (x, y, z, w)
//	KHR_gaussian_splatting:OPACITY            SCALAR float, sigmoid of the logit, in [0, 1]
//	KHR_gaussian_splatting:SH_DEGREE_ℓ_COEF_n VEC3 float (r, g, b), ℓ = 0..degree, n = 0..2ℓ
//
// This follows the ratified extension text (KhronosGroup/glTF,
// extensions/2.0/Khronos/KHR_gaussian_splatting): scales are linear and not
// negative (an early draft stored logs; a reader that takes logs for linear
// draws every splat the size of the scene), rotations unit quaternions in
// glTF order, opacity linear in [0, 1]. The primitive carries the
// extension object {"kernel": "ellipse",
// "colorSpace": "srgb_rec709_display", "projection": "perspective",
// "sortingMethod": "cameraDistance"}: kernel and colorSpace are required,
// the other two optional with those defaults, written anyway. The 3DGS
// kernel trains on sRGB photographs. The extension is listed in
// extensionsUsed and not in extensionsRequired, so a viewer that does not
// know it still shows the primitive as a coloured point cloud (POSITION +
// COLOR_0), the fallback the extension is designed around. Every accessor
// written is float. Read also takes the quantised component types the
// extension allows: rotation as normalised signed byte or short, scale as
// unsigned byte or short (plain or normalised), opacity as normalised
// unsigned byte or short.
//
// The SH coefficients keep the 3DGS (INRIA) basis and order, which is the
// one the extension specifies (real SH with the Condon–Shortley phase,
// m = −ℓ..ℓ within a degree), so they are stored as trained, apart from
// the sign changes of the axis conversion below. COLOR_0 is the
// extension's fallback colour, SHC0·DC plus the 0.5 offset of the 3DGS
// forward pass, clamped to [0, 1], then decoded from sRGB to linear,
// because core glTF defines COLOR_0 as linear (the extension's note on
// the fallback asks for exactly this for srgb_rec709_display).
//
// Coordinates. The scene is RDF (x right, y down, z forward: COLMAP and
// the INRIA PLY). glTF is right-handed with +Y up, +Z forward and −X right
// (LUF). The two differ by a half turn about z, F = diag(−1, −1, 1), which
// Write applies to the data rather than to the node transform: positions
// become (−x, −y, z), quaternions (w,x,y,z) become (w, −x, −y, z) (F·R·F,
// R's axis turned by the half turn) and the SH coefficients whose basis
// function is odd in x and y together (odd order m) are negated (see
// shSign). Scales are unchanged. Keeping the node transform the identity
// means a renderer need not carry a node rotation into the SH view
// direction, which the extension does not spell out. Read applies the same
// map back, since it is its own inverse.
//
// Round trip. Positions and SH coefficients come back exactly, log scales
// within float32 rounding of exp and log; a linear scale of 0 from another
// writer is log scale −Inf, clamped to a finite bound and reported in
// Info.Warning (internal/io/finite);
// quaternions come back normalised (Write normalises them, as the
// extension requires unit quaternions); opacities come back through
// float32 sigmoid and logit, within 1e−6 in opacity, and 0 and 1 are
// pulled in so the logit stays finite.
//
// Non-goals: quantised accessors (written or read, beyond the float,
// normalised byte and short types the extension allows for rotation,
// scale and opacity), sparse accessors, external or data-URI buffers,
// non-GLB (.gltf JSON) files, node transforms (Read refuses them rather
// than ignore them), more than one splat primitive, files whose
// extensionsRequired is not empty (KHR_spz_compression, meshopt), kernels
// other than ellipse, SH degree 4, and the Mip-Splatting antialiasing flag
// (the extension has no field for it).
package gltfsplat

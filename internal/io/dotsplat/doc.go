// Package dotsplat writes and reads the ".splat" format of antimatter15's
// WebGL viewer, which most web splat viewers also load.
//
// A .splat file has no header: it is N records of 32 bytes, little-endian,
// one per splat: position (3 × float32), scale (3 × float32, linear: the
// exp of the log scale), colour RGBA (4 × u8: the degree-0 colour
// 0.5 + SHC0·dc and the opacity sigmoid(logit), each times 255) and
// rotation (4 × u8: the unit quaternion w, x, y, z, each as q·128 + 128).
// Writers put the records in descending order of importance, the product
// of the three scales and the opacity, so a viewer that streams the file
// draws the splats that matter first; Write does too (ImportanceOrder).
//
// Positions are kept in the scene's axes (the INRIA PLY's RDF), as the
// viewers that read .splat expect.
//
// Non-goals: view-dependent colour (the format has none: SH above DC is
// dropped, and Read returns degree 0) and any header or extension.
package dotsplat

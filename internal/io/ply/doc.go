// Package ply reads and writes Gaussian-splat scenes in the PLY layout of the
// original 3DGS code (INRIA), and reads plain coloured point clouds.
//
// The splat layout is the one design.md §3 fixes: vertex properties
// x y z nx ny nz f_dc_0..2 f_rest_0..M−1 opacity scale_0..2 rot_0..3, with
// f_rest channel-major (index = channel·(K−1) + coefficient−1, K = 1, 4, 9 or
// 16 coefficients per channel for SH degree 0..3), opacity as a logit, scales
// as logs and rot as w,x,y,z. Read converts it to splat.Gaussians (whose SH
// is coefficient-major) and Write converts back, so the rest of the program
// never sees the file's channel-major order.
//
// The reader parses the whole PLY header (every scalar type and its sized
// alias, list properties, comments, obj_info, any number of other elements
// before or after the vertex element) and reads binary little-endian, binary
// big-endian and ASCII bodies. Properties may come in any order. Every error
// names the file and where the problem is: the header line, the byte offset
// (binary) or the line (ASCII), the element index and the property. When
// the input's size is known (files, bytes.Reader), counts that the rest of
// the input cannot hold are refused before anything is allocated for them;
// otherwise memory grows only with the records actually read.
//
// Values other tools write as ±Inf where they saturate (logit opacity, log
// scales) are clamped to finite bounds (internal/io/finite) and reported in
// one warning with their count; NaN stays an error naming the vertex, the
// property and the byte offset.
//
// The compressed PLY of SuperSplat/PlayCanvas (element chunk, packed_*
// properties, an optional element sh) is recognised by its header and
// decoded; see compressed.go for its layout.
//
// Non-goals: writing anything but the INRIA layout in binary little-endian
// (the compressed PLY is read only); meshes (faces and other elements are parsed only to be
// skipped); keeping normals or unknown properties (they are listed in
// Info.Extra and dropped).
package ply

// Package nerf reads NeRF-style camera files: the NeRF-synthetic
// transforms_{train,test,val}.json (camera_angle_x, file paths without
// extension) and nerfstudio's transforms.json (fl_x fl_y cx cy w h, optional
// OpenCV or fisheye distortion, per-frame intrinsics, applied_transform,
// ply_file_path), and mixtures of the two.
//
// Frames keep their camera-to-world matrices exactly as the file gives them
// (OpenGL axes: x right, y up, z back); ToCamera converts one frame to
// rlxsplat's world-to-camera camera in OpenCV axes (design.md §3). This is
// the only place that conversion happens.
//
// Non-goals: loading images (internal/io/dataset does), re-centring,
// re-orienting or re-scaling the scene the way nerfstudio's or instant-ngp's
// data parsers do (aabb_scale, scale, offset and orientation_override are
// ignored), masks, depth maps, and equirectangular cameras.
package nerf

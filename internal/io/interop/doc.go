// Package interop holds no code, only tests: rlxsplat's splat files checked
// against tools nobody here wrote, PlayCanvas' splat-transform (PLY,
// compressed PLY, SPZ, .splat, .glb both ways) and Khronos' glTF validator.
//
// The tools come from npm into .tools/npm at the repository root
// (.ci/run installs them; `npm install --prefix .tools/npm
// @playcanvas/splat-transform gltf-validator` by hand). Without node or
// the packages the tests skip, saying which is missing; CI has both.
//
// What is checked:
//   - our PLY, SPZ, .splat and .glb, converted by splat-transform to PLY and
//     read back, equal what rlxsplat reads from the same file, field by field
//     (the table is logged; go test -v shows it);
//   - splat-transform's outputs (PLY, compressed PLY, SPZ, .splat, .glb) of
//     a real scene, read by rlxsplat, render like the scene itself (PSNR
//     between the renders, per format, logged and bounded);
//   - the validator finds no error in our .glb except the ones it raises for
//     the extension's own attribute names, which it does not know.
package interop

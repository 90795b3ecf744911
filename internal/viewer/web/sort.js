// Depth sort off the main thread. The page sends the positions once per scene, then the
// camera's depth row (z = r·p + t of the world-to-camera transform) whenever the view moves;
// the worker answers with the indices of the splats in front of the near plane, farthest
// first (back to front, for "over" blending), by a two-pass 16-bit radix sort of the depths'
// float bits, which order like the depths themselves for positive floats. rlxsplat's rasterizer
// blends front to back with equal depths in splat order, so here (back to front) equal depths
// go in reverse splat order, and the depths are rounded to float32 at every operation as its
// projection computes them: coplanar splats (a flat floor seen head on) then overlap alike.
"use strict";
let pos = null;
let n = 0;
let keys = null, idx = null, keys2 = null, idx2 = null;
const counts = new Uint32Array(65536);
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function ensure(m) {
  if (!keys || keys.length < m) {
    keys = new Uint32Array(m); idx = new Uint32Array(m);
    keys2 = new Uint32Array(m); idx2 = new Uint32Array(m);
  }
}

function pass(srcK, srcI, dstK, dstI, m, shift) {
  counts.fill(0);
  for (let i = 0; i < m; i++) counts[(srcK[i] >>> shift) & 0xffff]++;
  let sum = 0;
  for (let b = 0; b < 65536; b++) { const c = counts[b]; counts[b] = sum; sum += c; }
  for (let i = 0; i < m; i++) {
    const k = srcK[i];
    const d = counts[(k >>> shift) & 0xffff]++;
    dstK[d] = k; dstI[d] = srcI[i];
  }
}

onmessage = (e) => {
  const msg = e.data;
  if (msg.positions) {
    pos = msg.positions; n = pos.length / 3;
    ensure(n);
    return;
  }
  if (!msg.depthRow || !pos) return;
  const fr = Math.fround;
  const [a, b, c, t] = msg.depthRow.map(fr);
  const near = msg.near;
  let m = 0;
  for (let i = n - 1; i >= 0; i--) {
    const z = fr(fr(fr(fr(a * pos[3 * i]) + fr(b * pos[3 * i + 1])) + fr(c * pos[3 * i + 2])) + t);
    if (z >= near) {
      f32[0] = z;
      keys[m] = ~u32[0] >>> 0; // farthest first
      idx[m] = i;
      m++;
    }
  }
  pass(keys, idx, keys2, idx2, m, 0);
  pass(keys2, idx2, keys, idx, m, 16);
  const order = idx.slice(0, m);
  postMessage({ order, id: msg.id }, [order.buffer]);
};

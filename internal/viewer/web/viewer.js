// rlxsplat's splat viewer: WebGL2, one instanced quad per splat, depth-sorted back to front in a
// worker (sort.js) and blended with premultiplied "over". Each splat's footprint is the EWA
// projection of its 3D Gaussian (with the 0.3 px² dilation and the frustum clamp of
// internal/prep), its colour the real SH basis of internal/splat up to degree 3 evaluated for the
// direction from the camera centre to the mean (rgb = max(0, 0.5 + Σ SH·c)), and its alpha
// min(0.99, o·exp(power)), dropped below 1/255: the rules of rlxsplat's own rasterizer, so the
// page shows what training sees. Cameras use rlxsplat's convention: world-to-camera R, T with
// x right, y down, z forward, pixel centres at i+0.5.
"use strict";

const TEXW = 4096;           // data texture width (a multiple of the 8 texels per splat)
const NEAR = 0.01;           // the default model.near
const ALPHA_MIN = 1 / 255;

const $ = (id) => document.getElementById(id);
const canvas = $("view");
const gl = canvas.getContext("webgl2", { antialias: false, alpha: false, preserveDrawingBuffer: false });

const state = {
  info: null, n: 0, deg: 0, positions: null, version: -1,
  bg: [0, 0, 0], fovY: 50, mode: "orbit",
  // The camera: orbit parameters around target in the frame (e1, e2, up), or an exact view.
  up: [0, -1, 0], e1: [1, 0, 0], e2: [0, 0, 1],
  target: [0, 0, 0], dist: 5, yaw: 0, pitch: 0,
  exact: null,          // {R: [9], C: [3], k: [fx,fy,cx,cy], w, h} while snapped to a camera
  fixedSize: null,      // [w, h] when the page was told its canvas size (tests, benchmarks)
  order: null, orderCount: 0, sortBusy: false, sortDirty: true, sortId: 0, drawnId: 0,
  frames: [], waiters: [], keys: new Set(), paused: false,
};

// ---------- small vector helpers ----------
const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
const add = (a, b) => [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
const scale = (a, s) => [a[0] * s, a[1] * s, a[2] * s];
const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
const norm = (a) => { const l = Math.hypot(a[0], a[1], a[2]) || 1; return [a[0] / l, a[1] / l, a[2] / l]; };

// ---------- float → half ----------
const hf32 = new Float32Array(1), hu32 = new Uint32Array(hf32.buffer);
function toHalf(v) {
  hf32[0] = v;
  const x = hu32[0];
  const sign = (x >>> 16) & 0x8000;
  const e = ((x >>> 23) & 0xff) - 127 + 15;
  let m = x & 0x7fffff;
  if (e >= 31) return sign | 0x7bff; // clamp to the largest half
  if (e <= 0) {
    if (e < -10) return sign;
    m = (m | 0x800000) >>> (1 - e);
    return sign | ((m + 0x1000) >>> 13);
  }
  return (sign | (e << 10) | (m >>> 13)) + ((m >>> 12) & 1);
}
const pack2 = (a, b) => (toHalf(a) | (toHalf(b) << 16)) >>> 0;

// ---------- scene decoding (the layout of internal/viewer/encode.go) ----------
function decodeScene(buf) {
  const dv = new DataView(buf);
  const magic = String.fromCharCode(dv.getUint8(0), dv.getUint8(1), dv.getUint8(2), dv.getUint8(3));
  if (magic !== "RLXV" || dv.getUint32(4, true) !== 1) throw new Error("not an rlxsplat scene");
  const n = dv.getUint32(8, true), deg = dv.getUint32(12, true);
  const lo = [0, 1, 2].map((a) => dv.getFloat32(16 + 4 * a, true));
  const hi = [0, 1, 2].map((a) => dv.getFloat32(28 + 4 * a, true));
  const slo = dv.getFloat32(40, true), shi = dv.getFloat32(44, true), bound = dv.getFloat32(48, true);
  const k = (deg + 1) * (deg + 1) - 1;
  const u8 = new Uint8Array(buf);
  const i8 = new Int8Array(buf);
  const oPos = 64, oScl = oPos + 9 * n, oRot = oScl + 6 * n, oOpa = oRot + 4 * n, oCol = oOpa + n, oRest = oCol + 3 * n;
  const positions = new Float32Array(3 * n);
  const rows = Math.max(1, Math.ceil((n * 8) / TEXW));
  const tex = new Uint32Array(TEXW * rows * 4);
  const texF = new Float32Array(tex.buffer);
  const sh = new Float32Array(48);
  for (let i = 0; i < n; i++) {
    const b = 32 * i; // 8 texels × 4 words
    for (let a = 0; a < 3; a++) {
      const p = oPos + 9 * i + 3 * a;
      const v = u8[p] | (u8[p + 1] << 8) | (u8[p + 2] << 16);
      const x = lo[a] + (hi[a] - lo[a]) * (v / 16777215);
      positions[3 * i + a] = x;
      texF[b + a] = x;
    }
    const opa = Math.min(Math.max(u8[oOpa + i] / 255, 0.25 / 255), 1 - 0.25 / 255);
    texF[b + 3] = opa;
    const ls = [0, 1, 2].map((a) => slo + (shi - slo) * (dv.getUint16(oScl + 6 * i + 2 * a, true) / 65535));
    const q = [0, 1, 2, 3].map((c) => i8[oRot + 4 * i + c] / 127);
    tex[b + 4] = pack2(ls[0], ls[1]);
    tex[b + 5] = pack2(ls[2], q[0]);
    tex[b + 6] = pack2(q[1], q[2]);
    tex[b + 7] = pack2(q[3], 0);
    for (let c = 0; c < 3; c++) sh[c] = (u8[oCol + 3 * i + c] / 255) * 2 - 0.5; // 0.5 + SHC0·dc
    sh.fill(0, 3);
    for (let j = 0; j < 3 * k; j++) sh[3 + j] = (i8[oRest + 3 * k * i + j] / 127) * bound;
    for (let w = 0; w < 24; w++) tex[b + 8 + w] = pack2(sh[2 * w], sh[2 * w + 1]);
  }
  return { n, deg, positions, tex, rows };
}

// ---------- GL ----------
const VS = `#version 300 es
precision highp float; precision highp int; precision highp usampler2D;
uniform highp usampler2D u_data;
uniform vec3 u_R0, u_R1, u_R2, u_T, u_C;
uniform vec4 u_K;        // fx, fy, cx, cy (pixels)
uniform vec4 u_lim;      // x/z limits −, +, y/z limits −, +
uniform vec2 u_size;
uniform int u_deg;
uniform float u_near;
in vec2 a_corner;
in uint a_index;
out vec3 v_color;
out float v_opac;
out vec3 v_conic;
out vec2 v_d;
const float C1 = 0.4886025119029199;
const float C2[5] = float[5](1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396);
const float C3[7] = float[7](-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658, 1.445305721320277, -0.5900435899266435);
ivec2 at(uint k) { uint t = a_index * 8u + k; return ivec2(int(t % ${TEXW}u), int(t / ${TEXW}u)); }
void cull() { gl_Position = vec4(0.0, 0.0, 2.0, 1.0); }
void main() {
  uvec4 t0 = texelFetch(u_data, at(0u), 0);
  vec3 mean = uintBitsToFloat(t0.xyz);
  float opac = uintBitsToFloat(t0.w);
  vec3 p = vec3(dot(u_R0, mean), dot(u_R1, mean), dot(u_R2, mean)) + u_T;
  if (p.z < u_near || opac <= ${ALPHA_MIN}) { cull(); return; }
  uvec4 t1 = texelFetch(u_data, at(1u), 0);
  vec2 h0 = unpackHalf2x16(t1.x), h1 = unpackHalf2x16(t1.y), h2 = unpackHalf2x16(t1.z), h3 = unpackHalf2x16(t1.w);
  vec3 s = exp(vec3(h0.x, h0.y, h1.x));
  vec4 q = vec4(h1.y, h2.x, h2.y, h3.x);
  float ql = length(q);
  if (!(ql > 0.0)) { cull(); return; }
  q /= ql;
  float w = q.x, x = q.y, y = q.z, z = q.w;
  // GLSL matrices are column-major: mat3(column0, column1, column2).
  mat3 Rq = mat3(1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z), 2.0 * (x * z - w * y),
                 2.0 * (x * y - w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z + w * x),
                 2.0 * (x * z + w * y), 2.0 * (y * z - w * x), 1.0 - 2.0 * (x * x + y * y));
  mat3 M = Rq * mat3(s.x, 0.0, 0.0, 0.0, s.y, 0.0, 0.0, 0.0, s.z);
  mat3 W = transpose(mat3(u_R0, u_R1, u_R2));
  mat3 Sc = W * (M * transpose(M)) * transpose(W);
  float tx = clamp(p.x / p.z, -u_lim.x, u_lim.y) * p.z;
  float ty = clamp(p.y / p.z, -u_lim.z, u_lim.w) * p.z;
  vec3 j0 = vec3(u_K.x / p.z, 0.0, -u_K.x * tx / (p.z * p.z));
  vec3 j1 = vec3(0.0, u_K.y / p.z, -u_K.y * ty / (p.z * p.z));
  vec3 sj0 = Sc * j0, sj1 = Sc * j1;
  float a = dot(j0, sj0) + 0.3, b = dot(j0, sj1), c = dot(j1, sj1) + 0.3;
  float det = a * c - b * b;
  if (!(det > 0.0)) { cull(); return; }
  vec2 m2 = vec2(u_K.x * p.x / p.z + u_K.z, u_K.y * p.y / p.z + u_K.w);
  float r2 = 2.0 * log(opac / ${ALPHA_MIN});
  vec2 d = a_corner * vec2(sqrt(a * r2), sqrt(c * r2));
  vec2 px = m2 + d;
  gl_Position = vec4(2.0 * px.x / u_size.x - 1.0, 1.0 - 2.0 * px.y / u_size.y, 0.0, 1.0);
  v_d = d;
  v_conic = vec3(c / det, -b / det, a / det);
  v_opac = opac;
  // Colour: 48 halves in texels 2..7, coefficient-major, rgb within.
  vec3 co[16];
  for (int t = 0; t < 6; t++) {
    uvec4 u = texelFetch(u_data, at(uint(2 + t)), 0);
    vec2 e0 = unpackHalf2x16(u.x), e1 = unpackHalf2x16(u.y), e2 = unpackHalf2x16(u.z), e3 = unpackHalf2x16(u.w);
    float f[8] = float[8](e0.x, e0.y, e1.x, e1.y, e2.x, e2.y, e3.x, e3.y);
    for (int j = 0; j < 8; j++) {
      int g = t * 8 + j;
      co[g / 3][g % 3] = f[j];
    }
  }
  vec3 col = co[0];
  if (u_deg > 0) {
    vec3 dir = normalize(mean - u_C);
    float X = dir.x, Y = dir.y, Z = dir.z;
    col += -C1 * Y * co[1] + C1 * Z * co[2] - C1 * X * co[3];
    if (u_deg > 1) {
      float xx = X * X, yy = Y * Y, zz = Z * Z;
      col += C2[0] * X * Y * co[4] + C2[1] * Y * Z * co[5] + C2[2] * (2.0 * zz - xx - yy) * co[6] +
             C2[3] * X * Z * co[7] + C2[4] * (xx - yy) * co[8];
      if (u_deg > 2) {
        col += C3[0] * Y * (3.0 * xx - yy) * co[9] + C3[1] * X * Y * Z * co[10] +
               C3[2] * Y * (4.0 * zz - xx - yy) * co[11] + C3[3] * Z * (2.0 * zz - 3.0 * xx - 3.0 * yy) * co[12] +
               C3[4] * X * (4.0 * zz - xx - yy) * co[13] + C3[5] * Z * (xx - yy) * co[14] +
               C3[6] * X * (xx - 3.0 * yy) * co[15];
      }
    }
  }
  v_color = max(col, vec3(0.0));
}`;

const FS = `#version 300 es
precision highp float;
in vec3 v_color;
in float v_opac;
in vec3 v_conic;
in vec2 v_d;
out vec4 o;
void main() {
  float power = -0.5 * (v_conic.x * v_d.x * v_d.x + v_conic.z * v_d.y * v_d.y) - v_conic.y * v_d.x * v_d.y;
  if (power > 0.0) discard;
  float alpha = min(0.99, v_opac * exp(power));
  if (alpha < ${ALPHA_MIN}) discard;
  o = vec4(v_color * alpha, alpha);
}`;

// The splats blend into a float target where the browser can (EXT_color_buffer_float, with
// EXT_float_blend for 32-bit): an 8-bit target rounds after every blend, and many faint layers
// then drift far from the rasterizer's float sum. A last pass copies it to the canvas.
const COPY_VS = `#version 300 es
in vec2 a_corner;
void main() { gl_Position = vec4(a_corner, 0.0, 1.0); }`;
const COPY_FS = `#version 300 es
precision highp float;
uniform sampler2D u_img;
out vec4 o;
void main() { o = vec4(clamp(texelFetch(u_img, ivec2(gl_FragCoord.xy), 0).rgb, 0.0, 1.0), 1.0); }`;

function compile(type, src) {
  const s = gl.createShader(type);
  gl.shaderSource(s, src);
  gl.compileShader(s);
  if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
  return s;
}

function link(vs, fs) {
  const p = gl.createProgram();
  gl.attachShader(p, compile(gl.VERTEX_SHADER, vs));
  gl.attachShader(p, compile(gl.FRAGMENT_SHADER, fs));
  gl.bindAttribLocation(p, 0, "a_corner");
  gl.linkProgram(p);
  if (!gl.getProgramParameter(p, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(p));
  return p;
}

let prog, copyProg, uni = {}, dataTex, indexBuf, vao, quadVao;
const target = { fmt: null, tex: null, fbo: null, w: 0, h: 0 };
function initGL() {
  if (!gl) throw new Error("this browser has no WebGL2");
  prog = link(VS, FS);
  copyProg = link(COPY_VS, COPY_FS);
  if (gl.getExtension("EXT_color_buffer_float")) target.fmt = gl.getExtension("EXT_float_blend") ? gl.RGBA32F : gl.RGBA16F;
  for (const u of ["u_data", "u_R0", "u_R1", "u_R2", "u_T", "u_C", "u_K", "u_lim", "u_size", "u_deg", "u_near"]) uni[u] = gl.getUniformLocation(prog, u);
  vao = gl.createVertexArray();
  gl.bindVertexArray(vao);
  const quad = gl.createBuffer();
  gl.bindBuffer(gl.ARRAY_BUFFER, quad);
  gl.bufferData(gl.ARRAY_BUFFER, new Float32Array([-1, -1, 1, -1, -1, 1, 1, 1]), gl.STATIC_DRAW);
  const ac = gl.getAttribLocation(prog, "a_corner");
  gl.enableVertexAttribArray(ac);
  gl.vertexAttribPointer(ac, 2, gl.FLOAT, false, 0, 0);
  indexBuf = gl.createBuffer();
  gl.bindBuffer(gl.ARRAY_BUFFER, indexBuf);
  const ai = gl.getAttribLocation(prog, "a_index");
  gl.enableVertexAttribArray(ai);
  gl.vertexAttribIPointer(ai, 1, gl.UNSIGNED_INT, 0, 0);
  gl.vertexAttribDivisor(ai, 1);
  quadVao = gl.createVertexArray();
  gl.bindVertexArray(quadVao);
  gl.bindBuffer(gl.ARRAY_BUFFER, quad);
  gl.enableVertexAttribArray(0);
  gl.vertexAttribPointer(0, 2, gl.FLOAT, false, 0, 0);
  gl.bindVertexArray(null);
  dataTex = gl.createTexture();
}

// bindTarget makes the float target (of the canvas's size) current; false when there is none.
function bindTarget(w, h) {
  if (!target.fmt) return false;
  if (target.w !== w || target.h !== h) {
    if (target.tex) { gl.deleteTexture(target.tex); gl.deleteFramebuffer(target.fbo); }
    target.tex = gl.createTexture();
    gl.bindTexture(gl.TEXTURE_2D, target.tex);
    gl.texStorage2D(gl.TEXTURE_2D, 1, target.fmt, w, h);
    // Float textures are not filterable without an extension: nearest keeps them complete.
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
    target.fbo = gl.createFramebuffer();
    gl.bindFramebuffer(gl.FRAMEBUFFER, target.fbo);
    gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, target.tex, 0);
    if (gl.checkFramebufferStatus(gl.FRAMEBUFFER) !== gl.FRAMEBUFFER_COMPLETE) {
      target.fmt = null;
      gl.bindFramebuffer(gl.FRAMEBUFFER, null);
      return false;
    }
    target.w = w; target.h = h;
  }
  gl.bindFramebuffer(gl.FRAMEBUFFER, target.fbo);
  return true;
}

function present(w, h) {
  gl.bindFramebuffer(gl.FRAMEBUFFER, null);
  gl.viewport(0, 0, w, h);
  gl.disable(gl.BLEND);
  gl.useProgram(copyProg);
  gl.activeTexture(gl.TEXTURE0);
  gl.bindTexture(gl.TEXTURE_2D, target.tex);
  gl.uniform1i(gl.getUniformLocation(copyProg, "u_img"), 0);
  gl.bindVertexArray(quadVao);
  gl.drawArrays(gl.TRIANGLE_STRIP, 0, 4);
  gl.bindVertexArray(null);
}

function uploadScene(sc) {
  gl.bindTexture(gl.TEXTURE_2D, dataTex);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.NEAREST);
  gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.NEAREST);
  gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA32UI, TEXW, sc.rows, 0, gl.RGBA_INTEGER, gl.UNSIGNED_INT, sc.tex);
  state.n = sc.n; state.deg = sc.deg; state.positions = sc.positions;
  state.order = null; state.orderCount = 0;
  worker.postMessage({ positions: sc.positions.slice() });
  state.sortDirty = true;
  $("splats").textContent = sc.n.toLocaleString();
}

// ---------- camera ----------
function currentCamera() {
  const w = canvas.width, h = canvas.height;
  if (state.exact) {
    const e = state.exact, sx = w / e.w, sy = h / e.h;
    return { R: e.R, C: e.C, k: [e.k[0] * sx, e.k[1] * sy, e.k[2] * sx, e.k[3] * sy], w, h };
  }
  const cp = Math.cos(state.pitch), sp = Math.sin(state.pitch);
  const toTarget = norm(add(add(scale(state.e1, cp * Math.cos(state.yaw)), scale(state.e2, cp * Math.sin(state.yaw))), scale(state.up, -sp)));
  const fwd = toTarget;
  const C = sub(state.target, scale(fwd, state.dist));
  const down = scale(state.up, -1);
  const right = norm(cross(down, fwd));
  const dn = cross(fwd, right);
  const fy = (0.5 * h) / Math.tan((state.fovY * Math.PI) / 360);
  return { R: [...right, ...dn, ...fwd], C, k: [fy, fy, w / 2, h / 2], w, h };
}

function tFromRC(R, C) {
  return [0, 1, 2].map((r) => -(R[3 * r] * C[0] + R[3 * r + 1] * C[1] + R[3 * r + 2] * C[2]));
}

// leaveExact turns a snapped camera into orbit parameters (keeping its position and direction)
// before the user moves it.
function leaveExact() {
  if (!state.exact) return;
  const cam = currentCamera();
  const fwd = cam.R.slice(6, 9);
  state.fovY = (2 * Math.atan((0.5 * cam.h) / cam.k[1]) * 180) / Math.PI;
  $("fov").value = state.fovY.toFixed(0);
  state.target = add(cam.C, scale(fwd, state.dist));
  setAngles(fwd);
  state.exact = null;
}

function setAngles(fwd) {
  const u = dot(fwd, state.up);
  state.pitch = Math.asin(Math.max(-1, Math.min(1, -u)));
  state.yaw = Math.atan2(dot(fwd, state.e2), dot(fwd, state.e1));
}

function setUp(up) {
  state.up = norm(up);
  const ref = Math.abs(state.up[0]) < 0.9 ? [1, 0, 0] : [0, 1, 0];
  state.e1 = norm(cross(state.up, cross(ref, state.up)));
  state.e2 = cross(state.up, state.e1);
}

function snapTo(i) {
  const c = state.info.cameras[i];
  const C = [0, 1, 2].map((a) => -(c.r[a] * c.t[0] + c.r[3 + a] * c.t[1] + c.r[6 + a] * c.t[2]));
  state.exact = { R: c.r, C, k: c.k, w: c.width, h: c.height };
  const fwd = c.r.slice(6, 9);
  state.dist = Math.max(1e-3, dot(sub(state.target, C), fwd)) || state.dist;
  state.sortDirty = true;
  document.querySelectorAll("#cams li").forEach((li, j) => li.classList.toggle("on", j === i));
  const ph = $("photo");
  if (c.photo) { ph.src = "api/photo/" + i; ph.hidden = false; } else ph.hidden = true;
}

// ---------- sorting ----------
const worker = new Worker("sort.js");
worker.onmessage = (e) => {
  state.sortBusy = false;
  const { order, id } = e.data;
  gl.bindBuffer(gl.ARRAY_BUFFER, indexBuf);
  gl.bufferData(gl.ARRAY_BUFFER, order, gl.DYNAMIC_DRAW);
  state.orderCount = order.length;
  state.orderId = id;
};
function requestSort(cam) {
  if (state.sortBusy || !state.positions) return;
  state.sortBusy = true;
  state.sortDirty = false;
  const t = tFromRC(cam.R, cam.C);
  worker.postMessage({ depthRow: [cam.R[6], cam.R[7], cam.R[8], t[2]], near: NEAR, id: ++state.sortId });
}

// ---------- drawing ----------
function resize() {
  const dpr = window.devicePixelRatio || 1;
  const [w, h] = state.fixedSize || [Math.round(canvas.clientWidth * dpr), Math.round(canvas.clientHeight * dpr)];
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
}

function draw() {
  resize();
  const cam = currentCamera();
  if (state.sortDirty) requestSort(cam);
  const float = bindTarget(cam.w, cam.h);
  gl.viewport(0, 0, cam.w, cam.h);
  gl.clearColor(state.bg[0], state.bg[1], state.bg[2], 1);
  gl.clear(gl.COLOR_BUFFER_BIT);
  if (state.orderCount) drawSplats(cam);
  if (float) present(cam.w, cam.h);
}

function drawSplats(cam) {
  gl.useProgram(prog);
  gl.bindVertexArray(vao);
  gl.activeTexture(gl.TEXTURE0);
  gl.bindTexture(gl.TEXTURE_2D, dataTex);
  gl.uniform1i(uni.u_data, 0);
  const R = cam.R, t = tFromRC(R, cam.C);
  gl.uniform3f(uni.u_R0, R[0], R[1], R[2]);
  gl.uniform3f(uni.u_R1, R[3], R[4], R[5]);
  gl.uniform3f(uni.u_R2, R[6], R[7], R[8]);
  gl.uniform3f(uni.u_T, t[0], t[1], t[2]);
  gl.uniform3f(uni.u_C, cam.C[0], cam.C[1], cam.C[2]);
  const [fx, fy, cx, cy] = cam.k;
  gl.uniform4f(uni.u_K, fx, fy, cx, cy);
  const tanX = (0.5 * cam.w) / fx, tanY = (0.5 * cam.h) / fy;
  gl.uniform4f(uni.u_lim, cx / fx + 0.3 * tanX, (cam.w - cx) / fx + 0.3 * tanX, cy / fy + 0.3 * tanY, (cam.h - cy) / fy + 0.3 * tanY);
  gl.uniform2f(uni.u_size, cam.w, cam.h);
  gl.uniform1i(uni.u_deg, state.deg);
  gl.uniform1f(uni.u_near, NEAR);
  gl.enable(gl.BLEND);
  gl.blendFunc(gl.ONE, gl.ONE_MINUS_SRC_ALPHA); // premultiplied "over", back to front
  gl.disable(gl.DEPTH_TEST);
  gl.drawArraysInstanced(gl.TRIANGLE_STRIP, 0, 4, state.orderCount);
  gl.bindVertexArray(null);
}

let spin = 0; // radians per frame of automatic orbit (the FPS measurement)
function frame(now) {
  if (spin) { leaveExact(); state.yaw += spin; state.sortDirty = true; }
  keyMove();
  draw();
  state.frames.push(now);
  while (state.frames.length && now - state.frames[0] > 1000) state.frames.shift();
  $("fps").textContent = state.frames.length.toString();
  // Test hooks: resolve waiters once the sort for their view has been drawn.
  state.waiters = state.waiters.filter((w) => {
    if (state.orderId >= w.id && !state.sortDirty) { w.resolve(); return false; }
    return true;
  });
  requestAnimationFrame(frame);
}

// ---------- controls ----------
function moveBy(dx, dy, dz) { // camera axes: right, down, forward
  leaveExact();
  const cam = currentCamera();
  const step = state.dist * 0.02;
  const d = add(add(scale(cam.R.slice(0, 3), dx * step), scale(cam.R.slice(3, 6), dy * step)), scale(cam.R.slice(6, 9), dz * step));
  state.target = add(state.target, d);
  state.sortDirty = true;
}
function keyMove() {
  const k = state.keys;
  if (!k.size) return;
  const f = (a, b) => (k.has(a) ? 1 : 0) - (k.has(b) ? 1 : 0);
  const dz = f("KeyW", "KeyS") + f("ArrowUp", "ArrowDown"), dx = f("KeyD", "KeyA") + f("ArrowRight", "ArrowLeft"), dy = f("KeyQ", "KeyE");
  if (dx || dy || dz) moveBy(dx, dy, dz);
}
function rotate(dx, dy) {
  leaveExact();
  if (state.mode === "fly") { // look around from the camera centre
    const C = currentCamera().C;
    state.yaw -= dx * 0.004; state.pitch = Math.max(-1.55, Math.min(1.55, state.pitch + dy * 0.004));
    const fwd = currentCamera().R.slice(6, 9);
    state.target = add(C, scale(fwd, state.dist));
  } else {
    state.yaw -= dx * 0.006; state.pitch = Math.max(-1.55, Math.min(1.55, state.pitch + dy * 0.006));
  }
  state.sortDirty = true;
}
function pan(dx, dy) {
  leaveExact();
  const cam = currentCamera();
  const s = state.dist / cam.k[1];
  state.target = add(state.target, add(scale(cam.R.slice(0, 3), -dx * s), scale(cam.R.slice(3, 6), -dy * s)));
  state.sortDirty = true;
}
function zoom(f) {
  leaveExact();
  if (state.mode === "fly") { moveBy(0, 0, (1 - f) * 10); return; }
  state.dist = Math.max(1e-3, state.dist * f);
  state.sortDirty = true;
}

let drag = null;
canvas.addEventListener("contextmenu", (e) => e.preventDefault());
canvas.addEventListener("pointerdown", (e) => { canvas.setPointerCapture(e.pointerId); drag = { x: e.clientX, y: e.clientY, pan: e.button === 2 || e.shiftKey }; });
canvas.addEventListener("pointerup", () => { drag = null; });
canvas.addEventListener("pointermove", (e) => {
  if (!drag || e.pointerType === "touch") return;
  const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
  drag.x = e.clientX; drag.y = e.clientY;
  if (drag.pan) pan(dx, dy); else rotate(dx, dy);
});
canvas.addEventListener("wheel", (e) => { e.preventDefault(); zoom(Math.exp(e.deltaY * 0.001)); }, { passive: false });
let touches = null;
function touchInfo(t) {
  if (t.length === 1) return { x: t[0].clientX, y: t[0].clientY, d: 0 };
  return { x: (t[0].clientX + t[1].clientX) / 2, y: (t[0].clientY + t[1].clientY) / 2, d: Math.hypot(t[0].clientX - t[1].clientX, t[0].clientY - t[1].clientY) };
}
canvas.addEventListener("touchstart", (e) => { e.preventDefault(); touches = touchInfo(e.touches); }, { passive: false });
canvas.addEventListener("touchmove", (e) => {
  e.preventDefault();
  const t = touchInfo(e.touches);
  if (!touches || (t.d > 0) !== (touches.d > 0)) { touches = t; return; }
  if (e.touches.length === 1) rotate(t.x - touches.x, t.y - touches.y);
  else { pan(t.x - touches.x, t.y - touches.y); if (touches.d > 0) zoom(touches.d / t.d); }
  touches = t;
}, { passive: false });
canvas.addEventListener("touchend", (e) => { touches = e.touches.length ? touchInfo(e.touches) : null; });
window.addEventListener("keydown", (e) => {
  if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
  if (e.code === "KeyF") { setMode(state.mode === "fly" ? "orbit" : "fly"); return; }
  state.keys.add(e.code);
});
window.addEventListener("keyup", (e) => state.keys.delete(e.code));
window.addEventListener("blur", () => state.keys.clear());

function setMode(m) { state.mode = m; $("mode").value = m; }
$("mode").addEventListener("change", (e) => setMode(e.target.value));
$("fov").addEventListener("input", (e) => { leaveExact(); state.fovY = +e.target.value; state.sortDirty = true; });
$("bg").addEventListener("input", (e) => {
  const v = e.target.value;
  state.bg = [1, 3, 5].map((i) => parseInt(v.slice(i, i + 2), 16) / 255);
});

// ---------- scene and live state ----------
async function loadScene() {
  const r = await fetch("api/scene");
  if (r.status === 503) return false;
  if (!r.ok) throw new Error("scene: " + r.status + " " + (await r.text()));
  const v = +r.headers.get("X-Scene-Version");
  const buf = await r.arrayBuffer();
  uploadScene(decodeScene(buf));
  state.version = v;
  return true;
}

function hex(c) { return "#" + c.map((v) => Math.round(Math.min(1, Math.max(0, v)) * 255).toString(16).padStart(2, "0")).join(""); }

function initView() {
  const cams = state.info.cameras;
  if (cams.length) {
    // The scene's up is the mean of the cameras' up (−y) axes; the target is where their
    // optical axes pass closest to each other's centroid.
    let up = [0, 0, 0], ctr = [0, 0, 0];
    for (const c of cams) {
      up = sub(up, c.r.slice(3, 6));
      ctr = add(ctr, [0, 1, 2].map((a) => -(c.r[a] * c.t[0] + c.r[3 + a] * c.t[1] + c.r[6 + a] * c.t[2])));
    }
    setUp(up);
    ctr = scale(ctr, 1 / cams.length);
    state.target = ctr;
    const list = $("cams");
    cams.forEach((c, i) => {
      const li = document.createElement("li");
      li.textContent = c.name;
      li.addEventListener("click", () => snapTo(i));
      list.appendChild(li);
    });
    $("campanel").hidden = false;
    // Aim at the point in front of the first camera nearest the cameras' centroid.
    const C0 = [0, 1, 2].map((a) => -(cams[0].r[a] * cams[0].t[0] + cams[0].r[3 + a] * cams[0].t[1] + cams[0].r[6 + a] * cams[0].t[2]));
    state.dist = Math.max(0.1, dot(sub(ctr, C0), cams[0].r.slice(6, 9)));
    state.target = add(C0, scale(cams[0].r.slice(6, 9), state.dist));
    snapTo(0);
  } else if (state.positions && state.n) {
    setUp([0, -1, 0]);
    let c = [0, 0, 0];
    const p = state.positions, step = Math.max(1, Math.floor(state.n / 10000));
    let m = 0;
    for (let i = 0; i < state.n; i += step, m++) c = add(c, [p[3 * i], p[3 * i + 1], p[3 * i + 2]]);
    c = scale(c, 1 / m);
    let r = 0;
    for (let i = 0; i < state.n; i += step) r += Math.hypot(p[3 * i] - c[0], p[3 * i + 1] - c[1], p[3 * i + 2] - c[2]);
    state.target = c; state.dist = 2.5 * (r / m) || 5; state.pitch = -0.3;
  }
}

async function pollLive() {
  try {
    const r = await fetch("api/live", { cache: "no-store" });
    if (r.ok) {
      const s = await r.json();
      $("step").textContent = s.step + " / " + s.total;
      $("gauss").textContent = s.gaussians.toLocaleString();
      $("rate").textContent = s.stepsPerSec.toFixed(1);
      $("loss").textContent = s.loss.toFixed(4) + " (PSNR " + s.psnr.toFixed(2) + " dB)";
      s.evals = s.evals || []; s.curve = s.curve || [];
      const ev = s.evals[s.evals.length - 1];
      $("eval").textContent = ev ? `step ${ev.step}: ${ev.psnr.toFixed(2)} dB, SSIM ${ev.ssim.toFixed(4)} (${ev.split})` : "none yet";
      state.paused = s.paused;
      $("pause").textContent = s.done ? "finished" : s.paused ? "resume" : "pause";
      $("pause").disabled = s.done;
      drawCurve(s.curve, s.evals);
      state.liveCurve = s.curve.length;
      if (s.previewStep && s.previewStep !== state.previewStep) {
        state.previewStep = s.previewStep;
        $("preview").src = "api/preview?step=" + s.previewStep;
        $("preview").hidden = false;
      }
      if (s.sceneVersion !== state.version && s.sceneVersion > 0) await loadScene();
    }
  } catch (e) { $("status").textContent = "training server gone: " + e.message; }
  setTimeout(pollLive, 1000);
}

function drawCurve(curve, evals) {
  const c = $("curve"), g = c.getContext("2d");
  const w = c.width, h = c.height;
  g.fillStyle = "#111"; g.fillRect(0, 0, w, h);
  if (curve.length < 2) return;
  const maxStep = curve[curve.length - 1][0];
  const plot = (col, idx, color, lo, hi) => {
    g.strokeStyle = color; g.beginPath();
    curve.forEach((p, i) => {
      const x = (p[0] / maxStep) * (w - 8) + 4, y = h - 4 - ((p[idx] - lo) / (hi - lo || 1)) * (h - 8);
      i ? g.lineTo(x, y) : g.moveTo(x, y);
    });
    g.stroke();
  };
  const vals = (i) => curve.map((p) => p[i]).filter((v) => v >= 0);
  const losses = vals(1), psnrs = vals(2);
  plot(curve, 1, "#f84", Math.min(...losses), Math.max(...losses));
  plot(curve, 2, "#4cf", Math.min(...psnrs), Math.max(...psnrs));
  g.fillStyle = "#ccc"; g.font = "11px sans-serif";
  g.fillText("loss", 6, 12); g.fillStyle = "#4cf"; g.fillText("PSNR " + psnrs[psnrs.length - 1].toFixed(2), 40, 12);
}

$("pause").addEventListener("click", async () => {
  const want = !state.paused;
  const r = await fetch(want ? "api/pause" : "api/resume", { method: "POST", headers: { "X-Rlxsplat": "1" } });
  if (r.ok) { state.paused = want; $("pause").textContent = want ? "resume" : "pause"; }
});

// ---------- the page's programmatic interface (tests, benchmarks, scripting) ----------
window.rlx = {
  // setView shows an exact camera on a canvas of exactly its size and resolves once its sort
  // has been drawn.
  setView(v) {
    state.fixedSize = [v.width, v.height];
    canvas.style.width = v.width / (window.devicePixelRatio || 1) + "px";
    canvas.style.height = v.height / (window.devicePixelRatio || 1) + "px";
    state.exact = { R: v.r, C: [0, 1, 2].map((a) => -(v.r[a] * v.t[0] + v.r[3 + a] * v.t[1] + v.r[6 + a] * v.t[2])), k: v.k, w: v.width, h: v.height };
    state.sortDirty = true;
    return rlx.settled();
  },
  settled() { return new Promise((resolve) => state.waiters.push({ id: state.sortId + 1, resolve })); },
  setBackground(c) { state.bg = c; $("bg").value = hex(c); },
  // capture draws now and returns the canvas as base64 RGBA rows, top row first.
  capture() {
    draw();
    const w = canvas.width, h = canvas.height, px = new Uint8Array(w * h * 4);
    gl.readPixels(0, 0, w, h, gl.RGBA, gl.UNSIGNED_BYTE, px);
    const out = new Uint8Array(w * h * 4);
    for (let y = 0; y < h; y++) out.set(px.subarray((h - 1 - y) * w * 4, (h - y) * w * 4), y * w * 4);
    let s = "";
    for (let i = 0; i < out.length; i += 0x8000) s += String.fromCharCode.apply(null, out.subarray(i, i + 0x8000));
    return { width: w, height: h, rgba: btoa(s) };
  },
  // fps orbits the camera for ms milliseconds and returns the frames drawn per second.
  async fps(ms) {
    const start = performance.now(), n0 = frameCount;
    spin = 0.01;
    await new Promise((r) => setTimeout(r, ms));
    spin = 0;
    return ((frameCount - n0) * 1000) / (performance.now() - start);
  },
  status() { return { target: target.fmt === gl.RGBA32F ? "float32" : target.fmt ? "float16" : "8-bit", ready: state.ready || false, splats: state.n, version: state.version, curve: state.liveCurve || 0, error: state.error || "" }; },
};
let frameCount = 0;
const countFrames = (t) => { frameCount++; requestAnimationFrame(countFrames); };
requestAnimationFrame(countFrames);

async function main() {
  try {
    initGL();
    state.info = await (await fetch("api/info")).json();
    document.title = state.info.title + " — rlxsplat";
    $("title").textContent = state.info.title;
    state.bg = state.info.background;
    $("bg").value = hex(state.bg);
    if (state.info.live) {
      $("livepanel").hidden = false;
      while (!(await loadScene())) await new Promise((r) => setTimeout(r, 1000));
      pollLive();
    } else {
      await loadScene();
    }
    initView();
    state.ready = true;
    requestAnimationFrame(frame);
  } catch (e) {
    state.error = String(e.message || e);
    $("status").textContent = "error: " + state.error;
  }
}
main();

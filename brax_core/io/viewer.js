(function () {
'use strict';
const D = JSON.parse(document.getElementById('bb-data').textContent);
const canvas = document.getElementById('bb-canvas');
const msg = document.getElementById('bb-msg');
const gl = canvas.getContext('webgl', {antialias: true});
if (!gl) { msg.textContent = 'WebGL is not available in this browser.'; return; }

// ---- small linear algebra (column-major 4x4, MuJoCo quaternions are [w, x, y, z]) ----
function quatMat(q) {
  const [w, x, y, z] = q;
  return [1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y), 0,
          2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x), 0,
          2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y), 0, 0, 0, 0, 1];
}
function poseMat(p, q) { const m = quatMat(q); m[12] = p[0]; m[13] = p[1]; m[14] = p[2]; return m; }
function mul(a, b) {
  const o = new Array(16);
  for (let c = 0; c < 4; c++) for (let r = 0; r < 4; r++) {
    let s = 0; for (let k = 0; k < 4; k++) s += a[k * 4 + r] * b[c * 4 + k]; o[c * 4 + r] = s;
  }
  return o;
}
function perspective(fovy, aspect, near, far) {
  const f = 1 / Math.tan(fovy / 2), nf = 1 / (near - far);
  return [f / aspect, 0, 0, 0, 0, f, 0, 0, 0, 0, (far + near) * nf, -1, 0, 0, 2 * far * near * nf, 0];
}
function sub(a, b) { return [a[0] - b[0], a[1] - b[1], a[2] - b[2]]; }
function cross(a, b) { return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]; }
function norm(a) { const l = Math.hypot(a[0], a[1], a[2]) || 1; return [a[0] / l, a[1] / l, a[2] / l]; }
function dot(a, b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
function lookAt(eye, target, up) {
  const z = norm(sub(eye, target)), x = norm(cross(up, z)), y = cross(z, x);
  return [x[0], y[0], z[0], 0, x[1], y[1], z[1], 0, x[2], y[2], z[2], 0, -dot(x, eye), -dot(y, eye), -dot(z, eye), 1];
}

// ---- geometry: every mesh is built in its geom's frame with sizes baked in ----
function pushTri(P, N, a, b, c) {
  const n = norm(cross(sub(b, a), sub(c, a)));
  P.push(...a, ...b, ...c); N.push(...n, ...n, ...n);
}
function sphereLike(rx, ry, rz, halfLen, seg) {
  // Ellipsoid/sphere, or a capsule when halfLen > 0: the equator row is doubled and the two hemispheres
  // are shifted apart along z, so the rows between them form the cylindrical band. Smooth normals.
  const P = [], N = [], rows = [], slices = seg * 2;
  for (let i = 0; i <= seg; i++) {
    if (halfLen > 0 && 2 * i === seg) { rows.push([i, halfLen], [i, -halfLen]); continue; }
    rows.push([i, halfLen > 0 ? (2 * i < seg ? halfLen : -halfLen) : 0]);
  }
  const vert = (row, j) => {
    const th = Math.PI * row[0] / seg, ph = 2 * Math.PI * j / slices;
    const n = [Math.sin(th) * Math.cos(ph), Math.sin(th) * Math.sin(ph), Math.cos(th)];
    return {p: [rx * n[0], ry * n[1], rz * n[2] + row[1]], n: norm([n[0] / rx, n[1] / ry, n[2] / rz])};
  };
  for (let r = 0; r + 1 < rows.length; r++) for (let j = 0; j < slices; j++) {
    const a = vert(rows[r], j), b = vert(rows[r + 1], j), c = vert(rows[r + 1], j + 1), d = vert(rows[r], j + 1);
    for (const v of [a, b, c, a, c, d]) { P.push(...v.p); N.push(...v.n); }
  }
  return {P, N};
}
function cylinder(r, h, seg) {
  const P = [], N = [];
  for (let j = 0; j < seg; j++) {
    const a0 = 2 * Math.PI * j / seg, a1 = 2 * Math.PI * (j + 1) / seg;
    const c0 = [Math.cos(a0), Math.sin(a0)], c1 = [Math.cos(a1), Math.sin(a1)];
    const v = (c, z) => [r * c[0], r * c[1], z];
    for (const [p, n] of [[v(c0, -h), c0], [v(c1, -h), c1], [v(c1, h), c1], [v(c0, -h), c0], [v(c1, h), c1],
                          [v(c0, h), c0]]) { P.push(...p); N.push(n[0], n[1], 0); }
    pushTri(P, N, [0, 0, h], v(c0, h), v(c1, h));
    pushTri(P, N, [0, 0, -h], v(c1, -h), v(c0, -h));
  }
  return {P, N};
}
function box(s) {
  const P = [], N = [];
  const faces = [[0, 1, 2], [1, 2, 0], [2, 0, 1]];
  for (const [a, b, c] of faces) for (const sign of [1, -1]) {
    const corner = (u, v) => { const p = [0, 0, 0]; p[a] = sign * s[a]; p[b] = u * s[b]; p[c] = v * s[c]; return p; };
    const q = [corner(-1, -1), corner(1, -1), corner(1, 1), corner(-1, 1)];
    if (sign > 0) { pushTri(P, N, q[0], q[1], q[2]); pushTri(P, N, q[0], q[2], q[3]); }
    else { pushTri(P, N, q[0], q[2], q[1]); pushTri(P, N, q[0], q[3], q[2]); }
  }
  return {P, N};
}
function plane(sx, sy) {
  const P = [], N = [];
  pushTri(P, N, [-sx, -sy, 0], [sx, -sy, 0], [sx, sy, 0]);
  pushTri(P, N, [-sx, -sy, 0], [sx, sy, 0], [-sx, sy, 0]);
  return {P, N};
}
function mesh(m) {
  const P = [], N = [], v = i => [m.vert[3 * i], m.vert[3 * i + 1], m.vert[3 * i + 2]];
  for (let f = 0; f < m.face.length; f += 3) pushTri(P, N, v(m.face[f]), v(m.face[f + 1]), v(m.face[f + 2]));
  return {P, N};
}

// ---- scene extent, used for the camera and for infinite planes ----
let lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
for (let t = 0; t < D.frames; t++) for (let b = 1; b < D.nbody; b++) for (let k = 0; k < 3; k++) {
  lo[k] = Math.min(lo[k], D.xpos[t][b][k]); hi[k] = Math.max(hi[k], D.xpos[t][b][k]);
}
if (D.nbody < 2) { lo = [-1, -1, 0]; hi = [1, 1, 1]; }
const extent = Math.max(1, Math.hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]));

function build(g) {
  const s = g.size;
  switch (g.type) {
    case 'plane': return plane(s[0] > 0 ? s[0] : 10 * extent, s[1] > 0 ? s[1] : 10 * extent);
    case 'sphere': return sphereLike(s[0], s[0], s[0], 0, 12);
    case 'ellipsoid': return sphereLike(s[0], s[1], s[2], 0, 12);
    case 'capsule': return sphereLike(s[0], s[0], s[0], s[1], 12);
    case 'cylinder': return cylinder(s[0], s[1], 24);
    case 'box': return box(s);
    case 'mesh': return mesh(g.mesh);
  }
  return {P: [], N: []};
}

// ---- WebGL program: Lambert shading with a headlight, checker pattern on planes ----
const VS = `attribute vec3 aPos; attribute vec3 aNrm; uniform mat4 uModel, uViewProj;
varying vec3 vNrm; varying vec3 vWorld;
void main(){ vec4 w = uModel * vec4(aPos, 1.0); vWorld = w.xyz; vNrm = mat3(uModel) * aNrm;
 gl_Position = uViewProj * w; }`;
const FS = `precision mediump float; varying vec3 vNrm; varying vec3 vWorld;
uniform vec4 uColor; uniform vec3 uEye; uniform float uChecker;
void main(){ vec3 n = normalize(vNrm); vec3 l = normalize(uEye - vWorld);
 float d = abs(dot(n, l)); float c = 1.0;
 if (uChecker > 0.5) { vec2 q = floor(vWorld.xy * 2.0); c = mod(q.x + q.y, 2.0) < 0.5 ? 0.85 : 1.0; }
 gl_FragColor = vec4(uColor.rgb * c * (0.35 + 0.65 * d), uColor.a); }`;
function shader(type, src) {
  const s = gl.createShader(type); gl.shaderSource(s, src); gl.compileShader(s);
  if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
  return s;
}
const prog = gl.createProgram();
gl.attachShader(prog, shader(gl.VERTEX_SHADER, VS)); gl.attachShader(prog, shader(gl.FRAGMENT_SHADER, FS));
gl.linkProgram(prog); gl.useProgram(prog);
const loc = {};
for (const a of ['aPos', 'aNrm']) loc[a] = gl.getAttribLocation(prog, a);
for (const u of ['uModel', 'uViewProj', 'uColor', 'uEye', 'uChecker']) loc[u] = gl.getUniformLocation(prog, u);

const drawables = D.geoms.map(g => {
  const {P, N} = build(g);
  const upload = A => {
    const b = gl.createBuffer(); gl.bindBuffer(gl.ARRAY_BUFFER, b);
    gl.bufferData(gl.ARRAY_BUFFER, new Float32Array(A), gl.STATIC_DRAW); return b;
  };
  const vb = upload(P), nb = upload(N);
  return {g, vb, nb, count: P.length / 3, local: poseMat(g.pos, g.quat)};
});

// ---- camera (orbit around a target; z is up as in MuJoCo) ----
const cam = {az: -Math.PI / 2 + 0.5, el: 0.35, dist: 1.6 * extent + 1,
             target: [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, (lo[2] + hi[2]) / 2]};
function rootCenter(t) {
  // Follow the first moving body (usually the root), keeping the view steady for fixed-base models.
  const p = D.xpos[t][Math.min(1, D.nbody - 1)];
  return [p[0], p[1], cam.target[2]];
}
let dragging = null;
canvas.addEventListener('mousedown', e => { dragging = [e.clientX, e.clientY]; canvas.style.cursor = 'grabbing'; });
window.addEventListener('mouseup', () => { dragging = null; canvas.style.cursor = 'grab'; });
window.addEventListener('mousemove', e => {
  if (!dragging) return;
  cam.az -= (e.clientX - dragging[0]) * 0.01;
  cam.el = Math.max(-1.5, Math.min(1.5, cam.el + (e.clientY - dragging[1]) * 0.01));
  dragging = [e.clientX, e.clientY]; draw();
});
canvas.addEventListener('wheel', e => { e.preventDefault(); cam.dist *= Math.exp(e.deltaY * 0.001); draw(); },
                        {passive: false});

// ---- playback ----
const slider = document.getElementById('bb-slider'), label = document.getElementById('bb-label');
const playBtn = document.getElementById('bb-play'), speedSel = document.getElementById('bb-speed');
const track = document.getElementById('bb-track');
slider.max = String(D.frames - 1);
let frame = 0, playing = D.frames > 1, clock = 0, last = null;
function setFrame(f) { frame = ((f % D.frames) + D.frames) % D.frames; slider.value = String(frame); draw(); }
slider.addEventListener('input', () => { frame = Number(slider.value); clock = frame * D.dt; draw(); });
function togglePlay() { playing = !playing; playBtn.textContent = playing ? 'pause' : 'play'; last = null; }
playBtn.addEventListener('click', togglePlay);
track.addEventListener('change', draw);
window.addEventListener('keydown', e => {
  if (e.code === 'Space') { e.preventDefault(); togglePlay(); }
  else if (e.code === 'ArrowRight') { if (playing) togglePlay(); setFrame(frame + 1); clock = frame * D.dt; }
  else if (e.code === 'ArrowLeft') { if (playing) togglePlay(); setFrame(frame - 1); clock = frame * D.dt; }
});
if (!playing) playBtn.textContent = 'play';

function draw() {
  const w = canvas.clientWidth, h = canvas.clientHeight, dpr = window.devicePixelRatio || 1;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
  }
  gl.viewport(0, 0, canvas.width, canvas.height);
  gl.clearColor(0.114, 0.125, 0.145, 1); gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
  gl.enable(gl.DEPTH_TEST); gl.enable(gl.BLEND); gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA);
  const target = track.checked ? rootCenter(frame) : cam.target;
  const eye = [target[0] + cam.dist * Math.cos(cam.el) * Math.cos(cam.az),
               target[1] + cam.dist * Math.cos(cam.el) * Math.sin(cam.az),
               target[2] + cam.dist * Math.sin(cam.el)];
  const viewProj = mul(perspective(0.8, canvas.width / Math.max(1, canvas.height), 0.01 * extent, 200 * extent),
                       lookAt(eye, target, [0, 0, 1]));
  gl.uniformMatrix4fv(loc.uViewProj, false, new Float32Array(viewProj));
  gl.uniform3fv(loc.uEye, new Float32Array(eye));
  for (const d of drawables) {
    const b = d.g.body;
    const body = b === 0 ? poseMat([0, 0, 0], [1, 0, 0, 0]) : poseMat(D.xpos[frame][b], D.xquat[frame][b]);
    gl.uniformMatrix4fv(loc.uModel, false, new Float32Array(mul(body, d.local)));
    gl.uniform4fv(loc.uColor, new Float32Array(d.g.rgba));
    gl.uniform1f(loc.uChecker, d.g.type === 'plane' ? 1 : 0);
    gl.bindBuffer(gl.ARRAY_BUFFER, d.vb); gl.enableVertexAttribArray(loc.aPos);
    gl.vertexAttribPointer(loc.aPos, 3, gl.FLOAT, false, 0, 0);
    gl.bindBuffer(gl.ARRAY_BUFFER, d.nb); gl.enableVertexAttribArray(loc.aNrm);
    gl.vertexAttribPointer(loc.aNrm, 3, gl.FLOAT, false, 0, 0);
    gl.drawArrays(gl.TRIANGLES, 0, d.count);
  }
  label.textContent = `frame ${frame + 1}/${D.frames}  t=${(frame * D.dt).toFixed(2)}s`;
}
function tick(now) {
  if (playing && D.frames > 1) {
    if (last !== null) clock += (now - last) / 1000 * Number(speedSel.value);
    last = now;
    const f = Math.floor(clock / D.dt) % D.frames;
    if (f !== frame) { frame = f; slider.value = String(frame); draw(); }
  }
  requestAnimationFrame(tick);
}
window.addEventListener('resize', draw);
draw(); requestAnimationFrame(tick);
})();

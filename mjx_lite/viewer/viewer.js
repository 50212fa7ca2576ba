// mjx_lite trajectory viewer: builds a three.js scene from the model JSON and plays body poses.
// The three.js module travels inside the page as text and is imported from a blob URL, so the
// file needs no network and no server.
const THREE = await import(URL.createObjectURL(new Blob(
  [document.getElementById('three-src').textContent], { type: 'text/javascript' })));

const errors = [];
window.addEventListener('error', (e) => errors.push(String(e.message)));

const M = JSON.parse(document.getElementById('mjx-model').textContent);
const hash = new URLSearchParams(location.hash.slice(1));

function b64bytes(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
const f32 = (s) => new Float32Array(b64bytes(s).buffer);
const i32 = (s) => new Int32Array(b64bytes(s).buffer);

// Trajectory: (T, B, nstore, 7) poses [x y z qw qx qy qz], float32 or int16-quantized.
const TR = M.traj;
const raw = b64bytes(document.getElementById('mjx-traj').textContent.trim());
const poses = TR.format === 'i16' ? new Int16Array(raw.buffer) : new Float32Array(raw.buffer);
const times = f32(TR.times);
const nstore = TR.bodies.length;

function pose(t, b, k, out) {
  const o = ((t * TR.B + b) * nstore + k) * 7;
  if (TR.format === 'i16') {
    for (let j = 0; j < 3; j++) out[j] = TR.lo[j] + (poses[o + j] + 32768) * TR.scale[j];
    for (let j = 3; j < 7; j++) out[j] = poses[o + j] / 32767;
  } else {
    for (let j = 0; j < 7; j++) out[j] = poses[o + j];
  }
  return out;
}

// ---------------------------------------------------------------- scene
const canvas = document.getElementById('view');
if (hash.has('size')) {  // a fixed canvas size, so that separate browser runs project alike
  const [w, h] = hash.get('size').split('x');
  Object.assign(canvas.style, { width: `${w}px`, height: `${h}px`, right: 'auto', bottom: 'auto' });
}
const renderer = new THREE.WebGLRenderer({ canvas, antialias: true, preserveDrawingBuffer: true });
renderer.setPixelRatio(window.devicePixelRatio || 1);
const scene = new THREE.Scene();
scene.background = new THREE.Color(M.background);
scene.add(new THREE.HemisphereLight(0xffffff, 0x404050, 1.6));
const sun = new THREE.DirectionalLight(0xffffff, 1.8);
sun.position.set(3, -4, 8);
scene.add(sun);
const headlight = new THREE.DirectionalLight(0xffffff, 0.6);
scene.add(headlight);

const bodies = [];
for (let i = 0; i < M.nbody; i++) {
  const g = new THREE.Group();
  g.matrixAutoUpdate = true;
  scene.add(g);
  bodies.push(g);
}
for (const [i, x, y, z, qw, qx, qy, qz] of M.static) {
  bodies[i].position.set(x, y, z);
  bodies[i].quaternion.set(qx, qy, qz, qw);
}

function checkerTexture(rgba) {
  const c = document.createElement('canvas');
  c.width = c.height = 64;
  const ctx = c.getContext('2d');
  const col = (s) => `rgb(${rgba.slice(0, 3).map((v) => Math.round(255 * Math.min(1, v * s)))})`;
  ctx.fillStyle = col(1.0); ctx.fillRect(0, 0, 64, 64);
  ctx.fillStyle = col(0.75); ctx.fillRect(0, 0, 32, 32); ctx.fillRect(32, 32, 32, 32);
  const tex = new THREE.CanvasTexture(c);
  tex.wrapS = tex.wrapT = THREE.RepeatWrapping;
  tex.colorSpace = THREE.SRGBColorSpace;
  return tex;
}

function material(rgba, map) {
  return new THREE.MeshStandardMaterial({
    color: map ? 0xffffff : new THREE.Color(rgba[0], rgba[1], rgba[2]),
    map: map || null, roughness: 0.7, metalness: 0.05,
    transparent: rgba[3] < 1, opacity: rgba[3], side: THREE.DoubleSide,
  });
}

const meshCache = new Map();
function meshGeometry(id) {
  if (!meshCache.has(id)) {
    const mesh = M.meshes[id];
    const geo = new THREE.BufferGeometry();
    geo.setAttribute('position', new THREE.BufferAttribute(f32(mesh.vert), 3));
    geo.setIndex(new THREE.BufferAttribute(new Uint32Array(i32(mesh.face).buffer), 1));
    const flat = geo.toNonIndexed();  // faceted shading, as MuJoCo draws meshes
    flat.computeVertexNormals();
    meshCache.set(id, flat);
  }
  return meshCache.get(id);
}

function hfieldGeometry(id) {
  const h = M.hfields[id];
  const data = f32(h.data);
  const [sx, sy, sz] = h.size;
  const pos = new Float32Array(h.nrow * h.ncol * 3);
  for (let r = 0; r < h.nrow; r++) {
    for (let c = 0; c < h.ncol; c++) {
      const k = r * h.ncol + c;
      pos[3 * k] = -sx + (2 * sx * c) / (h.ncol - 1);
      pos[3 * k + 1] = -sy + (2 * sy * r) / (h.nrow - 1);
      pos[3 * k + 2] = data[k] * sz;
    }
  }
  const idx = [];
  for (let r = 0; r + 1 < h.nrow; r++) {
    for (let c = 0; c + 1 < h.ncol; c++) {
      const a = r * h.ncol + c;
      idx.push(a, a + 1, a + h.ncol + 1, a, a + h.ncol + 1, a + h.ncol);
    }
  }
  const geo = new THREE.BufferGeometry();
  geo.setAttribute('position', new THREE.BufferAttribute(pos, 3));
  geo.setIndex(idx);
  geo.computeVertexNormals();
  return geo;
}

// MuJoCo geom type ids: plane 0, hfield 1, sphere 2, capsule 3, ellipsoid 4, cylinder 5, box 6,
// mesh 7. three.js builds capsules and cylinders along Y; MuJoCo's axis is Z.
function shapeGeometry(g) {
  const s = g.size;
  switch (g.type) {
    case 0: {
      const geo = new THREE.PlaneGeometry(2 * (s[0] > 0 ? s[0] : M.extent),
        2 * (s[1] > 0 ? s[1] : M.extent));
      return geo;
    }
    case 1: return hfieldGeometry(g.dataid);
    case 2: return new THREE.SphereGeometry(s[0], 24, 16);
    case 3: return new THREE.CapsuleGeometry(s[0], 2 * s[1], 8, 20).rotateX(Math.PI / 2);
    case 4: return new THREE.SphereGeometry(1, 24, 16).scale(s[0], s[1], s[2]);
    case 5: return new THREE.CylinderGeometry(s[0], s[0], 2 * s[1], 24).rotateX(Math.PI / 2);
    case 6: return new THREE.BoxGeometry(2 * s[0], 2 * s[1], 2 * s[2]);
    case 7: return meshGeometry(g.dataid);
    default: return null;
  }
}

function addShape(g, list) {
  const geo = shapeGeometry(g);
  if (!geo || g.rgba[3] <= 0) return null;
  let map = null;
  if (g.type === 0) {
    map = checkerTexture(g.rgba);
    const w = geo.parameters.width, h = geo.parameters.height;
    map.repeat.set(w / M.checker, h / M.checker);
  }
  const obj = new THREE.Mesh(geo, material(g.rgba, map));
  obj.position.set(...g.pos);
  obj.quaternion.set(g.quat[1], g.quat[2], g.quat[3], g.quat[0]);
  bodies[g.body].add(obj);
  list.push(obj);
  return obj;
}

const geomObjs = [];
for (const g of M.geoms) addShape(g, geomObjs);
const siteObjs = [];
for (const s of M.sites) addShape(s, siteObjs);

let grid = null;
if (!M.geoms.some((g) => g.type === 0 && g.body === 0)) {
  // No ground plane in the model: a reference grid at z = 0.
  grid = new THREE.GridHelper(2 * M.extent, 20, 0x888888, 0x555555);
  grid.rotateX(Math.PI / 2);
  scene.add(grid);
}

// ---------------------------------------------------------------- cameras
const camera = new THREE.PerspectiveCamera(45, 1, 0.01, 1000);
camera.up.set(0, 0, 1);
const orbit = { ...M.view, target: new THREE.Vector3(...M.view.target) };
let camIndex = Number(hash.get('cam') ?? -1);

function placeFreeCamera() {
  const az = (orbit.azimuth * Math.PI) / 180, el = (orbit.elevation * Math.PI) / 180;
  const d = orbit.distance;
  camera.position.set(orbit.target.x + d * Math.cos(el) * Math.cos(az),
    orbit.target.y + d * Math.cos(el) * Math.sin(az), orbit.target.z + d * Math.sin(el));
  camera.fov = 45;
  camera.lookAt(orbit.target);
}

// A model camera looks down its own -Z with +Y up, as three.js cameras do.
const tmp = new Float64Array(7);
const qBody = new THREE.Quaternion(), qCam = new THREE.Quaternion();
function placeModelCamera(c) {
  const body = bodies[c.body];
  if (c.mode === 0) {  // fixed: rigidly attached to its body
    qBody.copy(body.quaternion);
    camera.position.set(...c.pos).applyQuaternion(qBody).add(body.position);
    qCam.set(c.quat[1], c.quat[2], c.quat[3], c.quat[0]);
    camera.quaternion.copy(qBody).multiply(qCam);
  } else {  // track / trackcom / target*: world offset from the body, world orientation
    camera.position.set(...c.pos0).add(body.position);
    const m = new THREE.Matrix4().set(c.mat0[0], c.mat0[1], c.mat0[2], 0, c.mat0[3], c.mat0[4],
      c.mat0[5], 0, c.mat0[6], c.mat0[7], c.mat0[8], 0, 0, 0, 0, 1);
    camera.quaternion.setFromRotationMatrix(m);
    if (c.target >= 0) camera.lookAt(bodies[c.target].position);
  }
  camera.fov = c.fovy;
}

// ---------------------------------------------------------------- playback state
const ui = (id) => document.getElementById(id);
const slider = ui('frame');
slider.max = String(TR.T - 1);
let frame = Math.min(TR.T - 1, Number(hash.get('frame') ?? 0));
let batch = Math.min(TR.B - 1, Number(hash.get('batch') ?? 0));
let playing = !hash.has('frame') && hash.get('play') !== '0';
let follow = false;
let simTime = times[frame];
const speedSel = ui('speed');

function setFrame(t) {
  frame = Math.max(0, Math.min(TR.T - 1, t));
  for (let k = 0; k < nstore; k++) {
    pose(frame, batch, k, tmp);
    const b = bodies[TR.bodies[k]];
    b.position.set(tmp[0], tmp[1], tmp[2]);
    b.quaternion.set(tmp[4], tmp[5], tmp[6], tmp[3]).normalize();
  }
  slider.value = String(frame);
  ui('time').textContent = `t = ${times[frame].toFixed(3)} s  (${frame + 1}/${TR.T})`;
}

const hideBodies = hash.get('hide') === 'bodies';
for (let i = 1; i < M.nbody; i++) bodies[i].visible = !hideBodies;
const showSites = () => { for (const s of siteObjs) s.visible = ui('sites').checked; };
ui('sites').checked = hash.get('sites') === '1' || M.showSites;
showSites();

const camSel = ui('camera');
M.cameras.forEach((c, i) => camSel.add(new Option(`camera: ${c.name || i}`, String(i))));
camSel.value = String(camIndex);
camSel.onchange = () => { camIndex = Number(camSel.value); };
const batchSel = ui('batch');
if (TR.B > 1) {
  for (let b = 0; b < TR.B; b++) batchSel.add(new Option(`batch ${b}`, String(b)));
  batchSel.value = String(batch);
  batchSel.onchange = () => { batch = Number(batchSel.value); setFrame(frame); };
} else {
  batchSel.style.display = 'none';
}
ui('sites').onchange = showSites;
ui('follow').onchange = () => { follow = ui('follow').checked; };
const playBtn = ui('play');
const syncPlay = () => { playBtn.textContent = playing ? 'pause' : 'play'; };
playBtn.onclick = () => {
  playing = !playing;
  if (playing && frame === TR.T - 1) frame = 0;
  simTime = times[frame];
  syncPlay();
};
slider.oninput = () => { setFrame(Number(slider.value)); simTime = times[frame]; };
syncPlay();

// ---------------------------------------------------------------- orbit / zoom / pan
let drag = null;
canvas.addEventListener('pointerdown', (e) => {
  drag = { x: e.clientX, y: e.clientY, pan: e.button !== 0 || e.shiftKey };
  canvas.setPointerCapture(e.pointerId);
});
canvas.addEventListener('pointerup', () => { drag = null; });
canvas.addEventListener('contextmenu', (e) => e.preventDefault());
canvas.addEventListener('pointermove', (e) => {
  if (!drag) return;
  const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
  drag.x = e.clientX; drag.y = e.clientY;
  camIndex = -1; camSel.value = '-1';
  if (drag.pan) {
    const right = new THREE.Vector3().setFromMatrixColumn(camera.matrixWorld, 0);
    const up = new THREE.Vector3().setFromMatrixColumn(camera.matrixWorld, 1);
    const s = (orbit.distance * 1.5) / canvas.clientHeight;
    orbit.target.addScaledVector(right, -dx * s).addScaledVector(up, dy * s);
  } else {
    orbit.azimuth -= dx * 0.4;
    orbit.elevation = Math.max(-89, Math.min(89, orbit.elevation + dy * 0.4));
  }
});
canvas.addEventListener('wheel', (e) => {
  e.preventDefault();
  orbit.distance *= Math.exp(e.deltaY * 0.001);
}, { passive: false });

// ---------------------------------------------------------------- render loop
function resize() {
  const w = canvas.clientWidth, h = canvas.clientHeight;
  if (canvas.width !== Math.floor(w * renderer.getPixelRatio()) ||
      canvas.height !== Math.floor(h * renderer.getPixelRatio())) {
    renderer.setSize(w, h, false);
  }
  camera.aspect = w / Math.max(1, h);
}

function render() {
  resize();
  if (camIndex >= 0) {
    placeModelCamera(M.cameras[camIndex]);
  } else {
    if (follow && nstore > 0) orbit.target.copy(bodies[TR.bodies[0]].position);
    placeFreeCamera();
  }
  camera.updateProjectionMatrix();
  camera.updateMatrixWorld();
  headlight.position.copy(camera.position);
  renderer.render(scene, camera);
}

// Projected pixel position of every body origin, for tests and scripts.
function probe() {
  const out = {};
  const v = new THREE.Vector3();
  for (let i = 1; i < M.nbody; i++) {
    v.copy(bodies[i].position).project(camera);
    out[i] = [(v.x + 1) / 2 * canvas.clientWidth, (1 - v.y) / 2 * canvas.clientHeight, v.z];
  }
  return out;
}

let last = performance.now();
function tick(now) {
  const dt = Math.min(0.1, (now - last) / 1000);
  last = now;
  if (playing) {
    simTime += dt * Number(speedSel.value);
    let t = frame;
    while (t + 1 < TR.T && times[t + 1] <= simTime) t++;
    if (t === TR.T - 1 && simTime > times[TR.T - 1]) { playing = false; syncPlay(); }
    if (t !== frame) setFrame(t);
  }
  render();
  requestAnimationFrame(tick);
}

setFrame(frame);
render();
window.mjxViewer = { setFrame, render, probe, frames: TR.T, batch: TR.B, errors };
const out = document.createElement('pre');
out.id = 'mjx-probe';
out.style.display = 'none';
out.textContent = JSON.stringify({ frame, bodies: probe(), errors,
  size: [canvas.clientWidth, canvas.clientHeight] });
document.body.appendChild(out);
requestAnimationFrame(tick);

"""Model + body-pose trajectory -> one self-contained HTML file (three.js vendored, no network)."""

from __future__ import annotations

import base64
import json
import pathlib
from collections.abc import Sequence

import numpy as np

from mjx_lite.types import Model

_HERE = pathlib.Path(__file__).resolve().parent
THREE_JS = _HERE / "vendor" / "three.module.min.js"
VIEWER_JS = _HERE / "viewer.js"
_DEFAULT_RGBA = np.array([0.5, 0.5, 0.5, 1.0], np.float32)
_BACKGROUND = "#20242c"

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
html, body {{ margin: 0; height: 100%; overflow: hidden; background: {bg};
  font: 13px system-ui, sans-serif; color: #ddd; }}
#view {{ position: absolute; inset: 0 0 40px 0; width: 100%; height: calc(100% - 40px);
  display: block; touch-action: none; }}
#bar {{ position: absolute; left: 0; right: 0; bottom: 0; height: 40px; display: flex;
  gap: 8px; align-items: center; padding: 0 8px; background: #15181e; box-sizing: border-box; }}
#frame {{ flex: 1; }}
#time {{ min-width: 150px; font-variant-numeric: tabular-nums; }}
#title {{ position: absolute; left: 8px; top: 6px; opacity: 0.7; pointer-events: none; }}
</style></head>
<body>
<canvas id="view"></canvas>
<div id="title">{title}</div>
<div id="bar">
  <button id="play">play</button>
  <input id="frame" type="range" min="0" max="0" value="0" step="1">
  <span id="time"></span>
  <label>speed <select id="speed">
    <option value="0.25">0.25x</option><option value="0.5">0.5x</option>
    <option value="1" selected>1x</option><option value="2">2x</option>
    <option value="4">4x</option></select></label>
  <select id="camera"><option value="-1">camera: free</option></select>
  <select id="batch"></select>
  <label><input id="sites" type="checkbox"> sites</label>
  <label><input id="follow" type="checkbox"> follow</label>
</div>
<script type="text/plain" id="three-src">{three}</script>
<script type="application/json" id="mjx-model">{model}</script>
<script type="application/octet-stream" id="mjx-traj">{traj}</script>
<script type="module">
{viewer}
</script>
</body></html>
"""


def _b64(a: np.ndarray, dtype) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype=dtype).tobytes()).decode("ascii")


def body_poses(trajectory) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Extracts body poses from a trajectory.

    Args:
      trajectory: a Data stacked over time (``xpos`` (T, nbody, 3), or (T, B, nbody, 3) for a
        scan over a vmapped step), a sequence of Data (each unbatched or batched), or a tuple
        ``(xpos, xquat)`` or ``(xpos, xquat, time)`` of arrays with those shapes.

    Returns:
      xpos (T, B, nbody, 3), xquat (T, B, nbody, 4) as float64, time (T,) or None.
    """
    time = None
    if isinstance(trajectory, tuple) and not hasattr(trajectory, "xpos"):
        xpos, xquat = np.asarray(trajectory[0]), np.asarray(trajectory[1])
        if len(trajectory) > 2:
            time = np.asarray(trajectory[2])
    elif isinstance(trajectory, Sequence):
        xpos = np.stack([np.asarray(d.xpos) for d in trajectory])
        xquat = np.stack([np.asarray(d.xquat) for d in trajectory])
        time = np.stack([np.asarray(d.time) for d in trajectory])
    else:
        xpos, xquat = np.asarray(trajectory.xpos), np.asarray(trajectory.xquat)
        time = np.asarray(trajectory.time)
    if xpos.ndim == 2:  # a single Data: one frame
        xpos, xquat = xpos[None], xquat[None]
        time = None if time is None else np.reshape(time, (1,))
    if xpos.ndim == 3:
        xpos, xquat = xpos[:, None], xquat[:, None]
    if xpos.ndim != 4 or xpos.shape[-1] != 3 or xquat.shape[:-1] != xpos.shape[:-1]:
        raise ValueError(f"trajectory xpos must be (T, [B,] nbody, 3); got {xpos.shape}")
    if time is not None:
        time = np.asarray(time, np.float64)
        time = time.reshape(time.shape[0], -1)[:, 0]  # batch members share the clock
    return xpos.astype(np.float64), xquat.astype(np.float64), time


def _shape(m: Model, kind: str, i: int) -> dict:
    """One geom or site as the viewer draws it: type, size, body, local pose, colour."""
    rgba = np.asarray(getattr(m, f"{kind}_rgba")[i], np.float32)
    matid = int(getattr(m, f"{kind}_matid")[i])
    # MuJoCo's renderer takes the material's colour unless the element set its own rgba.
    if matid >= 0 and np.array_equal(rgba, _DEFAULT_RGBA):
        rgba = np.asarray(m.mat_rgba[matid], np.float32)
    return {
        "type": int(getattr(m, f"{kind}_type")[i]),
        "size": np.asarray(getattr(m, f"{kind}_size")[i], float).round(6).tolist(),
        "body": int(getattr(m, f"{kind}_bodyid")[i]),
        "pos": np.asarray(getattr(m, f"{kind}_pos")[i], float).round(7).tolist(),
        "quat": np.asarray(getattr(m, f"{kind}_quat")[i], float).round(7).tolist(),
        "rgba": rgba.round(4).tolist(),
        "dataid": int(getattr(m, f"{kind}_dataid")[i]),
    }


def _names(m: Model, kind: str) -> tuple[str, ...]:
    return dict(m.names).get(kind, ()) if m.names else ()


def _model_json(m: Model, xpos0: np.ndarray, show_sites: bool) -> dict:
    geoms = [_shape(m, "geom", i) for i in range(m.ngeom)]
    sites = [_shape(m, "site", i) for i in range(m.nsite)]
    used_mesh = sorted({g["dataid"] for g in geoms + sites if g["type"] == 7 and g["dataid"] >= 0})
    meshes = {}
    for k in used_mesh:
        va, vn = int(m.mesh_vertadr[k]), int(m.mesh_vertnum[k])
        fa, fn = int(m.mesh_faceadr[k]), int(m.mesh_facenum[k])
        meshes[k] = {"vert": _b64(np.asarray(m.mesh_vert)[va:va + vn], "<f4"),
                     "face": _b64(np.asarray(m.mesh_face)[fa:fa + fn], "<i4")}
    hfields = {}
    for k in sorted({g["dataid"] for g in geoms if g["type"] == 1 and g["dataid"] >= 0}):
        nrow, ncol, adr = int(m.hfield_nrow[k]), int(m.hfield_ncol[k]), int(m.hfield_adr[k])
        hfields[k] = {"nrow": nrow, "ncol": ncol,
                      "size": np.asarray(m.hfield_size[k], float).tolist(),
                      "data": _b64(np.asarray(m.hfield_data)[adr:adr + nrow * ncol], "<f4")}
    # Extent of the scene at frame 0: bodies plus geom bounding radii, for the default view.
    pts = xpos0[1:] if m.nbody > 1 else np.zeros((1, 3))
    rbound = [float(r) for r, t in zip(np.asarray(m.geom_rbound), geoms) if t["type"] != 0]
    lo, hi = pts.min(0), pts.max(0)
    radius = max(0.5 * float(np.linalg.norm(hi - lo)) + (max(rbound) if rbound else 0.1), 0.2)
    cam_names = _names(m, "cam")
    cameras = []
    for i in range(m.ncam):
        cameras.append({
            "name": cam_names[i] if i < len(cam_names) else "",
            "body": int(m.cam_bodyid[i]), "mode": int(m.cam_mode[i]),
            "target": int(m.cam_targetbodyid[i]) if int(m.cam_mode[i]) >= 3 else -1,
            "pos": np.asarray(m.cam_pos[i], float).tolist(),
            "quat": np.asarray(m.cam_quat[i], float).tolist(),
            "pos0": (np.asarray(m.cam_pos0[i], float) - xpos0[int(m.cam_bodyid[i])]).tolist(),
            "mat0": np.asarray(m.cam_mat0[i], float).reshape(9).tolist(),
            "fovy": float(m.cam_fovy[i]),
        })
    return {
        "nbody": int(m.nbody), "geoms": geoms, "sites": sites, "showSites": show_sites,
        "meshes": {str(k): v for k, v in meshes.items()},
        "hfields": {str(k): v for k, v in hfields.items()},
        "cameras": cameras, "background": _BACKGROUND,
        "extent": 10.0 * radius, "checker": max(radius / 2, 0.25),
        "view": {"target": (0.5 * (lo + hi)).tolist(), "distance": 3.2 * radius,
                 "azimuth": -60.0, "elevation": 20.0},
    }


def _moving_bodies(m: Model, xpos: np.ndarray, xquat: np.ndarray) -> np.ndarray:
    """Bodies whose pose changes in any frame or batch member; the others stay at frame 0."""
    moving = (np.ptp(xpos, axis=(0, 1)).max(-1) > 0) | (np.ptp(xquat, axis=(0, 1)).max(-1) > 0)
    moving[0] = False
    return np.nonzero(moving)[0]


def html(m: Model, trajectory, *, dt: float | None = None, quantize: bool = False,
         sites: bool = False, title: str = "mjx_lite") -> str:
    """Returns the viewer page for ``trajectory`` of model ``m`` as one HTML string.

    Args:
      m: the Model the trajectory was simulated with.
      trajectory: see :func:`body_poses` (Data stacked over time, list of Data, or arrays).
      dt: seconds between frames when the trajectory carries no time (default m.opt.timestep).
      quantize: store poses as int16 (positions scaled to the trajectory's bounding box,
        quaternions to [-1, 1]), half the size of float32.
      sites: show sites initially (a checkbox toggles them).
      title: page title.

    Returns:
      the HTML text; it needs no network and no server when opened.
    """
    xpos, xquat, time = body_poses(trajectory)
    if xpos.shape[2] != m.nbody:
        raise ValueError(f"trajectory has {xpos.shape[2]} bodies; model has {m.nbody}")
    nframe, nbatch = xpos.shape[:2]
    if time is None or (nframe > 1 and not np.all(np.diff(time) >= 0)):
        step = float(np.asarray(m.opt.timestep)) if dt is None else float(dt)
        time = np.arange(nframe) * step
    model = _model_json(m, xpos[0, 0], sites)
    # Static bodies are fixed where frame 0 has them; only the others travel per frame.
    stored = _moving_bodies(m, xpos, xquat)
    static = sorted(set(range(1, m.nbody)) - set(stored.tolist()))
    model["static"] = [[i] + xpos[0, 0, i].tolist() + xquat[0, 0, i].tolist() for i in static]
    poses = np.concatenate([xpos[:, :, stored], xquat[:, :, stored]], axis=-1)
    traj = {"T": int(nframe), "B": int(nbatch), "bodies": stored.tolist(),
            "times": _b64(time, "<f4")}
    if quantize and poses.size:
        lo = xpos[:, :, stored].reshape(-1, 3).min(0)
        scale = np.maximum(xpos[:, :, stored].reshape(-1, 3).max(0) - lo, 1e-9) / 65535.0
        q = np.empty(poses.shape, np.int16)
        q[..., :3] = np.round((poses[..., :3] - lo) / scale - 32768).clip(-32768, 32767)
        q[..., 3:] = np.round(poses[..., 3:] * 32767).clip(-32767, 32767)
        traj.update(format="i16", lo=lo.tolist(), scale=scale.tolist())
        data = _b64(q, "<i2")
    else:
        traj["format"] = "f32"
        data = _b64(poses, "<f4")
    model["traj"] = traj
    return _PAGE.format(
        title=_escape(title), bg=_BACKGROUND, three=THREE_JS.read_text(encoding="utf-8"),
        model=json.dumps(model, separators=(",", ":")).replace("</", "<\\/"), traj=data,
        viewer=VIEWER_JS.read_text(encoding="utf-8"))


def save_html(m: Model, trajectory, path, **kwargs) -> pathlib.Path:
    """Writes :func:`html` of ``trajectory`` to ``path``; returns the path."""
    path = pathlib.Path(path)
    path.write_text(html(m, trajectory, **kwargs), encoding="utf-8")
    return path


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


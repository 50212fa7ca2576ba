"""mjx_lite.viewer: page structure, every geom type, trajectory size (CI tier, pure Python);
headless-Chromium screenshots of real rollouts (acceptance tier)."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import jax
import numpy as np
import pytest

import mjx_lite
from mjx_lite import DisableBit, viewer
from mjx_lite.compiler.png import decode_png

from conftest import MODELS_DIR, REPO_ROOT

MAX_BYTES_10K_HUMANOID = 10_000_000
# int16 positions span the trajectory's box in 65535 steps; quaternions in 1/32767.
QUANT_POS_TOL = 1e-4
QUANT_QUAT_TOL = 2e-5

ALL_TYPES_XML = """
<mujoco>
  <option><flag contact="disable"/></option>
  <asset>
    <material name="red" rgba="0.9 0.1 0.1 1"/>
    <mesh name="tet" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/>
    <hfield name="hf" nrow="3" ncol="4" size="1 1 0.2 0.1"
            elevation="0 1 0 1  1 0 1 0  0 0 1 1"/>
  </asset>
  <worldbody>
    <geom type="plane" size="0 0 1" rgba="0.3 0.4 0.5 1"/>
    <geom type="hfield" hfield="hf" pos="3 0 0"/>
    <body pos="0 0 1">
      <freejoint/>
      <geom type="sphere" size="0.1" material="red"/>
      <geom type="capsule" size="0.05 0.2" pos="0.3 0 0"/>
      <geom type="ellipsoid" size="0.1 0.2 0.3" pos="0.6 0 0"/>
      <geom type="cylinder" size="0.1 0.2" pos="0.9 0 0"/>
      <geom type="box" size="0.1 0.2 0.3" pos="1.2 0 0"/>
      <geom type="mesh" mesh="tet" pos="1.5 0 0"/>
      <site name="s" size="0.02" rgba="0 1 0 1"/>
    </body>
    <camera name="fixed" pos="0 -3 1" xyaxes="1 0 0 0 0.3 1"/>
  </worldbody>
</mujoco>
"""


def _page_parts(text: str) -> tuple[dict, bytes]:
    model = re.search(r'<script type="application/json" id="mjx-model">(.*?)</script>', text,
                      re.S).group(1)
    traj = re.search(r'id="mjx-traj">(.*?)</script>', text, re.S).group(1)
    return json.loads(model.replace("<\\/", "</")), base64.b64decode(traj.strip())


def decode_poses(text: str) -> tuple[np.ndarray, list[int]]:
    """(T, B, nstored, 3) body positions a page stores (float32 or int16), and their body ids."""
    model, raw = _page_parts(text)
    traj = model["traj"]
    shape = (traj["T"], traj["B"], len(traj["bodies"]), 7)
    if traj["format"] == "f32":
        return np.frombuffer(raw, "<f4").reshape(shape)[..., :3].astype(float), traj["bodies"]
    q = np.frombuffer(raw, "<i2").reshape(shape)[..., :3].astype(float)
    return np.asarray(traj["lo"]) + (q + 32768) * np.asarray(traj["scale"]), traj["bodies"]


def _fake_poses(nframe: int, nbatch: int, nbody: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    xpos = np.cumsum(0.01 * rng.normal(size=(nframe, nbatch, nbody, 3)), axis=0)
    xquat = rng.normal(size=(nframe, nbatch, nbody, 4))
    xquat /= np.linalg.norm(xquat, axis=-1, keepdims=True)
    xpos[:, :, 0], xquat[:, :, 0] = 0.0, [1.0, 0, 0, 0]  # the world body stays put
    return xpos, xquat


def test_page_is_self_contained_and_lists_every_geom_type():
    m = mjx_lite.load_model_from_string(ALL_TYPES_XML)
    d = mjx_lite.forward(m, mjx_lite.make_data(m))
    moved = d.replace(time=d.time + 0.1, xpos=d.xpos.at[1, 2].add(-0.1))
    text = viewer.html(m, [d, moved], sites=True, title="all <types>")
    # No external resources: every script is inline and nothing is fetched.
    assert "<script src" not in text and "<link" not in text
    assert "three-src" in text and "all &lt;types&gt;" in text
    model, raw = _page_parts(text)
    assert sorted(g["type"] for g in model["geoms"]) == list(range(8))
    sphere = next(g for g in model["geoms"] if g["type"] == 2)
    assert sphere["rgba"] == pytest.approx([0.9, 0.1, 0.1, 1.0])  # the material's colour
    mesh = model["meshes"][str(next(g for g in model["geoms"] if g["type"] == 7)["dataid"])]
    assert np.frombuffer(base64.b64decode(mesh["vert"]), "<f4").size == 12
    hf = model["hfields"]["0"]
    assert (hf["nrow"], hf["ncol"]) == (3, 4)
    assert np.frombuffer(base64.b64decode(hf["data"]), "<f4").size == 12
    assert model["sites"][0]["type"] == 2 and model["showSites"]
    assert model["cameras"][0]["name"] == "fixed"
    traj = model["traj"]
    assert (traj["T"], traj["B"], traj["bodies"], traj["format"]) == (2, 1, [1], "f32")
    assert len(raw) == 2 * 1 * 1 * 7 * 4


def test_batched_and_quantized_trajectory_decodes():
    m = mjx_lite.load_model(str(MODELS_DIR / "humanoid_like.xml"))
    xpos, xquat = _fake_poses(50, 3, m.nbody)
    times = np.arange(50) * 0.01
    model, raw = _page_parts(viewer.html(m, (xpos, xquat, times), quantize=True))
    traj = model["traj"]
    assert (traj["T"], traj["B"], traj["format"]) == (50, 3, "i16")
    stored = traj["bodies"]
    q = np.frombuffer(raw, "<i2").reshape(50, 3, len(stored), 7).astype(float)
    pos = np.asarray(traj["lo"]) + (q[..., :3] + 32768) * np.asarray(traj["scale"])
    np.testing.assert_allclose(pos, xpos[:, :, stored], atol=QUANT_POS_TOL)
    np.testing.assert_allclose(q[..., 3:] / 32767, xquat[:, :, stored], atol=QUANT_QUAT_TOL)
    t = np.frombuffer(base64.b64decode(traj["times"]), "<f4")
    np.testing.assert_allclose(t, times, atol=1e-6)


def test_stacked_data_and_static_bodies():
    m = mjx_lite.load_model(str(MODELS_DIR / "humanoid_like.xml"))
    d = mjx_lite.make_data(m)
    stacked = jax.tree_util.tree_map(lambda x: np.stack([x, x]), d)
    model, _ = _page_parts(viewer.html(m, stacked))
    # Nothing moves between the two identical frames: every body is stored once, as static.
    assert model["traj"]["bodies"] == [] and len(model["static"]) == m.nbody - 1
    with pytest.raises(ValueError, match="bodies"):
        viewer.html(m, _fake_poses(3, 1, m.nbody + 1))


def test_10k_step_humanoid_file_size(tmp_path):
    m = mjx_lite.load_model(str(MODELS_DIR / "humanoid_like.xml"))
    xpos, xquat = _fake_poses(10_000, 1, m.nbody)
    full = viewer.save_html(m, (xpos, xquat), tmp_path / "f32.html").stat().st_size
    small = viewer.save_html(m, (xpos, xquat), tmp_path / "i16.html", quantize=True)
    assert full < MAX_BYTES_10K_HUMANOID
    assert small.stat().st_size < 0.6 * full


# ---------------------------------------------------------------- acceptance: real browser

WINDOW = (800, 600)
# The canvas is pinned to this size: --dump-dom and --screenshot lay the window out differently.
CANVAS = "800x560"
# A body counts as drawn when a pixel near its projected origin differs from the render with
# every body hidden by more than this (0..255 summed over RGB).
PIXEL_DIFF = 40
PATCH = 3
# Contacts on: no body origin sinks below the floor (z = 0) by more than this. Without contacts
# a body falls 1.2 m in 0.5 s, so this tells that the floor held.
MIN_BODY_Z = -0.05
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  # WebGL on the CPU (SwiftShader): there is no GPU in CI.
                  "--enable-unsafe-swiftshader", "--enable-logging=stderr", "--v=0",
                  f"--window-size={WINDOW[0]},{WINDOW[1]}", "--virtual-time-budget=8000",
                  # The network is off: any fetch would fail and show as a console error.
                  "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "headless Chromium is required: apt-get install -y chromium (.ci/run does it)"
    return exe


def _browse(page: pathlib.Path, fragment: str, screenshot: pathlib.Path | None):
    """Opens page#fragment; returns (screenshot pixels or DOM text, console messages)."""
    with tempfile.TemporaryDirectory() as profile:
        mode = [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
        out = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *mode,
                              f"{page.as_uri()}#{fragment}"], capture_output=True, text=True,
                             timeout=120, env={**os.environ, "HOME": profile})
    console = [line for line in out.stderr.splitlines()
               if ":CONSOLE" in line and "GL Driver Message" not in line]
    if screenshot:
        samples = decode_png(screenshot.read_bytes(), str(screenshot))[0]
        return samples[..., :3].astype(int), console
    return out.stdout, console


def _rollout(m, nstep: int):
    """Body poses of a rollout with contacts on (a pair without a collider raises
    NotImplementedError naming it: the bundled models must not have one)."""
    assert not m.opt.disableflags & (DisableBit.CONTACT | DisableBit.CONSTRAINT)
    d = mjx_lite.make_data(m)
    if m.nu:
        d = d.replace(ctrl=0.3 * np.ones(m.nu))

    @jax.jit
    def run(d):
        def body(d, _):
            d = mjx_lite.step(m, d)
            return d, (d.xpos, d.xquat, d.time)

        return jax.lax.scan(body, d, None, length=nstep)[1]

    return jax.device_get(run(d))


def _check_page(page: pathlib.Path, last: int, report: list[str], label: str):
    shots = {}
    for frame in (0, last):
        dom, console = _browse(page, f"frame={frame}&size={CANVAS}", None)
        assert not console, console
        probe = json.loads(re.search(r'id="mjx-probe"[^>]*>(.*?)</pre>', dom, re.S).group(1))
        assert probe["errors"] == [] and probe["frame"] == frame
        img, console = _browse(page, f"frame={frame}&size={CANVAS}",
                               page.with_suffix(f".{frame}.png"))
        assert not console, console
        bg, _ = _browse(page, f"frame={frame}&size={CANVAS}&hide=bodies",
                        page.with_suffix(f".{frame}bg.png"))
        diff = np.abs(img - bg).sum(-1)
        drawn = []
        for body, (x, y, z) in probe["bodies"].items():
            x, y = int(round(x)), int(round(y))
            inside = 0 <= x < probe["size"][0] and 0 <= y < probe["size"][1] and z < 1
            if inside and diff[max(0, y - PATCH):y + PATCH + 1,
                               max(0, x - PATCH):x + PATCH + 1].max() > PIXEL_DIFF:
                drawn.append(int(body))
        assert len(drawn) >= 3, (frame, drawn)
        shots[frame] = img
        report.append(f"{label} frame {frame}: bodies drawn at their projections "
                      f"{len(drawn)}/{len(probe['bodies'])}")
    changed = float((np.abs(shots[0] - shots[last]).sum(-1) > PIXEL_DIFF).mean())
    assert changed > 0.001
    report.append(f"{label}: slider frame 0 -> {last} changes {100 * changed:.2f}% of pixels; "
                  "console errors: 0")


@pytest.mark.acceptance
def test_browser_humanoid_and_mesh_scene(tmp_path):
    report = []
    # Contacts on: the mesh scene's upper bodies land on the lower ones within 150 steps.
    for name, nstep in (("humanoid_like.xml", 100), ("mesh_scene.xml", 150)):
        m = mjx_lite.load_model(str(MODELS_DIR / name))
        page = viewer.save_html(m, _rollout(m, nstep), tmp_path / f"{name}.html", sites=True)
        z = decode_poses(page.read_text())[0][..., 2].min()
        assert z > MIN_BODY_Z, z
        report.append(f"{name}: {nstep} steps, contacts on, lowest body origin z = {z:.3f} m, "
                      f"{page.stat().st_size / 1e6:.2f} MB")
        _check_page(page, nstep - 1, report, name)
    write_report("browser", report)


@pytest.mark.acceptance
def test_10k_step_humanoid_rollout_size(tmp_path):
    m = mjx_lite.load_model(str(MODELS_DIR / "humanoid_like.xml"))
    traj = _rollout(m, 10_000)
    full = viewer.save_html(m, traj, tmp_path / "f32.html")
    small = viewer.save_html(m, traj, tmp_path / "i16.html", quantize=True).stat().st_size
    z = decode_poses(full.read_text())[0][..., 2].min()
    assert z > MIN_BODY_Z, z
    full = full.stat().st_size
    assert full < MAX_BYTES_10K_HUMANOID
    write_report("size", [f"humanoid_like 10,000 steps (contacts on, lowest body origin z = "
                          f"{z:.3f} m): float32 {full / 1e6:.2f} MB, int16 {small / 1e6:.2f} MB "
                          "(limit 10 MB)"])


def write_report(section: str, lines: list[str]) -> None:
    """Replaces one ``## section`` of tests/acceptance/viewer.txt."""
    path = REPO_ROOT / "tests" / "acceptance" / "viewer.txt"
    old = path.read_text().split("\n## ") if path.exists() else []
    keep = [s for s in old if s and not s.startswith(section + "\n") and not s.startswith("#")]
    body = "\n".join(f"## {s}" if not s.startswith("## ") else s for s in keep)
    text = "# viewer acceptance (tests/test_viewer.py, -m acceptance)\n"
    path.write_text(text + (body.rstrip() + "\n" if body else "")
                    + f"## {section}\n" + "\n".join(lines) + "\n")

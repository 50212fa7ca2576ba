"""Parity of mjx_lite.ray with mujoco.mj_ray (API reference, "Ray casting") on a scene with
every geom type (tests/assets/ray_scene.xml), and its JAX contract (vmap, float32, grad)."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import interop
from mjx_lite.ray import ray

jax.config.update("jax_enable_x64", True)

SCENE = pathlib.Path(__file__).parent / "assets" / "ray_scene.xml"
ACCEPTANCE_FILE = pathlib.Path(__file__).parent / "acceptance" / "ray.txt"
# Same formulas in the same order up to float64 rounding (measured 1.1e-14 absolute).
RTOL = 1e-10
# float32 distances: rounding of the quadratic's roots.
RTOL_F32 = 1e-3


@pytest.fixture(scope="module")
def scene():
    mjm = mujoco.MjModel.from_xml_path(str(SCENE))
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(1)
    mjd.qpos[:] = mjm.qpos0 + 0.3 * rng.normal(size=mjm.nq)
    mujoco.mj_forward(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    return mjm, mjd, m, d


def _rays(mjm, mjd, n, seed):
    """Rays from around the scene, most aimed near a geom, some in random directions."""
    rng = np.random.default_rng(seed)
    pnt = rng.uniform(-2, 2, size=(n, 3))
    pnt[:, 2] = rng.uniform(-0.3, 1.5, size=n)
    tgt = mjd.geom_xpos[rng.integers(0, mjm.ngeom, size=n)] + 0.3 * rng.normal(size=(n, 3))
    vec = (tgt - pnt) * rng.uniform(0.5, 2, size=(n, 1))
    vec[: n // 10] = rng.normal(size=(n // 10, 3))
    return pnt, vec


def _mj_rays(mjm, mjd, pnt, vec, geomgroup=None, flg_static=1, bodyexclude=-1):
    dist, gid = np.zeros(len(pnt)), np.zeros(len(pnt), int)
    g = np.zeros(1, np.int32)
    for i in range(len(pnt)):
        dist[i] = mujoco.mj_ray(mjm, mjd, pnt[i], vec[i], geomgroup, flg_static, bodyexclude, g)
        gid[i] = g[0]
    return dist, gid


def _compare(ours, ref):
    dist, gid = (np.asarray(x) for x in ours)
    rdist, rgid = ref
    wrong_id = np.nonzero(gid != rgid)[0]
    assert not wrong_id.size, [(i, gid[i], rgid[i], dist[i], rdist[i]) for i in wrong_id[:5]]
    err = np.abs(dist - rdist).max() / np.abs(rdist).max()
    assert err <= RTOL, err
    return err


def test_random_rays_every_geom_type(scene):
    """200 rays, bodyexclude traced (one compile for all bodies), against mj_ray."""
    mjm, mjd, m, d = scene
    pnt, vec = _rays(mjm, mjd, 200, seed=0)
    f = jax.jit(jax.vmap(lambda p, v, b: ray(m, d, p, v, bodyexclude=b), (0, 0, None)))
    hit_types = set()
    for body in (-1, 1, 3):
        ref = _mj_rays(mjm, mjd, pnt, vec, bodyexclude=body)
        _compare(f(pnt, vec, body), ref)
        hit_types |= set(mjm.geom_type[ref[1][ref[1] >= 0]].tolist())
    assert hit_types == set(range(8)), hit_types  # plane .. mesh all hit


def test_geomgroup_and_static(scene):
    mjm, mjd, m, d = scene
    pnt, vec = _rays(mjm, mjd, 100, seed=1)
    group = np.array([1, 0, 1, 0, 1, 1], np.uint8)
    f = jax.jit(jax.vmap(lambda p, v: ray(m, d, p, v, geomgroup=tuple(group),
                                          flg_static=False)))
    _compare(f(pnt, vec), _mj_rays(mjm, mjd, pnt, vec, group, 0))


def test_float32_and_grad(scene):
    mjm, mjd, m, d = scene
    pnt, vec = _rays(mjm, mjd, 20, seed=2)
    rdist, rgid = _mj_rays(mjm, mjd, pnt, vec)
    d32 = d.replace(geom_xpos=d.geom_xpos.astype(jp.float32),
                    geom_xmat=d.geom_xmat.astype(jp.float32))
    dist, gid = jax.jit(jax.vmap(lambda p, v: ray(m, d32, p, v)))(pnt, vec)
    assert dist.dtype == jp.float32
    same = np.asarray(gid) == rgid
    assert same.mean() >= 0.9  # grazing rays may flip at float32
    np.testing.assert_allclose(np.asarray(dist)[same], rdist[same], atol=RTOL_F32 * 3)
    i = int(np.nonzero(rgid >= 0)[0][0])
    g = jax.jit(jax.grad(lambda p: ray(m, d, p, vec[i])[0]))(jp.asarray(pnt[i]))
    assert np.all(np.isfinite(np.asarray(g)))


@pytest.mark.acceptance
def test_ray_acceptance(scene):
    """1,000 random rays (and 1,000 more with group / static / body exclusions) vs mj_ray."""
    mjm, mjd, m, d = scene
    pnt, vec = _rays(mjm, mjd, 1000, seed=3)
    f = jax.jit(jax.vmap(lambda p, v, b: ray(m, d, p, v, bodyexclude=b), (0, 0, None)))
    ref = _mj_rays(mjm, mjd, pnt, vec)
    err = _compare(f(pnt, vec, -1), ref)
    counts = np.bincount(mjm.geom_type[ref[1][ref[1] >= 0]], minlength=8)
    group = np.array([0, 1, 1, 1, 0, 1], np.uint8)
    g = jax.jit(jax.vmap(lambda p, v: ray(m, d, p, v, geomgroup=tuple(group),
                                          flg_static=False, bodyexclude=3)))
    err2 = _compare(g(pnt, vec), _mj_rays(mjm, mjd, pnt, vec, group, 0, 3))
    names = [mujoco.mjtGeom(t).name.removeprefix("mjGEOM_").lower() for t in range(8)]
    ACCEPTANCE_FILE.write_text(
        "# mjx_lite.ray vs mujoco.mj_ray, tests/assets/ray_scene.xml, float64\n"
        f"1000 rays: geom ids equal: yes; hits {int((ref[1] >= 0).sum())} "
        f"({', '.join(f'{n} {c}' for n, c in zip(names, counts))}); "
        f"max |dist - ref| / max|ref| = {err:.1e}\n"
        f"1000 rays, geomgroup 011101, flg_static 0, bodyexclude 3: ids equal: yes; "
        f"max rel error {err2:.1e}\n")

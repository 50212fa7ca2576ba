"""mjx_lite.interop: Data -> MjData -> Data is exact in float64, and MjData's state survives."""

from __future__ import annotations

import subprocess
import sys

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite import interop

from conftest import MODELS_DIR

# Exact: the round trip only copies and re-packs float64 values.
TOL = 0.0
# Not part of the round trip: MuJoCo allocates contacts, the island partition and constraint
# rows per step (ncon, nisland, nefc), mjx_lite keeps static budgets with masks; collision and
# make_constraint refill them.
NOT_COPIED = ("contact", "ncon", "nisland", "tree_island", "dof_island")
NOT_COPIED_PREFIX = "efc_"


def _mujoco_state(name: str, nstep: int = 15):
    mjm = mujoco.MjModel.from_xml_path(str(MODELS_DIR / name))
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(0)
    mjd.qvel[:] = 0.3 * rng.normal(size=mjm.nv)
    mjd.ctrl[:] = rng.uniform(-0.5, 0.5, size=mjm.nu)
    for _ in range(nstep):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return mjm, mjd


def _assert_same_data(a, b):
    for name in a.fields():
        if name in NOT_COPIED or name.startswith(NOT_COPIED_PREFIX):
            continue
        for x, y in zip(jax.tree_util.tree_leaves(getattr(a, name)),
                        jax.tree_util.tree_leaves(getattr(b, name))):
            x, y = np.asarray(x), np.asarray(y)
            assert x.shape == y.shape, name
            err = np.abs(x.astype(float) - y.astype(float))
            if err.size and err.max() > TOL:
                worst = np.unravel_index(np.argmax(err), err.shape)
                raise AssertionError(f"{name}: worst index {worst}: {x[worst]} != {y[worst]}")


def test_round_trip_through_mjdata_is_exact():
    for name in ("humanoid_like.xml", "tendon_arm.xml"):
        mjm, mjd = _mujoco_state(name)
        m = interop.model_from_mujoco(mjm)
        d = interop.data_from_mujoco(mjm, mjd, m)
        assert d.qpos.dtype == np.float64
        mjd2 = interop.data_to_mujoco(m, d, mjm)
        _assert_same_data(d, interop.data_from_mujoco(mjm, mjd2, m))
        for field in ("qpos", "qvel", "act", "ctrl", "qacc", "xpos", "xquat", "M",
                      "qfrc_bias", "actuator_force", "ten_length", "ten_J"):
            np.testing.assert_array_equal(getattr(mjd2, field), getattr(mjd, field), field)
        assert mjd2.time == mjd.time


def test_round_trip_of_an_mjx_lite_state():
    m = mjx_lite.load_model(str(MODELS_DIR / "double_pendulum.xml"))
    mjm = mujoco.MjModel.from_xml_path(str(MODELS_DIR / "double_pendulum.xml"))
    d = mjx_lite.make_data(m)
    d = d.replace(qvel=d.qvel + 0.1, ctrl=d.ctrl + 0.2)
    d = mjx_lite.forward(m, d)
    mjd = interop.data_to_mujoco(m, d, mjm)
    _assert_same_data(d, interop.data_from_mujoco(mjm, mjd, m))
    # MuJoCo's own forward from the copied state agrees with ours on the positions.
    mujoco.mj_forward(mjm, mjd)
    np.testing.assert_allclose(mjd.xpos, np.asarray(d.xpos), atol=1e-9)


def test_import_mjx_lite_does_not_import_mujoco():
    code = "import sys, mjx_lite, mjx_lite.viewer, mjx_lite.cli; print('mujoco' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.acceptance
def test_round_trip_on_every_bundled_model():
    """Data -> MjData -> Data on every bundled model after 15 MuJoCo steps: every value
    compared (contacts and efc_* rows excepted, see NOT_COPIED) and none differs."""
    from test_viewer import write_report

    report, total = [], 0
    paths = sorted(MODELS_DIR.glob("*.xml"))
    for path in paths:
        mjm, mjd = _mujoco_state(path.name)
        m = interop.model_from_mujoco(mjm)
        d = interop.data_from_mujoco(mjm, mjd, m)
        assert d.qpos.dtype == np.float64 and d.xpos.dtype == np.float64
        back = interop.data_from_mujoco(mjm, interop.data_to_mujoco(m, d, mjm), m)
        _assert_same_data(d, back)
        fields = [n for n in d.fields()
                  if n not in NOT_COPIED and not n.startswith(NOT_COPIED_PREFIX)]
        n = sum(np.size(x) for f in fields for x in jax.tree_util.tree_leaves(getattr(d, f)))
        worst = max((float(np.max(np.abs(np.asarray(x, float) - np.asarray(y, float))))
                     for f in fields
                     for x, y in zip(jax.tree_util.tree_leaves(getattr(d, f)),
                                     jax.tree_util.tree_leaves(getattr(back, f)))
                     if np.size(x)), default=0.0)
        total += n
        report.append(f"{path.name}: {len(fields)} Data fields, {n} values, float64, "
                      f"max |difference| {worst:g}")
    report.insert(0, f"interop round trip Data -> MjData -> Data on {len(paths)} bundled "
                     f"models: {total} values, all bit-identical (tolerance {TOL:g})")
    write_report("interop", report)

"""mjx_lite.interop: Data -> MjData -> Data is exact in float64, and MjData's state survives."""

from __future__ import annotations

import subprocess
import sys

import jax
import mujoco
import numpy as np

import mjx_lite
from mjx_lite import interop

from conftest import MODELS_DIR

# Exact: the round trip only copies and re-packs float64 values.
TOL = 0.0
# Not part of the round trip: MuJoCo allocates contacts and constraint rows per step (ncon, nefc),
# mjx_lite keeps static budgets with masks; collision and make_constraint refill both.
NOT_COPIED = ("contact", "ncon")
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

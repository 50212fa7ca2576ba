"""const.set_const vs MuJoCo 4.0 mj_setConst after randomizing masses and inertias."""

from __future__ import annotations

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import interop
from mjx_lite.const import set_const

from conftest import GYM_ASSETS
from parity import assert_close

RTOL = 1e-10
FIELDS = ("body_subtreemass", "dof_M0", "dof_invweight0", "body_invweight0",
          "tendon_invweight0", "tendon_length0", "actuator_acc0", "actuator_length0",
          "cam_pos0", "cam_poscom0", "cam_mat0", "light_pos0", "light_poscom0", "light_dir0")


@pytest.mark.parametrize("name", ["hopper", "humanoid"])
def test_set_const_matches_mujoco(name):
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / f"{name}.xml"))
    # the compile-time mean inertia (MuJoCo 4.0's mj_setConst leaves stat.meaninertia as is)
    assert_close("stat.meaninertia", set_const(interop.model_from_mujoco(mjm)).stat.meaninertia,
                 mjm.stat.meaninertia, RTOL)
    rng = np.random.default_rng(0)
    mjm.body_mass[1:] *= rng.uniform(0.5, 2.0, size=mjm.nbody - 1)
    mjm.body_inertia[1:] *= rng.uniform(0.5, 2.0, size=(mjm.nbody - 1, 1))
    m = set_const(interop.model_from_mujoco(mjm))
    mujoco.mj_setConst(mjm, mujoco.MjData(mjm))
    for f in FIELDS:
        ours = np.asarray(getattr(m, f))
        assert_close(f, ours.reshape(-1), np.asarray(getattr(mjm, f)).reshape(-1), RTOL)


def test_set_const_is_differentiable():
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "hopper.xml"))
    m = interop.model_from_mujoco(mjm)

    def f(mass):
        return jp.sum(set_const(m.replace(body_mass=mass)).actuator_acc0)

    g = jax.grad(f)(m.body_mass)
    assert np.all(np.isfinite(np.asarray(g))) and float(jp.abs(g).sum()) > 0

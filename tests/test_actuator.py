"""actuator.fwd_actuation vs MuJoCo 4.0 mj_fwdActuation on MuJoCo-filled Data (float64)."""

from __future__ import annotations

import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import actuator, interop
from mjx_lite.passive import passive

from parity import assert_close

RTOL = 1e-8

# every dyn/gain/bias type; ctrlrange, forcerange, actrange, actearly, joint and tendon
# actuatorfrcrange, actuatorgravcomp, actuator groups (1 and 2 are disabled in some cases)
ACTUATED = """
<mujoco><option timestep="0.01"/><worldbody>
  <body><joint name="j0" type="hinge" actuatorfrcrange="-0.5 0.8"/>
    <geom size=".1" pos="0.2 0 0"/>
    <body pos="0.4 0 0" gravcomp="0.6">
      <joint name="j1" type="hinge" axis="0 1 0" range="-1 1" actuatorgravcomp="true"/>
      <geom size=".1" pos="0.1 0 0"/>
      <body pos="0.3 0 0"><joint name="j2" type="slide" axis="1 0 0"/>
        <geom size=".05" pos="0.1 0 0" mass="0.3"/></body>
    </body>
  </body>
</worldbody>
<tendon>
  <fixed name="t" actuatorfrcrange="-0.3 0.4"><joint joint="j0" coef="1"/>
    <joint joint="j1" coef="-0.5"/></fixed>
  <fixed name="t2"><joint joint="j2" coef="1"/><joint joint="j1" coef="0.3"/></fixed>
</tendon>
<actuator>
  <motor joint="j0" gear="2" ctrlrange="-1 1"/>
  <position joint="j1" kp="3" kv="0.4" forcerange="-1 1"/>
  <velocity joint="j2" kv="2"/>
  <general joint="j0" dyntype="integrator" gaintype="affine" gainprm="1 0.2 0.3"
           biastype="affine" biasprm="0.1 0.2 0.3" actlimited="true" actrange="-0.5 0.5"/>
  <general joint="j1" dyntype="filter" dynprm="0.05" actearly="true" group="1"/>
  <general joint="j2" dyntype="filterexact" dynprm="0.03" actearly="true" actlimited="true"
           actrange="-0.2 0.3"/>
  <muscle tendon="t2" lengthrange="-0.6 0.6" group="2"/>
  <muscle joint="j1" lengthrange="-1 1" timeconst="0.02 0.05" tausmooth="0.3" force="12"
          range="0.5 1.2"/>
  <motor tendon="t" gear="3"/><motor tendon="t" gear="-1"/>
  <intvelocity joint="j2" kp="5" actrange="-1 1"/>
</actuator></mujoco>"""


@pytest.fixture(scope="module")
def mj_model():
    return mujoco.MjModel.from_xml_string(ACTUATED)


# (disableflags, disableactuator): clampctrl off, actuation off, groups 1 and 1+2 off
@pytest.mark.parametrize("flags,groups", [(0, 0), (256, 0), (2048, 0), (0, 2), (0, 6)])
def test_fwd_actuation_matches_mujoco(mj_model, flags, groups):
    mjm = mj_model
    mjm.opt.disableflags, mjm.opt.disableactuator = flags, groups
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(flags + groups)
    m = interop.model_from_mujoco(mjm)
    for _ in range(6):
        mjd.qpos[:] = rng.normal(size=mjm.nq)
        mjd.qvel[:] = 2 * rng.normal(size=mjm.nv)
        mjd.ctrl[:] = 1.5 * rng.normal(size=mjm.nu)
        mjd.act[:] = 0.7 * rng.normal(size=mjm.na)
        mujoco.mj_forward(mjm, mjd)
        d = interop.data_from_mujoco(mjm, mjd, m)
        out = actuator.fwd_actuation(m, passive(m, d))
        for f in ("act_dot", "actuator_force", "qfrc_actuator"):
            assert_close(f, getattr(out, f), getattr(mjd, f), RTOL)
    mjm.opt.disableflags, mjm.opt.disableactuator = 0, 0


def test_muscle_curves_match_mujoco(mj_model):
    """FL*FV gain, FP bias and activation dynamics against mju_muscle* over wide ranges."""
    rng = np.random.default_rng(0)
    for i in (6, 7):
        prm = np.array(mj_model.actuator_gainprm[i][:9])
        dprm = np.array(mj_model.actuator_dynprm[i][:3])
        lr = np.array(mj_model.actuator_lengthrange[i])
        acc0 = float(mj_model.actuator_acc0[i])
        length = rng.uniform(-1.5, 1.5, 400)
        vel = rng.uniform(-10, 10, 400)
        ctrl, act = rng.uniform(-0.5, 1.5, (2, 400))
        gain = actuator.muscle_gain(jp.asarray(length), jp.asarray(vel), jp.asarray(lr), acc0,
                                    jp.asarray(prm))
        bias = actuator.muscle_bias(jp.asarray(length), jp.asarray(lr), acc0, jp.asarray(prm))
        dyn = actuator.muscle_dynamics(jp.asarray(ctrl), jp.asarray(act), jp.asarray(dprm))
        ref_g = [mujoco.mju_muscleGain(a, b, lr, acc0, prm) for a, b in zip(length, vel)]
        ref_b = [mujoco.mju_muscleBias(a, lr, acc0, prm) for a in length]
        ref_d = [mujoco.mju_muscleDynamics(a, b, dprm) for a, b in zip(ctrl, act)]
        assert_close("muscle gain", gain, ref_g, 1e-12)
        assert_close("muscle bias", bias, ref_b, 1e-12)
        assert_close("muscle dynamics", dyn, ref_d, 1e-12)

"""passive.passive vs MuJoCo 4.0 mj_passive on MuJoCo-filled Data (float64)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from mjx_lite import interop
from mjx_lite.passive import fluid, passive

from parity import assert_close

RTOL = 1e-8
FIELDS = ("qfrc_spring", "qfrc_damper", "qfrc_gravcomp", "qfrc_fluid", "qfrc_passive")

# hinge/slide/ball/free springs with springref and polynomial stiffness, polynomial dampers,
# tendon deadband spring and damper, actuator damping at joint and tendon targets, gravcomp
# (one joint routes it to the actuators)
SPRINGS = """
<mujoco><worldbody>
  <body><joint name="j" type="hinge" stiffness="1 2 3" springref="10" damping="0.2 0.5 0.7"/>
    <geom size=".1" pos="0.2 0 0"/>
    <body pos="0.4 0 0" gravcomp="0.7">
      <joint name="b" type="ball" stiffness="1 2 3" damping="0.1 0.2 0.3"/>
      <geom size=".1" pos="0.1 0 0"/>
      <body pos="0.3 0 0" gravcomp="0.4">
        <joint type="slide" axis="0 1 0" stiffness="2" springref="0.2" damping="0.3"
               actuatorgravcomp="true"/>
        <geom size=".05" pos="0.1 0 0" mass="0.3"/>
      </body>
    </body>
  </body>
  <body pos="1 0 1" gravcomp="1"><freejoint/><geom size=".1 .2 .3" type="box"/></body>
  <body pos="0 2 1"><joint type="free" stiffness="3 1 2" damping="0.5"/>
    <geom size=".1 .2" type="capsule"/></body>
</worldbody>
<tendon><fixed name="t" stiffness="1 2 3" damping="1 2 3" springlength="0.1 0.2">
  <joint joint="j" coef="1"/></fixed></tendon>
<actuator><motor joint="j" damping="0.3 0.1 0.2" gear="2"/>
  <motor tendon="t" damping="0.4" gear="1.5"/></actuator>
</mujoco>"""

# inertia-box bodies and ellipsoid geoms of every primitive type, with wind
FLUID = """
<mujoco><option density="1.2" viscosity="0.3" wind="0.5 -0.2 0.1"/><worldbody>
  <body pos="0 0 1"><freejoint/><geom type="box" size=".1 .2 .3"/>
    <body pos="0.3 0 0"><joint type="hinge" axis="0 1 0"/>
      <geom type="capsule" size=".05 .2" fluidshape="ellipsoid"
            fluidcoef="0.4 0.3 1.2 0.9 0.8"/>
      <geom type="sphere" size=".1" pos="0 0 .2" fluidshape="ellipsoid"/></body>
    <body pos="0 0.4 0"><joint type="ball"/>
      <geom type="ellipsoid" size=".1 .05 .2" fluidshape="ellipsoid"/>
      <geom type="cylinder" size=".1 .05" pos="0.2 0 0" fluidshape="ellipsoid"/>
      <geom type="box" size=".1 .05 .2" pos="0.2 0 0.3" fluidshape="ellipsoid"/></body>
    <body pos="0 -0.4 0"><joint type="slide"/><geom type="capsule" size=".05 .1"/></body>
  </body>
</worldbody></mujoco>"""


def _random_state(mjm, mjd, rng):
    mjd.qpos[:] = mjm.qpos0 + 0.3 * rng.normal(size=mjm.nq)
    mujoco.mj_normalizeQuat(mjm, mjd.qpos)
    mjd.qvel[:] = rng.normal(size=mjm.nv)


@pytest.mark.parametrize("xml", [SPRINGS, FLUID], ids=["springs", "fluid"])
@pytest.mark.parametrize("flags", [0, 32, 64, 96, 128])
def test_passive_matches_mujoco(xml, flags):
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjm.opt.disableflags = flags
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(flags)
    m = interop.model_from_mujoco(mjm)
    for _ in range(3):
        _random_state(mjm, mjd, rng)
        mujoco.mj_forward(mjm, mjd)
        d = passive(m, interop.data_from_mujoco(mjm, mjd, m))
        for f in FIELDS:
            assert_close(f, getattr(d, f), getattr(mjd, f), RTOL)


def test_fluid_gradient_finite_at_rest():
    """Zero velocity is where the norms in the drag terms have no derivative."""
    import jax

    mjm = mujoco.MjModel.from_xml_string(FLUID)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    g = jax.grad(lambda cvel: passive(m, d.replace(cvel=cvel)).qfrc_passive.sum())(d.cvel)
    assert np.all(np.isfinite(np.asarray(g)))


def test_fluid_coefficient_traced():
    """geom_fluidshape (which geoms the ellipsoid model runs on) is fixed at compile time; the
    interaction coefficient stays traced: scaling it, or zeroing every geom of a body (which
    then gets the inertia-box model), matches MuJoCo with the same change."""
    import jax

    mjm = mujoco.MjModel.from_xml_string(FLUID)
    m = interop.model_from_mujoco(mjm)
    assert np.asarray(m.geom_fluidshape).sum() == 5
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(0))
    f = jax.jit(lambda m, d: passive(m, d).qfrc_fluid)
    for body, scale in ((2, 0.5), (2, 0.0), (3, 0.0)):
        coef = np.ones(mjm.ngeom)
        coef[mjm.geom_bodyid == body] = scale
        mjm.geom_fluid[:, 0] = np.asarray(m.geom_fluid)[:, 0] * coef
        mujoco.mj_forward(mjm, mjd)
        mm = m.replace(geom_fluid=m.geom_fluid.at[:, 0].multiply(coef))
        assert_close("qfrc_fluid", f(mm, interop.data_from_mujoco(mjm, mjd, m)),
                     mjd.qfrc_fluid, RTOL)


def test_gravcomp_off_without_gravcomp_bodies():
    """MuJoCo 4.0 computes gravity compensation only where the model was compiled with a
    gravcomp body (ngravcomp > 0): a body_gravcomp set later has no effect, here as there."""
    mjm = mujoco.MjModel.from_xml_string(FLUID.replace(
        '<option density="1.2" viscosity="0.3" wind="0.5 -0.2 0.1"/>', ""))
    assert mjm.ngravcomp == 0
    mjm.body_gravcomp[1:] = 0.5
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(1))
    mujoco.mj_forward(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    assert np.asarray(m.body_gravcomp)[1:].min() == 0.5
    d = passive(m, interop.data_from_mujoco(mjm, mjd, m))
    assert not np.any(mjd.qfrc_gravcomp)
    for f in FIELDS:
        assert_close(f, getattr(d, f), getattr(mjd, f), RTOL)


def test_fluid_skipped_only_where_the_medium_is_known_off():
    """With density and viscosity zero, a Model closed over (concrete) computes no fluid
    terms; a traced one still does, so the derivative w.r.t. density at 0 is the fluid
    model's (central differences of MuJoCo's qfrc_fluid)."""
    import jax

    mjm = mujoco.MjModel.from_xml_string(FLUID)
    mjm.opt.density, mjm.opt.viscosity = 0.0, 0.0
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(2))
    mujoco.mj_forward(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    closed = jax.make_jaxpr(lambda d: fluid(m, d))(d)
    traced = jax.make_jaxpr(fluid)(m, d)
    assert len(closed.eqns) <= 1 and len(traced.eqns) > 100
    assert not np.any(np.asarray(passive(m, d).qfrc_fluid))

    def fluid_at(rho):
        return passive(m.replace(opt=m.opt.replace(density=rho)), d).qfrc_fluid

    ours = np.asarray(jax.jacfwd(fluid_at)(m.opt.density))
    # qfrc_fluid is linear in density (viscosity 0); MuJoCo skips a negative density
    eps = 1e-3
    ref = []
    for rho in (2 * eps, eps):
        mjm.opt.density = rho
        mujoco.mj_forward(mjm, mjd)
        ref.append(mjd.qfrc_fluid.copy())
    ref = (ref[0] - ref[1]) / eps
    assert np.abs(ref).max() > 1e-3
    assert_close("d qfrc_fluid / d density", ours, ref, 1e-6)


def test_springs_skipped_where_stiffness_is_known_zero():
    """A joint whose stiffness is a known zero has no spring, as mj_springdamper skips it:
    a NaN quaternion of a free joint without stiffness leaves qfrc_spring finite, as in
    MuJoCo. With the stiffness traced every joint keeps its spring, so the derivative
    w.r.t. the free joint's stiffness at 0 is the spring's."""
    import jax
    import jax.numpy as jp

    xml = """<mujoco><worldbody><body><freejoint/><geom size=".1"/>
      <body pos="0 0 .3"><joint axis="1 0 0" stiffness="3" damping=".5"/><geom size=".1"/>
      </body></body></worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = [0.1, 0.2, 0.3, np.nan, 0, 0, 0, 0.4]
    mjd.qvel[:] = 0.2
    mujoco.mj_passive(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    ours = passive(m, d)
    assert np.all(np.isfinite(mjd.qfrc_spring)) and mjd.qfrc_spring[-1] != 0
    assert_close("qfrc_spring", np.asarray(ours.qfrc_spring), mjd.qfrc_spring, RTOL)
    assert_close("qfrc_passive", np.asarray(ours.qfrc_passive), mjd.qfrc_passive, RTOL)

    d = d.replace(qpos=jp.asarray([0.1, 0.2, 0.3, 0.9, 0.1, 0.3, -0.2, 0.4]))

    def spring(k):
        return passive(m.replace(jnt_stiffness=k), d).qfrc_spring

    dk = np.asarray(jax.jacfwd(spring)(m.jnt_stiffness))
    assert np.abs(dk[:6, 0]).max() > 0.1  # the free joint's spring, linear in its stiffness
    np.testing.assert_allclose(dk[:6, 0],
                               np.asarray(spring(m.jnt_stiffness.at[0].set(1.0)))[:6])

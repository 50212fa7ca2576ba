"""Parity of tendon.py (fixed and spatial tendons, sphere/cylinder wrapping with sidesites,
pulleys) with MuJoCo 4.0 C: ten_length, ten_J and the paths wrap_obj / wrap_xpos /
ten_wrapadr / ten_wrapnum, plus the JAX contract (grad of the length is ten_J)."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite import interop, smooth, tendon

from conftest import MJX_TEST_DATA
from parity import assert_close, rel_error

jax.config.update("jax_enable_x64", True)

# Float64 parity: closed-form wrapping agrees to rounding (measured <= 2e-15); inside
# wrapping runs MuJoCo 4.0's Newton iteration step for step (measured <= 2e-15).
RTOL = 1e-8
ACCEPTANCE_FILE = pathlib.Path(__file__).parent / "acceptance" / "tendon.txt"
TENDON_DIR = MJX_TEST_DATA / "tendon"

# One tendon per case: sphere without sidesite, sphere and cylinder with an outside sidesite,
# a cylinder with an inside sidesite, a pulley splitting into two branches, a fixed tendon.
INLINE_XML = """
<mujoco>
  <option gravity="0 0 0"/>
  <worldbody>
    <site name="w0" pos="-.3 0 .5"/>
    <site name="w1" pos=".3 .2 .5"/>
    <body name="a" pos="0 0 .5">
      <joint name="j0" type="hinge" axis="0 1 0"/>
      <joint name="j1" type="hinge" axis="1 0 0"/>
      <geom name="sph" type="sphere" size=".1" pos=".2 0 0"/>
      <geom name="cyl" type="cylinder" size=".08 .2" pos=".5 0 0" euler="90 0 0"/>
      <site name="side_out" pos=".2 0 .3"/>
      <site name="side_cyl" pos=".5 0 -.3"/>
      <site name="side_in" pos=".5 .01 .01"/>
      <site name="a0" pos="0 0 .05"/>
      <body name="b" pos=".8 0 0">
        <joint name="j2" type="hinge" axis="0 1 0"/>
        <joint name="j3" type="slide" axis="0 0 1"/>
        <geom type="capsule" size=".02" fromto="0 0 0 .3 0 0"/>
        <site name="b0" pos=".2 0 .05"/>
        <site name="b1" pos=".3 0 -.05"/>
      </body>
    </body>
    <body name="c" pos="0 .5 .5">
      <freejoint/>
      <geom type="box" size=".05 .05 .05"/>
      <site name="c0" pos=".05 0 0"/>
    </body>
  </worldbody>
  <tendon>
    <spatial name="sphere"><site site="w0"/><geom geom="sph"/><site site="b0"/></spatial>
    <spatial name="sphere_side">
      <site site="w0"/><geom geom="sph" sidesite="side_out"/><site site="b0"/>
    </spatial>
    <spatial name="cyl_side">
      <site site="a0"/><geom geom="cyl" sidesite="side_cyl"/><site site="b1"/>
    </spatial>
    <spatial name="cyl_inside">
      <site site="a0"/><geom geom="cyl" sidesite="side_in"/><site site="b1"/>
    </spatial>
    <spatial name="pulley">
      <site site="w1"/><site site="c0"/>
      <pulley divisor="2"/>
      <site site="c0"/><geom geom="sph"/><site site="b1"/>
      <pulley divisor="3"/>
      <site site="c0"/><site site="w0"/>
    </spatial>
    <fixed name="fixed"><joint joint="j0" coef=".5"/><joint joint="j2" coef="-1"/></fixed>
  </tendon>
</mujoco>
"""

CI_FILES = ("pulley_site_wrap.xml", "wrap_sidesite.xml")


def _states(mjm, count: int, seed: int = 0):
    """qpos0 and random configurations (MuJoCo normalizes the quaternions in mj_forward)."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        yield mjm.qpos0 + (0.0 if k == 0 else 0.8) * rng.normal(size=mjm.nq)


def _compare(mjm, m, fn, qpos):
    """Errors (length, J, path) of our tendon stage against mj_forward at qpos."""
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = qpos
    mujoco.mj_forward(mjm, mjd)
    d = interop.data_from_mujoco(mjm, mjd, m)
    ours = fn(d.replace(ten_length=jp.zeros_like(d.ten_length), ten_J=jp.zeros_like(d.ten_J)))
    npt = int(mjd.ten_wrapnum.sum())  # MuJoCo leaves the slots past the path stale
    path_xpos = np.asarray(ours.wrap_xpos).reshape(-1, 3)[:npt]
    path_obj = np.asarray(ours.wrap_obj).reshape(-1)[:npt]
    np.testing.assert_array_equal(path_obj, mjd.wrap_obj.reshape(-1)[:npt])
    np.testing.assert_array_equal(np.asarray(ours.ten_wrapnum), mjd.ten_wrapnum)
    np.testing.assert_array_equal(np.asarray(ours.ten_wrapadr), mjd.ten_wrapadr)
    return (rel_error(ours.ten_length, mjd.ten_length), rel_error(ours.ten_J, d.ten_J),
            rel_error(path_xpos, mjd.wrap_xpos.reshape(-1, 3)[:npt]), ours, d)


def _stage(m):
    return jax.jit(lambda d: tendon.tendon(m, smooth.com_pos(m, smooth.kinematics(m, d))))


@pytest.fixture(scope="module")
def inline():
    mjm = mujoco.MjModel.from_xml_string(INLINE_XML)
    m = interop.model_from_mujoco(mjm)
    return mjm, m, _stage(m)


@pytest.mark.parametrize("name", CI_FILES)
def test_wheel_models(name):
    mjm = mujoco.MjModel.from_xml_path(str(TENDON_DIR / name))
    m = interop.model_from_mujoco(mjm)
    fn = _stage(m)
    for qpos in _states(mjm, 4):
        e_len, e_j, e_path, _, _ = _compare(mjm, m, fn, qpos)
        assert max(e_len, e_j, e_path) <= RTOL, (name, e_len, e_j, e_path)


def test_inline_wrap_types(inline):
    mjm, m, fn = inline
    wrapped = np.zeros(mjm.ntendon)
    for qpos in _states(mjm, 8, seed=3):
        _, _, _, ours, d = _compare(mjm, m, fn, qpos)
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:] = qpos
        mujoco.mj_forward(mjm, mjd)
        for t in range(mjm.ntendon):
            assert_close(f"ten_length[{t}]", ours.ten_length[t], mjd.ten_length[t], RTOL)
            assert_close(f"ten_J[{t}]", ours.ten_J[t], d.ten_J[t], RTOL)
        wrapped += (mjd.ten_wrapnum > np.asarray([3, 3, 3, 3, 7, 0]))
    # every geom tendon wrapped in at least one sampled state
    assert np.all(wrapped[:4] > 0), wrapped


def test_pulley_divisor(inline):
    """The pulley branches count 1/2 and 1/3 of their lengths (XML reference, pulley)."""
    mjm, m, fn = inline
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    ours = fn(interop.data_from_mujoco(mjm, mjd, m))
    t = mjm.tendon("pulley").id
    xp = lambda s: mjd.site(s).xpos  # noqa: E731
    straight = np.linalg.norm(xp("w1") - xp("c0")) + np.linalg.norm(xp("c0") - xp("w0")) / 3
    assert float(ours.ten_length[t]) > straight  # the middle branch adds its half


@pytest.mark.parametrize("name", ("pulley_site_wrap.xml",
                                  pytest.param("tendon.xml", marks=pytest.mark.acceptance)))
def test_load_model_and_set_const(name):
    """Our compiler's model: lengths at qpos0 and qpos_spring (set_const) and the stage."""
    path = str(TENDON_DIR / name)
    mjm = mujoco.MjModel.from_xml_path(path)
    m = mjx_lite.load_model(path)
    assert_close("tendon_length0", m.tendon_length0, mjm.tendon_length0, RTOL)
    assert_close("tendon_lengthspring", m.tendon_lengthspring, mjm.tendon_lengthspring, RTOL)
    assert_close("tendon_invweight0", m.tendon_invweight0, mjm.tendon_invweight0, 1e-9)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    ours = _stage(m)(mjx_lite.make_data(m))
    assert_close("ten_length", ours.ten_length, mjd.ten_length, RTOL)


def test_grad_is_moment(inline):
    """d ten_length / d qpos equals ten_J on hinge/slide joints (envelope theorem: the wrap
    points' motion along the geom does not change the length to first order)."""
    mjm, m, fn = inline
    rng = np.random.default_rng(7)
    qpos = jp.asarray(mjm.qpos0 + 0.3 * rng.normal(size=mjm.nq))
    d0 = mjx_lite.make_data(m)

    def lengths(q):
        return fn(d0.replace(qpos=q)).ten_length

    jac = jax.jacfwd(lengths)(qpos)
    ten_j = fn(d0.replace(qpos=qpos)).ten_J
    hinge = np.arange(4)  # j0..j3 are the first four qpos and dofs
    outside = np.array([0, 1, 2, 5])
    assert np.all(np.isfinite(np.asarray(jac)))
    assert_close("dlen/dq", jac[outside][:, hinge], ten_j[outside][:, hinge], 1e-7)


def test_grad_finite_at_degenerate():
    """Coincident sites and a site at the wrap geom's center give finite gradients."""
    xml = """
    <mujoco><worldbody>
      <body><joint name="h" axis="0 1 0"/><geom name="s" size=".1"/>
        <site name="a" pos="0 0 0"/><site name="b" pos="0 0 0"/></body>
      <site name="c" pos="0 0 0"/>
    </worldbody><tendon>
      <spatial><site site="a"/><site site="b"/></spatial>
      <spatial><site site="a"/><geom geom="s"/><site site="c"/></spatial>
      <spatial><site site="a"/><geom geom="s" sidesite="c"/><site site="b"/></spatial>
      <spatial><site site="c"/><geom geom="s" sidesite="a"/><site site="b"/></spatial>
    </tendon></mujoco>"""
    m = mjx_lite.load_model_from_string(xml)
    fn = _stage(m)
    d0 = mjx_lite.make_data(m)
    g = jax.grad(lambda q: jp.sum(fn(d0.replace(qpos=q)).ten_length))(d0.qpos)
    assert np.all(np.isfinite(np.asarray(g)))


def test_vmap(inline):
    mjm, m, fn = inline
    d0 = mjx_lite.make_data(m)
    qs = jp.asarray(np.stack(list(_states(mjm, 4, seed=5))))
    batched = jax.vmap(lambda q: fn(d0.replace(qpos=q)).ten_length)(qs)
    single = jp.stack([fn(d0.replace(qpos=q)).ten_length for q in qs])
    np.testing.assert_allclose(np.asarray(batched), np.asarray(single), rtol=1e-12)


@pytest.mark.acceptance
def test_tendon_acceptance():
    """Every wheel tendon model and the inline wrap/pulley model at 30 random states."""
    lines = ["# tendon.py vs MuJoCo 4.0 mj_forward: worst relative errors over 30 states",
             "# model: ten_length ten_J wrap_xpos (path arrays equal exactly)"]
    models = [(p.name, mujoco.MjModel.from_xml_path(str(p)))
              for p in sorted(TENDON_DIR.glob("*.xml"))]
    models.append(("inline_wrap_pulley", mujoco.MjModel.from_xml_string(INLINE_XML)))
    for name, mjm in models:
        m = interop.model_from_mujoco(mjm)
        fn = _stage(m)
        worst = np.zeros(3)
        for qpos in _states(mjm, 30, seed=11):
            worst = np.maximum(worst, _compare(mjm, m, fn, qpos)[:3])
        lines.append(f"{name}: {worst[0]:.2e} {worst[1]:.2e} {worst[2]:.2e}")
        assert np.all(worst <= RTOL), (name, worst)
    lines += ["# tendon forces: our forward + rne_post_constraint vs mj_forward +",
              "# mj_rnePostConstraint, converged (tolerance 1e-14), worst relative error over",
              "# random qpos/qvel/ctrl states; states with an active tendon limit / friction row"]
    arm = mujoco.MjModel.from_xml_path(str(TENDON_ARM))
    arm.opt.tolerance = 1e-14
    for name, mjm, count in (("inline_forces", mujoco.MjModel.from_xml_string(FORCES_XML), 20),
                             ("tendon_arm.xml", arm, 10)):
        w = tendon_force_errors(mjm, count, seed=5)
        lines.append(f"{name} ({count} states, limit {w['limit_states']}, friction "
                     f"{w['friction_states']}): "
                     + " ".join(f"{f} {w[f]:.1e}" for f in FORCE_FIELDS))
        ACCEPTANCE_FILE.write_text("\n".join(lines) + "\n")
        assert max(w[f] for f in FORCE_FIELDS) <= RTOL, (name, w)


ROLLOUT_FILE = pathlib.Path(__file__).parent / "acceptance" / "tendon_rollout.txt"
TENDON_ARM = pathlib.Path(__file__).parents[1] / "models" / "tendon_arm.xml"


@pytest.mark.acceptance
def test_tendon_arm_rollout_bound():
    """models/tendon_arm.xml (muscles through site-only, sphere-with-sidesite and cylinder
    wrapping tendons) simulates 2 s within the rollout bound of MuJoCo's trajectory: at every
    step max|qpos - MuJoCo's| <= 10 x MuJoCo's own deviation under a 1e-9 qpos perturbation
    + 1e-8. The model is MuJoCo's compiled one (interop), so the bound tests the dynamics."""
    import time

    from mjx_lite.forward import step

    mjm = mujoco.MjModel.from_xml_path(str(TENDON_ARM))
    muscles = np.nonzero(mjm.actuator_gaintype == mujoco.mjtGain.mjGAIN_MUSCLE)[0]
    tendons = mjm.actuator_trnid[muscles, 0]
    wrapped = [t for t in tendons if np.any(
        np.isin(mjm.wrap_type[mjm.tendon_adr[t]:mjm.tendon_adr[t] + mjm.tendon_num[t]],
                (mujoco.mjtWrap.mjWRAP_SPHERE, mujoco.mjtWrap.mjWRAP_CYLINDER)))]
    assert len(wrapped) >= 2  # muscles through sphere and cylinder wrapping
    nstep = int(round(2.0 / mjm.opt.timestep))
    rng = np.random.default_rng(3)
    lo, hi = mjm.actuator_ctrlrange[:, 0], mjm.actuator_ctrlrange[:, 1]
    lim = mjm.actuator_ctrllimited.astype(bool)
    # piecewise-constant controls, changed every 50 steps (muscles take [0, 1])
    knots = rng.uniform(np.where(lim, lo, 0), np.where(lim, hi, 1), (nstep // 50 + 1, mjm.nu))
    ctrls = np.repeat(knots, 50, axis=0)[:nstep]
    qpos0 = np.array([0.4, 0.8])
    trajs = []
    for eps in (0.0, 1e-9):
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:] = qpos0 + eps
        t = []
        for c in ctrls:
            mjd.ctrl[:] = c
            mujoco.mj_step(mjm, mjd)
            t.append(np.concatenate([mjd.qpos, mjd.act]))
        trajs.append(np.array(t))

    m = interop.model_from_mujoco(mjm)
    d = mjx_lite.make_data(m).replace(qpos=jp.asarray(qpos0))

    @jax.jit
    def run(d, ctrls):
        def body(d, c):
            d = step(m, d.replace(ctrl=c))
            return d, jp.concatenate([d.qpos, d.act])
        return jax.lax.scan(body, d, ctrls)[1]

    t0 = time.time()
    ours = np.asarray(run(d, jp.asarray(ctrls)))
    secs = time.time() - t0
    selfdev = np.abs(trajs[1] - trajs[0]).max(axis=1)
    dev = np.abs(ours - trajs[0]).max(axis=1)
    bound = 10 * selfdev + 1e-8
    worst = int(np.argmax(dev / bound))
    ROLLOUT_FILE.write_text(
        "# models/tendon_arm.xml (3 muscles, 2 through wrapping tendons), 2 s = "
        f"{nstep} steps, float64, state = qpos + act\n"
        f"max dev {dev.max():.1e}, max MuJoCo self-dev (1e-9 qpos) {selfdev.max():.1e}, "
        f"worst dev/bound {dev[worst] / bound[worst]:.2e} at step {worst}, "
        f"final qpos {trajs[0][-1, :mjm.nq].round(4).tolist()} (jit+run {secs:.0f} s)\n")
    assert np.all(dev <= bound), (dev.max(), worst)


def test_spatial_armature_bias(inline):
    """Spatial-tendon armature adds J' armature (Jdot qvel) to qfrc_bias (XML reference,
    tendon/spatial/armature): the wheel's armature model and the inline tendons without geom
    wrapping (MuJoCo 4.0's mj_tendonDot rejects those; ours covers them by the same jvp)."""
    from mjx_lite.forward import fwd_position, fwd_velocity

    wheel = mujoco.MjModel.from_xml_path(str(TENDON_DIR / "armature.xml"))
    wrap = mujoco.MjModel.from_xml_string(INLINE_XML)
    for t in range(wrap.ntendon):
        wraps = wrap.wrap_type[wrap.tendon_adr[t]:wrap.tendon_adr[t] + wrap.tendon_num[t]]
        no_geom = not np.isin(wraps, (mujoco.mjtWrap.mjWRAP_SPHERE,
                                      mujoco.mjtWrap.mjWRAP_CYLINDER)).any()
        wrap.tendon_armature[t] = (1.0 + t) * no_geom
    assert wrap.tendon_armature.any()
    for mjm in (wheel, wrap):
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT  # the stage under test
        m = interop.model_from_mujoco(mjm)
        fn = jax.jit(lambda d, m=m: fwd_velocity(m, fwd_position(m, d)))
        rng = np.random.default_rng(0)
        for qpos in _states(mjm, 3):
            mjd = mujoco.MjData(mjm)
            mjd.qpos[:], mjd.qvel[:] = qpos, rng.standard_normal(mjm.nv)
            mujoco.mj_forward(mjm, mjd)
            ours = fn(interop.data_from_mujoco(mjm, mjd, m))
            err = np.max(np.abs(np.asarray(ours.qfrc_bias) - mjd.qfrc_bias))
            assert err <= 1e-10 * (1.0 + np.max(np.abs(mjd.qfrc_bias))), (err, mjd.qfrc_bias)


# Every force a tendon can carry, each on its own tendon: spring with a springlength deadband,
# damper, friction loss, a limit, armature, a motor, actuator damping reflected with gear^2,
# a position servo on the fixed tendon. Contacts off: the forces are the tendons' own.
FORCES_XML = (INLINE_XML
              .replace('<option gravity="0 0 0"/>',
                       '<option gravity="0 0 -9.81" tolerance="1e-14" iterations="200">'
                       '<flag contact="disable"/></option>')
              .replace('<spatial name="sphere">',
                       '<spatial name="sphere" stiffness="40" springlength=".5 .6" '
                       'damping="2">')
              .replace('<spatial name="sphere_side">',
                       '<spatial name="sphere_side" limited="true" range=".3 .75" '
                       'frictionloss=".4">')
              .replace('<spatial name="cyl_inside">', '<spatial name="cyl_inside" damping=".5">')
              .replace("</tendon>", """  <spatial name="sites" armature=".3">
      <site site="w1"/><site site="a0"/><site site="b0"/><site site="c0"/>
    </spatial>
  </tendon>
  <actuator>
    <motor tendon="sphere" gear="2"/><motor tendon="cyl_side" gear="1.5" damping=".8"/>
    <motor tendon="pulley"/><position tendon="fixed" kp="5"/>
  </actuator>
  <sensor>
    <force site="b0"/><torque site="b0"/><force site="c0"/><torque site="side_out"/>
  </sensor>""", 1))
FORCE_FIELDS = ("ten_velocity", "qfrc_passive", "actuator_force", "qfrc_actuator",
                "qfrc_constraint", "qacc", "cfrc_ext", "cfrc_int", "sensordata")


def _force_states(mjm, count: int, seed: int):
    """MuJoCo's converged forward (and rnePostConstraint) at random qpos, qvel, ctrl."""
    rng = np.random.default_rng(seed)
    mjd = mujoco.MjData(mjm)
    for _ in range(count):
        mujoco.mj_resetData(mjm, mjd)
        mjd.qpos[:] = mjm.qpos0 + 0.6 * rng.normal(size=mjm.nq)
        mjd.qvel[:] = rng.normal(size=mjm.nv)
        mjd.ctrl[:] = rng.normal(size=mjm.nu)
        mujoco.mj_forward(mjm, mjd)
        mujoco.mj_rnePostConstraint(mjm, mjd)
        yield mjd


def tendon_force_errors(mjm, count: int, seed: int = 0) -> dict:
    """Worst relative error per field of our forward + rne_post_constraint against MuJoCo's
    over ``count`` states, and how many states had active tendon limit / friction rows."""
    m = interop.model_from_mujoco(mjm)
    fn = jax.jit(lambda d: mjx_lite.rne_post_constraint(
        m, mjx_lite.forward(m, d, loop="early_exit")))
    worst = {f: 0.0 for f in FORCE_FIELDS}
    worst["limit_states"] = worst["friction_states"] = 0
    for mjd in _force_states(mjm, count, seed):
        d = mjx_lite.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel),
                                          ctrl=jp.asarray(mjd.ctrl))
        ours = fn(d)
        for f in FORCE_FIELDS:
            worst[f] = max(worst[f], rel_error(getattr(ours, f), getattr(mjd, f)))
        types = mjd.efc_type[:mjd.nefc]
        worst["limit_states"] += int(np.any(types == mujoco.mjtConstraint.mjCNSTR_LIMIT_TENDON))
        worst["friction_states"] += int(np.any(
            (types == mujoco.mjtConstraint.mjCNSTR_FRICTION_TENDON)
            & (mjd.efc_force[:mjd.nefc] != 0)))
    return worst


def test_tendon_forces_and_cfrc_ext():
    """Spatial tendon forces on the bodies along their paths (MuJoCo 4.0's cfrc_ext, read by
    force / torque sensors): spring, damper, friction loss, limit, armature and actuators,
    through sites, wrapping geoms and pulleys."""
    mjm = mujoco.MjModel.from_xml_string(FORCES_XML)
    worst = tendon_force_errors(mjm, 4)
    assert worst["limit_states"] and worst["friction_states"], worst
    for f in FORCE_FIELDS:
        assert worst[f] <= RTOL, (f, worst)

"""efc rows of constraint.make_constraint / reference_constraint against MuJoCo's mj_forward.

The smooth quantities come from MuJoCo (interop.data_from_mujoco), and contacts from MuJoCo's
d.contact copied into a Contact with spare empty slots, so these tests check the constraint
stage alone. Active rows are compacted (constraint.compact) and compared row by row.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import constraint, interop, smooth
from mjx_lite.collision.types import Contact
from mjx_lite.types import DisableBit

from parity import assert_close

ROW_RTOL = 1e-10  # efc rows are closed-form: only rounding separates the two engines
SPARE_SLOTS = 3  # empty contact slots appended to MuJoCo's contacts (must stay inactive)

# Equality of every kind (weld with torquescale and direct solref), dof and tendon friction
# loss, hinge / slide / ball limits with a non-default solimp, a limited fixed tendon.
EQ_XML = """
<mujoco><option timestep="0.01"/><worldbody>
<body name="a" pos="0 0 1">
  <joint name="j0" axis="0 1 0" range="-.2 .2" frictionloss=".3"/>
  <geom size=".1" fromto="0 0 0 .5 0 0" type="capsule"/>
  <body name="b" pos=".5 0 0">
    <joint name="j1" axis="0 1 0" limited="true" range="-1 .1" margin=".05"/>
    <geom size=".1" fromto="0 0 0 .5 0 0" type="capsule"/>
  </body>
</body>
<body name="c" pos="1 0 1">
  <joint name="j2" type="ball" range="0 .3" solimplimit=".8 .95 .01 .3 3"/>
  <geom size=".1" pos="0 0 -.3"/>
  <body>
    <joint name="j3" type="slide" axis="1 0 0" frictionloss=".1" range="-.05 .05"/>
    <joint name="j4" type="slide" axis="0 0 1"/>
    <geom size=".1" pos="0 0 -.5"/>
    <site name="s1" pos=".1 0 -.5"/>
  </body>
</body>
<body name="e" pos="2 0 1"><freejoint/><geom size=".1"/><site name="s2" pos="0 .1 0"/></body>
</worldbody>
<tendon><fixed name="t0" limited="true" range="-.01 .01" margin=".02" frictionloss=".2">
  <joint joint="j0" coef="1"/><joint joint="j1" coef="-.5"/></fixed></tendon>
<equality>
  <connect body1="b" body2="c" anchor=".5 0 0"/>
  <weld body1="a" body2="c" torquescale="2" solref="-100 -10"/>
  <weld site1="s1" site2="s2" solimp=".5 .99 .1 .5 2"/>
  <joint joint1="j3" joint2="j4" polycoef=".1 .5 .2 .1 .05"/>
  <joint joint1="j0" polycoef=".02 0 0 0 0" solref=".001 1"/>
  <tendon tendon1="t0" polycoef=".05 0 0 0 0"/>
</equality></mujoco>"""

# Contacts of condim 1, 3, 4 and 6 (geoms and an explicit pair with solreffriction), mixed
# priorities, margins and solimp; cone and impratio are set per test.
CONTACT_XML = """
<mujoco><option timestep="0.005" impratio="3"/><worldbody>
<geom name="floor" type="plane" size="5 5 .1" condim="3"/>
<body pos="0 0 .09"><freejoint/>
  <geom type="box" size=".1 .1 .1" condim="6" friction="1 .02 .01"/></body>
<body pos=".5 0 .09"><freejoint/>
  <geom type="sphere" size=".1" condim="4" priority="1" friction=".5 .05 .001"
        solref=".03 .8" solimp=".7 .9 .002 .4 3"/></body>
<body pos="1 0 .095"><freejoint/>
  <geom type="sphere" size=".1" condim="1" priority="2" margin=".01"/></body>
<body pos="-1 0 .09"><freejoint/><geom name="x" type="sphere" size=".1"/></body>
</worldbody>
<contact><pair geom1="floor" geom2="x" condim="6" friction=".8 .6 .01 .02 .03"
               solreffriction=".05 1"/></contact>
</mujoco>"""


def mj_contact(mjd, nslot: int) -> Contact:
    """MuJoCo's d.contact in a Contact with ``nslot`` slots (the rest empty)."""
    c = Contact.zeros(nslot, float)
    n, con = mjd.ncon, mjd.contact
    upd = {}
    for name in ("dist", "pos", "frame", "includemargin", "friction", "solref",
                 "solreffriction", "solimp", "dim", "geom", "geom1", "geom2", "exclude"):
        arr = np.array(getattr(c, name))
        arr[:n] = np.asarray(getattr(con, name)).reshape((n,) + arr.shape[1:])
        upd[name] = jp.asarray(arr, dtype=arr.dtype)
    upd["valid"] = jp.asarray(np.arange(nslot) < n)
    return c.replace(**upd)


def setup(xml: str, *, seed: int = 0, qpos_noise: float = 0.0, qvel_noise: float = 0.0,
          opt: dict | None = None, disable: int = 0, mjm=None):
    """MuJoCo model/data after mj_forward, and ours with the constraint rows built.

    Islands are disabled on MuJoCo's side so that its efc_state is in efc order.
    """
    mjm = mujoco.MjModel.from_xml_string(xml) if mjm is None else mjm
    for k, v in (opt or {}).items():
        setattr(mjm.opt, k, v)
    mjm.opt.disableflags |= disable | DisableBit.ISLAND
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(seed)
    mjd.qpos[:] = mjm.qpos0 + qpos_noise * rng.standard_normal(mjm.nq)
    mujoco.mj_normalizeQuat(mjm, mjd.qpos)
    mjd.qvel[:] = qvel_noise * rng.standard_normal(mjm.nv)
    mujoco.mj_forward(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    # the M factor in our layout (MuJoCo 4.0 stores qLD sparsely): used by solve_m
    d = smooth.factor_m(m, d.replace(contact=mj_contact(mjd, mjd.ncon + SPARE_SLOTS)))
    d = _rows(m, d)
    return mjm, mjd, m, d


@jax.jit
def _rows(m, d):
    return constraint.reference_constraint(m, constraint.make_constraint(m, d))


def compare_rows(mjm, mjd, d, rtol=ROW_RTOL):
    c = constraint.compact(d)
    n = mjd.nefc
    np.testing.assert_array_equal(c["efc_type"], mjd.efc_type)
    np.testing.assert_array_equal(c["efc_id"], mjd.efc_id)
    assert_close("efc_J", c["efc_J"], np.asarray(mjd.efc_J).reshape(n, mjm.nv), rtol)
    for f in ("efc_pos", "efc_margin", "efc_frictionloss", "efc_R", "efc_D", "efc_vel",
              "efc_aref", "efc_diagA"):
        assert_close(f, c[f], getattr(mjd, f), rtol)


@pytest.mark.parametrize("seed", [0, 1])
def test_equality_friction_limit_rows(seed):
    mjm, mjd, m, d = setup(EQ_XML, seed=seed, qpos_noise=0.4, qvel_noise=1.0)
    types = set(mjd.efc_type)
    assert {0, 1, 2, 3, 4} <= types, f"test state misses a family: {types}"
    compare_rows(mjm, mjd, d)


def test_refsafe_disabled():
    # solref timeconst .001 < 2 timestep: refsafe changes K and B of that joint equality
    mjm, mjd, m, d = setup(EQ_XML, qpos_noise=0.3, qvel_noise=1.0, disable=DisableBit.REFSAFE)
    compare_rows(mjm, mjd, d)


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_contact_rows(cone):
    opt = {"cone": mujoco.mjtCone.mjCONE_ELLIPTIC if cone == "elliptic" else 0}
    mjm, mjd, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)
    dims = set(np.asarray(mjd.contact.dim[: mjd.ncon]))
    assert {1, 4, 6} <= dims, dims
    compare_rows(mjm, mjd, d)
    # the spare slots produce no rows; efc_address is static per slot
    act = np.asarray(d.efc_active).reshape(-1)[-SPARE_SLOTS * constraint.contact_width(m):]
    assert not act.any()
    # contact.efc_address points at each contact's first row; mu of frictional contacts
    n = mjd.ncon
    addr = np.asarray(d.contact.efc_address)[:n]
    assert np.all(addr >= 0) and np.all(np.asarray(d.contact.efc_address)[n:] == -1)
    np.testing.assert_array_equal(np.cumsum(np.asarray(d.efc_active))[addr] - 1,
                                  mjd.contact.efc_address)
    fr = mjd.contact.dim > 1
    assert_close("contact.mu", np.asarray(d.contact.mu)[:n][fr], mjd.contact.mu[fr], ROW_RTOL)


@pytest.mark.parametrize("xml,cone", [(EQ_XML, 0), (CONTACT_XML, 0), (CONTACT_XML, 1)])
def test_diagexact_rows(xml, cone):
    """4.0's diagexact flag: every row's regularizer from (J M^-1 J')_ii, a contact's rows
    from its first row's (efc_R, efc_D, efc_diagA within ROW_RTOL of MuJoCo's)."""
    opt = {"cone": cone, "enableflags": int(mujoco.mjtEnableBit.mjENBL_DIAGEXACT)}
    mjm, mjd, m, d = setup(xml, seed=1, qpos_noise=0.4 if xml is EQ_XML else 0.0,
                           qvel_noise=0.3, opt=opt)
    plain = setup(xml, seed=1, qpos_noise=0.4 if xml is EQ_XML else 0.0, qvel_noise=0.3,
                  opt={"cone": cone})[1]
    # the flag changes MuJoCo's rows here, so the comparison below tests it
    assert np.abs(mjd.efc_R - plain.efc_R).max() > 1e-3 * np.abs(plain.efc_R).max()
    compare_rows(mjm, mjd, d)


def test_row_budget_static():
    mjm, mjd, m, d = setup(EQ_XML, qpos_noise=0.4)
    nslot = d.contact.dist.shape[0]
    assert d.efc_J.shape == (constraint.nefc_budget(m, nslot), m.nv)
    # a state with no violated limit keeps every shape
    d2 = interop.data_from_mujoco(mjm, mujoco.MjData(mjm), m).replace(contact=d.contact)
    d2 = _rows(m, d2)
    assert jax.tree_util.tree_structure(d2) == jax.tree_util.tree_structure(d)
    assert all(a.shape == b.shape for a, b in zip(jax.tree_util.tree_leaves(d),
                                                  jax.tree_util.tree_leaves(d2)))


def test_impedance_shape():
    # d(0) = d0, d(width) = dwidth, midpoint value halfway, flat when d0 == dwidth
    solimp = jp.array([0.3, 0.9, 0.1, 0.5, 2.0])
    x = jp.array([0.0, 0.05, 0.1, 0.5, -0.05])
    imp = constraint.impedance(solimp, x)
    np.testing.assert_allclose(imp, [0.3, 0.6, 0.9, 0.9, 0.6], rtol=1e-12)
    flat = constraint.impedance(jp.array([0.8, 0.8, 0.1, 0.5, 2.0]), x)
    np.testing.assert_allclose(flat, 0.8, rtol=1e-12)
    g = jax.grad(lambda s: jp.sum(constraint.impedance(s, x)))(solimp)
    assert np.all(np.isfinite(g))


# ------------------------------------------------------------------------------------------
# post-constraint quantities: contact_force, rne_post_constraint (cacc, cfrc_int, cfrc_ext)

POST_RTOL = 1e-9  # closed form given efc_force: MuJoCo's own forces are used on both sides


def _post_setup(xml, cone=0, qpos_noise=0.0):
    """MuJoCo after mj_forward (with xfrc_applied) and mj_rnePostConstraint, and ours with
    MuJoCo's qacc and efc_force, so that only the post-constraint stage is compared."""
    from mjx_lite import solver

    opt = {"cone": cone, "tolerance": 1e-13, "iterations": 200}
    mjm, mjd, m, d = setup(xml, seed=1, qpos_noise=qpos_noise, qvel_noise=0.5, opt=opt)
    mjd.xfrc_applied[1:] = np.random.default_rng(3).standard_normal((mjm.nbody - 1, 6))
    mujoco.mj_forward(mjm, mjd)
    mujoco.mj_rnePostConstraint(mjm, mjd)
    d = d.replace(xfrc_applied=jp.asarray(mjd.xfrc_applied))
    d = jax.jit(solver.solve)(m, d)
    act = np.asarray(d.efc_active)
    force = np.zeros(act.shape)
    force[act] = mjd.efc_force
    return mjm, mjd, m, d.replace(qacc=jp.asarray(mjd.qacc), efc_force=jp.asarray(force))


def _compare_post(mjd, out):
    for f in ("cacc", "cfrc_ext"):
        assert_close(f, getattr(out, f), getattr(mjd, f), POST_RTOL)
    # cfrc_int of a free body is a difference of nearly equal terms: scale by the body forces
    scale = max(np.abs(mjd.cfrc_ext).max(), np.abs(mjd.cfrc_int).max())
    err = np.abs(np.asarray(out.cfrc_int) - mjd.cfrc_int).max()
    assert err <= POST_RTOL * scale, (err, scale)


_post = jax.jit(smooth.rne_post_constraint)


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_contact_force_and_rne_post(cone):
    from mjx_lite import support

    c = mujoco.mjtCone.mjCONE_ELLIPTIC if cone == "elliptic" else 0
    mjm, mjd, m, d = _post_setup(CONTACT_XML, cone=c)
    nslot = d.contact.dist.shape[0]
    lf = jax.jit(jax.vmap(lambda i: support.contact_force(m, d, i)))(jp.arange(nslot))
    ref = np.zeros((nslot, 6))
    for i in range(mjd.ncon):
        mujoco.mj_contactForce(mjm, mjd, i, ref[i])
    assert_close("contact_force", lf, ref, POST_RTOL)
    _compare_post(mjd, _post(m, d))


def test_rne_post_equality():
    """Connect and weld forces (MuJoCo 4.0: the weld torque scaled by torquescale / 2 and
    rotated to the world frame) and xfrc_applied."""
    mjm, mjd, m, d = _post_setup(EQ_XML, qpos_noise=0.4)
    assert np.abs(mjd.cfrc_ext).max() > 0
    _compare_post(mjd, _post(m, d))


SENSOR_XML = """
<mujoco><option timestep="0.005"/><worldbody><geom type="plane" size="2 2 .1"/>
<body name="a" pos="0 0 .3"><joint axis="0 1 0"/><geom type="capsule" size=".05"
  fromto="0 0 0 .3 0 -.28"/><site name="s"/></body></worldbody>
<sensor><accelerometer site="s"/></sensor></mujoco>"""


def test_forward_fills_post_constraint_only_for_sensors():
    """Like mj_forward: cacc / cfrc_* are computed when an acceleration or force sensor asks
    for them (gymnasium calls rne_post_constraint itself after each step)."""
    from mjx_lite import interop, io
    from mjx_lite.forward import forward

    assert not smooth.needs_rne_post(interop.model_from_mujoco(
        mujoco.MjModel.from_xml_string(CONTACT_XML)))
    mjm = mujoco.MjModel.from_xml_string(SENSOR_XML)
    mjm.opt.tolerance = 1e-13
    mjd = mujoco.MjData(mjm)
    mjd.qpos[0] = 0.2
    mujoco.mj_forward(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    assert smooth.needs_rne_post(m)
    out = jax.jit(forward)(m, io.make_data(m).replace(qpos=jp.asarray(mjd.qpos)))
    assert mjd.ncon > 0 and np.abs(mjd.cfrc_ext).max() > 0
    for f in ("cacc", "cfrc_ext", "cfrc_int"):
        assert_close(f, getattr(out, f), getattr(mjd, f), 1e-8)


# ------------------------------------------------------------------------------------------
# body transmission (adhesion)

ADHESION_XML = """
<mujoco><option timestep="0.005" tolerance="1e-13" iterations="200"/><worldbody>
<geom name="floor" type="plane" size="5 5 .1" gap=".02"/>
<body name="arm" pos="0 0 .3"><joint axis="0 1 0"/><joint axis="1 0 0"/>
  <geom type="capsule" size=".05" fromto="0 0 0 .3 0 -.26" gap=".03"/>
  <body name="tip" pos=".3 0 -.26"><joint axis="0 0 1"/>
    <geom type="sphere" size=".04" pos=".03 .02 0"/></body>
</body>
<body name="ball" pos=".5 .3 .1"><freejoint/><geom type="sphere" size=".1" gap=".05"/></body>
<body name="ball2" pos=".32 .02 .0"><freejoint/><geom type="sphere" size=".06"/></body>
</worldbody>
<actuator><adhesion body="ball" ctrlrange="0 1" gain="30"/>
<general body="arm" gear="2 0 0 0 0 0" ctrlrange="0 1" ctrllimited="true"/>
<adhesion body="tip" ctrlrange="0 1" gain="5"/>
<adhesion body="ball2" ctrlrange="0 1" gain="5"/></actuator>
</mujoco>"""


def test_body_transmission_adhesion():
    """actuator_moment of body transmissions: minus the mean contact-normal Jacobian over the
    body's contacts, gap contacts included, gear unused; then the whole forward pass."""
    from mjx_lite import interop, io
    from mjx_lite.forward import forward

    mjm = mujoco.MjModel.from_xml_string(ADHESION_XML)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:2] = [0.1, -0.05]
    mjd.ctrl[:] = [0.7, 0.5, 0.3, 1.0]
    mujoco.mj_forward(mjm, mjd)
    assert -1 in mjd.contact.efc_address[: mjd.ncon]  # a gap contact takes part
    mom = np.zeros((mjm.nu, mjm.nv))
    mujoco.mju_sparse2dense(mom, mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr,
                            mjd.moment_colind)
    m = interop.model_from_mujoco(mjm)
    d = io.make_data(m).replace(qpos=jp.asarray(mjd.qpos), ctrl=jp.asarray(mjd.ctrl))
    out = jax.jit(forward)(m, d)
    assert_close("actuator_moment", out.actuator_moment, mom, ROW_RTOL)
    assert_close("qfrc_actuator", out.qfrc_actuator, mjd.qfrc_actuator, ROW_RTOL)
    assert_close("qacc", out.qacc, mjd.qacc, 1e-8)


# ------------------------------------------------------------------------------------------
# divergence detection (mj_checkPos / mj_checkVel / mj_checkAcc)

DIVERGE_XML = """
<mujoco><worldbody><body><joint name="s" type="slide"/><geom size=".1"/></body>
<body pos="1 0 0"><freejoint/><geom size=".1"/></body></worldbody>
<actuator><motor joint="s"/></actuator></mujoco>"""


def _diverge_case(mjm, field, idx, val):
    from mjx_lite import io

    mjd = mujoco.MjData(mjm)
    for _ in range(3):
        mujoco.mj_step(mjm, mjd)
    mjd.qvel[1], mjd.ctrl[0], mjd.qfrc_applied[1] = 0.5, 0.3, 0.2
    getattr(mjd, field)[idx] = val
    m = interop.model_from_mujoco(mjm)
    d = io.make_data(m).replace(
        qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel), ctrl=jp.asarray(mjd.ctrl),
        qfrc_applied=jp.asarray(mjd.qfrc_applied), time=jp.asarray(mjd.time),
        qacc_warmstart=jp.asarray(mjd.qacc_warmstart))
    mujoco.mj_step(mjm, mjd)
    return m, d, mjd


@pytest.mark.parametrize("integrator", ["Euler", "RK4"])
@pytest.mark.parametrize("loop", ["fixed", "early_exit"])
@pytest.mark.parametrize("autoreset", [True, False])
def test_divergence_detection(autoreset, loop, integrator):
    """Both forms of the second forward pass: check_acc, and forward_checked (early exit);
    under RK4, the check inside the first stage of its stage scan."""
    import functools

    from mjx_lite.forward import step

    mjm = mujoco.MjModel.from_xml_string(DIVERGE_XML)
    mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    if not autoreset:
        mjm.opt.disableflags |= DisableBit.AUTORESET
    stepj = jax.jit(functools.partial(step, loop=loop))
    for field, idx, val in (("qpos", 0, np.nan), ("qvel", 2, 1e11), ("qfrc_applied", 0, 1e12)):
        m, d, mjd = _diverge_case(mjm, field, idx, val)
        out = stepj(m, d)
        np.testing.assert_array_equal(out.warning_count, [w.number for w in mjd.warning])
        if autoreset and field == "qfrc_applied":
            # MuJoCo re-runs forward on the reset state and integrates it
            assert float(out.time) == mjd.time == mjm.opt.timestep
        if field == "qpos" and not autoreset:
            # NaN spreads to every dof in MuJoCo's dense solve, to the coupled ones here
            assert np.isnan(np.asarray(out.qpos)[0]) and float(out.time) == mjd.time
            continue
        assert_close("qpos", out.qpos, mjd.qpos, 1e-12)
        assert_close("qvel", out.qvel, mjd.qvel, 1e-12)
        assert float(out.time) == mjd.time
        np.testing.assert_array_equal(out.ctrl, mjd.ctrl)


# CI runs the early-exit loop; the fixed loop (the same reset logic, 3x the compile) is in the
# acceptance tier
@pytest.mark.parametrize("loop", [pytest.param("fixed", marks=pytest.mark.acceptance),
                                  "early_exit"])
def test_divergence_resets_one_batch_member(loop):
    import functools

    from mjx_lite import io
    from mjx_lite.forward import step

    step = functools.partial(step, loop=loop)
    m = interop.model_from_mujoco(mujoco.MjModel.from_xml_string(DIVERGE_XML))
    assert io.make_data(m).efc_J.shape[0] > 0  # early_exit takes forward_checked
    d0 = io.make_data(m).replace(qvel=jp.linspace(0.1, 1.0, m.nv))
    clean = jax.tree.map(lambda x: jp.stack([x] * 8), d0)
    batch = clean.replace(qpos=clean.qpos.at[3, 0].set(jp.inf))
    batched = jax.jit(jax.vmap(step, in_axes=(None, 0)))
    out = batched(m, batch)
    # the other members bit for bit as the same program computes them without the diverged
    # one, and as the unbatched step to rounding (XLA fuses that program differently, which
    # on this project's AMD EPYC host moves the last bits of qacc, 2026-12-05)
    ref = batched(m, clean)
    one = jax.jit(step)(m, d0)
    for i in range(8):
        if i == 3:
            assert int(out.warning_count[i, 3]) == 1
            assert np.all(np.isfinite(out.qpos[i])) and float(out.time[i]) == m.opt.timestep
            continue
        for a, b, c in zip(jax.tree.leaves(out), jax.tree.leaves(ref), jax.tree.leaves(one)):
            np.testing.assert_array_equal(a[i], b[i])
            if np.issubdtype(np.asarray(c).dtype, np.floating):
                scale = max(float(np.max(np.abs(c), initial=0.0)), 1e-300)
                np.testing.assert_allclose(a[i], c, rtol=0, atol=1e-14 * scale)
            else:
                np.testing.assert_array_equal(a[i], c)


def test_contact_with_zero_normal_jacobian_keeps_rows():
    """A slider resting on the floor (pusher's object): its normal Jacobian is zero, yet
    MuJoCo instantiates the contact rows, since a dof moves one of the bodies."""
    xml = """<mujoco><worldbody><geom type="plane" size="1 1 .1" condim="1"/>
    <body pos="0 0 .099"><joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 1 0"/>
    <geom type="sphere" size=".1" condim="1"/></body></worldbody></mujoco>"""
    mjm, mjd, m, d = setup(xml)
    assert mjd.nefc == 1
    compare_rows(mjm, mjd, d)


@pytest.mark.parametrize("autoreset", [True, False])
def test_check_pos_vel_equals_the_two_checks(autoreset):
    """step's single-select check equals mj_checkPos then mj_checkVel, bad or not."""
    from mjx_lite import io, support

    mjm = mujoco.MjModel.from_xml_string(DIVERGE_XML)
    if not autoreset:
        mjm.opt.disableflags |= DisableBit.AUTORESET
    m = interop.model_from_mujoco(mjm)
    d0 = io.make_data(m).replace(qvel=jp.linspace(0.1, 1.0, m.nv),
                                 warning_count=jp.arange(8, dtype=jp.int32))
    for bad_pos, bad_vel in [(False, False), (True, False), (False, True), (True, True)]:
        d = d0
        if bad_pos:
            d = d.replace(qpos=d.qpos.at[0].set(jp.nan))
        if bad_vel:
            d = d.replace(qvel=d.qvel.at[1].set(1e11))
        one = support.check_pos_vel(m, d)
        two = support.check_vel(m, support.check_pos(m, d))
        for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two)):
            np.testing.assert_array_equal(a, b)


def test_reset_keeps_one_residual_and_zeroes_the_tangent():
    """Differentiated, the divergence reset (check_pos_vel; check_acc likewise) stores its flag
    only, whatever the Data's fields, and a reset member's tangent is zero, a kept one's
    unchanged, as where's; under a model with tangents too (reset_data's qpos0)."""
    from mjx_lite import io, support

    mjm = mujoco.MjModel.from_xml_string(DIVERGE_XML)
    m = interop.model_from_mujoco(mjm)
    d = io.make_data(m)
    qvel = jp.stack([jp.linspace(0.1, 1.0, m.nv), jp.full(m.nv, 1e11)])  # kept, reset

    def check(m, qvel):
        return jax.vmap(lambda v: support.check_pos_vel(m, d.replace(qvel=v)))(qvel)

    out, lin = jax.linearize(lambda v: check(m, v), qvel)
    assert [np.shape(r) for r in jax.tree.leaves(lin)] == [(2,)]
    t = lin(jp.ones_like(qvel))
    np.testing.assert_array_equal(t.qvel, [np.ones(m.nv), np.zeros(m.nv)])
    np.testing.assert_array_equal(out.qvel[1], np.zeros(m.nv))
    # the model's tangent reaches the reset member's qpos (qpos0), not the kept one's
    _, tq = jax.jvp(lambda q0: check(m.replace(qpos0=q0), qvel).qpos, (m.qpos0,),
                    (jp.ones_like(m.qpos0),))
    np.testing.assert_array_equal(tq, [np.zeros(m.nq), np.ones(m.nq)])

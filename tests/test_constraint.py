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

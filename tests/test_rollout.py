"""rollout's RK4 path: differentiated with the implicit adjoint, it scans the 4 T stages of T
steps in one scan (``rollout._rk4_stages``) instead of a scan of steps each scanning its 4
stages. The two must be the same computation: every Data field, per step and final, bit for
bit in float64, with a divergence reset between steps; and the gradients through ``rollout``
equal those of the scan of steps."""

from __future__ import annotations

import dataclasses
import importlib

import jax
import jax.extend
import jax.numpy as jp
import numpy as np
import pytest

import mjx_lite
from mjx_lite.support import WARN_BADQPOS, WARN_BADQVEL
from mjx_lite.types import Data

from conftest import GYM_ASSETS, count_calls_by_size

ROLLOUT = importlib.import_module("mjx_lite.rollout")  # the package exports the function
IMPLICIT = {"loop": "early_exit", "adjoint": "implicit"}  # the options that take the path

# RK4 with a free body in contact (its rotation takes the Munthe-Kaas correction), a motor, and
# sensors that need the stage-0 passes (accelerometer: cacc; subtreelinvel; energy enabled)
RK4_SCENE = """
<mujoco>
  <option integrator="RK4" timestep="0.005"><flag energy="enable"/></option>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .059">
      <freejoint/>
      <geom type="box" size=".1 .08 .06" mass="1"/>
      <site name="imu"/>
    </body>
    <body pos=".5 0 .5">
      <joint name="hinge" axis="0 1 0" damping=".05"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="2"/></actuator>
  <sensor>
    <accelerometer site="imu"/>
    <subtreelinvel body="world"/>
    <jointpos joint="hinge"/>
  </sensor>
</mujoco>
"""

FIELDS = tuple(f.name for f in dataclasses.fields(Data))  # every Data field


def _model():
    m = mjx_lite.load_model_from_string(RK4_SCENE)
    d = mjx_lite.make_data(m)
    d = d.replace(qvel=d.qvel.at[:6].set(jp.array([0.2, -0.1, -0.1, 0.5, -0.3, 0.8])))
    return m, d


def _leaves_equal(a, b):
    """Integer and boolean leaves equal, floating ones to rounding: the two programs run the
    same operations in the same order, but XLA fuses them differently, and on some CPUs
    (this project's AMD EPYC host, 2026-12-05) that moves the last bit (2 ulps of qpos)."""
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), jax.tree.leaves(b)):
        x, y = np.asarray(x), np.asarray(y)
        if not np.issubdtype(y.dtype, np.floating):
            np.testing.assert_array_equal(x, y, err_msg=jax.tree_util.keystr(path))
            continue
        np.testing.assert_array_equal(np.isnan(x), np.isnan(y), err_msg=jax.tree_util.keystr(path))
        finite = np.abs(y[np.isfinite(y)])
        scale = float(finite.max()) if finite.size else 0.0
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-14 * max(scale, 1e-300),
                                   err_msg=jax.tree_util.keystr(path))


def test_one_stage_scan_equals_the_scan_of_steps():
    """Final Data and every field per step, equal to rounding (``_leaves_equal``): a plain
    run (contacts, sensors), and one whose velocity diverges, so a step boundary resets it and
    the run goes on from the reset state (the fields a step does not write included)."""
    m, d = _model()
    ctrls = 0.5 * jax.random.normal(jax.random.key(0), (6, m.nu))

    @jax.jit
    def both(d, c):
        nested = ROLLOUT._scan_steps(m, d, c, fields=FIELDS, **IMPLICIT)
        flat = ROLLOUT._rk4_stages(m, d, c, IMPLICIT["loop"], IMPLICIT["adjoint"], FIELDS)
        return nested, flat

    nested, flat = both(d, ctrls)
    assert int(nested[0].ncon) > 0 and nested[0].sensordata.any()
    _leaves_equal(nested, flat)

    # the box in the air, sliding at just under mju_isBad's 1e10 and pushed past it in the
    # first step (qacc stays good, so the reset is the divergence check between steps); a
    # stale value in a field that no step writes must be reset as step() resets it
    blown = d.replace(qpos=d.qpos.at[2].set(1.0), qvel=d.qvel.at[0].set(9.999e9).at[1:6].set(0),
                      qfrc_applied=d.qfrc_applied.at[0].set(1e9), qfrc_inverse=jp.full(m.nv, 3.0))
    nested, flat = both(blown, ctrls)
    resets = nested[1]["warning_count"][:, jp.array([WARN_BADQPOS, WARN_BADQVEL])].sum()
    assert int(resets) > 0
    _leaves_equal(nested, flat)


def test_boundary_covers_the_fields_a_step_leaves():
    """``rollout._BOUNDARY`` lists every Data field that one step leaves (partly) as it found
    it: a reset between steps reaches the one-scan path's Data through those fields only."""
    m, d = _model()
    inputs = {"time", "qpos", "qvel", "act", "qacc_warmstart", "ctrl", "qfrc_applied",
              "xfrc_applied", "eq_active", "mocap_pos", "mocap_quat", "userdata",
              "warning_count"}
    marked = {}
    for f in dataclasses.fields(d):
        x = getattr(d, f.name)
        if f.name in inputs or not isinstance(x, jax.Array) or not x.size or x.dtype == bool:
            continue
        marked[f.name] = jp.full_like(x, 777)
    out = jax.jit(mjx_lite.step)(m, d.replace(**marked))
    left = {f for f, x in marked.items() if np.any(np.asarray(getattr(out, f)) == 777)}
    assert left <= set(ROLLOUT._BOUNDARY), left - set(ROLLOUT._BOUNDARY)
    assert "qfrc_inverse" in left  # the check can fail


# RK4, a ball joint (the Munthe-Kaas correction) and a motorized hinge whose limit the run
# reaches (a constraint row for the implicit adjoint), no contacts: light enough to compile two
# gradients of it in the CI tier
RK4_ARM = """
<mujoco>
  <option integrator="RK4" timestep="0.01"/>
  <worldbody>
    <body pos="0 0 1">
      <joint type="ball" damping=".02"/>
      <geom type="capsule" fromto="0 0 0 .2 0 -.3" size=".03"/>
      <body pos=".2 0 -.3">
        <joint name="elbow" axis="0 1 0" damping=".05" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".025"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="elbow" gear="3"/></actuator>
</mujoco>
"""


def _gradients(m, d, ctrls):
    """jax.grad, implicit adjoint, of a loss of the final state and the per-step qvel through
    ``rollout`` (the one-scan path) and through the scan of steps."""
    def loss(run):
        def f(c):
            final, per_step = run(c)
            return jp.sum(final.qpos**2) + jp.sum(per_step["qvel"] ** 2)
        return f

    new = loss(lambda c: mjx_lite.rollout(m, d, c, fields=("qvel",), **IMPLICIT))
    old = loss(lambda c: ROLLOUT._scan_steps(m, d, c, fields=("qvel",), **IMPLICIT))
    return jax.jit(lambda c: (jax.grad(new)(c), jax.grad(old)(c)))(ctrls)


def _elbow_reach(m, d, ctrls):
    """The largest |elbow angle| over a rollout (qpos: the ball's quaternion, then the elbow)."""
    _, per_step = jax.jit(lambda c: mjx_lite.rollout(m, d, c, fields=("qpos",)))(ctrls)
    return float(np.abs(np.asarray(per_step["qpos"])[:, 4]).max())


def test_derivatives_through_rollout_equal_the_scan_of_steps():
    """jax.grad through ``rollout`` (the one-scan path) equals that through the scan of
    steps, float64, to rounding (bit for bit here and on gymnasium ant: the acceptance test
    below), with the elbow's joint limit active."""
    m = mjx_lite.load_model_from_string(RK4_ARM)
    d = mjx_lite.make_data(m)
    d = d.replace(qvel=jp.array([0.3, -0.2, 0.5, 1.0]))
    ctrls = 0.5 * jax.random.normal(jax.random.key(1), (5, m.nu))
    assert _elbow_reach(m, d, ctrls) > np.radians(1.0)  # past the limit: a constraint row
    g_new, g_old = _gradients(m, d, ctrls)
    assert float(jp.abs(g_old).max()) > 0
    np.testing.assert_allclose(g_new, g_old, rtol=1e-12, atol=1e-12 * float(jp.abs(g_old).max()))


@pytest.mark.acceptance
def test_derivatives_through_rollout_equal_the_scan_of_steps_ant():
    """The same on gymnasium ant (RK4, contacts), 20 steps from a random velocity, at its own
    solver settings."""
    m = mjx_lite.load_model(str(GYM_ASSETS / "ant.xml"))
    d = mjx_lite.make_data(m)
    d = d.replace(qvel=d.qvel + 0.3 * jax.random.normal(jax.random.key(1), d.qvel.shape))
    ctrls = 0.5 * jax.random.normal(jax.random.key(2), (20, m.nu))
    g_new, g_old = _gradients(m, d, ctrls)
    np.testing.assert_allclose(g_new, g_old, rtol=1e-12, atol=1e-12 * float(jp.abs(g_old).max()))


def test_stage_scan_is_batched_and_split_once(monkeypatch):
    """Under ``jax.vmap`` and reverse mode, JAX decides which of a scan's carried values are
    batched, and which are known, by transforming its body again until the set stops growing.
    The stage scan's initial carry (``RK4Stages.begin``) is batched and has a tangent wherever
    the state does, so its body is batched once and partially evaluated once (with zero rows
    that have neither: twice each; gymnasium ant, batch 1: trace 11.1-12.6 -> 8.6-10.0 s).
    Only tracing is measured here."""
    from jax._src.lax.control_flow import loops

    counts = {"batch": count_calls_by_size(monkeypatch, loops.batching, "batch_jaxpr"),
              "split": count_calls_by_size(monkeypatch, loops.pe,
                                           "partial_eval_jaxpr_nounits_fwd")}
    m = mjx_lite.load_model_from_string(RK4_ARM)
    d = mjx_lite.make_data(m)
    ds = jax.vmap(lambda v: d.replace(qvel=v))(jp.array([[0.3, -0.2, 0.5, 1.0]] * 2))
    ctrls = jp.full((2, 3, m.nu), 0.1)

    def loss(c):
        final = jax.vmap(lambda d, c: mjx_lite.rollout(m, d, c, fields=(), **IMPLICIT)[0])(ds, c)
        return jp.sum(final.qpos**2) + jp.sum(final.qvel**2)

    jax.make_jaxpr(jax.grad(loss))(ctrls)
    # the biggest: the stage scan's differentiated body
    rounds = {kind: c[max(c)] for kind, c in counts.items()}
    assert rounds == {"batch": 1, "split": 1}, rounds


def test_known_model_leaves_stay_values_inside(monkeypatch):
    """A Model closed over by the traced function keeps its values inside ``jax.checkpoint``
    (``forward._remat``) and the RK4 rollout's ``custom_jvp`` (``support.split_traced``), so
    the shortcuts on known values hold there: with density and viscosity known zeros, no
    fluid force is traced, in the forward nor in the implicit gradient. A Model that is an
    argument is traced and gets them, and its derivative w.r.t. density is that of the scan
    of steps."""
    from mjx_lite import passive

    traced = []
    real = passive._inertia_box_fluid
    monkeypatch.setattr(passive, "_inertia_box_fluid",
                        lambda m, *a: traced.append(1) or real(m, *a))
    m = mjx_lite.load_model_from_string(RK4_ARM)
    d = mjx_lite.make_data(m).replace(qvel=jp.array([0.3, -0.2, 0.5, 1.0]))
    ctrls = jp.full((3, m.nu), 0.1)

    def loss(m, c):
        final = mjx_lite.rollout(m, d, c, fields=(), **IMPLICIT)[0]
        return jp.sum(final.qvel**2)

    jax.make_jaxpr(lambda c: loss(m, c))(ctrls)
    jax.make_jaxpr(jax.grad(lambda c: loss(m, c)))(ctrls)
    assert not traced
    # the Model as an argument: traced, and differentiable w.r.t. density
    m = m.replace(opt=m.opt.replace(density=jp.asarray(1.2)))
    grad = jax.jit(jax.grad(lambda rho, c: loss(m.replace(opt=m.opt.replace(density=rho)),
                                                 c)))(m.opt.density, ctrls)
    assert traced

    def loss_steps(rho):
        mr = m.replace(opt=m.opt.replace(density=rho))
        return jp.sum(ROLLOUT._scan_steps(mr, d, ctrls, loop="fixed", adjoint="unroll",
                                          fields=())[0].qvel ** 2)

    np.testing.assert_allclose(grad, jax.grad(loss_steps)(m.opt.density), rtol=1e-6)
    assert float(jp.abs(grad)) > 0


def test_model_argument_without_tangent_keeps_the_state_rules(monkeypatch):
    """A Model passed to jit, its gradient not taken: the RK4 rollout's derivative closes its
    leaves over as values (``rollout._rk4_rollout_jvp``), so the stages carry no tangent of
    them and kinematics takes its closed-form rule (``smooth._tree_poses``), not the
    composition's derivative; the gradient equals the closed-over Model's. Differentiated
    w.r.t. body_pos, the composition's derivative runs (the check can fail)."""
    from mjx_lite import smooth

    differentiated = []
    real = smooth._world_poses

    def spy(m, *args):
        differentiated.append(any(isinstance(a, jax.interpreters.ad.JVPTracer) for a in args))
        return real(m, *args)

    monkeypatch.setattr(smooth, "_world_poses", spy)
    m, d = _model()
    ctrls = 0.5 * jax.random.normal(jax.random.key(1), (3, m.nu))

    def loss(m, c):
        final = mjx_lite.rollout(m, d, c, fields=(), **IMPLICIT)[0]
        return jp.sum(final.qpos**2) + jp.sum(final.qvel**2)

    as_argument = jax.jit(jax.grad(loss, argnums=1))(m, ctrls)
    assert differentiated and not any(differentiated)
    closed_over = jax.jit(jax.grad(lambda c: loss(m, c)))(ctrls)
    np.testing.assert_allclose(as_argument, closed_over, rtol=1e-10, atol=1e-12)
    assert np.abs(np.asarray(closed_over)).max() > 1e-3

    differentiated.clear()
    jax.make_jaxpr(jax.grad(lambda bp, c: loss(m.replace(body_pos=bp), c)))(m.body_pos, ctrls)
    assert any(differentiated)


def _cond_outputs(jaxpr) -> list[int]:
    """Output counts of the conds in ``jaxpr``, nested ones included."""
    counts = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "cond":
            counts.append(len(eqn.outvars))
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            counts += _cond_outputs(sub)
    return counts


def test_stage_zero_sensors_cond_carries_what_the_sensors_write():
    """RK4's stage-0 sensors run in a ``lax.cond`` that returns only the fields they write.
    The probe that finds them once ran on the ``jax.checkpoint``-ed passes, whose outputs are
    all new arrays: every field looked written, and the cond carried the whole Data, also in
    models without sensors."""
    forward = importlib.import_module("mjx_lite.forward")
    m, d = _model()
    d = mjx_lite.forward(m, d)
    written = {"sensordata", "subtree_linvel", "subtree_angmom", "cacc", "cfrc_int",
               "cfrc_ext", "energy"}
    nleaves = sum(len(jax.tree.leaves(getattr(d, f))) for f in written)
    jaxpr = jax.make_jaxpr(lambda d, w: forward._sensors(m, d, w))(d, True).jaxpr
    counts = _cond_outputs(jaxpr)
    assert counts and max(counts) <= nleaves, (counts, nleaves)

    bare = mjx_lite.load_model_from_string(RK4_SCENE.split("<sensor>")[0] + "</mujoco>")
    db = mjx_lite.forward(bare, mjx_lite.make_data(bare))
    jaxpr = jax.make_jaxpr(lambda d, w: forward._sensors(bare, d, w))(db, True).jaxpr
    assert not _cond_outputs(jaxpr)

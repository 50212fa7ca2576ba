"""The noslip post-processor (noslip.py, ``opt.noslip_iterations`` > 0) against MuJoCo 4.0.

MuJoCo runs it after the main solver, inside mj_fwdConstraint, so it is compared at three
levels: the solve on MuJoCo's constraint rows (forces, qacc, qfrc_constraint, efc_state and
solver_niter, pyramidal and elliptic cones, contacts of condim 3 and 6, dof and tendon friction
loss; 1, 3 and 10 sweeps, 10 stopping early by noslip_tolerance; Newton, CG and PGS as the main
solver), whole steps with islands on (Euler and RK4), and steps of gymnasium's ant. The main
solver is cut to 3 iterations so that its forces are far from noslip's answer.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from test_constraint import setup

import mjx_lite
from mjx_lite import constraint, interop, solver
from mjx_lite.types import IntegratorType, SolverType

from conftest import GYM_ASSETS
from parity import assert_close, rel_error

# Measured on MuJoCo 4.0 (float64, relative to the largest entry): at the solve efc_force within
# 1.4e-12, qacc 3.2e-13, qfrc_constraint 1.4e-13; 3 steps (Euler, RK4, implicitfast) within
# 3.7e-15; ant's 5 steps 1.1e-14. The bars leave room for other machines and BLAS.
NOSLIP_RTOL = 1e-9
STEP_RTOL = 1e-8
FLOAT32_RTOL = 1e-3  # float32 rounding through 3 Newton iterations and the sweeps
ELLIPTIC = int(mujoco.mjtCone.mjCONE_ELLIPTIC)

# Two islands: a box (condim 6) pressed into the floor and sliding; a three-hinge arm with dof
# and tendon friction loss whose capsules (condim 3) touch the floor.
NOSLIP_XML = """
<mujoco><option timestep="0.005"/><worldbody>
<geom name="floor" type="plane" size="5 5 .1"/>
<body pos="0 0 .098"><freejoint/><geom type="box" size=".1 .1 .1" condim="6"
  friction="1 .02 .01"/></body>
<body pos="1 0 .28">
  <joint name="j0" type="hinge" axis="0 1 0" frictionloss=".5"/>
  <joint name="j1" type="hinge" axis="1 0 0" frictionloss=".2"/>
  <geom type="capsule" fromto="0 0 0 .3 0 -.2" size=".05" condim="3"/>
  <body pos=".3 0 -.2"><joint name="j2" type="hinge" axis="0 1 0" frictionloss=".1"/>
    <geom type="capsule" fromto="0 0 0 .2 0 -.1" size=".04" mass="3" condim="3"/></body>
</body>
</worldbody>
<tendon><fixed frictionloss=".3"><joint joint="j0" coef="1"/><joint joint="j2" coef="-.7"/>
</fixed></tendon>
</mujoco>"""

_solve = jax.jit(solver.solve, static_argnames="loop")


def _setup(cone, iterations, tolerance=1e-6, solver_type=SolverType.NEWTON):
    opt = dict(noslip_iterations=iterations, noslip_tolerance=tolerance, cone=cone,
               iterations=3, solver=int(solver_type))
    return setup(NOSLIP_XML, seed=0, qvel_noise=0.5, opt=opt)


def _compare(mjm, mjd, out, cone):
    c = constraint.compact(out)
    assert_close("efc_force", c["efc_force"], mjd.efc_force, NOSLIP_RTOL)
    assert_close("qacc", out.qacc, mjd.qacc, NOSLIP_RTOL)
    assert_close("qfrc_constraint", out.qfrc_constraint, mjd.qfrc_constraint, NOSLIP_RTOL)
    np.testing.assert_array_equal(out.solver_niter, mjd.solver_niter)
    # efc_state is MuJoCo's dual state of the final forces; an elliptic force that noslip put
    # on its cone's surface is in the top zone or the middle one by rounding
    keep = np.ones(mjd.nefc, bool)
    if cone == ELLIPTIC:
        for j in range(mjd.ncon):
            con = mjd.contact[j]
            i = con.efc_address
            if con.dim == 1 or i < 0:
                continue
            f = mjd.efc_force[i:i + con.dim]
            t = np.linalg.norm(f[1:] / con.friction[:con.dim - 1])
            if abs(f[0] - t) <= 1e-9 * abs(f[0]):  # mu * (f0 / mu) vs T
                keep[i:i + con.dim] = False
    np.testing.assert_array_equal(c["efc_state"][keep], mjd.efc_state[keep])


# CI time: the middle count and the slower step checks run in the acceptance tier
@pytest.mark.parametrize("iterations", [1, pytest.param(3, marks=pytest.mark.acceptance), 10])
@pytest.mark.parametrize("cone", [0, ELLIPTIC], ids=["pyramidal", "elliptic"])
def test_solve_matches_mujoco(cone, iterations):
    mjm, mjd, m, d = _setup(cone, iterations)
    assert {1, 2} <= set(mjd.efc_type)  # dof and tendon friction loss rows
    out = _solve(m, d)
    _compare(mjm, mjd, out, cone)
    sweeps = int(mjd.solver_niter[0]) - 3
    # the post-processor moved the forces: MuJoCo without it is far from both
    mjm.opt.noslip_iterations = 0
    ref = mujoco.MjData(mjm)
    ref.qpos[:], ref.qvel[:] = mjd.qpos, mjd.qvel
    mujoco.mj_forward(mjm, ref)
    assert rel_error(constraint.compact(out)["efc_force"], ref.efc_force) > 1e-4
    assert 1 <= sweeps <= iterations
    if iterations == 10:
        # noslip_tolerance stops it early, on MuJoCo's sweep; the while loop agrees
        assert sweeps < iterations
        _compare(mjm, mjd, _solve(m, d, loop="early_exit"), cone)


@pytest.mark.parametrize("solver_type", [SolverType.CG, SolverType.PGS])
def test_after_cg_and_pgs(solver_type):
    """Noslip starts from whatever the main solver left: CG's and PGS's forces too."""
    mjm, mjd, m, d = _setup(ELLIPTIC, 10, solver_type=solver_type)
    _compare(mjm, mjd, _solve(m, d), ELLIPTIC)


def _rollout(m, d, nstep):
    def body(d, _):
        d = mjx_lite.step(m, d)
        return d, (d.qpos, d.qvel, d.qacc, d.qacc_warmstart, d.solver_niter)

    return jax.lax.scan(body, d, None, length=nstep)[1]


_rollout_jit = jax.jit(_rollout, static_argnames="nstep")


def _mujoco_rollout(mjm, mjd, nstep):
    out = []
    for _ in range(nstep):
        mujoco.mj_step(mjm, mjd)
        out.append((mjd.qpos.copy(), mjd.qvel.copy(), mjd.qacc.copy(),
                    mjd.qacc_warmstart.copy(), mjd.solver_niter.copy()))
    return [np.stack(x) for x in zip(*out)]


@pytest.mark.parametrize("integrator", [
    IntegratorType.EULER, pytest.param(IntegratorType.RK4, marks=pytest.mark.acceptance)],
    ids=["euler", "rk4"])
def test_steps_match_mujoco(integrator):
    """mjx_lite.step (collision, islands on, MuJoCo's default) against mj_step: noslip runs in
    every forward pass (RK4's four), and the next step warm-starts from noslip's qacc."""
    mjm = mujoco.MjModel.from_xml_string(NOSLIP_XML)
    mjm.opt.noslip_iterations, mjm.opt.iterations = 5, 3
    mjm.opt.integrator, mjm.opt.cone = int(integrator), ELLIPTIC
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = 0.5 * np.random.default_rng(0).standard_normal(mjm.nv)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    ours = _rollout_jit(m, d, nstep=3)
    theirs = _mujoco_rollout(mjm, mjd, 3)
    for name, a, b in zip(("qpos", "qvel", "qacc", "qacc_warmstart"), ours, theirs):
        assert_close(name, a, b, STEP_RTOL)
    np.testing.assert_array_equal(ours[4], theirs[4])
    assert np.all(theirs[4][0, :2] > 0)  # two islands, both solved


@pytest.mark.acceptance  # CI time: ant's step compile
def test_ant_steps_match_mujoco():
    """gymnasium's ant on the floor with noslip_iterations=3: qpos, qvel over 5 steps."""
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "ant.xml"))
    mjd = mujoco.MjData(mjm)
    for _ in range(100):  # settle onto the floor (MuJoCo only)
        mujoco.mj_step(mjm, mjd)
    assert mjd.ncon >= 4
    mjd.ctrl[:] = np.random.default_rng(1).uniform(-1, 1, mjm.nu)
    mjm.opt.noslip_iterations = 3
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    ours = _rollout_jit(m, d, nstep=5)
    theirs = _mujoco_rollout(mjm, mjd, 5)
    for name, a, b in zip(("qpos", "qvel"), ours, theirs):
        assert_close(name, a, b, STEP_RTOL)
    np.testing.assert_array_equal(ours[4], theirs[4])
    assert np.sum(theirs[4][:, 0] > 0) >= 3  # steps with contacts, so with noslip sweeps


@pytest.mark.parametrize("adjoint", [
    "unroll", pytest.param("implicit", marks=pytest.mark.acceptance)])
def test_grad_finite(adjoint):
    """Reverse mode through a step with noslip on (the implicit adjoint unrolls noslip)."""
    mjm = mujoco.MjModel.from_xml_string(NOSLIP_XML)
    mjm.opt.noslip_iterations, mjm.opt.iterations = 3, 3
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = 0.5 * np.random.default_rng(0).standard_normal(mjm.nv)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)

    def loss(qvel):
        out = mjx_lite.step(m, d.replace(qvel=qvel), adjoint=adjoint)
        return jp.sum(out.qvel**2) + jp.sum(out.qpos)

    g = jax.jit(jax.grad(loss))(d.qvel)
    assert np.all(np.isfinite(np.asarray(g))) and np.any(np.asarray(g) != 0)


def test_float32_vmap():
    """A batch of two float32 problems under vmap (the solve's structure is static)."""
    mjm, mjd, m, d = _setup(ELLIPTIC, 10)
    f32 = lambda x: x.astype(jp.float32) if jp.issubdtype(x.dtype, jp.floating) else x  # noqa: E731
    m32, d32 = jax.tree_util.tree_map(f32, (m, d))
    batch = jax.tree_util.tree_map(lambda x: jp.stack([x, x]), d32)
    out = jax.jit(jax.vmap(solver.solve, in_axes=(None, 0)))(m32, batch)
    assert out.efc_force.dtype == jp.float32
    for k in range(2):
        c = constraint.compact(jax.tree_util.tree_map(lambda x, k=k: x[k], out))
        assert_close("efc_force float32", np.asarray(c["efc_force"], np.float64),
                     mjd.efc_force, FLOAT32_RTOL)

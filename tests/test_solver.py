"""solver.solve against MuJoCo's converged solution (qacc, qfrc_constraint, efc_force,
efc_state), the fixed / early-exit loops, and gradients through the fixed-iteration solve.

Both engines run to convergence (tiny tolerance, many iterations), so the comparison is of the
solution of the same convex problem, not of iterates; MuJoCo's islands are disabled so that its
efc_state is in efc order. PGS is also compared at the model's own settings, where it must stop
at MuJoCo's iteration with MuJoCo's iterate.
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from test_constraint import CONTACT_XML, EQ_XML, setup

import mjx_lite
from mjx_lite import constraint, interop, solver
from mjx_lite.types import DisableBit, SolverType

from conftest import GYM_ASSETS, MJX_TEST_DATA, REPO_ROOT
from parity import assert_close, rel_error

CONVERGED_RTOL = 1e-6  # both engines at tolerance 1e-13: the same minimizer
PGS_RTOL = 1e-4  # PGS is first order: its converged answer is looser
CONVERGED = {"tolerance": 1e-13, "iterations": 200, "ls_iterations": 50}
ELLIPTIC = mujoco.mjtCone.mjCONE_ELLIPTIC

_solve = jax.jit(solver.solve, static_argnames="loop")


def compare_solution(mjd, d, rtol, state=True):
    errs = {}
    errs["qacc"] = assert_close("qacc", d.qacc, mjd.qacc, rtol)
    errs["qfrc_constraint"] = assert_close("qfrc_constraint", d.qfrc_constraint,
                                           mjd.qfrc_constraint, rtol)
    c = constraint.compact(d)
    errs["efc_force"] = assert_close("efc_force", c["efc_force"], mjd.efc_force, rtol)
    if state:
        np.testing.assert_array_equal(c["efc_state"], mjd.efc_state)
    return errs


@pytest.mark.parametrize("solver_type", [SolverType.NEWTON, SolverType.CG])
def test_equality_friction_limits(solver_type):
    opt = dict(CONVERGED, solver=int(solver_type))
    _, mjd, m, d = setup(EQ_XML, seed=1, qpos_noise=0.4, qvel_noise=1.0, opt=opt)
    out = _solve(m, d)
    compare_solution(mjd, out, CONVERGED_RTOL)


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_contacts_newton(cone):
    opt = dict(CONVERGED, solver=int(SolverType.NEWTON), cone=ELLIPTIC if cone == "elliptic"
               else 0)
    _, mjd, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)
    out = _solve(m, d)
    compare_solution(mjd, out, CONVERGED_RTOL)
    # the optimality condition an implicit adjoint differentiates holds at the solution
    res = solver.residual(m, d, out.qacc)
    assert float(jp.linalg.norm(res)) <= 1e-8 * float(jp.linalg.norm(d.qfrc_smooth))
    h = solver.hessian(m, d, out.qacc)
    np.testing.assert_allclose(h, h.T, rtol=1e-12, atol=1e-12)
    assert np.all(np.linalg.eigvalsh(np.asarray(h)) > 0)


@pytest.mark.parametrize("cone", [0, ELLIPTIC])
def test_pgs(cone):
    opt = dict(CONVERGED, solver=int(SolverType.PGS), iterations=1000, tolerance=1e-12,
               cone=cone)
    _, mjd, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)
    out = _solve(m, d, loop="early_exit")
    compare_solution(mjd, out, PGS_RTOL, state=False)


OWN_RTOL = 1e-3  # issue 6's bar for PGS at the model's own settings (rounding in practice)


@pytest.mark.parametrize("cone", [0, ELLIPTIC])
def test_pgs_own_settings_matches_iterates(cone):
    """PGS at the model's own settings (100 iterations, tolerance 1e-8) stops where MuJoCo
    4.0's does, with its forces: the same visiting order, momentum and restarts. Cold
    (zero warmstart) and warm (near the solution) starts; contacts of condim 1, 3, 4, 6."""
    opt = dict(solver=int(SolverType.PGS), cone=cone)
    mjm, mjd, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)
    for warm in (False, True):
        if warm:
            # near the solution: a converged Newton qacc, slightly off
            mjm.opt.solver, mjm.opt.tolerance = int(SolverType.NEWTON), 1e-13
            mujoco.mj_forward(mjm, mjd)
            mjm.opt.solver, mjm.opt.tolerance = int(SolverType.PGS), 1e-8
            mjd.qacc_warmstart[:] = 0.999 * mjd.qacc
            mujoco.mj_forward(mjm, mjd)
            d = d.replace(qacc_warmstart=jp.asarray(mjd.qacc_warmstart))
        out = _solve(m, d, loop="early_exit")
        assert 1 < int(mjd.solver_niter[0]) < mjm.opt.iterations
        niter = int(out.solver_niter[0])
        assert niter == int(mjd.solver_niter[0]), (warm, niter)
        compare_solution(mjd, out, OWN_RTOL, state=False)


@pytest.mark.parametrize("solver_type", [SolverType.NEWTON, SolverType.PGS])
def test_early_exit_matches_fixed(solver_type):
    """The while loops of early exit (Newton's iterations; PGS's sweeps and its visits of the
    active units only) give the fixed loop's answer and count."""
    opt = dict(CONVERGED, solver=int(solver_type))
    _, _, m, d = setup(CONTACT_XML, seed=2, qvel_noise=0.3, opt=opt)
    fixed = _solve(m, d)
    early = _solve(m, d, loop="early_exit")
    np.testing.assert_allclose(early.qacc, fixed.qacc, rtol=1e-12, atol=1e-12)
    assert int(early.solver_niter[0]) == int(fixed.solver_niter[0]) < m.opt.iterations


def test_warmstart_at_solution_takes_no_iteration():
    opt = dict(CONVERGED, solver=int(SolverType.NEWTON), tolerance=1e-8)
    _, _, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)
    first = _solve(m, d)
    again = _solve(m, d.replace(qacc_warmstart=first.qacc))
    assert int(again.solver_niter[0]) == 0
    np.testing.assert_allclose(again.qacc, first.qacc, rtol=1e-12)


@pytest.mark.parametrize("solver_type", [SolverType.NEWTON, SolverType.CG, SolverType.PGS])
def test_grad_finite(solver_type):
    """Reverse mode through 4 fixed iterations (elliptic contacts, limits, friction)."""
    opt = dict(CONVERGED, solver=int(solver_type), iterations=4, ls_iterations=10,
               cone=ELLIPTIC)
    _, _, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)

    def loss(qfrc_smooth, aref):
        dd = d.replace(qfrc_smooth=qfrc_smooth, qacc_smooth=jp.linalg.solve(d.qM, qfrc_smooth),
                       efc_aref=aref)
        return jp.sum(solver.solve(m, dd).qacc ** 2)

    g = jax.jit(jax.grad(loss, argnums=(0, 1)))(d.qfrc_smooth, d.efc_aref)
    assert all(np.all(np.isfinite(x)) for x in g)
    assert float(jp.abs(g[0]).max()) > 0


@pytest.mark.parametrize("solver_type,iterations,adjoint", [
    (SolverType.NEWTON, 1, "unroll"), (SolverType.CG, 3, "unroll"),
    (SolverType.NEWTON, 1, "implicit"), (SolverType.CG, 1, "implicit"),
    (SolverType.PGS, 1, "implicit")])
def test_derivative_of_an_unconverged_solve(solver_type, iterations, adjoint):
    """Stopped after 1 or 3 iterations (tolerance 0, so short of the solution; elliptic
    contacts, limits, friction loss), each adjoint equals central differences of the map it
    differentiates. Unrolled: that same map; the line search, run as a while_loop on
    constants, passes the derivative of its final Newton point (solver._linesearch).
    Implicit: its forward continues with Newton to the solution (solver.IMPLICIT_MAX_POLISH),
    which it returns, as a converged solve does, with the extra iterations counted."""
    opt = dict(CONVERGED, solver=int(solver_type), iterations=iterations, tolerance=0.0,
               cone=ELLIPTIC)
    _, _, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)
    qm_inv = jp.linalg.inv(d.qM)

    def solved(x):
        qfrc, aref = x[:m.nv], x[m.nv:]
        dd = d.replace(qfrc_smooth=qfrc, qacc_smooth=qm_inv @ qfrc, efc_aref=aref)
        return solver.solve(m, dd, adjoint=adjoint)

    def qacc(x):
        return solved(x).qacc

    x0 = jp.concatenate([d.qfrc_smooth, d.efc_aref])
    # the differences' values come from the Jacobian's own program (one compile, not two)
    value_and_jac = jax.jit(lambda x: (solved(x), jax.jacrev(qacc)(x)))
    out, jac = value_and_jac(x0)
    dirs = jp.asarray(np.random.default_rng(0).standard_normal((4, x0.shape[0])))
    f = lambda x: value_and_jac(x)[0].qacc  # noqa: E731
    eps = 1e-6
    fd = jp.stack([(f(x0 + eps * u) - f(x0 - eps * u)) / (2 * eps) for u in dirs])
    moved = out.qacc - d.qacc_smooth
    assert float(jp.abs(moved).max()) > 1e-3  # the contacts do act on this state
    assert rel_error(dirs @ jac.T, fd) <= 1e-6
    if adjoint == "implicit":
        newton = m.replace(opt=m.opt.replace(solver=SolverType.NEWTON, iterations=200))
        exact = _solve(newton, d)
        assert rel_error(out.qacc, exact.qacc) <= 1e-10
        assert int(out.solver_niter[0]) > iterations


def test_vmap_batch():
    """A batch of states solves in one vmapped call, each as it does alone."""
    opt = dict(CONVERGED, solver=int(SolverType.NEWTON), iterations=20)
    _, _, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)
    forces = jp.stack([d.qfrc_smooth, 0.5 * d.qfrc_smooth])
    accs = jp.stack([d.qacc_smooth, 0.5 * d.qacc_smooth])

    def one(qfrc, qacc):
        return solver.solve(m, d.replace(qfrc_smooth=qfrc, qacc_smooth=qacc)).qacc

    batch = jax.jit(jax.vmap(one))(forces, accs)
    single = jax.jit(one)(forces[1], accs[1])
    np.testing.assert_allclose(batch[1], single, rtol=1e-10, atol=1e-10)
    assert not np.allclose(batch[0], batch[1])


FLOAT32_RTOL = 1e-4  # float32 rounding on a converged solve


def _f32(tree):
    return jax.tree_util.tree_map(
        lambda x: x.astype(jp.float32) if jp.issubdtype(x.dtype, jp.floating) else x, tree)


_rows = jax.jit(lambda m, d: constraint.reference_constraint(m, constraint.make_constraint(m, d)))


@pytest.mark.parametrize("cone", [0, ELLIPTIC])
def test_float32(cone):
    opt = dict(tolerance=1e-8, iterations=50, cone=cone)
    _, mjd, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)
    m32 = _f32(m)
    rows = _rows(m32, _f32(d))
    assert rows.efc_J.dtype == rows.efc_aref.dtype == rows.efc_D.dtype == jp.float32
    out = _solve(m32, rows)
    assert out.qacc.dtype == jp.float32
    assert_close("qacc float32", np.asarray(out.qacc, np.float64), mjd.qacc, FLOAT32_RTOL)


@pytest.mark.parametrize("cone", [0, ELLIPTIC])
def test_float32_implicit_forward_reaches_the_minimizer(cone):
    """The implicit adjoint's forward in float32, from 1 configured iteration: its line
    searches stop at rounding (``solver._search``'s ``polish``), and the minimizer it returns
    is MuJoCo's converged one (float64, 50 iterations) to float32 rounding, as the fixed
    loop's converged float32 solve is (test_float32). In float64 the floor is far below the
    tolerance: the same solve agrees to 1e-9."""
    ref = dict(tolerance=1e-10, iterations=50, cone=cone)
    _, mjd, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=ref)
    one = m.replace(opt=m.opt.replace(iterations=1))
    implicit = jax.jit(lambda m, d: solver.solve(m, d, loop="early_exit", adjoint="implicit"))
    m32 = _f32(one)
    out = implicit(m32, _rows(m32, _f32(d)))
    assert out.qacc.dtype == jp.float32
    assert_close("qacc float32", np.asarray(out.qacc, np.float64), mjd.qacc, FLOAT32_RTOL)
    assert_close("qacc float64", implicit(one, d).qacc, mjd.qacc, 1e-9)


@pytest.mark.parametrize("cone", [0, ELLIPTIC])
def test_implicit_forward_factor_is_the_final_hessians(cone):
    """The factor the implicit adjoint's forward returns for the adjoint (``solver._iterate``)
    is that of the Hessian at the qacc it returns, where rows changed zone from the start's
    (checked: the start's Hessian differs), cold and warm started, with its qacc the fixed
    loop's. A factor kept from an earlier iterate fails it (a Hessian reuse that ignored the
    cone's middle zone did, 9e-3; one that never rebuilt it failed the pyramidal case)."""
    opt = dict(CONVERGED, solver=int(SolverType.NEWTON), cone=cone)
    _, _, m, d = setup(CONTACT_XML, seed=2, qvel_noise=0.3, opt=opt)
    iterate = jax.jit(lambda m, d: solver._iterate(m, d, "early_exit", factor=True))
    fixed = _solve(m, d)
    for start in (jp.zeros_like(d.qacc), 0.9 * fixed.qacc):
        dd = d.replace(qacc_warmstart=start)
        qacc, niter, low = iterate(m, dd)
        assert int(niter[0]) > 1
        h = np.asarray(solver.hessian(m, dd, qacc))
        assert_close("factor", low @ low.T, h, 1e-12)
        for first in (start, d.qacc_smooth):  # whichever _init starts from
            assert rel_error(np.asarray(solver.hessian(m, dd, first)), h) > 1e-3
        assert_close("qacc", qacc, fixed.qacc, 1e-9)


PIPELINE_XML = """
<mujoco><option timestep="0.005" tolerance="1e-13" iterations="200"/><worldbody>
<geom type="plane" size="5 5 .1"/>
<body pos="0 0 .09"><freejoint/><geom type="sphere" size=".1"/></body>
<body pos=".5 0 .095"><freejoint/><geom type="sphere" size=".1" condim="1"/></body>
<body pos="1 0 .2"><joint type="hinge" axis="0 1 0" range="-.1 .1"/>
  <geom type="capsule" size=".05" fromto="0 0 0 .3 0 -.2"/></body>
</worldbody></mujoco>"""


def test_pipeline_with_collision():
    """make_data budget, mjx_lite's own collision, the forward stages and the solver together;
    contact slot order is the collider's, so order-free outputs are compared."""
    from mjx_lite import interop, io
    from mjx_lite.collision import driver
    from mjx_lite.forward import fwd_acceleration, fwd_actuation, fwd_position, fwd_velocity

    mjm = mujoco.MjModel.from_xml_string(PIPELINE_XML)
    mjm.opt.disableflags |= DisableBit.ISLAND
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = 0.3 * np.random.default_rng(0).standard_normal(mjm.nv)
    mjd.qpos[-1] = 0.2
    mujoco.mj_forward(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    d = io.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel))

    def fwd(m, d):
        d = fwd_position(m, d)
        d = driver.collision(m, d)
        d = constraint.make_constraint(m, d)
        d = fwd_velocity(m, d)
        d = constraint.reference_constraint(m, d)
        d = fwd_actuation(m, d)
        d = fwd_acceleration(m, d)
        return solver.solve(m, d)

    out = jax.jit(fwd)(m, d)
    assert out.efc_J.shape == d.efc_J.shape  # make_data's budget is the one the rows fill
    assert int(out.efc_active.sum()) == mjd.nefc
    assert_close("qacc", out.qacc, mjd.qacc, CONVERGED_RTOL)
    assert_close("qfrc_constraint", out.qfrc_constraint, mjd.qfrc_constraint, CONVERGED_RTOL)


# ------------------------------------------------------------------------------------------
# acceptance tier: gymnasium models, contacts disabled, random qpos violating the limits


def _gym_states():
    for name in ("humanoid", "ant", "hopper", "walker2d", "half_cheetah"):
        path = GYM_ASSETS / f"{name}.xml"
        if path.exists():
            yield name, path


@pytest.mark.acceptance
def test_acceptance_gym_limits():
    lines = []
    worst = 0.0
    for name, path in _gym_states():
        mjm = mujoco.MjModel.from_xml_path(str(path))
        for stype in (SolverType.NEWTON, SolverType.CG):
            opt = dict(CONVERGED, solver=int(stype))
            for seed in range(3):
                _, mjd, m, d = setup("", mjm=mjm, seed=seed, qpos_noise=0.8, qvel_noise=1.0,
                                     opt=opt, disable=DisableBit.CONTACT)
                if mjd.nefc == 0:
                    continue
                out = _solve(m, d)
                c = constraint.compact(out)
                errs = [rel_error(out.qacc, mjd.qacc),
                        rel_error(out.qfrc_constraint, mjd.qfrc_constraint),
                        rel_error(c["efc_force"], mjd.efc_force)]
                worst = max(worst, *errs)
                lines.append(f"{name} {stype.name} seed={seed} nefc={mjd.nefc} "
                             f"qacc={errs[0]:.2e} qfrc_constraint={errs[1]:.2e} "
                             f"efc_force={errs[2]:.2e}")
    contact_lines, cworst = _contact_matrix()
    gym_lines, gworst = _gym_contacts()
    contact_lines += gym_lines
    cworst = max(cworst, gworst)
    out_dir = pathlib.Path(REPO_ROOT) / "tests" / "acceptance"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "solver.txt").write_text(
        "solver parity, both engines converged (tolerance 1e-13; PGS 1e-12, 1000 iterations)\n"
        + "\n".join(lines + contact_lines)
        + f"\nworst relative error: limits {worst:.2e}, contacts {cworst:.2e}\n")
    assert worst < 1e-5 and cworst < 1e-5


def _contact_matrix():
    lines, worst = [], 0.0
    for cone in (0, ELLIPTIC):
        for stype in (SolverType.NEWTON, SolverType.CG, SolverType.PGS):
            opt = dict(CONVERGED, solver=int(stype), cone=cone)
            if stype == SolverType.PGS:
                opt.update(iterations=1000, tolerance=1e-12)
            _, mjd, m, d = setup(CONTACT_XML, seed=1, qvel_noise=0.3, opt=opt)
            out = _solve(m, d, loop="early_exit")
            c = constraint.compact(out)
            errs = [rel_error(out.qacc, mjd.qacc), rel_error(c["efc_force"], mjd.efc_force)]
            if stype != SolverType.PGS:
                worst = max(worst, *errs)
            lines.append(f"contacts cone={'elliptic' if cone else 'pyramidal'} {stype.name} "
                         f"niter={int(out.solver_niter[0])} qacc={errs[0]:.2e} "
                         f"efc_force={errs[1]:.2e}")
    return lines, worst



def _gym_contacts():
    """Gymnasium models with contacts: MuJoCo runs random controls until >= 4 contacts are
    active (else the state with the most within 2000 steps), then both engines solve it to
    convergence (PGS models also with PGS); at the model's own settings the iteration counts
    are recorded side by side."""
    lines, worst = [], 0.0
    for name, path in _gym_states():
        mjm = mujoco.MjModel.from_xml_path(str(path))
        own = (int(mjm.opt.solver), int(mjm.opt.iterations), float(mjm.opt.tolerance))
        mjd = mujoco.MjData(mjm)
        rng = np.random.default_rng(0)
        best = (-1, 0, None)  # (active contacts, step, state): 4 or the most seen
        for step in range(2000):
            mjd.ctrl[:] = rng.uniform(-1, 1, mjm.nu)
            mujoco.mj_step(mjm, mjd)
            nact = int((mjd.contact.efc_address[: mjd.ncon] >= 0).sum())
            if step > 50 and nact > best[0]:
                best = (nact, step, (mjd.qpos.copy(), mjd.qvel.copy(), mjd.ctrl.copy()))
            if best[0] >= 4:
                break
        _, step, (qpos, qvel, ctrl) = best
        solvers = [SolverType.NEWTON, SolverType.CG]
        if own[0] == SolverType.PGS:
            solvers.append(SolverType.PGS)
        for stype in solvers:
            opt = dict(CONVERGED, solver=int(stype))
            if stype == SolverType.PGS:
                opt.update(iterations=1000, tolerance=1e-12)
            mjd2, m, d = _state(mjm, qpos, qvel, ctrl, opt)
            out = _solve(m, d, loop="early_exit")
            c = constraint.compact(out)
            errs = [rel_error(out.qacc, mjd2.qacc),
                    rel_error(out.qfrc_constraint, mjd2.qfrc_constraint),
                    rel_error(c["efc_force"], mjd2.efc_force)]
            if stype != SolverType.PGS:
                worst = max(worst, *errs)
            lines.append(f"{name} step={step} ncon={mjd2.ncon} nefc={mjd2.nefc} {stype.name} "
                         f"qacc={errs[0]:.2e} qfrc_constraint={errs[1]:.2e} "
                         f"efc_force={errs[2]:.2e}")
        opt = dict(solver=own[0], iterations=own[1], tolerance=own[2])
        mjd2, m, d = _state(mjm, qpos, qvel, ctrl, opt)
        out = _solve(m, d, loop="early_exit")
        lines.append(f"{name} own settings {SolverType(own[0]).name}: niter ours "
                     f"{int(out.solver_niter[0])} mujoco {int(mjd2.solver_niter[0])}, qacc "
                     f"{rel_error(out.qacc, mjd2.qacc):.2e}")
    return lines, worst


def _state(mjm, qpos, qvel, ctrl, opt):
    from test_constraint import SPARE_SLOTS, mj_contact

    from mjx_lite import interop, smooth

    for k, v in opt.items():
        setattr(mjm.opt, k, v)
    mjm.opt.disableflags |= DisableBit.ISLAND
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m).replace(
        contact=mj_contact(mjd, mjd.ncon + SPARE_SLOTS))
    d = smooth.factor_m(m, d)
    d = jax.jit(lambda m, d: constraint.reference_constraint(
        m, constraint.make_constraint(m, d)))(m, d)
    return mjd, m, d


@pytest.mark.parametrize("solver_type,iterations,ls_iterations", [
    (SolverType.NEWTON, 1, 2), (SolverType.NEWTON, 3, 3), (SolverType.CG, 2, 3)])
def test_short_line_search_matches_iterates(solver_type, iterations, ls_iterations):
    """With few line-search evaluations (the mujoco-mjx test models run ls_iterations=4) the
    search stops before its minimizer, so the iterate depends on MuJoCo's schedule of
    evaluations: both engines stop at the same iteration with the same qacc. MuJoCo's
    neval shows that its search used up the budget in at least one iteration here. (CG at 3
    iterations and 3 evaluations differs on 1 of 3 states checked, where MuJoCo's third step
    raises the cost: not diagnosed.)"""
    opt = dict(solver=int(solver_type), iterations=iterations, ls_iterations=ls_iterations,
               tolerance=1e-10)
    for seed in range(4):
        _, mjd, m, d = setup(CONTACT_XML, seed=seed, qvel_noise=1.0, opt=opt)
        out = _solve(m, d, loop="early_exit")
        assert int(out.solver_niter[0]) == int(mjd.solver_niter[0])
        assert_close("qacc", out.qacc, mjd.qacc, 1e-10)
    neval = [mjd.solver[i].neval for i in range(int(mjd.solver_niter[0]))]
    assert max(neval) >= ls_iterations, neval


def test_improvement_survives_large_constant_cost():
    """mujoco-mjx's sensor.xml at its random-control state (seed 0, step 21) holds a contact
    1.34 m deep, so the cost is ~1.2e12 of constants and a difference of total costs rounds
    the scaled improvement to multiples of 2.1e-8. MuJoCo 4.0 measures it to ~1e-3 of itself
    and runs CG (tolerance 1e-12) to 53 iterations; a rounded improvement of 0 stopped ours at
    30 with qacc 3.0e-5 off. With the cost change in closed form it converges within 1e-6."""
    from test_constraint_acceptance import CONVERGED, _mj_at, _ours_at, _solve, find_state

    mjm0 = mujoco.MjModel.from_xml_path(str(MJX_TEST_DATA / "sensor" / "sensor.xml"))
    _, step, qpos, qvel, ctrl, _, _ = find_state("mjx:sensor/sensor", mjm0, max_seeds=1)
    assert step == 21
    opt = dict(CONVERGED, solver=int(SolverType.CG), tolerance=1e-12)
    mjm, mjd = _mj_at(mjm0, qpos, qvel, ctrl, opt)
    assert mjd.contact.dist[: mjd.ncon].min() < -1.3
    m, d = _ours_at(mjm, mjd)
    out = _solve(m, d, loop="early_exit")
    assert int(out.solver_niter[0]) > 40, int(out.solver_niter[0])
    assert rel_error(out.qacc, mjd.qacc) < 1e-6


# ------------------------------------------------------------------------------------------
# inverse dynamics: the constraint force of a given qacc in closed form


def _inverse_against_mujoco(mjm, mjd, seed):
    """mj_inverse and ours at the state of mjd with a random qacc (not forward's), ours fed
    a garbage qfrc_constraint so that reading forward's force would show."""
    from mjx_lite import interop
    from mjx_lite.forward import inverse

    rng = np.random.default_rng(seed)
    mjd.qacc[:] = 3.0 * rng.standard_normal(mjm.nv)
    mjd.xfrc_applied[1:] = rng.standard_normal((mjm.nbody - 1, 6))
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    d = d.replace(qfrc_constraint=jp.full(mjm.nv, 1e3))
    mujoco.mj_inverse(mjm, mjd)
    return jax.jit(inverse)(m, d)


@pytest.mark.parametrize("xml,cone", [(CONTACT_XML, 0), (CONTACT_XML, ELLIPTIC), (EQ_XML, 0)])
def test_inverse_closed_form_constraint_force(xml, cone):
    """Contacts of condim 1/3/4/6 in both cones (penetrating), equality, friction loss and
    limits: qfrc_inverse and qfrc_constraint equal mj_inverse's at an arbitrary qacc."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjm.opt.cone = cone
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(1)
    mjd.qpos[:] = mjm.qpos0 + 0.03 * rng.standard_normal(mjm.nq)
    mujoco.mj_normalizeQuat(mjm, mjd.qpos)
    mjd.qvel[:] = 0.5 * rng.standard_normal(mjm.nv)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.nefc > 10
    out = _inverse_against_mujoco(mjm, mjd, seed=2)
    assert int(out.efc_active.sum()) == mjd.nefc
    assert_close("qfrc_constraint", out.qfrc_constraint, mjd.qfrc_constraint, 1e-10)
    assert_close("qfrc_inverse", out.qfrc_inverse, mjd.qfrc_inverse, 1e-10)
    assert np.array_equal(np.asarray(out.qacc), mjd.qacc)


# a box resting on the floor (contacts), a damped arm with an actuator damper, a free body
# spinning in the air (implicitfast's exact block) and sensors of every stage
DISCRETE_XML = """
<mujoco><option integrator="{integrator}"><flag invdiscrete="enable"/></option><worldbody>
<geom type="plane" size="5 5 .1"/>
<body pos="0 0 .098"><freejoint/><geom type="box" size=".1 .2 .1"/><site name="box"/>
  <body pos=".2 0 0"><joint name="h" type="hinge" axis="0 1 0" damping="0.7"/>
    <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/><site name="tip" pos=".3 0 0"/>
  </body></body>
<body pos="1 0 1"><freejoint/><geom type="box" size=".05 .1 .2"/></body>
</worldbody>
<actuator><motor joint="h" damping="0.3"/></actuator>
<sensor><jointpos joint="h"/><velocimeter site="tip"/><accelerometer site="tip"/>
  <touch site="box"/></sensor></mujoco>"""


@pytest.mark.parametrize("integrator", ["Euler", "implicit", "implicitfast"])
def test_inverse_discrete(integrator):
    """With invdiscrete, qacc is the integrator's (qvel_next - qvel) / h: ours equals
    mj_inverse (forces and sensors), and differs from the continuous-time answer."""
    mjm = mujoco.MjModel.from_xml_string(DISCRETE_XML.format(integrator=integrator))
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = 2.0 * np.random.default_rng(3).standard_normal(mjm.nv)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon >= 4
    out = _inverse_against_mujoco(mjm, mjd, seed=4)
    assert_close("qfrc_inverse", out.qfrc_inverse, mjd.qfrc_inverse, 1e-10)
    assert_close("sensordata", out.sensordata, mjd.sensordata, 1e-10)
    # the contact forces of the resting box dominate qfrc_inverse; the discrete correction
    # is still 1e4 times the tolerance above
    mjm.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_INVDISCRETE)
    mujoco.mj_inverse(mjm, mjd)
    assert rel_error(out.qfrc_inverse, mjd.qfrc_inverse) > 1e-6


def test_inverse_discrete_rk4_raises():
    from mjx_lite import interop, io
    from mjx_lite.forward import inverse

    mjm = mujoco.MjModel.from_xml_string(DISCRETE_XML.format(integrator="RK4"))
    m = interop.model_from_mujoco(mjm)
    with pytest.raises(NotImplementedError, match="RK4"):
        inverse(m, io.make_data(m))


MIXED_CONDIM_XML = """
<mujoco><option timestep="0.005" iterations="6"/>
<default><geom condim="1"/></default>
<worldbody>
<geom type="plane" size="5 5 .1" condim="3"/>
<body pos="0 0 .09"><freejoint/><geom type="capsule" size=".05" fromto="-.1 0 0 .1 0 0"/></body>
<body pos="0 0 .2"><freejoint/><geom type="capsule" size=".05" fromto="0 -.1 0 0 .1 0"/></body>
<body pos=".12 0 .1"><freejoint/><geom type="sphere" size=".06" condim="4"/></body>
</worldbody></mujoco>"""


@pytest.mark.parametrize("solver_type", [SolverType.NEWTON, SolverType.CG])
@pytest.mark.parametrize("adjoint", ["unroll", "implicit"])
def test_solve_on_live_rows_equals_the_full_solve(solver_type, adjoint, monkeypatch):
    """Pyramidal contact slots whose static condim is below the model's widest carry rows that
    are never active; the primal solvers run without them (``RowPlan.live``). Everything the
    solve writes, and its gradient, equal the solve over every row; a dead row made active (a
    contact layout that is not the collision driver's) makes qacc NaN."""
    from mjx_lite import interop, io
    from mjx_lite.forward import forward

    mjm = mujoco.MjModel.from_xml_string(MIXED_CONDIM_XML)
    mjm.opt.solver = int(solver_type)
    m = interop.model_from_mujoco(mjm)
    d = io.make_data(m)
    p = constraint.RowPlan(m, d.contact.dist.shape[0])
    assert solver._compacts(m, p) and p.live.size < p.nefc
    d = d.replace(qvel=0.3 * jp.asarray(np.random.default_rng(0).standard_normal(m.nv)))
    fields = ("qacc", "qfrc_constraint", "efc_force", "efc_state", "solver_niter")

    def run(d):
        out = forward(m, d, adjoint=adjoint)
        return {f: getattr(out, f) for f in fields}

    def grad(d):
        return jax.grad(lambda v: jp.sum(forward(m, d.replace(qvel=v), adjoint=adjoint).qacc
                                         ** 2))(d.qvel)

    live, live_grad = jax.jit(run)(d), jax.jit(grad)(d)
    assert int(jp.sum(live["efc_force"] != 0)) >= 6  # several contacts push
    monkeypatch.setattr(solver, "_compacts", lambda m, p: False)
    full, full_grad = jax.jit(run)(d), jax.jit(grad)(d)
    for f in fields:
        assert live[f].dtype == full[f].dtype, f
        assert_close(f, live[f], full[f], 1e-12)
    assert_close("grad", live_grad, full_grad, 1e-10)
    monkeypatch.undo()

    # a dead row switched on: the solve refuses it loudly
    after = jax.jit(lambda d: constraint.make_constraint(m, d))(
        jax.jit(lambda d: forward(m, d))(d))
    dead = np.setdiff1d(np.arange(p.nefc), p.live)
    poisoned = after.replace(efc_active=after.efc_active.at[dead[0]].set(True))
    out = jax.jit(lambda d: solver.solve(m, d))(poisoned)
    assert np.isnan(np.asarray(out.qacc)).all()


def test_implicit_factor_is_the_hessians_at_the_solution():
    """The implicit adjoint's forward keeps the Cholesky factor of the last iterate: it is the
    factor of the Hessian at the returned qacc, whether the solve took 0, 1 or several
    iterations."""
    import mjx_lite
    from mjx_lite import linalg

    m = mjx_lite.load_model(GYM_ASSETS / "hopper.xml")
    m = m.replace(opt=m.opt.replace(solver=int(SolverType.NEWTON), iterations=1))
    d = mjx_lite.make_data(m)
    step = jax.jit(lambda d: mjx_lite.step(m, d))
    iterate = jax.jit(lambda d: solver._iterate(m, d, "early_exit", factor=True))
    fresh = jax.jit(lambda d, qacc: linalg.cholesky(solver.hessian(m, d, qacc)))
    seen = set()
    for k in range(120):
        d = step(d)
        if k % 8 == 7:
            f = jax.jit(lambda d: mjx_lite.forward(m, d))(d)
            qacc, niter, low = iterate(f)
            seen.add(int(np.max(niter)))
            assert_close(f"factor at step {k}", low, fresh(f, qacc), 1e-12)
    assert len(seen) >= 2, seen


def test_batched_steps_match_mujoco_where_the_search_runs_out():
    """At tolerance 0 MuJoCo's line search never meets its slope test and ends on its budget
    with the cheaper bracket end. Once one end sits at the minimizer (its slope at rounding),
    the Newton points land back on it and only the midpoints shrink the bracket, so the ends'
    costs agree to rounding at the end: ordered by those costs, the step picked the far end
    of a ~1e-8-wide bracket at ~2% of these states under vmap (qacc ~1e-9 off MuJoCo's, which
    put 1e-4 jumps into the hopper CG 1-iteration central differences of test_grad). Gymnasium
    hopper, CG at 1 iteration, RK4: 512 states 1e-6 apart, stepped in one vmapped call."""
    from test_grad import settled_state

    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "hopper.xml"))
    mjm.opt.solver, mjm.opt.iterations, mjm.opt.tolerance = int(SolverType.CG), 1, 0.0
    mjd = settled_state(mjm)  # test_grad's hopper state
    rng = np.random.default_rng(0)
    assert mjd.solver[0].neval == mjm.opt.ls_iterations and mjd.nefc > 0
    direction = rng.standard_normal(mjm.nq + mjm.nv)
    direction /= np.linalg.norm(direction)
    states = np.r_[mjd.qpos, mjd.qvel] + np.linspace(-1e-6, 1e-6, 512)[:, None] * direction
    theirs = []
    for x in states:
        d1 = mujoco.MjData(mjm)
        d1.qpos[:], d1.qvel[:], d1.ctrl[:] = x[:mjm.nq], x[mjm.nq:], mjd.ctrl
        d1.qacc_warmstart[:] = mjd.qacc_warmstart
        mujoco.mj_step(mjm, d1)
        theirs.append(np.r_[d1.qpos, d1.qvel])
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)

    def step(x):
        out = mjx_lite.step(m, d.replace(qpos=x[:m.nq], qvel=x[m.nq:]))
        return jp.concatenate([out.qpos, out.qvel])

    ours = jax.jit(jax.vmap(step))(jp.asarray(states))
    assert_close("[qpos, qvel] after a step", ours, np.array(theirs), 1e-12)

"""Acceptance tier for constraints and the solver (issue 6), written to
tests/acceptance/constraint_solver.txt.

States: MuJoCo runs each model with random controls (free bodies start with a random velocity)
until at least 4 contacts are active and every constraint family the model can produce has a
row (else the best state seen); seed and step are recorded. At those states:
  * converged solves (MuJoCo's contacts copied in, so rows match one to one): Newton and CG
    qacc, qfrc_constraint, efc_force and cfrc_ext within 1e-5; PGS within 1e-4;
  * rollouts of 200 steps with mjx_lite's own collision: the deviation from MuJoCo stays
    within 10 x MuJoCo's own deviation under a 1e-9 qpos perturbation + 1e-8 (MJX's
    max_geom_pairs numerics lifted here and in the inverse test: MuJoCo C ignores them);
  * inverse(m, forward(m, d)) after a converged Newton solve against the applied forces and
    mj_inverse, within 1e-8;
  * 10,000-step random-control rollouts of the gymnasium models with autoreset disabled stay
    finite with no divergence warning, float32 and float64;
  * a batch of 8 with one exploded state resets that one and leaves the 7 others
    bit-identical to an unexploded batch;
  * the 5-box stack of models/box_stack.xml, as placed and dropped from 2 cm gaps, comes to
    rest (max linear speed after 2 s below 1e-3 m/s) in mjx_lite and in MuJoCo;
  * jax.grad through 5 steps at solver iterations 1, 4 and 50 is finite on every gymnasium
    model.
"""

from __future__ import annotations

import copy
import pathlib
import time

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import constraint, interop, io, smooth, solver
from mjx_lite.collision.driver import missing_colliders
from mjx_lite.forward import forward, inverse, step, xfrc_accumulate
from mjx_lite.types import DisableBit, SolverType

from conftest import GYM_ASSETS, MJX_TEST_DATA, MODELS_DIR, REPO_ROOT, without_pair_caps
from parity import rel_error

SOLVE_RTOL = 1e-5
PGS_RTOL = 1e-4
INVERSE_RTOL = 1e-8
REST_SPEED = 1e-3  # m/s, max linear speed of a settled stack
CONVERGED = {"tolerance": 1e-12, "iterations": 200, "ls_iterations": 50}
OUT = pathlib.Path(REPO_ROOT) / "tests" / "acceptance" / "constraint_solver.txt"
ELLIPTIC = int(mujoco.mjtCone.mjCONE_ELLIPTIC)

# Every family at once: connect / weld / joint / tendon equality, dof and tendon friction loss,
# hinge, slide, ball and tendon limits, contacts of condim 1, 3, 4 and 6 on a floor (sphere,
# capsule, box and plane colliders only).
FAMILY_XML = """
<mujoco><option timestep="0.004" impratio="2"/>
<worldbody><geom name="floor" type="plane" size="5 5 .1"/>
<body name="a" pos="0 0 .6">
  <joint name="j0" axis="0 1 0" range="-.4 .4" frictionloss=".2"/>
  <geom type="capsule" size=".04" fromto="0 0 0 .4 0 0"/>
  <body name="b" pos=".4 0 0"><joint name="j1" axis="0 1 0" range="-.8 .8"/>
    <geom type="capsule" size=".04" fromto="0 0 0 .4 0 0"/>
    <body name="c" pos=".4 0 0"><joint name="j2" type="ball" range="0 .6"/>
      <geom type="sphere" size=".06" pos="0 0 -.2" condim="4"/></body></body></body>
<body name="s" pos="-.6 0 .5"><joint name="j3" type="slide" axis="0 0 1" range="-.45 .1"
    frictionloss=".3"/><geom type="box" size=".08 .08 .08" condim="6"/></body>
<body name="f1" pos=".5 .5 .3"><freejoint/><geom type="sphere" size=".08" condim="1"/></body>
<body name="f2" pos="-.3 .5 .3"><freejoint/><geom type="capsule" size=".05" fromto="0 0 0 .2 0 0"
    condim="3"/></body>
<body name="f3" pos=".1 -.5 .3"><freejoint/><geom type="box" size=".06 .05 .04" condim="6"/></body>
</worldbody>
<tendon><fixed name="t0" limited="true" range="-.3 .3" frictionloss=".1">
  <joint joint="j0" coef="1"/><joint joint="j1" coef="1"/></fixed></tendon>
<equality><connect body1="f1" body2="f2" anchor=".1 0 0" solref=".05 1"/>
  <weld body1="f3" torquescale="2" solref=".05 1"/>
  <joint joint1="j1" joint2="j0" polycoef="0 .3 0 0 0" solref=".1 1"/></equality>
<actuator><motor joint="j0" gear="10"/><motor joint="j1" gear="10"/>
  <motor joint="j3" gear="30"/></actuator>
</mujoco>"""


def _models():
    """(name, MjModel) of every gymnasium model and the family models (both cones)."""
    out = []
    for path in sorted(GYM_ASSETS.glob("*.xml")):
        out.append((path.stem, mujoco.MjModel.from_xml_path(str(path))))
    for cone in (0, ELLIPTIC):
        mjm = mujoco.MjModel.from_xml_string(FAMILY_XML)
        mjm.opt.cone = cone
        out.append((f"families_{'elliptic' if cone else 'pyramidal'}", mjm))
    return out


def _mjx_models():
    """(name, MjModel) of every mujoco-mjx test_data model MuJoCo 4.0 loads (arm26.xml fails
    its lengthrange computation and constraints.xml wraps a ball joint in a fixed tendon: 4.0
    rejects both)."""
    out = []
    for path in sorted(MJX_TEST_DATA.rglob("*.xml")):
        try:
            mjm = mujoco.MjModel.from_xml_path(str(path))
        except ValueError:
            continue
        out.append((f"mjx:{path.relative_to(MJX_TEST_DATA).with_suffix('')}", mjm))
    return out


MODEL_SETS = {"gymnasium and family models": _models, "mujoco-mjx test_data": _mjx_models}


def _no_row(fam) -> str | None:
    """Why a state does not count: the issue counts only states with an active row."""
    return None if fam else "no constraint row active in 5 x 2000 random-control steps: not counted"


def _families(mjm) -> set[int]:
    """Constraint families the model can produce (mjtConstraint groups)."""
    fam = set()
    if mjm.neq:
        fam.add(0)
    if np.any(mjm.dof_frictionloss > 0) or np.any(mjm.tendon_frictionloss > 0):
        fam.add(1)
    if np.any(mjm.jnt_limited) or np.any(mjm.tendon_limited):
        fam.add(3)
    fam.add(5)  # contacts (every model here has a floor or touching geoms)
    return fam


def _group(t: np.ndarray) -> set[int]:
    g = {0: 0, 1: 1, 2: 1, 3: 3, 4: 3, 5: 5, 6: 5, 7: 5}
    return {g[int(x)] for x in t}


_STATES = {}


def find_state(name, mjm, max_seeds=5):
    """The first seed's state with >= 4 active contacts and a row of every family (else the
    best over the seeds): (seed, step, qpos, qvel, ctrl, families found, active contacts)."""
    if name in _STATES:
        return _STATES[name]
    best = None
    for seed in range(max_seeds):
        score, state = _find_state(mjm, seed)
        if best is None or score > best[0]:
            best = (score, (seed,) + state)
        if score == (len(_families(mjm)), 4):
            break
    _STATES[name] = best[1]
    return best[1]


def _find_state(mjm, seed, max_steps=2000):
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(seed)
    free = mjm.jnt_type == mujoco.mjtJoint.mjJNT_FREE
    for j in np.nonzero(free)[0]:
        adr = mjm.jnt_dofadr[j]
        mjd.qvel[adr:adr + 6] = 0.5 * rng.standard_normal(6)
    want = _families(mjm)
    lo, hi = mjm.actuator_ctrlrange[:, 0], mjm.actuator_ctrlrange[:, 1]
    lim = mjm.actuator_ctrllimited.astype(bool)
    lo, hi = np.where(lim, lo, -1.0), np.where(lim, hi, 1.0)
    best = None
    for k in range(max_steps):
        mjd.ctrl[:] = rng.uniform(lo, hi)
        mujoco.mj_step(mjm, mjd)
        nact = int((mjd.contact.efc_address[: mjd.ncon] >= 0).sum())
        fam = _group(mjd.efc_type) & want
        score = (len(fam), min(nact, 4))
        if k > 20 and (best is None or score > best[0]):
            best = (score, (k, mjd.qpos.copy(), mjd.qvel.copy(), mjd.ctrl.copy(), fam, nact))
        if fam == want and nact >= 4 and k > 20:
            break
    return best


def _mj_at(mjm, qpos, qvel, ctrl, opt, islands=False):
    """A copy of the model with ``opt`` (islands off unless asked, so efc_state is in efc
    order) and its data after mj_forward at the state."""
    mjm = copy.copy(mjm)
    for k, v in opt.items():
        setattr(mjm.opt, k, v)
    if not islands:
        mjm.opt.disableflags |= DisableBit.ISLAND
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(mjm, mjd)
    return mjm, mjd


_rows = jax.jit(lambda m, d: constraint.reference_constraint(
    m, constraint.make_constraint(m, d)))
_solve = jax.jit(solver.solve, static_argnames="loop")
_post = jax.jit(smooth.rne_post_constraint)


def _ours_at(mjm, mjd):
    from test_constraint import SPARE_SLOTS, mj_contact

    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m).replace(
        contact=mj_contact(mjd, mjd.ncon + SPARE_SLOTS))
    d = smooth.factor_m(m, d)
    return m, _rows(m, d)


def _solve_errors(mjm, mjd, m, d):
    out = _solve(m, d, loop="early_exit")
    c = constraint.compact(out)
    mujoco.mj_rnePostConstraint(mjm, mjd)
    post = _post(m, out)
    return out, {
        "qacc": rel_error(out.qacc, mjd.qacc),
        "qfrc_constraint": rel_error(out.qfrc_constraint, mjd.qfrc_constraint),
        "efc_force": rel_error(c["efc_force"], mjd.efc_force),
        "cfrc_ext": rel_error(post.cfrc_ext, mjd.cfrc_ext),
    }


def _read_sections() -> dict[str, list[str]]:
    """The results file's sections: title -> lines."""
    text = OUT.read_text() if OUT.exists() else ""
    parts, cur = {}, None
    for line in text.splitlines():
        if line.startswith("## "):
            cur = line[3:]
            parts[cur] = []
        elif cur is not None:
            parts[cur].append(line)
    return parts


def _write(section: str, lines: list[str]):
    """Replaces ``section`` of the results file, keeping the other sections."""
    OUT.parent.mkdir(parents=True, exist_ok=True)
    parts = _read_sections()
    parts[section] = lines
    body = "# issue 6 acceptance: constraints and solver vs MuJoCo 4.0 (float64 unless said)\n"
    for name in sorted(parts):
        body += f"## {name}\n" + "\n".join(parts[name]) + "\n"
    OUT.write_text(body)


def _section(title: str, model_set: str) -> str:
    """The gymnasium set keeps the section names it has always had."""
    return title if model_set == "gymnasium and family models" else f"{title}: {model_set}"


def _skip_reason(mjm) -> str | None:
    missing = missing_colliders(interop.model_from_mujoco(mjm))
    return f"not run: needs {', '.join(missing)}" if missing else None


def _resume(title: str):
    """With ACCEPTANCE_RESUME=1, an UNFINISHED section (a worker lost to XLA's CPU compiler, which
    has crashed at random compiles in hour-long runs) is continued after its last model: its
    lines are kept and its worst errors re-read from them. Otherwise a fresh start."""
    import os
    import re

    fresh = [], 0.0, 0.0, set()
    if os.environ.get("ACCEPTANCE_RESUME") != "1":
        return fresh
    lines = _read_sections().get(title, [])
    if not lines or not lines[-1].startswith("UNFINISHED: stopped after "):
        return fresh
    lines.pop()
    worst, worst_pgs, done = 0.0, 0.0, set()
    for line in lines:
        name = line.split(" ", 1)[0].rstrip(":")
        done.add(name)
        solver_line = re.search(r" (NEWTON|CG|PGS) nefc=", line)
        if solver_line:
            errs = [float(v) for v in re.findall(r"(?:qacc|qfrc_constraint|efc_force|cfrc_ext)="
                                                 r"([0-9.e+-]+)", line)]
            if solver_line.group(1) == "PGS":
                worst_pgs = max(worst_pgs, *errs)
            else:
                worst = max(worst, *errs)
    return lines, worst, worst_pgs, done


@pytest.mark.acceptance
@pytest.mark.parametrize("model_set", MODEL_SETS)
def test_converged_solves(model_set):
    title = _section("converged solves (MuJoCo's contacts, rows matched one to one)", model_set)
    lines, worst, worst_pgs, done = _resume(title)
    for name, mjm0 in MODEL_SETS[model_set]():
        if name in done:
            continue
        seed, k, qpos, qvel, ctrl, fam, nact = find_state(name, mjm0)
        if _no_row(fam):
            lines.append(f"{name}: {_no_row(fam)}")
            continue
        head = f"{name} seed={seed} step={k} active_contacts={nact} families={sorted(fam)}"
        solvers = [SolverType.NEWTON, SolverType.CG, SolverType.PGS]
        for stype in solvers:
            opt = dict(CONVERGED, solver=int(stype))
            if stype == SolverType.CG:
                opt.update(iterations=2000)  # CG needs ~300 on the family models
            if stype == SolverType.PGS:
                opt.update(iterations=1000, tolerance=1e-12)
            mjm, mjd = _mj_at(mjm0, qpos, qvel, ctrl, opt)
            m, d = _ours_at(mjm, mjd)
            out, errs = _solve_errors(mjm, mjd, m, d)
            e = max(errs.values())
            if stype == SolverType.PGS:
                worst_pgs = max(worst_pgs, e)
            else:
                worst = max(worst, e)
            lines.append(f"{head} {stype.name} nefc={mjd.nefc} niter ours "
                         f"{int(out.solver_niter[0])} mujoco {int(mjd.solver_niter[0])} "
                         + " ".join(f"{k}={v:.1e}" for k, v in errs.items()))
        # the model's own settings: iteration counts side by side
        own = dict(solver=int(mjm0.opt.solver), iterations=int(mjm0.opt.iterations),
                   tolerance=float(mjm0.opt.tolerance))
        mjm, mjd = _mj_at(mjm0, qpos, qvel, ctrl, own)
        m, d = _ours_at(mjm, mjd)
        out = _solve(m, d, loop="early_exit")
        lines.append(f"{name} own settings {SolverType(own['solver']).name}: niter ours "
                     f"{int(out.solver_niter[0])} mujoco {int(mjd.solver_niter[0])} qacc "
                     f"{rel_error(out.qacc, mjd.qacc):.1e}")
        # a worker lost mid-run (XLA's CPU compiler has crashed in hour-long runs) leaves the
        # models measured so far, marked unfinished
        _write(title, lines + [f"UNFINISHED: stopped after {name}"])
    lines.append(f"worst Newton/CG {worst:.2e} (bound {SOLVE_RTOL}); worst PGS {worst_pgs:.2e} "
                 f"(bound {PGS_RTOL})")
    _write(title, lines)
    assert worst < SOLVE_RTOL and worst_pgs < PGS_RTOL


def _rollout_fn(m, nstep):
    def run(m, d, ctrls):
        def body(d, c):
            d = step(m, d.replace(ctrl=c), loop="early_exit")
            return d, d.qpos

        return jax.lax.scan(body, d, ctrls)[1]

    return jax.jit(run)


@pytest.mark.acceptance
@pytest.mark.parametrize("model_set", MODEL_SETS)
def test_rollout_chaos_bound(model_set):
    lines, ok = [], True
    for name, mjm0 in MODEL_SETS[model_set]():
        seed, k, qpos, qvel, ctrl, fam, _ = find_state(name, mjm0)
        reason = _skip_reason(mjm0) or _no_row(fam)
        if reason:
            lines.append(f"{name}: {reason}")
            continue
        mjm = without_pair_caps(mjm0)
        rng = np.random.default_rng(1)
        lo, hi = mjm.actuator_ctrlrange[:, 0], mjm.actuator_ctrlrange[:, 1]
        lim = mjm.actuator_ctrllimited.astype(bool)
        ctrls = rng.uniform(np.where(lim, lo, -1), np.where(lim, hi, 1), (200, mjm.nu))
        trajs = []
        for eps in (0.0, 1e-9):
            mjd = mujoco.MjData(mjm)
            mjd.qpos[:], mjd.qvel[:] = qpos, qvel
            mjd.qpos[:] += eps
            mujoco.mj_normalizeQuat(mjm, mjd.qpos)
            t = []
            for c in ctrls:
                mjd.ctrl[:] = c
                mujoco.mj_step(mjm, mjd)
                t.append(mjd.qpos.copy())
            trajs.append(np.array(t))
        m = interop.model_from_mujoco(mjm)
        d = io.make_data(m).replace(qpos=jp.asarray(qpos), qvel=jp.asarray(qvel))
        t0 = time.time()
        ours = np.asarray(_rollout_fn(m, 200)(m, d, jp.asarray(ctrls)))
        secs = time.time() - t0
        selfdev = np.abs(trajs[1] - trajs[0]).max(axis=1)
        dev = np.abs(ours - trajs[0]).max(axis=1)
        bound = 10 * selfdev + 1e-8
        good = bool(np.all(dev <= bound))
        ok &= good
        worst = int(np.argmax(dev / bound))
        lines.append(f"{name} from step {k}: max dev {dev.max():.1e} max self-dev "
                     f"{selfdev.max():.1e} worst ratio dev/bound {dev[worst] / bound[worst]:.2f} "
                     f"at step {worst} {'ok' if good else 'FAIL'} (jit+run {secs:.0f} s)")
    _write(_section("rollouts, 200 steps, own collision, model settings, early exit", model_set),
           lines)
    assert ok


def _mj_applied(mjm, mjd) -> np.ndarray:
    """MuJoCo's qfrc_applied + qfrc_actuator + J'xfrc_applied (xfrc at each body's com)."""
    out = mjd.qfrc_applied + mjd.qfrc_actuator
    for b in range(1, mjm.nbody):
        f = np.zeros(mjm.nv)
        mujoco.mj_applyFT(mjm, mjd, mjd.xfrc_applied[b, :3], mjd.xfrc_applied[b, 3:],
                          mjd.xipos[b], b, f)
        out = out + f
    return out


def _inverse_resolution(mjm, mjd, applied, trials=20) -> float:
    """How far one ulp of qacc moves mj_inverse, relative to max|applied|: the finest
    agreement float64 can express at this state. Deep contacts make it coarse: mujoco-mjx's
    sensor/model (1.5 m overlaps, |qacc| 1e6, |qfrc_constraint| 4.6e7 against |applied| 3.1)
    measures 1.7e-5, so no float64 qacc, MuJoCo's own included, brings inverse within 1e-8
    of the applied forces there."""
    probe = mujoco.MjData(mjm)
    probe.qpos[:], probe.qvel[:], probe.ctrl[:] = mjd.qpos, mjd.qvel, mjd.ctrl
    probe.xfrc_applied[:] = mjd.xfrc_applied
    rng = np.random.default_rng(0)
    moved = 0.0
    for _ in range(trials):
        probe.qacc[:] = mjd.qacc * (1 + np.finfo(float).eps * rng.choice([-1.0, 1.0], mjm.nv))
        mujoco.mj_inverse(mjm, probe)
        moved = max(moved, np.abs(probe.qfrc_inverse - mjd.qfrc_inverse).max())
    return moved / max(np.abs(applied).max(), np.finfo(float).tiny)


@pytest.mark.acceptance
@pytest.mark.parametrize("model_set", MODEL_SETS)
def test_inverse_consistency(model_set):
    lines, worst, ok, coarse_states = [], 0.0, True, []
    fwd_inv = jax.jit(lambda m, d: inverse(m, forward(m, d)))
    acc = jax.jit(xfrc_accumulate)
    for name, mjm0 in MODEL_SETS[model_set]():
        seed, k, qpos, qvel, ctrl, fam, _ = find_state(name, mjm0)
        reason = _skip_reason(mjm0) or _no_row(fam)
        if reason:
            lines.append(f"{name}: {reason}")
            continue
        opt = dict(solver=int(SolverType.NEWTON), tolerance=1e-14, iterations=200,
                   ls_iterations=50)
        # islands as the model has them (on): each island converges to its own scale, where
        # one monolithic solve stops at 1.96e-8 on families_elliptic in MuJoCo and here
        mjm, mjd = _mj_at(without_pair_caps(mjm0), qpos, qvel, ctrl, opt, islands=True)
        mjd.xfrc_applied[1:] = 0.1 * np.random.default_rng(2).standard_normal(
            (mjm.nbody - 1, 6))
        mujoco.mj_forward(mjm, mjd)
        mujoco.mj_inverse(mjm, mjd)
        m = interop.model_from_mujoco(mjm)
        d = io.make_data(m).replace(qpos=jp.asarray(qpos), qvel=jp.asarray(qvel),
                                    ctrl=jp.asarray(ctrl),
                                    xfrc_applied=jp.asarray(mjd.xfrc_applied))
        out = fwd_inv(m, d)
        applied = out.qfrc_applied + out.qfrc_actuator + acc(m, out)
        e1 = rel_error(out.qfrc_inverse, applied)
        e2 = rel_error(out.qfrc_inverse, mjd.qfrc_inverse)
        # MuJoCo's own gap: the residual its Newton stop leaves (not asserted)
        mj_applied = _mj_applied(mjm, mjd)
        e0 = rel_error(mjd.qfrc_inverse, mj_applied)
        ulp = _inverse_resolution(mjm, mjd, mj_applied)
        # 1e-8 is asserted wherever float64 resolves it; where one ulp of qacc alone moves
        # mj_inverse further, ours must be within that resolution, and the line says so
        coarse = ulp > INVERSE_RTOL
        if coarse:
            coarse_states.append(name)
        bound = max(INVERSE_RTOL, ulp)
        ok &= max(e1, e2) < bound
        if not coarse:
            worst = max(worst, e1, e2)
        lines.append(f"{name} step={k} ncon={int(out.ncon)} niter {int(mjd.solver_niter[0])}: "
                     f"vs applied {e1:.1e}, vs mj_inverse {e2:.1e}; mujoco's own "
                     f"mj_inverse vs applied {e0:.1e}; one ulp of qacc moves mj_inverse "
                     f"{ulp:.1e}" + (" (coarser than 1e-8: float64 cannot resolve the bound "
                                     "here; checked against that resolution)" if coarse else ""))
    lines.append(f"worst {worst:.2e} (bound {INVERSE_RTOL}) over the states float64 resolves; "
                 f"coarser states: {', '.join(coarse_states) or 'none'}")
    _write(_section("inverse after converged Newton (tolerance 1e-14, 200 iterations)",
                    model_set), lines)
    assert ok


def _f32(x):
    return x.astype(jp.float32) if jp.issubdtype(x.dtype, jp.floating) else x


_GYM = sorted(p.stem for p in GYM_ASSETS.glob("*.xml"))


@pytest.mark.acceptance
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", _GYM)
def test_long_rollout_finite(name, dtype):
    """10,000 random-control steps with autoreset disabled: finite, no divergence warning."""
    nstep = 10_000
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / f"{name}.xml"))
    section = f"10000-step random-control rollout, autoreset disabled: {name} {dtype}"
    reason = _skip_reason(mjm)
    if reason:
        _write(section, [reason])
        return
    mjm.opt.disableflags |= DisableBit.AUTORESET
    m = interop.model_from_mujoco(mjm)
    d = io.make_data(m)
    if dtype == "float32":
        m, d = jax.tree.map(_f32, m), jax.tree.map(_f32, d)
    lo = jp.asarray(np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 0], -1))
    hi = jp.asarray(np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 1], 1))

    def run(m, d, key, lo, hi):
        def body(d, k):
            c = jax.random.uniform(k, (m.nu,), minval=lo, maxval=hi).astype(d.qpos.dtype)
            d = step(m, d.replace(ctrl=c), loop="early_exit")
            return d, jp.max(jp.abs(d.qvel))

        return jax.lax.scan(body, d, jax.random.split(key, nstep))

    t0 = time.time()
    last, vmax = jax.jit(run)(m, d, jax.random.PRNGKey(0), lo, hi)
    secs = time.time() - t0
    finite = bool(np.all(np.isfinite(np.asarray(last.qpos)))
                  and np.all(np.isfinite(np.asarray(vmax))))
    warn = np.asarray(last.warning_count)
    good = finite and not warn.any()
    _write(section, [f"finite={finite} warnings={warn.tolist()} max|qvel|="
                     f"{float(np.max(vmax)):.1e} (jit+run {secs:.0f} s) "
                     f"{'ok' if good else 'FAIL'}"])
    assert good


@pytest.mark.acceptance
def test_batch_reset_one_member():
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "hopper.xml"))
    m = interop.model_from_mujoco(mjm)
    d0 = io.make_data(m)
    rng = np.random.default_rng(0)
    batch = jax.tree.map(lambda x: jp.stack([x] * 8), d0)
    batch = batch.replace(qvel=jp.asarray(0.1 * rng.standard_normal((8, m.nv))),
                          ctrl=jp.asarray(rng.uniform(-1, 1, (8, m.nu))))
    stepv = jax.jit(jax.vmap(lambda d: step(m, d)))
    clean = stepv(batch)
    bad = stepv(batch.replace(qvel=batch.qvel.at[5, 2].set(jp.nan)))
    same = all(
        np.array_equal(np.delete(np.asarray(a), 5, 0), np.delete(np.asarray(b), 5, 0))
        for a, b in zip(jax.tree.leaves(bad), jax.tree.leaves(clean)))
    reset = bool(np.all(np.isfinite(np.asarray(bad.qpos[5])))) and int(
        bad.warning_count[5, 4]) == 1
    _write("batch of 8, member 5 with a NaN velocity (hopper)",
           [f"member 5 reset with a BADQVEL count of 1: {reset}; other 7 bit-identical to an "
            f"unexploded batch: {same}"])
    assert same and reset


def _free_lin_dofs(mjm) -> np.ndarray:
    """(nfree, 3) translational dof indices of the free joints."""
    free = np.nonzero(mjm.jnt_type == mujoco.mjtJoint.mjJNT_FREE)[0]
    return mjm.jnt_dofadr[free][:, None] + np.arange(3)


@pytest.mark.acceptance
def test_box_stack_comes_to_rest():
    """models/box_stack.xml (5 free boxes, model options) after 2 s: max linear speed below
    1e-3 m/s in mjx_lite (float64, early exit) and in MuJoCo, as placed and dropped."""
    mjm = mujoco.MjModel.from_xml_path(str(MODELS_DIR / "box_stack.xml"))
    nstep = round(2.0 / mjm.opt.timestep)
    lin = _free_lin_dofs(mjm)
    assert len(lin) == 5
    m = interop.model_from_mujoco(mjm)

    @jax.jit
    def run(m, d):
        def body(d, _):
            d = step(m, d, loop="early_exit")
            return d, None

        return jax.lax.scan(body, d, None, length=nstep)[0]

    def speeds(qvel):
        qvel = np.asarray(qvel)
        return float(np.linalg.norm(qvel[lin], axis=1).max()), float(np.abs(qvel).max())

    lines, ok = [], True
    # as placed (faces touching) and dropped: box i raised by 2 cm x (i + 1), 2 cm gaps
    for label, gap in (("as placed", 0.0), ("dropped from 2 cm gaps", 0.02)):
        qpos = mjm.qpos0.copy()
        for i, adr in enumerate(mjm.jnt_qposadr[mjm.jnt_type == mujoco.mjtJoint.mjJNT_FREE]):
            qpos[adr + 2] += gap * (i + 1)
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:] = qpos
        for _ in range(nstep):
            mujoco.mj_step(mjm, mjd)
        t0 = time.time()
        out = run(m, io.make_data(m).replace(qpos=jp.asarray(qpos)))
        out.qvel.block_until_ready()
        secs = time.time() - t0
        (ours_lin, ours_all), (mj_lin, mj_all) = speeds(out.qvel), speeds(mjd.qvel)
        dpos = float(np.abs(np.asarray(out.qpos)[mjm.jnt_qposadr[:, None] + np.arange(3)]
                            - mjd.qpos[mjm.jnt_qposadr[:, None] + np.arange(3)]).max())
        good = ours_lin < REST_SPEED and mj_lin < REST_SPEED and np.isfinite(ours_all)
        ok &= good
        lines.append(f"{label}, {nstep} steps ({nstep * mjm.opt.timestep:.1f} s): max linear "
                     f"speed ours {ours_lin:.1e} mujoco {mj_lin:.1e} m/s (bound {REST_SPEED}); "
                     f"max|qvel| ours {ours_all:.1e} mujoco {mj_all:.1e}; ncon ours "
                     f"{int(out.ncon)} mujoco {mjd.ncon}; max |box position ours - mujoco| "
                     f"{dpos:.1e} m {'ok' if good else 'FAIL'} (jit+run {secs:.0f} s)")
    _write("5-box stack (models/box_stack.xml) at rest after 2 s", lines)
    assert ok


GRAD_ITERATIONS = (1, 4, 50)
GRAD_STEPS = 5


def _grad_loss(m, d, qpos, qvel, ctrl, remat=False):
    d = d.replace(qpos=qpos, qvel=qvel, ctrl=ctrl)
    one = jax.checkpoint(lambda d: step(m, d)) if remat else (lambda d: step(m, d))

    def body(d, _):
        return one(d), None

    d = jax.lax.scan(body, d, None, length=GRAD_STEPS)[0]
    return jp.sum(d.qpos**2) + jp.sum(d.qvel**2)


_grad = jax.jit(jax.value_and_grad(_grad_loss, argnums=(2, 3, 4)), static_argnames="remat")


@pytest.mark.acceptance
@pytest.mark.parametrize("its", GRAD_ITERATIONS)
@pytest.mark.parametrize("name", _GYM)
def test_grad_iterations_finite(name, its):
    """jax.grad of |qpos|^2 + |qvel|^2 after 5 steps (fixed loop, unrolled adjoint) w.r.t. the
    initial qpos, qvel and the held ctrl, with opt.iterations = its (the model's solver and
    tolerance), from a contact state of MuJoCo's random-control run: finite everywhere. One
    model and count per test, so that each can run in its own process: a backward-pass compile
    takes minutes and GBs on a CPU."""
    _grad_check(name, its, remat=False)


@pytest.mark.acceptance
@pytest.mark.parametrize("its", GRAD_ITERATIONS)
@pytest.mark.parametrize("name", _GYM)
def test_grad_iterations_finite_remat(name, its):
    """The same with jax.checkpoint around each step, for the cases whose plain unrolled
    backward pass does not fit in memory: the unrolled PGS keeps its whole force vector per
    row visit, O(iterations x nefc^2) per solve (humanoid: nefc budget 819, 4 RK4 stages)."""
    _grad_check(name, its, remat=True)


def _grad_check(name, its, remat):
    section = (f"jax.grad through {GRAD_STEPS} steps, fixed loop, unrolled adjoint"
               f"{', jax.checkpoint per step' if remat else ''}: {name} iterations={its}")
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / f"{name}.xml"))
    reason = _skip_reason(mjm)
    if reason:
        _write(section, [reason])
        return
    seed, k, qpos, qvel, ctrl, _, nact = find_state(name, mjm)
    solver_name = SolverType(int(mjm.opt.solver)).name
    mjm.opt.iterations = its
    m = interop.model_from_mujoco(mjm)
    t0 = time.time()
    val, g = _grad(m, io.make_data(m), jp.asarray(qpos), jp.asarray(qvel), jp.asarray(ctrl),
                   remat=remat)
    norms = [float(np.linalg.norm(np.asarray(x))) for x in g]
    secs = time.time() - t0
    fin = bool(np.isfinite(float(val)) and all(np.all(np.isfinite(np.asarray(x))) for x in g))
    _write(section, [f"{solver_name} tolerance {mjm.opt.tolerance:g} from seed={seed} step={k} "
                     f"active_contacts={nact}: loss {float(val):.4e} |dqpos|={norms[0]:.2e} "
                     f"|dqvel|={norms[1]:.2e} |dctrl|={norms[2]:.2e} "
                     f"{'finite' if fin else 'NOT FINITE'} (jit+run {secs:.0f} s)"])
    assert fin

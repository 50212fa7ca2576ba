"""const.set_const vs MuJoCo 4.0 mj_setConst after randomizing masses and inertias."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import interop
from mjx_lite.const import set_const

from conftest import GYM_ASSETS, MJX_TEST_DATA, MODELS_DIR
from parity import assert_close, rel_error

RTOL = 1e-10
FIELDS = ("body_subtreemass", "dof_M0", "dof_invweight0", "body_invweight0",
          "tendon_invweight0", "tendon_length0", "actuator_acc0", "actuator_length0",
          "cam_pos0", "cam_poscom0", "cam_mat0", "light_pos0", "light_poscom0", "light_dir0")
# written by MuJoCo 4.0's mj_setConst from geom_size (and hfield_size). It also writes
# dof_length and bvh_aabb, used only by sleeping islands and the BVH midphase, which mjx_lite
# does not have (not Model fields); stat.meaninertia it leaves as compiled.
GEOM_FIELDS = ("geom_size", "geom_rbound", "geom_aabb")
INVERSE_M_FIELDS = ("body_invweight0", "tendon_invweight0")  # J M^-1 J' of non-dof J
ACCEPTANCE_FILE = pathlib.Path(__file__).with_name("acceptance") / "set_const.txt"


# humanoid (the slower compile) in the acceptance tier; hopper in CI
@pytest.mark.parametrize("name", ["hopper", pytest.param("humanoid", marks=pytest.mark.acceptance)])
def test_set_const_matches_mujoco(name):
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / f"{name}.xml"))
    # the compile-time mean inertia (MuJoCo 4.0's mj_setConst leaves stat.meaninertia as is)
    m0 = interop.model_from_mujoco(mjm)
    assert_close("stat.meaninertia", set_const(m0, meaninertia=True).stat.meaninertia,
                 mjm.stat.meaninertia, RTOL)
    rng = np.random.default_rng(0)
    mjm.body_mass[1:] *= rng.uniform(0.5, 2.0, size=mjm.nbody - 1)
    mjm.body_inertia[1:] *= rng.uniform(0.5, 2.0, size=(mjm.nbody - 1, 1))
    mjm.geom_size[:] *= rng.uniform(0.8, 1.2, size=mjm.geom_size.shape)
    m = set_const(interop.model_from_mujoco(mjm))
    mujoco.mj_setConst(mjm, mujoco.MjData(mjm))
    for f in FIELDS + GEOM_FIELDS:
        ours = np.asarray(getattr(m, f))
        assert_close(f, ours.reshape(-1), np.asarray(getattr(mjm, f)).reshape(-1), RTOL)


def test_set_const_is_differentiable():
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "hopper.xml"))
    m = interop.model_from_mujoco(mjm)

    def f(mass):
        return jp.sum(set_const(m.replace(body_mass=mass)).actuator_acc0)

    g = jax.grad(f)(m.body_mass)
    assert np.all(np.isfinite(np.asarray(g))) and float(jp.abs(g).sum()) > 0


@pytest.mark.acceptance
def test_set_const_acceptance_every_model():
    """Every gymnasium and mujoco-mjx test_data model MuJoCo compiles: the same random
    body_mass, body_inertia and geom_size written into both models, then set_const vs
    mj_setConst on every field both have, relative 1e-10."""
    paths = sorted(GYM_ASSETS.glob("*.xml")) + sorted(MJX_TEST_DATA.rglob("*.xml"))
    lines = ["# worst relative error of set_const vs mj_setConst after randomizing body_mass "
             "(x0.5-2), body_inertia (x0.5-2), geom_size (x0.8-1.2)"]
    failures, overall = [], {}
    fn = jax.jit(set_const)
    for path in paths:
        try:
            mjm = mujoco.MjModel.from_xml_path(str(path))
        except ValueError:
            continue  # arm26.xml, constraints.xml: MuJoCo 4.0 rejects them
        rng = np.random.default_rng(1)
        mjm.body_mass[1:] *= rng.uniform(0.5, 2.0, size=mjm.nbody - 1)
        mjm.body_inertia[1:] *= rng.uniform(0.5, 2.0, size=(mjm.nbody - 1, 3))
        mjm.geom_size[:] *= rng.uniform(0.8, 1.2, size=mjm.geom_size.shape)
        m = fn(interop.model_from_mujoco(mjm))
        mjd = mujoco.MjData(mjm)
        mujoco.mj_setConst(mjm, mjd)
        # A singular M at qpos0 (MuJoCo warns: e.g. four slides on one body): both engines
        # clamp the pivot to 1e-15, and J M^-1 J' then cancels 1e15-sized terms, so those
        # fields are rounding noise in either engine; there we require finite values only.
        singular = mjd.warning[mujoco.mjtWarning.mjWARN_INERTIA].number > 0
        errs = {}
        for f in FIELDS + GEOM_FIELDS:
            ours = np.asarray(getattr(m, f)).reshape(-1)
            ref = np.asarray(getattr(mjm, f)).reshape(-1)
            if singular and f in INVERSE_M_FIELDS:
                assert np.all(np.isfinite(ours)), (path.name, f)
                lines.append(f"{path.name}: M singular at qpos0 (MuJoCo warns), {f} "
                             f"finite, differs by {rel_error(ours, ref):.1e} (cancellation)")
                continue
            errs[f] = rel_error(ours, ref)
        errs["stat.meaninertia"] = rel_error(m.stat.meaninertia, mjm.stat.meaninertia)
        worst = max(errs, key=errs.get)
        lines.append(f"{path.name}: worst {worst} {errs[worst]:.1e}")
        for k, v in errs.items():
            overall[k] = max(overall.get(k, 0.0), v)
            if not v <= RTOL:
                failures.append(f"{path.name}/{k}: {v:.2e}")
    lines.append("# worst per field over all models: " + " ".join(
        f"{k}={v:.1e}" for k, v in overall.items()))
    ACCEPTANCE_FILE.write_text("\n".join(lines) + "\n")
    assert not failures, failures


CONTACT_QACC_FILE = pathlib.Path(__file__).with_name("acceptance") / "set_const_contacts.txt"


@pytest.mark.acceptance
@pytest.mark.parametrize("path", [GYM_ASSETS / "humanoid.xml", MODELS_DIR / "box_stack.xml"],
                         ids=lambda p: p.stem)
def test_set_const_then_contact_qacc_matches_mujoco(path):
    """Randomized physics equals compiling the changed model: body_mass, body_inertia and
    geom_size randomized, then set_const here and mj_setConst in MuJoCo; at a state with at
    least 8 active contacts (mjData.ncon: contacts within margin, each with its constraint
    rows; MuJoCo run with random controls on the modified model), qacc of a converged Newton
    solve equals MuJoCo's within the solver issue's bound (1e-5)."""
    from mjx_lite import forward, io

    mjm = mujoco.MjModel.from_xml_path(str(path))
    mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    mjm.opt.tolerance, mjm.opt.iterations, mjm.opt.ls_iterations = 1e-12, 200, 50
    rng = np.random.default_rng(3)
    mjm.body_mass[1:] *= rng.uniform(0.5, 2.0, size=mjm.nbody - 1)
    mjm.body_inertia[1:] *= rng.uniform(0.5, 2.0, size=(mjm.nbody - 1, 3))
    mjm.geom_size[:] *= rng.uniform(0.8, 1.2, size=mjm.geom_size.shape)
    m = set_const(interop.model_from_mujoco(mjm))  # the derived constants still stale here
    mjd = mujoco.MjData(mjm)
    mujoco.mj_setConst(mjm, mjd)
    for k in range(5000):
        if mjm.nu:
            mjd.ctrl[:] = rng.uniform(-1, 1, mjm.nu)
        mujoco.mj_step(mjm, mjd)
        if mjd.ncon >= 8 and k > 50:
            break
    assert mjd.ncon >= 8, mjd.ncon
    penetrating = int(np.sum(mjd.contact.dist[: mjd.ncon] < 0))
    mujoco.mj_forward(mjm, mjd)
    d = io.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel),
                                ctrl=jp.asarray(mjd.ctrl))
    out = jax.jit(lambda m, d: forward(m, d, loop="early_exit"))(m, d)
    err = rel_error(np.asarray(out.qacc), mjd.qacc)
    line = (f"{path.name}: step {k}, ncon ours {int(out.ncon)} MuJoCo {mjd.ncon} ({penetrating} "
            f"penetrating), qacc {err:.1e}")
    lines = CONTACT_QACC_FILE.read_text().splitlines() if CONTACT_QACC_FILE.exists() else []
    lines = [x for x in lines if not x.startswith(path.name + ":")] + [line]
    CONTACT_QACC_FILE.write_text("\n".join(sorted(lines)) + "\n")
    assert int(out.ncon) == mjd.ncon and err <= 1e-5, line

"""forward / step vs MuJoCo 4.0 mj_forward / mj_step, smooth dynamics only (contact, limit,
equality and frictionloss disabled), every integrator; energy drift of RK4; gradients."""

from __future__ import annotations

import copy
import functools
import os
import pathlib

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import interop
from mjx_lite.forward import forward, inverse, step, xfrc_accumulate
from mjx_lite.types import IntegratorType

from conftest import GYM_ASSETS, MJX_TEST_DATA
from parity import rel_error

RTOL = 1e-8
SMOOTH_ONLY = 16 | 8 | 2 | 4  # contact, limit, equality, frictionloss
FORWARD_FIELDS = ("qfrc_passive", "actuator_force", "act_dot", "qfrc_actuator", "qacc")
STEP_FIELDS = ("qpos", "qvel", "act", "time", "qacc", "xpos", "qacc_warmstart")
INTEGRATORS = (IntegratorType.EULER, IntegratorType.IMPLICIT, IntegratorType.IMPLICITFAST,
               IntegratorType.RK4)
GYM = ("hopper", "ant", "humanoid", "half_cheetah", "walker2d", "swimmer", "reacher", "pusher",
       "inverted_pendulum", "inverted_double_pendulum")
ACCEPTANCE_FILE = pathlib.Path(__file__).with_name("acceptance") / "smooth_dynamics.txt"

# springs (polynomial, springref, ball, tendon deadband), polynomial and actuator dampers,
# gravcomp (one joint through actuators), both fluid models, every actuator dyn/gain/bias
# type with clamping, and two standalone free bodies (implicitfast's exact 6x6 block)
MIXED = """
<mujoco><option timestep="0.005" density="1.2" viscosity="0.2" wind="0.3 0 -0.1"/><worldbody>
  <body><joint name="j0" type="hinge" stiffness="1 2 3" springref="10" damping="0.2 0.5 0.7"
               actuatorfrcrange="-0.5 0.8"/>
    <geom size=".1" pos="0.2 0 0"/>
    <body pos="0.4 0 0" gravcomp="0.6">
      <joint name="j1" type="hinge" axis="0 1 0" damping="0.1" actuatorgravcomp="true"/>
      <geom type="capsule" size=".05 .2" fluidshape="ellipsoid"/>
      <body pos="0.3 0 0"><joint name="j2" type="slide" axis="1 0 0" stiffness="2" damping="0.3"/>
        <geom size=".05" pos="0.1 0 0" mass="0.3"/>
        <body pos="0 0.2 0"><joint type="ball" stiffness="0.5" damping="0.05"/>
          <geom type="box" size=".05 .1 .02"/></body>
      </body>
    </body>
  </body>
  <body pos="1 0 1"><freejoint/><geom type="box" size=".1 .2 .3"/></body>
  <body pos="0 2 1"><joint type="free" damping="0.1"/>
    <geom type="ellipsoid" size=".1 .2 .05" fluidshape="ellipsoid"/></body>
</worldbody>
<tendon>
  <fixed name="t" damping="0.3" stiffness="1" springlength="0 0.1" actuatorfrcrange="-0.3 0.4">
    <joint joint="j0" coef="1"/><joint joint="j1" coef="-0.5"/></fixed>
  <fixed name="t2"><joint joint="j2" coef="1"/><joint joint="j1" coef="0.3"/></fixed>
</tendon>
<actuator>
  <motor joint="j0" gear="2" ctrlrange="-1 1" damping="0.2 0.1 0.05"/>
  <position joint="j1" kp="3" kv="0.4" forcerange="-1 1"/>
  <velocity joint="j2" kv="2"/>
  <general joint="j0" dyntype="integrator" gaintype="affine" gainprm="1 0.2 0.3"
           biastype="affine" biasprm="0.1 0.2 0.3" actlimited="true" actrange="-0.5 0.5"/>
  <general joint="j1" dyntype="filter" dynprm="0.05" actearly="true" group="1"/>
  <general joint="j2" dyntype="filterexact" dynprm="0.03" actearly="true" actlimited="true"
           actrange="-0.2 0.3"/>
  <muscle tendon="t2" lengthrange="-0.6 0.6"/>
  <muscle joint="j1" lengthrange="-1 1" timeconst="0.02 0.05" tausmooth="0.3" force="12"
          range="0.5 1.2"/>
  <motor tendon="t" gear="3"/><motor tendon="t" gear="-1" damping="0.1"/>
  <intvelocity joint="j2" kp="5" actrange="-1 1"/>
</actuator></mujoco>"""

# mocap, ball and free joints, site transmission with and without refsite, slidercrank,
# jointinparent on ball and free joints, position/damper/cylinder shortcuts
TRANSMISSIONS = """
<mujoco><option timestep="0.004"/><worldbody>
  <body name="mocap" mocap="true" pos="0.5 0.5 1" quat="0.9 0.1 0.2 0.3">
    <geom type="box" size=".05 .05 .05" contype="0" conaffinity="0"/></body>
  <site name="ref" pos="0.1 0.2 0.3" quat="0.8 0.2 0.1 0.4"/>
  <body name="a" pos="0 0 1"><joint name="ball" type="ball" damping="0.1"/>
    <geom type="capsule" fromto="0 0 0 0.3 0 0" size=".04"/>
    <site name="tip" pos="0.3 0 0"/>
    <body pos="0.3 0 0"><joint name="h" type="hinge" axis="0 0 1" armature="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.2 0.1 0" size=".03"/>
      <site name="crank" pos="0.2 0.1 0"/>
      <body pos="0.2 0 0"><joint name="s" type="slide" axis="0 1 0" springref="0.1" stiffness="3"/>
        <geom type="sphere" size=".05"/><site name="s2" pos="0 0.05 0"/></body>
    </body>
  </body>
  <body name="f" pos="1 0 1"><freejoint name="free"/><geom type="ellipsoid" size=".1 .15 .2"/>
    <site name="fs" pos="0.05 0 0.1"/></body>
</worldbody>
<actuator>
  <motor site="tip" gear="1 2 3 0.1 0.2 0.3"/>
  <motor site="tip" refsite="ref" gear="0.5 -1 2 0.3 0.1 -0.2"/>
  <motor site="fs" refsite="ref" gear="1 0 0 0 0 1"/>
  <general cranksite="crank" slidersite="s2" cranklength="0.3" gear="2"/>
  <motor joint="ball" gear="1 2 3"/>
  <general jointinparent="ball" gear="0.5 -1 0.3" gainprm="2"/>
  <general jointinparent="free" gear="1 2 3 0.4 0.5 0.6"/>
  <motor joint="free" gear="1 0 0 0 0 2"/>
  <position joint="s" kp="10" kv="1"/>
  <damper joint="h" kv="0.5" ctrlrange="0 1"/>
  <cylinder joint="s" area="0.1" timeconst="0.05"/>
</actuator></mujoco>"""

DOUBLE_PENDULUM = """
<mujoco><option timestep="0.005" integrator="RK4"/><worldbody>
  <body><joint type="hinge" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 -0.5" size=".05"/>
    <body pos="0 0 -0.5"><joint type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size=".05"/></body></body>
</worldbody></mujoco>"""

_forward = jax.jit(forward)
# forward and one step from the same state in one program: one compile per (model,
# integrator) instead of two (the acceptance tier compiles ~60 models x 4 integrators)
_forward_and_step = jax.jit(lambda m, d: (forward(m, d), step(m, d)))


INLINE = {"mixed": MIXED, "transmissions": TRANSMISSIONS}


def _mjx_test_models() -> list[str]:
    """Every mujoco-mjx test_data model MuJoCo 4.0 compiles, relative to test_data."""
    names = []
    for p in sorted(MJX_TEST_DATA.rglob("*.xml")):
        try:
            mujoco.MjModel.from_xml_path(str(p))
        except ValueError:
            continue  # arm26.xml and constraints.xml: MuJoCo 4.0 itself rejects them
        names.append(str(p.relative_to(MJX_TEST_DATA)))
    return names


@functools.cache
def _load_base(name: str):
    if name in INLINE:
        return mujoco.MjModel.from_xml_string(INLINE[name])
    if name.endswith(".xml"):
        return mujoco.MjModel.from_xml_path(str(MJX_TEST_DATA / name))
    return mujoco.MjModel.from_xml_path(str(GYM_ASSETS / f"{name}.xml"))


def _load(name: str, *, sensors: bool = True):
    mjm = copy.copy(_load_base(name))
    mjm.opt.disableflags |= SMOOTH_ONLY
    if not sensors:
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_SENSOR
    return mjm


def _random_state(mjm, rng):
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = mjm.qpos0 + 0.1 * rng.normal(size=mjm.nq)
    mujoco.mj_normalizeQuat(mjm, mjd.qpos)
    mjd.qvel[:] = rng.normal(size=mjm.nv)
    mjd.ctrl[:] = rng.normal(size=mjm.nu)
    mjd.act[:] = rng.uniform(size=mjm.na)
    mjd.qfrc_applied[:] = 0.1 * rng.normal(size=mjm.nv)
    mjd.xfrc_applied[1:] = 0.1 * rng.normal(size=(mjm.nbody - 1, 6))
    mjd.mocap_pos[:] += 0.1 * rng.normal(size=mjd.mocap_pos.shape)
    mjd.mocap_quat[:] += 0.1 * rng.normal(size=mjd.mocap_quat.shape)  # forward normalizes
    return mjd


def _errors(name: str, integrator: IntegratorType, seed: int,
            sensors: bool = True) -> dict[str, float]:
    """Relative errors of forward and one step from a random state, per field."""
    mjm = _load(name, sensors=sensors)
    mjm.opt.integrator = int(integrator)
    rng = np.random.default_rng(seed)
    mjd = _random_state(mjm, rng)
    m = interop.model_from_mujoco(mjm)
    d0 = interop.data_from_mujoco(mjm, mjd, m)
    out = {}
    ours, ours_step = _forward_and_step(m, d0)
    ref = mujoco.MjData(mjm)
    for f in ("qpos", "qvel", "ctrl", "act", "qfrc_applied", "xfrc_applied", "mocap_pos",
              "mocap_quat"):
        getattr(ref, f)[:] = getattr(mjd, f)
    mujoco.mj_forward(mjm, ref)
    for f in FORWARD_FIELDS:
        out[f] = rel_error(getattr(ours, f), getattr(ref, f))
    ours = ours_step
    mujoco.mj_step(mjm, mjd)
    for f in STEP_FIELDS:
        out["step." + f] = rel_error(np.reshape(getattr(ours, f), -1),
                                     np.reshape(getattr(mjd, f), -1))
    return out


@jax.jit
def _forward_and_every_step(m, d):
    """forward and one step per integrator from the same state, one program per model."""
    steps = tuple(step(m.replace(opt=m.opt.replace(integrator=i)), d) for i in INTEGRATORS)
    return forward(m, d), steps


def _errors_all_integrators(name: str, seed: int, sensors: bool) -> dict:
    """Relative errors per field of forward and of one step with each integrator."""
    mjm = _load(name, sensors=sensors)
    mjd = _random_state(mjm, np.random.default_rng(seed))
    m = interop.model_from_mujoco(mjm)
    ours, ours_steps = _forward_and_every_step(m, interop.data_from_mujoco(mjm, mjd, m))
    inputs = ("qpos", "qvel", "ctrl", "act", "qfrc_applied", "xfrc_applied", "mocap_pos",
              "mocap_quat")
    ref = mujoco.MjData(mjm)
    for f in inputs:
        getattr(ref, f)[:] = getattr(mjd, f)
    mujoco.mj_forward(mjm, ref)
    fwd = {f: rel_error(getattr(ours, f), getattr(ref, f)) for f in FORWARD_FIELDS}
    out = {}
    for integ, ours_step in zip(INTEGRATORS, ours_steps):
        mjm.opt.integrator = int(integ)
        ref = mujoco.MjData(mjm)
        for f in inputs:
            getattr(ref, f)[:] = getattr(mjd, f)
        mujoco.mj_step(mjm, ref)
        out[integ] = dict(fwd, **{"step." + f: rel_error(
            np.reshape(getattr(ours_step, f), -1), np.reshape(getattr(ref, f), -1))
            for f in STEP_FIELDS})
    return out


# implicit (full derivative factor) runs in the acceptance tier: implicitfast shares its code
# and stays in CI, as do euler and rk4; transmissions: acceptance
@pytest.mark.parametrize("integrator", [
    i if i != IntegratorType.IMPLICIT else pytest.param(i, marks=pytest.mark.acceptance)
    for i in INTEGRATORS], ids=lambda i: i.name.lower())
@pytest.mark.parametrize("name", ["mixed", "hopper"])
def test_forward_and_step_match_mujoco(name, integrator):
    errs = _errors(name, integrator, seed=int(integrator))
    bad = {k: v for k, v in errs.items() if not v <= RTOL}
    assert not bad, f"{name}/{integrator.name}: {bad}"


def test_inverse_recovers_forces():
    """qfrc_inverse of forward's qacc equals the applied + actuator forces (no constraints)."""
    mjm = _load("mixed")
    mjd = _random_state(mjm, np.random.default_rng(3))
    m = interop.model_from_mujoco(mjm)
    d = _forward(m, interop.data_from_mujoco(mjm, mjd, m))
    inv = jax.jit(inverse)(m, d)
    expected = d.qfrc_applied + d.qfrc_actuator + xfrc_accumulate(m, d)
    err = rel_error(inv.qfrc_inverse, expected)
    assert err < RTOL, err


def test_grad_matches_finite_differences():
    """d(w . qacc) by jax.grad vs central differences in float64 on half_cheetah."""
    mjm = _load("half_cheetah")
    mjd = _random_state(mjm, np.random.default_rng(7))
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    w = jp.asarray(np.random.default_rng(8).normal(size=mjm.nv))

    def loss(qpos, qvel, ctrl, body_mass, dof_damping):
        mm = m.replace(body_mass=body_mass, dof_damping=dof_damping)
        out = forward(mm, d.replace(qpos=qpos, qvel=qvel, ctrl=ctrl))
        return jp.dot(w, out.qacc)

    args = (d.qpos, d.qvel, d.ctrl, m.body_mass, m.dof_damping)
    grads = jax.jit(jax.grad(loss, argnums=tuple(range(5))))(*args)
    f = jax.jit(loss)
    eps = 1e-6
    for k, (x, g) in enumerate(zip(args, grads)):
        fd = np.zeros(x.shape)
        for i in range(x.size):
            plus = list(args)
            minus = list(args)
            plus[k] = x.at[i].add(eps)
            minus[k] = x.at[i].add(-eps)
            fd[i] = (float(f(*plus)) - float(f(*minus))) / (2 * eps)
        err = rel_error(g, fd)
        assert err < 1e-5, f"argument {k}: relative error {err:.2e}"


# RK4 runs forward, the sensors and the qacc check as the first stage of its stage scan: the
# step's sensors (and the cacc / cfrc_* an accelerometer or force sensor asks for) are those
# of the initial state, with contacts active and the solver on
RK4_SENSORS = """
<mujoco><option integrator="RK4" timestep="0.005"/><worldbody>
  <geom type="plane" size="2 2 .1"/>
  <body pos="0 0 .06"><freejoint/><geom type="box" size=".1 .08 .05"/><site name="s0"/>
    <body pos=".15 0 0"><joint name="h" type="hinge" axis="0 1 0" damping=".1"/>
      <geom type="capsule" fromto="0 0 0 .2 0 0" size=".03"/><site name="s1" pos=".2 0 0"/>
      <body pos=".2 0 0"><joint type="ball" damping=".05"/>
        <geom type="sphere" size=".04" pos=".05 0 0"/></body>
    </body>
  </body></worldbody>
  <actuator><motor name="m" joint="h"/></actuator>
  <sensor><accelerometer site="s1"/><framelinacc objtype="site" objname="s0"/>
    <gyro site="s0"/><velocimeter site="s1"/><jointpos joint="h"/><jointvel joint="h"/>
    <actuatorfrc actuator="m"/><force site="s1"/><torque site="s1"/>
    <framepos objtype="site" objname="s1"/><framequat objtype="body" objname="world"/>
    <subtreelinvel body="world"/></sensor>
</mujoco>"""


def test_rk4_step_sensors_match_mujoco():
    mjm = mujoco.MjModel.from_xml_string(RK4_SENSORS)
    rng = np.random.default_rng(11)
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = 0.3 * rng.normal(size=mjm.nv)
    mjd.ctrl[:] = 0.2
    for _ in range(40):  # settle into contact
        mujoco.mj_step(mjm, mjd)
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    out = jax.jit(step)(m, d)
    mujoco.mj_step(mjm, mjd)
    assert mjd.ncon > 0
    for f in ("qpos", "qvel", "sensordata", "cacc", "cfrc_int", "cfrc_ext", "qacc_warmstart"):
        err = rel_error(np.reshape(getattr(out, f), -1), np.reshape(getattr(mjd, f), -1))
        assert err <= 1e-7, f"{f}: relative error {err:.2e}"


@pytest.mark.acceptance
def test_acceptance_all_models():
    """Every gymnasium and mujoco-mjx test_data model and the inline test models, 5 random
    states, every integrator; worst errors per field go to tests/acceptance/smooth_dynamics.txt.
    Sensors stay on unless the model has a sensor type mjx_lite lacks (then the sensor disable
    bit is set on both sides and the line says so)."""
    lines = ["# worst relative error vs MuJoCo 4.0 over 5 random states (float64); "
             "contact, limit, equality, frictionloss disabled on both sides",
             "# model integrator " + " ".join(FORWARD_FIELDS + tuple(
                 "step." + f for f in STEP_FIELDS))]
    failures = []
    overall: dict[str, float] = {}
    done = set()
    if os.environ.get("ACCEPTANCE_RESUME") and ACCEPTANCE_FILE.exists():
        # a run cut short (a crash of the persistent compile cache, a time limit) goes on
        # from the models already written, whose figures count as measured
        for line in ACCEPTANCE_FILE.read_text().splitlines()[2:]:
            if line.startswith("#"):
                continue
            name, integ, *fields = line.split(" (")[0].split()
            lines.append(line)
            done.add(name)
            for k, v in (f.split("=") for f in fields):
                overall[k] = max(overall.get(k, 0.0), float(v))
                if not float(v) <= RTOL:
                    failures.append(f"{name}/{integ.upper()}/{k}")
    for name in ("mixed", "transmissions") + GYM + tuple(_mjx_test_models()):
        if name in done:
            continue
        sensors = True
        worst: dict = {integ: {} for integ in INTEGRATORS}
        for seed in range(5):
            try:
                per_integ = _errors_all_integrators(name, seed, sensors)
            except NotImplementedError:
                if not sensors:
                    raise
                sensors = False
                per_integ = _errors_all_integrators(name, seed, sensors)
            for integ, errs in per_integ.items():
                for k, v in errs.items():
                    worst[integ][k] = max(worst[integ].get(k, 0.0), v)
        note = "" if sensors else " (sensors off: a sensor type is not implemented)"
        for integ in INTEGRATORS:
            for k, v in worst[integ].items():
                overall[k] = max(overall.get(k, 0.0), v)
            lines.append(f"{name} {integ.name.lower()} " + " ".join(
                f"{k}={v:.1e}" for k, v in worst[integ].items()) + note)
            failures += [f"{name}/{integ.name}/{k}" for k, v in worst[integ].items()
                         if not v <= RTOL]
        ACCEPTANCE_FILE.parent.mkdir(exist_ok=True)
        ACCEPTANCE_FILE.write_text("\n".join(lines) + "\n")
    lines.append("# worst over all models: " + " ".join(
        f"{k}={v:.1e}" for k, v in overall.items()))
    ACCEPTANCE_FILE.write_text("\n".join(lines) + "\n")
    assert not failures, failures


@functools.partial(jax.jit, static_argnums=2)
def _rollout(m, d, n):
    return jax.lax.scan(lambda c, _: (step(m, c), (c.qpos, c.qvel)), d, None, length=n)


@pytest.mark.acceptance
def test_rk4_energy_drift():
    """Conservative double pendulum, RK4, 10,000 steps: our energy drift is at most
    1.05x MuJoCo's own + 1e-12 J (energies of both trajectories evaluated by MuJoCo)."""
    mjm = mujoco.MjModel.from_xml_string(DOUBLE_PENDULUM)
    mjm.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = [1.2, -0.7]
    m = interop.model_from_mujoco(mjm)
    d = interop.data_from_mujoco(mjm, mjd, m)
    n = 10_000
    _, (qpos, qvel) = _rollout(m, d, n)
    final = _rollout(m, d, n)[0]

    def energy(q, v):
        e = mujoco.MjData(mjm)
        e.qpos[:], e.qvel[:] = q, v
        mujoco.mj_forward(mjm, e)
        return e.energy.sum()

    e0 = energy(mjd.qpos, mjd.qvel)
    ours = max(abs(energy(q, v) - e0) for q, v in zip(np.asarray(qpos), np.asarray(qvel)))
    ours = max(ours, abs(energy(np.asarray(final.qpos), np.asarray(final.qvel)) - e0))
    theirs = 0.0
    for _ in range(n):
        mujoco.mj_step(mjm, mjd)
        theirs = max(theirs, abs(energy(mjd.qpos, mjd.qvel) - e0))
    ACCEPTANCE_FILE.with_name("energy_drift.txt").write_text(
        "# conservative double pendulum, RK4, 10,000 steps, float64: max |E(t) - E(0)| in J\n"
        f"mjx_lite {ours:.3e}  MuJoCo {theirs:.3e}  bound 1.05 x MuJoCo + 1e-12 = "
        f"{1.05 * theirs + 1e-12:.3e}\n")
    assert ours <= 1.05 * theirs + 1e-12, (ours, theirs)

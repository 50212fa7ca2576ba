"""The JAX contract of the smooth dynamics on every gymnasium model (issue 4, acceptance):
jit, vmap over 64 states and over 8 Models, grad against central finite differences, and
float32 forward outputs against float64. Contact, limit, equality and friction loss are off,
as in the smooth-dynamics parity checks."""

from __future__ import annotations

import functools
import pathlib

import jax
import jax.numpy as jp
import numpy as np
import pytest

import mjx_lite
from mjx_lite.types import DisableBit

from conftest import GYM_ASSETS
from parity import rel_error

GYM = sorted(p.stem for p in GYM_ASSETS.glob("*.xml") if p.stem != "point")
OFF = DisableBit.CONTACT | DisableBit.LIMIT | DisableBit.EQUALITY | DisableBit.FRICTIONLOSS
OUT = pathlib.Path(__file__).with_name("acceptance") / "jax_contract.txt"
RTOL_GRAD = 1e-5
FD_EPS = 1e-4
RTOL_F32 = 1e-4


def _setup(name: str):
    m = mjx_lite.load_model(GYM_ASSETS / f"{name}.xml")
    m = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | OFF))
    rng = np.random.default_rng(0)
    d = mjx_lite.make_data(m)
    qpos = np.asarray(d.qpos) + 0.05 * rng.standard_normal(m.nq)
    d = d.replace(qpos=jp.asarray(qpos), qvel=jp.asarray(0.3 * rng.standard_normal(m.nv)),
                  ctrl=jp.asarray(0.3 * rng.standard_normal(m.nu)))
    return m, d


def _directional_fd(f, x, v, eps):
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


def _check(name: str) -> tuple[str, bool]:
    m, d = _setup(name)
    fwd = jax.jit(mjx_lite.forward)
    ref = fwd(m, d)
    # vmap over 64 states
    keys = jax.random.split(jax.random.key(1), 64)
    states = jax.vmap(lambda k: d.replace(
        qvel=d.qvel + 0.1 * jax.random.normal(k, d.qvel.shape)))(keys)
    batch = jax.jit(jax.vmap(mjx_lite.forward, in_axes=(None, 0)))(m, states)
    one = fwd(m, jax.tree.map(lambda x: x[3], states))
    vmap_err = rel_error(batch.qacc[3], one.qacc)
    # vmap over 8 Models with different body_mass
    scales = jp.linspace(0.8, 1.2, 8)
    models = jax.vmap(lambda s: m.replace(body_mass=m.body_mass * s))(scales)
    batch_m = jax.jit(jax.vmap(mjx_lite.forward, in_axes=(0, None)))(models, d)
    one_m = fwd(m.replace(body_mass=m.body_mass * scales[5]), d)
    vmap_m_err = rel_error(batch_m.qacc[5], one_m.qacc)
    # grad of a scalar of qacc w.r.t. state, control and parameters
    weights = jp.asarray(np.random.default_rng(2).standard_normal(m.nv))

    def scalar(qpos, qvel, ctrl, mass, damping):
        mm = m.replace(body_mass=mass, dof_damping=damping)
        out = mjx_lite.forward(mm, d.replace(qpos=qpos, qvel=qvel, ctrl=ctrl))
        return out.qacc @ weights

    args = (d.qpos, d.qvel, d.ctrl, m.body_mass, m.dof_damping)
    grads = jax.jit(jax.grad(scalar, argnums=tuple(range(5))))(*args)
    f = jax.jit(scalar)

    def along(k, y):
        return f(*(args[:k] + (y,) + args[k + 1:]))

    grad_err = 0.0
    rng = np.random.default_rng(3)
    for k, (x, g) in enumerate(zip(args, grads)):
        if x.size == 0:
            continue
        for _ in range(2):
            v = jp.asarray(rng.standard_normal(x.shape))
            if k == 3:
                v = v.at[0].set(0.0)  # the world's mass does not enter the dynamics
            # a step of 1e-4: some directional derivatives are 1e-6 of the scalar (reacher's
            # qpos), where a 1e-6 step leaves rounding noise of 1e-3 relative in the difference
            fd = float(_directional_fd(functools.partial(along, k), x, v, FD_EPS))
            an = float(g @ v)
            grad_err = max(grad_err, abs(an - fd) / max(abs(fd), 1e-8))
    # float32 forward against float64
    to32 = lambda x: x.astype(jp.float32) if x.dtype == jp.float64 else x  # noqa: E731
    out32 = jax.jit(mjx_lite.forward)(jax.tree.map(to32, m), jax.tree.map(to32, d))
    f32_err = 0.0
    for field in ("xpos", "cinert", "qfrc_bias", "qfrc_passive", "qfrc_actuator", "qacc"):
        a = np.asarray(getattr(out32, field), dtype=np.float64)
        assert np.all(np.isfinite(a)), (name, field)
        f32_err = max(f32_err, rel_error(a, getattr(ref, field)))
    line = (f"{name}: vmap64 {vmap_err:.1e} vmap8models {vmap_m_err:.1e} "
            f"grad {grad_err:.1e} float32 {f32_err:.1e}")
    ok = (vmap_err < 1e-12 and vmap_m_err < 1e-12 and grad_err < RTOL_GRAD
          and f32_err < RTOL_F32)
    return line, ok


@pytest.mark.acceptance
def test_jit_vmap_grad_float32_on_every_gym_model():
    lines = ["# model: vmap64 vmap8models grad(max rel err over qpos qvel ctrl body_mass "
             "dof_damping, 2 random directions each) float32(max rel err of forward fields)"]
    failures = []
    for name in GYM:
        line, ok = _check(name)
        lines.append(line)
        if not ok:
            failures.append(line)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    assert not failures, failures

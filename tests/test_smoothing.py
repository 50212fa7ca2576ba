"""Smoothed contact gradients (mjx_lite.smoothing): the value of a step is untouched, its
derivative is the surrogate model's, whose contacts push from ``contact_smoothing`` apart."""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np
import pytest

import mjx_lite
from mjx_lite.smoothing import surrogate_model

# a ball 5 mm above the floor, falling at 0.1 m/s: no contact for the first steps
BALL = """<mujoco><option timestep="0.01"/>
  <worldbody><geom type="plane" size="1 1 .1"/>
  <body pos="0 0 0.105"><freejoint/><geom type="sphere" size="0.1"/></body></worldbody>
</mujoco>"""
WIDTH = 0.02


@pytest.fixture(scope="module")
def ball():
    m = mjx_lite.load_model_from_string(BALL)  # float64 (conftest)
    d = mjx_lite.make_data(m)
    return m, d.replace(qvel=d.qvel.at[2].set(-0.1))


def _final_height(m, d, z0, width, adjoint="unroll", steps=3):
    d = d.replace(qpos=d.qpos.at[2].set(z0))
    ctrls = jp.zeros((steps, m.nu), d.qpos.dtype)
    final, _ = mjx_lite.rollout(m, d, ctrls, adjoint=adjoint, contact_smoothing=width,
                                fields=())
    return final.qpos[2]


@pytest.mark.parametrize("adjoint", [
    "unroll", pytest.param("implicit", marks=pytest.mark.acceptance)])  # ~2 min of compile each
def test_smoothing_keeps_value_takes_surrogate_derivative(ball, adjoint):
    m, d = ball
    z0 = jp.float64(0.105)
    # 3 steps: no contact in the real simulation (the ball reaches the floor in the last)
    _, per_step = mjx_lite.rollout(m, d, jp.zeros((3, m.nu)), fields=("ncon",))
    assert np.asarray(per_step["ncon"]).tolist() == [0, 0, 0]
    smooth = lambda z: _final_height(m, d, z, WIDTH, adjoint)  # noqa: E731
    ms = surrogate_model(m, WIDTH)

    # the plain simulation by its forward program only (a third of a gradient's compile)
    plain = jax.jit(lambda z: _final_height(m, d, z, 0.0, adjoint))

    def derivatives(z):
        # one module for the three derivatives (34 s of trace and compile alone, against
        # 48 s as three; once, four modules in one crashed XLA in a pytest-xdist worker):
        # the smoothed step's reverse and forward derivatives, and the surrogate's own
        one = jp.ones_like(z)
        value_s, slope_s = jax.value_and_grad(smooth)(z)
        fwd = jax.jvp(smooth, (z,), (one,))[1]
        own = jax.jvp(lambda z: _final_height(ms, d, z, 0.0, adjoint), (z,), (one,))[1]
        return value_s, slope_s, fwd, own

    value_s, slope_s, fwd, own = (float(x) for x in jax.jit(derivatives)(z0))
    assert value_s == float(plain(z0))
    # plain: free flight, the final height moves with the initial one one to one
    h = 1e-5  # the ball ends 5.7e-5 above the floor: no contact either side
    slope = (float(plain(z0 + h)) - float(plain(z0 - h))) / (2 * h)
    assert slope == pytest.approx(1.0, abs=1e-8)
    # smoothed: the surrogate's contact (within 2 cm) pushes less from higher up
    assert slope_s < 1.0 - 1e-3, slope_s
    assert abs(slope_s - own) <= 1e-10 * abs(own), (slope_s, own)
    assert abs(fwd - own) <= 1e-10 * abs(own), (fwd, own)


def test_surrogate_model_margins(ball):
    m, _ = ball
    ms = surrogate_model(m, WIDTH)
    np.testing.assert_allclose(ms.geom_margin, np.asarray(m.geom_margin) + WIDTH / 2)
    np.testing.assert_allclose(ms.geom_reach, np.asarray(m.geom_reach) + WIDTH)
    with pytest.raises(ValueError, match="contact_smoothing"):
        mjx_lite.step(m, mjx_lite.make_data(m), contact_smoothing=-1.0)

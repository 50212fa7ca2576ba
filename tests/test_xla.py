"""mjx_lite.compiler_options: the recommended XLA compile options are accepted by the installed
jaxlib and change results at rounding level only."""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite import xla

from conftest import MODELS_DIR


def test_options_on_cpu_are_known_to_xla():
    options = mjx_lite.compiler_options()
    assert jax.default_backend() == "cpu"
    # the tested jaxlib (0.10) knows both; one that drops an option fails here, so that the
    # recommendation is measured again (compiler_options itself keeps the options it knows)
    assert options == xla._CPU_OPTIONS
    jax.jit(lambda x: 2 * x, compiler_options=options)(jp.ones(3)).block_until_ready()
    assert mjx_lite.compiler_options("gpu") == {}


def test_an_option_xla_does_not_know_is_left_out(monkeypatch):
    monkeypatch.setitem(xla._CPU_OPTIONS, "xla_cpu_no_such_option", True)
    options = mjx_lite.compiler_options()
    assert "xla_cpu_no_such_option" not in options
    assert set(options) == set(xla._CPU_OPTIONS) - {"xla_cpu_no_such_option"}


def test_a_step_and_its_gradient_are_the_default_options_to_rounding():
    m = mjx_lite.load_model(MODELS_DIR / "humanoid_like.xml")
    d = mjx_lite.make_data(m)
    d = d.replace(qpos=d.qpos.at[2].add(-0.2), qvel=d.qvel + 0.1)  # 10 contacts

    def loss(qvel):
        out = mjx_lite.step(m, d.replace(qvel=qvel))
        return jp.sum(out.qvel**2) + jp.sum(out.qpos**2), out

    fn = jax.value_and_grad(loss, has_aux=True)
    (v0, out0), g0 = jax.jit(fn)(d.qvel)
    (v1, out1), g1 = jax.jit(fn, compiler_options=mjx_lite.compiler_options())(d.qvel)
    assert int(out0.ncon) > 0
    for a, b in [(v0, v1), (g0, g1), (out0.qacc, out1.qacc), (out0.efc_force, out1.efc_force)]:
        a, b = np.asarray(a), np.asarray(b)
        # measured 1.3e-14 (qacc); the options reorder some float sums, nothing more
        assert np.max(np.abs(a - b)) <= 1e-12 * max(np.max(np.abs(a)), 1.0)

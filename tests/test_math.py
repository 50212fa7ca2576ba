"""mjx_lite.math helpers whose point is how XLA compiles them."""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math


def _draws(k=3, n=10_000):
    return np.random.default_rng(0).standard_normal((k, n))


def _optimized(f, *args):
    """f jitted and compiled at XLA's default backend optimization level (users' programs),
    whatever XLA_FLAGS says (.ci/run sets level 0, where LLVM contracts nothing), run on
    args."""
    compiled = jax.jit(f).lower(*args).compile(
        compiler_options={"xla_backend_optimization_level": 3})
    return np.asarray(compiled(*args))


def test_rounded_products_are_not_fused():
    """math.rounded keeps a * b + c two roundings, as numpy (and MuJoCo) computes it: jitted
    on this backend the plain expression is contracted into fused multiply-adds (it differs
    from numpy somewhere in 10,000 draws), the rounded one equals numpy's bit for bit, also
    inside a loop body, and its derivative is the identity's."""
    a, b, c = _draws()
    ref = a * b + c
    plain = _optimized(lambda a, b, c: a * b + c, a, b, c)
    assert (plain != ref).any()  # the contraction this guards against happens here
    assert (_optimized(lambda a, b, c: math.rounded(a * b) + c, a, b, c) == ref).all()
    looped = _optimized(lambda a, b, c: jax.lax.fori_loop(
        0, 2, lambda i, x: math.rounded(a * b) + x, c), a, b, c)
    assert (looped == a * b + ref).all()
    grad = jax.grad(lambda a: jp.sum(math.rounded(a * b)))(jp.asarray(a))
    assert (np.asarray(grad) == b).all()


def test_dot3_is_numpys_sum_without_a_reduction():
    """math.dot3 equals numpy's sum of the three products bit for bit (broadcasting), and
    compiles to no reduce."""
    a, b = _draws(6).reshape(2, -1, 3)
    assert (_optimized(math.dot3, a, b) == np.sum(a * b, -1)).all()
    assert (_optimized(math.dot3, a, b[0]) == np.sum(a * b[0], -1)).all()
    assert " reduce(" not in jax.jit(math.dot3).lower(a, b).compile().as_text()

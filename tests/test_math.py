"""mjx_lite.math helpers whose point is how XLA compiles them."""

from __future__ import annotations

import re

import jax
import jax.numpy as jp
import numpy as np
import pytest

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
    compiles to no reduce; math.sum_last adds left to right."""
    a, b = _draws(6).reshape(2, -1, 3)
    assert (_optimized(math.dot3, a, b) == np.sum(a * b, -1)).all()
    assert (_optimized(math.dot3, a, b[0]) == np.sum(a * b[0], -1)).all()
    assert " reduce(" not in jax.jit(math.dot3).lower(a, b).compile().as_text()
    c = _draws(4)
    assert (_optimized(math.sum_last, c.T) == ((c[0] + c[1]) + c[2]) + c[3]).all()


def test_argmax_is_numpys_first_index():
    """math.argmax / argmin give numpy's index (the first of equal extremes) in float32 and
    float64, over either axis, with ties, -0.0 beside +0.0 and infinities, vmapped too; the
    compiled program holds no variadic (value, index) reduction."""
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, (64, 200)).astype(np.float64)  # many ties
    x[0, :5] = [-0.0, 0.0, -0.0, -1.0, -2.0]
    x[0, 5:] = -3.0
    x[1, 7], x[1, 9], x[2, 3], x[2, 100] = np.inf, np.inf, -np.inf, -np.inf
    y = rng.standard_normal((64, 200))
    for dtype in (np.float32, np.float64):
        for v in (x.astype(dtype), y.astype(dtype)):
            for axis in (0, 1, -1):
                assert (_optimized(lambda v, axis=axis: math.argmax(v, axis), v)
                        == np.argmax(v, axis)).all()
                assert (_optimized(lambda v, axis=axis: math.argmin(v, axis), v)
                        == np.argmin(v, axis)).all()
            assert (_optimized(jax.vmap(math.argmax), v) == np.argmax(v, 1)).all()
    assert int(math.argmax(np.array([0, 2, 2, 1]))) == 1  # integers: jp.argmax's
    variadic = re.compile(r"\(f32\[64\]\{0\}, s(32|64)\[64\]\{0\}\) reduce\(")
    y32 = y.astype(np.float32)
    assert variadic.search(jax.jit(lambda v: jp.argmax(v, 1)).lower(y32).compile().as_text())
    assert not variadic.search(jax.jit(math.argmax).lower(y32).compile().as_text())


def test_keep_where_is_where_with_its_derivatives():
    """math.keep_where(on, x) = where(on, x, 0) in value, jvp, vjp and under vmap (a flag per
    lane), the flag never broadcast into a residual of x's shape."""
    x = jp.arange(12.0).reshape(3, 4) - 5.0
    on = jp.array([True, False, True])
    ref = lambda on, x: jp.where(on[:, None], x, 0.0)  # noqa: E731
    ours = jax.vmap(math.keep_where)
    np.testing.assert_array_equal(ours(on, x), ref(on, x))
    t = jp.ones_like(x) * 0.5
    np.testing.assert_array_equal(jax.jvp(lambda x: ours(on, x), (x,), (t,))[1],
                                  jax.jvp(lambda x: ref(on, x), (x,), (t,))[1])
    np.testing.assert_array_equal(jax.grad(lambda x: jp.sum(ours(on, x) ** 2))(x),
                                  jax.grad(lambda x: jp.sum(ref(on, x) ** 2))(x))
    # an unbatched flag over a batched x, and the reverse
    np.testing.assert_array_equal(jax.vmap(math.keep_where, (None, 0))(False, x), 0 * x)
    np.testing.assert_array_equal(jax.vmap(math.keep_where, (0, None))(on, x[0]),
                                  ref(on, jp.broadcast_to(x[0], x.shape)))
    _, lin = jax.linearize(lambda x: ours(on, x), x)
    assert [np.shape(r) for r in jax.tree.leaves(lin)] == [(3,)]


def test_lane_select_is_where_with_its_derivatives():
    """math.lane_select(on, x, y) = where(on, x, y) (a flag per lane) in value, jvp and grad
    with both branches differentiated, or one, the other a constant."""
    x = jp.arange(12.0).reshape(3, 4) - 5.0
    y = jp.cos(x)
    on = jp.array([True, False, True])
    ref = lambda x, y: jp.where(on[:, None], x, y)  # noqa: E731
    ours = lambda x, y: jax.vmap(math.lane_select)(on, x, y)  # noqa: E731
    np.testing.assert_array_equal(ours(x, y), ref(x, y))
    const = jp.full_like(x, 2.0)
    forms = {"both": lambda g, x, y: g(x, y), "x only": lambda g, x, y: g(x, const),
             "y only": lambda g, x, y: g(const, y)}
    for name, form in forms.items():
        def loss(g, x, y, form=form):
            return jp.sum(form(g, x, y) ** 2)

        for a, b in zip(jax.grad(loss, (1, 2))(ours, x, y), jax.grad(loss, (1, 2))(ref, x, y)):
            np.testing.assert_array_equal(a, b, err_msg=name)
    t = (jp.ones_like(x), 0.5 * jp.ones_like(y))
    np.testing.assert_array_equal(jax.jvp(ours, (x, y), t)[1], jax.jvp(ref, (x, y), t)[1])
    _, lin = jax.linearize(ours, x, y)
    assert [np.shape(r) for r in jax.tree.leaves(lin)] == [(3,)]



@pytest.mark.parametrize("idx", [
    np.arange(1, 4), np.array([2]), np.full(3, 1), np.array([], int), np.array([3, 0, 0, 2]),
    np.array([[0, 1, 2, 3]]), np.array([[2, 2], [0, 3]])], ids=lambda i: str(i.tolist()))
def test_pick_and_take_are_numpy_indexing(idx):
    """pick / take (and their transpose, spread) equal numpy's indexing for every kind of
    static index (one ascending run, one repeated entry, empty, general), with their
    derivatives and under vmap."""
    rng = np.random.default_rng(0)
    x = jp.asarray(rng.standard_normal((2, 3, 4)))
    y = jp.asarray(rng.standard_normal((4, 2, 3)))
    np.testing.assert_array_equal(jax.jit(lambda x: math.pick(x, idx))(x), np.asarray(x)[..., idx])
    np.testing.assert_array_equal(jax.jit(lambda y: math.take(y, idx))(y), np.asarray(y)[idx])
    np.testing.assert_allclose(jax.grad(lambda x: jp.sum(jp.sin(math.pick(x, idx))))(x),
                               jax.grad(lambda x: jp.sum(jp.sin(x[..., idx])))(x), rtol=1e-6)
    np.testing.assert_allclose(jax.grad(lambda y: jp.sum(jp.sin(math.take(y, idx))))(y),
                               jax.grad(lambda y: jp.sum(jp.sin(y[idx])))(y), rtol=1e-6)
    yb = jp.stack([y, 2 * y])
    np.testing.assert_array_equal(jax.vmap(lambda y: math.take(y, idx))(yb),
                                  np.asarray(yb)[:, idx])
    xb = jp.stack([x, 2 * x], -1)
    np.testing.assert_array_equal(jax.vmap(lambda x: math.pick(x, idx), in_axes=-1)(xb),
                                  np.moveaxis(np.asarray(xb), -1, 0)[..., idx])


def test_one_run_index_is_a_slice_not_a_gather():
    """An index that is one ascending run or one repeated entry lowers without a gather (XLA
    fuses a slice into each consumer; a gather read twice is a kernel of its own)."""
    y = jp.ones((5, 3))

    def hlo(idx):
        return jax.jit(lambda y: math.take(y, idx)).lower(y).as_text()

    assert "gather" not in hlo(np.arange(1, 4)) and "gather" not in hlo(np.full(3, 1))
    assert "gather" in hlo(np.array([3, 0, 0, 2]))


def test_cross_is_jnp_cross_with_its_derivatives():
    """``math.cross`` (a bilinear primitive whose cotangents are cross products by
    components) has jp.cross's values, gradients, forward-mode Jacobians, vmap and second
    derivatives, broadcasting a single vector against a stack."""
    rng = np.random.default_rng(3)
    a, b = jp.asarray(rng.standard_normal((5, 3))), jp.asarray(rng.standard_normal(3))
    ours = lambda a, b: jp.sum(jp.sin(math.cross(a, b)))  # noqa: E731
    ref = lambda a, b: jp.sum(jp.sin(jp.cross(a, b)))  # noqa: E731
    np.testing.assert_allclose(math.cross(a, b), jp.cross(a, b), atol=1e-15)
    for x, y in zip(jax.grad(ours, (0, 1))(a, b), jax.grad(ref, (0, 1))(a, b)):
        np.testing.assert_allclose(x, y, atol=1e-14)
    np.testing.assert_allclose(jax.jacfwd(math.cross, (0, 1))(a[0], b),
                               jax.jacfwd(jp.cross, (0, 1))(a[0], b), atol=1e-15)
    np.testing.assert_allclose(jax.vmap(jax.grad(ours, 1), (0, None))(a, b),
                               jax.vmap(jax.grad(ref, 1), (0, None))(a, b), atol=1e-14)
    hess = [jax.hessian(lambda x, f=f: f(x, x * x))(b) for f in (ours, ref)]
    np.testing.assert_allclose(hess[0], hess[1], atol=1e-13)
    assert np.abs(hess[1]).max() > 0.1

"""mjx_lite.linalg: values and derivatives against jnp.linalg, one LAPACK call for one matrix
(or a shared factor), loops (no LAPACK kernel, which can hang batched on CPU) for a batch."""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np
import pytest

from mjx_lite import linalg

from parity import assert_close

jax.config.update("jax_enable_x64", True)

N = 6
RTOL = 1e-12


def _spd(rng, *batch):
    x = rng.standard_normal((*batch, N, N))
    return x @ np.swapaxes(x, -1, -2) + N * np.eye(N)


def _sym(a):
    return 0.5 * (a + a.T)


def _loss(solve):
    # a symmetric argument: the Cholesky rule's derivative is for symmetric perturbations
    return lambda a, b: jp.sum(jp.sin(solve(_sym(a), b)))


OURS, REF = _loss(linalg.spd_solve), _loss(jp.linalg.solve)


def test_spd_solve_values_and_derivatives():
    rng = np.random.default_rng(0)
    a, b, bk = _spd(rng), rng.standard_normal(N), rng.standard_normal((N, 3))
    assert_close("value", linalg.spd_solve(a, b), np.linalg.solve(a, b), RTOL)
    assert_close("value k", linalg.spd_solve(a, bk), np.linalg.solve(a, bk), RTOL)
    for mode in (jax.grad, jax.jacfwd, jax.jacrev):
        for arg in (0, 1):
            assert_close(f"{mode.__name__} {arg}", mode(OURS, arg)(a, b),
                         mode(REF, arg)(a, b), RTOL)
    assert_close("hessian", jax.hessian(OURS, 1)(a, b), jax.hessian(REF, 1)(a, b), RTOL)


@pytest.mark.parametrize("size", [1, 3])
def test_spd_solve_batched(size):
    """vmap of the matrix (size 1: squeezed to one call), of the right-hand side only (the
    batch joins the columns of one solve), of both, nested, with reverse mode inside and
    outside the vmap."""
    rng = np.random.default_rng(size)
    a, b = _spd(rng), rng.standard_normal(N)
    az, bz = _spd(rng, size), rng.standard_normal((size, N))
    want = np.linalg.solve(az, bz[..., None])[..., 0]
    assert_close("both", jax.vmap(linalg.spd_solve)(az, bz), want, RTOL)
    assert_close("nested", jax.vmap(jax.vmap(linalg.spd_solve))(az[None], bz[None])[0], want,
                 RTOL)
    assert_close("rhs", jax.vmap(linalg.spd_solve, (None, 0))(a, bz),
                 np.linalg.solve(a, bz.T).T, RTOL)
    assert_close("rhs k", jax.vmap(linalg.spd_solve, (None, 2), 2)(a, np.stack([bz.T] * 2, 1)),
                 np.stack([np.linalg.solve(a, bz.T)] * 2, 1), RTOL)
    assert_close("matrix", jax.vmap(linalg.spd_solve, (0, None))(az, b), np.linalg.solve(az, b),
                 RTOL)
    assert_close("vmap of grad", jax.vmap(jax.grad(OURS))(az, bz), jax.vmap(jax.grad(REF))(az, bz),
                 RTOL)
    for arg in (0, 1):
        def total(loss):
            return lambda a, b: jp.sum(jax.vmap(loss)(a, b))
        assert_close(f"grad of vmap {arg}", jax.grad(total(OURS), arg)(az, bz),
                     jax.grad(total(REF), arg)(az, bz), RTOL)


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_reads_its_triangle(trans, unit):
    """Only the lower triangle is read (and not the diagonal with ``unit``), in value and in
    the factor's derivative, unbatched and batched."""
    rng = np.random.default_rng(7)
    low = np.tril(rng.standard_normal((N, N))) + 3 * np.eye(N)
    garbage = low + np.triu(rng.standard_normal((N, N)), 1 if not unit else 0)
    b = rng.standard_normal(N)

    def used(lw):
        tri = jp.tril(lw, -1) + (jp.eye(N) if unit else jp.diag(jp.diag(lw)))
        return tri.T if trans else tri

    def ours(lw, b):
        return linalg.solve_triangular(lw, b, trans, unit)

    def ref(lw, b):
        return jp.linalg.solve(used(lw), b)

    assert_close("value", ours(garbage, b), ref(garbage, b), RTOL)
    stack = np.stack([garbage, low, garbage])
    assert_close("vmap", jax.vmap(ours, (0, None))(stack, b), jax.vmap(ref, (0, None))(stack, b),
                 RTOL)
    for arg in (0, 1):
        assert_close(f"grad {arg}", jax.grad(lambda *x: jp.sum(ours(*x) ** 2), arg)(garbage, b),
                     jax.grad(lambda *x: jp.sum(ref(*x) ** 2), arg)(garbage, b), RTOL)


def test_not_positive_definite_is_nan():
    a = jp.array([[1.0, 2.0], [2.0, 1.0]])
    assert np.isnan(np.asarray(linalg.cholesky(a))[1, 1])
    assert np.isnan(np.asarray(jax.vmap(linalg.cholesky)(jp.stack([a, a, a])))[:, 1, 1]).all()


def _hlo(fn, *args):
    return jax.jit(fn).lower(*args).compile().as_text()


def test_lapack_only_for_one_matrix():
    """One matrix or a shared factor: LAPACK custom calls and no loop; a batch of matrices:
    loops and no LAPACK (jaxlib 0.10's batched CPU kernels can deadlock the thread pool)."""
    rng = np.random.default_rng(1)
    a, b = _spd(rng), rng.standard_normal(N)
    az, bz = _spd(rng, 4), rng.standard_normal((4, N))
    for name, fn, args in (
            ("one", jax.grad(OURS), (a, b)),
            ("vmap size 1", jax.vmap(jax.grad(OURS)), (az[:1], bz[:1])),
            ("shared factor", jax.vmap(linalg.spd_solve, (None, 0)), (a, bz))):
        hlo = _hlo(fn, *args)
        assert "custom-call" in hlo and " while(" not in hlo, name
    for name, fn in (("batch", jax.vmap(jax.grad(OURS))),
                     ("grad of batch", jax.grad(lambda a, b: jp.sum(jax.vmap(OURS)(a, b))))):
        hlo = _hlo(fn, az, bz)
        assert "custom-call" not in hlo and " while(" in hlo, name

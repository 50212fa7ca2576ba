"""Dense Cholesky factorization and triangular solves: LAPACK for one matrix, XLA loops for a
batch of them.

``cholesky`` and ``solve_triangular`` are primitives of their own. One matrix (no ``vmap``, or
a ``vmap`` of size 1) is one LAPACK call (``jax.lax.linalg``; cuSOLVER on GPU): a single
kernel, where the textbook loops below run 3-5 kernels per row. A batch of matrices runs the
loops, vectorized over the batch: on CPU, jaxlib 0.10's batched LAPACK kernels split their
batch over the XLA thread pool that is running them and wait for it, and when every worker of
the pool is such a waiter the program never finishes (measured on a 2-core machine: batch-4096
rollouts of gymnasium ant and hopper hung in 3 of 3 runs, in mjx_lite and in MJX alike, a
batch of 512 Cholesky factorizations of 14 x 14 within seconds; see docs/batching.md). An
unbatched call is one LAPACK call on the calling thread: 16 independent ones per program, run
100,000 times, never stopped. A batch of solves with one shared factor (``vmap`` over the
right-hand side only) is one LAPACK call too, the batch joining the right-hand side's columns.
Derivatives come from the usual rules (forward mode below, the triangular solve's transpose a
solve with the transposed factor), so reverse mode stores no loop carries.
"""

from __future__ import annotations

import functools

import jax
import jax.extend.core
import jax.interpreters.ad as ad
import jax.interpreters.batching as batching
import jax.interpreters.mlir as mlir
import jax.numpy as jp

from mjx_lite.math import where


def cholesky(a: jax.Array) -> jax.Array:
    """Lower Cholesky factor of a symmetric positive definite (n, n) matrix, read from its
    lower triangle (NaN where it is not positive definite)."""
    return _cholesky_p.bind(jp.asarray(a))


def solve_triangular(low: jax.Array, b: jax.Array, trans: bool,
                     unit_diagonal: bool = False) -> jax.Array:
    """x with low x = b (``trans`` False) or low' x = b (True); low lower triangular (only its
    lower triangle is read, and not its diagonal when ``unit_diagonal``); b (n,) or (n, k)."""
    low, b = jp.asarray(low), jp.asarray(b)
    return _solve_p.bind(low, b.astype(low.dtype), trans=bool(trans),
                         unit_diagonal=bool(unit_diagonal))


# ---- one matrix: LAPACK


def _lapack_cholesky(a):
    return jax.lax.linalg.cholesky(a, symmetrize_input=False)


def _lapack_solve(low, b, *, trans, unit_diagonal):
    column = b.ndim == 1
    x = jax.lax.linalg.triangular_solve(low, b[:, None] if column else b, left_side=True,
                                        lower=True, transpose_a=trans,
                                        unit_diagonal=unit_diagonal)
    return x[:, 0] if column else x


# ---- a batch of matrices: loops (one column, or one row, per fori_loop step)


@jax.custom_jvp
def _loop_cholesky(a):
    n = a.shape[-1]
    idx = jp.arange(n)

    def column(j, low):
        v = a[:, j] - low @ low[j]  # low[j] holds the columns before j only
        pivot = jp.sqrt(v[j])
        col = where(idx > j, v / pivot, where(idx == j, pivot, 0.0))
        return low.at[:, j].set(col)

    return jax.lax.fori_loop(0, n, column, jp.zeros_like(a))


@_loop_cholesky.defjvp
def _loop_cholesky_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    low = _loop_cholesky(a)
    return low, _cholesky_tangent(low, da, _loop_solve)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def _loop_solve(low, b, trans, unit_diagonal=False):
    n = low.shape[-1]

    def diag(i):
        return 1.0 if unit_diagonal else low[i, i]

    if trans:  # back substitution with low' (upper): rows from the last
        def step(k, x):
            i = n - 1 - k
            below = where(jp.arange(n) > i, low[:, i], 0.0)
            return x.at[i].set((b[i] - below @ x) / diag(i))
    else:
        def step(i, x):
            left = where(jp.arange(n) < i, low[i], 0.0)
            return x.at[i].set((b[i] - left @ x) / diag(i))

    return jax.lax.fori_loop(0, n, step, jp.zeros_like(b))


@_loop_solve.defjvp
def _loop_solve_jvp(trans, unit_diagonal, primals, tangents):
    (low, b), (dlow, db) = primals, tangents
    x = _loop_solve(low, b, trans, unit_diagonal)
    rhs = db - _factor_tangent_product(dlow, x, trans, unit_diagonal)
    return x, _loop_solve(low, rhs, trans, unit_diagonal)


# ---- derivative rules shared by both


def _cholesky_tangent(low, da, solve):
    # dL = L phi(L^-1 dA L^-T), phi: the lower triangle with the diagonal halved
    tmp = solve(low, solve(low, da, False).T, False)
    return low @ (jp.tril(tmp) - 0.5 * jp.diag(jp.diagonal(tmp)))


def _factor_tangent_product(dlow, x, trans, unit_diagonal):
    # low x = b  =>  low dx = db - dlow x, with only the entries the solve reads moving
    dlow = jp.tril(dlow, -1 if unit_diagonal else 0)
    return (dlow.T if trans else dlow) @ x


def _cholesky_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    low = cholesky(a)
    if type(da) is ad.Zero:
        return low, da
    return low, _cholesky_tangent(low, da, solve_triangular)


def _solve_jvp(primals, tangents, *, trans, unit_diagonal):
    (low, b), (dlow, db) = primals, tangents
    x = solve_triangular(low, b, trans, unit_diagonal)
    rhs = None if type(db) is ad.Zero else db
    if type(dlow) is not ad.Zero:
        moved = _factor_tangent_product(dlow, x, trans, unit_diagonal)
        rhs = -moved if rhs is None else rhs - moved
    if rhs is None:
        return x, ad.Zero(db.aval)
    return x, solve_triangular(low, rhs, trans, unit_diagonal)


def _solve_transpose(ct, low, b, *, trans, unit_diagonal):
    # x = op(L)^-1 b is linear in b; its transpose is op(L)^-T
    assert not ad.is_undefined_primal(low)
    if type(ct) is ad.Zero:
        return None, ad.Zero(b.aval)
    return None, solve_triangular(low, ct, not trans, unit_diagonal)


# ---- batching: size 1 stays one LAPACK call, a shared factor one call, else the loops


def _cholesky_batch(args, dims):
    (a,), (dim,) = args, dims
    a = jp.moveaxis(a, dim, 0)
    if a.shape[0] == 1:
        return cholesky(a[0])[None], 0
    return jax.vmap(_loop_cholesky)(a), 0


def _solve_batch(args, dims, *, trans, unit_diagonal):
    (low, b), (dlow, db) = args, dims
    if dlow is None:  # unbatched (vmap's dim None): one factor: the batch joins b's columns
        b = jp.moveaxis(b, db, -1)
        x = solve_triangular(low, b.reshape(b.shape[0], -1), trans, unit_diagonal)
        return x.reshape(b.shape), b.ndim - 1
    low = jp.moveaxis(low, dlow, 0)
    if low.shape[0] == 1:
        b = b if db is None else jp.moveaxis(b, db, 0)[0]
        return solve_triangular(low[0], b, trans, unit_diagonal)[None], 0
    loop = functools.partial(_loop_solve, trans=trans, unit_diagonal=unit_diagonal)
    return jax.vmap(loop, in_axes=(0, db))(low, b), 0


def _shaped_like(x, **_):
    return jax.core.ShapedArray(x.shape, x.dtype)


_cholesky_p = jax.extend.core.Primitive("mjx_lite_cholesky")
_cholesky_p.def_impl(_lapack_cholesky)
_cholesky_p.def_abstract_eval(_shaped_like)
mlir.register_lowering(_cholesky_p, mlir.lower_fun(_lapack_cholesky, multiple_results=False))
ad.primitive_jvps[_cholesky_p] = _cholesky_jvp
batching.primitive_batchers[_cholesky_p] = _cholesky_batch

_solve_p = jax.extend.core.Primitive("mjx_lite_solve_triangular")
_solve_p.def_impl(_lapack_solve)
_solve_p.def_abstract_eval(lambda low, b, **_: _shaped_like(b))
mlir.register_lowering(_solve_p, mlir.lower_fun(_lapack_solve, multiple_results=False))
ad.primitive_jvps[_solve_p] = _solve_jvp
ad.primitive_transposes[_solve_p] = _solve_transpose
batching.primitive_batchers[_solve_p] = _solve_batch


def cho_solve(low: jax.Array, b: jax.Array) -> jax.Array:
    """x with (low low') x = b, from ``cholesky``'s factor; b (n,) or (n, k)."""
    return solve_triangular(low, solve_triangular(low, b, False), True)


def spd_solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """x with a x = b for symmetric positive definite a."""
    return cho_solve(cholesky(a), b)

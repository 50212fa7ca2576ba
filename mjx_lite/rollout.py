"""Rollouts: ``step`` scanned over a sequence of controls (seed 002, "Simulation pipeline").

One ``lax.scan`` over steps, so a rollout is one compiled program whatever its length, and
jax.grad / jax.vjp / jax.jacfwd run through it. ``checkpoint=True`` wraps each step in
``jax.checkpoint``: reverse mode then stores only the carried Data per step and recomputes a
step's internals during the backward pass, so gradient memory grows with steps x state size.
Differentiated with the implicit adjoint, an RK4 rollout with chosen ``fields`` runs as one
scan over its stages (``_rk4_rollout``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from mjx_lite import support
from mjx_lite.forward import RK4Stages, rk4_first_stage, step
from mjx_lite.math import where
from mjx_lite.types import Data, IntegratorType, Model

__all__ = ["rollout"]


def rollout(m: Model, d: Data, ctrls: jax.Array, *, checkpoint: bool = False,
            loop: str = "fixed", adjoint: str = "unroll", contact_smoothing: float = 0.0,
            fields: Sequence[str] | None = None) -> tuple[Data, Data | dict]:
    """Steps ``d`` once per row of ``ctrls`` (T, nu), setting ``ctrl`` before each step.

    Args:
      checkpoint: recompute each step in the backward pass instead of storing its internals.
      loop, adjoint: passed to ``step`` (reverse mode through ``loop="early_exit"`` needs
        ``adjoint="implicit"``).
      contact_smoothing: passed to ``step``: contacts push from this far apart in the
        derivative only (``mjx_lite.smoothing``).
      fields: Data field names to keep per step; None keeps every field. Given (even
        empty), an RK4 rollout differentiated with ``adjoint="implicit"`` scans its stages
        in one scan: its gradient compiles and runs faster (``_rk4_rollout``).

    Returns:
      (final Data, per-step Data with a leading T axis, or a dict of the chosen fields).
    """
    if fields is not None:
        fields = tuple(fields)
        unknown = [f for f in fields if not hasattr(d, f)]
        if unknown:
            raise ValueError(f"unknown Data fields {unknown}")

    if (m.opt.integrator == IntegratorType.RK4 and adjoint == "implicit" and fields is not None
            and not checkpoint and contact_smoothing == 0.0):
        traced, known = support.split_traced(m)
        return _rk4_rollout(traced, d, ctrls, loop, adjoint, (known, fields))
    return _scan_steps(m, _dense_tangents((d, ctrls))[0], ctrls, loop=loop, adjoint=adjoint,
                       contact_smoothing=contact_smoothing, fields=fields, checkpoint=checkpoint)


def _scan_steps(m: Model, d: Data, ctrls: jax.Array, *, loop: str, adjoint: str,
                contact_smoothing: float = 0.0, fields=None, checkpoint: bool = False):
    """``step`` scanned over the controls."""

    def one(d: Data, ctrl: jax.Array):
        d = step(m, d.replace(ctrl=ctrl), loop=loop, adjoint=adjoint,
                 contact_smoothing=contact_smoothing)
        out = d if fields is None else {f: getattr(d, f) for f in fields}
        return d, out

    if checkpoint:
        one = jax.checkpoint(one)
    return jax.lax.scan(one, d, ctrls)


# The Data fields an RK4 rollout's step boundary sets: the state, controls and inputs, and
# the fields a step does not always write (so that a divergence reset, which zeroes the whole
# Data, reaches them as in ``step``; test_rollout checks the list). The others are written
# by every stage.
_BOUNDARY = ("time", "qpos", "qvel", "act", "qacc_warmstart", "ctrl", "qfrc_applied",
             "xfrc_applied", "eq_active", "mocap_pos", "mocap_quat", "qacc", "act_dot",
             "userdata", "sensordata", "warning_count", "subtree_linvel", "subtree_angmom",
             "qfrc_inverse", "cacc", "cfrc_int", "cfrc_ext", "energy", "efc_id")


@functools.partial(jax.custom_jvp, nondiff_argnums=(3, 4, 5))
def _rk4_rollout(traced: list, d: Data, ctrls: jax.Array, loop: str, adjoint: str, static):
    """An RK4 rollout with the implicit adjoint: evaluated, ``step`` scanned over the controls
    (a scan of steps, each a scan of 4 stages); differentiated, one scan of the 4 T stages
    (``_rk4_stages``), the same operations in the same order. Reverse mode through the nested
    scans stacks each stage's saved values twice, once per step by the stage scan and again
    per rollout by the step scan; in one scan they are stacked once (gymnasium ant: 1,983 ->
    1,611 XLA fusions). Implicit gradient of a 100-step rollout, batch 1, ``benchmarks/
    grad.py`` in fresh processes: ant jit 31.1-39.1 -> 29.4-30.5 s, run 90.2-98.5 -> 90.0-94.1
    ms (6 and 5 runs); humanoid jit 46.2 -> 45.9 s, run 351.5 -> 333.3 ms (one run each).
    Not the evaluation, nor the unrolled adjoint: the XLA CPU runtime ran those slower in an
    earlier form of the one scan, dispatching more of their kernels to other threads (ant
    forward 32 -> 41 ms, unrolled gradient 140 -> 197 ms; not re-measured on the final form).
    ``traced``: the Model's traced leaves; ``static``: (its known leaves, the fields kept),
    from ``support.split_traced``: as arguments, its known leaves would be traced inside."""
    known, fields = static
    return _scan_steps(support.join_traced(traced, known), d, ctrls, loop=loop, adjoint=adjoint,
                       fields=fields)


def _rk4_rollout_jvp(loop, adjoint, static, primals, tangents):
    # The Model's traced leaves without a tangent (a Model passed to jit, differentiated
    # w.r.t. something else) stay primal values, closed over: the stages then carry no
    # tangent of them, and derivative rules that hold for the state alone apply
    # (smooth._tree_poses). They are constants of the stage scan, not carries, so they
    # need no dense zero (below).
    traced, d, ctrls = primals
    moving = [not isinstance(t, SymbolicZero) for t in tangents[0]]
    primals = ([p for p, live in zip(traced, moving) if live], d, ctrls)
    tangents = ([t for t, live in zip(tangents[0], moving) if live],) + tuple(tangents[1:])
    # the inputs without a tangent get a zero that depends on one (as _dense_tangents does),
    # not JAX's instantiated constant zero, which partial evaluation treats as known and then
    # unknown, one more round over the stage scan (ant, 5 steps: trace 7.2 -> 6.1 s)
    tangents = _dense_tangents_jvp((primals,), (tangents,))[1]
    tangents = jax.tree.map(
        lambda t: np.zeros(t.shape, t.dtype) if isinstance(t, SymbolicZero) else t, tangents,
        is_leaf=lambda t: isinstance(t, SymbolicZero))
    known, fields = static

    def stages(live_leaves, d, c):
        it = iter(live_leaves)
        leaves = [next(it) if live else p for p, live in zip(traced, moving)]
        return _rk4_stages(support.join_traced(leaves, known), d, c, loop, adjoint, fields)

    return jax.jvp(stages, primals, tangents)


def _rk4_stages(m: Model, d: Data, ctrls: jax.Array, loop: str, adjoint: str, fields):
    """``_scan_steps`` of RK4 as one scan over the 4 T stages. Between steps (stage 0 of
    every step but the first) a ``lax.cond`` on the unbatched stage index finishes the last
    step and starts the next: its control, the divergence check, the carry of a step; it
    returns the ``_BOUNDARY`` fields only, so the rest of the Data is not copied through it,
    and the chosen fields of the finished step (zeros within a step): the per-step output is
    every 4th row."""
    rk4 = RK4Stages(m, d.qpos.dtype, loop, adjoint, rk4_first_stage(loop, adjoint))

    def start(d, u):
        return rk4.begin(support.check_pos_vel(m, d.replace(ctrl=u)))

    def boundary_fields(carry):
        ks, accs, actds, d, x0 = carry
        return ks, accs, actds, {f: getattr(d, f) for f in _BOUNDARY}, x0

    def body(carry, k):
        # the cond first and all of the boundary's work inside it: with the step's finish and
        # control read beside the cond, the XLA CPU runtime ran ant's implicit gradient (batch
        # 1) in 147-154 ms in 3 of 9 fresh processes, 82-93 ms in the others; so, 90-94 ms in
        # 5 of 5
        i = k % 4

        def between_steps(carry):
            done = rk4.finish(carry)
            u = jax.lax.dynamic_index_in_dim(ctrls, k // 4, keepdims=False)
            return boundary_fields(start(done, u)), {f: getattr(done, f) for f in fields}

        def within_a_step(carry):
            return boundary_fields(carry), jax.tree.map(
                jp.zeros_like, {f: getattr(carry[3], f) for f in fields})

        (ks, accs, actds, inputs, x0), out = jax.lax.cond(
            (i == 0) & (k > 0), between_steps, within_a_step, carry)
        carry = rk4.stage((ks, accs, actds, carry[3].replace(**inputs), x0), i)
        return carry, out

    carry, ys = jax.lax.scan(body, start(d, ctrls[0]), jp.arange(4 * ctrls.shape[0]))
    final = rk4.finish(carry)
    ys = jax.tree.map(lambda y, last: jp.concatenate([y[4::4], last[None]]), ys,
                      {f: getattr(final, f) for f in fields})
    return final, ys


@jax.custom_jvp
def _dense_tangents(tree):
    """``tree`` unchanged; differentiated (forward or reverse mode), every floating leaf gets
    a tangent, zero (but not JAX's symbolic zero) where it had none. On a scan's initial
    carry: JAX finds which carried values have a tangent by linearizing the scan's body again
    until that set stops growing, one full linearization a round, while a carry whose leaves
    all have one settles in the first. gymnasium ant, 100-step implicit gradient w.r.t. the
    controls, batch 1: the step was linearized twice and RK4's stage scan six times (trace
    17.0 s); with the carry dense, once and twice (trace 11.0 s), compile and run times and
    the gradient unchanged."""
    return tree


def _dense_tangents_jvp(primals, tangents):
    (tree,), (tans,) = primals, tangents
    is_zero = lambda t: isinstance(t, SymbolicZero)  # noqa: E731
    leaves, treedef = jax.tree.flatten(tans, is_leaf=is_zero)
    live = [t for t in leaves if not is_zero(t) and jp.issubdtype(t.dtype, jp.inexact)]
    if not live:
        return tree, tans
    # a zero that depends on the tangents, so that JAX cannot tell it is one; a select, not a
    # product with 0, so that a NaN cotangent of a leaf without a tangent stays out of the
    # gradient (reverse mode sends the select's other branch, an exact zero, back)
    seed = jp.ravel(live[0])[0]
    zero = where(True, jp.zeros((), seed.dtype), seed)
    primal_leaves = jax.tree.leaves(tree)
    dense = [jp.broadcast_to(zero, p.shape).astype(p.dtype)
             if is_zero(t) and jp.issubdtype(p.dtype, jp.inexact) else t
             for p, t in zip(primal_leaves, leaves)]
    return tree, jax.tree.unflatten(treedef, dense)


_dense_tangents.defjvp(_dense_tangents_jvp, symbolic_zeros=True)
_rk4_rollout.defjvp(_rk4_rollout_jvp, symbolic_zeros=True)

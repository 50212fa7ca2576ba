"""Rollouts: ``step`` scanned over a sequence of controls (seed 002, "Simulation pipeline").

One ``lax.scan`` over steps, so a rollout is one compiled program whatever its length, and
jax.grad / jax.vjp / jax.jacfwd run through it. ``checkpoint=True`` wraps each step in
``jax.checkpoint``: reverse mode then stores only the carried Data per step and recomputes a
step's internals during the backward pass, so gradient memory grows with steps x state size.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax

from mjx_lite.forward import step
from mjx_lite.types import Data, Model

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
      fields: Data field names to keep per step; None keeps every field.

    Returns:
      (final Data, per-step Data with a leading T axis, or a dict of the chosen fields).
    """
    if fields is not None:
        fields = tuple(fields)
        unknown = [f for f in fields if not hasattr(d, f)]
        if unknown:
            raise ValueError(f"unknown Data fields {unknown}")

    def one(d: Data, ctrl: jax.Array):
        d = step(m, d.replace(ctrl=ctrl), loop=loop, adjoint=adjoint,
                 contact_smoothing=contact_smoothing)
        out = d if fields is None else {f: getattr(d, f) for f in fields}
        return d, out

    if checkpoint:
        one = jax.checkpoint(one)
    return jax.lax.scan(one, d, ctrls)

"""Smoothed contact gradients: contacts that push from a small distance, in the derivative
only (``step(..., contact_smoothing=width)``, ``forward`` and ``rollout`` likewise).

A contact exists only once its geoms are within the pair's margin, so the plain derivative of
a step says nothing about a contact that is about to happen: a foot 5 mm above the floor has
the derivative of free flight. With ``contact_smoothing=width`` the value of every step is
unchanged (the same computation runs), and its derivative (forward or reverse mode) is that of
a surrogate model whose pair margins are ``width`` larger: each geom's margin grows by
``width / 2`` (a dynamic pair's margin is the sum of its geoms'), each explicit pair's and the
override margin by ``width``. The surrogate's contacts act from up to ``width`` apart
(MuJoCo's soft constraint with its reference shifted by the margin, XML reference
geom/margin), so a loss sees the contact forces that would act. The derivative is biased: it
is not the derivative of the simulation, and it differs where contacts are already active too
(their reference shifts by ``width``). See docs/gradients.md for when it helps.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from mjx_lite.types import Data, Model


def surrogate_model(m: Model, width: float) -> Model:
    """``m`` with every pair margin ``width`` larger (its static height-field windows and
    margin flags grown alike)."""
    opt = m.opt.replace(o_margin=m.opt.o_margin + width)
    return m.replace(geom_margin=m.geom_margin + 0.5 * width,
                     pair_margin=m.pair_margin + width, opt=opt,
                     geom_extra=np.asarray(m.geom_extra) + width,
                     geom_reach=np.asarray(m.geom_reach) + width)


def smoothed(fn: Callable[[Model, Data], Data], m: Model, d: Data, width: float) -> Data:
    """``fn(m, d)``, with the derivative of ``fn(surrogate_model(m, width), d)``."""
    if not width >= 0.0:
        raise ValueError(f"contact_smoothing must be a distance >= 0, got {width!r}")
    if width == 0.0:
        return fn(m, d)

    @jax.custom_jvp
    def run(m, d):
        return fn(m, d)

    @run.defjvp
    def run_jvp(primals, tangents):
        _, tangent = jax.jvp(lambda m, d: fn(surrogate_model(m, width), d), primals, tangents)
        return run(*primals), tangent

    return run(m, d)

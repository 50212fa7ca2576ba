"""Parity helpers shared by the tests that compare mjx_lite with MuJoCo C."""

from __future__ import annotations

import numpy as np


def rel_error(ours, theirs) -> float:
    """max|ours - theirs| / max|theirs| (the absolute error when theirs is all zero)."""
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64)
    if ours.shape != theirs.shape:
        raise AssertionError(f"shape mismatch: ours {ours.shape} vs mujoco {theirs.shape}")
    if ours.size == 0:
        return 0.0
    scale = np.max(np.abs(theirs))
    err = np.max(np.abs(ours - theirs))
    return float(err / scale) if scale > 0 else float(err)


def assert_close(name: str, ours, theirs, rtol: float) -> float:
    """Asserts max|ours - theirs| <= rtol * max|theirs| (<= rtol if theirs is all zero).

    On failure the message names the worst index and both values there. Returns the relative
    error so callers can record it.
    """
    ours_a = np.asarray(ours, dtype=np.float64)
    theirs_a = np.asarray(theirs, dtype=np.float64)
    err = rel_error(ours_a, theirs_a)
    if not np.isfinite(err) or err > rtol:
        diff = np.abs(ours_a - theirs_a)
        diff = np.where(np.isnan(diff), np.inf, diff)
        idx = np.unravel_index(int(np.argmax(diff)), diff.shape) if diff.size else ()
        raise AssertionError(
            f"{name}: relative error {err:.3e} > {rtol:.1e}; worst at index {idx}: "
            f"ours {ours_a[idx]!r} vs mujoco {theirs_a[idx]!r} "
            f"(max|mujoco| = {np.max(np.abs(theirs_a)) if theirs_a.size else 0.0:.3e})"
        )
    return err

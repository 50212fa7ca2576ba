"""The Contact pytree (mjContact) and the contact-frame helper shared by all colliders.

Every field is a traced array with a leading (ncon,) axis, where ncon is the static contact
budget of the model (see ``driver.contact_budget``). Slot ``i`` is a real contact iff
``valid[i]``; an invalid slot holds ``dist = 1e10``, ``includemargin = 0``,
``geom1 = geom2 = -1`` and ``efc_address = -1``, so it contributes no force.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import math
from mjx_lite.dataclasses import PyTreeNode
from mjx_lite.math import where

# the dist stored in an inactive slot: finite so that arithmetic on it never makes NaN
EMPTY_DIST = 1e10


class Contact(PyTreeNode):
    """Contacts in MuJoCo's mjContact layout, one row per static slot.

    Fields (shapes in size names):
      dist: (ncon,) signed distance; negative is penetration
      pos: (ncon, 3) contact point, midway between the two surfaces
      frame: (ncon, 3, 3) rows: normal (from geom1 to geom2), tangent 1, tangent 2
      includemargin: (ncon,) the margin: the contact is active iff dist < includemargin
      friction: (ncon, 5) tangent1, tangent2, spin, roll1, roll2
      solref: (ncon, 2), solreffriction: (ncon, 2), solimp: (ncon, 5)
      mu: (ncon,) friction of the regularized cone; 0 here (set by the constraint stage)
      dim: (ncon,) int condim
      geom1, geom2: (ncon,) int geom ids (-1 in an invalid slot); geom: (ncon, 2) both
      exclude: (ncon,) int 1 iff the contact is in the gap (dist >= includemargin)
      efc_address: (ncon,) int first efc row; -1 here (set by the constraint stage)
      valid: (ncon,) bool: the slot holds a real contact
    """

    dist: jax.Array
    pos: jax.Array
    frame: jax.Array
    includemargin: jax.Array
    friction: jax.Array
    solref: jax.Array
    solreffriction: jax.Array
    solimp: jax.Array
    mu: jax.Array
    dim: jax.Array
    geom1: jax.Array
    geom2: jax.Array
    geom: jax.Array
    exclude: jax.Array
    efc_address: jax.Array
    valid: jax.Array

    @classmethod
    def zeros(cls, ncon: int, dtype=float, xp=jp) -> Contact:
        """An all-invalid Contact with ``ncon`` slots, of ``xp`` arrays (jax.numpy, or numpy
        for a caller that transfers a whole tree at once, as ``make_data`` does)."""
        f = lambda *s: xp.zeros((ncon, *s), dtype=dtype)  # noqa: E731
        i = lambda *s: xp.full((ncon, *s), -1, dtype=xp.int32)  # noqa: E731
        return cls(
            dist=xp.full((ncon,), EMPTY_DIST, dtype=dtype), pos=f(3),
            frame=xp.broadcast_to(xp.eye(3, dtype=dtype), (ncon, 3, 3)), includemargin=f(),
            friction=f(5), solref=f(2), solreffriction=f(2), solimp=f(5), mu=f(),
            dim=xp.zeros((ncon,), dtype=xp.int32), geom1=i(), geom2=i(), geom=i(2),
            exclude=xp.zeros((ncon,), dtype=xp.int32), efc_address=i(),
            valid=xp.zeros((ncon,), dtype=bool),
        )


def make_frame(normal: jax.Array, tangent: jax.Array) -> jax.Array:
    """Completes a contact frame from its normal and an optional first tangent (mju_makeFrame).

    A tangent shorter than 0.5 counts as unset and is replaced by world y (or world z when the
    normal is close to y), then made orthogonal to the normal (a tangent parallel to the normal
    becomes world x, as mju_normalize3 does); the third row is their cross.

    Args:
      normal: (..., 3) unit normal.
      tangent: (..., 3) proposed first tangent, or zeros.
    Returns:
      (..., 3, 3) frame with rows normal, tangent1, tangent2.
    """
    normal = normalize3(normal)
    unset = math.safe_norm(tangent, keepdims=True) < 0.5
    near_y = jp.abs(normal[..., 1:2]) < 0.5
    ey = jp.zeros_like(normal).at[..., 1].set(1.0)
    ez = jp.zeros_like(normal).at[..., 2].set(1.0)
    t = where(unset, where(near_y, ey, ez), tangent)
    t = normalize3(t - normal * jp.sum(normal * t, -1, keepdims=True))
    return jp.stack([normal, t, math.cross(normal, t)], axis=-2)


def normalize3(v: jax.Array) -> jax.Array:
    """mju_normalize3: v / |v|, and (1, 0, 0) for a vector shorter than MINVAL."""
    n = math.safe_norm(v, keepdims=True)
    small = n < math.MINVAL
    ex = jp.zeros_like(v).at[..., 0].set(1.0)
    return where(small, ex, v / where(small, 1.0, n))

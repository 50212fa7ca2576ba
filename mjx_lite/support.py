"""Support functions (MuJoCo's engine_support / engine_util_* equivalents): dense inertia,
M products and solves, point Jacobians, name <-> id lookup and contact forces."""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.math import lane_select, where
from mjx_lite.smooth import jac, mul_m, solve_m
from mjx_lite.types import Data, DisableBit, Model, ObjType

__all__ = [
    "check_acc", "check_pos", "check_pos_vel", "check_vel", "contact_force", "forward_checked",
    "full_m", "id2name", "is_bad", "jac", "join_traced", "mul_m", "name2id", "reset_where",
    "solve_m", "split_traced",
]

# ObjType -> the kind strings of Model.names (interop.NAME_KINDS); XBODY shares body names.
_OBJ_KIND = {
    ObjType.BODY: "body", ObjType.XBODY: "body", ObjType.JOINT: "jnt", ObjType.GEOM: "geom",
    ObjType.SITE: "site", ObjType.CAMERA: "cam", ObjType.LIGHT: "light", ObjType.MESH: "mesh",
    ObjType.HFIELD: "hfield", ObjType.MATERIAL: "mat", ObjType.PAIR: "pair",
    ObjType.EXCLUDE: "exclude", ObjType.EQUALITY: "eq", ObjType.TENDON: "tendon",
    ObjType.ACTUATOR: "actuator", ObjType.SENSOR: "sensor", ObjType.NUMERIC: "numeric",
    ObjType.TEXT: "text", ObjType.KEY: "key",
}
# Spelled-out aliases accepted besides the mjModel prefixes.
_ALIAS = {"joint": "jnt", "camera": "cam", "material": "mat", "equality": "eq", "xbody": "body",
          "keyframe": "key"}


def full_m(m: Model, d: Data) -> jax.Array:
    """Dense (nv, nv) joint-space inertia with armature (mj_fullM)."""
    return d.qM


def _kind(kind) -> str:
    if isinstance(kind, (int, ObjType)) and not isinstance(kind, bool):
        try:
            return _OBJ_KIND[ObjType(int(kind))]
        except (KeyError, ValueError):
            raise ValueError(f"object type {kind!r} has no names") from None
    kind = str(kind).lower()
    return _ALIAS.get(kind, kind)


def _names(m: Model, kind) -> tuple[str, ...]:
    k = _kind(kind)
    for name, values in m.names:
        if name == k:
            return values
    raise ValueError(f"unknown object kind {kind!r}")


def name2id(m: Model, kind, name: str) -> int:
    """Id of the named object of ``kind`` (a Model.names kind string or an ObjType), -1 if
    there is none (mj_name2id)."""
    names = _names(m, kind)
    if not name:
        return -1
    try:
        return names.index(name)
    except ValueError:
        return -1


def id2name(m: Model, kind, i: int) -> str | None:
    """Name of object ``i`` of ``kind``; None when it is unnamed or out of range (mj_id2name)."""
    names = _names(m, kind)
    if not 0 <= int(i) < len(names):
        return None
    return names[int(i)] or None


def contact_force(m: Model, d: Data, i) -> jax.Array:
    """(6,) force:torque of contact slot ``i`` in its contact frame (mj_contactForce).

    Pyramidal rows are decoded into normal and friction components (Computation chapter,
    "Friction cones": f_n is the sum of the edge forces, f_k = mu_k (f_k+ - f_k-)); elliptic
    and frictionless rows are copied. Zero when the contact has no efc rows. ``i`` may be
    traced, so ``jax.vmap(lambda i: contact_force(m, d, i))(jp.arange(nslot))`` works.
    """
    from mjx_lite.constraint import MINMU, contact_width, row_plan

    con = d.contact
    dtype = d.efc_force.dtype
    nslot = int(con.dist.shape[0])
    p = row_plan(m, nslot)
    if not p.nc:
        return jp.zeros(6, dtype)
    w = contact_width(m)
    start = p.ne + p.nf + p.nl + w * jp.asarray(i, jp.int32)
    f = jax.lax.dynamic_slice(d.efc_force, (start,), (w,))
    adr = con.efc_address[i]
    dim = con.dim[i]
    j = np.arange(6)
    if p.elliptic:
        out = jp.zeros(6, dtype).at[:w].set(f)
        out = where(j < dim, out, 0.0)
    else:
        mu = jp.maximum(MINMU, con.friction[i])
        k = np.arange(w // 2)
        edge = f[: 2 * k.size].reshape(-1, 2)
        fric = where(k + 1 < dim, (edge[:, 0] - edge[:, 1]) * mu[k], 0.0)
        normal = where(dim > 1, jp.sum(where(np.arange(w) < 2 * (dim - 1), f, 0.0)),
                          f[0])
        out = jp.zeros(6, dtype).at[0].set(normal).at[1:1 + k.size].set(fric)
    return where(adr >= 0, out, 0.0)


# ------------------------------------------------------------------------------------------
# divergence detection (mj_checkPos / mj_checkVel / mj_checkAcc)

# mjtWarning indices of the divergence warnings, and mjMAXVAL
WARN_BADQPOS, WARN_BADQVEL, WARN_BADQACC = 3, 4, 5  # MuJoCo 4.0 numbering
MAXVAL = 1e10


def is_bad(x: jax.Array) -> jax.Array:
    """() True when any entry is NaN, infinite or larger than 1e10 in magnitude (mju_isBad)."""
    return jp.any(~(jp.abs(x) <= MAXVAL))


def reset_data(m: Model, like: Data, warning: int) -> Data:
    """mj_resetData's state (qpos0, zero velocity, controls and warnings) with a count of 1 for
    ``warning``, shaped as ``like``. It depends on ``m`` only, so under a vmap over Data it is
    computed once, not per member."""
    from mjx_lite.io import make_data  # io imports the constraint stage

    fresh = make_data(m)
    fresh = fresh.replace(
        warning_count=jp.zeros(like.warning_count.shape, jp.int32).at[warning].set(1))

    def shaped(new, cur):
        if jp.shape(new) != jp.shape(cur):
            # a Data built with another contact / row budget: those fields are outputs that
            # the next forward pass recomputes, so zeros stand in for the reset value
            return jp.zeros(jp.shape(cur), cur.dtype)
        return jp.asarray(new, cur.dtype)

    return jax.tree.map(shaped, fresh, like)


def reset_where(m: Model, d: Data, bad: jax.Array, warning: int) -> Data:
    """Counts ``warning`` where ``bad``; unless the autoreset bit is disabled, also resets such
    Data (``reset_data``). ``bad`` is a scalar per Data, so under vmap only the bad members
    change and the others stay bit-identical."""
    bad = jp.asarray(bad, bool)
    if m.opt.disableflags & DisableBit.AUTORESET:
        return d.replace(warning_count=d.warning_count.at[warning].add(bad.astype(jp.int32)))
    return _select_data(bad, reset_data(m, d, warning), d)


def _select_data(bad, fresh: Data, d: Data) -> Data:
    """``where(bad, fresh, d)`` field by field, ``bad`` a scalar (per vmapped lane), through
    ``math.lane_select``: differentiated, reverse mode stores the flag, not per-field masks."""
    return jax.tree.map(lambda new, cur: lane_select(bad, new, cur), fresh, d)


def check_pos(m: Model, d: Data) -> Data:
    """mj_checkPos: a bad qpos counts a BADQPOS warning and resets the Data (autoreset)."""
    return reset_where(m, d, is_bad(d.qpos), WARN_BADQPOS)


def check_vel(m: Model, d: Data) -> Data:
    """mj_checkVel: a bad qvel counts a BADQVEL warning and resets the Data (autoreset)."""
    return reset_where(m, d, is_bad(d.qvel), WARN_BADQVEL)


def check_pos_vel(m: Model, d: Data) -> Data:
    """``check_vel(m, check_pos(m, d))`` with one select over the Data instead of two: a
    reset for a bad qpos leaves qvel zero, so at most one of the two resets happens, and the
    two reset states differ only in which warning counts."""
    if m.opt.disableflags & DisableBit.AUTORESET:
        return check_vel(m, check_pos(m, d))  # counts only, no select
    bad_pos = is_bad(d.qpos)
    which = where(bad_pos, WARN_BADQPOS, WARN_BADQVEL)
    return reset_where(m, d, bad_pos | is_bad(d.qvel), which)


def check_acc(m: Model, d: Data, reforward, when=True) -> Data:
    """mj_checkAcc on a forward-computed Data: a bad qacc counts a BADQACC warning and, with
    autoreset, replaces the Data by ``reforward(m, reset)``, forward on the reset state (MuJoCo
    runs mj_forward again there, so the step that follows integrates from it).

    The second pass runs in a ``lax.while_loop`` that runs at most once, not a ``lax.cond``:
    under a vmap over Data a cond with a per-member predicate becomes a select that runs the
    branch on every step for every member, with the Model broadcast to the batch; the loop
    runs only when some member is bad, on the reset state, which depends on ``m`` only, so
    once for the whole batch. Its inputs are cut from the gradient (a reset is not
    differentiated), which keeps the loop out of reverse mode. ``when`` (a scalar) gates the
    check: RK4's stage scan checks only its first stage."""
    bad = is_bad(d.qacc) & when
    if m.opt.disableflags & DisableBit.AUTORESET:
        return d.replace(warning_count=d.warning_count.at[WARN_BADQACC].add(bad.astype(jp.int32)))
    # the Model's known leaves stay values (split_traced): stop_gradient would trace them
    ms = jax.tree.map(lambda x: jax.lax.stop_gradient(x) if isinstance(x, jax.core.Tracer)
                      else x, m)
    ds = jax.lax.stop_gradient(d)

    def body(carry):
        return jp.zeros((), bool), reforward(ms, reset_data(ms, ds, WARN_BADQACC))

    _, fresh = jax.lax.while_loop(lambda c: c[0], body, (bad, ds))
    return _select_data(bad, fresh, d)


def forward_checked(m: Model, d: Data, fwd) -> Data:
    """``check_acc(m, fwd(m, d), fwd)`` with both forward passes in one ``lax.while_loop``
    (the second iteration, on the reset state, runs only for a bad qacc), so that the forward
    pass is compiled once, not twice. A while_loop has no reverse-mode derivative: use it where
    ``fwd`` has none either (an early-exit solver loop)."""
    if m.opt.disableflags & DisableBit.AUTORESET:
        return check_acc(m, fwd(m, d), fwd)

    def body(carry):
        _, n = carry
        # the input (d, then the reset state) is rebuilt from constants, not carried
        x = jax.tree.map(lambda r, a: where(n == 1, r, a),
                         reset_data(m, d, WARN_BADQACC), d)
        return fwd(m, x), n + 1

    def cond(carry):
        out, n = carry
        return (n == 0) | ((n == 1) & is_bad(out.qacc))

    return jax.lax.while_loop(cond, body, (d, jp.zeros((), jp.int32)))[0]


class KnownLeaves:
    """The leaves of a pytree that are values, not tracers, and the tree to put the traced
    ones back in (``split_traced``); hashed by identity, so a static argument."""

    def __init__(self, treedef, leaves, traced):
        self.treedef, self.leaves, self.traced = treedef, leaves, traced


def split_traced(tree) -> tuple[list, KnownLeaves]:
    """(the traced leaves of ``tree``, its other leaves).

    A Model passed as an argument into ``jax.checkpoint``, a ``custom_jvp`` or a loop is
    traced there whole, and the shortcuts taken on known values are lost: no fluid forces
    where density and viscosity are known zeros (gymnasium humanoid: ~11 fluid kernels a
    stage forward, ~38 in the reverse pass). Only its traced leaves (a Model that is itself
    an argument, or differentiated) need to go in; the others are closed over as values.
    """
    leaves, treedef = jax.tree.flatten(tree)
    traced = tuple(isinstance(x, jax.core.Tracer) for x in leaves)
    return ([x for x, t in zip(leaves, traced) if t],
            KnownLeaves(treedef, [None if t else x for x, t in zip(leaves, traced)], traced))


def join_traced(traced: list, known: KnownLeaves):
    """The tree ``split_traced`` split, from (new) traced leaves and its known ones."""
    it = iter(traced)
    return jax.tree.unflatten(
        known.treedef, [next(it) if t else x for x, t in zip(known.leaves, known.traced)])

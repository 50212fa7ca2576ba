"""Support functions (MuJoCo's engine_support / engine_util_* equivalents): dense inertia,
M products and solves, point Jacobians, and name <-> id lookup."""

from __future__ import annotations

import jax

from mjx_lite.smooth import jac, mul_m, solve_m
from mjx_lite.types import Data, Model, ObjType

__all__ = ["full_m", "mul_m", "solve_m", "jac", "name2id", "id2name"]

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

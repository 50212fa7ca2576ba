"""Equality constraints: connect, weld (body and site forms), joint and tendon couplings.

XML reference (MuJoCo 4.0 wheel, ``doc/XMLreference.rst``), section ``equality``. eq_data
holds, per type: connect (body form) the anchor in body1's frame and in body2's frame at
qpos0; weld the anchor, the relative pose of body2 in body1's frame (given, or at qpos0 with
eq_data[11] = 1 marking it) and torquescale at eq_data[10]; joint/tendon the polynomial
coefficients. All types share one default numeric vector, "0 1 0 0 0 ..." (``weld/relpose``).
"""

from __future__ import annotations

import numpy as np

from mjx_lite.compiler.context import Context
from mjx_lite.compiler.frames import quat_conj, quat_mul, quat_rotate
from mjx_lite.types import EqType, ObjType

NEQDATA = 12
_SOLREF = (0.02, 1.0)
_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
_TYPES = {"connect": EqType.CONNECT, "weld": EqType.WELD, "joint": EqType.JOINT,
          "tendon": EqType.TENDON}


def _default_data() -> np.ndarray:
    data = np.zeros(NEQDATA)
    data[1] = 1.0  # the shared default "0 1 0 0 0" (polycoef: identity coupling)
    data[10] = 1.0  # torquescale
    return data


def _pose(ctx: Context, body: int) -> tuple[np.ndarray, np.ndarray]:
    f = ctx.fields
    return np.asarray(f["body_xpos0"][body], float), np.asarray(f["body_xquat0"][body], float)


def _body_pair(ctx: Context, el) -> tuple[int, int]:
    b1 = ctx.lookup("body", el.get("body1"), el, "body1")
    b2 = ctx.lookup("body", el.get("body2"), el, "body2") if el.has("body2") else 0
    return b1, b2


def _sites(ctx: Context, el) -> tuple[int, int] | None:
    """Site form ids, or None for the body form; mixed or partial forms are errors."""
    has1, has2 = el.has("site1"), el.has("site2")
    if not (has1 or has2):
        if not el.has("body1"):
            raise el.error("either body1 or site1 and site2 must be specified")
        return None
    if not (has1 and has2):
        raise el.error("site1 and site2 must both be specified")
    if el.has("body1") or el.has("body2"):
        raise el.error("body and site semantics cannot be mixed")
    return (ctx.lookup("site", el.get("site1"), el, "site1"),
            ctx.lookup("site", el.get("site2"), el, "site2"))


def _tendon_id(ctx: Context, el, attr: str) -> int:
    """Tendon id by document order: the equality pass may run before the tendon pass."""
    if "tendon" in ctx.ids:
        return ctx.lookup("tendon", el.get(attr), el, attr)
    names = [t.attrs.get("name") for t in ctx.spec.section("tendon")]
    name = el.get(attr)
    if name not in names:
        raise el.error(f"attribute '{attr}' refers to unknown tendon '{name}'")
    return names.index(name)


def build_equality(ctx: Context) -> dict:
    """neq and the eq_* fields in document order (poses at qpos0 from the tree pass)."""
    elements = ctx.spec.section("equality")
    n = len(elements)
    out = {
        "eq_type": np.zeros(n, np.int32), "eq_obj1id": np.full(n, -1, np.int32),
        "eq_obj2id": np.full(n, -1, np.int32), "eq_objtype": np.zeros(n, np.int32),
        "eq_active0": np.zeros(n, bool), "eq_solref": np.zeros((n, 2)),
        "eq_solimp": np.zeros((n, 5)), "eq_data": np.zeros((n, NEQDATA)),
    }
    for i, el in enumerate(elements):
        ctx.register("eq", el)
        if el.tag not in _TYPES:
            raise el.error(f"unsupported: equality/{el.tag} is not implemented by mjx_lite")
        out["eq_type"][i] = _TYPES[el.tag]
        out["eq_active0"][i] = el.get("active", "true") == "true"
        out["eq_solref"][i] = el.vec("solref", _SOLREF)
        out["eq_solimp"][i] = el.vec("solimp", _SOLIMP)
        data = _default_data()
        if el.tag in ("connect", "weld"):
            sites = _sites(ctx, el)
            if sites is not None:
                out["eq_objtype"][i] = ObjType.SITE
                out["eq_obj1id"][i], out["eq_obj2id"][i] = sites
                if el.tag == "connect":
                    data[:] = 0.0  # site connects read only the sites (connect/site1)
                else:
                    data[3:10] = 0.0
                    data[10] = el.get("torquescale", 1.0)
            else:
                out["eq_objtype"][i] = ObjType.BODY
                b1, b2 = _body_pair(ctx, el)
                out["eq_obj1id"][i], out["eq_obj2id"][i] = b1, b2
                x1, q1 = _pose(ctx, b1)
                x2, q2 = _pose(ctx, b2)
                if el.tag == "connect":
                    if not el.has("anchor"):
                        raise el.error("connect with body1 requires anchor")
                    anchor = el.vec("anchor", (0.0, 0.0, 0.0))
                    data[0:3] = anchor
                    world = x1 + quat_rotate(q1, anchor)
                    data[3:6] = quat_rotate(quat_conj(q2), world - x2)
                else:
                    data[0:3] = el.vec("anchor", (0.0, 0.0, 0.0))
                    relpose = el.vec("relpose", (0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0))
                    if np.all(relpose[3:] == 0):
                        # Relative pose at qpos0: the anchor (in body2's frame) and body2's
                        # orientation, both in body1's frame (weld/relpose, weld/anchor).
                        point = x2 + quat_rotate(q2, data[0:3])
                        data[3:6] = quat_rotate(quat_conj(q1), point - x1)
                        q = quat_mul(quat_conj(q1), q2)
                        data[6:10] = q / np.linalg.norm(q)
                        data[11] = 1.0
                    else:
                        norm = np.linalg.norm(relpose[3:])
                        data[3:6] = relpose[:3]
                        data[6:10] = relpose[3:] / norm
                    data[10] = el.get("torquescale", 1.0)
        elif el.tag == "joint":
            out["eq_obj1id"][i] = ctx.lookup("jnt", el.get("joint1"), el, "joint1")
            if el.has("joint2"):
                out["eq_obj2id"][i] = ctx.lookup("jnt", el.get("joint2"), el, "joint2")
            data[0:5] = el.vec("polycoef", (0.0, 1.0, 0.0, 0.0, 0.0))
        else:
            out["eq_obj1id"][i] = _tendon_id(ctx, el, "tendon1")
            if el.has("tendon2"):
                out["eq_obj2id"][i] = _tendon_id(ctx, el, "tendon2")
            data[0:5] = el.vec("polycoef", (0.0, 1.0, 0.0, 0.0, 0.0))
        out["eq_data"][i] = data
    out["neq"] = n
    ctx.fields.update(out)
    return out

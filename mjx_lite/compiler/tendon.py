"""Tendons: fixed (joint + coef) and spatial (sites, wrapping geoms, pulleys) -> tendon_*, wrap_*.

XML reference (MuJoCo 4.0 wheel, ``doc/XMLreference.rst``), sections ``tendon/spatial``,
``spatial/site|geom|pulley`` and ``tendon/fixed``. Lengths at qpos0 and qpos_spring are exact
here for fixed tendons and for straight site-to-site spatial tendons; a spatial tendon that
wraps a geom needs the wrapping kinematics, so its lengths are left to ``set_const``.
"""

from __future__ import annotations

import numpy as np

from mjx_lite.compiler.actuators import user_array
from mjx_lite.compiler.context import Context
from mjx_lite.compiler.frames import quat_rotate
from mjx_lite.types import GeomType, JointType, WrapType

_SOLREF = (0.02, 1.0)
_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
_RGBA = (0.5, 0.5, 0.5, 1.0)
_WIDTH = 0.003


def _treeids(ctx: Context, bodies: list[int]) -> tuple[int, list[int]]:
    """Kinematic trees a tendon touches: (count, first two ids padded with -1)."""
    tree = ctx.fields["body_treeid"]
    trees = sorted({int(tree[b]) for b in bodies if tree[b] >= 0})
    return len(trees), (trees + [-1, -1])[:2]


def build_tendons(ctx: Context) -> dict:
    """ntendon, nwrap and the tendon_* / wrap_* fields in document order.

    ``_pending`` lists fields that need kinematics or dynamics (``set_const``):
    tendon_invweight0 always; tendon_length0 / tendon_lengthspring when a spatial tendon
    wraps a geom, or (lengthspring) when qpos_spring differs from qpos0.
    """
    f = ctx.fields
    elements = ctx.spec.section("tendon")
    n = len(elements)
    out = {
        "tendon_adr": np.zeros(n, np.int32), "tendon_num": np.zeros(n, np.int32),
        "tendon_type": np.zeros(n, np.int32), "tendon_group": np.zeros(n, np.int32),
        "tendon_matid": np.full(n, -1, np.int32), "tendon_treenum": np.zeros(n, np.int32),
        "tendon_treeid": np.full((n, 2), -1, np.int32),
        "tendon_limited": np.zeros(n, bool), "tendon_actfrclimited": np.zeros(n, bool),
        "tendon_width": np.zeros(n), "tendon_solref_lim": np.zeros((n, 2)),
        "tendon_solimp_lim": np.zeros((n, 5)), "tendon_solref_fri": np.zeros((n, 2)),
        "tendon_solimp_fri": np.zeros((n, 5)), "tendon_range": np.zeros((n, 2)),
        "tendon_actfrcrange": np.zeros((n, 2)), "tendon_margin": np.zeros(n),
        "tendon_stiffness": np.zeros(n), "tendon_stiffnesspoly": np.zeros((n, 2)),
        "tendon_springyield": np.zeros(n), "tendon_damping": np.zeros(n),
        "tendon_dampingpoly": np.zeros((n, 2)), "tendon_armature": np.zeros(n),
        "tendon_frictionloss": np.zeros(n), "tendon_lengthspring": np.zeros((n, 2)),
        "tendon_length0": np.zeros(n), "tendon_invweight0": np.zeros(n),
        "tendon_rgba": np.zeros((n, 4), np.float32),
    }
    wrap_type, wrap_objid, wrap_prm = [], [], []
    pending = {"tendon_invweight0"} if n else set()
    same_spring = np.array_equal(np.asarray(f["qpos0"]), np.asarray(f["qpos_spring"]))
    users = []
    exact_length0 = np.ones(n, bool)
    for i, el in enumerate(elements):
        ctx.register("tendon", el)
        out["tendon_adr"][i] = len(wrap_type)
        bodies: list[int] = []
        length0 = lengthspring = 0.0
        exact = True  # lengths computable here
        if el.tag == "fixed":
            out["tendon_type"][i] = 0
            if not el.children:
                raise el.error("fixed tendon has no joints")
            for j in el.children:
                jid = ctx.lookup("jnt", j.get("joint"), j, "joint")
                if int(f["jnt_type"][jid]) not in (JointType.SLIDE, JointType.HINGE):
                    raise j.error("fixed tendon joints must be slide or hinge")
                coef = float(j.get("coef"))
                adr = int(f["jnt_qposadr"][jid])
                length0 += coef * float(f["qpos0"][adr])
                lengthspring += coef * float(f["qpos_spring"][adr])
                bodies.append(int(f["jnt_bodyid"][jid]))
                wrap_type.append(WrapType.JOINT)
                wrap_objid.append(jid)
                wrap_prm.append(coef)
        else:
            out["tendon_type"][i] = 1
            length0, exact = _spatial(ctx, el, bodies, wrap_type, wrap_objid, wrap_prm)
            lengthspring = length0
            if not same_spring:
                exact = False
        out["tendon_num"][i] = len(wrap_type) - out["tendon_adr"][i]
        out["tendon_treenum"][i], out["tendon_treeid"][i] = _treeids(ctx, bodies)

        out["tendon_group"][i] = el.get("group", 0)
        if el.has("material"):
            out["tendon_matid"][i] = ctx.lookup("mat", el.get("material"), el, "material")
        out["tendon_limited"][i] = ctx.limited(el, "limited", "range")
        out["tendon_range"][i] = el.vec("range", (0.0, 0.0))
        if out["tendon_limited"][i] and not out["tendon_range"][i, 0] < out["tendon_range"][i, 1]:
            raise el.error("tendon range must satisfy range[0] < range[1] when limited")
        out["tendon_actfrclimited"][i] = ctx.limited(el, "actuatorfrclimited",
                                                     "actuatorfrcrange")
        out["tendon_actfrcrange"][i] = el.vec("actuatorfrcrange", (0.0, 0.0))
        out["tendon_solref_lim"][i] = el.vec("solreflimit", _SOLREF)
        out["tendon_solimp_lim"][i] = el.vec("solimplimit", _SOLIMP)
        out["tendon_solref_fri"][i] = el.vec("solreffriction", _SOLREF)
        out["tendon_solimp_fri"][i] = el.vec("solimpfriction", _SOLIMP)
        out["tendon_margin"][i] = el.get("margin", 0.0)
        # stiffness and damping take up to 3 polynomial coefficients (tendon/spatial).
        stiffness = el.vec("stiffness", (0.0, 0.0, 0.0))
        damping = el.vec("damping", (0.0, 0.0, 0.0))
        out["tendon_stiffness"][i], out["tendon_stiffnesspoly"][i] = stiffness[0], stiffness[1:]
        out["tendon_damping"][i], out["tendon_dampingpoly"][i] = damping[0], damping[1:]
        if el.get("springyield", 0.0) > 0:
            raise el.error("unsupported: tendon springyield (plasticity) is not implemented "
                           "by mjx_lite")
        out["tendon_armature"][i] = el.get("armature", 0.0)
        if out["tendon_armature"][i] and el.tag == "spatial" and not _straight(el):
            raise el.error("geom wrapping is not supported with tendon armature (as in "
                           "MuJoCo 4.0)")
        out["tendon_frictionloss"][i] = el.get("frictionloss", 0.0)
        out["tendon_width"][i] = el.get("width", _WIDTH)
        out["tendon_rgba"][i] = el.vec("rgba", _RGBA)

        out["tendon_length0"][i] = length0
        spring = np.atleast_1d(np.asarray(el.get("springlength", (-1.0, -1.0)), dtype=float))
        if spring.size == 1:
            spring = np.array([spring[0], spring[0]])
        if spring[0] == -1 and spring[1] == -1:
            # -1: the length at qpos_spring (tendon/spatial/springlength).
            out["tendon_lengthspring"][i] = (lengthspring, lengthspring)
            if not exact:
                pending.add("tendon_lengthspring")
        else:
            if spring[0] > spring[1]:
                raise el.error("springlength deadband must be non-decreasing")
            out["tendon_lengthspring"][i] = spring
        if el.tag == "spatial" and not _straight(el):
            pending.add("tendon_length0")
            exact_length0[i] = False
        users.append(None if not el.has("user") else np.atleast_1d(el.get("user")))
    out["tendon_user"] = user_array(ctx, "tendon", users, elements)
    out["nuser_tendon"] = out["tendon_user"].shape[1]
    out["wrap_type"] = np.array(wrap_type, np.int32)
    out["wrap_objid"] = np.array(wrap_objid, np.int32)
    out["wrap_prm"] = np.array(wrap_prm, float)
    out["ntendon"] = n
    out["nwrap"] = len(wrap_type)
    out["_pending"] = sorted(pending)
    ctx.fields.update({k: v for k, v in out.items() if k != "_pending"})
    ctx.fields["_tendon_length0_exact"] = exact_length0  # for actuator_length0
    return out


def site_xpos0(ctx: Context) -> np.ndarray:
    """(nsite, 3) site world positions at qpos0, from the tree pass or its body poses."""
    f = ctx.fields
    if "site_xpos0" in f:
        return np.asarray(f["site_xpos0"], dtype=float)
    bodies = np.asarray(f["site_bodyid"])
    out = np.zeros((len(bodies), 3))
    for s, b in enumerate(bodies):
        out[s] = f["body_xpos0"][b] + quat_rotate(np.asarray(f["body_xquat0"][b], float),
                                                  np.asarray(f["site_pos"][s], float))
    f["site_xpos0"] = out
    return out


def _straight(el) -> bool:
    return all(c.tag != "geom" for c in el.children)


def _spatial(ctx: Context, el, bodies, wrap_type, wrap_objid, wrap_prm) -> tuple[float, bool]:
    """Appends a spatial tendon's path; returns its length at qpos0 and whether it is exact.

    Each branch starts and ends at a site, and geoms (spheres and cylinders) sit between
    sites (``tendon/spatial``).
    """
    f = ctx.fields
    if not el.children:
        raise el.error("spatial tendon has no path elements")
    length, divisor, prev = 0.0, 1.0, None
    kinds = [c.tag for c in el.children]
    for k, c in enumerate(el.children):
        before = kinds[k - 1] if k else None
        after = kinds[k + 1] if k + 1 < len(kinds) else None
        if c.tag == "site":
            sid = ctx.lookup("site", c.get("site"), c, "site")
            bodies.append(int(f["site_bodyid"][sid]))
            wrap_type.append(WrapType.SITE)
            wrap_objid.append(sid)
            wrap_prm.append(0.0)
            pos = site_xpos0(ctx)[sid]
            if prev is not None:
                length += np.linalg.norm(pos - prev) / divisor
            prev = pos
        elif c.tag == "geom":
            gid = ctx.lookup("geom", c.get("geom"), c, "geom")
            gtype = int(f["geom_type"][gid])
            if gtype not in (GeomType.SPHERE, GeomType.CYLINDER):
                raise c.error("tendon wrapping geoms must be spheres or cylinders")
            if before != "site" or after != "site":
                raise c.error("a wrapping geom must sit between two sites in the tendon path")
            side = -1
            if c.has("sidesite"):
                side = ctx.lookup("site", c.get("sidesite"), c, "sidesite")
            bodies.append(int(f["geom_bodyid"][gid]))
            wrap_type.append(WrapType.SPHERE if gtype == GeomType.SPHERE else WrapType.CYLINDER)
            wrap_objid.append(gid)
            wrap_prm.append(float(side))
            prev = None  # the wrapped segment's length needs the wrapping solution
        else:  # pulley
            # A pulley starts a branch: the first element, or after a site (spatial/pulley).
            if (k and before != "site") or after != "site":
                raise c.error("a pulley must start the path or follow a site, and be "
                              "followed by a site")
            divisor = float(c.get("divisor"))
            if divisor <= 0:
                raise c.error("pulley divisor must be positive")
            wrap_type.append(WrapType.PULLEY)
            wrap_objid.append(-1)
            wrap_prm.append(divisor)
            prev = None
    if kinds[0] not in ("site", "pulley") or kinds[-1] != "site":
        raise el.error("a spatial tendon path must start and end with a site")
    return float(length), _straight(el)

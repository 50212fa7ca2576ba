"""Compile-time candidate geom pairs (Computation chapter, "Collision detection > Selection").

Everything here is numpy on static Model fields and is computed once per model structure:
the body pairs MuJoCo's broad phase can ever return (same-weld, parent-child with the
``filterparent`` bit, contype/conaffinity, ``exclude``, static-static), their geom pairs
(geom contype/conaffinity, explicit ``pair`` override), the explicit pairs, and the
collider key of each pair. Runtime culling (bounding spheres) happens in ``driver``.

Geom order within a pair follows MuJoCo: the geom of lower type first, so the contact normal
points from geom1 to geom2 as in mjContact.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np

from mjx_lite.types import DisableBit, GeomType, Model

_P, _H, _S, _C, _E, _Y, _B, _M = (
    GeomType.PLANE, GeomType.HFIELD, GeomType.SPHERE, GeomType.CAPSULE, GeomType.ELLIPSOID,
    GeomType.CYLINDER, GeomType.BOX, GeomType.MESH)


def has_collider(t1: int, t2: int) -> bool:
    """Whether MuJoCo's collision table has a function for types t1 <= t2 (SDF excluded)."""
    if t1 == _P:
        return t2 not in (_P, _H)
    if t1 == _H:
        return t2 not in (_P, _H)
    return True


def max_contacts(t1: int, t2: int, multiccd: bool, has_margin: bool) -> int:
    """Contacts one pair can produce (mj_maxContact); types t1 <= t2."""
    if t1 == _H:
        return 50  # mjMAXCONPAIR
    if _S in (t1, t2) or _E in (t1, t2):
        return 1
    if (t1, t2) == (_B, _B):
        return 8
    if (t1, t2) == (_C, _C):
        return 2
    if (t1, t2) == (_C, _B):
        return 4
    if t1 == _P:
        # plane-mesh: 4 measured on mujoco 4.0.0 (the public 3.x source keeps 3)
        return {_C: 2, _Y: 4, _B: 4, _M: 4}[t2]
    if not multiccd:
        return 1
    if _C in (t1, t2) or _Y in (t1, t2):
        return 5
    return 5 if has_margin else 4


@dataclasses.dataclass(frozen=True)
class PairGroup:
    """Candidate pairs sharing one collider key (types), in MuJoCo's pair order.

    Attributes:
      types: (type1, type2) with type1 <= type2.
      geom1, geom2: (n,) geom ids, geom_type[geom1] <= geom_type[geom2].
      ipair: (n,) explicit pair id, -1 for a pair from the dynamic (body) mechanism.
      ncon: contacts per pair (mj_maxContact), so the group owns n * ncon slots.
    """

    types: tuple[int, int]
    geom1: np.ndarray
    geom2: np.ndarray
    ipair: np.ndarray
    ncon: int


def body_pairs(m: Model) -> list[tuple[int, int]]:
    """Body pairs (b1 < b2) that MuJoCo's broad phase can return and that survive the
    same-weld, parent (unless ``filterparent`` is disabled), static-static and exclude filters."""
    weld = np.asarray(m.body_weldid)
    parent = np.asarray(m.body_parentid)
    pweld = weld[parent[weld]]
    ctype = np.asarray(m.body_contype)
    caff = np.asarray(m.body_conaffinity)
    # a weld group moves iff its root body has dofs (mocap groups do not)
    moves = np.asarray(m.body_dofnum)[weld] > 0
    filterparent = not (m.opt.disableflags & DisableBit.FILTERPARENT)
    excluded = set(int(s) for s in np.asarray(m.exclude_signature))
    geomnum = np.asarray(m.body_geomnum)
    out = []
    for b1 in range(m.nbody):
        if not (ctype[b1] or caff[b1]) or geomnum[b1] == 0:
            continue
        for b2 in range(b1 + 1, m.nbody):
            if not (ctype[b2] or caff[b2]) or geomnum[b2] == 0:
                continue
            w1, w2 = weld[b1], weld[b2]
            if w1 == w2 or not (moves[b1] or moves[b2]):
                continue
            if filterparent and w1 and w2 and (w1 == pweld[b2] or w2 == pweld[b1]):
                continue
            if not ((ctype[b1] & caff[b2]) or (ctype[b2] & caff[b1])):
                continue
            if (b1 << 16) + b2 in excluded:
                continue
            out.append((b1, b2))
    return out


def geom_pairs(m: Model) -> list[tuple[int, int, int]]:
    """All candidate (geom1, geom2, ipair) in MuJoCo's order, before runtime culling."""
    gtype = np.asarray(m.geom_type)
    gct = np.asarray(m.geom_contype)
    gca = np.asarray(m.geom_conaffinity)
    adr = np.asarray(m.body_geomadr)
    num = np.asarray(m.body_geomnum)
    p1, p2 = np.asarray(m.pair_geom1), np.asarray(m.pair_geom2)
    explicit = {frozenset((int(a), int(b))) for a, b in zip(p1, p2)}

    def ordered(g1, g2, ipair):
        if gtype[g1] > gtype[g2]:
            g1, g2 = g2, g1
        return int(g1), int(g2), int(ipair)

    out = []
    for b1, b2 in body_pairs(m):
        for g1 in range(adr[b1], adr[b1] + num[b1]):
            for g2 in range(adr[b2], adr[b2] + num[b2]):
                if frozenset((g1, g2)) in explicit:
                    continue  # the explicit pair replaces the dynamic one
                if not ((gct[g1] & gca[g2]) or (gct[g2] & gca[g1])):
                    continue
                if not has_collider(*sorted((gtype[g1], gtype[g2]))):
                    continue
                out.append(ordered(g1, g2, -1))
    for k, (g1, g2) in enumerate(zip(p1, p2)):
        if has_collider(*sorted((gtype[g1], gtype[g2]))):
            out.append(ordered(g1, g2, k))
    return out


def _structure_key(m: Model) -> bytes:
    h = hashlib.sha1()
    for name in ("geom_type", "geom_bodyid", "geom_contype", "geom_conaffinity",
                 "geom_dataid", "body_weldid", "body_parentid", "body_dofnum", "body_geomadr",
                 "body_geomnum", "body_contype", "body_conaffinity", "pair_geom1",
                 "pair_geom2", "exclude_signature"):
        a = np.ascontiguousarray(np.asarray(getattr(m, name)))
        h.update(name.encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    h.update(str((m.opt.disableflags, m.opt.enableflags)).encode())
    return h.digest()


_CACHE: dict[bytes, tuple[PairGroup, ...]] = {}


def pair_groups(m: Model) -> tuple[PairGroup, ...]:
    """Candidate pairs grouped by collider key; cached per model structure."""
    key = _structure_key(m)
    if key in _CACHE:
        return _CACHE[key]
    gtype = np.asarray(m.geom_type)
    multiccd = not (m.opt.disableflags & DisableBit.MULTICCD)
    by_key: dict[tuple[int, int], list] = {}
    for g1, g2, ipair in geom_pairs(m):
        by_key.setdefault((int(gtype[g1]), int(gtype[g2])), []).append((g1, g2, ipair))
    groups = []
    for types, rows in sorted(by_key.items()):
        rows = np.asarray(rows, dtype=np.int32).reshape(-1, 3)
        # margins are traced, so mesh pairs get MuJoCo's with-margin cap (5), an upper bound
        groups.append(PairGroup(types=types, geom1=rows[:, 0], geom2=rows[:, 1],
                                ipair=rows[:, 2],
                                ncon=max_contacts(*types, multiccd, True)))
    _CACHE[key] = tuple(groups)
    return _CACHE[key]

"""A numpy model of MuJoCo 4.0's multi-contact for box/mesh pairs, measured, not read.

MuJoCo 4.0.0's single-shot multi-contact (``multiccd``, on by default) is *not* the
algorithm of the public ``engine_collision_gjk.c`` we could read (that one gives every
contact the EPA depth and requires faces aligned within 1.6e-3 rad). Measured against
mujoco==4.0.0 on random near-contact states (``tests/test_convex.py``), its contacts for
box-mesh and mesh-mesh pairs are reproduced to 1e-9 by this model, given the EPA normal:

1. ``n`` is the EPA normal (geom1 -> geom2). Each geom's candidate face is its hull
   polygon (a box face; a mesh's ``mesh_poly*`` polygon) whose outward normal is most
   aligned with ``n`` (geom1) or ``-n`` (geom2); "aligned" means cosine >= cos(5 deg)
   (``FACE_COS``; bracketed by measurement between 0.9896 and 0.9968).
2. Face-face (both aligned): geom2's face is clipped (Sutherland-Hodgman) by the side
   planes of geom1's face (planes through its edges, containing its normal ``n1``). For
   each clipped point ``p`` (on geom2's face): ``x1`` is ``p`` projected along ``n1`` onto
   geom1's face plane, ``dist = (p - x1) . n`` (a depth per point, not the EPA depth),
   ``pos = x1 + n dist / 2``, frame normal ``n`` for every point.
3. Edge-face (one geom aligned): the other geom's support edge (among the edges at its
   support vertex along the normal, the one most perpendicular to ``n``) must satisfy
   ``|u . n| < sin(5 deg)`` (``EDGE_SIN``); it is clipped by the side planes of the aligned
   face, each point projected along that face's normal onto its plane as in 2.
4. Otherwise (vertex contacts, or an edge too steep): the single EPA contact.
5. Points with ``dist > margin`` are dropped (margin 0). With a nonzero margin the same
   dist and pos formulas hold (matched to 1e-6 on box-pebble and box-rock at margins 0.02
   and 0.05), but MuJoCo keeps points beyond the margin (dist up to 0.0399 at margin 0.02,
   0.0954 at 0.05): consistent with no filter or with ``dist <= 2 margin``; not established.

Not covered: more than 4 clipped points (MuJoCo keeps 4; which 4 is not established), a
few mesh-mesh edge cases (rock-pebble: 3 of 15 states differ by up to 5e-3 in pos), the
margin filter, and cylinders, whose caps MuJoCo 4.0 treats as 16-sided polygons (measured:
cap contact points at radius r and multiples of 22.5 degrees; cylinder-box and
cylinder-cylinder contacts also carry per-point depths).
"""

from __future__ import annotations

import mujoco
import numpy as np

FACE_COS = np.cos(np.deg2rad(5.0))
EDGE_SIN = np.sin(np.deg2rad(5.0))
# box faces as (axis, sign); corners listed counter-clockwise seen from outside
_BOX_FACES = [(0, 1), (0, -1), (1, 1), (1, -1), (2, 1), (2, -1)]


def polygons(mjm: mujoco.MjModel, d: mujoco.MjData, g: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """World (normal (3,), corners (k, 3)) of each hull polygon of box or mesh geom g."""
    rot = d.geom_xmat[g].reshape(3, 3)
    pos = d.geom_xpos[g]
    out = []
    if mjm.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX:
        size = mjm.geom_size[g]
        for ax, sgn in _BOX_FACES:
            normal = np.zeros(3)
            normal[ax] = sgn
            u, v = (ax + 1) % 3, (ax + 2) % 3
            corners = []
            for a, b in [(1, 1), (-1, 1), (-1, -1), (1, -1)]:
                c = np.zeros(3)
                c[ax], c[u], c[v] = sgn * size[ax], a * size[u], b * size[v]
                corners.append(c)
            corners = np.array(corners[::sgn])
            out.append((rot @ normal, corners @ rot.T + pos))
        return out
    i = mjm.geom_dataid[g]
    vert = mjm.mesh_vert[mjm.mesh_vertadr[i]:mjm.mesh_vertadr[i] + mjm.mesh_vertnum[i]]
    vert = vert.astype(float)
    adr = mjm.mesh_polyadr[i]
    for f in range(mjm.mesh_polynum[i]):
        a, k = mjm.mesh_polyvertadr[adr + f], mjm.mesh_polyvertnum[adr + f]
        idx = mjm.mesh_polyvert[a:a + k]
        out.append((rot @ mjm.mesh_polynormal[adr + f], vert[idx] @ rot.T + pos))
    return out


def clip(normal: np.ndarray, face: np.ndarray, subject: np.ndarray) -> np.ndarray:
    """Part of ``subject`` (a polygon, or a segment of 2 points) inside the prism of the
    convex polygon ``face`` along its ``normal``."""
    pts = [np.asarray(p) for p in subject]
    center = face.mean(0)
    closed = len(pts) > 2
    for e in range(len(face)):
        a, b = face[e], face[(e + 1) % len(face)]
        side = np.cross(b - a, normal)
        if np.dot(center - a, side) > 0:
            side = -side
        out = []
        edges = range(len(pts)) if closed else range(len(pts) - 1)
        if not closed and pts and np.dot(pts[0] - a, side) <= 0:
            out.append(pts[0])
        for i in edges:
            p, q = pts[i], pts[(i + 1) % len(pts)]
            dp, dq = np.dot(p - a, side), np.dot(q - a, side)
            if (dp > 0) != (dq > 0):
                out.append(p + dp / (dp - dq) * (q - p))
            if dq <= 0:
                out.append(q)
        pts = out
        if not pts:
            break
    return np.array(pts).reshape(-1, 3)


def _support_edge(polys, n):
    """(|u.n|, a, b): the edge at the support vertex along n most perpendicular to n."""
    allv = np.concatenate([f for _, f in polys])
    top = allv[np.argmax(allv @ n)]
    best = None
    for _, f in polys:
        for e in range(len(f)):
            a, b = f[e], f[(e + 1) % len(f)]
            if min(np.linalg.norm(a - top), np.linalg.norm(b - top)) > 1e-9:
                continue
            s = abs(np.dot((b - a) / np.linalg.norm(b - a), n))
            if best is None or s < best[0]:
                best = (s, a, b)
    return best


def _project(points, normal, face):
    """points projected along ``normal`` onto the plane of ``face``."""
    return points - np.outer((points - face[0]) @ normal, normal)


def multicontact(mjm, d, n: np.ndarray, margin: float = 0.0):
    """Contacts (dist, pos) of box/mesh geoms 0 and 1 for EPA normal n, or None where
    MuJoCo keeps its single EPA contact."""
    p1, p2 = polygons(mjm, d, 0), polygons(mjm, d, 1)
    n1, f1 = max(p1, key=lambda f: f[0] @ n)
    n2, f2 = max(p2, key=lambda f: -(f[0] @ n))
    face1, face2 = n1 @ n >= FACE_COS, -(n2 @ n) >= FACE_COS
    if face1 and face2:
        pts = clip(n1, f1, f2)
        x1 = _project(pts, n1, f1)
        x2 = pts
    elif face2 or face1:
        steep, a, b = _support_edge(p1, n) if face2 else _support_edge(p2, -n)
        if steep >= EDGE_SIN:
            return None
        nf, ff = (n2, f2) if face2 else (n1, f1)
        pts = clip(nf, ff, np.array([a, b]))
        pts = pts[[all(np.linalg.norm(p - q) > 1e-12 for q in pts[:i]) for i, p in
                   enumerate(pts)]] if len(pts) else pts
        proj = _project(pts, nf, ff)
        x1, x2 = (pts, proj) if face2 else (proj, pts)
    else:
        return None
    dist = (x2 - x1) @ n
    keep = dist <= margin
    return [(float(s), x + n * s / 2) for s, x, k in zip(dist, x1, keep) if k]

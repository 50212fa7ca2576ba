"""A numpy model of MuJoCo 4.0's multi-contact for box/mesh pairs, measured, not read.

MuJoCo 4.0.0's single-shot multi-contact (``multiccd``, on by default), measured against
mujoco==4.0.0 on random near-contact states (``tests/test_convex.py``), given the EPA result
(the single contact MuJoCo returns with multiccd disabled: ``epa_single``):

1. Each geom's feature is its support set along the EPA normal ``n`` (geom1) or ``-n``
   (geom2): the vertices within rounding (``SUPPORT_TOL`` times the geoms' size) of the
   maximum, a vertex, an edge or a face. Its candidate faces are the hull polygons (a box
   face; a mesh's ``mesh_poly*`` polygon) holding the whole feature, in the order of the
   first vertex's polygons.
2. Face-face: of the candidate pairs with ``n1 . n2 < -FACE_TOL`` the most opposed. Geom2's
   face is clipped (Sutherland-Hodgman) by the side planes of geom1's face; each clipped point
   ``p`` is projected along ``n1`` onto geom1's face plane (``x1``); the frame normal is
   ``-n2``, ``dist = (p - x1) . (-n2)``, ``pos = x1 - n2 dist / 2``.
3. Else edge-face: geom1's feature edges (an edge feature; at a vertex, the edge to the
   previous corner of each polygon holding it) against geom2's candidate faces, faces outer
   and edges inner, the first with ``|u . n_face| < EDGE_TOL``; else geom2's edges against
   geom1's faces. The edge is clipped by the face's side planes and projected along the
   face's normal onto its plane; the frame normal is the face's normal from geom1 to geom2.
4. Otherwise, or when no point has ``dist <= margin``: the single EPA contact.

FACE_TOL and EDGE_TOL are the cylinder tolerances bisected below (0.996, 0.0888): a grid over
both on 1,200 states was best there (7 of 1,200 states with another count at 0.996/0.0888,
13 or more elsewhere; the earlier 5-degree rule on the EPA normal, 16). The mujoco-mjx
convex.xml's dodecahedron-pyramid edge-edge state (an edge 5.2 degrees from the face
normal, in the face) is what first showed that 4.0 does not compare faces with the normal.

Not covered: more than 4 clipped points (MuJoCo keeps 4: the JAX rule's greedy search,
``multiccd.polygon_quad``, over mesh faces walked backwards), and nonzero margins.
Cylinders and capsules: the second part of this file.
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np

FACE_TOL = 0.996
EDGE_TOL = 0.0888
SUPPORT_TOL = 1e-9


def epa_single(mjm: mujoco.MjModel, qpos: np.ndarray):
    """MuJoCo's single GJK/EPA contact of geoms 0 and 1 (multiccd disabled): (dist, normal,
    pos), or None without contact."""
    single = copy.copy(mjm)
    single.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_MULTICCD
    d = mujoco.MjData(single)
    d.qpos[:] = qpos
    mujoco.mj_forward(single, d)
    if not d.ncon:
        return None
    c = d.contact[0]
    return float(c.dist), c.frame[:3].copy(), c.pos.copy()


def hull(mjm: mujoco.MjModel, d: mujoco.MjData, g: int):
    """Box or mesh geom g: world vertices (V, 3), polygons (vertex-id lists, counter-clockwise
    seen from outside), world unit normals (P, 3)."""
    rot = d.geom_xmat[g].reshape(3, 3)
    pos = d.geom_xpos[g]
    if mjm.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX:
        size = mjm.geom_size[g]
        v = np.array([[size[k] * (1 if i >> k & 1 else -1) for k in range(3)] for i in range(8)])
        polys, normals = [], []
        for ax in range(3):
            for sgn in (1, -1):
                ids = [i for i in range(8) if (v[i, ax] > 0) == (sgn > 0)]
                normal = np.zeros(3)
                normal[ax] = sgn
                u = np.zeros(3)
                u[(ax + 1) % 3] = 1
                w = np.cross(normal, u)
                c = v[ids].mean(0)
                ids.sort(key=lambda i: np.arctan2((v[i] - c) @ w, (v[i] - c) @ u))
                polys.append(ids)
                normals.append(normal)
        return v @ rot.T + pos, polys, np.array(normals) @ rot.T
    i = mjm.geom_dataid[g]
    v = mjm.mesh_vert[mjm.mesh_vertadr[i]:mjm.mesh_vertadr[i] + mjm.mesh_vertnum[i]]
    adr = mjm.mesh_polyadr[i]
    polys = []
    for f in range(mjm.mesh_polynum[i]):
        a, k = mjm.mesh_polyvertadr[adr + f], mjm.mesh_polyvertnum[adr + f]
        polys.append([int(x) for x in mjm.mesh_polyvert[a:a + k]])
    normals = mjm.mesh_polynormal[adr:adr + len(polys)] @ rot.T
    return v.astype(float) @ rot.T + pos, polys, normals


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


def _project(points, normal, face):
    """points projected along ``normal`` onto the plane of ``face``."""
    return points - np.outer((points - face[0]) @ normal, normal)


def _feature(w, direction, size):
    s = w @ direction
    return [int(i) for i in np.where(s >= s.max() - SUPPORT_TOL * size)[0]]


def _feature_faces(polys, feature):
    first = [f for f, ids in enumerate(polys) if feature[0] in ids]
    return [f for f in first if all(v in polys[f] for v in feature)]


def _feature_edges(polys, feature):
    if len(feature) == 2:
        return [tuple(feature)]
    if len(feature) == 1:
        v = feature[0]
        return [(v, ids[ids.index(v) - 1]) for ids in polys if v in ids]
    return []


def multicontact(mjm, d, n: np.ndarray, margin: float = 0.0, features=None):
    """Contacts (dist, pos) of box/mesh geoms 0 and 1 for the EPA normal n, or None where
    MuJoCo keeps its single EPA contact. ``features``: None (each geom's support set along
    n), or the two geoms' feature vertex ids (MuJoCo 4.0's: the distinct ids of its EPA
    nearest face or GJK's final simplex, increasing)."""
    w1, p1, n1 = hull(mjm, d, 0)
    w2, p2, n2 = hull(mjm, d, 1)
    size = float(max(mjm.geom_rbound[:2]))
    f1, f2 = features or (_feature(w1, n, size), _feature(w2, -n, size))
    c1, c2 = _feature_faces(p1, f1), _feature_faces(p2, f2)
    pairs = [(i, j) for i in c1 for j in c2 if n1[i] @ n2[j] < -FACE_TOL]
    if pairs:
        i, j = min(pairs, key=lambda ij: n1[ij[0]] @ n2[ij[1]])
        face1 = w1[p1[i]]
        x2 = clip(n1[i], face1, w2[p2[j]])
        x1 = _project(x2, n1[i], face1)
        frame = -n2[j]
    else:
        hit = None
        for first, (w_e, p_e, f_e), (w_f, p_f, n_f, c_f) in (
                (True, (w1, p1, f1), (w2, p2, n2, c2)), (False, (w2, p2, f2), (w1, p1, n1, c1))):
            for j in c_f:
                for a, b in _feature_edges(p_e, f_e):
                    u = (w_e[b] - w_e[a]) / np.linalg.norm(w_e[b] - w_e[a])
                    if abs(u @ n_f[j]) < EDGE_TOL:
                        hit = (first, w_e[a], w_e[b], w_f[p_f[j]], n_f[j])
                        break
                if hit:
                    break
            if hit:
                break
        if hit is None:
            return None
        first, a, b, face, nf = hit
        seg = clip(nf, face, np.array([a, b]))
        proj = _project(seg, nf, face)
        x1, x2, frame = (seg, proj, -nf) if first else (proj, seg, nf)
    dist = (x2 - x1) @ frame
    out = [(float(s), x + frame * s / 2) for s, x in zip(dist, x1) if s <= margin]
    return out or None


# ----------------------------------------------------------------------------------------
# Cylinders and capsules (capsule-cylinder, cylinder-cylinder, cylinder-box; the same rule
# for capsule-mesh and cylinder-mesh), measured against mujoco 4.0.0 with poses scanned by
# hand and random near-contact states (tests/test_cylinder_multiccd.py):
#
# * A cylinder's cap is the regular 16-gon inscribed in its rim, corner k at angle
#   k * 22.5 degrees from the local x axis (a capsule lying on the cap at y = 0.02 is clipped
#   at x = 0.09602 on a radius-0.1 cap, the 16-gon's edge, not the circle's 0.09798), walked
#   clockwise seen from outside. The cap facing the contact is a candidate face unless the
#   cylinder touches with its side (|axis . n| < SIDE_EPS); a box's or mesh's candidates are
#   the face it touches with (normal within FACE_TOL of n), else its faces facing n (cosine
#   above EDGE_TOL; a mesh's only at its supporting vertex). A cylinder's edge is its
#   generator from the rim point supporting it along n to the other cap; a capsule has no
#   face, its edge is the generator through its witness point (the segment point closest to
#   the other geom plus (radius + margin / 2) n). Box faces are walked in MuJoCo's order
#   (BOX_FACES_C).
# * geom order: MuJoCo's, by type (capsule < cylinder < box < mesh): geom1 is the capsule
#   against a cylinder, the cylinder against a box.
# * face-face: candidate faces whose outward normals face each other with cosine beyond
#   FACE_TOL = 0.996 (bisected: a box tilted on a wide cylinder cap switches at exactly
#   cos = 0.9960); clipping, depths and positions as for box-mesh but the frame normal is
#   -n2 (geom2's face), not the EPA normal (a box tilted 2 degrees on a cap gets contacts
#   along the box face's normal). More than 4 points: MuJoCo's greedy quadrilateral search
#   (``quad``), which on symmetric polygons (a cylinder standing fully on a face) picks among
#   (mathematically) equal areas by rounding, so the corners, the clipping and the area follow
#   MuJoCo's arithmetic to the last bit (read from libmujoco 4.0: its 16-gon's cosines and
#   sines are 15-digit constants, its side planes normalized, no fused multiply-adds;
#   ``cap_polygon``, ``clip_ff``, ``quad``): with numpy's cosines and our earlier clipping 3
#   of 9 upright poses kept MuJoCo's corners, now the acceptance sweep's 19 such states do.
# * edge-face: an edge lies in a face when |u . n_face| < EDGE_TOL = 0.0888 (a capsule
#   tilted on a cap: 2 contacts up to sin(tilt) = 0.08880, for radii .01-.03 and lengths
#   .1-.2). geom1's edge is tried when geom1 does not touch with a face (its candidate face
#   within FACE_TOL of n), else geom2's when geom2 does not; the first face in MuJoCo's order
#   with an edge lying in it. Frame normal: the face's normal pointing from geom1 to geom2.
#   A box edge against a cylinder cap counts only when its ends are at the same depth
#   within ~1e-6 (MuJoCo's EPA feature is an edge; a box corner into the cap with an edge
#   0.02 rad off parallel gives 1 contact, the exact edge 2, and the switch is at a depth
#   difference of 0.9e-6 to 1.2e-6 for edge lengths 0.1 and 0.4). The same for a cylinder
#   lying on another's cap as geom2 (2 contacts up to a depth difference between its rims of
#   1.1e-6 for length 0.1, 7e-6 for length 0.2; 1 contact at the random tilts of the
#   tests), while geom1 lying on geom2's face keeps 2 contacts up to the 5.09-degree edge
#   tolerance. A mesh edge needs not:
#   a dodecahedron corner into a cap gives 2 contacts along an edge whose ends differ in
#   depth by 1.2e-3.
# * clipped edge: a two-corner closed polygon, so an end cut by a side plane comes out
#   twice; points above the face by more than the inflated margin go (all of them: the
#   single GJK/EPA contact); of more than two left, the two farthest apart.
# * margin m: each geom is inflated by m/2 (a capsule's witness moves by it), points are
#   kept while their height above the face is at most the faces' half margins
#   (m for two faces, m/2 for capsule-face), then x1 += h1 normal, x2 -= h2 normal,
#   dist = height + m - h1 - h2 (matched on pusher.xml's gripper-object contacts at
#   margin 0.004 to 2e-7).
# * A single clipped point keeps its own depth (a capsule tilted 3 degrees on a cap: dist
#   -0.010179, the EPA depth would be -0.010234).
# ----------------------------------------------------------------------------------------

CYL_FACE_TOL = 0.996
CYL_EDGE_TOL = 0.0888
SIDE_EPS = 1e-3
EXACT_EDGE = 1e-6
BOX_FACES_C = [[(1, 1, 1), (1, 1, -1), (1, -1, -1), (1, -1, 1)],
               [(-1, 1, -1), (-1, 1, 1), (-1, -1, 1), (-1, -1, -1)],
               [(-1, 1, -1), (1, 1, -1), (1, 1, 1), (-1, 1, 1)],
               [(-1, -1, 1), (1, -1, 1), (1, -1, -1), (-1, -1, -1)],
               [(-1, 1, 1), (1, 1, 1), (1, -1, 1), (-1, -1, 1)],
               [(1, 1, -1), (-1, 1, -1), (-1, -1, -1), (1, -1, -1)]]
_CAPSULE, _CYLINDER, _BOX, _MESH = (mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_CYLINDER,
                                    mujoco.mjtGeom.mjGEOM_BOX, mujoco.mjtGeom.mjGEOM_MESH)


# MuJoCo 4.0's cosines and sines of the 16-gon (read from libmujoco 4.0): 15 significant
# digits (cos 22.5 degrees 2 ulps off), the two roots of 1/2 rounded apart
_C1, _C2, _C3, _C2L = 0.923879532511287, 0.707106781186548, 0.38268343236509, 0.707106781186547
NGON_COS = [1.0, _C1, _C2, _C3, 0.0, -_C3, -_C2L, -_C1, -1.0, -_C1, -_C2, -_C3, 0.0, _C3, _C2L,
            _C1]
NGON_SIN = [0.0, _C3, _C2L, _C1, 1.0, _C1, _C2, _C3, 0.0, -_C3, -_C2L, -_C1, -1.0, -_C1, -_C2,
            -_C3]


def _dot(a, b) -> float:
    """a . b as MuJoCo sums it: (x + y) + z, in float64 scalars (no fused multiply-add)."""
    return (a[0] * b[0] + a[1] * b[1]) + a[2] * b[2]


def _cross3(a, b) -> np.ndarray:
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]])


def _to_world(mat, loc, pos) -> np.ndarray:
    """mat @ loc + pos as MuJoCo computes a cap's and a box face's corners: ((m_i0 x + m_i1 y)
    + m_i2 z) + pos_i."""
    return np.array([_dot(mat[i], loc) + pos[i] for i in range(3)])


def cap_polygon(pos, mat, size, top: bool):
    """(corners (16, 3), outward normal) of a cylinder cap, MuJoCo's 16-gon: local corner k
    (r cos_k, s (r (-sin_k)), s h) with MuJoCo's tables, turned by ``_to_world``."""
    s = 1.0 if top else -1.0
    r, h = float(size[0]), float(size[1])
    return (np.array([_to_world(mat, (r * c, s * (r * -si), s * h), pos)
                      for c, si in zip(NGON_COS, NGON_SIN)]), mat[:, 2] * s)


def clip_ff(face, normal, subject, margin: float) -> np.ndarray:
    """MuJoCo 4.0's polygonClip (read from libmujoco 4.0) for face-face, to the last bit:
    ``subject`` clipped by the side planes of ``face``, each plane's normal the normalized
    ``(V1 - V0) x ((V0 + normal) - V0)`` (times the reciprocal of its norm), heights
    ``(P - V0) . pn``, inside above -1e-15, crossings at ``t = dP / (dP - dQ)`` kept where
    ``0 <= t <= 1`` as ``t (Q - P) + P``; then the points at most ``margin`` above ``face``."""
    pn = []
    for i in range(len(face)):
        v0, v1 = face[i], face[(i + 1) % len(face)]
        c = _cross3(v1 - v0, (v0 + normal) - v0)
        norm = np.sqrt(_dot(c, c))
        pn.append(np.array([1.0, 0.0, 0.0]) if norm < 1e-15 else c * (1.0 / norm))
    poly = list(subject)
    for a, s in zip(face, pn):
        out = []
        for i in range(len(poly)):
            p, q = poly[i], poly[(i + 1) % len(poly)]
            dp, dq = _dot(p - a, s), _dot(q - a, s)
            in1, in2 = dp > -1e-15, dq > -1e-15
            if in1 != in2 and dp - dq != 0:
                t = dp / (dp - dq)
                if 0 <= t <= 1:
                    out.append(t * (q - p) + p)
            if in2:
                out.append(q)
        poly = out
    return np.array([p for p in poly if _dot(p - face[0], normal) <= margin]).reshape(-1, 3)


def clip_c(face, normal, subject):
    """Sutherland-Hodgman for an edge (``clip_ff`` clips a face in MuJoCo's arithmetic):
    subject clipped by the side planes of ``face``; a subject of two corners is a closed
    polygon (its clipped ends come twice)."""
    poly = list(subject)
    for e in range(len(face)):
        a, b = face[e], face[(e + 1) % len(face)]
        pn = np.cross(b - a, (a + normal) - a)
        pd = pn @ a
        out = []
        for i in range(len(poly)):
            p, q = poly[i], poly[(i + 1) % len(poly)]
            in1, in2 = (p - a) @ pn > -1e-10, (q - a) @ pn > -1e-10
            if in1 and in2:
                out.append(q)
            elif in1 or in2:
                den = pn @ (q - p)
                t = (pd - pn @ p) / den if abs(den) >= 1e-10 else np.inf
                if -3e-7 < t < 1 + 3e-7:
                    out.append(p + np.clip(t, 0, 1) * (q - p))
                if in2:
                    out.append(q)
        poly = out
    return np.array(poly).reshape(-1, 3)


def quad(p) -> tuple[tuple[int, ...], bool]:
    """MuJoCo's greedy maximal-area quadrilateral of a convex polygon (> 4 corners): from
    (0, 1, 2, 3), for each first corner advance the fourth while the area grows, after each
    advance the third, then the second. Returns the corner indices and whether a comparison
    was a tie to 1e-12 (then MuJoCo's pick follows rounding)."""
    def area(i, j, k, m):  # MuJoCo's arithmetic (libmujoco 4.0's polygonClip)
        c = _cross3(p[i] - p[k], p[j] - p[m])
        return np.sqrt(_dot(c, c)) * 0.5
    n = len(p)
    b, c, d = 1, 2, 3
    best, tie = area(0, 1, 2, 3), False
    res = (0, 1, 2, 3)

    def better(val):
        nonlocal tie
        tie |= abs(val - best) <= 1e-12 * best
        return val > best
    for a in range(n):
        while better(v := area(a, b, c, (d + 1) % n)):
            best, d = v, (d + 1) % n
            res = (a, b, c, d)
            while better(v := area(a, b, (c + 1) % n, d)):
                best, c = v, (c + 1) % n
                res = (a, b, c, d)
            while better(v := area(a, (b + 1) % n, c, d)):
                best, b = v, (b + 1) % n
                res = (a, b, c, d)
        if b == a:
            b = (b + 1) % n
            if c == b:
                c = (c + 1) % n
                if d == c:
                    d = (d + 1) % n
    return res, tie


def _geom(mjm, d, g):
    return d.geom_xpos[g].copy(), d.geom_xmat[g].reshape(3, 3).copy(), mjm.geom_size[g]


def _mesh(mjm, d, g):
    """World vertices and polygons [(normal, vertex ids as MuJoCo walks them: backwards)]."""
    i = mjm.geom_dataid[g]
    rot = d.geom_xmat[g].reshape(3, 3)
    vert = mjm.mesh_vert[mjm.mesh_vertadr[i]:mjm.mesh_vertadr[i] + mjm.mesh_vertnum[i]]
    # MuJoCo's arithmetic (``_to_world``): its clipping of a mesh face by a cap follows the
    # last bits (a cylinder standing on a pentagon: one state of the acceptance sweep)
    world = np.array([_to_world(rot, v, d.geom_xpos[g]) for v in vert.astype(float)])
    polys = []
    adr = mjm.mesh_polyadr[i]
    for f in range(mjm.mesh_polynum[i]):
        a, k = mjm.mesh_polyvertadr[adr + f], mjm.mesh_polyvertnum[adr + f]
        polys.append((rot @ mjm.mesh_polynormal[adr + f], list(mjm.mesh_polyvert[a:a + k][::-1])))
    return world, polys


def _holds(face, nrm, x) -> bool:
    """Whether x lies in the prism of the convex polygon face along nrm."""
    c = face.mean(0)
    for a, b in zip(face, np.roll(face, -1, 0)):
        side = np.cross(b - a, nrm)
        side = -side if (c - a) @ side > 0 else side
        if (x - a) @ side > 1e-9:
            return False
    return True


def _mesh_faces(mesh, nout, witness, feature=None):
    """A mesh's candidate polygons: those of its contact feature (``feature``: the distinct
    mesh vertex ids of EPA's nearest face; an edge's two polygons, a face's one), at a vertex
    (or unknown) those at its vertex supporting it along nout; touching with a face, that
    face (of coplanar polygons, where the feature is unknown, the one holding the witness
    point; a known feature keeps them all, the face-face choice takes the most opposed)."""
    world, polys = mesh
    top = int(np.argmax(world @ nout))
    if feature is not None and len(feature) > 1:
        near = [(nrm, world[ids]) for nrm, ids in polys if all(v in ids for v in feature)]
    else:
        near = [(nrm, world[ids]) for nrm, ids in polys if top in ids]
    if not near:
        return [], False
    touch = max(nrm @ nout for nrm, _ in near) >= CYL_FACE_TOL
    if not touch:
        return [(nrm, f) for nrm, f in near if nrm @ nout > CYL_EDGE_TOL], touch
    flat = [(nrm, f) for nrm, f in near if nrm @ nout >= CYL_FACE_TOL]
    if feature is not None:
        # a known feature offers all its polygons: 4.0 takes the most opposed face pair
        # (first in polygon order; read from libmujoco 4.0's mjc_multicontact)
        return flat, touch
    return [x for x in flat if _holds(x[1], x[0], witness)] or flat, touch


def _mesh_edges(mesh, nout, exact, feature=None):
    """A mesh's edges at its contact feature (``_mesh_faces``): an edge itself, none at a
    face, else those at its supporting vertex (``exact``: ends at the same depth)."""
    world, polys = mesh
    if feature is not None and len(feature) == 3:
        return []
    if feature is not None and len(feature) == 2:
        a, b = feature
        return ([(world[a], world[b])] if not exact
                or abs((world[b] - world[a]) @ nout) <= EXACT_EDGE else [])
    top = int(np.argmax(world @ nout))
    # one edge per polygon holding the vertex (the first 3, in polygon order), to the vertex
    # before it in MuJoCo's order (``ids`` run backwards: the one after it here)
    prev = [ids[(ids.index(top) + 1) % len(ids)] for _, ids in polys if top in ids][:3]
    return [(world[top], world[j]) for j in prev
            if not exact or abs((world[j] - world[top]) @ nout) <= EXACT_EDGE]


def _faces(t, pos, mat, size, nout):
    """[(normal, corners)] candidate faces facing nout, and whether one touches (FACE_TOL)."""
    if t == _CYLINDER:
        c = mat[:, 2] @ nout
        if abs(c) < SIDE_EPS:
            return [], False
        f, nrm = cap_polygon(pos, mat, size, c > 0)
        return [(nrm, f)], abs(c) >= CYL_FACE_TOL
    if t == _BOX:
        out = []
        for k, face in enumerate(BOX_FACES_C):
            nrm = np.zeros(3)
            nrm[k // 2] = 1.0 if k % 2 == 0 else -1.0
            out.append((mat @ nrm, np.array([_to_world(mat, np.array(c) * size, pos)
                                             for c in face])))
        touch = max(nrm @ nout for nrm, _ in out) >= CYL_FACE_TOL
        return [(nrm, f) for nrm, f in out
                if nrm @ nout >= (CYL_FACE_TOL if touch else CYL_EDGE_TOL)], touch
    return [], False


def _edges(t, pos, mat, size, nout, witness, exact, through=None):
    """[(a, b)] candidate edges: the generator of a capsule (through its witness) or of a
    cylinder (at its support rim point, or at ``through``'s azimuth), a box's edges at its
    support corner (with ``exact``, only those whose ends are at the same depth)."""
    axis = mat[:, 2]
    if t == _CAPSULE:
        w = witness if through is None else through
        pr = (w - pos) @ axis
        return [(w - axis * (pr + size[1]), w + axis * (size[1] - pr))]
    if t == _CYLINDER:
        loc = mat.T @ (nout if through is None else through - pos)
        r = np.hypot(loc[0], loc[1])
        xy = loc[:2] * size[0] / r if r > 1e-15 else np.zeros(2)
        s = 1.0 if (mat.T @ nout)[2] >= 0 else -1.0
        v = mat @ np.array([xy[0], xy[1], s * size[1]]) + pos
        if exact and abs(2 * size[1] * (axis @ nout)) > EXACT_EDGE:
            return []
        return [(v, v - axis * s * 2 * size[1])]
    loc = mat.T @ nout
    sg = np.where(loc >= 0, 1.0, -1.0)
    v = mat @ (sg * size) + pos
    out = []
    for k in range(3):
        s2 = sg.copy()
        s2[k] = -s2[k]
        w = mat @ (s2 * size) + pos
        if not exact or abs((w - v) @ nout) <= EXACT_EDGE:
            out.append((v, w))
    return out


def cylinder_multicontact(mjm, d, epa, margin: float = 0.0, through=None, gen=None,
                          feature=None):
    """Contacts [(dist, pos, frame normal)] of geoms 0 and 1 (a capsule or cylinder pair in
    MuJoCo's order) given GJK/EPA's (dist, n, pos), and a dict with 'kind' ('ff', 'e1',
    'e2' or 'single'), 'tie' (the quadrilateral search met equal areas) and 'polygon' (the
    clipped points, each with its dist and pos). ``through``: a point the cylinder or capsule
    generator passes through instead (MuJoCo's own, from its contacts). ``gen``: (point on
    geom 1, point on geom 2) of EPA's nearest face's first vertex, where a cylinder's
    generator is taken (as 4.0 does after its own EPA). ``feature``: the sorted distinct
    mesh vertex ids of that face on a mesh geom 2 (its contact feature), or None."""
    dist, n, pos = epa
    info = {"kind": "single", "tie": False, "polygon": []}
    single = [(dist, pos, n)]
    t1, t2 = int(mjm.geom_type[0]), int(mjm.geom_type[1])
    g1, g2 = _geom(mjm, d, 0), _geom(mjm, d, 1)
    h1 = 0.0 if t1 == _CAPSULE else 0.5 * margin
    h2 = 0.5 * margin
    x1 = pos - n * dist / 2 + n * (0.5 * margin - h1)
    x2 = pos + n * dist / 2
    F1, touch1 = _faces(t1, *g1, n)
    if t2 == _MESH:
        mesh2 = _mesh(mjm, d, 1)
        F2, touch2 = _mesh_faces(mesh2, -n, x2, feature)
    else:
        F2, touch2 = _faces(t2, *g2, -n)
    pairs = [(-(a[0] @ b[0]), a, b) for a in F1 for b in F2]
    best = max(pairs, key=lambda x: x[0], default=None)
    if best is not None and best[0] > CYL_FACE_TOL:
        (n1, f1), (n2, f2) = best[1], best[2]
        info["kind"], normal = "ff", -n2
        # MuJoCo's arithmetic (libmujoco 4.0's polygonClip): which 4 of more than 4 points
        # its greedy search keeps follows their last bits
        p = clip_ff(f1, n1, f2, h1 + h2)
        w1 = np.array([x - n1 * _dot(x - f1[0], n1) for x in p]).reshape(-1, 3)
        dd = np.array([_dot(a - b, n2) for a, b in zip(w1, p)])
        xa, xb = w1, w1 - np.outer(dd, n2)
        if len(p) > 4:
            (idx, info["tie"]) = quad(p)
            idx = list(idx)
        else:
            idx = list(range(len(p)))
    else:
        at1 = at2 = through
        if through is None and gen is not None:
            at1 = gen[0] if t1 == _CYLINDER else None
            at2 = gen[1] if t2 == _CYLINDER else None
        def e1():
            return "e1", _edges(t1, *g1, n, x1, False, at1), F2

        def e2():
            return "e2", (_mesh_edges(mesh2, -n, False, feature) if t2 == _MESH else
                          _edges(t2, *g2, -n, x2, t1 == _CYLINDER and t2 in (_BOX, _CYLINDER),
                                 at2)), F1

        # 4.0 orders the two by its features' dimensions: a cylinder's feature (cap ids) is
        # never a face, so its generator goes against geom 2's face even where its cap
        # touches, geom 2's edge on geom 1's face where that finds nothing
        if t1 == _CYLINDER:
            tries = ([e1] if F2 else []) + ([e2] if not touch2 and F1 else [])
        elif not touch1 and F2:
            tries = [e1]
        elif not touch2 and F1:
            tries = [e2]
        else:
            tries = []
        hit = None
        for attempt in tries:
            kind, E, F = attempt()
            for nf, f in F:
                fits = [(abs((b - a) @ nf) / np.linalg.norm(b - a), a, b) for a, b in E]
                fits = [x for x in fits if x[0] < CYL_EDGE_TOL]
                if fits:  # the first in MuJoCo's order, not the most parallel
                    hit = (nf, f, *fits[0][1:])
                    break
            if hit is not None:
                break
        if hit is None:
            return single, info
        nf, f, a, b = hit
        info["kind"] = kind
        p = clip_c(f, nf, np.array([a, b]))
        p = p[(p - f[0]) @ nf <= h1 + h2]
        if len(p) > 2:
            gap = [(np.sum((p[j] - p[i]) ** 2), i, j) for i in range(len(p))
                   for j in range(i + 1, len(p))]
            _, i, j = max(gap, key=lambda x: x[0])
            p = p[[i, j]]
        proj = p - np.outer((p - f[0]) @ nf, nf)
        dd = (p - proj) @ nf
        normal = -nf if kind == "e1" else nf
        xa, xb = (p, proj) if kind == "e1" else (proj, p)
        idx = list(range(len(p)))
    pts = [(float(s) + margin - h1 - h2, (a + h1 * normal + b - h2 * normal) / 2, normal)
           for s, a, b in zip(dd, xa, xb)]
    info["polygon"] = pts
    if not pts:
        return single, info
    return [pts[i] for i in idx], info

"""MuJoCo 4.0's single-shot multi-contact for cylinders and capsules (``multiccd``):
capsule-cylinder, capsule-mesh, cylinder-cylinder, cylinder-box, cylinder-mesh.

Measured against mujoco 4.0.0 (``tests/multiccd_reference.py``, section "Cylinders and
capsules"), not read from its source (the face-face arithmetic is read from libmujoco 4.0).
GJK/EPA gives the normal ``n`` (geom1 -> geom2), the depth and the witness points: MuJoCo's
own search where the geoms touch or penetrate (``nativeccd``), where they are apart its GJK
distance query (``nativeccd.DISTANCE_PAIRS``; capsule-mesh: the capsule segment's); then each
geom offers candidate faces and edges:

* a cylinder: its cap facing the contact as a regular 16-gon (corners at radius r and
  multiples of 22.5 degrees from the local x axis, with MuJoCo's 15-digit cosines and sines:
  ``cap_polygon``), none when it touches with its side
  (``|axis . n| < SIDE_EPS``); its generator to the other cap at the azimuth of the first
  vertex on the cylinder of EPA's nearest face, or of GJK's final simplex where the geoms
  are apart within the margin (``nativeccd``; 4.0 reads both from its search), else from
  the rim point supporting it along ``n``;
* a capsule: no face; the generator through its witness point;
* a box or mesh: the face it touches with (normal within ``FACE_TOL`` of ``n``; of coplanar
  mesh polygons, where MuJoCo's feature is unknown, the one holding the witness), else its
  faces facing ``n`` (a mesh's at its supporting vertex); the edges at its supporting
  vertex.

In order:

1. face-face: two candidate faces whose normals face each other within ``FACE_TOL``
   (cosine 0.996): the second face is clipped (Sutherland-Hodgman) by the first's side
   planes, points higher than the margin above the first face go; each point ``p`` gets
   ``x1`` = ``p`` projected onto face 1, its own depth ``dist = (x1 - p) . n2``,
   ``x2 = x1 - dist n2``, frame normal ``-n2``; more than 4 points keep the quadrilateral of
   MuJoCo's greedy maximal-area search (``multiccd.polygon_quad``). A cylinder standing
   fully on a face or cap gives (mathematically) equal areas to several quadrilaterals, so
   the corners, the clipping and the area are MuJoCo's arithmetic to the last bit (read from
   libmujoco 4.0's cylinder cap and box face code and polygonClip): products rounded on
   their own (``math.rounded``), sums in its order;
2. edge-face: geom1's edge against geom2's face unless geom1 touches with a face, else
   geom2's edge against geom1's face unless geom2 touches with a face (a cylinder geom1:
   its generator first even where its cap touches, then geom2's edge: 4.0 orders the two
   by its features' dimensions, and a cylinder's, its caps' ids, is never a face); the
   edge must lie in the face within ``EDGE_TOL`` (``|u . n_face| < 0.0888``); it is clipped
   by the face's side planes, each end scored by its height above the face, ends above the
   margin dropped;
   frame normal the face's normal pointing from geom1 to geom2. A box edge or a cylinder
   generator against a cylinder cap (geom2's edge on geom1's cap) counts only when its two
   ends are at the same depth (within ``EXACT_EDGE``: MuJoCo's EPA feature is then an edge,
   not a corner; a mesh edge needs not);
3. otherwise, or when clipping leaves nothing, the single GJK/EPA contact.

With a margin each geom is inflated by half of it: a capsule's witness moves with it, faces
stay and the half margins go back on the points. Static shapes: polygons are padded corner
arrays with counts, clipping runs over a fixed capacity with masks, the quadrilateral search
is a ``while_loop`` on indices that ends when every batch member is done.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.collision import convex, multiccd
from mjx_lite.math import where
from mjx_lite.types import GeomType

_G = GeomType
# measured thresholds (tests/multiccd_reference.py): face normals facing each other with
# cosine beyond FACE_TOL; an edge lying in a face with |sine| below EDGE_TOL
FACE_TOL = 0.996
EDGE_TOL = 0.0888
# a cylinder touches with its side (no cap) when |axis . n| is below this
SIDE_EPS = 1e-3
# a box/mesh edge is MuJoCo's contact feature only when its ends' depths differ by less
# than about its EPA tolerance (measured 0.9e-6 to 1.2e-6 at ccd_tolerance 1e-6)
EXACT_EDGE = 1e-6
NGON = 16
MINVAL = math.MINVAL


def _box_faces_c():
    """Box faces as corner ids (bit k: +size[k]) in the order and winding MuJoCo 4.0 clips
    them (+x, -x, +y, -y, +z, -z); the order decides which of equal-area quadrilaterals
    its greedy search keeps."""
    signs = [[(1, 1, 1), (1, 1, -1), (1, -1, -1), (1, -1, 1)],
             [(-1, 1, -1), (-1, 1, 1), (-1, -1, 1), (-1, -1, -1)],
             [(-1, 1, -1), (1, 1, -1), (1, 1, 1), (-1, 1, 1)],
             [(-1, -1, 1), (1, -1, 1), (1, -1, -1), (-1, -1, -1)],
             [(-1, 1, 1), (1, 1, 1), (1, -1, 1), (-1, -1, 1)],
             [(1, 1, -1), (-1, 1, -1), (-1, -1, -1), (1, -1, -1)]]
    ids = [[sum(1 << k for k in range(3) if s[k] > 0) for s in face] for face in signs]
    return np.array(ids, np.int32)


BOX_FACE_C = _box_faces_c()
# MuJoCo 4.0's tables of the 16-gon's cosines and sines (read from libmujoco 4.0: static
# arrays of the function building a cap polygon): k 22.5 degrees to 15 significant digits,
# not to the last bit (cos 22.5 = 0.923879532511287 is 2 ulps off), and the two roots of 1/2
# rounded apart. A cylinder standing on a face gives equal areas to several quadrilaterals
# and these bits decide which one MuJoCo's greedy search keeps.
_C1, _C2, _C3 = 0.923879532511287, 0.707106781186548, 0.38268343236509
_C2L = 0.707106781186547
NGON_COS = np.array([1.0, _C1, _C2, _C3, 0.0, -_C3, -_C2L, -_C1,
                     -1.0, -_C1, -_C2, -_C3, 0.0, _C3, _C2L, _C1])
NGON_SIN = np.array([0.0, _C3, _C2L, _C1, 1.0, _C1, _C2, _C3,
                     0.0, -_C3, -_C2L, -_C1, -1.0, -_C1, -_C2, -_C3])


def to_world(mat, loc, pos):
    """mat @ loc + pos for points loc (..., 3) in MuJoCo's arithmetic (its cap polygon and
    box faces, read from libmujoco 4.0): row i is ``((m_i0 x + m_i1 y) + m_i2 z) + pos_i``,
    each product rounded (``math.rounded``: no fused multiply-add)."""
    t = math.rounded(loc[..., None, :] * mat)  # (..., 3 rows, 3 columns)
    return ((t[..., 0] + t[..., 1]) + t[..., 2]) + pos


def cap_polygon(pos, mat, size, sgn):
    """The cap on side ``sgn`` (+1 top, -1 bottom) of a cylinder as MuJoCo's 16-gon: corners
    (16, 3) clockwise seen from outside, starting on the local x axis, and outward normal.
    Local corner k is ``(r cos_k, sgn (r (-sin_k)), sgn h)`` with MuJoCo's tables, turned
    into the world frame by ``to_world`` (read from libmujoco 4.0)."""
    c = jp.asarray(NGON_COS, pos.dtype)
    s = jp.asarray(-NGON_SIN, pos.dtype)
    loc = jp.stack([size[0] * c, sgn * (size[0] * s), jp.broadcast_to(sgn * size[1], c.shape)],
                   -1)
    return to_world(mat, loc, pos), mat[:, 2] * sgn


def clip_polygon(face, cnt, normal, subject, scnt, cap: int):
    """Sutherland-Hodgman as MuJoCo 4.0 computes it (read from libmujoco 4.0's polygonClip),
    to the last bit: each edge's side normal ``pn = normalize((V1 - V0) x ((V0 + normal) -
    V0))`` (times the reciprocal of its norm; (1, 0, 0) below 1e-15), a point's height
    ``d = (P - V0) . pn`` (products rounded, summed x, y, z), inside when ``d > -1e-15``; an
    edge PQ crossing the plane gets ``t = dP / (dP - dQ)`` and, where ``0 <= t <= 1``, the
    point ``t (Q - P) + P``. Symmetric polygons (a cylinder standing on a face) give equal
    areas to several quadrilaterals, and which one ``polygon_quad`` keeps follows the last
    bits of these corners.

    Args:
      face: (K, 3) clipping polygon, the first ``cnt`` real, wound as MuJoCo winds it.
      normal: (3,) its outward normal. subject: (S, 3), the first ``scnt`` real.
      cap: static output capacity.
    Returns:
      (cap, 3) points, their count.
    """
    K = face.shape[0]
    k = jp.arange(K)
    nxt = face[where(k + 1 < cnt, k + 1, 0)]
    side = math.rounded_cross(nxt - face, (face + normal) - face)
    sq = math.dot3(side, side)
    norm = where(sq > 0, jp.sqrt(where(sq > 0, sq, 1.0)), 0.0)  # finite gradient at 0
    small = norm < 1e-15
    inv = 1.0 / where(small, 1.0, norm)
    pn = where(small[:, None], jp.asarray([1.0, 0.0, 0.0], face.dtype),
               math.rounded(side * inv[:, None]))
    kmask = k < cnt
    pts = jp.zeros((cap, 3), subject.dtype).at[:subject.shape[0]].set(subject[:cap])
    n = jp.minimum(scnt, cap)
    i = jp.arange(cap)
    for e in range(K):
        a, s = face[e], pn[e]
        q = pts[where(i + 1 < n, i + 1, 0)]
        dp = math.dot3(pts - a, s)
        dq = math.dot3(q - a, s)
        in_p, in_q = dp > -1e-15, dq > -1e-15
        live = i < n
        den = dp - dq
        ok = den != 0
        t = dp / where(ok, den, 1.0)
        cross = live & (in_p != in_q) & ok & (t >= 0) & (t <= 1)
        inter = math.rounded(t[:, None] * (q - pts)) + pts
        keep_q = live & in_q
        cand = jp.stack([inter, q], 1).reshape(-1, 3)
        cmask = jp.stack([cross, keep_q], 1).reshape(-1)
        new, newn = multiccd.compact(cand, cmask, cap)
        pts = where(kmask[e], new, pts)
        n = where(kmask[e], newn, n)
    return pts, n


def clip_edge(face, cnt, normal, a, b):
    """The part of edge ab inside the prism of polygon ``face`` along ``normal``, as MuJoCo
    clips an edge: a closed two-corner polygon, so an end cut by a side plane comes out
    twice. Returns the ends (2, 3), their multiplicities (2,) (0 where the edge misses the
    prism, 1 for an original end, 2 for a cut one)."""
    pts, lo, hi, empty = multiccd.clip_interval(face, cnt, normal, a, b)
    mult = where(empty, 0, 1 + jp.stack([lo > 0, hi < 1]).astype(jp.int32))
    return pts, mult


def _feature(feature):
    """(first vertex id, whether a mesh's contact feature is a vertex, an edge, a face) from
    ``feature`` = (EPA's nearest face's three mesh vertex ids, known), or None."""
    if feature is None:
        return None, jp.ones((), bool), jp.zeros((), bool), jp.zeros((), bool)
    ids, known = feature
    a, b, c = ids[0], ids[1], ids[2]
    nd = 1 + (b != a).astype(jp.int32) + ((c != a) & (c != b)).astype(jp.int32)
    return a, ~known | (nd == 1), known & (nd == 2), known & (nd == 3)


def _faces(gtype, pos, mat, size, verts, table, nout, witness, feature=None):
    """Candidate faces of a geom facing direction ``nout`` (outward, toward the other geom).

    Returns corners (F, K, 3) world, counts (F,), normals (F, 3), valid (F,), and whether the
    geom touches with a face (its best face normal within FACE_TOL of ``nout``). A mesh's
    candidates are the polygons of its contact feature (``feature``: EPA's nearest face's
    mesh vertex ids, see ``_feature``): at an edge the two polygons holding it, at a face
    that polygon, at a vertex (or unknown) the polygons at the vertex supporting it along
    ``nout`` (4.0 measured).
    """
    dt = pos.dtype
    if gtype == _G.CYLINDER:
        c = jp.dot(mat[:, 2], nout)
        sgn = where(c >= 0, 1.0, -1.0).astype(dt)
        face, normal = cap_polygon(pos, mat, size, sgn)
        valid = jp.abs(c) >= SIDE_EPS
        return (face[None], jp.full((1,), NGON, jp.int32), normal[None], valid[None],
                jp.abs(c) >= FACE_TOL)
    if gtype == _G.BOX:
        corners = jp.asarray(multiccd.BOX_SIGN, dt) * size
        face = to_world(mat, corners[jp.asarray(BOX_FACE_C)], pos)  # MuJoCo's arithmetic
        normal = jp.asarray(multiccd.BOX_NORMAL, dt) @ mat.T
        count = jp.full((6,), 4, jp.int32)
    elif gtype == _G.MESH:
        # MuJoCo's candidates are the polygons of its contact feature: here those at the
        # supporting vertex (a mesh has polygons facing the contact far from it)
        wv = to_world(mat, verts, pos)  # MuJoCo's arithmetic
        first, at_vertex, _, _ = _feature(feature)
        top = math.argmax(nout @ wv.T)
        fidx, count, lnormal = multiccd.faces_at(table, top if first is None else
                                                 where(at_vertex, top, first))
        k = jp.arange(fidx.shape[1])
        if feature is not None:  # an edge's or a face's polygons hold all its vertices
            real = k[None] < count[:, None]
            holds_all = jp.all(jp.stack([jp.any(real & (fidx == v), 1) for v in feature[0]]),
                               0)
            count = where(at_vertex | holds_all, count, 0)
        # MuJoCo walks a mesh polygon backwards
        rev = where(k[None] < count[:, None], count[:, None] - 1 - k[None], 0)
        face = wv[jp.take_along_axis(fidx, rev, axis=1)]
        normal = lnormal.astype(dt) @ mat.T
    else:
        z = jp.zeros((1, 3, 3), dt)
        return (z, jp.zeros((1,), jp.int32), jp.zeros((1, 3), dt), jp.zeros((1,), bool),
                jp.zeros((), bool))
    cosn = normal @ nout
    touch = jp.max(where(count > 0, cosn, -2.0)) >= FACE_TOL
    flat = (count > 0) & (cosn >= FACE_TOL)
    if gtype == _G.MESH:
        # coplanar polygons (a mesh face the hull split) where MuJoCo's contact feature is
        # unknown (its search not taken): the one holding the witness point, the face
        # MuJoCo's feature would be. A known feature offers all its polygons: 4.0's
        # mjc_multicontact takes, of the feature's polygon normals (meshNormals: at a
        # vertex every polygon of mesh_polymap), the face pair most opposed (n1 . n2 least,
        # strictly, in polygon order; read from libmujoco 4.0), and the split halves'
        # float normals differ by ~1e-7: _face_face's argmax does the same. The witness
        # rule there put 2 of 162 cylinder-mesh states at margin 0.01 on the other half
        # (another clipped polygon, another count)
        side, kmask = jax.vmap(multiccd._side_planes)(face, count, normal)
        out = jp.sum((witness[None, None] - face) * side, -1) > 1e-9
        holds = flat & ~jp.any(out & kmask, axis=1)
        unknown = jp.ones((), bool) if feature is None else ~feature[1]
        flat = where(unknown & jp.any(holds), holds, flat)
    valid = where(touch, flat, (count > 0) & (cosn > EDGE_TOL))
    return face, count, normal, valid, touch


def _edges(gtype, pos, mat, size, verts, table, nout, witness, exact: bool, through=None,
           feature=None):
    """Candidate edges (E, 2, 3) of a geom at its contact along ``nout`` and their validity.

    A capsule's generator through its witness point; a cylinder's generator from the rim
    point supporting it along ``nout`` (or at the azimuth of ``through``, (point, use)) to
    the other cap; a box's edges at its supporting vertex, a mesh's at its contact feature
    (``_faces``: an edge itself, none at a face, else those at the supporting vertex) (with
    ``exact``, a box's or cylinder's only where its two ends are at the same depth).
    """
    dt = pos.dtype
    axis = mat[:, 2]
    if gtype == _G.CAPSULE:
        pr = jp.dot(witness - pos, axis)
        e = jp.stack([witness - axis * (pr + size[1]), witness + axis * (size[1] - pr)])
        return e[None], jp.ones((1,), bool)
    if gtype == _G.CYLINDER:
        loc = mat.T @ nout
        if through is not None:
            # MuJoCo 4.0 takes the generator at its EPA face's first vertex (measured:
            # tests/test_cylinder_multiccd.py, "generator" states)
            at = mat.T @ (through[0] - pos)
            loc = where(through[1], jp.concatenate([at[:2], loc[2:]]), loc)
        r2 = loc[0] * loc[0] + loc[1] * loc[1]
        ok = r2 >= MINVAL * MINVAL
        scl = where(ok, size[0] / jp.sqrt(where(ok, r2, 1.0)), 0.0)
        s = where(loc[2] >= 0, 1.0, -1.0).astype(dt)
        v = mat @ jp.stack([scl * loc[0], scl * loc[1], s * size[1]]) + pos
        e = jp.stack([v, v - axis * (2 * s * size[1])])
        valid = jp.ones((1,), bool)
        if exact:
            valid = valid & (jp.abs(2 * s * size[1] * jp.dot(axis, nout)) <= EXACT_EDGE)
        return e[None], valid
    if gtype == _G.BOX:
        loc = mat.T @ nout
        sg = where(loc >= 0, 1.0, -1.0).astype(dt)
        v = mat @ (sg * size) + pos
        flip = 1.0 - 2.0 * jp.eye(3, dtype=dt)
        ends = (sg[None] * flip * size) @ mat.T + pos
    elif gtype == _G.MESH:
        # MuJoCo's edges at a vertex: one per polygon holding it (the first 3, in polygon
        # order), to the vertex before it in the polygon
        wv = to_world(mat, verts, pos)  # MuJoCo's arithmetic
        top = math.argmax(nout @ wv.T)
        v = wv[top]
        fidx, count, _ = multiccd.faces_at(table, top)
        k = jp.arange(fidx.shape[1])
        at = jp.argmax((fidx == top) & (k[None] < count[:, None]), axis=1)
        before = where(at == 0, count - 1, at - 1)
        prev = jp.take_along_axis(fidx, before[:, None], axis=1)[:, 0]
        first3 = (jp.arange(fidx.shape[0]) < 3) & (count > 0)
        ends = where(first3[:, None], wv[prev], v)  # zero length: no edge
        if feature is not None:
            _, _, at_edge, at_face = _feature(feature)
            ids = feature[0]
            other = where(ids[1] != ids[0], ids[1], ids[2])
            lo, hi = jp.minimum(ids[0], other), jp.maximum(ids[0], other)
            v = where(at_edge, wv[lo], v)
            one = jp.arange(ends.shape[0]) == 0
            ends = where(at_edge, where(one[:, None], wv[hi], wv[lo]), ends)
            ends = where(at_face, v, ends)  # zero length: no edge
    else:
        z = jp.zeros((1, 2, 3), dt)
        return z, jp.zeros((1,), bool)
    e = jp.stack([jp.broadcast_to(v, ends.shape), ends], 1)
    length = math.safe_norm(ends - v, axis=-1)
    valid = length > MINVAL
    if exact:
        valid = valid & (jp.abs((ends - v) @ nout) <= EXACT_EDGE)
    return e, valid


def _edge_face(edges, evalid, face, count, normal, fvalid):
    """The (edge, face) pair MuJoCo takes: the first face (in its order) with an edge lying
    in it, and the first such edge (in its order; 4.0 measured: not the most parallel one).

    Returns (ok, edge (2, 3), face corners (K, 3), count, normal)."""
    u = edges[:, 1] - edges[:, 0]
    un = u / jp.maximum(math.safe_norm(u, axis=-1, keepdims=True), MINVAL)
    sine = jp.abs(un @ normal.T)  # (E, F)
    fits = evalid[:, None] & fvalid[None] & (sine < EDGE_TOL)
    anyf = jp.any(fits, 0)
    f = jp.argmax(anyf)
    e = jp.argmax(fits[:, f])
    return jp.any(anyf), edges[e], face[f], count[f], normal[f]


def _face_face(face1, cnt1, nrm1, fv1, face2, cnt2, nrm2, fv2, margin):
    """Face-face contacts of the best-facing pair of candidate faces: (aligned, n2, dist (4,),
    x1 (4, 3), x2 (4, 3), mask (4,)); an aligned pair whose points all lie beyond the margin
    leaves MuJoCo's single contact."""
    cap = face1.shape[1] + face2.shape[1]
    facing = -(nrm1 @ nrm2.T)
    facing = where(fv1[:, None] & fv2[None], facing, -3.0)
    best = jp.argmax(facing.reshape(-1))
    i, j = best // facing.shape[1], best % facing.shape[1]
    ok = facing[i, j] > FACE_TOL
    F1, c1, n1 = face1[i], cnt1[i], nrm1[i]
    F2, c2, n2 = face2[j], cnt2[j], nrm2[j]
    pts, npts = clip_polygon(F1, c1, n1, F2, c2, cap)
    # heights, projections and depths in MuJoCo's arithmetic (libmujoco 4.0's polygonClip)
    keep = (jp.arange(cap) < npts) & (math.dot3(pts - F1[0], n1) <= margin)
    pts, npts = multiccd.compact(pts, keep, cap)
    p = pts[multiccd.polygon_quad(pts, npts, cap, skip=~ok)]  # (0, 1, 2, 3) where npts <= 4
    mask = jp.arange(4) < jp.minimum(npts, 4)
    w1 = p - math.rounded(n1 * math.dot3(p - F1[0], n1)[:, None])
    d = math.dot3(w1 - p, n2)
    return ok, n2, d, w1, w1 - math.rounded(d[:, None] * n2), mask


def manifold(type1, type2, dist, n, pos, pos1, mat1, size1, verts1, table1, pos2, mat2,
             size2, verts2, table2, margin, ncon: int, gen=None):
    """The multi-contact rule for a pair with a cylinder or capsule, given GJK/EPA's result
    (dist, unit normal n from geom1 to geom2, pos midway): (dist, pos, normal, valid), each
    with ``ncon`` rows. ``gen``: None, or (gen1, gen2, taken, ids2) of ``nativeccd.refine``:
    where taken, a cylinder's generator is at the azimuth of its point there, and a mesh
    geom 2's candidates are those of its contact feature (``_faces``)."""
    dt = pos.dtype
    # MuJoCo inflates each geom by half the margin: a capsule's witness (hence its generator)
    # moves with it; a face stays put and the half margin is added to the points afterwards
    h1 = 0.0 if type1 == _G.CAPSULE else 0.5 * margin
    h2 = 0.5 * margin
    x1 = pos - n * (dist / 2) + n * (0.5 * margin - h1)
    x2 = pos + n * (dist / 2)
    face1, cnt1, nrm1, fv1, touch1 = _faces(type1, pos1, mat1, size1, verts1, table1, n, x1)
    feature2 = None if gen is None or type2 != _G.MESH else (gen[3], gen[2])
    face2, cnt2, nrm2, fv2, touch2 = _faces(type2, pos2, mat2, size2, verts2, table2, -n,
                                            x2, feature2)
    k1, k2 = face1.shape[1], face2.shape[1]

    # 1. face-face: the pair of candidate faces most nearly facing each other (a capsule
    # has none)
    if type1 == _G.CAPSULE:
        ff = jp.zeros((), bool)
        n2 = -n
        ff_d = jp.zeros((ncon,), dt)
        ff_x1 = ff_x2 = jp.zeros((ncon, 3), dt)
        ff_mask = jp.zeros((ncon,), bool)
    else:
        ff, n2, ff_d, ff_x1, ff_x2, ff_mask = _face_face(face1, cnt1, nrm1, fv1, face2, cnt2,
                                                        nrm2, fv2, h1 + h2)

    # 2. edge-face: geom1's edge on geom2's face, else geom2's edge on geom1's face
    t1 = t2 = None
    if gen is not None:
        t1, t2 = (gen[0], gen[2]), (gen[1], gen[2])
    e1, ev1 = _edges(type1, pos1, mat1, size1, verts1, table1, n, x1, False, t1)
    e2, ev2 = _edges(type2, pos2, mat2, size2, verts2, table2, -n, x2,
                     type1 == _G.CYLINDER and type2 in (_G.BOX, _G.CYLINDER), t2, feature2)
    ok1, E1, G2, gc2, gn2 = _edge_face(e1, ev1, face2, cnt2, nrm2, fv2)
    ok2, E2, G1, gc1, gn1 = _edge_face(e2, ev2, face1, cnt1, nrm1, fv1)
    if type1 == _G.CYLINDER:
        # 4.0 (mjc_multicontact, read from libmujoco) orders the two by the dimension of
        # each geom's feature (the distinct vertex ids of EPA's nearest face or GJK's
        # simplex): a cylinder's ids are its caps', so its feature is never a face and its
        # generator is tried against geom 2's face even where its cap touches, geom 2's
        # edge on geom 1's face where that finds nothing
        try1 = jp.any(fv2)
        use1 = try1 & ok1
        use2 = ~use1 & ~touch2 & jp.any(fv1) & ok2
    else:
        try1 = ~touch1 & jp.any(fv2)
        try2 = ~try1 & ~touch2 & jp.any(fv1)
        use1 = try1 & ok1
        use2 = try2 & ok2
    kf = max(k1, k2)
    G = where(use1, multiccd._pad(G2, kf), multiccd._pad(G1, kf))
    gc = where(use1, gc2, gc1)
    gn = where(use1, gn2, gn1)
    E = where(use1, E1, E2)
    seg, mult = clip_edge(G, gc, gn, E[0], E[1])
    proj = multiccd._project(seg, gn, G[0])
    ed = (seg - proj) @ gn
    # points above the margin go; of more than two left, the two ends stay; an end cut by
    # the face's side planes counts twice, so a lone cut end gives two equal contacts
    mult = where(ed <= h1 + h2, mult, 0)
    total = jp.sum(mult)
    lone = jp.argmax(mult)
    two_same = (total == 2) & (jp.max(mult) == 2)
    sel = where(two_same, jp.stack([lone, lone]), where(mult[0] > 0, jp.arange(2),
                                                              jp.array([1, 0])))
    ecnt = jp.minimum(total, 2)
    seg, proj = seg[sel], proj[sel]
    # geom1's edge: x1 on the edge, normal -n_face; geom2's edge: x2 on the edge, normal n_face
    ex1 = where(use1, seg, proj)
    ex2 = where(use1, proj, seg)
    ed = where(use1, 1.0, -1.0) * jp.sum((ex1 - ex2) * gn, -1)

    pad = lambda x, fill=0.0: multiccd._pad(x, ncon, fill)[:ncon]  # noqa: E731
    is_ff = ff & jp.any(ff_mask)
    is_ef = ~ff & (use1 | use2) & (ecnt > 0)
    rows = jp.arange(ncon)
    m_dist = where(is_ff, pad(ff_d[:ncon]), pad(ed))
    m_x1 = where(is_ff, pad(ff_x1[:ncon]), pad(ex1))
    m_x2 = where(is_ff, pad(ff_x2[:ncon]), pad(ex2))
    m_mask = where(is_ff, pad(ff_mask[:ncon], False), rows < ecnt)
    m_normal = where(is_ff, -n2, where(use1, -gn, gn))

    # the half margins back on the points: x1 out along the normal, x2 back against it
    m_x1 = m_x1 + h1 * m_normal
    m_x2 = m_x2 - h2 * m_normal
    m_dist = m_dist + margin - h1 - h2
    multi = is_ff | is_ef
    single = rows == 0
    out_dist = where(multi, m_dist, where(single, dist, 0.0))
    out_pos = where(multi, 0.5 * (m_x1 + m_x2), where(single[:, None], pos, 0.0))
    out_normal = jp.broadcast_to(where(multi, m_normal, n), (ncon, 3)).astype(dt)
    valid = (dist <= margin) & where(multi, m_mask, single)
    return out_dist, out_pos, out_normal, valid


def make_cylinder_multiccd(type1: int, type2: int):
    """A collider for a capsule or cylinder pair under multiccd, with the driver's signature
    plus mesh vertices and polygon tables."""
    ncon = 2 if type1 == _G.CAPSULE else 4

    def after(dist, n, pos, pos1, mat1, size1, pos2, mat2, size2, margin, verts1=None,
              verts2=None, table1=None, table2=None, gen=None):
        d, p, nrm, valid = manifold(type1, type2, dist, n, pos, pos1, mat1, size1, verts1,
                                    table1, pos2, mat2, size2, verts2, table2, margin, ncon,
                                    gen)
        return d, p, nrm, jp.zeros_like(p), valid

    collide = convex.ccd_collider(type1, type2, after, ncon, "multiccd")
    collide.POLY = _G.MESH in (type1, type2)
    collide.GEN = True
    return collide

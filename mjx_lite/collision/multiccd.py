"""MuJoCo 4.0's single-shot multi-contact for box-mesh and mesh-mesh pairs (``multiccd``).

Measured against mujoco 4.0.0 (``tests/multiccd_reference.py``, ``tests/test_convex.py``), not
read from its source. MuJoCo's own GJK/EPA search (``nativeccd``: ``hfield_ccd``'s port with
the box or mesh geom 1 in the prism's place; discrete stops at margin 0, both shapes grown by
half the margin with the smooth stops beyond; apart within the margin, its GJK distance
query) gives the single contact (normal ``n`` geom1 -> geom2) and each geom's feature; then:

* each geom's feature is the distinct vertex ids (box corners, mesh vertices) it has in EPA's
  nearest face, or, apart within the margin, in GJK's final simplex: a vertex, an edge or a
  face (1, 2 or 3 ids), as 4.0 reads them (checked by calling libmujoco 4.0's mjc_ccd: its
  ids agree with ours on every touching state of ``test_convex``'s box-pebble,
  box-dodecahedron, box-rock, rock-pebble and dodecahedron-rock sweeps, margin 0 and 0.01,
  but one, a tie of mesh vertices its hill-climbing support breaks the other way,
  ``hfield_ccd``'s docstring). Where that search is not taken (it failed), the support set
  along the converged ``n`` of ``convex`` (vertices within a rounding tolerance of the
  support value). Its candidate faces are the polygons (box faces; a mesh's
  ``mesh_poly*``) holding the whole feature;
* face-face: of the candidate pairs facing each other (``n1 . n2 < -FACE_TOL``), the most
  opposed; geom2's face is clipped (Sutherland-Hodgman) by the side planes of geom1's face,
  each point ``p`` is projected along ``n1`` onto geom1's face plane (``x1``), the frame normal
  is ``-n2``, ``dist = (p - x1) . (-n2)``, ``pos = x1 - n2 dist / 2``;
* else edge-face: an edge of geom1's feature (the feature itself, or at a vertex the edge to
  the previous corner of each polygon holding it) lying in one of geom2's candidate faces
  (``|u . n_face| < EDGE_TOL``; faces outer, edges inner, first found), else the same with the
  geoms swapped; the edge is clipped by the face's side planes and projected along the face's
  normal onto its plane, the frame normal is that face's normal pointing from geom1 to geom2;
* otherwise, or when no point is left, the single EPA contact.

Measured (``tests/acceptance/collision_multiccd.txt``): with MuJoCo's own features every
margin-0.01 state of the five pairs is within the convex tolerances (worst pos 3.8e-10
box-pebble, 2.1e-8 box-dodecahedron; before, with support sets, 3 states off and pos up to
3.5e-5), and at margin 0 one box-pebble state is off (the hill-climb tie).

The tolerances are those measured for cylinders (``cylinder.py``): 0.996 and 0.0888. Points
with ``dist > margin`` are dropped; more than ``NCON`` points keep the quadrilateral of
MuJoCo's greedy maximal-area search (``polygon_quad``). Shapes are static: candidate faces
are the few polygons at the feature's first vertex, a polygon is a padded corner array with
a count, clipping runs over a fixed capacity.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np
from jax import lax

from mjx_lite import math
from mjx_lite.collision import convex
from mjx_lite.math import where
from mjx_lite.types import GeomType

# faces facing each other: n1 . n2 < -FACE_TOL; an edge in a face: |u . n| < EDGE_TOL
FACE_TOL = 0.996
EDGE_TOL = 0.0888
NCON = 4
MINVAL = math.MINVAL
_G = GeomType


def _box_tables():
    """Box corners as sign bits (bit k: +size[k]), faces as corner ids counter-clockwise from
    outside in the order +x, -x, +y, -y, +z, -z, and the three faces at each corner, x then
    y then z (face 2k for +axis k, 2k + 1 for -axis k)."""
    faces, normals = [], []
    for ax, sgn in [(0, 1), (0, -1), (1, 1), (1, -1), (2, 1), (2, -1)]:
        u, v = (ax + 1) % 3, (ax + 2) % 3
        ids = []
        for a, b in [(1, 1), (-1, 1), (-1, -1), (1, -1)]:
            s = np.zeros(3)
            s[ax], s[u], s[v] = sgn, a, b
            ids.append(int(sum(1 << k for k in range(3) if s[k] > 0)))
        faces.append(ids[::sgn])
        n = np.zeros(3)
        n[ax] = sgn
        normals.append(n)
    vpoly = np.array([[2 * k + (0 if i >> k & 1 else 1) for k in range(3)] for i in range(8)],
                     np.int32)
    sign = np.array([[1.0 if i >> k & 1 else -1.0 for k in range(3)] for i in range(8)])
    return np.array(faces, np.int32), np.array(normals), vpoly, sign


BOX_FACE, BOX_NORMAL, BOX_VPOLY, BOX_SIGN = _box_tables()


def mesh_tables(m, meshes: np.ndarray, nvert: int):
    """Static polygon tables of meshes (one per pair), padded to common sizes.

    Args:
      m: Model with mesh_poly* fields.
      meshes: (n,) mesh ids.
      nvert: padded vertex count (vertex ids index the geom's padded vertex array).
    Returns:
      face (n, P, K) corner ids, facenum (n, P) corners (0: padding polygon), normal (n, P, 3)
      local unit normals, nbr (n, nvert, D) polygon-edge neighbours of each vertex (padding
      repeats the vertex itself), vpoly (n, nvert, Q) the polygons holding each vertex in
      increasing order (padding: P, one past the last; ``faces_at`` reads them).
    """
    adr, num = np.asarray(m.mesh_polyadr), np.asarray(m.mesh_polynum)
    vadr, vnum = np.asarray(m.mesh_polyvertadr), np.asarray(m.mesh_polyvertnum)
    pvert, pnormal = np.asarray(m.mesh_polyvert), np.asarray(m.mesh_polynormal)
    P = max(1, int(num[meshes].max()))
    K = max(3, max(int(vnum[adr[i]:adr[i] + num[i]].max(initial=0)) for i in meshes))
    face = np.zeros((len(meshes), P, K), np.int32)
    facenum = np.zeros((len(meshes), P), np.int32)
    normal = np.zeros((len(meshes), P, 3))
    nbrs, polys = [], []
    for r, i in enumerate(meshes):
        nb = [set() for _ in range(nvert)]
        at = [[] for _ in range(nvert)]
        polys.append(at)
        for f in range(num[i]):
            ids = pvert[vadr[adr[i] + f]:vadr[adr[i] + f] + vnum[adr[i] + f]]
            for v in set(int(x) for x in ids):
                at[v].append(f)
            face[r, f, :len(ids)] = ids
            face[r, f, len(ids):] = ids[0]
            facenum[r, f] = len(ids)
            normal[r, f] = pnormal[adr[i] + f]
            for k in range(len(ids)):
                a, b = int(ids[k]), int(ids[(k + 1) % len(ids)])
                nb[a].add(b)
                nb[b].add(a)
        nbrs.append(nb)
    D = max(1, max(len(s) for nb in nbrs for s in nb))
    nbr = np.zeros((len(meshes), nvert, D), np.int32)
    for r, nb in enumerate(nbrs):
        for v, s in enumerate(nb):
            lst = sorted(s)
            nbr[r, v] = lst + [v] * (D - len(lst))
    Q = max(1, max(len(a) for at in polys for a in at))
    vpoly = np.full((len(meshes), nvert, Q), P, np.int32)
    for r, at in enumerate(polys):
        for v, a in enumerate(at):
            vpoly[r, v, :len(a)] = a
    return face, facenum, normal, nbr, vpoly


def faces_at(table, vertex):
    """The polygons holding ``vertex``, in polygon order: (face (Q, K), facenum (Q,) with 0
    for padding, normal (Q, 3)), so a collider looks at a few polygons instead of all P."""
    face, facenum, normal, _, vpoly = table
    ids = vpoly[vertex]
    real = ids < face.shape[0]
    ids = where(real, ids, 0)
    return face[ids], where(real, facenum[ids], 0), normal[ids]


def _side_planes(face, cnt, normal):
    """Outward side normals (K, 3) of a polygon's edges and their anchor points; padded
    edges (k >= cnt) are masked by the caller."""
    K = face.shape[0]
    k = jp.arange(K)
    nxt = face[where(k + 1 < cnt, k + 1, 0)]
    side = math.cross(nxt - face, normal)
    kmask = k < cnt
    center = jp.sum(where(kmask[:, None], face, 0.0), 0) / jp.maximum(cnt, 1)
    flip = jp.sum((center - face) * side, -1) > 0
    return where(flip[:, None], -side, side), kmask


def clip_polygon(face, cnt, normal, subject, scnt, cap: int):
    """Sutherland-Hodgman: the part of polygon ``subject`` inside the prism of the convex
    polygon ``face`` along ``normal``.

    Args:
      face: (K, 3) corners, the first ``cnt`` real. normal: (3,).
      subject: (S, 3) corners, the first ``scnt`` real. cap: static output capacity.
    Returns:
      (cap, 3) points, their count.
    """
    side, kmask = _side_planes(face, cnt, normal)
    pts = jp.zeros((cap, 3), subject.dtype).at[:subject.shape[0]].set(subject[:cap])
    n = jp.minimum(scnt, cap)
    i = jp.arange(cap)
    for e in range(face.shape[0]):
        a, s = face[e], side[e]
        q = pts[where(i + 1 < n, i + 1, 0)]
        dp = jp.sum((pts - a) * s, -1)
        dq = jp.sum((q - a) * s, -1)
        live = i < n
        cross = live & ((dp > 0) != (dq > 0))
        den = where(cross, dp - dq, 1.0)
        inter = pts + (dp / den)[:, None] * (q - pts)
        keep_q = live & (dq <= 0)
        cand = jp.stack([inter, q], 1).reshape(-1, 3)
        cmask = jp.stack([cross, keep_q], 1).reshape(-1)
        rank = jp.cumsum(cmask) - 1
        slot = where(cmask & (rank < cap), rank, cap)
        new = jp.zeros((cap, 3), pts.dtype).at[slot].set(cand, mode="drop")
        newn = jp.minimum(jp.sum(cmask), cap)
        pts = where(kmask[e], new, pts)
        n = where(kmask[e], newn, n)
    return pts, n


def clip_interval(face, cnt, normal, a, b):
    """The part of segment ab inside the prism of polygon ``face`` along ``normal``: its
    (2, 3) end points, their parameters lo, hi along ab, and whether it is empty."""
    side, kmask = _side_planes(face, cnt, normal)
    da = jp.sum((a - face) * side, -1)
    db = jp.sum((b - face) * side, -1)
    out_a, out_b = da > 0, db > 0
    cross = kmask & (out_a != out_b)
    t = da / where(cross, da - db, 1.0)
    lo = jp.max(where(cross & out_a, t, 0.0))
    hi = jp.min(where(cross & out_b, t, 1.0))
    empty = jp.any(kmask & out_a & out_b) | (lo > hi)
    pts = jp.stack([a + lo * (b - a), a + hi * (b - a)])
    return pts, lo, hi, empty


def _keep4(x1, x2, mask):
    """At most NCON of the masked points, in their ring order: all of them when they fit,
    else the quadrilateral ``polygon_quad`` picks. Returns x1, x2 (NCON, 3) and their mask.

    MuJoCo's greedy search, not the largest-area quadrilateral: on a five-corner rock-pebble
    face-face patch (test_convex.margin_sweep, state 68) the greedy one has area 5.01e-5
    where the largest has 5.96e-5, and MuJoCo 4.0 reports the former. The search depends on
    the ring's start and direction: on the clipped polygon of mesh faces walked forwards it
    put 3 of 100 rock-pebble states off MuJoCo, walked backwards (``manifold``) none."""
    cap = max(mask.shape[0], NCON)
    (c1, cnt), (c2, _) = compact(x1, mask, cap), compact(x2, mask, cap)
    if cap == NCON:
        return c1, c2, jp.arange(NCON) < cnt
    pick = polygon_quad(c2, cnt, cap)  # (0, 1, 2, 3) where cnt <= NCON
    return c1[pick], c2[pick], jp.arange(NCON) < jp.minimum(cnt, NCON)


def compact(x, mask, cap: int):
    """The rows of x (n, ...) where mask, in order, padded to ``cap`` rows; and their count."""
    rank = jp.cumsum(mask) - 1
    slot = where(mask & (rank < cap), rank, cap)
    out = jp.zeros((cap, *x.shape[1:]), x.dtype).at[slot].set(x, mode="drop")
    return out, jp.minimum(jp.sum(mask), cap)


def polygon_quad(p, cnt, cap: int, skip=False):
    """MuJoCo's greedy search for a maximal-area quadrilateral in a convex polygon of
    ``cnt`` > 4 corners: from (0, 1, 2, 3), for each first corner ``a`` advance the fourth
    corner while the area grows, after each advance the third, then the second; the area
    to beat carries over between first corners. Not the global maximum: on symmetric
    polygons it depends on which of equal areas compares larger, so the area is MuJoCo's to
    the last bit (read from libmujoco 4.0's polygonClip): ``0.5 sqrt((cx^2 + cy^2) + cz^2)``
    of ``c = (a - c) x (b - d)``, no fused multiply-adds, a candidate taken when strictly
    larger.

    Args:
      p: (cap, 3) corners, the first ``cnt`` real. cap: static capacity.
      skip: no search (its result is not used); also skipped where ``cnt`` <= 4.
    Returns:
      (4,) corner indices.
    """
    q = jax.lax.stop_gradient(p)
    n = jp.maximum(cnt, 4).astype(jp.int32)

    def area(i):
        a, b, c, d = q[i[0]], q[i[1]], q[i[2]], q[i[3]]
        cr = math.rounded_cross(a - c, b - d)
        return 0.5 * jp.sqrt(math.dot3(cr, cr))

    def step(st):
        a, b, c, d, m, res, phase, done, k = st
        nxt = lambda x: (x + 1) % n  # noqa: E731
        cand = where(phase == 0, jp.stack([a, b, c, nxt(d)]),
                        where(phase == 1, jp.stack([a, b, nxt(c), d]),
                                 jp.stack([a, nxt(b), c, d])))
        val = area(cand)
        trying = (phase <= 2) & ~done
        acc = trying & (val > m)
        # phase 3 closes a first corner: move b (and c, d) off a, then take the next a
        b3 = where(b == a, nxt(b), b)
        c3 = where((b == a) & (c == b3), nxt(c), c)
        d3 = where((b == a) & (c == b3) & (c3 != c) & (d == c3), nxt(d), d)
        close = (phase == 3) & ~done
        a2 = where(close, a + 1, a)
        b2 = where(acc, cand[1], where(close, b3, b))
        c2 = where(acc, cand[2], where(close, c3, c))
        d2 = where(acc, cand[3], where(close, d3, d))
        m2 = where(acc, val, m)
        res2 = where(acc, cand, res)
        phase2 = where(done, phase, where(
            phase == 0, where(acc, 1, 3), where(
                phase == 1, where(acc, 1, 2), where(
                    phase == 2, where(acc, 2, 0), 0))))
        done2 = done | (close & (a2 >= n))
        i32 = lambda x: x.astype(jp.int32)  # noqa: E731
        return (i32(a2), i32(b2), i32(c2), i32(d2), m2, i32(res2), i32(phase2), done2,
                k + 1)

    i4 = jp.arange(4, dtype=jp.int32)
    st = (jp.zeros((), jp.int32), jp.ones((), jp.int32), jp.full((), 2, jp.int32),
          jp.full((), 3, jp.int32), area(i4), i4, jp.zeros((), jp.int32),
          jp.asarray(skip) | (cnt <= 4), jp.zeros((), jp.int32))
    # at most about 5.5 steps per corner (tests/test_cylinder_multiccd.py); a while loop
    # on indices (nothing to differentiate) that ends when every batch member is done
    out = jax.lax.while_loop(lambda st: ~st[7] & (st[8] < 6 * cap + 16), step,
                             math.lanewise(st, st[4]))
    return out[5]


def _backwards(face, cnt):
    """The first ``cnt`` corners of ``face`` (K, 3) in reverse order, the padding kept."""
    i = jp.arange(face.shape[0])
    return face[where(i < cnt, cnt - 1 - i, i)]


def _project(p, normal, origin):
    """Points p (..., 3) projected along ``normal`` onto the plane through ``origin``."""
    return p - jp.sum((p - origin) * normal, -1, keepdims=True) * normal


def _polytope(gtype, size, verts, table):
    """(verts (V, 3), valid (V,), face (P, K), facenum (P,), normal (P, 3), vpoly (V, Q)) in
    the geom frame; padded mesh vertices (no polygon) are not valid."""
    if gtype == _G.BOX:
        return (jp.asarray(BOX_SIGN, size.dtype) * size, jp.ones(8, bool), jp.asarray(BOX_FACE),
                jp.full(6, 4, jp.int32), jp.asarray(BOX_NORMAL, size.dtype),
                jp.asarray(BOX_VPOLY))
    face, facenum, normal, _, vpoly = table
    valid = vpoly[:, 0] < face.shape[0]
    return verts, valid, face, facenum, normal.astype(verts.dtype), vpoly


def _feature(v, valid, direction, size):
    """The support set of v (V, 3) along ``direction`` (geom frame): its first three vertices
    by support value and how many of them share the maximum (1 vertex, 2 edge, 3 face)."""
    s = lax.stop_gradient(where(valid, direction @ v.T, -jp.inf))
    # three argmaxes: XLA's CPU top_k sorts the whole vertex array
    ids, top = [], []
    for _ in range(3):
        i = math.argmax(s)
        ids.append(i)
        top.append(s[i])
        s = s.at[i].set(-jp.inf)
    ids, top = jp.stack(ids), jp.stack(top)
    tol = 0.1 * float(np.sqrt(np.finfo(v.dtype).eps)) * size
    dim = 1 + jp.sum(top[1:] >= top[0] - tol)
    return ids, dim


def _distinct(ids):
    """The distinct ids of (3,) vertex ids in increasing order (padded with the first) and
    their count: the feature's vertices and dimension (1 vertex, 2 edge, 3 face)."""
    s = jp.sort(ids)
    new = jp.concatenate([jp.ones(1, bool), s[1:] != s[:-1]])
    out, cnt = compact(s, new, 3)
    return where(jp.arange(3) < cnt, out, out[0]), cnt


def _candidates(face, facenum, vpoly, ids, dim):
    """The polygons holding the feature: (polygon ids (Q,), mask (Q,)), in the order of the
    first vertex's polygons."""
    poly = vpoly[ids[0]]
    real = poly < face.shape[0]
    poly = where(real, poly, 0)
    corners = face[poly]
    live = jp.arange(face.shape[1])[None] < facenum[poly][:, None]

    def holds(vertex):
        return jp.any((corners == vertex) & live, 1)

    return poly, real & ((dim < 2) | holds(ids[1])) & ((dim < 3) | holds(ids[2]))


def _edges(face, facenum, poly, mask, ids, dim):
    """The feature's edges as (start, end) vertex ids (Q,) and a mask: an edge feature itself
    (slot 0), or at a vertex the edge to the previous corner of each polygon holding it."""
    corners = face[poly]
    cnt = facenum[poly]
    at = jp.argmax(corners == ids[0], axis=1)
    prev = corners[jp.arange(poly.shape[0]), where(at == 0, cnt - 1, at - 1)]
    slot0 = jp.arange(poly.shape[0]) == 0
    start = jp.full(poly.shape, ids[0])
    end = where(dim == 2, where(slot0, ids[1], ids[0]), prev)
    ok = where(dim == 2, slot0, mask & (cnt > 0)) & (dim < 3)
    return start, end, ok


def _edge_in_face(v_e, e_start, e_end, e_ok, mat_e, n_f, f_ok):
    """First (face, edge) with the edge lying in the face (faces outer, edges inner): (found,
    face slot, edge slot). n_f: world face normals (Qf, 3)."""
    u = (v_e[e_end] - v_e[e_start]) @ mat_e.T
    ln = math.safe_norm(u, axis=-1)
    u = u / where(ln > MINVAL, ln, 1.0)[:, None]
    lies = (jp.abs(n_f @ u.T) < EDGE_TOL) & f_ok[:, None] & (e_ok & (ln > MINVAL))[None]
    flat = jp.argmax(lies.reshape(-1))
    return jp.any(lies), flat // lies.shape[1], flat % lies.shape[1]


def manifold(type1, type2, dist, n, pos, pos1, mat1, size1, verts1, table1, pos2, mat2, size2,
             verts2, table2, margin, feature=None):
    """The multi-contact rule of a box/mesh pair given the GJK/EPA result (dist, unit normal
    n, pos): (dist (NCON,), pos (NCON, 3), normal (NCON, 3), valid (NCON,)). ``feature``:
    None, or (geom-1 ids (3,), geom-2 ids (3,), taken) of MuJoCo's own search
    (``nativeccd.refine``): where taken, each geom's feature is the distinct ids, else its
    support set along n."""
    v1, ok1, face1, fnum1, nrm1, vpoly1 = _polytope(type1, size1, verts1, table1)
    v2, ok2, face2, fnum2, nrm2, vpoly2 = _polytope(type2, size2, verts2, table2)
    scale = lax.stop_gradient(jp.maximum(jp.max(jp.abs(v1)), jp.max(jp.abs(v2))))
    ids1, dim1 = _feature(v1, ok1, mat1.T @ n, scale)
    ids2, dim2 = _feature(v2, ok2, -(mat2.T @ n), scale)
    if feature is not None:
        (f1, c1), (f2, c2), taken = _distinct(feature[0]), _distinct(feature[1]), feature[2]
        ids1, dim1 = where(taken, f1, ids1), where(taken, c1, dim1)
        ids2, dim2 = where(taken, f2, ids2), where(taken, c2, dim2)
    poly1, cand1 = _candidates(face1, fnum1, vpoly1, ids1, dim1)
    poly2, cand2 = _candidates(face2, fnum2, vpoly2, ids2, dim2)
    wn1 = nrm1[poly1] @ mat1.T
    wn2 = nrm2[poly2] @ mat2.T

    # face-face: the most opposed candidate pair
    opp = lax.stop_gradient(wn1 @ wn2.T)
    pair_ok = cand1[:, None] & cand2[None, :] & (opp < -FACE_TOL)
    flat = jp.argmin(where(pair_ok, opp, jp.inf).reshape(-1))
    i1, i2 = poly1[flat // opp.shape[1]], poly2[flat % opp.shape[1]]
    face_face = jp.any(pair_ok)

    # edge-face: geom1's edge in geom2's face, else geom2's edge in geom1's face
    s1, e1, eok1 = _edges(face1, fnum1, poly1, cand1, ids1, dim1)
    s2, e2, eok2 = _edges(face2, fnum2, poly2, cand2, ids2, dim2)
    found12, f12, k12 = _edge_in_face(v1, s1, e1, eok1, mat1, lax.stop_gradient(wn2), cand2)
    found21, f21, k21 = _edge_in_face(v2, s2, e2, eok2, mat2, lax.stop_gradient(wn1), cand1)
    edge_face = ~face_face & (found12 | found21)
    on2 = found12  # the face is geom2's (geom1's edge lies in it)
    i1 = where(face_face, i1, poly1[f21])
    i2 = where(face_face, i2, poly2[f12])
    F1, k1, n1 = v1[face1[i1]] @ mat1.T + pos1, fnum1[i1], mat1 @ nrm1[i1]
    F2, k2, n2 = v2[face2[i2]] @ mat2.T + pos2, fnum2[i2], mat2 @ nrm2[i2]

    # face-face: geom2's face clipped by geom1's side planes
    cap = F1.shape[0] + F2.shape[0]
    # a mesh face in MuJoCo's corner order, its polygon walked backwards (box faces are in
    # it already): clipping keeps the subject's ring order, and with more than NCON points
    # polygon_quad's greedy search depends on where the ring starts
    C1 = _backwards(F1, k1) if type1 == _G.MESH else F1
    C2 = _backwards(F2, k2) if type2 == _G.MESH else F2
    pts, cnt = clip_polygon(C1, k1, n1, C2, k2, cap)
    ff_x1, ff_x2 = _project(pts, n1, F1[0]), pts
    ff_mask = jp.arange(cap) < cnt

    # edge-face: the edge clipped by the face
    ea = where(on2, mat1 @ v1[s1[k12]] + pos1, mat2 @ v2[s2[k21]] + pos2)
    eb = where(on2, mat1 @ v1[e1[k12]] + pos1, mat2 @ v2[e2[k21]] + pos2)
    Ff = where(on2, _pad(F2, F1.shape[0]), _pad(F1, F2.shape[0]))
    kf = where(on2, k2, k1)
    nf = where(on2, n2, n1)
    # MuJoCo clips the edge as a closed two-corner polygon: an end cut by a side plane
    # comes out twice, so a lone cut end left under the margin gives two equal contacts
    # (measured in models/collision_scene.xml's settled pile, box 2 on mesh 27)
    seg, lo, hi, empty = clip_interval(Ff, kf, nf, ea, eb)
    mult = where(empty, 0, 1 + jp.stack([lo > 0, hi < 1]).astype(jp.int32))
    proj = _project(seg, nf, Ff[0])
    ef_x1 = where(on2, seg, proj)
    ef_x2 = where(on2, proj, seg)
    ef_n = where(on2, -n2, n1)
    mult = where(jp.sum((ef_x2 - ef_x1) * ef_n, -1) <= margin, mult, 0)
    total = jp.sum(mult)
    lone = jp.argmax(mult)
    two_same = (total == 2) & (jp.max(mult) == 2)
    sel = where(two_same, jp.stack([lone, lone]),
                   where(mult[0] > 0, jp.arange(2), jp.array([1, 0])))
    ef_x1, ef_x2 = ef_x1[sel], ef_x2[sel]
    ef_mask = jp.arange(2) < jp.minimum(total, 2)

    x1 = where(face_face, ff_x1, _pad(ef_x1, cap))
    x2 = where(face_face, ff_x2, _pad(ef_x2, cap))
    mask = where(face_face, ff_mask, _pad(ef_mask, cap, False))
    mn = where(face_face, -n2, ef_n)
    d = jp.sum((x2 - x1) * mn, -1)
    mask = mask & (d <= margin)
    q1, q2, qmask = _keep4(x1, x2, mask)
    qd = jp.sum((q2 - q1) * mn, -1)
    qpos = q1 + qd[:, None] * mn / 2

    multi = (face_face | edge_face) & jp.any(qmask)
    single = jp.arange(NCON) == 0
    out_dist = where(multi, qd, where(single, dist, 0.0))
    out_pos = where(multi, qpos, where(single[:, None], pos, 0.0))
    valid = (dist <= margin) & where(multi, qmask, single)
    normal = jp.broadcast_to(where(multi, mn, n), (NCON, 3))
    return out_dist, out_pos, normal, valid


def _pad(x, n: int, fill=0.0):
    """x padded along axis 0 to at least n rows (extra rows repeat ``fill``)."""
    extra = n - x.shape[0]
    if extra <= 0:
        return x
    pad = jp.full((extra, *x.shape[1:]), fill, x.dtype)
    return jp.concatenate([x, pad])


def make_multiccd(type1: int, type2: int):
    """A box-mesh or mesh-mesh collider with the driver's signature plus mesh vertices and
    polygon tables: (pos1, mat1, size1, pos2, mat2, size2, margin, verts1, verts2, table1,
    table2)."""

    def after(dist, n, pos, pos1, mat1, size1, pos2, mat2, size2, margin, verts1=None,
              verts2=None, table1=None, table2=None, gen=None):
        feature = None if gen is None else (gen[4], gen[3], gen[2])
        dist, pos, normal, valid = manifold(type1, type2, dist, n, pos, pos1, mat1, size1,
                                            verts1, table1, pos2, mat2, size2, verts2, table2,
                                            margin, feature)
        return dist, pos, normal, jp.zeros_like(pos), valid

    collide = convex.ccd_collider(type1, type2, after, NCON, "multiccd")
    collide.POLY = True
    collide.GEN = True
    return collide

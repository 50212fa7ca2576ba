"""General convex collider (Computation chapter, "Collision detection > Convex collisions"):
GJK for the distance of separated shapes, EPA for the depth of penetrating ones, on the
Minkowski difference of the two shapes' support functions, as MuJoCo's native pipeline does.

A shape is its support function. Spheres and capsules enter as their core (a point, a segment)
and their radius is added afterwards, as MuJoCo's native pipeline does, so that GJK is exact
for them; ellipsoids, cylinders and boxes have closed-form supports; a mesh's support is the
vertex with the largest projection, a vectorized argmax over its vertices (the hull's
support equals the vertex set's, so hulls of hundreds of vertices need no graph).

Both loops are ``lax.while_loop``s over fixed-capacity arrays (EPA's polytope) that end when
every batch member has converged, so they jit and vmap; they search on ``stop_gradient``-ed
poses and the contact is rebuilt from the final simplex or face on the traced ones, so it is
differentiable and the search carries no derivative (``_Pair``).
The contact is MuJoCo's: ``dist`` the signed distance, ``normal`` from geom1 to geom2, ``pos``
midway between the two witness points. One contact per pair: MuJoCo 4.0 returns exactly one
for every pair with a sphere or ellipsoid, and for any pair when ``multiccd`` is disabled.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.math import where
from mjx_lite.types import GeomType

MINVAL = math.MINVAL
GJK_ITERS = 64
EPA_ITERS = 64
BIG = 1e30
_G = GeomType


def _tol(dtype):
    return 1e-6 if jp.dtype(dtype) == jp.float32 else 1e-12


# EPA stops once a new support point gains less than this over the nearest face (relative to
# the polytope's scale): finer gains only add sliver faces whose orientation tests are
# rounding noise, which can break the polytope's topology
EPA_TOL = {"float32": 1e-6, "float64": 1e-10}
# a face counts as seen by a new support point above this height (relative to scale), and the
# seen region grows from the nearest face by at most EPA_GROW face rings
EPA_VISIBLE = {"float32": 1e-7, "float64": 1e-14}
EPA_GROW = 12


def local_support(gtype: int, size, verts, d):
    """Support point of a geom's core in its local frame along local direction ``d``.

    Args:
      gtype: static GeomType.
      size: (3,) geom size.
      verts: (nvert, 3) mesh vertices in the geom frame, or None.
      d: (3,) direction (any length).
    """
    dt = d.dtype
    if gtype == _G.SPHERE:
        return jp.zeros(3, dt)
    if gtype == _G.CAPSULE:
        return jp.array([0.0, 0.0, 1.0], dt) * where(d[2] >= 0, size[1], -size[1])
    if gtype == _G.ELLIPSOID:
        s = d * size
        n = math.safe_norm(s)
        ok = n >= MINVAL
        return where(ok, s * size / where(ok, n, 1.0),
                        jp.array([1.0, 0.0, 0.0], dt) * size[0])
    if gtype == _G.CYLINDER:
        n2 = d[0] * d[0] + d[1] * d[1]
        ok = n2 >= MINVAL * MINVAL
        scl = where(ok, size[0] / jp.sqrt(where(ok, n2, 1.0)), 0.0)
        return jp.stack([scl * d[0], scl * d[1], where(d[2] >= 0, size[1], -size[1])])
    if gtype == _G.BOX:
        return where(d >= 0, size, -size)
    if gtype == _G.MESH:
        return verts[math.argmax(d @ verts.T)]
    raise NotImplementedError(f"no convex support for geom type {gtype}")


def core_radius(gtype: int, size):
    """Radius added to the core shape: spheres and capsules are points and segments."""
    if gtype in (_G.SPHERE, _G.CAPSULE):
        return size[0]
    return jp.zeros((), size.dtype)


def _dot(a, b):
    """a . b over the last axis, elementwise. Its products may fuse into multiply-adds, as
    the einsums it replaced did: with them rounded apart (``math.dot3``) 3 of the 1,408
    float64 cylinder-family states of tests/acceptance/collision_multiccd.txt took another
    search path than before."""
    return math.sum_last(a * b)


def _solve_batch(g, rhs):
    """Solves batched small symmetric systems g x = rhs, g (n, k, k), k = 2 or 3, by
    cofactors. Returns (x (n, k), ok (n,)): ok is False where g is (near-)singular."""
    if g.shape[-1] == 2:
        det = g[:, 0, 0] * g[:, 1, 1] - g[:, 0, 1] * g[:, 1, 0]
        adj = jp.stack([jp.stack([g[:, 1, 1], -g[:, 0, 1]], -1),
                        jp.stack([-g[:, 1, 0], g[:, 0, 0]], -1)], -2)
    else:
        r0, r1, r2 = g[:, 0], g[:, 1], g[:, 2]
        adj = jp.stack([math.cross(r1, r2), math.cross(r2, r0), math.cross(r0, r1)], -1)
        det = _dot(r0, adj[:, :, 0])
    diag = jp.diagonal(g, axis1=-2, axis2=-1)
    scale = diag[:, 0] * diag[:, 1] * (diag[:, 2] if g.shape[-1] == 3 else 1.0) + MINVAL
    ok = jp.abs(det) > 1e-12 * scale
    x = _dot(adj, rhs[:, None, :]) / where(ok, det, 1.0)[:, None]
    return where(ok[:, None], x, 0.0), ok


def _closest_simplex(p, mask):
    """Closest point to the origin of the simplex of points ``p[mask]``.

    Every face of the simplex is tried (15 subsets of 4 slots, batched by size); the nearest
    projection with non-negative barycentric coordinates wins. Returns (v (3,), lam (4,),
    mask (4,)). Its small contractions are elementwise sums (``_dot``, ``math.sum_last``), not
    einsums: GJK runs it every iteration, and vmapped in float32 each reduction or dot is a
    YNNPACK call (cylinder-box group, batch 64: 9 of its 31 ms).
    """
    dt = p.dtype
    eps = -1e-6 if jp.dtype(dt) == jp.float32 else -1e-11
    lams, oks = [jp.eye(4, dtype=dt)], [mask]
    for k in (2, 3, 4):
        sub = np.array([c for c in itertools.combinations(range(4), k)])
        p0 = p[sub[:, 0]]  # (n, 3)
        e = p[sub[:, 1:]] - p0[:, None]  # (n, k-1, 3)
        g = _dot(e[:, :, None], e[:, None])
        rhs = -_dot(e, p0[:, None])
        if k == 2:
            den = g[:, 0, 0]
            good = den > MINVAL
            mu = where(good, rhs[:, 0] / where(good, den, 1.0), 0.0)[:, None]
        else:
            mu, good = _solve_batch(g, rhs)
        lam_s = jp.concatenate([1 - math.sum_last(mu)[:, None], mu], -1)  # (n, k)
        onehot = np.eye(4)[sub].transpose(0, 2, 1)  # (n, 4, k)
        lams.append(_dot(lam_s[:, None, :], onehot.astype(dt)))
        inmask = jp.all(mask[sub], -1)
        oks.append(inmask & good & jp.all(lam_s >= eps, -1))
    lam = jp.concatenate(lams)  # (15, 4)
    ok = jp.concatenate(oks)
    v = _dot(lam[:, None, :], p.T[None])
    # the full tetrahedron holds the origin: its closest point is the origin itself
    v = v.at[-1].set(0.0)
    n2 = where(ok, _dot(v, v), BIG)
    k = math.argmin(n2)
    return v[k], lam[k], lam[k] != 0


def _local_point(gtype: int, size, verts, d):
    """(point, vertex id): a geom core's local support along local ``d``; the id is the
    mesh vertex (0 for other types), so the same point can be rebuilt from (d, id)."""
    if gtype == _G.MESH:
        i = math.argmax(d @ verts.T)
        return verts[i], i
    return local_support(gtype, size, verts, d), jp.zeros((), jp.int32)


def _rebuilt_point(gtype: int, size, verts, d, i):
    """The local support point that ``_local_point`` chose for (d, i), on traced inputs."""
    if gtype == _G.MESH:
        return verts[i]
    return local_support(gtype, size, verts, d)


class _Pair:
    """Two geoms' cores, searched on ``stop_gradient``-ed poses and rebuilt on traced ones.

    A support point of A - B is stored as its key: the local directions and mesh vertex ids
    it was taken at in each geom. The search (GJK, EPA) only needs the Minkowski points; the
    contact is rebuilt from the keys of the final simplex or face with the traced poses and
    sizes, so the search's loops carry no derivative and may stop early.
    """

    def __init__(self, type1, type2, pos1, mat1, size1, verts1, pos2, mat2, size2, verts2):
        self.types = (type1, type2)
        self.traced = (pos1, mat1, size1, verts1, pos2, mat2, size2, verts2)
        self.fixed = jax.tree_util.tree_map(jax.lax.stop_gradient, self.traced)

    def sup(self, d):
        """(w, key): the support point of A - B along world ``d`` on the fixed poses."""
        pos1, mat1, size1, verts1, pos2, mat2, size2, verts2 = self.fixed
        d1, d2 = mat1.T @ d, mat2.T @ -d
        l1, i1 = _local_point(self.types[0], size1, verts1, d1)
        l2, i2 = _local_point(self.types[1], size2, verts2, d2)
        return (mat1 @ l1 + pos1) - (mat2 @ l2 + pos2), (d1, i1, d2, i2)

    def rebuild(self, key):
        """(a, b) world points of each geom for keys with leading shape (n,), traced."""
        pos1, mat1, size1, verts1, pos2, mat2, size2, verts2 = self.traced
        d1, i1, d2, i2 = key
        l1 = jax.vmap(lambda d, i: _rebuilt_point(self.types[0], size1, verts1, d, i))(d1, i1)
        l2 = jax.vmap(lambda d, i: _rebuilt_point(self.types[1], size2, verts2, d, i))(d2, i2)
        return l1 @ mat1.T + pos1, l2 @ mat2.T + pos2


def _key_zeros(n: int, dt):
    return (jp.zeros((n, 3), dt), jp.zeros(n, jp.int32), jp.zeros((n, 3), dt),
            jp.zeros(n, jp.int32))


def _key_set(keys, slot, key):
    return tuple(K.at[slot].set(k) for K, k in zip(keys, key))


def _key_take(keys, idx):
    return tuple(K[idx] for K in keys)


def _key_where(c, x, y):
    return tuple(where(c, a, b) for a, b in zip(x, y))


def _gjk(pair: _Pair, v0, skip=False):
    """GJK on the Minkowski difference A - B, on the pair's fixed poses.

    Args:
      pair: the two cores.
      v0: (3,) a point of A - B to start from.
      skip: no iteration (the result is not used).
    Returns:
      (P, keys, mask, inside): the final simplex (4, 3), its support keys, which of its slots
      are used, and whether the origin is inside (penetration).
    """
    dt = v0.dtype
    tol = _tol(dt)
    w, key = pair.sup(-v0)
    P = jp.zeros((4, 3), dt).at[0].set(w)
    keys = _key_set(_key_zeros(4, dt), 0, key)
    mask = jp.array([True, False, False, False])
    state = (P, keys, mask, jp.asarray(skip), jp.zeros((), bool), jp.zeros((), jp.int32),
             jp.full((), BIG, dt))

    def body(st):
        P, keys, mask, done, inside, it, prev = st
        v, _, nmask = _closest_simplex(P, mask)
        vv = jp.dot(v, v)
        scale = jp.max(jp.sum(P * P, -1) * mask) + MINVAL
        hit = (vv < 1e-20 * scale) | jp.all(nmask)
        w, key = pair.sup(-v)
        # converged: the new support point brings the bound no closer (relative tolerance);
        # or stalled: the distance did not shrink, as happens in float32 near contact where
        # rounding in |v|^2 - v.w exceeds the tolerance and the simplex cycles
        conv = (vv - jp.dot(v, w) <= tol * tol * scale + tol * vv) | (vv >= prev)
        slot = jp.argmin(nmask)
        stop = done | hit | conv
        add = ~stop
        P2 = where(add, P.at[slot].set(w), P)
        keys2 = _key_where(add, _key_set(keys, slot, key), keys)
        m2 = where(done, mask, where(add, nmask.at[slot].set(True), nmask))
        return P2, keys2, m2, stop, inside | (~done & hit), it + 1, vv

    # a while loop: nothing is differentiated through the search (see _Pair)
    P, keys, mask, _, inside, _, _ = jax.lax.while_loop(
        lambda st: ~st[3] & (st[5] < GJK_ITERS), body, math.lanewise(state, v0))
    return P, keys, mask, inside


def _complete_simplex(pair: _Pair, P, keys, mask):
    """A tetrahedron for EPA from a GJK simplex of 1 to 3 points that holds the origin.

    GJK can stop with the origin on a point, edge or triangle of its simplex (two parallel
    cylinders, a capsule core along a cylinder's axis); EPA needs a solid start. Each missing
    vertex is a support point across what is there (perpendicular to the point or edge, along
    the triangle's normal), on the side farther from it, so the origin ends on the
    tetrahedron's boundary, from where EPA expands as from inside.

    Returns (P, keys) with four vertices (unchanged where ``mask`` was full).
    """
    dt = P.dtype
    order = jp.argsort(~mask, stable=True)
    P, keys = P[order], _key_take(keys, order)
    k = jp.sum(mask)
    eye = jp.eye(3, dtype=dt)
    for i in (1, 2, 3):
        u, v = P[1] - P[0], P[2] - P[0]
        if i == 1:
            d = eye[0]
        elif i == 2:
            d = math.cross(u, eye[jp.argmin(jp.abs(u))])
        else:
            d = math.cross(u, v)
        (w0, k0), (w1, k1) = pair.sup(d), pair.sup(-d)
        # the candidate farther from the affine hull of the first i points
        if i == 1:
            far = jp.sum((w1 - P[0]) ** 2) > jp.sum((w0 - P[0]) ** 2)
        elif i == 2:
            far = (jp.sum(math.cross(w1 - P[0], u) ** 2) >
                   jp.sum(math.cross(w0 - P[0], u) ** 2))
        else:
            far = jp.abs(jp.dot(w1 - P[0], d)) > jp.abs(jp.dot(w0 - P[0], d))
        add = k <= i
        P = where(add, P.at[i].set(where(far, w1, w0)), P)
        keys = _key_where(add, _key_set(keys, i, _key_where(far, k1, k0)), keys)
    return P, keys


def _face_data(W, faces, fvalid):
    a, b, c = W[faces[:, 0]], W[faces[:, 1]], W[faces[:, 2]]
    n = math.cross(b - a, c - a)
    nn = math.safe_norm(n, keepdims=True)
    ok = fvalid & (nn[:, 0] > MINVAL)
    n = n / where(nn > MINVAL, nn, 1.0)
    d = where(ok, jp.sum(n * a, -1), BIG)
    return n, d, ok


def _adjacency(faces: np.ndarray) -> np.ndarray:
    """adj[f, k]: the face across edge k (faces[f, k] -> faces[f, k + 1]) of a closed mesh."""
    owner = {(int(f[k]), int(f[(k + 1) % 3])): i for i, f in enumerate(faces) for k in range(3)}
    return np.array([[owner[int(f[(k + 1) % 3]), int(f[k])] for k in range(3)] for f in faces],
                    np.int32)


_TET = np.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]], np.int32)
_TET_FLIP = _TET[:, [0, 2, 1]]


def _epa_polytope(pair: _Pair, P, keys, skip):
    """The EPA polytope grown from tetrahedron P: (W, keys, faces, fvalid). ``skip``: no
    expansion (the cores are apart, EPA's result is not used)."""
    dt = P.dtype
    tol = EPA_TOL[jp.dtype(dt).name]
    nv = 4 + EPA_ITERS
    nf = 2 * nv
    W = jp.zeros((nv, 3), dt).at[:4].set(P)
    keys = tuple(jp.zeros((nv,) + K.shape[1:], K.dtype).at[:4].set(K) for K in keys)
    flip = jp.dot(math.cross(P[1] - P[0], P[2] - P[0]), P[3] - P[0]) > 0
    base = where(flip, _TET_FLIP, _TET)
    adj = where(flip, _adjacency(_TET_FLIP), _adjacency(_TET))
    faces = jp.zeros((nf, 3), jp.int32).at[:4].set(base)
    adj = jp.zeros((nf, 3), jp.int32).at[:4].set(adj)
    fvalid = jp.zeros(nf, bool).at[:4].set(True)

    st = (W, keys, faces, adj, fvalid, skip, jp.zeros((), jp.int32))
    W, keys, faces, _, fvalid, _, _ = jax.lax.while_loop(
        lambda st: ~st[5] & (st[6] < EPA_ITERS), lambda st: _epa_step(pair, tol, st),
        math.lanewise(st, P))
    return W, keys, faces, fvalid


def _epa_step(pair: _Pair, tol, st):
    """One EPA expansion: support along the nearest face's normal, remove the faces it sees,
    close the hole with faces from the horizon edges to the new vertex.

    The face adjacency is kept up to date rather than rebuilt: a new face's first edge (the
    horizon edge) borders the outside face there, its other two edges the new faces built on
    the horizon edges that start and end at its corners."""
    W, keys, faces, adj, fvalid, done, it = st
    nv, nf = W.shape[0], faces.shape[0]
    dt = W.dtype
    n, d, ok = _face_data(W, faces, fvalid)
    f = jp.argmin(d)
    nrm, dist = n[f], d[f]
    w, key = pair.sup(nrm)
    scale = jp.max(jp.abs(W)) + MINVAL
    conv = jp.dot(w, nrm) - dist <= tol * scale
    stop = done | conv
    vid = 4 + it
    # visible faces: the connected region around the nearest face that the new point sees;
    # growing it by adjacency keeps a face that is coplanar with the point to rounding
    # error, but elsewhere on the polytope, from opening a second hole
    side = jp.sum(n * (w[None] - W[faces[:, 0]]), -1)
    cand = ok & (side > EPA_VISIBLE[jp.dtype(dt).name] * scale)

    def grow(gs):
        vis, _, k = gs
        vis2 = vis | (cand & jp.any(vis[adj], axis=1))
        return vis2, jp.any(vis2 != vis), k + 1

    # grown ring by ring until it stops changing (a few rings; at most EPA_GROW)
    visible, _, _ = jax.lax.while_loop(
        lambda gs: gs[1] & (gs[2] < EPA_GROW), grow,
        (jp.zeros(nf, bool).at[f].set(True), ~stop, jp.zeros((), jp.int32)))
    visible = visible & fvalid
    # horizon edges: edges of visible faces whose outside neighbour stays
    horizon = (visible[:, None] & ~visible[adj]).reshape(-1)
    e_from = faces.reshape(-1)
    e_to = faces[:, jp.array([1, 2, 0])].reshape(-1)
    e_face = jp.repeat(jp.arange(nf, dtype=jp.int32), 3)
    outside = adj.reshape(-1)
    free = ~fvalid | visible
    # the k-th horizon edge fills the k-th free face slot (a scatter: O(edges + faces) per
    # step); edges past the free slots are dropped
    hrank = jp.cumsum(horizon) - 1
    slots = jp.nonzero(free, size=nf, fill_value=nf)[0].astype(jp.int32)
    dest = where(horizon, slots[jp.clip(hrank, 0, nf - 1)], nf)
    newf = jp.stack([e_from, e_to, jp.full(3 * nf, vid, jp.int32)], -1)
    faces2 = faces.at[dest].set(newf, mode="drop")
    # the new faces by the horizon vertex they start and end at
    hv = where(horizon, e_from, nv)
    starts = jp.zeros(nv, jp.int32).at[hv].set(dest, mode="drop")
    ends = jp.zeros(nv, jp.int32).at[where(horizon, e_to, nv)].set(dest, mode="drop")
    newadj = jp.stack([outside, starts[e_to], ends[e_from]], -1)
    adj2 = adj.at[dest].set(newadj, mode="drop")
    # the outside face's edge that bordered the removed face now borders the new one
    j = jp.argmax(adj[outside] == e_face[:, None], axis=1).astype(jp.int32)
    adj2 = adj2.reshape(-1).at[where(horizon, outside * 3 + j, 3 * nf)].set(
        dest, mode="drop").reshape(nf, 3)
    got = jp.zeros(nf, bool).at[dest].set(True, mode="drop")
    fvalid2 = (fvalid & ~visible) | got
    keep = lambda x, y: where(stop, x, y)  # noqa: E731
    return (keep(W, W.at[vid].set(w)), _key_where(stop, keys, _key_set(keys, vid, key)),
            keep(faces, faces2), keep(adj, adj2), keep(fvalid, fvalid2), stop, it + 1)


def _barycentric(tri, p):
    """Barycentric coordinates of p (on the triangle's plane) in tri (3, 3)."""
    e1, e2 = tri[1] - tri[0], tri[2] - tri[0]
    q = p - tri[0]
    g = jp.array([[jp.dot(e1, e1), jp.dot(e1, e2)], [jp.dot(e1, e2), jp.dot(e2, e2)]])
    det = g[0, 0] * g[1, 1] - g[0, 1] ** 2
    ok = jp.abs(det) > MINVAL
    r = jp.array([jp.dot(q, e1), jp.dot(q, e2)])
    inv = jp.array([[g[1, 1], -g[0, 1]], [-g[0, 1], g[0, 0]]]) / where(ok, det, 1.0)
    mu = where(ok, inv @ r, jp.zeros(2, p.dtype))
    return jp.concatenate([1 - jp.sum(mu, keepdims=True), mu])


def _search_gjk(type1: int, type2: int, geoms, skip=False):
    """GJK's final simplex for one pair: (P, keys, mask, inside). ``geoms``: (pos1, mat1,
    size1, verts1, pos2, mat2, size2, verts2)."""
    pair = _Pair(type1, type2, *geoms)
    v0 = pair.fixed[0] - pair.fixed[4]
    v0 = where(jp.dot(v0, v0) > MINVAL, v0, jp.array([1.0, 0.0, 0.0], v0.dtype))
    return _gjk(pair, v0, skip)


def _search_epa(type1: int, type2: int, geoms, P, keys, mask, skip=False):
    """EPA from GJK's simplex (completed to a tetrahedron): the support keys of the
    nearest face's three vertices."""
    pair = _Pair(type1, type2, *geoms)
    P, keys = _complete_simplex(pair, P, keys, mask)
    W, keys, faces, fvalid = _epa_polytope(pair, P, keys, skip)
    _, d, _ = _face_data(W, faces, fvalid)
    return _key_take(keys, faces[jp.argmin(d)])


def _contact(type1: int, type2: int, geoms, keys, mask, inside, tri):
    """The contact rebuilt on the traced poses from the search's keys: GJK's simplex where
    the cores are apart, EPA's nearest face where they penetrate. Returns (dist, normal
    from geom1 to geom2, pos midway between the surfaces)."""
    pair = _Pair(type1, type2, *geoms)
    size1, size2 = geoms[2], geoms[6]
    r1, r2 = core_radius(type1, size1), core_radius(type2, size2)
    # separated cores: distance |v| from the final simplex
    A, B = pair.rebuild(keys)
    v, lam, _ = _closest_simplex(A - B, mask)
    vn = math.safe_norm(v)
    sep_normal = -v / jp.maximum(vn, MINVAL)
    xa, xb = lam @ A, lam @ B
    # penetrating cores: the plane of EPA's nearest face
    A3, B3 = pair.rebuild(tri)
    W3 = A3 - B3
    fn = math.cross(W3[1] - W3[0], W3[2] - W3[0])
    fnn = math.safe_norm(fn)
    epa_normal = fn / where(fnn > MINVAL, fnn, 1.0)
    depth = jp.dot(epa_normal, W3[0])
    lam3 = _barycentric(W3, epa_normal * depth)
    ea, eb = lam3 @ A3, lam3 @ B3
    normal = where(inside, epa_normal, sep_normal)
    core = where(inside, -depth, vn)
    x1 = where(inside, ea, xa)
    x2 = where(inside, eb, xb)
    dist = core - r1 - r2
    s1 = x1 + normal * r1
    s2 = x2 - normal * r2
    return dist, normal, 0.5 * (s1 + s2)


def signed_distance(type1: int, type2: int, pos1, mat1, size1, verts1, pos2, mat2, size2,
                    verts2):
    """Signed distance between two convex geoms (negative: penetration).

    GJK and EPA search on the fixed poses in ``while_loop``s that stop when every batch
    member has converged (EPA is skipped where no core penetrates); the contact is then
    rebuilt differentiably from the final simplex or nearest face (``_Pair``).

    Returns (dist, normal from geom1 to geom2, pos midway between the surfaces).
    """
    geoms = (pos1, mat1, size1, verts1, pos2, mat2, size2, verts2)
    P, keys, mask, inside = _search_gjk(type1, type2, geoms)
    tri = _search_epa(type1, type2, geoms, P, keys, mask, ~inside)
    return _contact(type1, type2, geoms, keys, mask, inside, tri)


# lanes per chunk of signed_distances' compacted searches: GJK runs on the pairs that pass
# the culling test (often a dozen), EPA on those that penetrate (often one or two)
CHUNK = 16
EPA_CHUNK = 4


def is_shared(a, n: int) -> bool:
    """Whether the leaf ``a`` of n-lane arguments is one value all lanes share
    (``lanes_vmap``)."""
    return n > 1 and a.shape[0] == 1


def lanes_vmap(f, n: int, *args):
    """``jax.vmap(f)(*args)`` over n lanes, except that a leaf with a leading axis of 1 (where
    n > 1) is one value every lane shares, passed whole (without that axis): the mesh data of
    a group whose pairs all have the same mesh, which gathered per lane would be copied for
    every lane of every batch member (collision_scene, batch 64: 100 ms of 442)."""
    axes = jax.tree.map(lambda a: None if is_shared(a, n) else 0, args)
    args = jax.tree.map(lambda a: a[0] if is_shared(a, n) else a, args)
    return jax.vmap(f, in_axes=axes)(*args)


# vmapped over a batch, ``compact_map`` gathers the masked lanes of this many batch members
# together (their greatest common divisor with the batch size), ``GROUP_CHUNK`` times its
# chunk at a time: a member's few masked lanes no longer fill a chunk of their own. Measured
# on collision_scene at batch 256, one group alone: box-mesh's GJK 58 -> 22 ms and its EPA
# (0.5 penetrating pairs a member) about 200 -> 60 ms; GROUP_CHUNK 2, 4, 8, 16 gave
# cylinder-box 223, 201, 171, 224 ms, box-mesh 4 and 8 113 and 179 ms (one run each)
GROUP_MEMBERS = 32
GROUP_CHUNK = 4


def compact_map(f, mask, args, init, chunk: int = CHUNK, grouped: bool = True):
    """out[i] = f(False, *args[i]) where mask[i], init[i] elsewhere, with f run (vmapped) only
    on the masked lanes, gathered ``chunk`` at a time in a ``while_loop``: the cost follows
    the number of masked lanes, not of all lanes. Not reverse-differentiable: for searches on
    ``stop_gradient``-ed inputs.

    Under ``jax.vmap`` (a batch of Data), with ``grouped``, the masked lanes of
    ``GROUP_MEMBERS`` members are gathered together (``_compact_members``), so a member with 1
    masked lane of 100 does not pay for a whole chunk; without, each member compacts its own.

    Args:
      f: per-lane function (skip, *row) returning a pytree shaped like ``init``'s rows;
        ``skip`` is True on a chunk's lanes past the masked ones (their result is dropped).
      mask: (n,) lanes to compute. args: pytree of (n, ...) arrays (None leaves allowed;
        (1, ...) leaves are shared by all lanes, ``lanes_vmap``).
      init: pytree of (n, ...) results for the other lanes.

    With ``grouped``, traced values f needs must come in through ``args`` (a (1, ...) leaf
    for one every lane uses), not a closure: a ``custom_vmap`` function may not close over
    values a batch gives per member.
    """
    if not grouped:
        return _compact(f, mask, args, init, chunk)
    # the searches stop gradients themselves, but a custom_vmap has no transpose rule: its
    # inputs must carry symbolic-zero tangents under reverse mode (vmap of grad)
    args = jax.tree.map(jax.lax.stop_gradient, args)

    # traced once as a jaxpr, which both the unbatched path and the rule batch: a custom_vmap
    # traces its function, then its rule (collision_scene, batch 256: tracing 64 -> 52 s)
    f = jax.jit(f)

    @jax.custom_batching.custom_vmap
    def run(mask, args, init):
        return _compact(f, mask, args, init, chunk)

    @run.def_vmap
    def run_batched(axis_size, in_batched, mask, args, init):
        out = _compact_members(f, axis_size, in_batched, mask, args, init, chunk)
        return out, jax.tree.map(lambda _: True, out)

    return run(mask, args, init)


def _compact_members(f, batch: int, in_batched, mask, args, init, chunk: int):
    """``compact_map`` over a batch (leading axis ``batch`` where ``in_batched``): the lanes of
    ``GROUP_MEMBERS`` members flattened into one lane axis and compacted together; groups
    vmapped. Leaves shared by all lanes and members stay shared."""
    members = np.gcd(batch, GROUP_MEMBERS)
    groups = batch // members
    n = mask.shape[-1]
    mask_b, args_b, init_b = in_batched

    def grouped(x, b):
        x = x if b else jp.broadcast_to(x, (batch,) + x.shape)
        if n > 1 and x.shape[1] == 1:  # a member's shared leaf: given to each of its lanes
            x = jp.broadcast_to(x, (batch, n) + x.shape[2:])
        return x.reshape((groups, members * n) + x.shape[2:])

    shared = jax.tree.map(lambda x, b: not b and is_shared(x, n), args, args_b)
    flat_args = jax.tree.map(lambda x, b, s: x if s else grouped(x, b), args, args_b, shared)
    axes = jax.tree.map(lambda s: None if s else 0, shared)
    run = lambda m, a, i: _compact(f, m, a, i, chunk * min(GROUP_CHUNK, members))  # noqa: E731
    flat = (grouped(mask, mask_b), flat_args, jax.tree.map(grouped, init, init_b))
    if groups == 1:  # one group: no vmap around its loops (they trace once more under one)
        first = lambda x, s: x if s else x[0]  # noqa: E731
        out = jax.tree.map(lambda o: o[None], run(
            flat[0][0], jax.tree.map(first, flat[1], shared), jax.tree.map(lambda x: x[0],
                                                                            flat[2])))
    else:
        out = jax.vmap(run, in_axes=(0, axes, 0))(*flat)
    return jax.tree.map(lambda o: o.reshape((batch, n) + o.shape[2:]), out)


def _compact(f, mask, args, init, chunk: int):
    """``compact_map`` on one lane axis."""
    n = mask.shape[0]
    nchunk = -(-n // chunk)
    order = jp.argsort(~mask, stable=True).astype(jp.int32)
    order = jp.concatenate([order, jp.full(nchunk * chunk - n, n, jp.int32)])
    count = jp.sum(mask)

    def body(st):
        c, out = st
        idx = jax.lax.dynamic_slice(order, (c * chunk,), (chunk,))
        live = c * chunk + jp.arange(chunk) < count
        rows = jax.tree.map(lambda a: a if is_shared(a, n) else a[jp.minimum(idx, n - 1)], args)
        res = lanes_vmap(f, chunk, ~live, *rows)
        dst = where(live, idx, n)
        out = jax.tree.map(lambda o, r: o.at[dst].set(r, mode="drop"), out, res)
        return c + 1, out

    return jax.lax.while_loop(lambda st: st[0] * chunk < count, body,
                              math.lanewise((jp.zeros((), jp.int32), init), mask))[1]


def sparse_vmap(f, mask, args, chunk: int = CHUNK, grouped: bool = False):
    """``jax.vmap(f)(*args)`` where only the ``mask`` lanes' outputs are used: evaluated,
    ``f`` runs on those lanes alone (``compact_map``; the other lanes get zeros), so a
    group's contact rules cost what its pairs passing the bounding-sphere test need, not
    what all its candidates would; differentiated, the tangents are those of the dense
    ``vmap`` (compact_map's loop is not reverse-differentiable), equal on the ``mask`` lanes.
    The caller masks the other lanes' outputs out. ``grouped``: as ``compact_map``'s."""
    dense = lambda a: lanes_vmap(f, mask.shape[0], *a)  # noqa: E731

    @jax.custom_jvp
    def run(mask, args):
        shapes = jax.eval_shape(dense, args)
        init = jax.tree.map(lambda x: jp.zeros(x.shape, x.dtype), shapes)
        return compact_map(lambda skip, *row: f(*row), mask, args, init, chunk, grouped)

    @run.defjvp
    def run_jvp(primals, tangents):
        return jax.jvp(dense, (primals[1],), (tangents[1],))

    return run(mask, tuple(args))


def map_rules(rule, near, rows, costly: bool):
    """A group's contact rules over its pairs (``lanes_vmap``; the caller masks the lanes
    not ``near`` out). ``costly`` rules (after GJK/EPA, box-box) run on the ``near`` pairs
    alone (``sparse_vmap``): per batch member where a group has more than a chunk of pairs
    (a settled pile: 12 of 100 cylinder-box candidates; batch 256: 315 -> 104 ms), since
    such a group often passes many (a pile's box-box: 73 of 190), where wide chunks cost less
    than many narrow ones (batch 256: 107 ms per member, 236 ms grouped); a smaller group's
    pairs gathered with those of other batch members (``compact_map``), since one member's
    few pairs would fill no chunk. Cheap analytic rules gain nothing (plane-box 1.9 -> 2.9 ms,
    humanoid's step 5% slower)."""
    n = len(near)
    if not costly:
        return lanes_vmap(rule, n, *rows)
    if n > CHUNK:
        return sparse_vmap(rule, near, rows)
    return sparse_vmap(rule, near, rows, n, grouped=True)


def signed_distances(type1: int, type2: int, geoms, active, grouped: bool = True):
    """``signed_distance`` over n pairs (leading axis of ``geoms``' arrays), searching only
    the ``active`` ones (those passing the bounding-sphere test; the others get a finite,
    meaningless contact) and running EPA only on those that penetrate, in compacted chunks
    (``compact_map``); the contacts are rebuilt on every lane, differentiably."""
    n = active.shape[0]
    fixed = jax.tree.map(jax.lax.stop_gradient, geoms)
    dt = geoms[0].dtype
    zkeys = lambda k: jax.tree.map(  # noqa: E731
        lambda x: jp.zeros((n,) + x.shape, x.dtype), _key_zeros(k, dt))
    mask0 = jp.zeros((n, 4), bool).at[:, 0].set(True)
    P, keys, mask, inside = compact_map(
        lambda skip, *g: _search_gjk(type1, type2, g, skip), active, fixed,
        (jp.zeros((n, 4, 3), dt), zkeys(4), mask0, jp.zeros(n, bool)), min(CHUNK, n),
        grouped)
    inside = inside & active
    tri = compact_map(
        lambda skip, g, P, k, m: _search_epa(type1, type2, g, P, k, m, skip), inside,
        (fixed, P, keys, mask), zkeys(3), min(EPA_CHUNK, n), grouped)
    return lanes_vmap(lambda g, k, m, i, t: _contact(type1, type2, g, k, m, i, t), n,
                      geoms, keys, mask, inside, tri)


def ccd_collider(type1: int, type2: int, after, ncon: int, prefix: str):
    """A collider with the driver's signature (pos1, mat1, size1, pos2, mat2, size2, margin,
    verts1, verts2, table1, table2) that runs ``signed_distance`` and then
    ``after(dist, normal, pos, <the same arguments>)``. The driver runs the search group-wide
    (``signed_distances``) and calls ``AFTER`` per pair."""

    def collide(pos1, mat1, size1, pos2, mat2, size2, margin, verts1=None, verts2=None,
                table1=None, table2=None):
        sd = signed_distance(type1, type2, pos1, mat1, size1, verts1, pos2, mat2, size2,
                             verts2)
        return after(*sd, pos1, mat1, size1, pos2, mat2, size2, margin, verts1, verts2,
                     table1, table2)

    collide.NCON = ncon
    collide.CCD = (type1, type2)
    collide.AFTER = after
    collide.MESH = (type1 == _G.MESH, type2 == _G.MESH)
    collide.__name__ = f"{prefix}_{_G(type1).name.lower()}_{_G(type2).name.lower()}"
    return collide


def make_convex(type1: int, type2: int):
    """A collider for geom types (type1, type2) with the primitive colliders' signature plus
    mesh vertices: (pos1, mat1, size1, pos2, mat2, size2, margin, verts1, verts2)."""

    def after(dist, normal, pos, pos1, mat1, size1, pos2, mat2, size2, margin, verts1=None,
              verts2=None, table1=None, table2=None):
        return (dist[None], pos[None], normal[None], jp.zeros((1, 3), pos.dtype),
                (dist <= margin)[None])

    return ccd_collider(type1, type2, after, 1, "convex")


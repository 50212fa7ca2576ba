"""A numpy model of MuJoCo 4.0's height-field collider for polytope partners (box, mesh).

Diagnostic oracle, not part of mjx_lite: it reproduces mj_forward's hfield-box and hfield-mesh
contacts (pebble: all 230 contacts of ``hfield_sweep("pebble", 8)`` to 3e-13; box: 262 of
287 to rounding; each of the others, over 50 poses, has a support decided by a rounding-level
tie: a box-frame component of the direction below 1e-15, a level direction, or equal prism
dot products, measured) and so documents the rule that ``mjx_lite/collision/hfield_ccd.py``
ports.

Why MuJoCo's hfield-polytope contacts are not the prisms' penetration depths:

* Both shapes are "discrete" (box/mesh and the prism, zero margin), and for discrete pairs
  MuJoCo's EPA stops as soon as a new support point repeats the (vertex of geom1, vertex of
  geom2) pair of a polytope vertex, returning the nearest face found so far (a lower bound).
* The prism's support function never records a vertex index, so geom1's index is always -1:
  EPA stops as soon as the partner's support VERTEX (box corner, mesh vertex) repeats, which
  for a prism under a box happens after 0-3 expansions. Most contacts are therefore
  unconverged faces: shallower than the true depth, with a tilted normal.
* The starting tetrahedron comes from GJK (Montanari's sub-distance algorithm, started at
  prism centroid minus geom center, zero tolerance), run until its simplex holds the
  origin. 4.0's GJK has no tetrahedron walk ("gjkIntersect" of earlier sources); its
  next iterate is the origin's projection on the kept segment or triangle
  (``_next_point``), its Frank-Wolfe stop is skipped on the first iteration and it stops
  where |x| stalls (read from libmujoco 4.0's gjk; the walk it replaces agreed on short
  paths only: 27 of 287 box contacts in ``hfield_sweep("box", 8)`` and 6 ellipsoid ones).
* Contact: dist = -|nearest face|, normal = normalize(x1 - x2) and pos = (x1 + x2) / 2 from
  the face's barycentric witness points; prisms in MuJoCo's visiting order, at most 50.

Everything is in the height field's frame; ``collide`` maps the contacts to world.
"""

from __future__ import annotations

import numpy as np

MINVAL = 1e-15
MAXVAL = 1e10
MAXCONPAIR = 50


class _Vert:
    """A Minkowski-difference vertex: points on both shapes and the partner's vertex id."""

    __slots__ = ("a", "b", "w", "ib")

    def __init__(self, a, b, ib):
        self.a, self.b, self.w, self.ib = a, b, a - b, ib


class _Face:
    __slots__ = ("verts", "adj", "v", "d2", "index")


def prism_support(prism):
    """Support of a vertical prism (6, 3): bottom vertices for downward directions."""

    def sup(d):
        lo = 0 if d[2] < 0 else 3
        best, val = lo, prism[lo] @ d
        for i in (lo + 1, lo + 2):
            t = prism[i] @ d
            if t > val:
                best, val = i, t
        return prism[best].copy()

    return sup


def box_support(pos, mat, size):
    """Support of a box in the hfield frame and its corner id (bits x, y, z positive).

    The products and sums in MuJoCo's order (mat^T d, then mat s + pos), one at a time: a
    face of the Minkowski difference through a box edge has a normal whose component along
    that edge is rounding noise, and its sign picks the corner (numpy's matmul rounded some
    of them the other way: 78 contacts of hfield_sweep("box", 50) off against 60)."""
    m = [[float(v) for v in row] for row in mat]

    def sup(d):
        d = [float(v) for v in d]
        loc = [m[0][i] * d[0] + m[1][i] * d[1] + m[2][i] * d[2] for i in range(3)]
        s = [float(size[i]) if loc[i] >= 0 else -float(size[i]) for i in range(3)]
        x = np.array([m[i][0] * s[0] + m[i][1] * s[1] + m[i][2] * s[2] + pos[i]
                      for i in range(3)])
        return x, int((s[0] > 0) + 2 * (s[1] > 0) + 4 * (s[2] > 0))

    return sup


def mesh_support(pos, mat, verts):
    def sup(d):
        i = int(np.argmax(verts @ (mat.T @ d)))
        return mat @ verts[i] + pos, i

    return sup


def _plane_point(v1, v2, v3):
    """Projection of the origin on the plane of v1 v2 v3 (None if degenerate)."""
    # three algebraically equal normals; the first non-degenerate one is used
    d21, d31, d32 = v2 - v1, v3 - v1, v3 - v2
    for n, x in ((np.cross(d32, d21), v2), (np.cross(d21, d31), v1)):
        nn = n @ n
        if nn == 0:
            return None
        nv = n @ x
        if nv != 0 and nn > MINVAL:
            return n * (nv / nn)
    n = np.cross(d31, d32)
    nn = n @ n
    if nn == 0:  # 4.0's projectOriginPlane gives up here too
        return None
    return n * ((n @ v3) / nn)


def _line_weights(s1, s2):
    """MuJoCo 4.0's S1D: outside the segment, its nearer end (s1 past s1: read from libmujoco
    4.0, earlier sources always took s2); s2 for a segment shorter than 1e-15."""
    diff = s2 - s1
    dd = diff @ diff
    if dd < 1e-30:
        return [0.0, 1.0]
    p = s2 - (s2 @ diff) / dd * diff
    k = int(np.argmax(np.abs(s1 - s2)[::-1]))  # last axis of largest extent wins ties
    k = 2 - k
    mu = s1[k] - s2[k]
    c1, c2 = p[k] - s2[k], s1[k] - p[k]
    if _same(mu, c1) and _same(mu, c2):
        return [c1 / mu, c2 / mu]
    return [1.0, 0.0] if _same(mu, c1) else [0.0, 1.0]


def _same(a, b):
    return (a > 0 and b > 0) or (a < 0 and b < 0)


def _minors(s1, s2, s3):
    return [np.cross(s2, s3)[i] - np.cross(s1, s3)[i] + np.cross(s1, s2)[i] for i in range(3)]


def _projection(m):
    """(signed largest minor, the two kept axes): drop the axis of the largest projected area
    (first of equals: x, then y)."""
    mu = [abs(m[0]), abs(m[1]), abs(m[2])]
    if mu[0] >= mu[1] and mu[0] >= mu[2]:
        return m[0], (1, 2)
    if mu[1] >= mu[2]:
        return -m[1], (0, 2)
    return m[2], (0, 1)


def _tri_weights(s1, s2, s3):
    """MuJoCo 4.0's S2D (read from libmujoco 4.0): signed areas of the vertices' offsets from
    the origin's projection p, on the plane of the largest component of (s2 - s1) x (s3 - s1),
    divided by their sum; outside, the nearest point of the failing edges (of all three
    where the plane is degenerate)."""
    p = _plane_point(s1, s2, s3)
    if p is None:
        return _best_face([s1, s2, s3], [False] * 3, _line_weights, 2)
    a, b = s2 - s1, s3 - s1
    m = [a[1] * b[2] - a[2] * b[1], a[0] * b[2] - a[2] * b[0], a[0] * b[1] - a[1] * b[0]]
    mu = [abs(v) for v in m]
    if mu[0] >= mu[1] and mu[0] >= mu[2]:
        big, (x, y) = m[0], (1, 2)
    elif mu[1] >= mu[2]:
        big, (x, y) = m[1], (0, 2)
    else:
        big, (x, y) = m[2], (0, 1)
    A = [(s[x] - p[x], s[y] - p[y]) for s in (s1, s2, s3)]
    c = [A[1][0] * A[2][1] - A[2][0] * A[1][1], A[2][0] * A[0][1] - A[0][0] * A[2][1],
         A[0][0] * A[1][1] - A[1][0] * A[0][1]]
    inside = [_same(big, ci) for ci in c]
    if all(inside):
        det = (c[0] + c[1]) + c[2]
        return [ci / det for ci in c]
    return _best_face([s1, s2, s3], inside, _line_weights, 2)


def _areas(v1, v2, v3, p, x, y):
    def area(a, b, c):
        return (a[x] * b[y] + a[y] * c[x] + b[x] * c[y] - a[x] * c[y] - a[y] * b[x]
                - c[x] * b[y])

    return [area(p, v2, v3), area(p, v3, v1), area(p, v1, v2)]


def _best_face(S, inside, sub, m):
    """Closest point over the sub-simplices opposite each vertex whose sign test failed."""
    lam, dmin = [0.0] * len(S), np.inf
    for drop in range(len(S)):
        if inside[drop]:
            continue
        keep = [i for i in range(len(S)) if i != drop]
        w = sub(*[S[i] for i in keep])
        x = sum(w[j] * S[keep[j]] for j in range(m))
        if x @ x < dmin:
            lam = [0.0] * len(S)
            for j in range(m):
                lam[keep[j]] = w[j]
            dmin = x @ x
    return lam


def _tet_weights(s1, s2, s3, s4):
    c = [-(s2 @ np.cross(s3, s4)), s1 @ np.cross(s3, s4), -(s1 @ np.cross(s2, s4)),
         s1 @ np.cross(s2, s3)]
    det = sum(c)
    inside = [_same(det, ci) for ci in c]
    if all(inside):
        return [ci / det for ci in c]
    return _best_face([s1, s2, s3, s4], inside, _tri_weights, 3)


def _next_point(S, lam):
    """4.0's next GJK iterate from the kept points S and their weights: the origin's
    projection on the triangle's plane (projectOriginPlane) or the segment's line, the
    weighted sum where those are degenerate, the point itself."""
    if len(S) == 3:
        p = _plane_point(S[0], S[1], S[2])
        return ((lam[0] * S[0] + lam[1] * S[1]) + lam[2] * S[2]) if p is None else p
    if len(S) == 2:
        d = S[1] - S[0]
        dd = d @ d
        if dd < 1e-30:
            return lam[0] * S[0] + lam[1] * S[1]
        return S[1] + (-(S[1] @ d) / dd) * d
    return lam[0] * S[0]


class PrismCCD:
    """MuJoCo 4.0's penetration query (GJK, then EPA) for one prism and a polytope."""

    def __init__(self, sup1, sup2, center1, center2, iterations=35, tolerance=1e-6):
        self.sup1, self.sup2 = sup1, sup2
        self.c1, self.c2, self.kmax, self.tol = center1, center2, iterations, tolerance

    def _support(self, d):
        b, ib = self.sup2(-d)
        return _Vert(self.sup1(d), b, ib)

    def _gjk(self):
        """MuJoCo 4.0's GJK for discrete shapes: the tetrahedron holding the origin, or None."""
        x = self.c1 - self.c2
        if np.sqrt(x @ x) < MINVAL:  # coincident centres: MuJoCo starts from +x
            x = np.array([1.0, 0.0, 0.0])
        xnorm = xprev = np.sqrt(x @ x)
        simplex, n = [None] * 4, 0
        for k in range(self.kmax):
            # |x| vanished or stalled (on the iterate before: MuJoCo's loop-top test)
            if xnorm < MINVAL or (k and abs(xnorm - xprev) < MINVAL):
                break
            simplex[n] = self._support(-(x * (1 / xnorm)))
            s = simplex[n].w
            if k and x @ (x - s) < 0:  # Frank-Wolfe, zero tolerance, not on the first
                break
            if x @ s > 0:
                return None
            S = [v.w for v in simplex[:n + 1]]
            lam = (_tet_weights(*S) if n == 3 else _tri_weights(*S) if n == 2
                   else _line_weights(*S) if n == 1 else [1.0])
            keep = [i for i in range(n + 1) if lam[i] != 0]
            simplex = [simplex[i] for i in keep] + [None] * (4 - len(keep))
            n = len(keep)
            if n == 4:
                return simplex
            xprev, x = xnorm, _next_point([S[i] for i in keep], [lam[i] for i in keep])
            xnorm = np.sqrt(x @ x)
        # only a full tetrahedron is handled here (GJK ending on a face, edge or vertex of
        # the Minkowski difference is touching, not penetrating, for these shapes)
        return None

    # ---- EPA
    def _attach(self, a, b, c, adj):
        f = _Face()
        f.verts, f.adj, f.index = [a, b, c], list(adj), -1
        v = _plane_point(self.verts[c].w, self.verts[b].w, self.verts[a].w)
        f.v = np.zeros(3) if v is None else v
        f.d2 = 0.0 if v is None else v @ v
        self.faces.append(f)
        return f.d2

    def _delete(self, fi):
        f = self.faces[fi]
        if f.index >= 0:
            last = self.map.pop()
            if f.index < len(self.map):
                self.map[f.index] = last
                self.faces[last].index = f.index
        f.index = -2

    def _edge(self, f, vert):
        return 0 if f.verts[0] == vert else 1 if f.verts[1] == vert else 2

    def _visit(self, fi, e, w, horizon):
        f = self.faces[fi]
        if f.v @ w - f.d2 <= MINVAL:
            return False
        self._delete(fi)
        for k in (1, 2):
            i = (e + k) % 3
            g = f.adj[i]
            if self.faces[g].index > -2:
                ge = self._edge(self.faces[g], f.verts[(i + 1) % 3])
                if not self._visit(g, ge, w, horizon):
                    horizon.append((g, ge))
        return True

    def _epa(self, tet):
        self.verts = list(tet)
        self.faces, self.map = [], []
        for (a, b, c), adj in (((0, 1, 2), (1, 3, 2)), ((0, 3, 1), (2, 3, 0)),
                               ((0, 2, 3), (0, 3, 1)), ((3, 2, 1), (2, 0, 1))):
            if self._attach(a, b, c, adj) < MINVAL**2:
                return None  # origin on a face: touching
        self.map = [0, 1, 2, 3]
        for i in range(4):
            self.faces[i].index = i
        upper = upper2 = MAXVAL
        face = None
        for _ in range(self.kmax):
            prev, lower2 = face, MAXVAL
            for m in self.map:
                if self.faces[m].d2 < lower2:
                    face, lower2 = m, self.faces[m].d2
            if lower2 > upper2 or face is None:
                face = prev
                break
            if lower2 <= 0:
                break
            f = self.faces[face]
            lower = np.sqrt(lower2)
            new = self._support(f.v / lower)
            self.verts.append(new)
            wi = len(self.verts) - 1
            uk = (f.v @ new.w) / lower
            if uk < upper:
                upper, upper2 = uk, uk * uk
            if upper - lower < MINVAL:
                break
            # the repeated-vertex stop: geom1's (prism) index is always -1
            if any(v.ib == new.ib for v in self.verts[:-1]):
                break
            horizon = []
            self._delete(face)
            for e in range(3):
                g = f.adj[e]
                if e and self.faces[g].index <= -2:
                    continue
                ge = self._edge(self.faces[g], f.verts[(e + 1) % 3])
                if not self._visit(g, ge, new.w, horizon):
                    horizon.append((g, ge))
            if len(horizon) < 3:
                return None
            nf, ne = len(self.faces), len(horizon)
            for i, (g, ge) in enumerate(horizon):
                hf = self.faces[g]
                a, b = hf.verts[ge], hf.verts[(ge + 1) % 3]
                hf.adj[ge] = nf + i
                prv = nf + ne - 1 if i == 0 else nf + i - 1
                d2 = self._attach(wi, b, a, (prv, g, nf + (i + 1) % ne))
                if d2 == 0:
                    return None
                if lower2 <= d2 <= upper2:
                    self.faces[-1].index = len(self.map)
                    self.map.append(nf + i)
            if not self.map:
                break
        return face

    def run(self):
        """(dist, normal, pos) in the hfield frame, or None without penetration."""
        tet = self._gjk()
        if tet is None:
            return None
        fi = self._epa(tet)
        if fi is None:
            return None
        f = self.faces[fi]
        V = [self.verts[i] for i in f.verts]
        lam = _face_weights(V[0].w, V[1].w, V[2].w, f.v)
        x1 = sum(lam[i] * V[i].a for i in range(3))
        x2 = sum(lam[i] * V[i].b for i in range(3))
        dist = -np.sqrt(f.d2)
        if dist >= 0:
            return None
        n = x1 - x2
        return dist, n / np.linalg.norm(n), 0.5 * (x1 + x2)


def _face_weights(v1, v2, v3, p):
    big, (x, y) = _projection(_minors(v1, v2, v3))
    return [c / big for c in _areas(v1, v2, v3, p, x, y)]


def _centroid(prism):
    """mjc_center: the vertices' sum times 1/6 (a product, not a division, in 4.0)."""
    return (((((prism[0] + prism[1]) + prism[2]) + prism[3]) + prism[4]) + prism[5]) * (1.0 / 6.0)


def collide(mjm, mjd, g1: int, g2: int) -> list[tuple[float, np.ndarray, np.ndarray]]:
    """MuJoCo 4.0's contacts (dist, normal, pos in world) of hfield g1 and box/mesh g2."""
    h = mjm.geom_dataid[g1]
    nrow, ncol = int(mjm.hfield_nrow[h]), int(mjm.hfield_ncol[h])
    adr = mjm.hfield_adr[h]
    data = mjm.hfield_data[adr:adr + nrow * ncol].reshape(nrow, ncol)
    size = mjm.hfield_size[h]
    pos1, mat1 = mjd.geom_xpos[g1], mjd.geom_xmat[g1].reshape(3, 3)
    p = mat1.T @ (mjd.geom_xpos[g2] - pos1)
    mat = mat1.T @ mjd.geom_xmat[g2].reshape(3, 3)
    if mjm.geom_type[g2] == 6:  # box
        sup2 = box_support(p, mat, mjm.geom_size[g2])
    else:
        m = mjm.geom_dataid[g2]
        a, k = mjm.mesh_vertadr[m], mjm.mesh_vertnum[m]
        sup2 = mesh_support(p, mat, mjm.mesh_vert[a:a + k].astype(float))
    e = np.eye(3)
    hi = np.array([sup2(e[i])[0][i] for i in range(3)])
    lo = np.array([sup2(-e[i])[0][i] for i in range(3)])
    cmin = max(0, int(np.floor((lo[0] + size[0]) / (2 * size[0]) * (ncol - 1))))
    cmax = min(ncol - 1, int(np.ceil((hi[0] + size[0]) / (2 * size[0]) * (ncol - 1))))
    rmin = max(0, int(np.floor((lo[1] + size[1]) / (2 * size[1]) * (nrow - 1))))
    rmax = min(nrow - 1, int(np.ceil((hi[1] + size[1]) / (2 * size[1]) * (nrow - 1))))
    dx, dy = 2 * size[0] / (ncol - 1), 2 * size[1] / (nrow - 1)
    out = []
    for r in range(rmin, rmax):
        seq = []
        for c in range(cmin, cmax + 1):
            for dr in (1, 0):
                seq.append(np.array([dx * c - size[0], dy * (r + dr) - size[1],
                                     float(data[r + dr, c]) * size[2]]))
                if len(seq) < 3:
                    continue
                top = np.array(seq[-3:])
                if top[:, 2].max() < lo[2]:
                    continue
                prism = np.concatenate([top * [1, 1, 0] + [0, 0, -size[3]], top])
                res = PrismCCD(prism_support(prism), sup2, _centroid(prism), p).run()
                if res is not None:
                    dist, n, x = res
                    out.append((dist, mat1 @ n, mat1 @ x + pos1))
                    if len(out) == MAXCONPAIR:
                        return out
    return out

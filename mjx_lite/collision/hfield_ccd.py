"""MuJoCo 4.0's penetration query for one height-field prism and a polytope (box, mesh).

The JAX port of ``tests/hfield_ccd_reference.py`` (read its docstring): at zero margin both
shapes are "discrete", and MuJoCo's EPA then stops as soon as a new support point repeats the
vertex pair of a polytope vertex. The prism never records a vertex id, so EPA stops at the
first repeated partner vertex (box corner bits, mesh argmax index) and returns the nearest
face found so far: most contacts are unconverged faces, not penetration depths.

* GJK: Montanari's sub-distance variant started at (prism centroid - geom centre), zero
  tolerance, run until its simplex holds the origin. 4.0's GJK has no tetrahedron walk
  (earlier sources' gjkIntersect): its next iterate is the origin's projection on the kept
  segment or triangle, its Frank-Wolfe stop is skipped on the first iteration and it also
  stops where |x| stalls (``_gjk``, read from libmujoco 4.0). Its sub-distance steps are
  4.0's too (``_line_weights``: the nearer end of a segment the origin projects past;
  ``_tri_weights``: areas from the edge cross product, all three edges of a degenerate
  triangle), and it starts from the centroid as mjc_center computes it (sum times 1/6):
  with the earlier sources' S1D (always the second end) and a centroid divided by 6, long
  distance-mode searches (an ellipsoid or cylinder within the margin) stopped elsewhere,
  normals up to 7e-5 off MuJoCo's; zero-margin cylinders had 89 of 1881 contacts beyond
  1e-4.
* EPA: MuJoCo's polytope (faces with adjacency, a map of candidate faces whose squared
  distance lies between lower^2 and upper^2, the horizon found by a depth-first walk from the
  nearest face, new faces in horizon order), stopped on upper - lower < mjMINVAL, on a
  repeated partner vertex, or when no candidate is left.

With a margin (``margin``), both shapes are grown by half of it and, no longer discrete,
take the smooth-shape stops, as 4.0 does for a prism the partner touches or penetrates.

Shapes: both loops are ``lax.while_loop``s over fixed-capacity arrays (vertices, faces, map,
DFS stack, horizon), whose state is frozen once a stop is reached, so they jit and vmap. The
search runs on ``stop_gradient``-ed inputs and returns only the nearest face's vertex ids
(prism vertex, partner vertex); the contact is then recomputed from those vertices with safe
divisions and norms, so it is differentiable (through the prism heights and the partner's
pose) with finite gradients. Capacities that a pathological query could exceed (mesh EPA's
faces) make that prism report no contact rather than a wrong one.

Rounding: axis-aligned poses are full of exact ties (which vertex, which face), decided by
the last bit, so the arithmetic follows the reference's: no fused multiply-adds (``rounded``)
and no division by a broadcast or a constant (``_vdiv``), both of which XLA's CPU backend
would otherwise introduce. With them, in float64, this agrees with MuJoCo wherever the numpy
model does: every box and pebble contact of 50 poses on 64 x 64 terrain at zero margin
(``tests/acceptance/collision_hfield.txt``).

Not followed: ``opt.ccd_iterations`` and ``opt.ccd_tolerance`` (MuJoCo's defaults, 35 and
1e-6, are fixed here; the compiler rejects other values where such pairs exist). A mesh's
support among tied vertices: MuJoCo 4.0 takes a hull mesh's support by a hill-climb
(mjc_hillclimbSupport, read from libmujoco 4.0: from the vertex ``mesh_extrema`` gives for
the direction's signs beyond +-0.4, warm-started from the previous call's vertex, to the
first neighbour in ``mesh_graph`` with a strictly larger dot), so among exactly tied
vertices it returns the one its walk meets first, which depends on qhull's internal vertex
numbering and neighbour order. scipy's qhull (same library, same options: the facet order is
MuJoCo's) does not expose that order, so we take the lowest-index maximum. Measured where it
decides a contact: 10 of 1566 pebble contacts on a height field with a margin (same face,
another point), 1 cylinder-mesh generator state, 1 box-pebble multi-contact state.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.math import argmax, dot3, lanewise, rounded, rounded_cross, where
from mjx_lite.types import GeomType

MINVAL = 1e-15
MAXVAL = 1e10
KMAX = 35  # MuJoCo's ccd_iterations default; GJK and EPA iterations
TOL = 1e-6  # ccd_tolerance: GJK's final test on the distance
GJK_STEPS = KMAX + 1  # GJK iterations (one per step)
# the smooth geoms' support functions (``smooth_core``) by geom type, and EPA's capacities for
# a query with one: KMAX expansions (faces: 129 seen in 20 ellipsoid poses, 320 kept)
SMOOTH = {GeomType.SPHERE: "sphere", GeomType.CAPSULE: "capsule",
          GeomType.ELLIPSOID: "ellipsoid", GeomType.CYLINDER: "cylinder"}
SMOOTH_CAPS = (KMAX + 5, 320)
# the cores MuJoCo 4.0's mjc_ccd swaps in for a sphere or capsule before its GJK distance query
# (mjc_pointSupport, mjc_lineSupport; read from libmujoco 4.0): discrete shapes for its GJK
# (Frank-Wolfe stop at x.(x - s) < 0, as for polytopes), the radius added back by inflate
CORE = {GeomType.SPHERE: "point", GeomType.CAPSULE: "segment"}


# ---- vector helpers in numpy's evaluation order
#
# Products are rounded before they are summed (``rounded``: no fused multiply-add), as the
# exact ties of axis-aligned poses (box faces parallel to prism faces) need
# (``math.rounded_cross`` for cross products).


def _wsum(w, v):
    """sum_i w[i] v[i] left to right, w (k,), v (k, 3)."""
    p = rounded(w[:, None] * v)
    out = p[0]
    for i in range(1, p.shape[0]):
        out = out + p[i]
    return out


def _vdiv(v, s):
    """v (..., k) / s (...), correctly rounded: XLA rewrites a division by a broadcast (or a
    constant) as a product with the reciprocal, which rounds differently; component-wise
    divisions of equal shapes are kept."""
    return jp.stack([v[..., i] / s for i in range(v.shape[-1])], -1)


def _same(a, b):
    return ((a > 0) & (b > 0)) | ((a < 0) & (b < 0))


def _sdiv(a, b):
    """a / b with a safe denominator where b == 0 (the result is then unused)."""
    return a / where(b == 0, 1.0, b)


def _plane_point(v1, v2, v3):
    """Projection of the origin on the plane of v1 v2 v3: (point, degenerate)."""
    d21, d31, d32 = v2 - v1, v3 - v1, v3 - v2
    n1, n2, n3 = rounded_cross(d32, d21), rounded_cross(d21, d31), rounded_cross(d31, d32)
    nn1, nn2, nn3 = dot3(n1, n1), dot3(n2, n2), dot3(n3, n3)
    nv1, nv2, nv3 = dot3(n1, v2), dot3(n2, v1), dot3(n3, v3)
    ok1 = (nv1 != 0) & (nn1 > MINVAL)
    ok2 = (nv2 != 0) & (nn2 > MINVAL)
    r1 = n1 * _sdiv(nv1, nn1)[..., None]
    r2 = n2 * _sdiv(nv2, nn2)[..., None]
    r3 = n3 * _sdiv(nv3, nn3)[..., None]
    r = where(ok1[..., None], r1, where(ok2[..., None], r2, r3))
    # 4.0's projectOriginPlane also gives up where the third normal vanishes
    none = (nn1 == 0) | (~ok1 & (nn2 == 0)) | (~ok1 & ~ok2 & (nn3 == 0))
    return r, none


def _line_weights(s1, s2):
    """MuJoCo 4.0's S1D: the weights of the point of segment s1 s2 nearest the origin. Where
    the origin's projection falls outside the segment, the nearer end: s1 past s1, s2 past s2
    (read from libmujoco 4.0; earlier sources always took s2); s2 for a segment shorter than
    1e-15 (|s2 - s1|^2 < 1e-30)."""
    diff = s2 - s1
    dd = dot3(diff, diff)
    p = s2 - rounded(_sdiv(dot3(s2, diff), dd) * diff)
    ext = jp.abs(s1 - s2)
    k = 2 - jp.argmax(ext[::-1])  # last axis of largest extent
    mu = s1[k] - s2[k]
    c1, c2 = p[k] - s2[k], s1[k] - p[k]
    long = ~(dd < 1e-30)
    ok = _same(mu, c1) & _same(mu, c2) & long
    first = _same(mu, c1) & ~_same(mu, c2) & long  # past s1
    one = jp.ones((), s1.dtype)
    zero = jp.zeros((), s1.dtype)
    return jp.stack([where(ok, _sdiv(c1, mu), where(first, one, zero)),
                     where(ok, _sdiv(c2, mu), where(first, zero, one))])


def _minors(s1, s2, s3):
    return rounded_cross(s2, s3) - rounded_cross(s1, s3) + rounded_cross(s1, s2)


def _area(a, b, c, x, y):
    t = rounded((a[x] * b[y], a[y] * c[x], b[x] * c[y], a[x] * c[y], a[y] * b[x], c[x] * b[y]))
    return t[0] + t[1] + t[2] - t[3] - t[4] - t[5]


def _proj_areas(v1, v2, v3, p):
    """(big, c (3,)): MuJoCo's barycentric areas on the plane of largest projection."""
    m = _minors(v1, v2, v3)
    mu = jp.abs(m)
    sel0 = (mu[0] >= mu[1]) & (mu[0] >= mu[2])
    sel1 = ~sel0 & (mu[1] >= mu[2])
    cs = []
    for x, y in ((1, 2), (0, 2), (0, 1)):
        cs.append(jp.stack([_area(p, v2, v3, x, y), _area(p, v3, v1, x, y),
                            _area(p, v1, v2, x, y)]))
    big = where(sel0, m[0], where(sel1, -m[1], m[2]))
    c = where(sel0, cs[0], where(sel1, cs[1], cs[2]))
    return big, c


def _best_face(S, inside, sub):
    """Closest point over the sub-simplices opposite each vertex whose sign test failed."""
    n = len(S)
    lam = jp.zeros(n, S[0].dtype)
    dmin = jp.full((), jp.inf, S[0].dtype)
    for drop in range(n):
        keep = [i for i in range(n) if i != drop]
        w = sub(*[S[i] for i in keep])
        x = _wsum(w, jp.stack([S[i] for i in keep]))
        xx = dot3(x, x)
        take = ~inside[drop] & (xx < dmin)
        new = jp.zeros(n, S[0].dtype).at[np.array(keep)].set(w)
        lam = where(take, new, lam)
        dmin = where(take, xx, dmin)
    return lam


def _tri_weights(s1, s2, s3):
    """MuJoCo 4.0's S2D (read from libmujoco 4.0): the origin's projection p on the
    triangle's plane, then its signed areas with the edges on the plane of the normal's
    largest component (the normal (s2 - s1) x (s3 - s1), the areas of the vertices' offsets
    from p), divided by their sum. Outside, the nearest point of the edges whose sign test
    failed (``_line_weights``); where the plane is degenerate, of all three edges."""
    p, none = _plane_point(s1, s2, s3)
    a, b = s2 - s1, s3 - s1
    i0, i1 = np.array([1, 0, 0]), np.array([2, 2, 1])
    left, right = rounded((a[i0] * b[i1], a[i1] * b[i0]))
    m = left - right  # (n_x, -n_y, n_z)
    mu = jp.abs(m)
    sel0 = (mu[0] >= mu[1]) & (mu[0] >= mu[2])
    sel1 = ~sel0 & (mu[1] >= mu[2])
    cs = []
    for u, v in ((1, 2), (0, 2), (0, 1)):
        A = [(s[u] - p[u], s[v] - p[v]) for s in (s1, s2, s3)]
        t = rounded((A[1][0] * A[2][1], A[2][0] * A[1][1], A[2][0] * A[0][1],
                     A[0][0] * A[2][1], A[0][0] * A[1][1], A[1][0] * A[0][1]))
        cs.append(jp.stack([t[0] - t[1], t[2] - t[3], t[4] - t[5]]))
    big = where(sel0, m[0], where(sel1, m[1], m[2]))
    c = where(sel0, cs[0], where(sel1, cs[1], cs[2]))
    inside = _same(big, c) & ~none
    det = (c[0] + c[1]) + c[2]
    full = _vdiv(c, where(det == 0, 1.0, det))
    best = _best_face([s1, s2, s3], inside, _line_weights)
    return where(jp.all(inside), full, best)


def _tet_weights(s1, s2, s3, s4):
    c34 = rounded_cross(s3, s4)
    c = jp.stack([-dot3(s2, c34), dot3(s1, c34), -dot3(s1, rounded_cross(s2, s4)),
                  dot3(s1, rounded_cross(s2, s3))])
    det = c[0] + c[1] + c[2] + c[3]
    inside = _same(det, c)
    best = _best_face([s1, s2, s3, s4], inside, _tri_weights)
    return where(jp.all(inside), _vdiv(c, where(det == 0, 1.0, det)), best)


# ---- supports


class Shapes:
    """A prism (6, 3) and a partner, both in the height field's frame.

    ``pts`` (nv, 3): a polytope partner's vertices (box: corner ``bits`` x + 2y + 4z
    positive); ``box``: static, whether the partner is a box (support from the signs of
    ``mat.T d``) else a mesh (support the argmax of ``local @ mat.T d``, ``local`` its
    geom-frame vertices). ``smooth``: None for those, else (geom type, size, centre) of a
    sphere, capsule, ellipsoid or cylinder partner, whose support point is computed, not
    chosen. ``half``: None where no margin is given, else half the contact margin: MuJoCo 4.0
    then grows both shapes by it (the support points move along their directions, so the
    grown shapes' penetration is margin - dist) and, the shapes being no longer discrete,
    stops GJK and EPA at ccd_tolerance as for smooth ones (``soft``). A sphere's or capsule's
    core (``CORE``: "point", "segment") is discrete, as MuJoCo's GJK takes mjc_pointSupport and
    mjc_lineSupport.
    ``first``: None, or (``SMOOTH`` name, size, centre, orientation) of a smooth geom 1 that takes
    the prism's place (``nativeccd``: a convex pair outside a height field, in world
    coordinates); its vertex id is always 0. Or ("box", size, centre, orientation) or
    ("mesh", geom-frame vertices, centre, orientation): a polytope geom 1 (``polyccd``), its
    support chosen as the partner's (a box's corner by the signs of the local direction, a
    zero component taking the + side, as mjc_boxSupport; a mesh's lowest-index argmax) with
    its vertex id (corner bits, vertex index); EPA's discrete stop is then a repeated
    (geom-1, geom-2) vertex pair, as 4.0 tests it (the prism's id is always -1 there).
    ``soft``: None (decided statically as above), or a traced boolean where discrete and
    grown queries share one program (a polytope pair: grown where the margin is positive).
    """

    def __init__(self, prism, pts, mat, local, box, smooth=None, half=None, first=None,
                 soft=None):
        self.prism, self.pts, self.mat, self.local, self.box = prism, pts, mat, local, box
        self.smooth, self.half, self.first = smooth, half, first
        core = smooth is not None and smooth[0] in CORE.values()
        first_core = first is not None and first[0] in CORE.values()
        self.first_poly = first is not None and first[0] in ("box", "mesh")
        if self.first_poly:
            kind, data, pos1, mat1 = first
            self.first_pts = (box_points(pos1, mat1, data) if kind == "box"
                              else mesh_points(pos1, mat1, data))
        # 4.0's GJK takes the discrete stops only where both shapes are: margin 0, each a
        # point or segment core, a box, mesh or height field (read from libmujoco 4.0)
        self.soft = ((smooth is not None and not core) or half is not None
                     or (first is not None and not first_core and not self.first_poly))
        if soft is not None:
            self.soft = soft
        self.dtype = (prism if first is None else first[2]).dtype

    def if_soft(self, a, b):
        """a where the query takes the smooth-shape stops, else b (``soft`` may be traced)."""
        if isinstance(self.soft, bool):
            return a if self.soft else b
        return where(self.soft, a, b)

    def smooth_point(self, e):
        """A smooth partner's support point along e (hfield frame), margin-grown."""
        kind, size, pos = self.smooth
        core = smooth_core(kind, size, pos, self.mat, e)
        return core if self.half is None else core + self.half * e

    def prism_point(self, d, ia):
        """The prism's point of a vertex found along d with prism id ia (margin-grown)."""
        if self.first_poly:
            core = self.first_pts[ia]
        elif self.first is not None:
            core = smooth_core(*self.first, d)
        else:
            core = self.prism[ia]
        return core if self.half is None else core + self.half * d

    def partner_point(self, d, ib):
        """The partner's point of a vertex found along d with partner id ib."""
        if self.smooth:
            return self.smooth_point(-d)
        return self.pts[ib] if self.half is None else self.pts[ib] - self.half * d

    def support(self, d):
        """Support of prism - partner along d: (w, prism vertex id, partner vertex id; 0
        for a smooth partner)."""
        if self.first_poly:
            best = _polytope_id(self.first[0] == "box", self.first[3], self.first[1], d)
        elif self.first is not None:
            best = jp.zeros((), jp.int32)
        else:
            vals = dot3(self.prism, d)
            lo = where(d[2] < 0, 0, 3)
            best, val = lo, vals[lo]
            for k in (1, 2):
                t = vals[lo + k]
                best = where(t > val, lo + k, best)
                val = where(t > val, t, val)
        e = -d
        if self.smooth:
            return self.prism_point(d, best) - self.smooth_point(e), \
                best.astype(jp.int32), jp.zeros((), jp.int32)
        ib = _polytope_id(self.box, self.mat, self.local, e)
        return self.prism_point(d, best) - self.partner_point(d, ib), best.astype(jp.int32), ib


def _polytope_id(box: bool, mat, local, e):
    """A box's or mesh's support vertex id along e (world): a box's corner bits (x + 2y + 4z
    positive; a zero local component takes the + side), a mesh's lowest-index argmax of its
    geom-frame vertices ``local``."""
    loc = jp.stack([dot3(mat[:, 0], e), dot3(mat[:, 1], e), dot3(mat[:, 2], e)])
    if box:
        s = loc >= 0
        return s[0].astype(jp.int32) + 2 * s[1].astype(jp.int32) + 4 * s[2].astype(jp.int32)
    return argmax(dot3(local, loc[None]))


def smooth_core(kind, size, pos, mat, e):
    """Support point along the unit direction e of a sphere, capsule, ellipsoid or cylinder
    of ``size`` at ``pos`` with orientation ``mat``, or of a sphere's or capsule's core
    ("point", "segment": ``CORE``)."""
    u = jp.stack([dot3(mat[:, 0], e), dot3(mat[:, 1], e), dot3(mat[:, 2], e)])
    # MuJoCo 4.0's support functions (mjc_capsuleSupport, mjc_ellipsoidSupport,
    # mjc_cylinderSupport) in their order of operations: axis-aligned poses tie on the
    # last bit
    if kind == "sphere":
        return pos + size[0] * e
    if kind == "point":  # mjc_pointSupport: a sphere's core
        return pos + 0.0 * e
    if kind == "segment":  # mjc_lineSupport: a capsule's core, the upper end for a level or
        # upward u
        return pos + rounded(where(u[2] >= 0, size[1], -size[1]) * mat[:, 2])
    if kind == "capsule":  # the upper cap's centre for a level or upward u
        loc = u * size[0]
        loc = loc.at[2].add(where(u[2] >= 0, size[1], -size[1]))
    elif kind == "ellipsoid":
        t = rounded(u * size)
        tt = dot3(t, t)
        # square roots of 0 guarded: unused polytope slots hold zero directions, whose
        # derivative would otherwise be 0 * inf
        big = tt >= MINVAL * MINVAL  # MuJoCo: norm >= mjMINVAL, else the x vertex
        inv = 1.0 / jp.sqrt(where(big, tt, 1.0))
        first = jp.zeros(3, size.dtype).at[0].set(size[0])
        loc = where(big, t * rounded(inv * size), first)
    else:  # cylinder: the rim point along u's radial part (none below mjMINVAL), the
        # top cap for a level or upward u
        r2 = rounded(u[0] * u[0]) + rounded(u[1] * u[1])
        big = r2 > MINVAL * MINVAL
        # the root ``rounded``: XLA would rewrite a / sqrt(b) as a * rsqrt(b), another
        # rounding than mjc_cylinderSupport's division (1477 of 20000 directions)
        scale = size[0] / rounded(jp.sqrt(where(big, r2, 1.0)))
        rim = where(big, u[:2] * scale, 0.0)
        loc = jp.concatenate([rim, where(u[2] >= 0, size[1], -size[1])[None]])
    return jp.stack([dot3(mat[0], loc), dot3(mat[1], loc), dot3(mat[2], loc)]) + pos


def box_points(pos, mat, size):
    """(8, 3) box corners in the height field frame, indexed by their sign bits."""
    bits = np.arange(8)
    sgn = np.stack([(bits >> k) & 1 for k in range(3)], -1) * 2.0 - 1.0
    loc = jp.asarray(sgn, size.dtype) * size
    return jp.stack([dot3(mat[0], loc), dot3(mat[1], loc), dot3(mat[2], loc)], -1) + pos


def mesh_points(pos, mat, verts):
    return jp.stack([dot3(mat[0], verts), dot3(mat[1], verts), dot3(mat[2], verts)], -1) + pos


# ---- GJK


def _next_point(S, lam, n):
    """MuJoCo 4.0's next GJK iterate from the n kept points S (4, 3) and their weights lam:
    the origin's projection on the triangle's plane (projectOriginPlane) or the segment's
    line, the weighted sum where those are degenerate, the point itself for n = 1."""
    wsum = _wsum(lam, S)
    p3, none3 = _plane_point(S[0], S[1], S[2])
    d = S[1] - S[0]
    dd = dot3(d, d)
    line = dd >= 1e-30
    p2 = S[1] + rounded(_sdiv(-dot3(S[1], d), where(line, dd, 1.0)) * d)
    return where((n == 3) & ~none3, p3, where((n == 2) & line, p2, wsum))


def _gjk(sh: Shapes, x0, cutoff=None):
    """MuJoCo 4.0's GJK: (ok, n, ids ia (4,), ib (4,), support directions (4, 3)) of the
    simplex EPA starts from: a tetrahedron holding the origin, or GJK's simplex of n = 2 or
    3 points where it ends within ccd_tolerance of the origin (``_initial_polytope``).

    No tetrahedron walk: the sub-distance iteration runs until its simplex holds the origin
    (dist 0), or stops at the top of an iteration where |x| is below ccd_tolerance (smooth
    shapes in the penetration query; mjMINVAL for discrete ones, in the distance mode and
    for a one-point simplex) or changed by less than mjMINVAL, or at the Frank-Wolfe test
    (from the second iteration: x.(x - s) < 0 for discrete shapes, < ccd_tolerance^2 / 2
    for smooth ones). The next iterate is the origin's projection on the kept segment or
    triangle (``_next_point``). Where GJK ends on fewer than 4 points, a support plane along
    -x that keeps the origin out (x.s > 0) means apart.

    With ``cutoff`` (a distance), MuJoCo's distance mode instead: a support plane that keeps
    the origin farther than ``cutoff`` ends the search as far apart. Returns then (far, n,
    ia (3,), ib (3,), directions (3, 3), weights (3,)): the final simplex of n points and the
    weights of its point nearest the origin (``distance_contact``)."""
    dt = x0.dtype
    i4 = jp.zeros(4, jp.int32)
    z43 = jp.zeros((4, 3), dt)
    min_norm = MINVAL if cutoff is not None else sh.if_soft(TOL, MINVAL)
    eps = sh.if_soft(0.5 * TOL * TOL, 0.0)
    # coincident centres: MuJoCo starts from +x
    x0 = where(jp.sqrt(dot3(x0, x0)) < MINVAL, jp.zeros(3, dt).at[0].set(1.0), x0)
    xnorm0 = jp.sqrt(dot3(x0, x0))
    # phase 0: GJK, 2: done
    st = dict(phase=jp.zeros((), jp.int32), ok=jp.zeros((), bool), k=jp.zeros((), jp.int32),
              x=x0, xnorm=xnorm0, xprev=xnorm0,
              n=jp.zeros((), jp.int32), SW=z43, SA=i4, SB=i4, TA=i4, TB=i4,
              TN=jp.zeros((), jp.int32),
              steps=jp.zeros((), jp.int32), SD=z43, TD=z43,
              lam=jp.zeros(4, dt).at[0].set(1.0), far=jp.zeros((), bool))

    def final(n, xnorm):
        # mjc_ccd: EPA runs from GJK's simplex when its distance is within the tolerance
        # and the simplex has at least 2 points (``_initial_polytope``)
        return (n >= 2) & (xnorm <= TOL)

    def body(st):
        k, n, x, xnorm = st["k"], st["n"], st["x"], st["xnorm"]
        # -- the loop-top stops: |x| below the threshold, or stalled
        thr = where(n == 1, MINVAL, min_norm)
        g_end = (k >= KMAX) | (xnorm < thr) | ((k > 0) & (jp.abs(xnorm - st["xprev"]) < MINVAL))
        inv = 1.0 / where(xnorm > 0, xnorm, 1.0)
        dirn = -rounded(x * inv)  # MuJoCo scales by the reciprocal of |x|
        w, ia, ib = sh.support(dirn)
        ns = jp.minimum(n, 3)
        SD = st["SD"].at[ns].set(dirn)
        SW = st["SW"].at[ns].set(w)
        SA = st["SA"].at[ns].set(ia)
        SB = st["SB"].at[ns].set(ib)
        g_fw = (k > 0) & (dot3(x, x - w) < eps)
        xw = dot3(x, w)
        if cutoff is None:
            g_far = xw > 0
        else:  # MuJoCo's distance cutoff: the support plane keeps the origin beyond it
            g_far = (xw > 0) & (xw >= cutoff * xnorm)
        g_done = g_end | g_fw | g_far
        # -- the sub-distance step
        do7 = ~g_done
        lam_t = _tet_weights(SW[0], SW[1], SW[2], SW[3])
        lam_f = jp.concatenate([_tri_weights(SW[0], SW[1], SW[2]), jp.zeros(1, dt)])
        lam_l = jp.concatenate([_line_weights(SW[0], SW[1]), jp.zeros(2, dt)])
        lam_p = jp.array([1.0, 0.0, 0.0, 0.0], dt)
        lam = where(n == 3, lam_t, where(n == 2, lam_f, where(n == 1, lam_l, lam_p)))
        lam = where(jp.arange(4) <= n, lam, 0.0)
        keep = lam != 0
        order = jp.argsort(~keep, stable=True)
        n7 = jp.sum(keep).astype(jp.int32)
        lk = where(keep, lam, 0.0)[order]
        SWc, SAc, SBc, SDc = SW[order], SA[order], SB[order], SD[order]
        xn = _next_point(SWc, lk, n7)
        end7 = do7 & (n7 == 4)  # a tetrahedron holding the origin: dist 0
        # -- results
        # the loop-top and Frank-Wolfe stops keep the simplex before this support point; a
        # support plane along -x keeping the origin out then means apart
        stop = g_end | g_fw
        apart = (xnorm >= MINVAL) & (xw > 0)
        ok_gjk = stop & final(n, xnorm) & ~apart
        new = dict(st)
        new["steps"] = st["steps"] + 1
        new["ok"] = ok_gjk | end7
        new["phase"] = where(g_done | end7, 2, 0).astype(jp.int32)
        new["SD"] = where(do7, SDc, SD)
        new["SW"] = where(do7, SWc, SW)
        new["SA"] = where(do7, SAc, SA)
        new["SB"] = where(do7, SBc, SB)
        new["n"] = where(do7, n7, n)
        new["x"] = where(do7 & ~end7, xn, x)
        new["xprev"] = where(do7, xnorm, st["xprev"])
        new["xnorm"] = where(do7 & ~end7, jp.sqrt(dot3(xn, xn)), xnorm)
        new["lam"] = where(do7, lk, st["lam"])
        new["far"] = st["far"] | (g_far & ~stop)
        new["k"] = where(do7, k + 1, k)
        # the simplex handed to EPA: the tetrahedron, or GJK's where it ends touching
        new["TA"] = where(end7, SAc, where(ok_gjk, st["SA"], st["TA"]))
        new["TB"] = where(end7, SBc, where(ok_gjk, st["SB"], st["TB"]))
        new["TD"] = where(end7, SDc, where(ok_gjk, st["SD"], st["TD"]))
        new["TN"] = where(end7, 4, where(ok_gjk, n, st["TN"])).astype(jp.int32)
        return new

    st = jax.lax.while_loop(lambda s: (s["phase"] != 2) & (s["steps"] < GJK_STEPS), body,
                            lanewise(st, x0))
    if cutoff is not None:
        return (st["far"], st["n"], st["SA"][:3], st["SB"][:3], st["SD"][:3],
                st["lam"][:3])
    return st["ok"] & (st["phase"] == 2), st["TN"], st["TA"], st["TB"], st["TD"]


# ---- EPA


_TET_FACES = np.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [3, 2, 1]], np.int32)
_TET_ADJ = np.array([[1, 3, 2], [2, 3, 0], [0, 3, 1], [2, 0, 1]], np.int32)
# the hexahedra (two tetrahedra on a shared triangle) MuJoCo's EPA starts from where GJK ends
# on a triangle (vertices: the triangle, then the supports below and above it) or a segment
# (its ends, then three supports around it); both have the same face adjacency
_TRI_FACES = np.array([[4, 0, 1], [4, 2, 0], [4, 1, 2], [3, 1, 0], [3, 0, 2], [3, 2, 1]],
                      np.int32)
_SEG_FACES = np.array([[0, 2, 3], [0, 4, 2], [0, 3, 4], [1, 3, 2], [1, 2, 4], [1, 4, 3]],
                      np.int32)
_HEX_ADJ = np.array([[1, 3, 2], [2, 4, 0], [0, 5, 1], [5, 0, 4], [3, 1, 5], [4, 2, 3]],
                    np.int32)
# the tetrahedron's faces and adjacency padded to the hexahedra's 6; each face's fourth
# vertex (the one off it), for both
_TET_FACES5 = np.concatenate([_TET_FACES, np.zeros((2, 3), np.int32)])
_TET_ADJ5 = np.concatenate([_TET_ADJ, np.zeros((2, 3), np.int32)])
_TET_OTHER5 = np.array([3, 2, 1, 0, 0, 0], np.int32)
_TRI_OTHER = np.array([2, 1, 0, 2, 1, 0], np.int32)
# cos and sin of 120 degrees as MuJoCo writes them
_COS120, _SIN120 = -0.5, 0.86602540378


def _support_along(sh: Shapes, d, dnorm):
    """MuJoCo's EPA support along d of norm dnorm (+x where dnorm <= mjMINVAL): (w, ia, ib,
    the unit direction)."""
    unit = jp.zeros(3, d.dtype).at[0].set(1.0)
    dirn = where(dnorm > MINVAL, _vdiv(d, where(dnorm > MINVAL, dnorm, 1.0)), unit)
    w, ia, ib = sh.support(dirn)
    return w, ia, ib, dirn


def _verts(sh: Shapes, D, A, B):
    return jax.vmap(sh.prism_point)(D, A) - jax.vmap(sh.partner_point)(D, B)


def _first_flat(W, faces):
    """(any, index) of the first face (in order) within mjMINVAL of the origin."""
    _, d2 = _face_vec(W, jp.asarray(faces))
    flat = d2 < MINVAL * MINVAL
    return jp.any(flat), jp.argmax(flat)


def _same_side(p0, p1, p2, p3):
    nrm = rounded_cross(p1 - p0, p2 - p0)
    a, b = dot3(nrm, p3 - p0), dot3(nrm, -p0)
    return ((a > 0) & (b > 0)) | ((a < 0) & (b < 0))


def _holds_origin(p0, p1, p2, p3):
    return (_same_side(p0, p1, p2, p3) & _same_side(p1, p2, p3, p0)
            & _same_side(p2, p3, p0, p1) & _same_side(p3, p0, p1, p2))


def _on_triangle(v1, v2, v3, p):
    """Whether p lies on the triangle (MuJoCo's affine-coordinate test, to mjMINVAL)."""
    big, c = _proj_areas(v1, v2, v3, p)
    lam = _vdiv(c, where(big == 0, 1.0, big))
    x = _wsum(lam, jp.stack([v1, v2, v3])) - p
    return jp.all(lam >= 0) & (jp.sqrt(dot3(x, x)) < MINVAL)


def _ray_triangle(p, q, a, b, c):
    """4.0's rayTriangle (read from libmujoco 4.0): the triple products [a', b', d],
    [b', c', d], [c', a', d] of the triangle's vertices a', b', c' and the segment's d = q - p,
    all relative to p; the segment crosses the triangle where they share a sign."""
    d, a, b, c = q - p, a - p, b - p, c - p
    return jp.stack([dot3(a, rounded_cross(b, d)), dot3(b, rounded_cross(c, d)),
                     dot3(c, rounded_cross(a, d))])


def _recover_hexa(o):
    """4.0's choice (polytope3, recoverHexa; read from libmujoco 4.0) of the polytope on
    a triangle t0 t1 t2 and the supports below and above it (our hexahedron's vertex order
    t0, t1, t2, below, above), given ``_ray_triangle``'s products o of the segment from above
    to below: (a permutation of the five vertices, tetrahedron). Where the segment crosses the
    triangle, the hexahedron itself; where exactly one product is positive and the other two
    below -mjMINVAL, the hexahedron on the triangle of the two supports and the vertex of
    that product's second edge end, the two others as its apexes; else the tetrahedron of
    the two supports and the edge of the smallest product (first 4 of the permutation, in
    4.0's order: the edge, then above, below)."""
    hit = jp.all(o >= 0) | jp.all(o <= 0)
    neg = o < -MINVAL
    pos = o > 0
    ca = pos[0] & neg[1] & neg[2]
    cb = pos[1] & neg[0] & neg[2]
    cc = pos[2] & neg[0] & neg[1]
    m0 = (o[1] >= o[0]) & (o[2] >= o[0])
    m1 = (o[0] >= o[1]) & (o[2] >= o[1])
    tet = where(m0, jp.array([0, 1, 4, 3, 3]), where(m1, jp.array([1, 2, 4, 3, 3]),
                                                     jp.array([2, 0, 4, 3, 3])))
    perm = where(hit, jp.arange(5), where(ca, jp.array([2, 3, 4, 1, 0]), where(
        cb, jp.array([0, 3, 4, 2, 1]), where(cc, jp.array([1, 3, 4, 0, 2]), tet))))
    return perm.astype(jp.int32), ~hit & ~ca & ~cb & ~cc


def _rotation120(axis):
    """MuJoCo's rotation by 120 degrees about ``axis`` (row-major 3x3)."""
    nn = jp.sqrt(dot3(axis, axis))
    u1, u2, u3 = [axis[i] / nn for i in range(3)]
    c, s, t = _COS120, _SIN120, 1.0 - _COS120
    r = rounded
    return jp.stack([
        jp.stack([c + r(r(u1 * u1) * t), r(r(u1 * u2) * t) - r(u3 * s),
                  r(r(u1 * u3) * t) + r(u2 * s)]),
        jp.stack([r(r(u2 * u1) * t) + r(u3 * s), c + r(r(u2 * u2) * t),
                  r(r(u2 * u3) * t) - r(u1 * s)]),
        jp.stack([r(r(u1 * u3) * t) - r(u2 * s), r(r(u2 * u3) * t) + r(u1 * s),
                  c + r(r(u3 * u3) * t)])])


def _initial_polytope(sh: Shapes, n, TA, TB, TD):
    """The polytope MuJoCo's EPA starts from (mjc_ccd: polytope2/3/4), given GJK's simplex
    of n points: (vertices: W (5, 3), ids A (5,), B (5,), directions D (5, 3); faces (6, 3),
    adjacency (6, 3); vertex count, face count, valid).

    * n = 4, a tetrahedron holding the origin: itself; where a face passes within mjMINVAL of
      the origin, the hexahedron on that face instead.
    * n = 3, a triangle: the hexahedron of the triangle and the supports along both of its
      normals; invalid if the normal vanishes, a support lies on the triangle or a face
      passes within mjMINVAL of the origin.
    * n = 2, a segment: the hexahedron of its ends and the supports along three directions
      120 degrees apart about it; where a face passes within mjMINVAL of the origin, the
      hexahedron on that face instead."""
    dt = sh.dtype
    # vertex records (W, A, B, D): points, geom-1 ids, geom-2 ids, support directions
    pick = lambda c, a, b: tuple(where(c, x, y) for x, y in zip(a, b))  # noqa: E731
    tet = (_verts(sh, TD, TA, TB), TA, TB, TD)
    tet5 = tuple(jp.concatenate([x, x[:1]]) for x in tet)  # padded to the hexahedra's 5
    W4 = tet[0]
    tet_flat, tet_j = _first_flat(W4, _TET_FACES)
    tet_ok = _holds_origin(W4[0], W4[1], W4[2], W4[3])
    # the segment's hexahedron
    diff = W4[1] - W4[0]
    ax = jp.argmin(jp.abs(diff))  # the first axis of least extent
    d1 = rounded_cross(jp.zeros(3, dt).at[ax].set(1.0), diff)
    R = _rotation120(diff)
    d2 = jp.stack([dot3(R[i], d1) for i in range(3)])
    d3 = jp.stack([dot3(R[i], d2) for i in range(3)])
    around = [_support_along(sh, d, jp.sqrt(dot3(d, d))) for d in (d1, d2, d3)]
    seg = tuple(jp.concatenate([x[:2], jp.stack([r[i] for r in around])])
                for i, x in enumerate(tet))
    seg_flat, seg_j = _first_flat(seg[0], _SEG_FACES)
    # the triangle a hexahedron is built on: GJK's, or the first flat face of the others
    tri = where(n == 3, jp.arange(3, dtype=jp.int32),
                where(n == 4, jp.asarray(_TET_FACES)[tet_j], jp.asarray(_SEG_FACES)[seg_j]))
    base = tuple(x[tri] for x in pick(n == 2, seg, tet5))
    Wt = base[0]
    nrm = rounded_cross(Wt[1] - Wt[0], Wt[2] - Wt[0])
    nn = jp.sqrt(dot3(nrm, nrm))
    below = _support_along(sh, -nrm, nn)  # MuJoCo takes this one first
    above = _support_along(sh, nrm, nn)
    hexa = tuple(jp.concatenate([x, below[i][None], above[i][None]])
                 for i, x in enumerate(base))
    # 4.0's polytope3 keeps that hexahedron only where the segment between the two supports
    # crosses the triangle; else it rebuilds it on another triangle of the five points, or
    # takes a tetrahedron of four of them (``_recover_hexa``)
    perm, tri_tet = _recover_hexa(_ray_triangle(above[0], below[0], Wt[0], Wt[1], Wt[2]))
    hexa = tuple(x[perm] for x in hexa)
    Wh = hexa[0]
    tri_faces = where(tri_tet, jp.asarray(_TET_FACES5), jp.asarray(_TRI_FACES))
    _, tri_d2 = _face_vec(Wh, tri_faces)
    tri_flat = jp.any((jp.arange(6) < where(tri_tet, 4, 6)) & (tri_d2 < MINVAL * MINVAL))
    # the origin on the far side of a face (from the polytope's other vertex) by at least
    # ccd_tolerance: not a polytope EPA can start from
    other = where(tri_tet, jp.asarray(_TET_OTHER5), jp.asarray(_TRI_OTHER))
    inside = jax.vmap(lambda f, o: _same_side(Wh[f[0]], Wh[f[1]], Wh[f[2]], Wh[o]))(
        tri_faces, other)
    outside = ~inside & (tri_d2 >= TOL * TOL) & (jp.arange(6) < where(tri_tet, 4, 6))
    # both supports strictly beyond the triangle's plane (mjMINVAL |n|)
    beyond = ((dot3(nrm, above[0] - Wt[0]) >= MINVAL * nn)
              & (dot3(-nrm, below[0] - Wt[0]) >= MINVAL * nn))
    tri_ok = ((nn >= MINVAL) & ~_on_triangle(Wt[0], Wt[1], Wt[2], above[0])
              & ~_on_triangle(Wt[0], Wt[1], Wt[2], below[0]) & beyond & ~tri_flat
              & ~jp.any(outside))
    use_tet = (n == 4) & ~tet_flat
    use_seg = (n == 2) & ~seg_flat
    valid = where(use_tet, tet_ok, use_seg | tri_ok)
    four = use_tet | (~use_seg & tri_tet)
    W, A, B, D = pick(use_tet, tet5, pick(use_seg, seg, hexa))
    faces = where(use_tet, jp.asarray(_TET_FACES5),
                  where(use_seg, jp.asarray(_SEG_FACES), tri_faces))
    adj = where(four, jp.asarray(_TET_ADJ5), jp.asarray(_HEX_ADJ))
    nv = where(four, 4, 5).astype(jp.int32)
    nf = where(four, 4, 6).astype(jp.int32)
    # the centroid 4.0's faces are oriented away from (attachFace): the tetrahedron's, or the
    # hexahedron's summed in polytope3's vertex order (the supports above, then below)
    c4 = rounded((((W[0] + W[1]) + W[2]) + W[3]) * 0.25)
    c5 = rounded(((((W[0] + W[1]) + W[2]) + W[4]) + W[3]) * 0.2)
    return W, A, B, D, faces, adj, nv, nf, valid, where(four, c4, c5)


def _face_vec(W, fv, centroid=None):
    """MuJoCo's face record: (v, d2) from the face's vertex ids (a, b, c). With
    ``centroid``, v (the origin's projection on the face's plane) is turned to point away
    from it where it points towards it (the origin beyond the face), as 4.0's attachFace and
    EPA do (read from libmujoco 4.0: the sign of (W[a] - centroid) . v)."""
    v, none = _plane_point(W[fv[..., 2]], W[fv[..., 1]], W[fv[..., 0]])
    v = where(none[..., None], 0.0, v)
    if centroid is not None:
        v = where((dot3(W[fv[..., 0]] - centroid, v) < 0)[..., None], -v, v)
    return v, where(none, 0.0, dot3(v, v))


def _epa(sh: Shapes, n, TA, TB, TD, nv_cap: int, nf_cap: int):
    """MuJoCo's EPA: (ok, the nearest face's ids ia (3,), ib (3,), directions (3, 3)).

    Discrete shapes stop when the upper bound meets the lower one or the partner's support
    vertex repeats; smooth ones when the new support point's bound is within
    ccd_tolerance of the nearest face (this iteration's bound, not the running minimum:
    measured, that is what reproduces MuJoCo 4.0's ellipsoid and cylinder contacts). It
    starts from ``_initial_polytope``'s tetrahedron or hexahedron (GJK's simplex ``n``)."""
    dt = sh.dtype
    W0, A0, B0, D0, F0, ADJ0, nv0, nf0, valid, C0 = _initial_polytope(sh, n, TA, TB, TD)
    live_v = jp.arange(5) < nv0
    live_f = jp.arange(6) < nf0
    VD = jp.zeros((nv_cap, 3), dt).at[:5].set(D0)
    VW = jp.zeros((nv_cap, 3), dt).at[:5].set(W0)
    VA = jp.zeros(nv_cap, jp.int32).at[:5].set(A0)
    VB = jp.full(nv_cap, -1, jp.int32).at[:5].set(where(live_v, B0, -1))
    v0, d0 = _face_vec(W0, F0, C0)
    FV = jp.zeros((nf_cap, 3), jp.int32).at[:6].set(F0)
    FADJ = jp.zeros((nf_cap, 3), jp.int32).at[:6].set(ADJ0)
    FVEC = jp.zeros((nf_cap, 3), dt).at[:6].set(v0)
    FD2 = jp.zeros(nf_cap, dt).at[:6].set(d0)
    idx6 = jp.arange(6, dtype=jp.int32)
    FIDX = jp.full(nf_cap, -2, jp.int32).at[:6].set(where(live_f, idx6, -2))
    MAP = jp.zeros(nf_cap, jp.int32).at[:6].set(idx6)
    bad0 = ~valid
    scap = 2 * nv_cap + 4  # DFS stack: at most the live faces
    hcap = nv_cap  # horizon edges: at most the vertices
    st = dict(VW=VW, VA=VA, VB=VB, VD=VD, nv=nv0, FV=FV, FADJ=FADJ, FVEC=FVEC,
              FD2=FD2, FIDX=FIDX, MAP=MAP, nmap=nf0, nf=nf0, face=jp.array(-1, jp.int32),
              upper=jp.array(MAXVAL, dt), upper2=jp.array(MAXVAL, dt),
              status=where(bad0, 2, 0).astype(jp.int32), it=jp.zeros((), jp.int32))

    def delete(FIDX, MAP, nmap, fi, active):
        idx = FIDX[fi]
        inmap = active & (idx >= 0)
        last = MAP[jp.maximum(nmap - 1, 0)]
        nmap2 = where(inmap, nmap - 1, nmap)
        move = inmap & (idx < nmap2)
        MAP = where(move, MAP.at[jp.maximum(idx, 0)].set(last), MAP)
        FIDX = where(move, FIDX.at[last].set(idx), FIDX)
        FIDX = where(active, FIDX.at[fi].set(-2), FIDX)
        return FIDX, MAP, nmap2

    def edge_of(FV, g, vert):
        return where(FV[g, 0] == vert, 0, where(FV[g, 1] == vert, 1, 2)).astype(jp.int32)

    def horizon(FV, FADJ, FVEC, FD2, FIDX, MAP, nmap, face, w, active):
        """The depth-first walk over the faces that w sees, from ``face``."""
        FIDX, MAP, nmap = delete(FIDX, MAP, nmap, face, active)
        i0 = jp.zeros(scap, jp.int32)
        ds = dict(FIDX=FIDX, MAP=MAP, nmap=nmap,
                  SF=i0.at[0].set(face), SE=i0.at[0].set(2), SK=i0.at[0].set(1),
                  SKE=i0.at[0].set(3), sp=where(active, 1, 0).astype(jp.int32),
                  HG=jp.zeros(hcap, jp.int32), HE=jp.zeros(hcap, jp.int32),
                  ne=jp.zeros((), jp.int32), over=jp.zeros((), bool))

        def step(ds):
            top = ds["sp"] - 1
            fi, e, k, ke = ds["SF"][top], ds["SE"][top], ds["SK"][top], ds["SKE"][top]
            pop = k > ke
            i = (e + k) % 3
            g = FADJ[fi, i]
            alive = ~pop & (ds["FIDX"][g] > -2)
            ge = edge_of(FV, g, FV[fi, (i + 1) % 3])
            vis = dot3(FVEC[g], w) - FD2[g] > MINVAL
            push = alive & vis
            hor = alive & ~vis
            out = dict(ds)
            out["SK"] = where(pop, ds["SK"], ds["SK"].at[top].set(k + 1))
            FIDX2, MAP2, nmap2 = delete(ds["FIDX"], ds["MAP"], ds["nmap"], g, push)
            out["FIDX"], out["MAP"], out["nmap"] = FIDX2, MAP2, nmap2
            sp = ds["sp"]
            over = (push & (sp >= scap)) | (hor & (ds["ne"] >= hcap))
            spc = jp.minimum(sp, scap - 1)
            out["SF"] = where(push, out["SF"].at[spc].set(g), out["SF"])
            out["SE"] = where(push, out["SE"].at[spc].set(ge), out["SE"])
            out["SK"] = where(push, out["SK"].at[spc].set(1), out["SK"])
            out["SKE"] = where(push, out["SKE"].at[spc].set(2), out["SKE"])
            out["sp"] = where(pop, sp - 1, where(push, jp.minimum(sp + 1, scap), sp))
            nec = jp.minimum(ds["ne"], hcap - 1)
            out["HG"] = where(hor, ds["HG"].at[nec].set(g), ds["HG"])
            out["HE"] = where(hor, ds["HE"].at[nec].set(ge), ds["HE"])
            out["ne"] = where(hor, jp.minimum(ds["ne"] + 1, hcap), ds["ne"])
            out["over"] = ds["over"] | over
            out["sp"] = where(over, 0, out["sp"])
            return out

        ds = jax.lax.while_loop(lambda s: s["sp"] > 0, step, lanewise(ds, w))
        return ds

    def body(st):
        prev = st["face"]
        live = jp.arange(nf_cap) < st["nmap"]
        md = where(live, st["FD2"][st["MAP"]], jp.inf)
        jm = jp.argmin(md)
        found = md[jm] < MAXVAL
        face = where(found, st["MAP"][jm], prev)
        lower2 = where(found, md[jm], MAXVAL)
        stop1 = (lower2 > st["upper2"]) | (face < 0)
        stop2 = ~stop1 & (lower2 <= 0)
        go = ~stop1 & ~stop2
        fc = jp.maximum(face, 0)
        fvec = st["FVEC"][fc]
        lower = jp.sqrt(where(go, lower2, 1.0))
        dirn = _vdiv(fvec, lower)
        w, ia, ib = sh.support(dirn)
        nv = st["nv"]
        wi = jp.minimum(nv, nv_cap - 1)
        uk = dot3(fvec, w) / lower
        better = uk < st["upper"]
        upper = where(go & better, uk, st["upper"])
        upper2 = where(go & better, uk * uk, st["upper2"])
        if sh.soft is True:
            stop3 = go & (uk - lower < TOL)
            stop4 = jp.zeros((), bool)
        else:
            stop3 = go & sh.if_soft(uk - lower < TOL, upper - lower < MINVAL)
            # a repeated vertex pair (the prism's id is -1 in 4.0: its partner's alone)
            rep = (jp.arange(nv_cap) < nv) & (st["VB"] == ib)
            if sh.first_poly:
                rep = rep & (st["VA"] == ia)
            stop4 = go & ~stop3 & jp.any(rep) & sh.if_soft(False, True)
        expand = go & ~stop3 & ~stop4
        VW = st["VW"].at[wi].set(w)
        VA = st["VA"].at[wi].set(ia)
        VB = st["VB"].at[wi].set(ib)
        VD = st["VD"].at[wi].set(dirn)
        ds = horizon(st["FV"], st["FADJ"], st["FVEC"], st["FD2"], st["FIDX"], st["MAP"],
                     st["nmap"], fc, w, expand)
        ne = ds["ne"]
        nf = st["nf"]
        # new faces (wi, b, a) on the horizon edges a -> b, in horizon order
        hi = jp.arange(hcap, dtype=jp.int32)
        hl = hi < ne
        g, ge = ds["HG"], ds["HE"]
        FV = st["FV"]
        ha, hb = FV[g, ge], FV[g, (ge + 1) % 3]
        nfv = jp.stack([jp.full(hcap, wi, jp.int32), hb, ha], -1)
        prv = where(hi == 0, nf + ne - 1, nf + hi - 1)
        nxt = nf + (hi + 1) % jp.maximum(ne, 1)
        nadj = jp.stack([prv, g, nxt], -1).astype(jp.int32)
        nvec, nd2 = _face_vec(VW, nfv, C0)
        over = ds["over"] | (nf + ne > nf_cap) | (nv >= nv_cap)
        bad = (ne < 3) | jp.any(hl & (nd2 == 0)) | over
        inmap = hl & (lower2 <= nd2) & (nd2 <= upper2)
        rank = (jp.cumsum(inmap) - 1).astype(jp.int32)
        slot = where(hl, nf + hi, nf_cap)  # out of range: dropped
        mslot = where(inmap, ds["nmap"] + rank, nf_cap)
        FADJ = st["FADJ"].at[where(hl, g, nf_cap), ge].set(nf + hi, mode="drop")
        FADJ = FADJ.at[slot].set(nadj, mode="drop")
        FV2 = FV.at[slot].set(nfv, mode="drop")
        FVEC = st["FVEC"].at[slot].set(nvec, mode="drop")
        FD2 = st["FD2"].at[slot].set(nd2, mode="drop")
        FIDX = ds["FIDX"].at[slot].set(where(inmap, ds["nmap"] + rank, -1), mode="drop")
        MAP = ds["MAP"].at[mslot].set(nf + hi, mode="drop")
        nmap = ds["nmap"] + jp.sum(inmap).astype(jp.int32)
        ok_exp = expand & ~bad
        new = dict(st)
        sel = lambda a, b: where(ok_exp, a, b)  # noqa: E731
        new.update(FADJ=sel(FADJ, st["FADJ"]), FV=sel(FV2, FV), FVEC=sel(FVEC, st["FVEC"]),
                   FD2=sel(FD2, st["FD2"]), FIDX=sel(FIDX, st["FIDX"]), MAP=sel(MAP, st["MAP"]),
                   nmap=sel(nmap, st["nmap"]), nf=sel(nf + ne, nf))
        new["VW"], new["VA"], new["VB"] = (where(go, VW, st["VW"]), where(go, VA, st["VA"]),
                                           where(go, VB, st["VB"]))
        new["VD"] = where(go, VD, st["VD"])
        new["nv"] = where(go, jp.minimum(nv + 1, nv_cap), nv)
        new["upper"], new["upper2"] = upper, upper2
        new["face"] = where(stop1, prev, face)
        empty = ok_exp & (nmap == 0)
        done = stop1 | stop2 | stop3 | stop4 | empty
        new["status"] = where(expand & bad, 2, where(done, 1, 0)).astype(jp.int32)
        new["it"] = st["it"] + 1
        return new

    st = jax.lax.while_loop(lambda s: (s["status"] == 0) & (s["it"] < KMAX), body,
                            lanewise(st, W0))
    ok = (st["status"] != 2) & (st["face"] >= 0)
    fv = st["FV"][jp.maximum(st["face"], 0)]
    return ok, st["VA"][fv], st["VB"][fv], st["VD"][fv]


# ---- the contact, recomputed differentiably from the face's vertices


def _contact(A, B):
    W = A - B
    v, none = _plane_point(W[2], W[1], W[0])
    v = where(none, 0.0, v)
    big, c = _proj_areas(W[0], W[1], W[2], v)
    lam = _vdiv(c, where(big == 0, 1.0, big))
    x1, x2 = _wsum(lam, A), _wsum(lam, B)
    d2 = dot3(v, v)
    pos_d = d2 > 0
    dist = -where(pos_d, jp.sqrt(where(pos_d, d2, 1.0)), 0.0)
    n = x1 - x2
    nn = dot3(n, n)
    pos_n = nn > 0
    n = _vdiv(n, where(pos_n, jp.sqrt(where(pos_n, nn, 1.0)), 1.0))
    return dist, n, 0.5 * (x1 + x2), ~none & (big != 0) & pos_n


def prism_contact(prism, pts, mat, local, box: bool, center2, nv_cap: int, nf_cap: int,
                  smooth=None, margin=None):
    """MuJoCo 4.0's contact of a prism (6, 3) and a polytope or a smooth shape, in the
    height field frame.

    Args:
      prism: (6, 3) bottom then top vertices.
      pts: (nv, 3) the partner's vertices in the height field frame (``box_points`` order
        for a box).
      mat: (3, 3) the partner's orientation in the height field frame.
      local: (nv, 3) a mesh's vertices in its frame (None for a box).
      box: static, whether the partner is a box.
      center2: (3,) the partner's centre.
      smooth: (geom type name, size) of a sphere, capsule, ellipsoid or cylinder partner
        (``pts`` unused), whose support points are recomputed from the search's
        directions.
      margin: None, or the contact margin: both shapes are then grown by half of it and
        the query takes the smooth-shape stops (``Shapes``); the returned dist is the grown
        shapes' -depth, so the contact's dist is margin + dist.
    Returns:
      (dist, normal from prism to partner, pos, ok): ok where MuJoCo reports a contact.
    """
    found = prism_search(prism, pts, mat, local, box, center2, nv_cap, nf_cap, smooth, margin)
    return prism_rebuild(prism, pts, mat, local, box, center2, found, smooth, margin)


def _shapes(prism, pts, mat, local, box, center2, smooth, margin):
    return Shapes(prism, pts, mat, local, box,
                  None if smooth is None else (smooth[0], smooth[1], center2),
                  None if margin is None else 0.5 * margin)


def prism_search(prism, pts, mat, local, box: bool, center2, nv_cap: int, nf_cap: int,
                 smooth=None, margin=None):
    """The search part of ``prism_contact`` (same arguments), on ``stop_gradient``-ed
    inputs: (ok, prism vertex ids (3,), partner vertex ids (3,), support directions (3, 3))
    of the nearest face."""
    sg = jax.lax.stop_gradient
    sh = _shapes(*jax.tree.map(sg, (prism, pts, mat, local)), box, sg(center2),
                 None if smooth is None else (smooth[0], sg(smooth[1])),
                 None if margin is None else sg(margin))
    ok_g, n, TA, TB, TD = _gjk(sh, _centroid(sh.prism) - sg(center2))
    ok_e, ia, ib, dv = _epa(sh, n, TA, TB, TD, nv_cap, nf_cap)
    return ok_g & ok_e, ia, ib, dv


def _centroid(p6):
    """The prism's centre, where MuJoCo starts GJK from: mjc_center's sum of the six vertices
    times 1/6 (a product with the constant in libmujoco 4.0, not a division; the last bit
    of the start decides where long distance-mode searches stop). The product is ``rounded``:
    XLA would fuse it with the subtraction of the partner's centre into a multiply-add."""
    return rounded((((((p6[0] + p6[1]) + p6[2]) + p6[3]) + p6[4]) + p6[5]) * (1.0 / 6.0))


def distance_search(prism, pts, mat, local, box: bool, center2, cutoff, smooth=None):
    """MuJoCo 4.0's GJK distance query (``_gjk``'s distance mode, stopped at ccd_tolerance)
    between a prism and its bare partner, on ``stop_gradient``-ed inputs (arguments as
    ``prism_search``'s; ``cutoff``: the pair's margin): (far, n, prism vertex ids (3,),
    partner vertex ids (3,), support directions (3, 3), weights (3,)) of its final simplex.

    Measured on 4.0: with a margin, a partner apart from a prism by more than ccd_tolerance
    gets this query's contact, whose normal is up to ~1e-4 off the converged one for an
    ellipsoid or cylinder (the Frank-Wolfe stop leaves |x - x*| up to ccd_tolerance)."""
    sg = jax.lax.stop_gradient
    sh = _shapes(*jax.tree.map(sg, (prism, pts, mat, local)), box, sg(center2),
                 None if smooth is None else (smooth[0], sg(smooth[1])), None)
    return _gjk(sh, _centroid(sh.prism) - sg(center2), cutoff=sg(cutoff))


def prism_rebuild(prism, pts, mat, local, box: bool, center2, found, smooth=None,
                  margin=None):
    """The contact of ``prism_search``'s face (``found``), on the traced inputs
    (differentiable): (dist, normal, pos, ok)."""
    ok_s, ia, ib, dv = found
    traced = _shapes(prism, pts, mat, local, box, center2, smooth, margin)
    dist, n, pos, ok_c = _contact(jax.vmap(traced.prism_point)(dv, ia),
                                  jax.vmap(traced.partner_point)(dv, ib))
    return dist, n, pos, ok_s & ok_c & (dist < 0)


def distance_rebuild(prism, pts, mat, local, box: bool, center2, found, smooth=None):
    """The contact of ``distance_search``'s simplex (``found``) on the traced inputs
    (``distance_contact``)."""
    return distance_contact(_shapes(prism, pts, mat, local, box, center2, smooth, None), found)


def distance_unsearched(shape: tuple, dt):
    """``distance_search``'s result for lanes not searched (leading ``shape``): far apart."""
    i3 = jp.zeros(shape + (3,), jp.int32)
    return (jp.ones(shape, bool), jp.zeros(shape, jp.int32), i3, i3,
            jp.zeros(shape + (3, 3), dt), jp.zeros(shape + (3,), dt))


def distance_contact(sh: Shapes, found):
    """The contact of a distance-mode simplex (``found``: ``_gjk``'s with a cutoff) on the
    traced shapes ``sh``: (dist, normal from geom 1 to geom 2, pos midway between the
    witness points, ok). The weights are the search's (the nearest point's first-order
    change along the simplex does not move the distance); dist is 0 where the simplex holds
    the origin, and not ok where the search ended beyond the cutoff."""
    far, n, ia, ib, dv, lam = found
    lam = where(jp.arange(3) < n, jax.lax.stop_gradient(lam), 0.0)
    x1 = _wsum(lam, jax.vmap(sh.prism_point)(dv, ia))
    x2 = _wsum(lam, jax.vmap(sh.partner_point)(dv, ib))
    v = x2 - x1
    vv = dot3(v, v)
    apart = (vv > 0) & (n < 4)
    dist = where(apart, jp.sqrt(where(apart, vv, 1.0)), 0.0)
    return dist, _vdiv(v, where(apart, dist, 1.0)), 0.5 * (x1 + x2), ~far

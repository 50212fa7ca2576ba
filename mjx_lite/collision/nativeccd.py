"""MuJoCo 4.0's own GJK/EPA answer for touching and penetrating convex pairs with a smooth
geom (Computation chapter, "Collision detection > Convex collisions"; MuJoCo 4.0's native
pipeline, measured).

MuJoCo 4.0 stops EPA on smooth shapes (ellipsoid, cylinder, and sphere or capsule taken
whole) as soon as a new support point's bound is within ``ccd_tolerance`` of the nearest
face, so its depth is within 1e-6 of the optimum but its normal only within ~1e-3 (the
curvature turns a depth error e into a normal error of about sqrt(2 e / radius)). The general
solver (``convex``) converges to the optimum instead, so at such states its normal is another
than MuJoCo's by more than 1e-4. Here the same pairs take MuJoCo's search itself:
``hfield_ccd``'s port of its GJK (the sub-distance algorithm; 4.0 has no tetrahedron walk) and EPA
(face map between lower^2 and upper^2, horizon by depth-first walk), with geom 1 as a smooth
shape in place of the prism.

Which states take it, as 4.0 does (measured on ``tests/test_convex.py``'s states, margin
0.02 per geom): a touching or penetrating pair takes the query on both shapes grown by half
the contact margin (dist = margin - grown depth); one apart by more than ``ccd_tolerance``
(within the margin), MuJoCo's GJK distance query on the bare shapes (``distance_search``:
stopped at ccd_tolerance, cut off beyond the margin), whose normal the
Frank-Wolfe stop leaves up to ~1e-4 off the converged one (the converged distance put
ellipsoid-ellipsoid's separated normals 3.1e-5 off MuJoCo's, this query 6.7e-9). Which of
the two is decided by the converged distance. A sphere or capsule geom 1 takes the grown
query only where its core (centre, segment) touches or enters the other geom, else its
core's distance minus the radius (as on a height field, ``hfield``): against an ellipsoid,
a cylinder or (a capsule's segment) a mesh the core's GJK distance query (``DISTANCE_PAIRS``;
against a mesh GJK ends on its exact simplex, but where the segment lies parallel to a mesh
edge or face the witness points are that simplex's, which the converged distance need not
give), a sphere's centre against a mesh the converged distance (the same there).

Box-mesh and mesh-mesh (``POLY_PAIRS``) take the same search with geom 1 a polytope in the
prism's place (``hfield_ccd.Shapes``: box corners by sign bits, mesh vertices by index): both
discrete at margin 0 (EPA stops at a repeated vertex pair), grown by half the margin with the
smooth stops where the margin is positive (one program: the stops are selected per pair),
and apart within the margin the GJK distance query on the bare shapes. Its nearest face's
(or final simplex's) vertex ids on each geom are 4.0's multi-contact feature
(``multiccd``), and its contact is 4.0's single contact, with multiccd on or off (measured,
``tests/acceptance/collision_convex.txt``, margin 0.02: box-pebble, rock-pebble and
dodecahedron-rock single contacts now MuJoCo's to 1e-14; the converged ones were up to
1.8e-5 (frame) and 7.8e-5 (pos) off it).

The search runs on ``stop_gradient``-ed poses, compacted to the lanes that need it
(``convex.compact_map``); the contact is rebuilt differentiably from the nearest face's
support directions (``hfield_ccd.prism_rebuild``'s way), so gradients stay finite.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.collision import convex, hfield_ccd
from mjx_lite.math import where
from mjx_lite.types import GeomType

_G = GeomType
SMOOTH = hfield_ccd.SMOOTH
# the single-contact pairs whose geom 1 is smooth (type1 <= type2, as the driver orders them)
PAIRS = ((_G.CAPSULE, _G.ELLIPSOID), (_G.ELLIPSOID, _G.ELLIPSOID), (_G.ELLIPSOID, _G.CYLINDER),
         (_G.ELLIPSOID, _G.BOX), (_G.ELLIPSOID, _G.MESH), (_G.SPHERE, _G.MESH),
         (_G.CAPSULE, _G.CYLINDER), (_G.CAPSULE, _G.MESH), (_G.CYLINDER, _G.CYLINDER),
         (_G.CYLINDER, _G.BOX), (_G.CYLINDER, _G.MESH))
# the pairs whose GJK distance query (apart, within the margin) stops short of the converged
# distance: a smooth geom on a side (a sphere's core with a polytope converges); and a
# capsule's core with a mesh, whose distance converges but whose witness points, where the
# segment lies parallel to a mesh edge or face, are those of the simplex GJK ends on (its
# weights), not the converged query's (measured: 0.05 apart along the segment; which
# simplex it ends on can follow a tie of mesh vertices, decided in 4.0 by its hill-climbing
# support and here by the lowest vertex index, which agreed on the state measured)
DISTANCE_PAIRS = tuple(p for p in PAIRS if p[0] in (_G.ELLIPSOID, _G.CYLINDER)
                       or p[1] in (_G.ELLIPSOID, _G.CYLINDER)) + ((_G.CAPSULE, _G.MESH),)
# polytope pairs under multiccd (``multiccd``): MuJoCo's search for the contact feature (the
# nearest face's or final simplex's vertex ids on each geom) and its single contact; geom 1
# a box or mesh in the prism's place, both discrete at margin 0, grown (smooth stops) where
# the margin is positive; apart within the margin, GJK's distance query
POLY_PAIRS = ((_G.BOX, _G.MESH), (_G.MESH, _G.MESH))


def _shapes(type1: int, type2: int, geoms, half, core: bool = False):
    """``hfield_ccd.Shapes`` of the pair, geom 1 in the prism's place; with ``core``, a sphere's
    or capsule's core (``hfield_ccd.CORE``: a discrete shape, as 4.0's GJK takes
    mjc_pointSupport and mjc_lineSupport)."""
    pos1, mat1, size1, verts1, pos2, mat2, size2, verts2 = geoms
    soft = None
    if type1 == _G.BOX:
        first = ("box", size1, pos1, mat1)
    elif type1 == _G.MESH:
        first = ("mesh", verts1, pos1, mat1)
    else:
        kind = hfield_ccd.CORE[type1] if core and type1 in hfield_ccd.CORE else SMOOTH[type1]
        first = (kind, size1, pos1, mat1)
    if type1 in (_G.BOX, _G.MESH) and half is not None:
        soft = half > 0  # 4.0: discrete at margin 0, grown with the smooth stops beyond
    if type2 in SMOOTH:
        pts, local, box, smooth = jp.zeros((1, 3), pos2.dtype), None, False, (
            SMOOTH[type2], size2, pos2)
    elif type2 == _G.BOX:
        pts, local, box, smooth = hfield_ccd.box_points(pos2, mat2, size2), None, True, None
    else:
        pts, local, box, smooth = hfield_ccd.mesh_points(pos2, mat2, verts2), verts2, False, None
    return hfield_ccd.Shapes(None, pts, mat2, local, box, smooth, half, first, soft)


def search(type1: int, type2: int, geoms, margin):
    """MuJoCo's GJK and EPA on both geoms grown by half ``margin`` (``stop_gradient``-ed
    inputs): (ok, geom-1 ids (3,), geom-2 ids (3,), support directions (3, 3)) of the
    nearest face."""
    geoms = jax.tree.map(jax.lax.stop_gradient, geoms)
    sh = _shapes(type1, type2, geoms, 0.5 * jax.lax.stop_gradient(margin))
    ok_g, n, TA, TB, TD = hfield_ccd._gjk(sh, geoms[0] - geoms[4])
    ok_e, ia, ib, dv = hfield_ccd._epa(sh, n, TA, TB, TD, *hfield_ccd.SMOOTH_CAPS)
    return ok_g & ok_e, ia, ib, dv


def _cored(type1: int, geoms):
    """``geoms`` with a sphere's or capsule's radius set to 0 (its core: point, segment)."""
    if type1 not in (_G.SPHERE, _G.CAPSULE):
        return geoms
    return (*geoms[:2], geoms[2].at[0].set(0.0), *geoms[3:])


def distance_search(type1: int, type2: int, geoms, margin):
    """MuJoCo's GJK distance query on the bare geoms (a sphere's or capsule's core; on
    ``stop_gradient``-ed inputs), stopped at ccd_tolerance, cut off beyond ``margin``:
    ``hfield_ccd._gjk``'s distance-mode simplex."""
    geoms = jax.tree.map(jax.lax.stop_gradient, geoms)
    sh = _shapes(type1, type2, _cored(type1, geoms), None, core=True)
    cutoff = jax.lax.stop_gradient(margin) + convex.core_radius(type1, geoms[2])
    return hfield_ccd._gjk(sh, geoms[0] - geoms[4], cutoff=cutoff)


def distance_rebuild(type1: int, type2: int, geoms, found):
    """The contact (dist, normal, pos, ok) of ``distance_search``'s simplex on the traced
    geoms: a core's witness moved out by its radius; and the simplex's first vertex on each
    geom (bare shapes) with its three geom-2 vertex ids, padded with the first where the
    simplex has fewer points, as 4.0's multi-contact reads GJK's simplex (``rebuild``);
    and the same for geom 1."""
    sh = _shapes(type1, type2, _cored(type1, geoms), None, core=True)
    d, n, p, ok = hfield_ccd.distance_contact(sh, found)
    r1 = convex.core_radius(type1, geoms[2])
    _, ns, ia, ib, dv, _ = found
    dv0 = jax.lax.stop_gradient(dv[0])
    first = (sh.prism_point(dv0, ia[0]), sh.partner_point(dv0, ib[0]))
    pad = lambda i: jp.stack([i[0], where(ns >= 2, i[1], i[0]),  # noqa: E731
                              where(ns > 2, i[2], i[0])])
    return (d - r1, n, p + (0.5 * r1) * n, ok), first, pad(ib), pad(ia)


def rebuild(type1: int, type2: int, geoms, margin, found):
    """The contact of ``search``'s face on the traced poses: (dist, normal, pos, ok), and the
    face's first vertex on each geom (grown shapes), where 4.0's multi-contact takes a
    cylinder's generator: (gen1, gen2)."""
    ok_s, ia, ib, dv = found
    sh = _shapes(type1, type2, geoms, 0.5 * margin)
    A = jax.vmap(sh.prism_point)(dv, ia)
    B = jax.vmap(sh.partner_point)(dv, ib)
    dist, n, pos, ok_c = hfield_ccd._contact(A, B)
    return (dist + margin, n, pos, ok_s & ok_c & (dist < 0)), (A[0], B[0])


def refine(type1: int, type2: int, geoms, margin, contact, active, margined: bool = True):
    """``convex.signed_distances``' contacts (dist, normal, pos) over n pairs, with MuJoCo's
    query where 4.0 takes it (module docstring): searched on the ``active`` lanes that need
    it, rebuilt on all; with ``margined`` (static: the group's pairs can have a margin) a
    pair of ``DISTANCE_PAIRS`` apart within the margin takes ``distance_search``'s
    contact. Returns the contacts and (gen1, gen2, taken, ids2, ids1): the nearest face's
    first vertex on each geom and its three geom-2 and geom-1 vertex ids (a box's or mesh's
    contact feature) where ``taken`` (``rebuild``)."""
    dist, normal, pos = contact
    n = dist.shape[0]
    if type1 in (_G.SPHERE, _G.CAPSULE):
        r1 = jax.vmap(lambda size: convex.core_radius(type1, size))(geoms[2])
        need = dist + r1 <= 0.0  # the core touches or enters geom 2
    else:
        need = dist <= hfield_ccd.TOL
    need = need & active
    dt = dist.dtype
    i3 = jp.zeros((n, 3), jp.int32)
    found = convex.compact_map(
        lambda skip, g, mg: search(type1, type2, g, mg), need, (geoms, margin),
        (jp.zeros(n, bool), i3, i3, jp.zeros((n, 3, 3), dt)), convex.EPA_CHUNK)
    (qd, qn, qp, ok), (gen1, gen2) = convex.lanes_vmap(
        lambda g, mg, f: rebuild(type1, type2, g, mg, f), n, geoms, margin, found)
    take = need & ok
    ids1, ids2 = found[1], found[2]
    contact = (where(take, qd, dist), where(take[:, None], qn, normal),
               where(take[:, None], qp, pos))
    if margined and (type1, type2) in DISTANCE_PAIRS + POLY_PAIRS:
        # apart by more than ccd_tolerance (within the margin): the contact of MuJoCo's GJK
        # distance query, whose stop leaves the normal up to ~1e-4 off the converged one
        apart = active & ~need & (dist <= margin)
        found = convex.compact_map(
            lambda skip, g, mg: distance_search(type1, type2, g, mg), apart, (geoms, margin),
            hfield_ccd.distance_unsearched((n,), dt), convex.EPA_CHUNK)
        (gd, gn, gp, near), (d1, d2), dids, dids1 = convex.lanes_vmap(
            lambda g, f: distance_rebuild(type1, type2, g, f), n, geoms, found)
        sep = apart & near
        contact = (where(sep, gd, contact[0]), where(sep[:, None], gn, contact[1]),
                   where(sep[:, None], gp, contact[2]))
        # 4.0's multi-contact reads the feature of GJK's final simplex there as it reads
        # EPA's nearest face (a cylinder's generator at its first vertex's azimuth)
        gen1 = where(sep[:, None], d1, gen1)
        gen2 = where(sep[:, None], d2, gen2)
        ids2 = where(sep[:, None], dids, ids2)
        ids1 = where(sep[:, None], dids1, ids1)
        take = take | sep
    return contact, (gen1, gen2, take, ids2, ids1)


def signed_distance(type1: int, type2: int, geoms, margin):
    """``convex.signed_distance`` of one pair (``geoms`` as there: pos1, mat1, size1, verts1,
    pos2, mat2, size2, verts2) with MuJoCo's query where 4.0 takes it, as the driver
    computes it: ((dist, normal, pos), (gen1, gen2, taken, ids2, ids1)) as ``refine``'s."""
    sd = convex.signed_distance(type1, type2, *geoms)
    if (type1, type2) not in PAIRS + POLY_PAIRS:
        i3 = jp.zeros(3, jp.int32)
        return sd, (sd[2], sd[2], jp.zeros((), bool), i3, i3)
    one = lambda x: None if x is None else jp.asarray(x)[None]  # noqa: E731
    out = refine(type1, type2, tuple(one(g) for g in geoms), one(margin),
                 tuple(one(x) for x in sd), jp.ones(1, bool))
    return jax.tree.map(lambda x: x[0], out)

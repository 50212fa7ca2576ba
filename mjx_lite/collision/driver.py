"""Collision driver (Computation chapter, "Collision detection"): candidate pairs from the
compile-time table (``pairs``), bounding-sphere culling with margin, one vmapped collider
per geom-type key, contact parameters mixed as MuJoCo 4.0 does (Modeling chapter, "Contact
parameters"), written to ``d.contact`` with a static number of slots.

Slot layout: groups in key order, each group ``npair * NCON`` slots, pair-major. Slot order
is therefore by type key, not MuJoCo's pair order; compare contacts as sets. Contacts per
pair (``NCON``): 1 for any pair with a sphere or ellipsoid, 2 plane-capsule, 4 plane-cylinder,
4 plane-box, 4 plane-mesh (``plane_mesh``), 2 capsule-capsule, 2 capsule-box, 8 box-box
(``box``), 1 for the general convex solver (``convex``: GJK/EPA), 4 for box-mesh and
mesh-mesh under multiccd (``multiccd``), 2 for capsule-cylinder and capsule-mesh and 4 for
cylinder-cylinder, cylinder-box and cylinder-mesh under multiccd (``cylinder``),
min(50, 2 * window cells) for a height field (``hfield``): the most each collider can return,
so a pair that reaches its collider never loses a contact (only the cap below drops any).

Culling (mj_filterSphere) keeps shapes fixed (jit/vmap): every pair has its slots, and a
culled pair's are masked. For the convex-solver pairs the costly part, GJK/EPA's search,
runs group-wide (``convex.signed_distances``) on the passing pairs alone, gathered a chunk at
a time in a ``while_loop`` (EPA on the penetrating ones alone), so it costs what the near
pairs need. The colliders themselves (the differentiable rebuild, the multi-contact rules,
box-box) of a group of more than ``convex.CHUNK`` pairs run the same way on the passing
pairs when evaluated (``convex.sparse_vmap``), and on every pair when differentiated (the
tangents of the dense ``vmap``); the other analytic pairs (cheaper than the gathering) and
height-field groups run them on every pair. A model
that sets the custom numeric ``max_geom_pairs`` (the name MJX users know) caps each type
group at that many pairs (``max_geom_pairs_<type1>_<type2>``, e.g.
``max_geom_pairs_cylinder_box``, sets one group's cap): of the pairs that pass the culling
test, those whose bounding spheres are closest (MJX's top-k choice) go to the collider and
the rest cost nothing. More passing pairs than the cap in a group drops the excess and
counts a CONTACTFULL warning (``d.warning_count[1]``, once per step), as MuJoCo counts a full
contact buffer. Contact sensors need the uncapped
layout (static slot geoms).

The convex solver serves the pairs for which MuJoCo 4.0 returns one contact: sphere-mesh and
ellipsoid with capsule, ellipsoid, cylinder, box or mesh; with ``multiccd`` disabled also
capsule-cylinder, capsule-mesh, cylinder-cylinder, cylinder-box, cylinder-mesh, box-mesh and
mesh-mesh. Those with a smooth geom take MuJoCo's own GJK/EPA search (``nativeccd``, its
EPA stopped at ccd_tolerance as 4.0 stops it) where they touch or penetrate, and, apart
within the margin with an ellipsoid or cylinder (a capsule on its core), its GJK distance
query stopped at ccd_tolerance, so their normals are MuJoCo's, not the converged optimum's.
Box-mesh and mesh-mesh take the same search with the box or mesh geom 1 in its place
(``nativeccd.POLY_PAIRS``: discrete at margin 0, grown by half the margin beyond; apart
within the margin its GJK distance query on the bare shapes). Under MuJoCo 4.0's default
multi-contact they go to ``multiccd``: that search's contact and each geom's feature (the
distinct vertex ids it has in EPA's nearest face or GJK's final simplex, as 4.0 reads
them), then 4.0's rule as measured in ``tests/multiccd_reference.py`` (the faces and edges
of each feature, faces opposed within 0.996, an edge in a face within 0.0888, each point
with its own depth), with the hull polygons of ``mesh_poly*``.
Points beyond the pair margin are dropped (measured at margin 0.01 per geom: 500 of 500
states within the convex tolerance, 497 with the support sets along the converged normal
as features); of more than 4 clipped points 4.0 keeps the quadrilateral of its greedy
search (``multiccd.polygon_quad``) over mesh faces walked backwards.

Plane-mesh (``plane_mesh``) keeps up to four corners of the hull polygon at the deepest
vertex, as measured on 4.0: a polygon of more than four corners is pruned to four by greedy
area growth from the deepest vertex (exact on triangulated hulls and on the dodecahedron's
pentagons, where equal areas are decided by 4.0's float64 rounding).

A height field (``hfield``) with a sphere, capsule, ellipsoid, cylinder, box or mesh is a
union of triangular prisms: GJK/EPA against every prism of a static window of cells around
the other geom (its size from the static ``geom_reach`` and ``hfield_cell``), one contact per
penetrating prism in MuJoCo's visiting order, at most ``mjMAXCONPAIR`` (measured against 4.0
in ``tests/test_hfield_collision.py``). A group's height fields must share a grid shape.

Pairs with a cylinder or a capsule under multiccd (``cylinder``, as measured on 4.0 in
``tests/multiccd_reference.py``): GJK/EPA's normal and witness points (``nativeccd`` where
they touch or penetrate), then a cylinder cap as MuJoCo's 16-gon (corners every 22.5 degrees
from the local x axis), a cylinder's or capsule's generator as its edge (a cylinder's at the
azimuth of EPA's nearest face's first vertex); face-face where two faces face each other
within cos 0.996, edge-face where an edge lies in a face within sin 0.0888, each point with
its own depth and the face's normal as frame normal; with a margin, each geom inflated by
half of it. Measured (``tests/acceptance/collision_multiccd.txt``): exact (1e-6) in 1301 of
1408 states; the others within the convex tolerances, rounding ties (on symmetric faces, a
cylinder standing fully on a face, MuJoCo's greedy search keeps 4 of the 16 rim points by
rounding: ours are 4 other corners of the same clipped polygon), or states where our
search's path leaves MuJoCo's. A box corner (not an exact edge) or a tilted
cylinder lying on a cylinder's cap gives one contact, as on 4.0; a mesh's candidate faces
are its polygons at the supporting vertex.

Pair types without a collider make ``collision`` raise NotImplementedError when it is traced:
a model whose geoms could touch that way is not simulated silently without those contacts
(disable contacts, the pair, or multiccd to run it anyway).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.collision import (
    box,
    convex,
    cylinder,
    hfield,
    multiccd,
    nativeccd,
    plane_mesh,
    primitive,
)
from mjx_lite.collision.pairs import PairGroup, pair_groups
from mjx_lite.collision.types import EMPTY_DIST, Contact, make_frame
from mjx_lite.math import where
from mjx_lite.types import Data, DisableBit, EnableBit, GeomType, Model

_G = GeomType
# collider per (type1, type2), type1 <= type2
COLLIDERS = {
    (_G.PLANE, _G.SPHERE): primitive.plane_sphere,
    (_G.PLANE, _G.CAPSULE): primitive.plane_capsule,
    (_G.PLANE, _G.ELLIPSOID): primitive.plane_ellipsoid,
    (_G.PLANE, _G.CYLINDER): primitive.plane_cylinder,
    (_G.PLANE, _G.BOX): primitive.plane_box,
    (_G.SPHERE, _G.SPHERE): primitive.sphere_sphere,
    (_G.SPHERE, _G.CAPSULE): primitive.sphere_capsule,
    (_G.SPHERE, _G.ELLIPSOID): primitive.sphere_ellipsoid,
    (_G.SPHERE, _G.CYLINDER): primitive.sphere_cylinder,
    (_G.SPHERE, _G.BOX): primitive.sphere_box,
    (_G.CAPSULE, _G.CAPSULE): primitive.capsule_capsule,
    (_G.CAPSULE, _G.BOX): primitive.capsule_box,
    (_G.BOX, _G.BOX): box.box_box,
    (_G.PLANE, _G.MESH): plane_mesh.plane_mesh,
}
# pairs MuJoCo routes to its convex solver that always give one contact (a sphere or an
# ellipsoid is involved): GJK/EPA here
for _t in [(_G.SPHERE, _G.MESH), (_G.CAPSULE, _G.ELLIPSOID), (_G.ELLIPSOID, _G.ELLIPSOID),
           (_G.ELLIPSOID, _G.CYLINDER), (_G.ELLIPSOID, _G.BOX), (_G.ELLIPSOID, _G.MESH)]:
    COLLIDERS[_t] = convex.make_convex(*_t)
# the other convex-solver pairs give one contact only with multiccd disabled (mj_maxContact);
# with multiccd on they go to MULTI_CCD
SINGLE_CCD = {_t: convex.make_convex(*_t) for _t in [
    (_G.CAPSULE, _G.CYLINDER), (_G.CAPSULE, _G.MESH), (_G.CYLINDER, _G.CYLINDER),
    (_G.CYLINDER, _G.BOX), (_G.CYLINDER, _G.MESH), (_G.BOX, _G.MESH), (_G.MESH, _G.MESH)]}
# MuJoCo 4.0's multi-contact (multiccd on): box-mesh and mesh-mesh, and the pairs with a
# cylinder (caps as 16-gons) or a capsule (its generator) against a face
MULTI_CCD = {_t: multiccd.make_multiccd(*_t) for _t in [(_G.BOX, _G.MESH), (_G.MESH, _G.MESH)]}
MULTI_CCD.update({_t: cylinder.make_cylinder_multiccd(*_t) for _t in [
    (_G.CAPSULE, _G.CYLINDER), (_G.CAPSULE, _G.MESH), (_G.CYLINDER, _G.CYLINDER),
    (_G.CYLINDER, _G.BOX), (_G.CYLINDER, _G.MESH)]})
MINVAL = 1e-15


# geom types MuJoCo collides with a height field (mjc_ConvexHField)
HFIELD_PARTNERS = (_G.SPHERE, _G.CAPSULE, _G.ELLIPSOID, _G.CYLINDER, _G.BOX, _G.MESH)


def collider(m: Model, types, grp: PairGroup | None = None, single: bool = False):
    """The collider for a (type1, type2) key under the model's flags, or None. Height-field
    colliders depend on the group (their static prism window): ``grp`` builds the real one,
    without it a stand-in with one cell tells only that a collider exists. ``single``: the
    one-contact GJK/EPA collider even under multiccd (distance sensors: mj_geomDistance)."""
    types = tuple(int(t) for t in types)
    if types[0] == _G.HFIELD and types[1] in HFIELD_PARTNERS:
        if grp is None:
            return hfield.make_hfield(types[1], (1, 1), margined=True)
        return hfield.make_hfield(types[1], _hfield_window(m, grp), margined(m, grp))
    if types in COLLIDERS:
        return COLLIDERS[types]
    if single or m.opt.disableflags & DisableBit.MULTICCD:
        return SINGLE_CCD.get(types)
    return MULTI_CCD.get(types)


def _hfield_window(m: Model, grp: PairGroup) -> tuple[int, int]:
    """Static prism window of a height-field group: the largest over its pairs."""
    shapes = {(int(m.hfield_nrow[i]), int(m.hfield_ncol[i]))
              for i in np.asarray(m.geom_dataid)[grp.geom1]}
    if len(shapes) > 1:
        raise NotImplementedError("unsupported: height fields of different grid shapes "
                                  "colliding with the same geom type")
    nx = ny = 1
    for g1, g2 in zip(grp.geom1, grp.geom2):
        h = int(np.asarray(m.geom_dataid)[g1])
        # geom2's bound grown by the pair's margin (interop.geom_reach)
        reach = float(m.geom_reach[g2]) + float(m.geom_reach[g1])
        wx, wy = hfield.window_size(reach, m.hfield_cell[h], int(m.hfield_nrow[h]),
                                    int(m.hfield_ncol[h]))
        nx, ny = max(nx, wx), max(ny, wy)
    return nx, ny


def margined(m: Model, grp: PairGroup) -> bool:
    """Whether a pair of the group can have a margin (or gap): from the static
    ``geom_extra`` (the compile-time margins; one made positive later needs a new Model), or
    the option's override margin."""
    if m.opt.enableflags & EnableBit.OVERRIDE:
        return True
    extra = np.asarray(m.geom_extra)
    return bool(np.any(extra[grp.geom1] + extra[grp.geom2] > 0))


def _groups(m: Model) -> tuple[PairGroup, ...]:
    """The candidate pair groups that have a collider here."""
    return tuple(g for g in pair_groups(m) if collider(m, g.types) is not None)


def missing_colliders(m: Model) -> list[str]:
    """Geom-type pairs the model can collide that mjx_lite has no collider for."""
    if m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
        return []
    return ["-".join(_G(t).name.lower() for t in g.types) + f" ({len(g.geom1)} pairs)"
            for g in pair_groups(m) if collider(m, g.types) is None]


MAX_GEOM_PAIRS = "max_geom_pairs"  # the custom numeric MJX users know for the same cap
WARN_CONTACTFULL = 1  # mjtWarning (MuJoCo 4.0)


def max_geom_pairs(m: Model, types=None) -> int | None:
    """The model's cap on the candidate pairs of one geom-type group that go to its collider
    after culling, or None (every candidate, as MuJoCo): the custom numeric
    ``max_geom_pairs_<type1>_<type2>`` for that group (e.g. ``max_geom_pairs_cylinder_box``,
    types in MuJoCo's order), else ``max_geom_pairs`` for every group. Without ``types``:
    whether the model sets any cap."""
    names = next((v for k, v in m.names if k == "numeric"), ())
    numerics = dict(zip(names, m.numeric_data))
    keys = [k for k in numerics if k == MAX_GEOM_PAIRS or k.startswith(MAX_GEOM_PAIRS + "_")]
    if types is None:
        return min((int(numerics[k][0]) for k in keys), default=None)
    own = MAX_GEOM_PAIRS + "".join("_" + _G(int(t)).name.lower() for t in types)
    for key in (own, MAX_GEOM_PAIRS):
        if key in numerics:
            value = int(numerics[key][0])
            if value < 1:
                raise ValueError(f"custom numeric {key} must be at least 1, got {value}")
            return value
    return None


def pair_slots(m: Model, grp: PairGroup) -> int:
    """Static number of pairs of ``grp`` the collider runs on: all of them, or at most
    ``max_geom_pairs`` of those that pass the bounding-sphere test."""
    cap = max_geom_pairs(m, grp.types)
    return len(grp.geom1) if cap is None else min(cap, len(grp.geom1))


def contact_budget(m: Model) -> int:
    """Static number of contact slots: sum over groups of their pair slots times the most
    contacts one pair gives."""
    if m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
        return 0
    return int(sum(pair_slots(m, g) * collider(m, g.types, g).NCON for g in _groups(m)))


def _mesh_verts(m: Model, geoms: np.ndarray) -> jax.Array:
    """(n, nmax, 3) vertices of each geom's mesh, padded by repeating its first vertex (the
    support function is a max over vertices, so padding changes nothing)."""
    data = np.asarray(m.geom_dataid)[geoms]
    adr = np.asarray(m.mesh_vertadr)[data]
    num = np.asarray(m.mesh_vertnum)[data]
    k = np.arange(int(num.max()))
    idx = adr[:, None] + np.where(k[None] < num[:, None], k[None], 0)
    return jp.asarray(m.mesh_vert)[idx]


def _priority(m: Model, g1: np.ndarray, g2: np.ndarray):
    """(geom 1 wins, geom 2 wins) by geom_priority; neither where equal (then params mix)."""
    prio1 = np.asarray(m.geom_priority)[g1]
    prio2 = np.asarray(m.geom_priority)[g2]
    return prio1 > prio2, prio1 < prio2


def _condim(m: Model, grp: PairGroup) -> np.ndarray:
    """Static condim of each pair of a group (mj_contactParam; an explicit pair's own)."""
    g1, g2, ip = grp.geom1, grp.geom2, grp.ipair
    first, second = _priority(m, g1, g2)
    cd1 = np.asarray(m.geom_condim)[g1]
    cd2 = np.asarray(m.geom_condim)[g2]
    condim = np.where(first, cd1, np.where(second, cd2, np.maximum(cd1, cd2)))
    if not (ip >= 0).any():
        return condim
    return np.where(ip >= 0, np.asarray(m.pair_dim)[np.where(ip >= 0, ip, 0)], condim)


def slot_condims(m: Model) -> np.ndarray:
    """(contact_budget,) static bound on each contact slot's condim, in the slot layout: its
    pair's condim, or, in a group capped by ``max_geom_pairs`` (whose slots take the pairs
    chosen at run time), the group's largest."""
    if contact_budget(m) == 0:
        return np.zeros(0, int)
    out = []
    for grp in _groups(m):
        condim = _condim(m, grp)
        nkeep = pair_slots(m, grp)
        if nkeep < len(condim):
            condim = np.full(nkeep, condim.max())
        out.append(np.repeat(condim, collider(m, grp.types, grp).NCON))
    return np.concatenate(out)


def _mix(m: Model, g1: np.ndarray, g2: np.ndarray):
    """friction (5), solref, solimp of dynamic pairs (mj_contactParam)."""
    first, second = _priority(m, g1, g2)

    s1 = m.geom_solmix[g1]
    s2 = m.geom_solmix[g2]
    ok1, ok2 = s1 >= MINVAL, s2 >= MINVAL
    mix = where(ok1 & ok2, s1 / where(ok1 & ok2, s1 + s2, 1.0),
                   where(~ok1 & ~ok2, 0.5, where(~ok1, 0.0, 1.0)))
    # priority wins outright: mix 1 takes geom1's values, 0 geom2's
    mix = where(first, 1.0, where(second, 0.0, mix))[:, None]
    ref1, ref2 = m.geom_solref[g1], m.geom_solref[g2]
    standard = (ref1[:, :1] > 0) & (ref2[:, :1] > 0)
    mixed = mix * ref1 + (1 - mix) * ref2
    solref = where(standard | first[:, None] | second[:, None], mixed,
                      jp.minimum(ref1, ref2))
    solimp = mix * m.geom_solimp[g1] + (1 - mix) * m.geom_solimp[g2]
    f1, f2 = m.geom_friction[g1], m.geom_friction[g2]
    fri = where(first[:, None], f1, where(second[:, None], f2, jp.maximum(f1, f2)))
    friction = fri[:, jp.array([0, 0, 1, 2, 2])]
    return friction, solref, solimp


def _params(m: Model, grp: PairGroup):
    """Per-pair margin, gap, condim, friction, solref, solreffriction, solimp."""
    g1, g2, ip = grp.geom1, grp.geom2, grp.ipair
    explicit = ip >= 0
    ipc = np.where(explicit, ip, 0)
    condim = _condim(m, grp)
    friction, solref, solimp = _mix(m, g1, g2)
    margin = m.geom_margin[g1] + m.geom_margin[g2]
    gap = m.geom_gap[g1] + m.geom_gap[g2]
    solreffriction = jp.zeros_like(solref)
    if explicit.any():
        e = jp.asarray(explicit)
        e1 = e[:, None]
        friction = where(e1, m.pair_friction[ipc], friction)
        solref = where(e1, m.pair_solref[ipc], solref)
        solimp = where(e1, m.pair_solimp[ipc], solimp)
        solreffriction = where(e1, m.pair_solreffriction[ipc], solreffriction)
        margin = where(e, m.pair_margin[ipc], margin)
        gap = where(e, m.pair_gap[ipc], gap)
    if m.opt.enableflags & EnableBit.OVERRIDE:
        margin = jp.full_like(margin, m.opt.o_margin)
        solref = jp.broadcast_to(m.opt.o_solref, solref.shape)
        solreffriction = jp.broadcast_to(m.opt.o_solref, solref.shape)
        solimp = jp.broadcast_to(m.opt.o_solimp, solimp.shape)
        friction = jp.broadcast_to(m.opt.o_friction, friction.shape)
    # mj_assignFriction keeps every coefficient at least mjMINMU
    friction = jp.maximum(friction, 1e-5)
    return margin, gap, condim, friction, solref, solreffriction, solimp


def _sphere_cull(m: Model, d: Data, g1, g2, bound_margin):
    """mj_filterSphere: (near, gap) where near is True where the bounding spheres (or sphere
    and plane) may touch and gap is the distance between them (-inf for unbounded geoms)."""
    rb1, rb2 = m.geom_rbound[g1], m.geom_rbound[g2]
    p1, p2 = math.take(d.geom_xpos, g1), math.take(d.geom_xpos, g2)
    dif = p2 - p1
    far = jp.sum(dif * dif, -1) > (rb1 + rb2 + bound_margin) ** 2
    plane1 = np.asarray(m.geom_type)[g1] == _G.PLANE
    # a plane's bound is 0: test the other geom's sphere against the plane's half-space
    pdist = jp.sum(dif * math.take(d.geom_xmat, g1)[:, :, 2], -1)
    far_plane = pdist > bound_margin + rb2
    near = ~where(plane1, far_plane & (rb2 > 0), far & (rb1 > 0) & (rb2 > 0))
    bounded = where(plane1, rb2 > 0, (rb1 > 0) & (rb2 > 0))
    gap = where(plane1, pdist - rb2, math.safe_norm(dif, axis=-1) - rb1 - rb2)
    return near, where(bounded, gap, -jp.inf)


def group_contacts(m: Model, d: Data, grp: PairGroup, poses=None):
    """One type group's contacts: (fields of its ``npair * NCON`` slots before masking, the
    frame as its normal and proposed tangent; whether its ``max_geom_pairs`` cap dropped a
    passing pair). ``poses``: its pairs' (xpos 1, xmat 1, xpos 2, xmat 2), when gathered
    already (``collision`` gathers every group's at once)."""
    fn = collider(m, grp.types, grp)
    overflow = jp.zeros((), bool)
    g1, g2 = grp.geom1, grp.geom2
    margin, gap, condim, friction, solref, solreffriction, solimp = _params(m, grp)
    near, sphere_gap = _sphere_cull(m, d, g1, g2, margin + gap)
    # static gathers (math.take): a jnp index's transpose is a scatter-add, an XLA kernel
    # each (gymnasium humanoid's 5 groups: 18 a reverse pass, with their adds)
    pose = lambda x, g: math.take(jp.asarray(x), g)  # noqa: E731
    if poses is None:
        poses = pose(d.geom_xpos, g1), pose(d.geom_xmat, g1), pose(d.geom_xpos, g2), \
            pose(d.geom_xmat, g2)
    args = [poses[0], poses[1], pose(m.geom_size, g1),
            poses[2], poses[3], pose(m.geom_size, g2), margin + gap]
    mesh = getattr(fn, "MESH", None)
    ccd = getattr(fn, "CCD", None)
    if mesh is not None:
        dataid = np.asarray(m.geom_dataid)
        # a side whose pairs all have one mesh passes it once, shared by every pair
        # (convex.lanes_vmap), not gathered per pair
        side = [g[:1] if ccd is not None and len(g) > 1 and len(np.unique(dataid[g])) == 1
                else g for g in (g1, g2)]
        verts = [_mesh_verts(m, g).astype(d.geom_xpos.dtype) if mesh[k] else None
                 for k, g in enumerate(side)]
        args += verts
        if getattr(fn, "POLY", False):
            args += [None if v is None else tuple(jp.asarray(t) for t in multiccd.mesh_tables(
                m, dataid[g], v.shape[1])) for v, g in zip(verts, side)]
    if getattr(fn, "HFIELD", False):
        hid = np.asarray(m.geom_dataid)[g1]
        nrow, ncol = int(m.hfield_nrow[hid[0]]), int(m.hfield_ncol[hid[0]])
        adr = np.asarray(m.hfield_adr)[hid]
        grid = adr[:, None] + np.arange(nrow * ncol)[None]
        args += [jp.asarray(m.hfield_data)[grid].reshape(-1, nrow, ncol),
                 m.hfield_size[hid].astype(d.geom_xpos.dtype)]
    nkeep = pair_slots(m, grp)
    if nkeep < len(g1):
        # the passing pairs whose bounding spheres are closest (as MJX's top-k), so
        # far-apart pairs cost nothing; beyond the cap they are dropped and counted as
        # MuJoCo counts a full contact buffer
        keep = jp.argsort(where(near, sphere_gap, jp.inf), stable=True)[:nkeep]
        overflow = jp.sum(near) > nkeep
        take = lambda x, keep=keep: None if x is None else jp.asarray(x)[keep]  # noqa: E731
        npair = len(g1)
        args = [jax.tree.map(lambda x: x if convex.is_shared(x, npair) else take(x), a)
                for a in args]
        near, margin, condim, friction, solref, solreffriction, solimp, g1, g2 = (
            take(x) for x in (near, margin, condim, friction, solref, solreffriction,
                              solimp, g1, g2))
    if ccd is not None:
        # GJK/EPA group-wide, searching only the pairs that pass the culling test
        verts = args[7:9] if len(args) > 7 else (None, None)
        geoms = (*args[:3], verts[0], *args[3:6], verts[1])
        sd = convex.signed_distances(*ccd, geoms, near)
        extra = {}
        if ccd in nativeccd.PAIRS + nativeccd.POLY_PAIRS:
            sd, gen = nativeccd.refine(*ccd, geoms, args[6], sd, near, margined(m, grp))
            if getattr(fn, "GEN", False):
                extra["gen"] = gen
        rule, rows = (lambda sd, a, extra: fn.AFTER(*sd, *a, **extra)), (sd, args, extra)
    else:
        rule, rows = (lambda a: fn(*a)), (args,)
    out = convex.map_rules(rule, near, rows, ccd is not None or grp.types == (_G.BOX, _G.BOX))
    dist, pos, normal, tangent, valid = out
    valid = valid & near[:, None]
    n = fn.NCON
    rep = lambda x, n=n: jp.repeat(jp.asarray(x), n, axis=0)  # noqa: E731
    return dict(
        dist=dist.reshape(-1), pos=pos.reshape(-1, 3),
        normal=normal.reshape(-1, 3), tangent=tangent.reshape(-1, 3),
        includemargin=rep(margin), friction=rep(friction), solref=rep(solref),
        solreffriction=rep(solreffriction), solimp=rep(solimp),
        dim=rep(condim.astype(np.int32)), geom1=rep(g1), geom2=rep(g2),
        valid=valid.reshape(-1)), overflow


def collision(m: Model, d: Data) -> Data:
    """Finds contacts between geoms (mj_collision) into ``d.contact`` and ``d.ncon``."""
    missing = missing_colliders(m)
    if missing:
        raise NotImplementedError(
            "unsupported: mjx_lite has no collider yet for " + ", ".join(missing) +
            "; disable contacts (opt.disableflags |= DisableBit.CONTACT) or exclude the pairs")
    nslot = contact_budget(m)
    if nslot == 0:
        return d.replace(contact=Contact.zeros(0, d.qpos.dtype),
                         ncon=jp.zeros((), dtype=jp.int32))
    parts, overflow = [], jp.zeros((), bool)
    groups = _groups(m)
    # every group's poses in one gather per field: its transpose is one gather and sum, where
    # a gather per group and side transposed into 4 per group and the adds between them
    sides = np.concatenate([g for grp in groups for g in (grp.geom1, grp.geom2)])
    xpos, xmat = math.take(d.geom_xpos, sides), math.take(d.geom_xmat, sides)
    start = 0
    for grp in groups:
        n = len(grp.geom1)
        cut = [slice(start + k * n, start + (k + 1) * n) for k in range(2)]
        start += 2 * n
        poses = xpos[cut[0]], xmat[cut[0]], xpos[cut[1]], xmat[cut[1]]
        part, dropped = group_contacts(m, d, grp, poses)
        parts.append(part)
        overflow = overflow | dropped
    cat = {k: jp.concatenate([p[k] for p in parts]) for k in parts[0]}
    # one frame completion for every group: per group, it was ~10 small kernels each in the
    # forward pass and ~23 in its transpose (gymnasium humanoid's 5 groups)
    cat["frame"] = make_frame(cat.pop("normal"), cat.pop("tangent"))
    v = cat["valid"]
    v1 = v[:, None]
    geom1 = where(v, cat["geom1"], -1).astype(jp.int32)
    geom2 = where(v, cat["geom2"], -1).astype(jp.int32)
    dist = where(v, cat["dist"], EMPTY_DIST)
    includemargin = where(v, cat["includemargin"], 0.0)
    contact = Contact(
        dist=dist,
        pos=where(v1, cat["pos"], 0.0),
        frame=where(v[:, None, None], cat["frame"], jp.eye(3, dtype=dist.dtype)),
        includemargin=includemargin,
        friction=where(v1, cat["friction"], 0.0),
        solref=where(v1, cat["solref"], 0.0),
        solreffriction=where(v1, cat["solreffriction"], 0.0),
        solimp=where(v1, cat["solimp"], 0.0),
        mu=jp.zeros_like(dist),
        dim=where(v, cat["dim"], 0).astype(jp.int32),
        geom1=geom1, geom2=geom2, geom=jp.stack([geom1, geom2], -1),
        exclude=(v & (dist >= includemargin)).astype(jp.int32),
        efc_address=jp.full(dist.shape, -1, dtype=jp.int32),
        valid=v,
    )
    ncon = jp.sum(v).astype(jp.int32)
    # every pair that reaches its collider owns MuJoCo's per-pair maximum of slots
    # (mj_maxContact), so only the max_geom_pairs cap can drop contacts
    warning_count = d.warning_count.at[WARN_CONTACTFULL].add(overflow.astype(jp.int32))
    return d.replace(contact=contact, ncon=ncon, warning_count=warning_count)


def contacts_to_numpy(d: Data) -> dict[str, np.ndarray]:
    """The valid contacts of ``d`` as numpy arrays in MuJoCo's field names (frame flat 9)."""
    v = np.asarray(d.contact.valid)
    out = {}
    for name in d.contact.fields():
        if name == "valid":
            continue
        a = np.asarray(getattr(d.contact, name))[v]
        out[name] = a.reshape(len(a), 9) if name == "frame" else a
    return out

"""Height fields as unions of triangular prisms (Computation chapter, "Collision detection").

Each grid cell (r, c) is split into two triangles, (c, r+1) (c, r) (c+1, r+1) and (c, r)
(c+1, r+1) (c+1, r); a triangle extruded down to the base ``-size[3]`` is a convex prism, and
the general convex solver (``convex``: GJK/EPA) runs against every prism under the other
geom's bounding box, one contact per penetrating prism, in MuJoCo's visiting order (rows,
then columns, then the two triangles), at most ``mjMAXCONPAIR`` = 50.

Box and mesh partners at zero margin are "discrete" shapes for MuJoCo 4.0, whose EPA then
stops at the first repeated partner vertex: those prisms take ``hfield_ccd``, the port of
that query (unconverged faces, as MuJoCo reports them). Ellipsoid and cylinder partners at
zero margin take the same port with MuJoCo's smooth-shape rules (GJK and EPA stopped at
ccd_tolerance, so the contact is the face EPA stands on then, up to ~1e-3 off in normal from
the converged one), and so do a sphere whose centre and a capsule whose segment meets the
prism.

With a margin (measured against 4.0), a box, mesh, ellipsoid or cylinder partner that
touches or penetrates a prism takes the port with the smooth-shape rules on both shapes
grown by half the margin (dist = margin - depth); one apart by more than ccd_tolerance gets
its GJK distance: the port's distance query on the bare shapes (``hfield_ccd.distance_search``,
cut off at the margin; for an ellipsoid or cylinder GJK stopped at ccd_tolerance, whose
normal is up to ~1e-4 off the converged one; for a box or mesh discrete, whose witness
points, not a converged pair, give the contact's position where a box or mesh face lies
parallel to a prism face: with the converged query, 56 box contacts of the margin table
were on the same plane but beyond 1e-4 in pos). A sphere or capsule takes the grown
smooth query where its core meets the bare prism and elsewhere MuJoCo's GJK distance query
on its core (centre point, segment: discrete shapes for 4.0's GJK) minus the radius, at any
margin: its witness points, not a converged pair, where a capsule lies parallel to a prism
face (the nearest pair is not unique there).
The margin is traced, so every query the partner can need runs, each on the prisms it
serves, and the margin selects; a group whose compile-time margins (and gaps) are all zero is
built with the zero-margin queries alone (``make_hfield(margined=False)``).

Static shapes: the window of cells is ``nwin_x`` by ``nwin_y`` cells, fixed per pair group
from the other geom's ``rbound`` (plus margin) and the grid spacing, computed in numpy when
the collider is built; its corner follows the geom (traced) and cells outside the geom's
box or the grid are masked. All prisms of the window run in one vmap.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import convex, hfield_ccd
from mjx_lite.math import where
from mjx_lite.types import GeomType

MAXCONPAIR = 50
_G = GeomType


def window_size(rbound: float, cell, nrow: int, ncol: int) -> tuple[int, int]:
    """Cells (along x, along y) a geom of bounding radius ``rbound`` can cover on a grid of
    spacing ``cell`` (dx, dy): its box spans at most 2 rbound, plus a spare cell each way."""
    dx, dy = float(cell[0]), float(cell[1])
    nx = int(np.ceil(2.0 * rbound / dx)) + 2
    ny = int(np.ceil(2.0 * rbound / dy)) + 2
    return min(nx, ncol - 1), min(ny, nrow - 1)


def _aabb(type2, size2, verts2, mat):
    """Geom2's box in the height field frame, relative to its center: (lo (3,), hi (3,))."""
    e = jp.eye(3, dtype=mat.dtype)

    def sup(d):
        return mat @ convex.local_support(type2, size2, verts2, mat.T @ d)

    r = convex.core_radius(type2, size2)
    hi = jp.stack([sup(e[k])[k] for k in range(3)]) + r
    lo = jp.stack([sup(-e[k])[k] for k in range(3)]) - r
    return lo, hi


# capacities of the discrete EPA (hfield_ccd): a box has 8 vertex ids, so at most 7
# expansions from the 4 or 5 starting vertices; a mesh's EPA runs at most KMAX expansions
# (faces: 146 seen, 256 kept)
DISCRETE_CAPS = {_G.BOX: (14, 80), _G.MESH: (hfield_ccd.KMAX + 5, 256)}


def _segment_meets_prism(pv, a, b):
    """Whether the segment a-b (a point when a == b) meets the prism pv (6, 3): bottom
    triangle, then top one. Cyrus-Beck: the segment's parameter interval inside each of the
    five face planes, intersected."""
    top = pv[3:]
    t0, t1 = jp.zeros((), a.dtype), jp.ones((), a.dtype)
    ccw = jp.sign(jp.cross(top[1, :2] - top[0, :2], top[2, :2] - top[0, :2]))
    up = jp.cross(top[1] - top[0], top[2] - top[0]) * ccw
    faces = [(up, top[0]), (jp.array([0.0, 0.0, -1.0], a.dtype), pv[0])]
    for i in range(3):
        e = top[(i + 1) % 3] - top[i]
        faces.append((jp.stack([e[1], -e[0], 0.0 * e[0]]) * ccw, top[i]))
    for n, v in faces:
        fa, fb = jp.dot(n, a - v), jp.dot(n, b - v)  # <= 0 inside
        den = fa - fb
        t = fa / where(den == 0, 1.0, den)
        enters = den > 0  # outside at a, inside later: the interval starts at t
        t0 = where(enters, jp.maximum(t0, t), t0)
        t1 = where(den < 0, jp.minimum(t1, t), t1)
        t1 = where((den == 0) & (fa > 0), -1.0, t1)  # parallel and outside
    return (t0 <= t1) & (ccw != 0)


def make_hfield(type2: int, nwin: tuple[int, int], margined: bool = True):
    """A collider for an hfield (geom1) and a convex geom of ``type2`` with a window of
    ``nwin`` cells: (pos1, mat1, size1, pos2, mat2, size2, margin, verts1, verts2, hdata,
    hsize) with ``hdata`` (nrow, ncol) elevations in [0, 1] and ``hsize`` (4,).
    ``margined=False`` (a group whose compile-time margins are all zero) builds only the
    zero-margin queries, whatever ``margin`` is passed.

    A box or mesh partner at zero margin (and gap) takes MuJoCo 4.0's discrete-shape query
    (``hfield_ccd``: EPA stopped at the first repeated partner vertex), an ellipsoid or
    cylinder (and a sphere or capsule whose core meets the prism) its smooth-shape query;
    with a margin, a partner touching or penetrating the prism (a sphere or capsule: whose
    core meets it) the smooth-shape query on both shapes grown by half the margin, the
    others their GJK distance (see the module docstring)."""
    nx, ny = nwin
    poly = type2 in DISCRETE_CAPS
    smooth = type2 in hfield_ccd.SMOOTH
    cored = type2 in (_G.SPHERE, _G.CAPSULE)
    ncell = nx * ny
    ncon = min(MAXCONPAIR, 2 * ncell)

    def collide(pos1, mat1, size1, pos2, mat2, size2, margin, verts1, verts2, hdata, hsize):
        del size1, verts1
        nrow, ncol = hdata.shape
        dt = pos2.dtype
        # geom2 in the height field frame
        p = mat1.T @ (pos2 - pos1)
        mat = mat1.T @ mat2
        lo, hi = _aabb(type2, size2, verts2, mat)
        # MuJoCo 4.0 visits the cells under the box grown by the margin (measured: a sphere
        # with margin takes the row whose prisms are within the margin of its box)
        lo, hi = lo + p - margin, hi + p + margin
        sx, sy = hsize[0], hsize[1]
        # divisors that are not constants: XLA would multiply by a rounded reciprocal
        dx = 2.0 * sx / (0.0 * sx + (ncol - 1))
        dy = 2.0 * sy / (0.0 * sy + (nrow - 1))
        cmin = jp.floor((lo[0] + sx) / (2 * sx) * (ncol - 1)).astype(jp.int32)
        cmax = jp.ceil((hi[0] + sx) / (2 * sx) * (ncol - 1)).astype(jp.int32)
        rmin = jp.floor((lo[1] + sy) / (2 * sy) * (nrow - 1)).astype(jp.int32)
        rmax = jp.ceil((hi[1] + sy) / (2 * sy) * (nrow - 1)).astype(jp.int32)
        cmin, cmax = jp.maximum(cmin, 0), jp.minimum(cmax, ncol - 1)
        rmin, rmax = jp.maximum(rmin, 0), jp.minimum(rmax, nrow - 1)
        # the window's first cell: inside the grid even where the geom is off it
        c0 = jp.clip(cmin, 0, ncol - 1 - nx)
        r0 = jp.clip(rmin, 0, nrow - 1 - ny)
        rr, cc = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
        r = r0 + jp.asarray(rr.reshape(-1))
        c = c0 + jp.asarray(cc.reshape(-1))
        live = (r >= rmin) & (r < rmax) & (c >= cmin) & (c < cmax)
        inside = ((hi[0] >= -sx) & (lo[0] <= sx) & (hi[1] >= -sy) & (lo[1] <= sy)
                  & (lo[2] <= hsize[2]) & (hi[2] >= -hsize[3]))
        live = live & inside

        def corner(ri, ci):
            z = hdata[ri, ci].astype(dt) * hsize[2]
            # the products rounded before the subtraction (no fused multiply-add), as
            # MuJoCo computes them: prism coordinates decide ties in the discrete query
            x, y = hfield_ccd.rounded((ci * dx, ri * dy))
            return jp.stack([x - sx, y - sy, z], -1)

        a, b = corner(r + 1, c), corner(r, c)
        e, f = corner(r + 1, c + 1), corner(r, c + 1)
        tri = jp.stack([jp.stack([a, b, e], 1), jp.stack([b, e, f], 1)], 1)  # (ncell, 2, 3, 3)
        tri = tri.reshape(2 * ncell, 3, 3)
        bottom = tri.at[:, :, 2].set(-hsize[3])
        prism = jp.concatenate([bottom, tri], 1)  # (2 ncell, 6, 3)
        live2 = jp.repeat(live, 2)
        # MuJoCo's prism height test: a prism whose top is below the geom is skipped
        high = jp.max(tri[:, :, 2], -1) >= lo[2]

        if poly:
            box = type2 == _G.BOX
            pts = (hfield_ccd.box_points(p, mat, size2) if box
                   else hfield_ccd.mesh_points(p, mat, verts2))
            partner = (pts, mat, None if box else verts2, box, p)
        elif smooth:
            partner = (jp.zeros((1, 3), dt), mat, None, False, p)
        needed = live2 & high
        # the distance query first, where its result is used or picks the query
        if cored:
            # MuJoCo 4.0 measured: a sphere (capsule) whose centre (segment) misses the bare
            # prism gets MuJoCo's GJK distance of that core minus the radius (below); one
            # whose core is inside, the smooth query on the whole geom (grown by
            # half the margin with the prism). Testing the core against the prism grown by
            # half the margin instead matched fewer (9 against 0 of 1612 contacts off)
            half = jp.zeros((), dt) if type2 == _G.SPHERE else size2[1]
            ends = (p - half * mat[:, 2], p + half * mat[:, 2])
            inside = jax.vmap(lambda pv: _segment_meets_prism(pv, *ends))(prism)
            known = inside
        else:  # a group built without margins: every prism takes the zero-margin query
            known = jp.broadcast_to((margin == 0) | (not margined), needed.shape)
        sg = jax.lax.stop_gradient

        def distance_query(shape, cutoff):
            """hfield_ccd's GJK distance query of ``shape`` on the prisms not ``known``
            (searched compacted, rebuilt on all): (dist, normal, pos, near)."""
            found = convex.compact_map(
                lambda skip, pv: hfield_ccd.distance_search(pv, *partner, cutoff,
                                                            smooth=shape),
                needed & ~known, (sg(prism),), hfield_ccd.distance_unsearched(needed.shape, dt),
                grouped=False)
            return jax.vmap(
                lambda pv, f: hfield_ccd.distance_rebuild(pv, *partner, f, smooth=shape))(
                    prism, found)

        if cored:
            # MuJoCo 4.0's mjc_ccd (read from libmujoco 4.0): a sphere or capsule takes its
            # core (mjc_pointSupport, mjc_lineSupport), discrete for its GJK, in the distance
            # mode cut off at margin + radius; inflate then moves the witness points out by
            # half the margin (prism) and half the margin plus the radius (core). Where the
            # segment is parallel to a prism face the nearest pair is not unique and the
            # contact is where GJK's final simplex weights put it (the converged distance:
            # 154 of 1352 capsule contacts on the same plane but beyond 1e-4 in pos)
            radius = size2[0]
            dist, normal, cpos, near = distance_query((hfield_ccd.CORE[type2], size2),
                                                      margin + radius)
            # a core within ccd_tolerance of the prism takes the smooth query (mjc_ccd's test).
            # The segment test above is this test's shortcut, not a second rule: a core that
            # meets the prism encloses the origin in GJK's simplex, whose distance is then 0,
            # so those prisms skip the query (the sweep's states: the same prisms either way)
            known = known | (near & (dist <= hfield_ccd.TOL))
            # midway between x1 + (margin / 2) n and x2 - (margin / 2 + radius) n
            cpos = cpos - (0.5 * radius) * normal
            dist = where(near, dist - radius, jp.inf)
        elif margined:
            # MuJoCo 4.0's GJK distance query on the bare shapes, cut off at the margin, not
            # the converged distance: an ellipsoid or cylinder stopped at ccd_tolerance
            # (normals up to ~1e-4 apart), a box or mesh discrete for its GJK, where inflate
            # moves both witness points by half the margin, so the contact is midway between
            # GJK's own witness points (where a box face lies parallel to a prism face the
            # nearest pair is not unique and the converged pair is another point of it)
            shape = (hfield_ccd.SMOOTH[type2], size2) if smooth else None
            dist, normal, cpos, near = distance_query(shape, margin)
            dist = where(near, dist, jp.inf)
        else:  # zero margin: every prism takes the query below
            dist, normal, cpos = (jp.full(needed.shape, jp.inf, dt),
                                  jp.zeros(needed.shape + (3,), dt),
                                  jp.zeros(needed.shape + (3,), dt))
        # MuJoCo 4.0 measured, with a margin: a partner apart from the prism by more than
        # ccd_tolerance gets its GJK distance (above); a touching or penetrating one, the
        # query on both shapes grown by half the margin with the smooth-shape stops (dist =
        # margin - depth). Spheres and capsules excepted (above).
        grown = needed & (margin > 0) & (dist <= hfield_ccd.TOL)

        def query(current, mask, caps, shape, qmargin):
            """``current`` (dist, normal, pos, hit) with hfield_ccd's query on the ``mask``ed
            prisms (searched compacted, rebuilt on all)."""
            # compacted per batch member: the prisms under a geom fill its chunks, where
            # gathering members together would run many narrow chunks (as a pile's box-box
            # rules did, 107 -> 236 ms)
            found = convex.compact_map(
                lambda skip, pv: hfield_ccd.prism_search(pv, *partner, *caps, smooth=shape,
                                                         margin=qmargin),
                mask, (sg(prism),),
                (jp.zeros(needed.shape, bool), *(jp.zeros(needed.shape + (3,), jp.int32)
                                                  for _ in range(2)),
                 jp.zeros(needed.shape + (3, 3), dt)),
                grouped=False)
            pdist, pnormal, ppos, phit = jax.vmap(
                lambda pv, f: hfield_ccd.prism_rebuild(pv, *partner, f, smooth=shape,
                                                       margin=qmargin))(prism, found)
            new = (pdist + margin, pnormal, ppos, phit)
            return tuple(where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)
                         for a, b in zip(new, current))

        contact = (dist, normal, cpos, dist <= margin)
        if poly:  # the discrete query at zero margin, the grown one with a margin
            contact = query(contact, needed & known, DISCRETE_CAPS[type2], None, None)
            if margined:
                contact = query(contact, grown, hfield_ccd.SMOOTH_CAPS, None, margin)
        elif smooth:
            contact = query(contact, needed & (known if cored else known | grown),
                            hfield_ccd.SMOOTH_CAPS, (hfield_ccd.SMOOTH[type2], size2),
                            margin if margined else None)
        dist, normal, cpos, hit = contact
        ok = live2 & high & hit
        # the first MAXCONPAIR contacts in visiting order
        rank = jp.cumsum(ok) - 1
        slot = where(ok & (rank < ncon), rank, ncon)
        order = jp.arange(2 * ncell, dtype=jp.int32)
        idx = jp.zeros(ncon, jp.int32).at[slot].set(order, mode="drop")
        valid = jp.zeros(ncon, bool).at[slot].set(True, mode="drop")
        out_dist = dist[idx]
        out_normal = normal[idx] @ mat1.T
        out_pos = cpos[idx] @ mat1.T + pos1
        return out_dist, out_pos, out_normal, jp.zeros_like(out_pos), valid

    collide.NCON = ncon
    collide.MESH = (False, type2 == _G.MESH)
    collide.HFIELD = True
    collide.__name__ = f"hfield_{_G(type2).name.lower()}"
    return collide

"""Ray casting against geoms (API reference, "Ray casting": ``mj_ray``).

``ray(m, d, pnt, vec)`` intersects the ray ``pnt + x vec, x >= 0`` with every visible geom
and returns the smallest ``x`` and its geom id, or ``(-1, -1)`` without a hit. ``x`` is in
units of ``|vec|`` (vec is not normalized), as in MuJoCo. One vmapped intersection runs per
geom type; meshes intersect their triangles (after a bounding-box test with ``geom_size``),
height fields their two triangles per grid cell, the base box and the four side walls.

Geoms are excluded as MuJoCo's ray_eliminate does: the body ``bodyexclude``, transparent
geoms (alpha 0 of the geom, or of its material), static geoms (welded to the world) unless
``flg_static``, and groups whose ``geomgroup`` entry is 0. The result is one ray; batch with
``jax.vmap`` over ``pnt`` / ``vec`` (depth images).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.math import where
from mjx_lite.types import Data, GeomType, Model

MINVAL = 1e-15  # mjMINVAL
NGROUP = 6  # mjNGROUP

__all__ = ["ray", "ray_geoms"]


# ------------------------------------------------------------------------------------------
# primitives (each on one geom; vmapped by the caller)


def _local(pos, mat, pnt, vec):
    """The ray in the geom frame."""
    return mat.T @ (pnt - pos), mat.T @ vec


def _nonzero(x):
    """x with exact zeros replaced by 1, for denominators of branches not taken."""
    return where(x == 0, 1.0, x)


def _quad(a, b, c):
    """Both roots (-1 when none) and the smallest non-negative one of a x^2 + 2 b x + c."""
    det = b * b - a * c
    ok = det >= MINVAL
    s = jp.sqrt(where(ok, det, 1.0))
    a_ = _nonzero(a)
    x0 = where(ok, (-b - s) / a_, -1.0)
    x1 = where(ok, (-b + s) / a_, -1.0)
    best = where(x0 >= 0, x0, where(x1 >= 0, x1, -1.0))
    return best, x0, x1


def _closer(x, sol, ok):
    """The running minimum x (-1: none) updated with candidate sol where ok."""
    take = ok & (sol >= 0) & ((x < 0) | (sol < x))
    return where(take, sol, x)


def _sphere_hit(pos, r2, pnt, vec):
    dif = pnt - pos
    return _quad(vec @ vec, vec @ dif, dif @ dif - r2)[0]


def ray_plane(pos, mat, size, pnt, vec):
    """Front face of a plane, inside its rendered rectangle where size > 0."""
    lp, lv = _local(pos, mat, pnt, vec)
    front = lv[2] <= -MINVAL
    x = -lp[2] / where(front, lv[2], -1.0)
    p0, p1 = lp[0] + x * lv[0], lp[1] + x * lv[1]
    inside = ((size[0] <= 0) | (jp.abs(p0) <= size[0])) & \
        ((size[1] <= 0) | (jp.abs(p1) <= size[1]))
    return where(front & (x >= 0) & inside, x, -1.0)


def ray_sphere(pos, mat, size, pnt, vec):
    del mat
    return _sphere_hit(pos, size[0] * size[0], pnt, vec)


def ray_capsule(pos, mat, size, pnt, vec):
    bound = _sphere_hit(pos, (size[0] + size[1]) ** 2, pnt, vec) >= 0
    lp, lv = _local(pos, mat, pnt, vec)
    r2 = size[0] * size[0]
    a = lv[0] * lv[0] + lv[1] * lv[1]
    sol = _quad(a, lv[0] * lp[0] + lv[1] * lp[1], lp[0] * lp[0] + lp[1] * lp[1] - r2)[0]
    x = _closer(-1.0, sol, jp.abs(lp[2] + sol * lv[2]) <= size[1])
    a3 = lv @ lv
    for sign in (1.0, -1.0):
        ld = lp.at[2].add(-sign * size[1])
        _, x0, x1 = _quad(a3, lv @ ld, ld @ ld - r2)
        for xi in (x0, x1):
            z = lp[2] + xi * lv[2]
            x = _closer(x, xi, z >= size[1] if sign > 0 else z <= -size[1])
    return where(bound, x, -1.0)


def ray_ellipsoid(pos, mat, size, pnt, vec):
    lp, lv = _local(pos, mat, pnt, vec)
    s = 1.0 / (size * size)
    return _quad(s @ (lv * lv), s @ (lv * lp), s @ (lp * lp) - 1.0)[0]


def ray_cylinder(pos, mat, size, pnt, vec):
    bound = _sphere_hit(pos, size[0] ** 2 + size[1] ** 2, pnt, vec) >= 0
    lp, lv = _local(pos, mat, pnt, vec)
    r2 = size[0] * size[0]
    x = -1.0
    axial = jp.abs(lv[2]) > MINVAL
    for side in (-1.0, 1.0):
        sol = (side * size[1] - lp[2]) / where(axial, lv[2], 1.0)
        p0, p1 = lp[0] + sol * lv[0], lp[1] + sol * lv[1]
        x = _closer(x, sol, axial & (p0 * p0 + p1 * p1 <= r2))
    a = lv[0] * lv[0] + lv[1] * lv[1]
    sol = _quad(a, lv[0] * lp[0] + lv[1] * lp[1], lp[0] * lp[0] + lp[1] * lp[1] - r2)[0]
    x = _closer(x, sol, jp.abs(lp[2] + sol * lv[2]) <= size[1])
    return where(bound, x, -1.0)


_FACE_AXES = ((1, 2), (0, 2), (0, 1))


def ray_box_all(pos, mat, size, pnt, vec):
    """Nearest hit and the hit of each face (-x, +x, -y, +y, -z, +z; -1 if missed)."""
    bound = _sphere_hit(pos, size @ size, pnt, vec) >= 0
    lp, lv = _local(pos, mat, pnt, vec)
    x = -1.0
    faces = []
    for i, (j, k) in enumerate(_FACE_AXES):
        nz = jp.abs(lv[i]) > MINVAL
        for side in (-1.0, 1.0):
            sol = (side * size[i] - lp[i]) / where(nz, lv[i], 1.0)
            p0, p1 = lp[j] + sol * lv[j], lp[k] + sol * lv[k]
            ok = nz & (sol >= 0) & (jp.abs(p0) <= size[j]) & (jp.abs(p1) <= size[k]) & bound
            x = _closer(x, sol, ok)
            faces.append(where(ok, sol, -1.0))
    return where(bound, x, -1.0), jp.stack(faces)


def ray_box(pos, mat, size, pnt, vec):
    return ray_box_all(pos, mat, size, pnt, vec)[0]


def _normal_basis(lv):
    """Two unit vectors spanning the plane normal to lv (MuJoCo's choice, so that the
    inside-triangle test classifies edge cases the same way)."""
    a = jp.abs(lv)
    kx = (a[0] >= a[1]) & (a[0] >= a[2])
    ky = ~kx & (a[1] >= a[2])
    b0 = jp.stack([where(kx, 0.0, 1.0), where(ky, 0.0, 1.0),
                   where(kx | ky, 1.0, 0.0)]).astype(lv.dtype)
    b1 = b0 - lv * (lv @ b0) / (lv @ lv)
    b1 = b1 / jp.linalg.norm(b1)
    b0 = jp.cross(b1, lv)
    return b0 / jp.linalg.norm(b0), b1


def ray_triangles(v, lp, lv, b0, b1):
    """Hit distance of the ray with each triangle v (t, 3, 3), -1 where missed."""
    dif = v - lp
    pl = jp.stack([dif @ b0, dif @ b1], axis=-1)  # (t, 3, 2)
    same = jp.any(jp.all(pl > 0, axis=1) | jp.all(pl < 0, axis=1), axis=-1)
    a00 = pl[:, 0, 0] - pl[:, 2, 0]
    a01 = pl[:, 1, 0] - pl[:, 2, 0]
    a10 = pl[:, 0, 1] - pl[:, 2, 1]
    a11 = pl[:, 1, 1] - pl[:, 2, 1]
    r0, r1 = -pl[:, 2, 0], -pl[:, 2, 1]
    det = a00 * a11 - a01 * a10
    okdet = jp.abs(det) >= MINVAL
    det_ = where(okdet, det, 1.0)
    t0 = (a11 * r0 - a01 * r1) / det_
    t1 = (-a10 * r0 + a00 * r1) / det_
    inside = (t0 >= 0) & (t1 >= 0) & (t0 + t1 <= 1)
    nrm = jp.cross(v[:, 0] - v[:, 2], v[:, 1] - v[:, 2])
    denom = nrm @ lv
    okden = jp.abs(denom) >= MINVAL
    x = -jp.sum((lp - v[:, 2]) * nrm, axis=-1) / where(okden, denom, 1.0)
    return where(~same & okdet & inside & okden, x, -1.0)


def _nearest(x):
    """Smallest non-negative entry of x, -1 if none."""
    return where(jp.any(x >= 0), jp.min(where(x >= 0, x, jp.inf)), -1.0)


def ray_mesh(pos, mat, size, tri, valid, pnt, vec):
    """Mesh: bounding box (geom_size about the geom frame), then every triangle."""
    box = ray_box(pos, mat, size, pnt, vec)
    lp, lv = _local(pos, mat, pnt, vec)
    b0, b1 = _normal_basis(lv)
    x = where(valid, ray_triangles(tri, lp, lv, b0, b1), -1.0)
    return where(box >= 0, _nearest(x), -1.0)


def ray_hfield(pos, mat, hsize, tri, edges, pnt, vec):
    """Height field: the base box, the surface triangles inside the top box, and the four
    side walls of the top box below the boundary profile (mj_rayHfield).

    ``edges`` holds the boundary heights (normalized): x walls (2, nrow) and y walls
    (2, ncol), padded to one length with a per-wall count.
    """
    zax = mat[:, 2]
    base = ray_box(pos - zax * hsize[3] * 0.5, mat,
                   jp.stack([hsize[0], hsize[1], hsize[3] * 0.5]), pnt, vec)
    top, walls = ray_box_all(pos + zax * hsize[2] * 0.5, mat,
                             jp.stack([hsize[0], hsize[1], hsize[2] * 0.5]), pnt, vec)
    lp, lv = _local(pos, mat, pnt, vec)
    b0, b1 = _normal_basis(lv)
    x = _closer(base, _nearest(ray_triangles(tri, lp, lv, b0, b1)), True)
    wall_z, nrow, ncol = edges
    dx = 2.0 * hsize[0] / (ncol - 1)
    dy = 2.0 * hsize[1] / (nrow - 1)
    for i in range(4):
        t = walls[i]
        z = (lp[2] + t * lv[2]) / hsize[2]
        if i < 2:
            y = (lp[1] + t * lv[1] + hsize[1]) / dy
            n = nrow
        else:
            y = (lp[0] + t * lv[0] + hsize[0]) / dx
            n = ncol
        y0 = jp.clip(jp.floor(y), 0, n - 2)
        k = y0.astype(np.int32)
        prof = wall_z[i]
        h = prof[k] * (y0 + 1 - y) + prof[k + 1] * (y - y0)
        take = (t >= 0) & ((t < x) | (x < 0)) & (z < h)
        x = where(take, t, x)
    return where(top >= 0, x, base)


# ------------------------------------------------------------------------------------------
# static per-model data


def _mesh_triangles(m: Model, ids: np.ndarray):
    """(k, F, 3, 3) triangle vertices of mesh geoms ``ids`` padded to the largest, mask."""
    dataid = np.asarray(m.geom_dataid)[ids]
    nface = np.asarray(m.mesh_facenum)[dataid]
    fmax = int(nface.max())
    idx = np.zeros((ids.size, fmax, 3), np.int64)
    valid = np.zeros((ids.size, fmax), bool)
    face = np.asarray(m.mesh_face)
    for r, mid in enumerate(dataid):
        adr, n = int(m.mesh_faceadr[mid]), int(m.mesh_facenum[mid])
        idx[r, :n] = face[adr:adr + n] + int(m.mesh_vertadr[mid])
        valid[r, :n] = True
    vert = jp.asarray(m.mesh_vert)
    return vert[idx], valid


def _hfield_data(m: Model, hid: int, dtype):
    """Triangles (2 per cell, MuJoCo's split) and wall profiles of height field hid."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    adr = int(m.hfield_adr[hid])
    data = jp.asarray(m.hfield_data)[adr:adr + nrow * ncol].astype(dtype).reshape(nrow, ncol)
    size = jp.asarray(m.hfield_size, dtype)[hid]
    gx = jp.arange(ncol, dtype=dtype) * (2.0 * size[0] / (ncol - 1)) - size[0]
    gy = jp.arange(nrow, dtype=dtype) * (2.0 * size[1] / (nrow - 1)) - size[1]
    X, Y = jp.meshgrid(gx, gy)  # (nrow, ncol)
    P = jp.stack([X, Y, data * size[2]], axis=-1)
    p00, p11 = P[:-1, :-1], P[1:, 1:]
    p01, p10 = P[:-1, 1:], P[1:, :-1]  # (r, c+1), (r+1, c)
    ta = jp.stack([p00, p11, p01], axis=-2).reshape(-1, 3, 3)
    tb = jp.stack([p00, p11, p10], axis=-2).reshape(-1, 3, 3)
    tri = jp.concatenate([ta, tb])
    walls = (data[:, 0], data[:, ncol - 1], data[0, :], data[nrow - 1, :])
    return tri, (walls, nrow, ncol)


def _eliminated(m: Model, geomgroup, flg_static: bool) -> np.ndarray:
    """Static exclusions of ray_eliminate (alpha 0, static geoms, geom groups)."""
    matid = np.asarray(m.geom_matid)
    alpha = np.asarray(m.geom_rgba)[:, 3].astype(np.float64)
    if m.nmat:
        alpha = np.where(matid >= 0, np.asarray(m.mat_rgba)[np.maximum(matid, 0), 3], alpha)
    out = alpha == 0
    if not flg_static:
        out |= np.asarray(m.body_weldid)[np.asarray(m.geom_bodyid)] == 0
    if geomgroup is not None:
        groups = np.asarray(geomgroup).reshape(-1)
        if groups.size != NGROUP:
            raise ValueError(f"geomgroup must have {NGROUP} entries, got {groups.size}")
        gid = np.clip(np.asarray(m.geom_group), 0, NGROUP - 1)
        out |= groups[gid] == 0
    return out


_PRIMITIVE = {
    GeomType.PLANE: ray_plane, GeomType.SPHERE: ray_sphere, GeomType.CAPSULE: ray_capsule,
    GeomType.ELLIPSOID: ray_ellipsoid, GeomType.CYLINDER: ray_cylinder, GeomType.BOX: ray_box,
}


def ray_geoms(m: Model, d: Data, pnt: jax.Array, vec: jax.Array, ids: np.ndarray) -> jax.Array:
    """Hit distance (-1: none) of the ray with each geom in the static ``ids`` (ngeom order
    of the result follows ``ids``), without any exclusion."""
    ids = np.asarray(ids, np.int64)
    dtype = d.geom_xpos.dtype
    pnt = jp.asarray(pnt, dtype)
    vec = jp.asarray(vec, dtype)
    out = jp.full(ids.size, -1.0, dtype)
    gtype = np.asarray(m.geom_type)[ids]
    size = jp.asarray(m.geom_size, dtype)
    for t in np.unique(gtype):
        rows = np.nonzero(gtype == t)[0]
        g = ids[rows]
        pos, mat = d.geom_xpos[g], d.geom_xmat[g]
        if t in _PRIMITIVE:
            f = _PRIMITIVE[GeomType(int(t))]
            x = jax.vmap(f, (0, 0, 0, None, None))(pos, mat, size[g], pnt, vec)
        elif t == GeomType.MESH:
            tri, valid = _mesh_triangles(m, g)
            x = jax.vmap(ray_mesh, (0, 0, 0, 0, 0, None, None))(
                pos, mat, size[g], tri.astype(dtype), valid, pnt, vec)
        elif t == GeomType.HFIELD:
            # height fields differ in grid size: one call per field
            hids = np.asarray(m.geom_dataid)[g]
            parts = []
            for hid in np.unique(hids):
                sel = np.nonzero(hids == hid)[0]
                tri, edges = _hfield_data(m, int(hid), dtype)
                hsize = jp.asarray(m.hfield_size, dtype)[hid]
                parts.append((sel, jax.vmap(
                    lambda p, r, tri=tri, edges=edges, hsize=hsize: ray_hfield(
                        p, r, hsize, tri, edges, pnt, vec))(pos[sel], mat[sel])))
            x = jp.zeros(g.size, dtype)
            for sel, val in parts:
                x = x.at[sel].set(val)
        else:
            raise NotImplementedError(
                f"ray casting against {GeomType(int(t)).name} geoms is not implemented")
        out = out.at[rows].set(x)
    return out


def ray(m: Model, d: Data, pnt: jax.Array, vec: jax.Array, geomgroup=None,
        flg_static: bool = True, bodyexclude=-1) -> tuple[jax.Array, jax.Array]:
    """Nearest intersection of the ray ``pnt + x vec, x >= 0`` with the visible geoms
    (mj_ray). Uses ``d.geom_xpos`` / ``d.geom_xmat`` (after kinematics).

    Args:
      pnt: (3,) ray origin. vec: (3,) direction, not normalized.
      geomgroup: None (all groups) or 6 static flags, 0 excluding that geom group.
      flg_static: include geoms of bodies welded to the world.
      bodyexclude: body id (may be traced) whose geoms are skipped; -1 for none.

    Returns:
      dist (scalar, -1 without a hit) and geomid (int32, -1 without a hit).
    """
    if not m.ngeom:
        dtype = d.geom_xpos.dtype
        return jp.asarray(-1.0, dtype), jp.asarray(-1, jp.int32)
    keep = np.nonzero(~_eliminated(m, geomgroup, flg_static))[0]
    dist = jp.full(m.ngeom, -1.0, d.geom_xpos.dtype)
    if keep.size:
        dist = dist.at[keep].set(ray_geoms(m, d, pnt, vec, keep))
    excluded = jp.asarray(np.asarray(m.geom_bodyid)) == bodyexclude
    hit = (dist >= 0) & ~excluded
    # the lowest geom id wins a tie, as MuJoCo's strict < over geoms in order
    best = jp.argmin(where(hit, dist, jp.inf))
    found = jp.any(hit)
    return (where(found, dist[best], -1.0),
            where(found, best, -1).astype(jp.int32))

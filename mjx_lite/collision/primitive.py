"""Analytic colliders for primitive pairs (Computation chapter, "Collision detection >
Checking"): plane with sphere, capsule, cylinder and box; sphere with sphere, capsule,
cylinder and box; capsule with capsule.

Each collider takes the two geoms' world pose and size and the detection distance
``margin`` (margin + gap), and returns a fixed number of candidate contacts, its static
``NCON``: ``dist (n,)``, ``pos (n, 3)``, ``normal (n, 3)`` pointing from geom1 to geom2,
``tangent (n, 3)`` (zeros where MuJoCo leaves the frame to mju_makeFrame) and ``valid (n,)``.
The candidates are MuJoCo's, in MuJoCo's order; where MuJoCo keeps the first k of more
candidates (plane-box, parallel capsules) ``first_k`` does the same selection without
branching. Inputs are one pair (vmap over pairs); every division and square root is guarded so
that gradients stay finite at touching, coincident and parallel configurations.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import math

MINVAL = math.MINVAL


def normalize_mj(v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """mju_normalize3: (v / |v|, |v|); a vector shorter than MINVAL becomes (1, 0, 0)."""
    n = math.safe_norm(v)
    small = n < MINVAL
    ex = jp.zeros_like(v).at[0].set(1.0)
    return jp.where(small, ex, v / jp.where(small, 1.0, n)), n


def safe_sqrt(x: jax.Array) -> jax.Array:
    pos = x > 0
    return jp.where(pos, jp.sqrt(jp.where(pos, x, 1.0)), 0.0)


def first_k(valid: jax.Array, k: int, *arrays: jax.Array):
    """Keeps the first ``k`` valid candidates in order, packed into ``k`` slots.

    Args:
      valid: (n,) bool candidate mask.
      arrays: (n, ...) candidate values, all finite.
    Returns:
      (valid (k,), *arrays (k, ...)).
    """
    rank = jp.cumsum(valid) - 1
    sel = valid[None, :] & (rank[None, :] == jp.arange(k)[:, None])
    out = [jp.einsum("kn,n...->k...", sel.astype(a.dtype), a) for a in arrays]
    return (jp.any(sel, axis=1), *out)


def _zeros3(x: jax.Array) -> jax.Array:
    return jp.zeros(x.shape[:-1] + (3,), dtype=x.dtype)


def _plane_point(normal, ppos, center, radius, margin):
    """One sphere against a plane: (dist, pos, valid)."""
    cdist = jp.dot(center - ppos, normal)
    dist = cdist - radius
    pos = center - normal * (0.5 * dist + radius)
    return dist, pos, cdist <= margin + radius


def plane_sphere(pos1, mat1, size1, pos2, mat2, size2, margin):
    normal = mat1[:, 2]
    dist, pos, valid = _plane_point(normal, pos1, pos2, size2[0], margin)
    return dist[None], pos[None], normal[None], _zeros3(normal)[None], valid[None]


plane_sphere.NCON = 1


def plane_capsule(pos1, mat1, size1, pos2, mat2, size2, margin):
    normal = mat1[:, 2]
    axis = mat2[:, 2]
    ends = jp.stack([pos2 + size2[1] * axis, pos2 - size2[1] * axis])
    dist, pos, valid = jax.vmap(_plane_point, (None, None, 0, None, None))(
        normal, pos1, ends, size2[0], margin)
    # MuJoCo aligns the first tangent with the capsule axis
    return dist, pos, jp.stack([normal] * 2), jp.stack([axis] * 2), valid


plane_capsule.NCON = 2


def plane_cylinder(pos1, mat1, size1, pos2, mat2, size2, margin):
    normal = mat1[:, 2]
    axis = mat2[:, 2]
    prjaxis = jp.dot(normal, axis)
    # make the axis point towards the plane
    axis = jp.where(prjaxis > 0, -axis, axis)
    prjaxis = -jp.abs(prjaxis)
    dist0 = jp.dot(pos2 - pos1, normal)
    # direction in the disk plane towards the plane: -normal without its axis component
    vec = axis * prjaxis - normal
    lensq = jp.dot(vec, vec)
    general = lensq >= MINVAL * MINVAL
    vec = jp.where(general, vec * size2[0] / safe_sqrt(jp.where(general, lensq, 1.0)),
                   mat2[:, 0] * size2[0])
    prjvec = jp.dot(vec, normal)
    axis = axis * size2[1]
    prjaxis = prjaxis * size2[1]

    d1 = dist0 + prjaxis + prjvec
    d2 = dist0 - prjaxis + prjvec
    d3 = dist0 + prjaxis - 0.5 * prjvec
    # the two extra points of the triangle inscribed in the near disk
    side, _ = normalize_mj(jp.cross(vec, axis))
    side = side * size2[0] * jp.sqrt(3.0) / 2
    base = pos2 + axis - 0.5 * vec
    cand = jp.stack([pos2 + vec + axis, pos2 + vec - axis, base + side, base - side])
    dist = jp.stack([d1, d2, d3, d3])
    pos = cand - normal[None] * (0.5 * dist[:, None])
    ok1 = d1 <= margin
    valid = jp.stack([ok1, ok1 & (d2 <= margin), ok1 & (d3 <= margin), ok1 & (d3 <= margin)])
    return dist, pos, jp.stack([normal] * 4), jp.zeros((4, 3), pos.dtype), valid


plane_cylinder.NCON = 4


def plane_box(pos1, mat1, size1, pos2, mat2, size2, margin):
    normal = mat1[:, 2]
    dist0 = jp.dot(pos2 - pos1, normal)
    signs = jp.array([[(i & 1) * 2 - 1, (i & 2) - 1, (i & 4) // 2 - 1] for i in range(8)],
                     dtype=pos2.dtype)
    corners = (signs * size2[None, :]) @ mat2.T  # (8, 3) relative to the box center
    ldist = corners @ normal
    dist = dist0 + ldist
    # a corner counts if within margin and on the plane's side of the box center
    cand_valid = (dist <= margin) & (ldist <= 0)
    pos = corners + pos2 - normal[None] * (0.5 * dist[:, None])
    valid, dist, pos = first_k(cand_valid, 4, dist, pos)
    return dist, pos, jp.stack([normal] * 4), jp.zeros((4, 3), pos.dtype), valid


plane_box.NCON = 4


def _sphere_sphere(pos1, mat1, r1, pos2, mat2, r2, margin):
    """Sphere-sphere core, reused with points on segments: (dist, pos, normal, valid)."""
    dif = pos2 - pos1
    sq = jp.dot(dif, dif)
    bound = margin + r1 + r2
    valid = sq <= bound * bound
    normal, length = normalize_mj(dif)
    # coincident centers: the normal is the cross product of the z axes (or x)
    alt, _ = normalize_mj(jp.cross(mat1[:, 2], mat2[:, 2]))
    normal = jp.where(length < MINVAL, alt, normal)
    dist = length - r1 - r2
    pos = pos1 + normal * (r1 + 0.5 * dist)
    return dist, pos, normal, valid


def _one(dist, pos, normal, valid):
    return dist[None], pos[None], normal[None], _zeros3(normal)[None], valid[None]


def sphere_sphere(pos1, mat1, size1, pos2, mat2, size2, margin):
    return _one(*_sphere_sphere(pos1, mat1, size1[0], pos2, mat2, size2[0], margin))


sphere_sphere.NCON = 1


def sphere_capsule(pos1, mat1, size1, pos2, mat2, size2, margin):
    axis = mat2[:, 2]
    x = jp.clip(jp.dot(axis, pos1 - pos2), -size2[1], size2[1])
    return _one(*_sphere_sphere(pos1, mat1, size1[0], pos2 + axis * x, mat2, size2[0], margin))


sphere_capsule.NCON = 1


def sphere_cylinder(pos1, mat1, size1, pos2, mat2, size2, margin):
    radius, height = size2[0], size2[1]
    axis = mat2[:, 2]
    vec = pos1 - pos2
    x = jp.dot(axis, vec)
    a_proj = axis * x
    p_proj = vec - a_proj
    p_sq = jp.dot(p_proj, p_proj)
    p_len = safe_sqrt(p_sq)
    side = jp.abs(x) < height
    cap = p_sq < radius * radius
    # sphere center inside: keep the shallower of side and cap
    cap_first = height - jp.abs(x) < radius - p_len
    side, cap = side & ~(side & cap & cap_first), cap & ~(side & cap & ~cap_first)

    # side: sphere against the axis point
    s = _sphere_sphere(pos1, mat1, size1[0], pos2 + a_proj, mat2, radius, margin)
    # cap: the cap plane against the sphere, normal flipped to point from sphere to cylinder
    cap_normal = jp.where(x > 0, axis, -axis)
    cap_pos = pos2 + cap_normal * height
    cd, cp, cv = _plane_point(cap_normal, cap_pos, pos1, size1[0], margin)
    c = (cd, cp, -cap_normal, cv)
    # rim: sphere against the nearest rim point
    rim = pos2 + p_proj * (radius / jp.where(p_len > 0, p_len, 1.0)) + axis * jp.where(
        x > 0, height, -height)
    r = _sphere_sphere(pos1, mat1, size1[0], rim, mat2, 0.0, margin)
    out = [jp.where(side, a, jp.where(cap, b, e)) for a, b, e in zip(s, c, r)]
    return _one(*out)


sphere_cylinder.NCON = 1


def capsule_capsule(pos1, mat1, size1, pos2, mat2, size2, margin):
    axis1 = mat1[:, 2] * size1[1]
    axis2 = mat2[:, 2] * size2[1]
    dif = pos1 - pos2
    ma = jp.dot(axis1, axis1)
    mb = -jp.dot(axis1, axis2)
    mc = jp.dot(axis2, axis2)
    u = -jp.dot(axis1, dif)
    v = jp.dot(axis2, dif)
    det = ma * mc - mb * mb
    general = jp.abs(det) >= MINVAL
    sdiv = math.safe_div

    # general configuration: nearest points of the two segments, clipped
    x1 = sdiv(mc * u - mb * v, jp.where(general, det, 1.0))
    x2 = sdiv(ma * v - mb * u, jp.where(general, det, 1.0))
    x2 = jp.where(x1 > 1, sdiv(v - mb, mc), jp.where(x1 < -1, sdiv(v + mb, mc), x2))
    x1 = jp.clip(x1, -1, 1)
    x1 = jp.where(x2 > 1, jp.clip(sdiv(u - mb, ma), -1, 1),
                  jp.where(x2 < -1, jp.clip(sdiv(u + mb, ma), -1, 1), x1))
    x2 = jp.clip(x2, -1, 1)
    g = _sphere_sphere(pos1 + axis1 * x1, mat1, size1[0], pos2 + axis2 * x2, mat2, size2[0],
                       margin)

    # parallel axes: each end of one against the other's segment; first two that touch
    e1 = jp.array([1.0, -1.0, 0.0, 0.0], dtype=pos1.dtype)
    e2 = jp.array([0.0, 0.0, 1.0, -1.0], dtype=pos1.dtype)
    px2 = jp.clip(sdiv(v - e1 * mb, mc), -1, 1)
    px1 = jp.clip(sdiv(u - e2 * mb, ma), -1, 1)
    px1 = jp.where(e1 != 0, e1, px1)
    px2 = jp.where(e2 != 0, e2, px2)
    p1 = pos1[None] + px1[:, None] * axis1[None]
    p2 = pos2[None] + px2[:, None] * axis2[None]
    pd, pp, pn, pv = jax.vmap(_sphere_sphere, (0, None, None, 0, None, None, None))(
        p1, mat1, size1[0], p2, mat2, size2[0], margin)
    pv, pd, pp, pn = first_k(pv, 2, pd, pp, pn)

    slot2 = jp.arange(2) == 0
    dist = jp.where(general, jp.where(slot2, g[0], 0.0), pd)
    pos = jp.where(general, jp.where(slot2[:, None], g[1][None], 0.0), pp)
    normal = jp.where(general, jp.where(slot2[:, None], g[2][None], 0.0), pn)
    valid = jp.where(general, slot2 & g[3], pv)
    return dist, pos, normal, jp.zeros((2, 3), pos.dtype), valid


capsule_capsule.NCON = 2


def sphere_box(pos1, mat1, size1, pos2, mat2, size2, margin):
    radius = size1[0]
    center = mat2.T @ (pos1 - pos2)  # sphere center in the box frame
    clamped = jp.clip(center, -size2, size2)
    tmp, dist = normalize_mj(clamped - center)
    valid = dist - radius <= margin

    # center inside the box: push out through the nearest face, depth = face distance + radius
    faces = jp.stack([-size2, size2], axis=-1).reshape(6) - jp.repeat(center, 2)
    k = jp.argmin(jp.abs(faces))
    closest = jp.abs(faces)[k]
    nearest = jp.zeros(3, pos1.dtype).at[k // 2].set(jp.where(k % 2 == 1, -1.0, 1.0))
    pos_in = center + nearest * (0.5 * (radius - closest))
    # outside: midway between the box surface point and the deepest sphere point
    pos_out = 0.5 * clamped + 0.5 * (center + tmp * radius)
    inside = dist <= MINVAL
    pos = mat2 @ jp.where(inside, pos_in, pos_out) + pos2
    normal = mat2 @ jp.where(inside, nearest, tmp)
    dist = jp.where(inside, -closest - radius, dist - radius)
    return _one(dist, pos, normal, valid)


sphere_box.NCON = 1

"""Analytic colliders for primitive pairs (Computation chapter, "Collision detection >
Checking"): plane with sphere, capsule, ellipsoid, cylinder and box; sphere with sphere,
capsule, cylinder and box; capsule with capsule and box.

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
import numpy as np

from mjx_lite import math
from mjx_lite.math import where

MINVAL = math.MINVAL


def normalize_mj(v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """mju_normalize3: (v / |v|, |v|); a vector shorter than MINVAL becomes (1, 0, 0)."""
    n = math.safe_norm(v)
    small = n < MINVAL
    ex = jp.zeros_like(v).at[0].set(1.0)
    return where(small, ex, v / where(small, 1.0, n)), n


def safe_sqrt(x: jax.Array) -> jax.Array:
    pos = x > 0
    return where(pos, jp.sqrt(where(pos, x, 1.0)), 0.0)


def first_k(valid: jax.Array, k: int, *arrays: jax.Array):
    """Keeps the first ``k`` valid candidates in order, packed into ``k`` slots.

    Args:
      valid: (n,) bool candidate mask.
      arrays: (n, ...) candidate values.
    Returns:
      (valid (k,), *arrays (k, ...)).
    """
    rank = jp.cumsum(valid) - 1
    sel = valid[None, :] & (rank[None, :] == jp.arange(k)[:, None])
    has = jp.any(sel, axis=1)
    # a gather, not a one-hot product: vmapped in float32 that is a YNNPACK call each
    idx = jp.sum(where(sel, jp.arange(valid.shape[0]), 0), axis=1)
    out = [where(has.reshape((k,) + (1,) * (a.ndim - 1)), a[idx], 0.0) for a in arrays]
    return (has, *out)


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
    axis = where(prjaxis > 0, -axis, axis)
    prjaxis = -jp.abs(prjaxis)
    dist0 = jp.dot(pos2 - pos1, normal)
    # direction in the disk plane towards the plane: -normal without its axis component
    vec = axis * prjaxis - normal
    if jp.dtype(vec.dtype) == jp.float64:
        lensq = jp.dot(vec, vec)
        general = lensq >= MINVAL * MINVAL
    else:
        # float32: on a (nearly) upright cylinder vec is rounding noise of the two unit
        # vectors, of any direction: one along the axis put the deepest point a radius off
        # (settled cylinders lost their contacts); keep its part in the disk plane
        vec = vec - jp.dot(vec, axis) * axis
        lensq = jp.dot(vec, vec)
        general = lensq >= 1e-12
    vec = where(general, vec * size2[0] / safe_sqrt(where(general, lensq, 1.0)),
                   mat2[:, 0] * size2[0])
    prjvec = jp.dot(vec, normal)
    axis = axis * size2[1]
    prjaxis = prjaxis * size2[1]

    d1 = dist0 + prjaxis + prjvec
    d2 = dist0 - prjaxis + prjvec
    d3 = dist0 + prjaxis - 0.5 * prjvec
    # the two extra points of the triangle inscribed in the near disk
    side, _ = normalize_mj(math.cross(vec, axis))
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
    # coincident centers: the normal is the cross product of the z axes (or x). A convention
    # at a discontinuity (any relative translation turns the normal to it), so it is not
    # differentiated: its derivative was a cross product and normalization transposed for
    # every pair and contact slot, and for sphere geoms the only path from their frames back
    # to the bodies' (gymnasium humanoid, implicit gradient: -2.8%)
    sg = jax.lax.stop_gradient
    alt, _ = normalize_mj(math.cross(sg(mat1[:, 2]), sg(mat2[:, 2])))
    normal = where(length < MINVAL, alt, normal)
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
    cap_normal = where(x > 0, axis, -axis)
    cap_pos = pos2 + cap_normal * height
    cd, cp, cv = _plane_point(cap_normal, cap_pos, pos1, size1[0], margin)
    c = (cd, cp, -cap_normal, cv)
    # rim: sphere against the nearest rim point
    rim = pos2 + p_proj * (radius / where(p_len > 0, p_len, 1.0)) + axis * where(
        x > 0, height, -height)
    r = _sphere_sphere(pos1, mat1, size1[0], rim, mat2, 0.0, margin)
    out = [where(side, a, where(cap, b, e)) for a, b, e in zip(s, c, r)]
    return _one(*out)


sphere_cylinder.NCON = 1


def _segment_terms(pos1, axis1, pos2, axis2):
    """(dif, ma, mb, mc, u, v) of two segments pos +- axis: their nearest points' parameters
    inside both segments solve ma x1 + mb x2 = u, mb x1 + mc x2 = v."""
    dif = pos1 - pos2
    return (dif, jp.dot(axis1, axis1), -jp.dot(axis1, axis2), jp.dot(axis2, axis2),
            -jp.dot(axis1, dif), jp.dot(axis2, dif))


@jax.custom_jvp
def _capsule_params(pos1, axis1, pos2, axis2, bound):
    """Segment parameters (x1 (2,), x2 (2,)) of the two point pairs capsule_capsule keeps, in
    [-1, 1] along axis1 and axis2 (half-length vectors), and which of them are kept (2,):
    the clipped nearest points (one pair), or for parallel axes each end of one segment
    against the other's, the first two whose points are within ``bound``."""
    _, ma, mb, mc, u, v = _segment_terms(pos1, axis1, pos2, axis2)
    det = ma * mc - mb * mb
    general = jp.abs(det) >= MINVAL
    sdiv = math.safe_div

    # general configuration: nearest points of the two segments, clipped
    x1 = sdiv(mc * u - mb * v, where(general, det, 1.0))
    x2 = sdiv(ma * v - mb * u, where(general, det, 1.0))
    x2 = where(x1 > 1, sdiv(v - mb, mc), where(x1 < -1, sdiv(v + mb, mc), x2))
    x1 = jp.clip(x1, -1, 1)
    x1 = where(x2 > 1, jp.clip(sdiv(u - mb, ma), -1, 1),
               where(x2 < -1, jp.clip(sdiv(u + mb, ma), -1, 1), x1))
    x2 = jp.clip(x2, -1, 1)

    # parallel axes: each end of one against the other's segment; first two that touch
    e1 = jp.array([1.0, -1.0, 0.0, 0.0], dtype=pos1.dtype)
    e2 = jp.array([0.0, 0.0, 1.0, -1.0], dtype=pos1.dtype)
    px2 = jp.clip(sdiv(v - e1 * mb, mc), -1, 1)
    px1 = jp.clip(sdiv(u - e2 * mb, ma), -1, 1)
    px1 = where(e1 != 0, e1, px1)
    px2 = where(e2 != 0, e2, px2)
    p1 = pos1[None] + px1[:, None] * axis1[None]
    p2 = pos2[None] + px2[:, None] * axis2[None]
    touch = jp.sum((p2 - p1) ** 2, -1) <= bound * bound
    has, px1, px2 = first_k(touch, 2, px1, px2)
    slot2 = jp.arange(2) == 0
    x1 = where(general, where(slot2, x1, 0.0), px1)
    x2 = where(general, where(slot2, x2, 0.0), px2)
    return x1, x2, where(general, slot2, has)


@_capsule_params.defjvp
def _capsule_params_jvp(primals, tangents):
    """The kept parameters move as their stationarity conditions say (the pair's choice
    fixed): an inner parameter keeps d/dx |p1 - p2|^2 = 0, i.e. ma x1 + mb x2 = u and
    mb x1 + mc x2 = v, a clipped one stays at its end. So the tangent is the 2x2 (both inner)
    or 1x1 solve of the differentiated conditions, instead of the derivative of every
    candidate and branch that chose them (the backward pass of gymnasium humanoid's 52
    capsule pairs: ~80 kernels a stage, both configurations' and four candidates'
    derivatives masked out but computed)."""
    pos1, axis1, pos2, axis2, bound = primals
    dpos1, daxis1, dpos2, daxis2, _ = tangents
    x1, x2, kept = _capsule_params(pos1, axis1, pos2, axis2, bound)
    dif, ma, mb, mc, _, _ = _segment_terms(pos1, axis1, pos2, axis2)
    ddif = dpos1 - dpos2
    dma = 2.0 * jp.dot(axis1, daxis1)
    dmb = -(jp.dot(daxis1, axis2) + jp.dot(axis1, daxis2))
    dmc = 2.0 * jp.dot(axis2, daxis2)
    du = -(jp.dot(daxis1, dif) + jp.dot(axis1, ddif))
    dv = jp.dot(daxis2, dif) + jp.dot(axis2, ddif)
    rhs1 = du - dma * x1 - dmb * x2
    rhs2 = dv - dmb * x1 - dmc * x2
    inner1, inner2 = jp.abs(x1) < 1, jp.abs(x2) < 1
    both = inner1 & inner2
    sdiv = math.safe_div
    det = ma * mc - mb * mb
    dx1 = where(both, sdiv(mc * rhs1 - mb * rhs2, det), where(inner1, sdiv(rhs1, ma), 0.0))
    dx2 = where(both, sdiv(ma * rhs2 - mb * rhs1, det), where(inner2, sdiv(rhs2, mc), 0.0))
    zero = np.zeros(kept.shape, jax.dtypes.float0)
    return (x1, x2, kept), (where(kept, dx1, 0.0), where(kept, dx2, 0.0), zero)


def capsule_capsule(pos1, mat1, size1, pos2, mat2, size2, margin):
    axis1 = mat1[:, 2] * size1[1]
    axis2 = mat2[:, 2] * size2[1]
    x1, x2, chosen = _capsule_params(pos1, axis1, pos2, axis2, margin + size1[0] + size2[0])
    # the sphere-sphere core on the two chosen point pairs
    q1 = pos1[None] + x1[:, None] * axis1[None]
    q2 = pos2[None] + x2[:, None] * axis2[None]
    dist, pos, normal, valid = jax.vmap(_sphere_sphere, (0, None, None, 0, None, None, None))(
        q1, mat1, size1[0], q2, mat2, size2[0], margin)
    dist = where(chosen, dist, 0.0)
    pos = where(chosen[:, None], pos, 0.0)
    normal = where(chosen[:, None], normal, 0.0)
    return dist, pos, normal, jp.zeros((2, 3), pos.dtype), chosen & valid


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
    nearest = jp.zeros(3, pos1.dtype).at[k // 2].set(where(k % 2 == 1, -1.0, 1.0))
    pos_in = center + nearest * (0.5 * (radius - closest))
    # outside: midway between the box surface point and the deepest sphere point
    pos_out = 0.5 * clamped + 0.5 * (center + tmp * radius)
    inside = dist <= MINVAL
    pos = mat2 @ where(inside, pos_in, pos_out) + pos2
    normal = mat2 @ where(inside, nearest, tmp)
    dist = where(inside, -closest - radius, dist - radius)
    return _one(dist, pos, normal, valid)


sphere_box.NCON = 1


def _capsule_box_feature(pos, halfaxis, hl, size, margin, radius):
    """Closest box feature to the capsule segment, in the box frame.

    Scans the two segment ends against the faces, then the 12 box edges (segment-segment),
    keeping the first strict minimum as MuJoCo's loop does. Returns (cltype, clface, clcorner,
    cledge, bestsegmentpos, bestboxpos): cltype -3/-1 for a face at segment end -1/+1,
    0..8 = 3*s1 + s2 for an edge (s: 0 lower end, 1 interior, 2 upper end), -4 for none.
    """
    dt = pos.dtype
    best = margin + 2 * (radius + hl + jp.sum(size))
    cltype = jp.array(-4)
    clface = jp.array(-1)
    clcorner = jp.array(0)
    cledge = jp.array(0)
    bsp = jp.zeros((), dt)
    bbp = jp.zeros((), dt)
    for i in (-1, 1):
        p = pos + i * halfaxis
        out = (p < -size) | (p > size)
        nclamp = jp.sum(out)
        last = jp.max(where(out, jp.arange(3), -1))
        d = jp.sum((jp.clip(p, -size, size) - p) ** 2)
        take = (nclamp <= 1) & (d < best)
        best = where(take, d, best)
        bsp = where(take, float(i), bsp)
        cltype = where(take, -2 + i, cltype)
        clface = where(take, last, clface)
    mc = hl * hl
    for j in range(3):
        for i in range(8):
            if i & (1 << j):
                continue
            corner = jp.array([(1 if i & 1 else -1), (1 if i & 2 else -1),
                               (1 if i & 4 else -1)], dt) * size
            corner = corner.at[j].set(0.0)
            dif = corner - pos
            ma = size[j] * size[j]
            mb = -size[j] * halfaxis[j]
            u = -size[j] * dif[j]
            v = jp.dot(halfaxis, dif)
            det = ma * mc - mb * mb
            ok = jp.abs(det) >= MINVAL
            idet = 1 / where(ok, det, 1.0)
            imc = 1 / where(mc > 0, mc, 1.0)
            ima = 1 / where(ma > 0, ma, 1.0)
            x1 = (mc * u - mb * v) * idet
            x2 = (ma * v - mb * u) * idet
            s1 = where(x1 > 1, 2, where(x1 < -1, 0, 1))
            x2 = where(x1 > 1, (v - mb) * imc, where(x1 < -1, (v + mb) * imc, x2))
            x1 = jp.clip(x1, -1, 1)
            s2 = where(x2 > 1, 2, where(x2 < -1, 0, 1))
            x1n = where(x2 > 1, (u - mb) * ima, (u + mb) * ima)
            s1n = where(x1n > 1, 2, where(x1n < -1, 0, s1))
            clipped2 = s2 != 1
            x1 = where(clipped2, jp.clip(x1n, -1, 1), x1)
            s1 = where(clipped2, s1n, s1)
            x2 = jp.clip(x2, -1, 1)
            dd = dif - halfaxis * x2
            dd = dd.at[j].add(size[j] * x1)
            d = jp.dot(dd, dd)
            c1 = s1 * 3 + s2
            take = ok & (d < best - MINVAL)
            best = where(take, d, best)
            bsp = where(take, x2, bsp)
            bbp = where(take, x1, bbp)
            clcorner = where(take, i + (1 << j) * (c1 // 6), clcorner)
            cledge = where(take, j, cledge)
            cltype = where(take, c1, cltype)
    return cltype, clface, clcorner, cledge, bsp, bbp


def _ratio(num, den):
    """num / |den| where den != 0, else +inf-like (never chosen by a min)."""
    ok = den != 0
    return where(ok, num / where(ok, jp.abs(den), 1.0), 1e30)


def capsule_box(pos1, mat1, size1, pos2, mat2, size2, margin):
    radius, hl = size1[0], size1[1]
    size = size2
    pos = mat2.T @ (pos1 - pos2)
    axis = mat2.T @ mat1[:, 2]
    halfaxis = axis * hl
    bit = lambda b: where(b, 1, 0)  # noqa: E731
    axisdir = bit(halfaxis[0] > 0) + 2 * bit(halfaxis[1] > 0) + 4 * bit(halfaxis[2] > 0)
    cltype, clface, clcorner, cledge, bsp, bbp = _capsule_box_feature(
        pos, halfaxis, hl, size, margin, radius)
    none = cltype == -4
    edge_mid = (cltype >= 0) & (cltype // 3 == 1)
    corner_case = (cltype >= 0) & ~edge_mid

    # a box corner is closest: slide along the box edge or face that the segment follows
    c = jp.bitwise_xor(axisdir, clcorner)
    flip = (c == 3) | (c == 5) | (c == 6)
    mul_a = where(flip, -1.0, 1.0)
    c_a = where(flip, 7 - c, c)
    de = where(flip, 1 + bsp, 1 - bsp)
    dp = where(flip, 1 - bsp, 1 + bsp)
    ax = where(c_a == 1, 0, where(c_a == 2, 1, 2))
    ax1, ax2 = (ax + 1) % 3, (ax + 2) % 3
    along = axis[ax] ** 2 > 0.5
    sp_edge = jp.minimum(de, _ratio(2 * size[ax], halfaxis[ax])) * mul_a
    sp_face = jp.minimum(jp.minimum(dp, _ratio(2 * size[ax1], halfaxis[ax1])),
                         _ratio(2 * size[ax2], halfaxis[ax2])) * -mul_a
    sp_a = where(along, sp_edge, sp_face)
    has_a = corner_case & (c != 0) & (c != 7)

    # the interior of a box edge is closest: second point where the segment leaves the box
    cb = jp.bitwise_and(c, 7 - jp.left_shift(1, cledge))
    has_b = edge_mid & ((cb == 1) | (cb == 2) | (cb == 4))
    bx = cledge
    b1, b2 = (bx + 1) % 3, (bx + 2) % 3
    b1 = where(jp.abs(axis[b1]) > jp.abs(axis[b2]), b2, b1)
    b2 = 3 - bx - b1
    up = jp.bitwise_and(cb, jp.left_shift(1, b2)) != 0
    mul_b = where(up, 1.0, -1.0)
    sp_b = where(up, 1 - bsp, 1 + bsp)
    sp_b = jp.minimum(sp_b, _ratio(2 * size[b2], halfaxis[b2]))
    same = (jp.bitwise_and(axisdir, jp.left_shift(1, bx)) != 0) == up
    e2 = where(same, 1 - bbp, 1 + bbp)
    sp_b = jp.minimum(sp_b, _ratio(size[bx] * e2, halfaxis[bx])) * mul_b

    # a segment end is closest to a face: second point where the segment leaves that face
    mul_c = where(cltype == -3, 1.0, -1.0)
    start = pos - halfaxis * mul_c
    sp_c = jp.asarray(2.0, pos.dtype)
    for i in range(3):
        okh = halfaxis[i] != 0
        hden = where(okh, halfaxis[i], 1.0)
        for bound in (size[i], -size[i]):
            e = (bound - start[i]) / hden * mul_c
            sp_c = where(okh & (i != clface) & (e > 0) & (e < sp_c), e, sp_c)
    sp_c = sp_c * mul_c
    has_c = (cltype < 0) & ~none & (clface != -1)

    second = where(has_a, sp_a, where(has_b, sp_b, sp_c))
    has_second = has_a | has_b | has_c
    pts = pos[None] + halfaxis[None] * jp.stack([bsp, bsp + where(has_second, second, 0.0)]
                                                )[:, None]
    centers = pts @ mat2.T + pos2[None]
    dist, cpos, normal, tangent, valid = jax.vmap(
        lambda p: sphere_box(p, mat1, size1, pos2, mat2, size2, margin))(centers)
    valid = valid[:, 0] & ~none & jp.array([True, False]) | (
        valid[:, 0] & ~none & has_second & jp.array([False, True]))
    return dist[:, 0], cpos[:, 0], normal[:, 0], tangent[:, 0], valid


capsule_box.NCON = 2


def plane_ellipsoid(pos1, mat1, size1, pos2, mat2, size2, margin):
    """Plane against the ellipsoid's support point along -normal (MuJoCo's plane-convex)."""
    normal = mat1[:, 2]
    local = size2 * (mat2.T @ -normal)
    # support of an axis-aligned ellipsoid: size * unit(size * dir)
    support = mat2 @ (size2 * local / jp.maximum(math.safe_norm(local), MINVAL)) + pos2
    dist = jp.dot(normal, support - pos1)
    return _one(dist, support - normal * (0.5 * dist), normal, dist <= margin)


plane_ellipsoid.NCON = 1


def _ellipsoid_closest(p, a, iters: int = 80):
    """Closest surface point of the ellipsoid with semi-axes ``a`` to local point ``p``.

    The point is a_i^2 p_i / (a_i^2 + t) with t the root of
    f(t) = sum (a_i p_i / (a_i^2 + t))^2 - 1, decreasing on t > -min a^2; t > 0 outside,
    t < 0 inside. Bisection on a bracket, a fixed number of halvings (no traced branch).
    """
    a2 = a * a
    inside = jp.sum((p / a) ** 2) < 1
    lo = where(inside, -jp.min(a2), 0.0)
    hi = where(inside, 0.0, jp.max(a) * math.safe_norm(p) + jp.max(a2))

    def f(t):
        den = a2 + t
        den = where(jp.abs(den) > MINVAL, den, MINVAL)  # p = 0 makes the pole 0 / 0
        return jp.sum((a * p / den) ** 2) - 1

    def body(_, bracket):
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        pos = f(mid) > 0
        return where(pos, mid, lo), where(pos, hi, mid)

    lo, hi = jax.lax.fori_loop(0, iters, body, (lo, hi))
    # one Newton step from the (constant) bisection root gives t its implicit-function gradient
    t0 = jax.lax.stop_gradient(0.5 * (lo + hi))
    den0 = a2 + t0
    den0 = where(jp.abs(den0) > MINVAL, den0, MINVAL)
    df = -2 * jp.sum((a * p) ** 2 / den0**3)
    t = t0 - math.safe_div(f(t0), df)
    den = a2 + t
    ok = jp.abs(den) > 1e-12
    x = where(ok, a2 * p / where(ok, den, 1.0), 0.0)
    # p on the smallest axis's plane inside the evolute: the root sits at t = -min a^2 and the
    # nearest point leaves that plane (Eberly's degenerate case)
    k = jp.argmin(a)
    rest = jp.arange(3) != k
    amin2 = a2[k]
    dk = a2 - amin2
    xd = where(rest & (jp.abs(dk) > MINVAL), a2 * p / where(jp.abs(dk) > MINVAL, dk, 1.0),
                  0.0)
    zk = a[k] * safe_sqrt(1 - jp.sum(where(rest, (xd / a) ** 2, 0.0)))
    xd = where(rest, xd, where(p[k] < 0, -zk, zk))
    on_surface = jp.abs(jp.sum((x / a) ** 2) - 1) < 1e-6
    return where(on_surface, x, xd)


def sphere_ellipsoid(pos1, mat1, size1, pos2, mat2, size2, margin):
    """Sphere against ellipsoid: the exact answer MuJoCo's convex solver approximates
    (distance from the sphere center to the ellipsoid surface, less the radius)."""
    radius = size1[0]
    p = mat2.T @ (pos1 - pos2)
    x = _ellipsoid_closest(p, size2)
    inside = jp.sum((p / size2) ** 2) < 1
    outward = mat2 @ normalize_mj(x / (size2 * size2))[0]
    normal = -outward
    gap = math.safe_norm(x - p)
    dist = where(inside, -gap, gap) - radius
    xw = mat2 @ x + pos2
    pos = 0.5 * (xw + pos1 + normal * radius)
    return _one(dist, pos, normal, dist <= margin)


sphere_ellipsoid.NCON = 1

"""Tendon lengths, moment arms and paths (Computation chapter, "Transmission" and
"Tendons"; XML reference, tendon/spatial): fixed tendons, spatial tendons through sites,
sphere and cylinder wrapping (with sidesites, inside wrapping) and pulleys.

A spatial tendon is a chain of site-site and site-geom-site segments; a pulley divides the
length and moment arms of every segment after it. The moment arm of a segment is the
difference of the endpoint Jacobians projected on the segment direction; the arc on a
wrapping geom adds length but no moment (its end points ride on the geom's body).

All segments of one kind are computed in one vectorized call; the path bookkeeping
(``wrap_obj``, ``wrap_xpos``, ``ten_wrapadr``, ``ten_wrapnum``) is compacted by a scatter
since whether a geom wraps depends on the configuration.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math, smooth
from mjx_lite.math import where
from mjx_lite.types import Data, Model, TrnType, WrapType

# wrap_inside's Newton solve. MuJoCo 4.0 iterates on the angle u = asin(z) from u = pi/2
# (where the derivative is a finite -2), at most 20 steps, stopping once |f| <= 1e-6: this
# reproduces its contact points to rounding (measured 6e-17), whereas 3.x's iteration on z
# from z = 1 - 1e-7 differs from 4.0 by up to 4e-8.
_INSIDE_MAXITER = 20
_INSIDE_UINIT = 0.5 * np.pi
_INSIDE_TOL = 1e-6


# ------------------------------------------------------------------------------------------
# static plan


def _plan(m: Model) -> dict:
    """Static segment lists of all tendons, from the wrap arrays (numpy, once per trace)."""
    wtype = np.asarray(m.wrap_type)
    wobj = np.asarray(m.wrap_objid)
    adr, num = np.asarray(m.tendon_adr), np.asarray(m.tendon_num)
    jnt = ([], [], [])  # tendon, joint, wrap id
    sites = ([], [], [], [])  # tendon, site0, site1, divisor-wrap (-1: none)
    geoms = ([], [], [], [], [], [])  # tendon, site0, geom, site1, wrap id, divisor-wrap
    for t in range(m.ntendon):
        a, n = int(adr[t]), int(num[t])
        if n and wtype[a] == WrapType.JOINT:
            for j in range(a, a + n):
                jnt[0].append(t)
                jnt[1].append(wobj[j])
                jnt[2].append(j)
            continue
        div = -1  # wrap id of the last pulley seen
        j = a
        while j < a + n - 1:
            t0, t1 = wtype[j], wtype[j + 1]
            if t0 == WrapType.PULLEY or t1 == WrapType.PULLEY:
                if t0 == WrapType.PULLEY:
                    div = j
                j += 1
                continue
            if t1 in (WrapType.SPHERE, WrapType.CYLINDER):
                for lst, v in zip(geoms, (t, wobj[j], wobj[j + 1], wobj[j + 2], j + 1, div)):
                    lst.append(v)
                j += 2
            else:
                for lst, v in zip(sites, (t, wobj[j], wobj[j + 1], div)):
                    lst.append(v)
                j += 1
    as_int = lambda xs: tuple(np.asarray(x, dtype=np.int64) for x in xs)  # noqa: E731
    plan = {"jnt": as_int(jnt), "site": as_int(sites), "geom": as_int(geoms)}
    plan["side"] = np.asarray(m.wrap_sideid, dtype=np.int64)[plan["geom"][4]]
    return plan


def _divisor(m: Model, div_wrap: np.ndarray, dtype) -> jax.Array:
    """Pulley divisor of each segment (1 before any pulley)."""
    prm = jp.asarray(m.wrap_prm, dtype)
    if not div_wrap.size:
        return jp.ones(0, dtype)
    return where(div_wrap >= 0, prm[np.maximum(div_wrap, 0)], 1.0)


# ------------------------------------------------------------------------------------------
# 2D wrapping (one circle per row; every array carries a leading batch axis)


def _normalize_or_x(v: jax.Array) -> jax.Array:
    """mju_normalize: v / |v|, or the first unit vector when |v| < mjMINVAL."""
    n = math.safe_norm(v, keepdims=True)
    ok = n >= math.MINVAL
    e0 = jp.zeros_like(v).at[..., 0].set(1.0)
    return where(ok, v / where(ok, n, 1.0), e0)


def _cross2(a, b):
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _is_intersect(p1, p2, p3, p4):
    """Whether segments p1-p2 and p3-p4 (2D) intersect."""
    det = (p4[..., 1] - p3[..., 1]) * (p2[..., 0] - p1[..., 0]) - \
        (p4[..., 0] - p3[..., 0]) * (p2[..., 1] - p1[..., 1])
    a = math.safe_div((p4[..., 0] - p3[..., 0]) * (p1[..., 1] - p3[..., 1])
                      - (p4[..., 1] - p3[..., 1]) * (p1[..., 0] - p3[..., 0]), det)
    b = math.safe_div((p2[..., 0] - p1[..., 0]) * (p1[..., 1] - p3[..., 1])
                      - (p2[..., 1] - p1[..., 1]) * (p1[..., 0] - p3[..., 0]), det)
    ok = jp.abs(det) >= math.MINVAL
    return ok & (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)


def _safe_sqrt(x):
    pos = x > 0
    return where(pos, jp.sqrt(where(pos, x, 1.0)), 0.0)


def _wrap_circle(end, sd, has_side, radius):
    """Tangent points and arc length of a string wrapped outside a circle at the origin.

    Args:
      end: (n, 4) the two 2D end points; sd: (n, 2) sidesite direction scaled to radius;
      has_side: (n,) static bool; radius: (n,).
    Returns:
      wlen (n,) (-1: no wrap), pnt (n, 4) the two tangent points.
    """
    e0, e1 = end[:, :2], end[:, 2:]
    sqlen0 = jp.sum(e0 * e0, -1)
    sqlen1 = jp.sum(e1 * e1, -1)
    sqrad = radius * radius
    dif = e1 - e0
    dd = jp.sum(dif * dif, -1)
    a = jp.clip(-jp.sum(dif * e0, -1) / where(dd < math.MINVAL, 1.0, dd), 0.0, 1.0)
    near = e0 + a[:, None] * dif
    # no wrap when the segment misses the circle, unless the sidesite is on the other side
    miss = (jp.sum(near * near, -1) > sqrad) & (~has_side | (jp.sum(sd * near, -1) >= 0))
    invalid = (sqlen0 < sqrad) | (sqlen1 < sqrad) | (radius < math.MINVAL) | \
        (dd < math.MINVAL) | miss

    s0 = _safe_sqrt(sqlen0 - sqrad) * radius
    s1 = _safe_sqrt(sqlen1 - sqrad) * radius
    l0 = where(invalid, 1.0, sqlen0)
    l1 = where(invalid, 1.0, sqlen1)
    sols, goods = [], []
    for sgn in (1.0, -1.0):
        t0 = jp.stack([e0[:, 0] * sqrad + sgn * e0[:, 1] * s0,
                       e0[:, 1] * sqrad - sgn * e0[:, 0] * s0], -1) / l0[:, None]
        t1 = jp.stack([e1[:, 0] * sqrad - sgn * e1[:, 1] * s1,
                       e1[:, 1] * sqrad + sgn * e1[:, 0] * s1], -1) / l1[:, None]
        # goodness: midpoint direction close to the sidesite, else the shorter chord
        good_side = jp.sum(_normalize_or_x(t0 + t1) * sd, -1)
        tdif = t0 - t1
        good = where(has_side, good_side, -jp.sum(tdif * tdif, -1))
        good = where(_is_intersect(e0, t0, e1, t1), -10000.0, good)
        sols.append((t0, t1))
        goods.append(good)
    first = goods[0] > goods[1]
    t0 = where(first[:, None], sols[0][0], sols[1][0])
    t1 = where(first[:, None], sols[0][1], sols[1][1])
    invalid = invalid | _is_intersect(e0, t0, e1, t1)

    # arc length: angle in [0, pi], flipped to the long way when the winding says so
    n0, n1 = _normalize_or_x(t0), _normalize_or_x(t1)
    # arctan2 rather than arccos: same angle, finite gradient at 0 and pi
    angle = jp.arctan2(jp.abs(_cross2(n0, n1)), jp.sum(n0 * n1, -1))
    cross = t0[:, 1] * t1[:, 0] - t0[:, 0] * t1[:, 1]
    flip = ((cross > 0) & ~first) | ((cross < 0) & first)
    angle = where(flip, 2.0 * jp.pi - angle, angle)
    wlen = where(invalid, -1.0, radius * angle)
    pnt = jp.concatenate([t0, t1], -1)
    return wlen, where(invalid[:, None], 0.0, pnt)


def _angle2(a, b):
    """Signed angle (-pi, pi] from 2D vector a to b about the origin (0 for a zero vector,
    with a finite gradient)."""
    y, x = _cross2(a, b), jp.sum(a * b, -1)
    zero = (jp.abs(x) < math.MINVAL) & (jp.abs(y) < math.MINVAL)
    return where(zero, 0.0, jp.arctan2(where(zero, 0.0, y), where(zero, 1.0, x)))


def _wrap_side(end, sd, radius):
    """Circle wrap with a sidesite (MuJoCo 4.0 semantics, XML reference spatial/geom
    sidesite): the shortest path homotopic to the polyline end0 -> sd -> end1 around the
    circle, i.e. with the polyline's winding angle about the center; no wrap when the
    straight segment clears the circle with that same winding.

    Args:
      end: (n, 4) end points; sd: (n, 2) sidesite direction on the circle; radius: (n,).
    Returns:
      wlen (n,) (-1: no wrap), pnt (n, 4) the tangent points.
    """
    e0, e1 = end[:, :2], end[:, 2:]
    len0, len1 = math.safe_norm(e0), math.safe_norm(e1)
    dif = e1 - e0
    dd = jp.sum(dif * dif, -1)
    a = jp.clip(-jp.sum(dif * e0, -1) / where(dd < math.MINVAL, 1.0, dd), 0.0, 1.0)
    near = e0 + a[:, None] * dif
    clear = jp.sum(near * near, -1) > radius * radius
    wind = _angle2(e0, sd) + _angle2(sd, e1)
    straight = _angle2(e0, e1)
    # winding angles of paths with equal ends differ by multiples of 2 pi
    same = jp.abs(wind - straight) < jp.pi
    l0 = where(len0 < math.MINVAL, 1.0, len0)
    l1 = where(len1 < math.MINVAL, 1.0, len1)
    # angle swept (seen from the center) by each straight tangent piece
    c0 = jp.clip(radius / l0, -1.0, 1.0)
    c1 = jp.clip(radius / l1, -1.0, 1.0)
    s0, s1 = _safe_sqrt(1.0 - c0 * c0), _safe_sqrt(1.0 - c1 * c1)
    arc = jp.abs(wind) - jp.arctan2(s0, c0) - jp.arctan2(s1, c1)
    sgn = where(wind >= 0, 1.0, -1.0)
    u0, u1 = e0 / l0[:, None], e1 / l1[:, None]
    perp = lambda u: jp.stack([-u[:, 1], u[:, 0]], -1)  # noqa: E731
    t0 = radius[:, None] * (c0[:, None] * u0 + (sgn * s0)[:, None] * perp(u0))
    t1 = radius[:, None] * (c1[:, None] * u1 - (sgn * s1)[:, None] * perp(u1))
    invalid = (len0 < radius) | (len1 < radius) | (radius < math.MINVAL) | \
        (dd < math.MINVAL) | (clear & same) | (arc < 0)
    wlen = where(invalid, -1.0, radius * arc)
    pnt = jp.concatenate([t0, t1], -1)
    return wlen, where(invalid[:, None], 0.0, pnt)


def _asin(x):
    # clipped so that rounding past +-1 cannot produce NaN
    return jp.arcsin(jp.clip(x, -1.0, 1.0))


def _wrap_inside(end, radius):
    """Single contact point of a string pulled inside a circle (sidesite inside the geom).

    Solves asin(A sin u) + asin(B sin u) - 2 u + G = 0 for u = asin(z) by Newton's method
    with a fixed iteration count (converged rows stop moving). Returns wlen (n,) (0 wrap,
    -1 none) and pnt (n, 4) (the point twice).
    """
    e0, e1 = end[:, :2], end[:, 2:]
    len0 = math.safe_norm(e0)
    len1 = math.safe_norm(e1)
    dif = e1 - e0
    dd = jp.sum(dif * dif, -1)
    nowrap = (len0 <= radius) | (len1 <= radius) | (radius < math.MINVAL) | \
        (len0 < math.MINVAL) | (len1 < math.MINVAL)
    a = -jp.sum(dif * e0, -1) / where(dd > math.MINVAL, dd, 1.0)
    near = e0 + a[:, None] * dif
    nowrap = nowrap | ((dd > math.MINVAL) & (a > 0) & (a < 1) &
                       (math.safe_norm(near) <= radius))

    avg = _normalize_or_x(0.5 * (e0 + e1)) * radius[:, None]
    l0 = where(len0 < math.MINVAL, 1.0, len0)
    l1 = where(len1 < math.MINVAL, 1.0, len1)
    fa, fb = radius / l0, radius / l1
    cosg = (len0 * len0 + len1 * len1 - dd) / (2.0 * l0 * l1)
    nowrap = nowrap | (cosg < -1.0 + math.MINVAL)
    fallback = cosg > 1.0 - math.MINVAL
    # |cosg| = 1 never reaches the solve (no wrap / fallback); keep its gradient finite
    g = jp.arccos(where(jp.abs(cosg) < 1.0, cosg, 0.0))

    def fun(u):
        sin_u = jp.sin(u)
        return _asin(fa * sin_u) + _asin(fb * sin_u) - 2.0 * u + g

    def over_sqrt(num, x):
        return num / jp.maximum(math.MINVAL, _safe_sqrt(x))

    u = jp.full_like(radius, _INSIDE_UINIT)
    f = fun(u)
    fallback = fallback | (f > 0)

    def newton(carry, _):
        u, f, done, fail = carry
        active = ~done & ~fail
        sin_u, cos_u = jp.sin(u), jp.cos(u)
        df = cos_u * (over_sqrt(fa, 1 - sin_u * sin_u * fa * fa)
                      + over_sqrt(fb, 1 - sin_u * sin_u * fb * fb)) - 2.0
        bad_df = df > -math.MINVAL
        u1 = u - f / where(bad_df, -1.0, df)
        bad_step = u1 > u
        f1 = fun(u1)
        fail_now = active & (bad_df | bad_step | (~bad_df & ~bad_step & (f1 > _INSIDE_TOL)))
        move = active & ~bad_df & ~bad_step
        u = where(move, u1, u)
        f = where(move, f1, f)
        done = done | (move & (jp.abs(f) <= _INSIDE_TOL))
        return (u, f, done, fail | fail_now), None

    done0 = jp.abs(f) <= _INSIDE_TOL
    (u, f, done, fail), _ = jax.lax.scan(
        newton, (u, f, done0, jp.zeros_like(done0)), None, length=_INSIDE_MAXITER)
    fallback = fallback | fail | ~done
    z = jp.sin(u)

    pos = _cross2(e0, e1) > 0
    vec = _normalize_or_x(where(pos[:, None], e0, e1))
    ang = u - where(pos, _asin(fa * z), _asin(fb * z))
    c, s = jp.cos(ang), jp.sin(ang)
    sol = radius[:, None] * jp.stack([c * vec[:, 0] - s * vec[:, 1],
                                      s * vec[:, 0] + c * vec[:, 1]], -1)
    pnt = where(fallback[:, None], avg, sol)
    pnt = where(nowrap[:, None], 0.0, pnt)
    return where(nowrap, -1.0, 0.0), jp.concatenate([pnt, pnt], -1)


def wrap(x0, x1, xpos, xmat, radius, is_sphere, side, has_side):
    """Wraps segments x0-x1 around spheres / cylinders (mju_wrap), vectorized over rows.

    Args:
      x0, x1: (n, 3) end points; xpos (n, 3), xmat (n, 3, 3), radius (n,) of the geoms;
      is_sphere: (n,) static bool (else cylinder); side: (n, 3) sidesite positions;
      has_side: (n,) static bool.
    Returns:
      wlen (n,) arc length or -1 (no wrap), wpnt (n, 6) the two tangent points (global).
    """
    dtype = x0.dtype
    p0 = jp.einsum("nji,nj->ni", xmat, x0 - xpos)
    p1 = jp.einsum("nji,nj->ni", xmat, x1 - xpos)
    origin = (math.safe_norm(p0) < math.MINVAL) | (math.safe_norm(p1) < math.MINVAL)

    # sphere: plane through the center and both ends; cylinder: the local xy plane
    ax0 = _normalize_or_x(p0)
    normal = math.cross(p0, p1)
    nrm = math.safe_norm(normal)
    absx = jp.abs(ax0)
    imax = where((absx[:, 1] > absx[:, 0]) & (absx[:, 1] > absx[:, 2]), 1, 0)
    imax = where((absx[:, 2] > absx[:, 0]) & (absx[:, 2] > absx[:, 1]), 2, imax)
    alt = 1.0 - jax.nn.one_hot(imax, 3, dtype=dtype)
    normal = where((nrm < math.MINVAL)[:, None], math.cross(ax0, alt), normal)
    normal = _normalize_or_x(normal)
    ax1 = _normalize_or_x(math.cross(normal, ax0))
    sph = is_sphere[:, None]
    ax0 = where(sph, ax0, jp.array([1.0, 0.0, 0.0], dtype))
    ax1 = where(sph, ax1, jp.array([0.0, 1.0, 0.0], dtype))

    proj = lambda p: jp.stack([jp.sum(p * ax0, -1), jp.sum(p * ax1, -1)], -1)  # noqa: E731
    end = jp.concatenate([proj(p0), proj(p1)], -1)
    s = jp.einsum("nji,nj->ni", xmat, side - xpos)
    sd = _normalize_or_x(proj(s)) * radius[:, None]

    inside = has_side & (math.safe_norm(s) < radius)
    wl_out, pnt_out = _wrap_circle(end, sd, has_side, radius)
    if np.any(has_side):
        wl_side, pnt_side = _wrap_side(end, sd, radius)
        wl_out = where(has_side, wl_side, wl_out)
        pnt_out = where(has_side[:, None], pnt_side, pnt_out)
    if np.any(has_side):
        wl_in, pnt_in = _wrap_inside(end, radius)
        wlen = where(inside, wl_in, wl_out)
        pnt = where(inside[:, None], pnt_in, pnt_out)
    else:
        wlen, pnt = wl_out, pnt_out

    r0 = ax0 * pnt[:, 0:1] + ax1 * pnt[:, 1:2]
    r1 = ax0 * pnt[:, 2:3] + ax1 * pnt[:, 3:4]
    # cylinder: heights interpolated along the unrolled path, arc becomes a helix
    len0 = _safe_sqrt(jp.sum((p0[:, :2] - r0[:, :2]) ** 2, -1))
    len1 = _safe_sqrt(jp.sum((p1[:, :2] - r1[:, :2]) ** 2, -1))
    tot = len0 + wlen + len1
    h0 = p0[:, 2] + (p1[:, 2] - p0[:, 2]) * math.safe_div(len0, tot)
    h1 = p0[:, 2] + (p1[:, 2] - p0[:, 2]) * math.safe_div(len0 + wlen, tot)
    cyl = ~is_sphere
    r0 = where(cyl[:, None], r0.at[:, 2].set(h0), r0)
    r1 = where(cyl[:, None], r1.at[:, 2].set(h1), r1)
    wl_c = _safe_sqrt(wlen * wlen + (h1 - h0) ** 2)
    wlen = where(cyl & (wlen >= 0), wl_c, wlen)

    w0 = jp.einsum("nij,nj->ni", xmat, r0) + xpos
    w1 = jp.einsum("nij,nj->ni", xmat, r1) + xpos
    invalid = origin | (wlen < 0)
    wpnt = where(invalid[:, None], 0.0, jp.concatenate([w0, w1], -1))
    return where(invalid, -1.0, wlen), wpnt


# ------------------------------------------------------------------------------------------
# segments


def spatial_tendons(m: Model) -> np.ndarray:
    """Ids of the tendons with a spatial path (sites, geoms, pulleys), static."""
    if not m.ntendon:
        return np.zeros(0, np.int64)
    wtype = np.asarray(m.wrap_type)
    adr, num = np.asarray(m.tendon_adr), np.asarray(m.tendon_num)
    first = wtype[np.minimum(adr, max(len(wtype) - 1, 0))] if len(wtype) else np.zeros_like(adr)
    return np.nonzero((num > 0) & (first != WrapType.JOINT))[0]


def _segment(m: Model, d: Data, p0, p1, b0, b1):
    """Lengths (n,) and moment rows (n, nv) of straight segments p0 (on b0) to p1 (on b1)."""
    dif = p1 - p0
    length = math.safe_norm(dif)
    # MuJoCo normalizes a vanishing difference to the x axis
    vec = _normalize_or_x(dif)
    jac0, _ = smooth.jac(m, d, p0, b0)
    jac1, _ = smooth.jac(m, d, p1, b1)
    mom = jp.einsum("niv,ni->nv", jac1 - jac0, vec)
    # segments within one body contribute no moment
    mom = where((b0 != b1)[:, None], mom, 0.0)
    return length, mom


def tendon(m: Model, d: Data) -> Data:
    """ten_length, ten_J and the spatial paths wrap_obj / wrap_xpos (mj_tendon)."""
    if not m.ntendon:
        return d
    dtype = d.qpos.dtype
    plan = _plan(m)
    nt, nv = m.ntendon, m.nv
    length = jp.zeros(nt, dtype)
    ten_j = jp.zeros((nt, nv), dtype)

    t, jid, wid = plan["jnt"]
    if t.size:
        coef = jp.asarray(m.wrap_prm, dtype)[wid]
        qpos = math.take(d.qpos, np.asarray(m.jnt_qposadr)[jid])
        length = length.at[t].add(coef * qpos)
        ten_j = ten_j.at[t, np.asarray(m.jnt_dofadr)[jid]].add(coef)

    site_body = np.asarray(m.site_bodyid)
    t, s0, s1, div = plan["site"]
    if t.size:
        ln, mom = _segment(m, d, d.site_xpos[s0], d.site_xpos[s1], site_body[s0],
                           site_body[s1])
        dv = _divisor(m, div, dtype)
        length = length.at[t].add(ln / dv)
        ten_j = ten_j.at[t].add(mom / dv[:, None])

    t, s0, g, s1, gw, div = plan["geom"]
    wlen = wpnt = None
    if t.size:
        side = plan["side"]
        has_side = side >= 0
        is_sphere = np.asarray(m.wrap_type)[gw] == WrapType.SPHERE
        x0, x1 = d.site_xpos[s0], d.site_xpos[s1]
        radius = jp.asarray(m.geom_size, dtype)[g, 0]
        sidepos = d.site_xpos[np.maximum(side, 0)] if m.nsite else jp.zeros_like(x0)
        wlen, wpnt = wrap(x0, x1, d.geom_xpos[g], d.geom_xmat[g], radius, is_sphere,
                          sidepos, has_side)
        wrapped = wlen >= 0
        gb = np.asarray(m.geom_bodyid)[g]
        b0, b1 = site_body[s0], site_body[s1]
        l_ss, j_ss = _segment(m, d, x0, x1, b0, b1)
        l_a, j_a = _segment(m, d, x0, wpnt[:, :3], b0, gb)
        l_b, j_b = _segment(m, d, wpnt[:, 3:], x1, gb, b1)
        ln = where(wrapped, l_a + wlen + l_b, l_ss)
        mom = where(wrapped[:, None], j_a + j_b, j_ss)
        dv = _divisor(m, div, dtype)
        length = length.at[t].add(ln / dv)
        ten_j = ten_j.at[t].add(mom / dv[:, None])

    d = d.replace(ten_length=length, ten_J=ten_j)
    return _paths(m, d, plan, wlen, wpnt)


def _paths(m: Model, d: Data, plan: dict, wlen, wpnt) -> Data:
    """wrap_obj, wrap_xpos, ten_wrapadr, ten_wrapnum as MuJoCo fills them: one point per
    site (-1) and pulley (-2, at the origin), two per geom that wraps (the geom id)."""
    if not m.nwrap:
        return d
    dtype = d.qpos.dtype
    wtype = np.asarray(m.wrap_type)
    wobj = np.asarray(m.wrap_objid)
    adr, num = np.asarray(m.tendon_adr), np.asarray(m.tendon_num)
    ten_of = np.repeat(np.arange(m.ntendon), num)
    # candidate points in path order: two slots per wrap element
    nw = m.nwrap
    pos = jp.zeros((nw, 2, 3), dtype)
    obj = np.zeros((nw, 2), np.int32)
    valid = np.zeros((nw, 2), bool)
    site_w = np.nonzero(wtype == WrapType.SITE)[0]
    pos = pos.at[site_w, 0].set(d.site_xpos[wobj[site_w]])
    obj[site_w, 0] = -1
    valid[site_w, 0] = True
    pul_w = np.nonzero(wtype == WrapType.PULLEY)[0]
    obj[pul_w, 0] = -2
    valid[pul_w, 0] = True
    valid = jp.asarray(valid)
    gw = plan["geom"][4]
    if gw.size:
        pos = pos.at[gw].set(wpnt.reshape(-1, 2, 3))
        obj[gw] = wobj[gw][:, None]
        valid = valid.at[gw].set((wlen >= 0)[:, None])
    valid = valid.reshape(-1)
    cnt = jp.cumsum(valid.astype(jp.int32))
    # invalid slots scatter past the end and are dropped
    dest = where(valid, cnt - 1, 2 * nw)
    wrap_xpos = jp.zeros((2 * nw, 3), dtype).at[dest].set(pos.reshape(-1, 3), mode="drop")
    wrap_obj = jp.zeros(2 * nw, jp.int32).at[dest].set(jp.asarray(obj.reshape(-1)),
                                                       mode="drop")
    per_wrap = valid.reshape(nw, 2).sum(-1).astype(jp.int32)
    wrapnum = jax.ops.segment_sum(per_wrap, ten_of, num_segments=m.ntendon)
    wrapnum = where(jp.asarray(wtype[adr] == WrapType.JOINT) | (num == 0), 0, wrapnum)
    wrapadr = jp.cumsum(wrapnum) - wrapnum
    return d.replace(wrap_xpos=wrap_xpos.reshape(nw, 6), wrap_obj=wrap_obj.reshape(nw, 2),
                     ten_wrapadr=wrapadr.astype(jp.int32), ten_wrapnum=wrapnum)


# ------------------------------------------------------------------------------------------
# forces of spatial tendons on the bodies they pass (MuJoCo 4.0's cfrc_ext)


def tendon_force(m: Model, d: Data, jdot_qvel=None) -> jax.Array:
    """(ntendon,) scalar force along each tendon after the constraint solve: actuators
    (gear x actuator_force), spring and damper (actuator damping reflected with gear^2),
    armature inertia -armature (J qacc + Jdot qvel) and the friction-loss and limit rows.
    MuJoCo 4.0 applies this force along the spatial path in mj_rnePostConstraint (measured:
    each term alone reproduces its cfrc_ext). ``jdot_qvel`` (spatial tendons) is needed only
    where a spatial tendon has armature."""
    from mjx_lite import constraint, passive  # both import smooth, which imports this

    dtype = d.qpos.dtype
    nt = m.ntendon
    f = jp.zeros(nt, dtype)
    if m.nu:
        trn = np.asarray(m.actuator_trntype)
        act = np.nonzero(trn == TrnType.TENDON)[0]
        if act.size:
            tid = np.asarray(m.actuator_trnid)[act, 0]
            f = f.at[tid].add(m.actuator_gear[act, 0] * d.actuator_force[act])
    f = f + passive.tendon_passive_force(m, d)
    spatial = spatial_tendons(m)
    if jdot_qvel is not None and spatial.size:
        acc = d.ten_J[spatial] @ d.qacc + jdot_qvel
        f = f.at[spatial].add(-jp.asarray(m.tendon_armature, dtype)[spatial] * acc)
    plan = constraint.row_plan(m, 0)
    if plan.fr_ten.size and d.efc_force.shape[0]:
        adr = plan.ne + plan.fr_dof.size + np.arange(plan.fr_ten.size)
        f = f.at[plan.fr_ten].add(d.efc_force[adr])
    if plan.lim_ten.size and d.efc_force.shape[0]:
        adr = plan.ne + plan.nf + plan.lim_jnt.size + np.arange(plan.lim_ten.size)
        # a limit row's Jacobian is -side * ten_J
        f = f.at[plan.lim_ten].add(-plan.lim_tside * d.efc_force[adr])
    return f


def spatial_wrenches(m: Model, d: Data, force: jax.Array):
    """[torque; force] wrenches, their points and bodies, of each spatial tendon's force on
    the bodies along its path: at every segment end, force x (the length's gradient in that
    point), the unit segment direction over the pulley divisor. The arc on a wrapping geom
    adds nothing: its two tangent points share the geom's body."""
    plan = _plan(m)
    dtype = d.qpos.dtype
    site_body = np.asarray(m.site_bodyid)
    ends = []  # (tendon, p0, b0, p1, b1, divisor, active)

    t, s0, s1, div = plan["site"]
    if t.size:
        ends.append((t, d.site_xpos[s0], site_body[s0], d.site_xpos[s1], site_body[s1],
                     _divisor(m, div, dtype), jp.ones(t.size, bool)))
    t, s0, g, s1, gw, div = plan["geom"]
    if t.size:
        side = plan["side"]
        x0, x1 = d.site_xpos[s0], d.site_xpos[s1]
        radius = jp.asarray(m.geom_size, dtype)[g, 0]
        sidepos = d.site_xpos[np.maximum(side, 0)]
        wlen, wpnt = wrap(x0, x1, d.geom_xpos[g], d.geom_xmat[g], radius,
                          np.asarray(m.wrap_type)[gw] == WrapType.SPHERE, sidepos, side >= 0)
        wrapped = wlen >= 0
        gb = np.asarray(m.geom_bodyid)[g]
        b0, b1 = site_body[s0], site_body[s1]
        dv = _divisor(m, div, dtype)
        ends += [(t, x0, b0, x1, b1, dv, ~wrapped),
                 (t, x0, b0, wpnt[:, :3], gb, dv, wrapped),
                 (t, wpnt[:, 3:], gb, x1, b1, dv, wrapped)]
    if not ends:
        return [], [], []
    t, p0, b0, p1, b1, dv, on = (np.concatenate([e[i] for e in ends]) if i in (0, 2, 4)
                                 else jp.concatenate([e[i] for e in ends]) for i in range(7))
    unit = _normalize_or_x(p1 - p0)
    # segments within one body exert equal and opposite forces on it
    scale = where(on & (b0 != b1), force[t] / dv, 0.0)
    frc = unit * scale[:, None]
    zero = jp.zeros_like(frc)
    wrenches = [jp.concatenate([zero, -frc], 1), jp.concatenate([zero, frc], 1)]
    return wrenches, [p0, p1], [jp.asarray(b0), jp.asarray(b1)]

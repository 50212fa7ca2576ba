"""Box-box collider (Computation chapter, "Collision detection > Checking"), following the
separating-axis collider of MuJoCo 3.12+ (changelog: "Rewrote cleaner box-box SAT collider").

Stage 1 evaluates the 15 candidate axes (3 face normals per box, 9 edge cross products); any
axis separating the boxes by more than the margin (plus a rounding slack scaled by the box
sizes) means no contact. The deepest face axis wins unless an edge axis is deeper by a
relative bias, and an edge axis within ~8 degrees of the best face axis gives way to the face
unless it is 5% deeper. Stage 2: an edge axis gives one contact at the midpoint of the closest
points of the two supporting edges; a face axis clips the incident box's most opposed face
against the four side planes of the reference face (Sutherland-Hodgman), and every clipped
vertex within the margin band (duplicates dropped) becomes a contact: at most 8.

Everything is branch-free (``jp.where`` over all candidates) so it jits, vmaps and
differentiates; divisions are guarded on the branch not taken.
"""

from __future__ import annotations

import jax.numpy as jp

from mjx_lite import math
from mjx_lite.collision.primitive import first_k
from mjx_lite.math import where

MINVAL = math.MINVAL
MAXVERT = 8  # a 4-gon clipped by 4 half-planes has at most 8 vertices
BIG = 1e30


def _eps(dtype):
    """(separation slack per unit size, parallel-edge sin^2, ambiguous-sign, duplicate radius)
    rounding scales for the dtype (the C code's double and single values)."""
    if jp.dtype(dtype) == jp.float32:
        return 1e-6, 1e-7, 1e-5, 1e-10
    return 1e-13, 1e-16, 1e-9, 1e-14


def _clip(poly, n, coord, sign, limit):
    """Clips polygon ``poly[:n]`` (MAXVERT, 3) by sign * v[coord] <= limit; z is carried
    along as an attribute. Returns (clipped polygon (MAXVERT, 3), count)."""
    idx = jp.arange(MAXVERT)
    valid = idx < n
    d = sign * poly[:, coord] - limit
    nxt = where(idx + 1 >= n, 0, idx + 1)
    q, dq = poly[nxt], d[nxt]
    emit = valid & (d <= 0)
    cross = valid & (((d < 0) & (dq > 0)) | ((d > 0) & (dq < 0)))
    t = d / where(cross, d - dq, 1.0)
    inter = poly + t[:, None] * (q - poly)
    cand = jp.stack([poly, inter], axis=1).reshape(2 * MAXVERT, 3)
    mask = jp.stack([emit, cross], axis=1).reshape(2 * MAXVERT)
    ok, out = first_k(mask, MAXVERT, cand)
    return out, jp.sum(ok)


def _edge_contact(i, j, rot, pos21, size1, size2, sgneps):
    """Edge-edge contact for edge axis (i of box1) x (j of box2), static i, j.

    Returns (dist, midpoint, axis), both vectors in the box1 frame."""
    i1, i2 = (i + 1) % 3, (i + 2) % 3
    j1, j2 = (j + 1) % 3, (j + 2) % 3
    axis = jp.zeros(3, rot.dtype).at[i1].set(-rot[i2, j]).at[i2].set(rot[i1, j])
    axis = axis / jp.maximum(math.safe_norm(axis), MINVAL)
    axis = where(jp.dot(axis, pos21) < 0, -axis, axis)
    a2 = rot.T @ axis
    amb1 = where(jp.abs(axis[i1]) < sgneps, i1, where(jp.abs(axis[i2]) < sgneps, i2, -1))
    amb2 = where(jp.abs(a2[j1]) < sgneps, j1, where(jp.abs(a2[j2]) < sgneps, j2, -1))
    d2 = rot[:, j]
    b = d2[i]
    denom = 1 - b * b
    c1 = where(axis >= 0, size1, -size1).at[i].set(0.0)
    cc = where(a2 >= 0, -size2, size2).at[j].set(0.0)
    best = jp.asarray(BIG, rot.dtype)
    w1 = w2 = jp.zeros(3, rot.dtype)
    for v1 in (0, 1):
        for v2 in (0, 1):
            # both signs of a near-zero axis component support the axis: try each
            ok = ((amb1 >= 0) | (v1 == 0)) & ((amb2 >= 0) | (v2 == 0))
            e1 = where((jp.arange(3) == amb1) & (v1 == 1), -c1, c1)
            ec = where((jp.arange(3) == amb2) & (v2 == 1), -cc, cc)
            e2 = rot @ ec + pos21
            e = e2 - e1
            d1e, d2e = e[i], jp.dot(d2, e)
            s = where(denom < MINVAL, 0.0,
                         (d1e - b * d2e) / where(denom < MINVAL, 1.0, denom))
            s = jp.clip(s, -size1[i], size1[i])
            t = jp.clip(b * s - d2e, -size2[j], size2[j])
            s = jp.clip(d1e + b * t, -size1[i], size1[i])
            p1 = e1.at[i].add(s)
            p2 = e2 + d2 * t
            g2 = jp.sum((p2 - p1) ** 2)
            take = ok & (g2 < best)
            best = where(take, g2, best)
            w1 = where(take, p1, w1)
            w2 = where(take, p2, w2)
    return jp.dot(w2 - w1, axis), 0.5 * (w1 + w2), axis


def box_box(pos1, mat1, size1, pos2, mat2, size2, margin):
    """Box-box contacts: up to 8 (see the module docstring)."""
    dt = pos1.dtype
    sepeps, pareps, sgneps, dupeps = _eps(dt)
    pos21 = mat1.T @ (pos2 - pos1)
    pos12 = mat2.T @ (pos1 - pos2)
    rot = mat1.T @ mat2
    rotabs = jp.abs(rot)
    septol = margin + sepeps * (jp.sum(size1) + jp.sum(size2))

    # stage 1: face axes (box1 then box2), first maximum wins
    sep1 = jp.abs(pos21) - size1 - rotabs @ size2
    sep2 = jp.abs(pos12) - size2 - rotabs.T @ size1
    face_sep = jp.concatenate([sep1, sep2])
    separated = jp.any(face_sep > septol)
    code_face = jp.argmax(face_sep)
    sep_face = face_sep[code_face]
    sep_best, code = sep_face, code_face
    for i in range(3):
        i1, i2 = (i + 1) % 3, (i + 2) % 3
        for j in range(3):
            j1, j2 = (j + 1) % 3, (j + 2) % 3
            ax1, ax2 = -rot[i2, j], rot[i1, j]
            norm2 = ax1 * ax1 + ax2 * ax2
            ok = norm2 >= pareps
            inv = 1 / jp.sqrt(where(ok, norm2, 1.0))
            ax1, ax2 = ax1 * inv, ax2 * inv
            r1 = size1[i1] * jp.abs(ax1) + size1[i2] * jp.abs(ax2)
            a21 = ax1 * rot[i1, j1] + ax2 * rot[i2, j1]
            a22 = ax1 * rot[i1, j2] + ax2 * rot[i2, j2]
            r2 = size2[j1] * jp.abs(a21) + size2[j2] * jp.abs(a22)
            sep = jp.abs(ax1 * pos21[i1] + ax2 * pos21[i2]) - r1 - r2
            separated = separated | (ok & (sep > septol))
            # an edge axis must beat the faces by a relative bias: faces give a manifold
            take = ok & (sep - 1e-6 * jp.abs(sep) > sep_best) & (sep > sep_face)
            sep_best = where(take, sep, sep_best)
            code = where(take, 6 + 3 * i + j, code)

    # an edge axis nearly parallel to the best face axis gives way to it unless 5% deeper
    edge_axes = []
    for i in range(3):
        for j in range(3):
            i1, i2 = (i + 1) % 3, (i + 2) % 3
            ax = jp.zeros(3, dt).at[i1].set(-rot[i2, j]).at[i2].set(rot[i1, j])
            edge_axes.append(ax / jp.maximum(math.safe_norm(ax), MINVAL))
    edge_axes = jp.stack(edge_axes)
    eaxis = edge_axes[jp.clip(code - 6, 0, 8)]
    fdir = jp.concatenate([jp.eye(3, dtype=dt), rot.T])[code_face]  # face normal, box1 frame
    face_dot = jp.abs(jp.dot(eaxis, fdir))
    substitute = (code >= 6) & (face_dot > 0.99) & (
        sep_best < sep_face + 0.05 * jp.abs(sep_face) + MINVAL)
    code = where(substitute, code_face, code)
    is_edge = code >= 6

    # stage 2a: edge-edge, all nine evaluated and the winner selected
    edges = [_edge_contact(i, j, rot, pos21, size1, size2, sgneps)
             for i in range(3) for j in range(3)]
    e_dist = jp.stack([e[0] for e in edges])
    e_mid = jp.stack([e[1] for e in edges])
    e_axis = jp.stack([e[2] for e in edges])
    k = jp.clip(code - 6, 0, 8)
    edist, emid, eax = e_dist[k], e_mid[k], e_axis[k]
    edge_valid = is_edge & (edist <= septol)
    epos = mat1 @ emid + pos1
    enormal = mat1 @ eax

    # stage 2b: face contact; the reference box owns the winning face
    ref1 = code < 3
    a = where(ref1, code, code - 3)
    a = jp.clip(a, 0, 2)
    sizeref = where(ref1, size1, size2)
    sizeinc = where(ref1, size2, size1)
    posref = where(ref1, pos1, pos2)
    matref = where(ref1, mat1, mat2)
    posoi = where(ref1, pos21, pos12)
    rinc = where(ref1, rot, rot.T)
    sgn = where(posoi[a] >= 0, 1.0, -1.0).astype(dt)
    binc = jp.argmax(jp.abs(rinc[a]))
    tinc = where(sgn * rinc[a, binc] > 0, -1.0, 1.0).astype(dt)
    ax, ay = (a + 1) % 3, (a + 2) % 3
    bu, bv = (binc + 1) % 3, (binc + 2) % 3
    rows = jp.stack([ax, ay, a])
    cx = posoi[rows] + tinc * sizeinc[binc] * rinc[rows, binc]
    du = sizeinc[bu] * rinc[rows, bu]
    dv = sizeinc[bv] * rinc[rows, bv]
    zs = jp.array([1.0, 1.0, 0.0], dt) + jp.array([0.0, 0.0, 1.0], dt) * sgn
    cx = cx * zs - jp.array([0.0, 0.0, 1.0], dt) * sizeref[a]
    du, dv = du * zs, dv * zs
    signs = jp.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], dt)
    quad = cx[None] + signs[:, :1] * du[None] + signs[:, 1:] * dv[None]
    poly = jp.zeros((MAXVERT, 3), dt).at[:4].set(quad)
    n = jp.asarray(4)
    for coord, sign in ((0, 1.0), (0, -1.0), (1, 1.0), (1, -1.0)):
        poly, n = _clip(poly, n, coord, sign, sizeref[where(coord == 0, ax, ay)])

    # vertices within the margin band, dropping near-duplicates made at clipped corners
    dupe2 = dupeps * (sizeref[ax] ** 2 + sizeref[ay] ** 2)
    accepted = []
    for kk in range(MAXVERT):
        ok = (kk < n) & (poly[kk, 2] <= margin)
        for q in range(kk):
            close = jp.sum((poly[q, :2] - poly[kk, :2]) ** 2) < dupe2
            ok = ok & ~(accepted[q] & close)
        accepted.append(ok)
    fvalid = jp.stack(accepted) & ~is_edge
    nsign = where(ref1, sgn, -sgn)
    fnormal = nsign * matref[:, a]
    onehot = lambda c: (jp.arange(3) == c).astype(dt)  # noqa: E731
    posc = (poly[:, :1] * onehot(ax) + poly[:, 1:2] * onehot(ay)
            + (sgn * (sizeref[a] + 0.5 * poly[:, 2:3])) * onehot(a))
    fpos = posc @ matref.T + posref
    fdist = poly[:, 2]

    slot0 = jp.arange(MAXVERT) == 0
    dist = where(is_edge, where(slot0, edist, 0.0), fdist)
    pos = where(is_edge, where(slot0[:, None], epos, 0.0), fpos)
    normal = jp.broadcast_to(where(is_edge, enormal, fnormal), (MAXVERT, 3))
    valid = where(is_edge, slot0 & edge_valid, fvalid) & ~separated
    return dist, pos, normal, jp.zeros((MAXVERT, 3), dt), valid


box_box.NCON = MAXVERT

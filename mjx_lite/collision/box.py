"""Box-box collider (Computation chapter, "Collision detection > Checking"): MuJoCo's
separating-axis test over the 6 face normals and 9 edge-edge cross products, then contact
points clipped on the deepest face (face case) or around the deepest edge pair (edge case).

Both cases are evaluated for every input and selected by the winning axis, so the traced
program has no data-dependent branches. Each case yields 24 candidate points in MuJoCo's
order; the first ``NCON = 8`` valid ones are kept (MuJoCo's own cap for box-box).
"""

from __future__ import annotations

import jax.numpy as jp
import numpy as np

from mjx_lite.collision.primitive import MINVAL, first_k

# signed permutations that bring a box face to +z, indexed by face (axis + 3 * negative)
_ROTMORE = np.zeros((6, 3, 3))
for _face, _entries in enumerate((
        ((0, 2, -1), (1, 1, 1), (2, 0, 1)), ((0, 0, 1), (1, 2, -1), (2, 1, 1)),
        ((0, 0, 1), (1, 1, 1), (2, 2, 1)), ((0, 2, 1), (1, 1, 1), (2, 0, -1)),
        ((0, 0, 1), (1, 2, 1), (2, 1, -1)), ((0, 0, -1), (1, 1, 1), (2, 2, -1)))):
    for _r, _c, _v in _entries:
        _ROTMORE[_face, _r, _c] = _v


def _sgn(bit):
    return jp.where(bit, 1.0, -1.0)


def _inv(x):
    ok = jp.abs(x) > 0
    return jp.where(ok, 1 / jp.where(ok, x, 1.0), 0.0)


def _separating_axes(pos21, pos12, rot, size1, size2, margin):
    """The axis of least penetration: (separated, code, cle1, cle2, clnorm, inside)."""
    rotabs = jp.abs(rot)
    plen2 = rotabs @ size2
    plen1 = rotabs.T @ size1
    pen = margin + 3 * jp.sum(size1) + 3 * jp.sum(size2)
    code = jp.array(-1)
    sep = jp.array(False)
    for i in range(3):
        c1 = -jp.abs(pos21[i]) + size1[i] + plen2[i]
        c2 = -jp.abs(pos12[i]) + size2[i] + plen1[i]
        sep = sep | (c1 < -margin) | (c2 < -margin)
        code = jp.where(c1 < pen, i + 3 * (pos21[i] < 0), code)
        pen = jp.where(c1 < pen, c1, pen)
        code = jp.where(c2 < pen, i + 3 * (pos12[i] < 0) + 6, code)
        pen = jp.where(c2 < pen, c2, pen)
    cle1 = jp.array(0)
    cle2 = jp.array(0)
    clnorm = jp.zeros(3, pos21.dtype)
    inside = jp.array(False)
    for i in range(3):
        for j in range(3):
            b = rot[:, j]  # box-2 axis j in the box-1 frame
            e = jp.zeros(3, pos21.dtype).at[i].set(1.0)
            t = jp.cross(e, b)
            n = jp.sqrt(jp.dot(t, t))
            ok = n >= MINVAL
            t = t / jp.where(ok, n, 1.0)
            c2 = jp.dot(pos21, t)
            c3 = sum(size1[k] * jp.abs(t[k]) for k in range(3) if k != i)
            c3 = c3 + sum(size2[k] * rotabs[i, 3 - k - j] / jp.where(ok, n, 1.0)
                          for k in range(3) if k != j)
            c3 = c3 - jp.abs(c2)
            sep = sep | (ok & (c3 < -margin))
            take = ok & (c3 < pen * (1 - 1e-12))
            pen = jp.where(take, c3, pen)
            neg = c2 < 0
            e1 = sum(jp.where((t[k] > 0) ^ neg, 1 << k, 0) for k in range(3) if k != i)
            e2 = sum(jp.where((rot[i, 3 - k - j] > 0) ^ neg ^ ((k - j + 3) % 3 == 1), 1 << k, 0)
                     for k in range(3) if k != j)
            cle1 = jp.where(take, e1, cle1)
            cle2 = jp.where(take, e2, cle2)
            code = jp.where(take, 12 + 3 * i + j, code)
            clnorm = jp.where(take, t, clnorm)
            inside = jp.where(take, neg, inside)
    return sep | (code == -1), code, cle1, cle2, clnorm, inside


def _clip_lines(starts, dirs, line_ok, half):
    """Crossings of 2D segment lines with the rectangle |x| <= half[0], |y| <= half[1].

    Returns per (line, q, side) the parameter c1, the other coordinate c2, the side value l
    and validity, in MuJoCo's loop order (line, q, side)."""
    out_c1, out_c2, out_l, out_ok, out_line, out_q = [], [], [], [], [], []
    for li in range(starts.shape[0]):
        for q in range(2):
            a, b = starts[li, q], dirs[li, q]
            c, d = starts[li, 1 - q], dirs[li, 1 - q]
            okb = jp.abs(b) > MINVAL
            for side in (-1, 1):
                lval = half[q] * side
                c1 = (lval - a) * _inv(jp.where(okb, b, 1.0))
                c2 = c + d * c1
                ok = line_ok[li] & okb & (c1 >= 0) & (c1 <= 1) & (jp.abs(c2) <= half[1 - q])
                out_c1.append(c1)
                out_c2.append(c2)
                out_l.append(lval)
                out_ok.append(ok)
                out_line.append(li)
                out_q.append(q)
    return (jp.stack(out_c1), jp.stack(out_c2), jp.stack(out_l), jp.stack(out_ok),
            np.array(out_line), np.array(out_q))


def _face_case(code, pos1, mat1, size1, pos2, mat2, size2, pos21, pos12, rot, margin):
    q1, q2 = code % 6, code // 6
    rm = jp.asarray(_ROTMORE, pos1.dtype)[q1]
    second = q2 == 1
    r = jp.where(second, rm @ rot.T, rm @ rot)
    p = jp.where(second, rm @ pos12, rm @ pos21)
    ss = jp.abs(jp.where(second, rm @ size2, rm @ size1))
    s = jp.where(second, size1, size2)
    rt = r.T
    lx, ly, hz = ss[0], ss[1], ss[2]
    p = p.at[2].add(-hz)
    bits = r[2] < 0  # clcorner bits
    lp = p + rt[0] * (s[0] * _sgn(bits[0])) + rt[1] * (s[1] * _sgn(bits[1])) \
        + rt[2] * (s[2] * _sgn(bits[2]))
    # edges from the nearest corner along the axes that lie mostly in the face plane
    cand = jp.stack([rt[i] * (s[i] * jp.where(bits[i], -2.0, 2.0)) for i in range(3)])
    has, picked = first_k(jp.abs(r[2]) < 0.5, 2, cand)
    has1, has2 = has[0], has[1]
    e1, e2 = picked[0], picked[1]
    p0, p3, p4 = lp, lp + e1, lp + e2
    p5 = p3 + e2
    starts = jp.stack([p0, p0, p3, p4])
    dirs = jp.stack([e1, e2, e2, e1])
    c1, _, _, ok, li, _ = _clip_lines(starts, dirs, jp.stack([has1, has2, has2, has2]), ss)
    lines_pts = starts[li] + dirs[li] * c1[:, None]
    # box-1 face corners inside the projected box-2 face
    det = e1[0] * e2[1] - e2[0] * e1[1]
    idet = _inv(det)
    corner_pts, corner_ok = [], []
    for i in range(4):
        llx = lx if i // 2 else -lx
        lly = ly if i % 2 else -ly
        x, y = llx - p0[0], lly - p0[1]
        u = (x * e2[1] - y * e2[0]) * idet
        v = (y * e1[0] - x * e1[1]) * idet
        corner_ok.append(has2 & (u > 0) & (v > 0) & (u < 1) & (v < 1))
        corner_pts.append(jp.stack([llx, lly, p0[2] + u * e1[2] + v * e2[2]]))
    # box-2 corners of the clipped face inside the box-1 face
    vert_pts, vert_ok = [], []
    for i, (pt, ok_i) in enumerate(((p0, True), (p3, has1), (p4, has2), (p5, has2))):
        inside = (pt[0] > -lx) & (pt[0] < lx) & (pt[1] > -ly) & (pt[1] < ly)
        vert_ok.append(jp.asarray(ok_i) & (inside if i else True))
        vert_pts.append(pt)
    pts = jp.concatenate([lines_pts, jp.stack(corner_pts), jp.stack(vert_pts)])
    ok = jp.concatenate([ok, jp.stack(corner_ok), jp.stack(vert_ok)]) & (pts[:, 2] <= margin)
    # the contact point sits at half the depth, midway between the two surfaces
    dist = pts[:, 2]
    local = pts.at[:, 2].set(0.5 * pts[:, 2] + hz)
    rw = jp.where(second, mat2, mat1) @ rm.T
    pos = local @ rw.T + jp.where(second, pos2, pos1)
    normal = jp.where(second, -1.0, 1.0) * rw[:, 2]
    return dist, pos, normal, ok


def _edge_case(code, cle1, cle2, clnorm, inside, pos1, mat1, size1, size2, pos21, rot,
               margin):
    code = code - 12
    q1, q2 = code // 3, code % 3
    rotabs = jp.abs(rot)
    pair = jp.array([[1, 2], [0, 2], [1, 0]])
    ax1, ax2 = pair[q2, 0], pair[q2, 1]
    pax1, pax2 = pair[q1, 0], pair[q1, 1]
    swap = rotabs[q1, ax1] < rotabs[q1, ax2]
    ax1 = jp.where(swap, ax2, ax1)
    ax2 = jp.where(swap, 3 - q2 - ax1, ax2)
    pswap = rotabs.T[q2, pax1] < rotabs.T[q2, pax2]
    pax1 = jp.where(pswap, pax2, pax1)
    pax2 = jp.where(pswap, 3 - q1 - pax1, pax2)
    clface = jp.where(jp.bitwise_and(cle1, jp.left_shift(1, pax2)) != 0, pax2, pax2 + 3)
    rm = jp.asarray(_ROTMORE, pos1.dtype)[clface]
    p = rm @ pos21
    rnorm = rm @ clnorm
    r = rm @ rot
    s = jp.abs(rm.T @ size1)
    rt = r.T
    lx, ly, hz = s[0], s[1], s[2]
    p = p.at[2].add(-hz)
    b1 = jp.bitwise_and(cle2, jp.left_shift(1, ax1)) != 0
    b2 = jp.bitwise_and(cle2, jp.left_shift(1, ax2)) != 0
    ext = rt[q2] * size2[q2]
    base0 = p + rt[ax1] * (size2[ax1] * _sgn(b1)) + rt[ax2] * (size2[ax2] * _sgn(b2))
    base2 = p + rt[ax1] * (size2[ax1] * -_sgn(b1)) + rt[ax2] * (size2[ax2] * _sgn(b2))
    pu = jp.stack([base0 + ext, base0 - ext, base2 + ext, base2 - ext])
    axi0, axi1, axi2 = pu[0], pu[1] - pu[0], pu[2] - pu[0]
    okn = jp.abs(rnorm[2]) >= MINVAL
    inv_n = _inv(jp.where(okn, rnorm[2], 1.0))
    innorm = inv_n * jp.where(inside, -1.0, 1.0)
    proj = pu + rnorm[None] * (-pu[:, 2] * inv_n)[:, None]
    ppts2 = proj[:, :2]
    pts0, pts1, pts2 = proj[0], proj[1] - proj[0], proj[2] - proj[0]

    starts = jp.stack([pts0, pts0, pts0 + pts1, pts0 + pts2])
    dirs = jp.stack([pts1, pts2, pts2, pts1])
    ustarts = jp.stack([axi0, axi0, axi0 + axi1, axi0 + axi2])
    udirs = jp.stack([axi1, axi2, axi2, axi1])
    c1, c2, lval, ok, li, qs = _clip_lines(starts, dirs, jp.ones(4, bool), s)
    ok = ok & ((ustarts[li, 2] + udirs[li, 2] * c1) * innorm <= margin)
    lpts = ustarts[li] * 0.5 + udirs[li] * (0.5 * c1)[:, None]
    onehot = jp.asarray(np.eye(3)[qs], lpts.dtype)
    other = jp.asarray(np.eye(3)[1 - qs], lpts.dtype)
    lpts = lpts + onehot * (0.5 * lval)[:, None] + other * (0.5 * c2)[:, None]
    ldepth = lpts[:, 2] * innorm * 2
    nl = jp.sum(ok)

    # box-1 face corners against the box-2 edge parallelogram
    a, b, c, d = pts1[0], pts2[0], pts1[1], pts2[1]
    det = a * d - b * c
    fpts, fdepth, fok = [], [], []
    for i in range(4):
        llx = lx if i // 2 else -lx
        lly = ly if i % 2 else -ly
        x, y = llx - pts0[0], lly - pts0[1]
        idet = _inv(det)
        u = (x * d - y * b) * idet
        v = (y * a - x * c) * idet
        out_u, out_v = (u < 0) | (u > 1), (v < 0) | (v > 1)
        passed = jp.where(nl == 0, ~(out_u & out_v), ~(out_u | out_v))
        u, v = jp.clip(u, 0, 1), jp.clip(v, 0, 1)
        t1 = pu[0] * (1 - u - v) + pu[1] * u + pu[2] * v
        pt = jp.stack([llx, lly, jp.zeros_like(llx)])
        dsq = jp.dot(pt - t1, pt - t1)
        okf = passed & ~((t1[2] > 0) & (dsq > margin * margin))
        # MuJoCo reuses the determinant's variable for this squared distance, so later
        # corners that pass the parameter test divide by it
        det = jp.where(passed, dsq, det)
        fpts.append((pt + t1) * 0.5)
        fdepth.append(jp.sqrt(jp.maximum(dsq, 0.0)) * jp.where(t1[2] < 0, -1.0, 1.0))
        fok.append(okf)
    fok = jp.stack(fok)
    nf = nl + jp.sum(fok)

    # projected box-2 edge corners inside (or near) the box-1 face
    vpts, vdepth, vok = [], [], []
    for i in range(4):
        x, y = ppts2[i, 0], ppts2[i, 1]
        xo, yo = (x < -lx) | (x > lx), (y < -ly) | (y > ly)
        passed = jp.where(nl == 0, jp.where(nf == 0, True, ~(xo & yo)), ~(xo | yo))
        lo, hi = ppts2[i] < -s[:2], ppts2[i] > s[:2]
        outside = jp.where(lo, ppts2[i] + s[:2], jp.where(hi, ppts2[i] - s[:2], 0.0))
        dsq = outside[0] ** 2 + outside[1] ** 2
        dsq = dsq + pu[i, 2] * innorm * pu[i, 2] * innorm
        okv = passed & ~((pu[i, 2] > 0) & (dsq > margin * margin))
        half = jp.where(lo, -s[:2] * 0.5, jp.where(hi, s[:2] * 0.5, ppts2[i] * 0.5))
        vpts.append(jp.concatenate([half, jp.zeros(1, half.dtype)]) + pu[i] * 0.5)
        vdepth.append(jp.sqrt(jp.maximum(dsq, 0.0)) * jp.where(pu[i, 2] < 0, -1.0, 1.0))
        vok.append(okv)
    pts = jp.concatenate([lpts, jp.stack(fpts), jp.stack(vpts)])
    depth = jp.concatenate([ldepth, jp.stack(fdepth), jp.stack(vdepth)])
    ok = jp.concatenate([ok, fok, jp.stack(vok)]) & okn
    rw = mat1 @ rm.T
    normal = (rw @ rnorm) * jp.where(inside, -1.0, 1.0)
    pos = pts.at[:, 2].add(hz) @ rw.T + pos1
    return depth, pos, normal, ok


def box_box(pos1, mat1, size1, pos2, mat2, size2, margin):
    pos21 = mat1.T @ (pos2 - pos1)
    pos12 = mat2.T @ (pos1 - pos2)
    rot = mat1.T @ mat2
    sep, code, cle1, cle2, clnorm, inside = _separating_axes(
        pos21, pos12, rot, size1, size2, margin)
    face = code < 12
    fd, fp, fn, fok = _face_case(jp.where(face, code, 0), pos1, mat1, size1, pos2, mat2,
                                 size2, pos21, pos12, rot, margin)
    ed, ep, en, eok = _edge_case(jp.where(face, 12, code), cle1, cle2, clnorm, inside, pos1,
                                 mat1, size1, size2, pos21, rot, margin)
    dist = jp.where(face, fd, ed)
    pos = jp.where(face, fp, ep)
    ok = jp.where(face, fok, eok) & ~sep
    normal = jp.where(face, fn, en)
    valid, dist, pos = first_k(ok, 8, dist, pos)
    return dist, pos, jp.broadcast_to(normal, (8, 3)), jp.zeros((8, 3), pos.dtype), valid


box_box.NCON = 8

"""MuJoCo 4.0's plane-mesh collider: up to four corners of one hull polygon.

Measured against mujoco 4.0.0 (``tests/test_hfield_collision.py``; 400 dodecahedron states
and 50 each of two triangulated hulls agree exactly), not read from the public source (whose
``mjc_PlaneConvex`` walks the support vertex's graph neighbours, three at most: 4.0 does not):

* the deepest vertex ``b`` along the plane's -normal, taken in the mesh frame (first index
  on ties); no contact when its signed distance exceeds the margin;
* of the hull polygons (``mesh_poly*``) that contain ``b``, the one whose outward normal is
  most aligned with the plane's -normal;
* a polygon of more than four corners is pruned to four, keeping ``b``: starting from the
  three corners that follow ``b`` in polygon order, the last, then the third, then the second
  is moved one corner on while that grows the quadrilateral's area ``|(p_a - p_c) x
  (p_b - p_d)| / 2`` (mesh frame). On a regular pentagon every choice has the same area, so
  rounding decides: the areas are computed as 4.0 does (float64 on the mesh-frame vertices)
  to make the same choice;
* of the kept corners other than ``b``, those above the mesh centre along the plane normal or
  farther than the margin from the plane give no contact (they are not replaced).

Each contact sits on its vertex: ``dist`` is the vertex's signed distance to the plane,
``pos`` the vertex moved by ``-dist / 2`` along the plane normal (halfway to the plane),
the normal is the plane's.
"""

from __future__ import annotations

import jax.numpy as jp
from jax import lax

from mjx_lite import math
from mjx_lite.collision import multiccd
from mjx_lite.math import where

NCON = 4


def _quad_area(p, a, b, c, d):
    return 0.5 * jp.linalg.norm(jp.cross(p[a] - p[c], p[b] - p[d]))


def prune_to_four(corners, cnt):
    """Indices (4,) into ``corners`` (K, 3; the first ``cnt`` real) of the quadrilateral
    4.0 keeps, corner 0 always first; for ``cnt <= 4`` simply 0..3 (the caller masks
    ``k >= cnt``). Greedy area growth, one corner moved at a time (see module docstring)."""
    n = jp.maximum(cnt, 1)

    def area(b, c, d):
        return _quad_area(corners, 0, b, c, d)

    # phase 0 tries moving d, 1 moves c, 2 moves b; a failed d move ends the search
    def body(s):
        b, c, d, m, phase, _ = s
        nb, nc, nd = (b + (phase == 2)) % n, (c + (phase == 1)) % n, (d + (phase == 0)) % n
        mn = area(nb, nc, nd)
        grew = mn > m
        done = (~grew) & (phase == 0)
        phase = where(grew, where(phase == 0, 1, phase), (phase + 1) % 3)
        b, c, d = (where(grew, new, old) for new, old in ((nb, b), (nc, c), (nd, d)))
        return b, c, d, where(grew, mn, m), phase, done

    one = jp.ones((), cnt.dtype)
    start = (one, 2 * one, 3 * one, area(one, 2 * one, 3 * one), 0 * one, cnt <= 4)
    b, c, d, *_ = lax.while_loop(lambda s: ~s[-1], body, start)
    return where(cnt <= 4, jp.arange(4, dtype=cnt.dtype), jp.stack([0 * one, b, c, d]))


def plane_mesh(pos1, mat1, size1, pos2, mat2, size2, margin, verts1, verts2, table1, table2):
    """Contacts of a plane (geom1) with a mesh (geom2).

    Args:
      pos1, mat1: plane frame; size1, size2: geom sizes (unused: planes are infinite here).
      pos2, mat2: mesh frame. margin: margin + gap.
      verts2: (V, 3) mesh vertices, padded by repeating the first.
      table2: the polygon tables of ``multiccd.mesh_tables``.
    Returns:
      dist (NCON,), pos (NCON, 3), normal (NCON, 3), tangent (NCON, 3) zeros, valid (NCON,).
    """
    del size1, size2, verts1, table1
    n = mat1[:, 2]
    w = verts2 @ mat2.T + pos2
    depth = (w - pos1) @ n
    local_n = mat2.T @ n
    b = math.argmin(lax.stop_gradient(local_n @ verts2.T))
    face, facenum, pnormal = multiccd.faces_at(table2, b)
    K = face.shape[1]
    k = jp.arange(K)
    corner = k[None] < facenum[:, None]
    has_b = jp.any(corner & (face == b), axis=1)
    cos = pnormal.astype(n.dtype) @ -local_n
    f = jp.argmax(where(has_b & (facenum > 0), cos, -2.0))
    ids, cnt = face[f], jp.maximum(facenum[f], 1)
    start = jp.argmax((ids == b) & (k < cnt))
    walk = ids[(start + k) % cnt]
    keep = prune_to_four(lax.stop_gradient(verts2[walk]), cnt)
    pick = walk[keep]
    real = jp.arange(NCON) < cnt
    below_centre = (w[pick] - pos2) @ n <= 0
    ok = real & (depth[pick] <= margin) & ((jp.arange(NCON) == 0) | below_centre)
    ok = ok & (depth[b] <= margin)
    dist = depth[pick]
    pos = w[pick] - 0.5 * dist[:, None] * n
    normal = jp.broadcast_to(n, (NCON, 3))
    return dist, pos, normal, jp.zeros_like(pos), ok


plane_mesh.NCON = NCON
plane_mesh.MESH = (False, True)
plane_mesh.POLY = True

"""MuJoCo 4.0's plane-mesh collider: up to four hull vertices of one hull polygon.

Measured against mujoco 4.0.0 (``tests/test_hfield_collision.py``), not read from the public
source (whose ``mjc_PlaneConvex`` walks the support vertex's graph neighbours, three at most:
4.0 does not). The rule that reproduces 4.0 exactly on the pebble (icosphere) and rock hulls:

* the deepest vertex ``b`` along the plane's -normal (first index on ties); no contact when
  its signed distance exceeds the margin;
* of the hull polygons (``mesh_poly*``) that contain ``b``, the one whose outward normal is
  most aligned with the plane's -normal;
* its corners, walked in polygon order starting at ``b``, keeping those whose signed
  distance is at most the margin, until four are kept.

Each contact sits on its vertex: ``dist`` is the vertex's signed distance to the plane,
``pos`` the vertex moved by ``-dist / 2`` along the plane normal (halfway to the plane),
the normal is the plane's. A polygon with five or more corners below the plane is where 4.0
sometimes keeps another subset (see the acceptance figures): not established.
"""

from __future__ import annotations

import jax.numpy as jp

from mjx_lite.collision import multiccd
from mjx_lite.types import GeomType

NCON = 4
_G = GeomType


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
    b = jp.argmin(depth)
    face, facenum, pnormal = multiccd.faces_at(table2, b)
    K = face.shape[1]
    k = jp.arange(K)
    corner = k[None] < facenum[:, None]
    has_b = jp.any(corner & (face == b), axis=1)
    cos = pnormal.astype(n.dtype) @ (mat2.T @ -n)
    f = jp.argmax(jp.where(has_b & (facenum > 0), cos, -2.0))
    ids, cnt = face[f], jp.maximum(facenum[f], 1)
    start = jp.argmax((ids == b) & (k < cnt))
    walk = ids[(start + k) % cnt]
    below = (k < cnt) & (depth[walk] <= margin)
    rank = jp.cumsum(below) - 1
    slot = jp.where(below & (rank < NCON), rank, NCON)
    pick = jp.zeros(NCON, walk.dtype).at[slot].set(walk, mode="drop")
    ok = jp.zeros(NCON, bool).at[slot].set(True, mode="drop")
    dist = depth[pick]
    pos = w[pick] - 0.5 * dist[:, None] * n
    ok = ok & (depth[b] <= margin)
    normal = jp.broadcast_to(n, (NCON, 3))
    return dist, pos, normal, jp.zeros_like(pos), ok


plane_mesh.NCON = NCON
plane_mesh.MESH = (False, True)
plane_mesh.POLY = True

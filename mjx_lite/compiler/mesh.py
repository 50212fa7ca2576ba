"""Mesh assets: file loading, MuJoCo's mesh processing, mass properties and primitive fitting.

Follows the MJCF reference, asset/mesh ("The full list of processing steps applied by the
compiler to each mesh") and geom/mesh, geom/fitscale, compiler/fitaabb, as MuJoCo 4.0 behaves:

* STL is binary only (MuJoCo 4.0 rejects ASCII STL); its repeated vertices are merged, keeping the
  first occurrence's order. OBJ and MSH vertices are kept as given.
* OBJ polygons are triangulated as tinyobjloader does for MuJoCo: quads split along the shorter
  diagonal, larger polygons by ear clipping (a fan for convex ones); only the first object/group
  contributes faces. A negative scale product re-winds all faces (MuJoCo 4.0: XML faces too).
* Vertex coordinates are single precision in the asset and double precision in the compiler.
* inertia="legacy" (MuJoCo 4.0's default) | "convex" | "exact" | "shell": 4.0 moved shell inertia
  onto the mesh asset (a mesh geom with shellinertia="true" is an error).
"""

from __future__ import annotations

import dataclasses
import os
import re

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from mjx_lite.errors import MJCFError

_MINVAL = 1e-15  # mjMINVAL
_EPS = 1e-14  # mjEPS
# Stopping and sorting tolerance of the compiler's Jacobi eigensolver, relative to the largest
# diagonal entry of the input matrix. MuJoCo 4.0 replaced 3.x's absolute 1e-12 tests with a
# scale-free rule; we inferred this one from its outputs (it reproduces every one of 400 random
# meshes' frames bit for bit), not from its source.
_EIG_REL = 1e-7
_STL_MAXFACE = 200000
INERTIA_TYPES = ("convex", "exact", "legacy", "shell")

# geom types (mjtGeom) that can be fitted to a mesh
_SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX = 2, 3, 4, 5, 6


@dataclasses.dataclass(frozen=True)
class MeshResult:
    """One compiled mesh, in MuJoCo's storage conventions.

    Fields:
      vert: (nvert, 3) float32 mesh_vert: scaled, re-referenced, centred at the centre of mass
        and rotated to the principal axes of inertia.
      vert64: (nvert, 3) float64 the same vertices before the float32 cast (what MuJoCo's compiler
        uses for aabb, fitting and geom sizes).
      face: (nface, 3) int32 mesh_face (the convex hull's faces when the asset has none).
      pos: (3,) mesh_pos, the centre of mass in the asset frame after scale, refpos, refquat.
      quat: (4,) mesh_quat, the principal axes in that same frame.
      scale: (3,) mesh_scale.
      inertia_type: 'legacy' | 'convex' | 'exact' | 'shell'.
      volume: volume (surface area for 'shell') used for geom mass: mass = density * volume.
      area: total surface area of the faces.
      inertia: (3,) principal inertia at unit density, decreasing (eigenvalues).
      boxsz: (3,) half-sizes of the equivalent inertia box.
      aamm: (6,) axis-aligned bounds of vert64: (xmin, ymin, zmin, xmax, ymax, zmax).
      hull_vert: (nhullvert,) int32 ids of the convex-hull vertices in vert.
      hull_face: (nhullface, 3) int32 outward-oriented hull triangles, ids into vert.
      hull_edge: (nhulledge, 2) int32 unique hull edges (i < j), ids into vert.
    """

    vert: np.ndarray
    vert64: np.ndarray
    face: np.ndarray
    pos: np.ndarray
    quat: np.ndarray
    scale: np.ndarray
    inertia_type: str
    volume: float
    area: float
    inertia: np.ndarray
    boxsz: np.ndarray
    aamm: np.ndarray
    hull_vert: np.ndarray
    hull_face: np.ndarray
    hull_edge: np.ndarray

    def hull_volume(self) -> float:
        """Volume enclosed by the convex hull (divergence theorem over hull_face)."""
        v = self.vert64[self.hull_face]
        return float(np.einsum("ij,ij->i", v[:, 0], np.cross(v[:, 1], v[:, 2])).sum() / 6)


# ---------------------------------------------------------------------------------------------
# file readers


def _content_type(filename: str, content_type: str | None, where: str) -> str:
    if content_type:
        ct = content_type.split(";")[0].strip().lower()
        if ct not in ("model/stl", "model/obj", "model/vnd.mujoco.msh"):
            raise MJCFError(f"{where} unsupported mesh content type '{content_type}'")
        return ct
    ext = os.path.splitext(filename)[1].lower()
    table = {".stl": "model/stl", ".obj": "model/obj", ".msh": "model/vnd.mujoco.msh"}
    if ext not in table:
        raise MJCFError(f"{where} unknown or unsupported mesh file '{filename}' (stl, obj, msh)")
    return table[ext]


def _dedupe(vert: np.ndarray, face: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # MuJoCo merges bit-equal float vertices (+0 and -0 compare equal) and numbers them in
    # order of first occurrence.
    key = np.ascontiguousarray(vert + np.float32(0)).view(np.dtype((np.void, 12))).reshape(-1)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return vert[first[order]], rank[inverse.reshape(-1)][face].astype(np.int32)


def _read_stl(data: bytes, filename: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    hint = "; perhaps this is an ASCII file? (MuJoCo 4.0 reads binary STL only)"
    if len(data) < 84:
        raise MJCFError(f"{where} invalid header in STL file '{filename}'{hint}")
    nface = int(np.frombuffer(data[80:84], "<i4")[0])
    if nface < 1 or nface > _STL_MAXFACE:
        raise MJCFError(
            f"{where} number of faces should be between 1 and {_STL_MAXFACE} in STL file "
            f"'{filename}'{hint}"
        )
    if nface * 50 != len(data) - 84:
        raise MJCFError(f"{where} STL file '{filename}' has wrong size{hint}")
    rec = np.frombuffer(data[84:], np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")]))
    vert = rec["v"].reshape(-1, 3).astype(np.float32)
    if not np.all(np.isfinite(vert)):
        raise MJCFError(f"{where} STL file '{filename}' has a vertex coordinate that is not finite")
    if np.any(np.abs(vert) > 2.0**30):
        raise MJCFError(f"{where} vertex in STL file '{filename}' exceeds maximum bounds")
    face = np.arange(3 * nface, dtype=np.int32).reshape(nface, 3)
    return _dedupe(vert, face)


def _read_msh(data: bytes, filename: str, where: str) -> tuple[np.ndarray, np.ndarray | None]:
    if len(data) < 16:
        raise MJCFError(f"{where} missing header in MSH file '{filename}'")
    nv, nn, nt, nf = (int(x) for x in np.frombuffer(data[:16], "<i4"))
    if nv < 4 or nf < 0 or nn < 0 or nt < 0 or (nn and nn != nv) or (nt and nt != nv):
        raise MJCFError(f"{where} invalid sizes in MSH file '{filename}'")
    if len(data) != 16 + 12 * (nv + nn + nf) + 8 * nt:
        raise MJCFError(f"{where} unexpected file size in MSH file '{filename}'")
    vert = np.frombuffer(data, "<f4", 3 * nv, 16).reshape(nv, 3).astype(np.float32)
    off = 16 + 12 * (nv + nn) + 8 * nt
    face = np.frombuffer(data, "<i4", 3 * nf, off).reshape(nf, 3).astype(np.int32) if nf else None
    return vert, face


def _pnpoly(px: np.ndarray, py: np.ndarray, x: float, y: float) -> bool:
    inside = False
    j = len(px) - 1
    for i in range(len(px)):
        if (py[i] > y) != (py[j] > y) and x < (px[j] - px[i]) * (y - py[i]) / (py[j] - py[i]) + px[
            i
        ]:
            inside = not inside
        j = i
    return inside


def _triangulate(poly: list[int], vert: np.ndarray) -> list[tuple[int, int, int]]:
    """Splits one OBJ polygon into triangles the way tinyobjloader does for MuJoCo."""
    n = len(poly)
    if n < 3:
        return []
    if n == 3:
        return [tuple(poly)]
    if n == 4:
        v = vert[poly].astype(np.float64)
        d02 = float(np.sum((v[2] - v[0]) ** 2))
        d13 = float(np.sum((v[3] - v[1]) ** 2))
        a, b, c, d = poly
        return [(a, b, c), (a, c, d)] if d02 < d13 else [(a, b, d), (b, c, d)]
    # ear clipping in the coordinate plane that best faces the polygon's first clear corner
    axes = (1, 2)
    for k in range(n):
        v0, v1, v2 = (vert[poly[(k + i) % n]].astype(np.float64) for i in range(3))
        cr = np.cross(v1 - v0, v2 - v1)
        if np.any(np.abs(cr) > 1e-4):
            cx, cy, cz = np.abs(cr)
            if not (cx > cy and cx > cz):
                axes = (0, 1) if (cz > cx and cz > cy) else (0, 2)
            break
    p2 = vert[:, list(axes)].astype(np.float64)
    ring = list(poly)
    xy = p2[ring]
    area = 0.5 * float(np.sum(xy[:, 0] * np.roll(xy[:, 1], -1) - np.roll(xy[:, 0], -1) * xy[:, 1]))
    tris = []
    guess, rounds = 0, 10
    while len(ring) > 3 and rounds > 0:
        m = len(ring)
        if guess >= m:
            rounds -= 1
            guess -= m
        ind = [ring[(guess + k) % m] for k in range(3)]
        tx, ty = p2[ind, 0], p2[ind, 1]
        e0 = (tx[1] - tx[0], ty[1] - ty[0])
        e1 = (tx[2] - tx[1], ty[2] - ty[1])
        if (e0[0] * e1[1] - e0[1] * e1[0]) * area < 0:  # reflex corner: not an ear
            guess += 1
            continue
        if any(
            _pnpoly(tx, ty, *p2[ring[(guess + k) % m]]) for k in range(3, m)
        ):  # another vertex inside the candidate ear
            guess += 1
            continue
        tris.append(tuple(ind))
        del ring[(guess + 1) % m]
    if len(ring) == 3:
        tris.append(tuple(ring))
    return tris


def _obj_index(token: str, nvert: int, where: str) -> int:
    # negative indices count back from the vertices read so far; positive ones are checked
    # once the whole file is read (a face may precede its vertices)
    idx = int(token.split("/")[0])
    if idx == 0 or idx + nvert < 0:
        raise MJCFError(f"{where} OBJ face refers to missing vertex {token}")
    return idx + nvert if idx < 0 else idx - 1


def _read_obj(data: bytes, filename: str, where: str) -> tuple[np.ndarray, np.ndarray | None]:
    text = data.decode("utf-8", errors="replace").replace("\\\r\n", " ").replace("\\\n", " ")
    verts: list[list[float]] = []
    polys: list[list[int]] = []
    shape_closed = False
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        tok = line.split()
        if tok[0] == "v":
            try:
                verts.append([float(t) for t in tok[1:4]])
            except ValueError:
                raise MJCFError(f"{where} could not parse OBJ vertex '{line}'") from None
            if len(verts[-1]) != 3:
                raise MJCFError(f"{where} OBJ vertex with fewer than 3 coordinates: '{line}'")
        elif tok[0] == "f" and not shape_closed:
            try:
                polys.append([_obj_index(t, len(verts), where) for t in tok[1:]])
            except MJCFError:
                raise
            except ValueError:
                raise MJCFError(f"{where} could not parse OBJ face '{line}'") from None
        elif tok[0] in ("o", "g") and polys:
            # tinyobjloader starts a new shape here; MuJoCo reads faces of the first shape only
            shape_closed = True
    if not verts:
        raise MJCFError(f"{where} OBJ file '{filename}' has no vertices")
    if any(i >= len(verts) for p in polys for i in p):
        raise MJCFError(f"{where} OBJ file '{filename}' has a face with a missing vertex")
    vert = np.asarray(verts, np.float64).astype(np.float32)
    if not np.all(np.isfinite(vert)):
        raise MJCFError(f"{where} OBJ file '{filename}' has a vertex coordinate that is not finite")
    tris = [t for p in polys for t in _triangulate(p, vert)]
    face = np.asarray(tris, np.int32).reshape(-1, 3) if tris else None
    return vert, face


def read_mesh_file(
    data: bytes,
    filename: str,
    content_type: str | None,
    where: str,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Reads a mesh file: binary STL, OBJ or MuJoCo's MSH (asset/mesh, "Legacy MSH file format").

    Args:
      data: the file's bytes.
      filename: its name; the extension picks the format unless content_type is given
        ('model/stl', 'model/obj', 'model/vnd.mujoco.msh').
      where: location prefix for error messages.

    Returns:
      vert: (n, 3) float32 vertex positions (STL: repeated vertices merged).
      face: (m, 3) int32 triangles, or None when the file has none (MSH with nface = 0).
    """
    kind = _content_type(filename, content_type, where)
    if kind == "model/stl":
        vert, face = _read_stl(data, filename, where)
    elif kind == "model/obj":
        vert, face = _read_obj(data, filename, where)
    else:
        vert, face = _read_msh(data, filename, where)
    return vert, face


# ---------------------------------------------------------------------------------------------
# arithmetic in MuJoCo's operation order
#
# The principal frame comes out of an iterative Jacobi solver whose stopping tests compare tiny
# off-diagonal entries; reproducing MuJoCo's rounding (same operation order, sequential sums)
# keeps mesh_quat and mesh_vert equal to MuJoCo's to ~1e-15 instead of ~1e-7.


def _seqsum(x: np.ndarray) -> np.ndarray:
    """Left-to-right sum over axis 0 (numpy's sum is pairwise)."""
    return np.cumsum(x, axis=0)[-1] if len(x) else np.zeros(x.shape[1:])


def _dot3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _cross(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.stack(
        [
            b[..., 1] * c[..., 2] - b[..., 2] * c[..., 1],
            b[..., 2] * c[..., 0] - b[..., 0] * c[..., 2],
            b[..., 0] * c[..., 1] - b[..., 1] * c[..., 0],
        ],
        axis=-1,
    )


def _normvec(v: list[float]) -> list[float]:
    nrm = 0.0
    for x in v:
        nrm += x * x
    if nrm < _EPS:
        return v
    nrm = nrm**0.5
    if abs(nrm - 1) > _EPS:
        return [x / nrm for x in v]
    return v


def _quat2mat(q) -> list[float]:
    """Row-major 3x3 rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = (float(a) for a in q)
    if w == 1 and x == 0 and y == 0 and z == 0:
        return [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    q00, q01, q02, q03 = w * w, w * x, w * y, w * z
    q11, q12, q13, q22, q23, q33 = x * x, x * y, x * z, y * y, y * z, z * z
    return [
        q00 + q11 - q22 - q33, 2 * (q12 - q03), 2 * (q13 + q02),
        2 * (q12 + q03), q00 - q11 + q22 - q33, 2 * (q23 - q01),
        2 * (q13 - q02), 2 * (q23 + q01), q00 - q11 - q22 + q33,
    ]  # fmt: skip


def _mulquat(a, b) -> list[float]:
    return _normvec(
        [
            a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
            a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
            a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
            a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
        ]
    )


def _mulmat(a: list[float], b: list[float]) -> list[float]:
    return [
        a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j]
        for i in range(3)
        for j in range(3)
    ]


def _matvec(m: list[float], v: np.ndarray, transpose: bool = False) -> np.ndarray:
    """m @ v (or m.T @ v) for each row v of an (n, 3) array."""
    if transpose:
        m = [m[0], m[3], m[6], m[1], m[4], m[7], m[2], m[5], m[8]]
    return np.stack(
        [m[3 * i] * v[:, 0] + m[3 * i + 1] * v[:, 1] + m[3 * i + 2] * v[:, 2] for i in range(3)],
        axis=1,
    )


def eig3(mat) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of a symmetric 3x3 matrix as MuJoCo's compiler does it.

    Jacobi rotations accumulated in a quaternion, then eigenvalues sorted in decreasing order by
    quarter turns, so the returned quaternion (w, x, y, z) is the one MuJoCo stores in mesh_quat,
    not merely an equivalent frame. Eigenvalues equal to within the tolerance keep their order, as
    in MuJoCo 4.0 (so a nearly isotropic mesh keeps the identity frame). MuJoCo's fullinertia path
    stops differently; use this for meshes only.

    Returns:
      (eigval (3,), quat (4,)) with mat = R(quat) diag(eigval) R(quat)^T.
    """
    m = [float(x) for x in np.asarray(mat, np.float64).reshape(9)]
    tol = _EIG_REL * max(abs(m[0]), abs(m[4]), abs(m[8]))
    quat = [1.0, 0.0, 0.0, 0.0]
    eigval = [m[0], m[4], m[8]]
    for _ in range(500):
        r = _quat2mat(quat)
        rt = [r[0], r[3], r[6], r[1], r[4], r[7], r[2], r[5], r[8]]
        d = _mulmat(_mulmat(rt, m), r)
        eigval = [d[0], d[4], d[8]]
        if abs(d[1]) > abs(d[2]) and abs(d[1]) > abs(d[5]):
            rk, ck, rotk = 0, 1, 2
        elif abs(d[2]) > abs(d[5]):
            rk, ck, rotk = 0, 2, 1
        else:
            rk, ck, rotk = 1, 2, 0
        off = d[3 * rk + ck]
        if abs(off) < tol:
            break
        tau = (d[4 * ck] - d[4 * rk]) / (2 * off)
        if tau >= 0:
            t = 1.0 / (tau + (1 + tau * tau) ** 0.5)
        else:
            t = -1.0 / (-tau + (1 + tau * tau) ** 0.5)
        c = 1.0 / (1 + t * t) ** 0.5
        # the Givens rotation in the (rk, ck) plane, as a quaternion about axis rotk; the half
        # angle's sine from t (not sqrt((1 - c)/2)) stays accurate for tiny rotations, as 4.0's
        # results require
        s = abs(t) * c / (2 * (1 + c)) ** 0.5
        half = -s if tau >= 0 else s
        if rotk == 1:
            half = -half
        step = [0.0, 0.0, 0.0, 0.0]
        step[rotk + 1] = half
        step[0] = (1.0 - half * half) ** 0.5
        quat = _normvec(_mulquat(quat, _normvec(step)))
    # bubble sort (0, 1, 0) into decreasing order, each swap a quarter turn about the third axis
    for j in range(3):
        j1 = j % 2
        if eigval[j1] + tol < eigval[j1 + 1]:
            eigval[j1], eigval[j1 + 1] = eigval[j1 + 1], eigval[j1]
            step = [0.707106781186548, 0.0, 0.0, 0.0]
            step[(j1 + 2) % 3 + 1] = step[0]
            quat = _normvec(_mulquat(quat, step))
    return np.array(eigval), np.array(quat)


# ---------------------------------------------------------------------------------------------
# processing


def _triangles(v: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-triangle area, unit normal and centroid; degenerate triangles get area 0."""
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    cen = (a + b + c) / 3
    nrm = _cross(b - a, c - a)
    length = np.sqrt(_dot3(nrm, nrm))
    ok = length >= _MINVAL
    unit = np.where(ok[:, None], nrm / np.where(ok, length, 1)[:, None], nrm)
    return np.where(ok, 0.5 * length, 0.0), unit, cen


def _hull(vert: np.ndarray, maxhullvert: int, where: str):
    # qhull's TA counts vertices added after the initial simplex; MuJoCo 4.0 adds Q9 (furthest
    # of the furthest points) for coarse hulls, which picks different vertices than 3.x did
    opts = "Qt" if maxhullvert < 0 else f"Qt Q9 TA{maxhullvert - 4}"
    try:
        hull = ConvexHull(vert, qhull_options=opts)
    except (QhullError, ValueError) as e:
        if np.linalg.matrix_rank(vert - vert.mean(0), tol=1e-12 * np.abs(vert).max()) < 3:
            raise MJCFError(
                f"{where} mesh has coplanar vertices, cannot compute convex hull. Consider "
                "using a primitive geom type (plane or thin box) instead"
            ) from None
        raise MJCFError(f"{where} qhull error: {str(e).splitlines()[0]}") from None
    face = hull.simplices.astype(np.int32)
    v = vert[face]
    nrm = np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0])
    flip = np.einsum("ij,ij->i", nrm, hull.equations[:, :3]) < 0
    face[flip] = face[flip][:, [0, 2, 1]]
    ids = np.unique(face).astype(np.int32)
    edges = np.sort(face[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    return ids, face, np.unique(edges, axis=0).astype(np.int32)


def _second_moments(vc: np.ndarray, f: np.ndarray, w: np.ndarray, denom: float) -> np.ndarray:
    """Accumulated products of inertia P (xx, yy, zz, xy, xz, yz) of pyramids / shell triangles."""
    d, e, g = vc[f[:, 0]], vc[f[:, 1]], vc[f[:, 2]]
    terms = []
    for a, b in ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)):
        t = 2 * (d[:, a] * d[:, b] + e[:, a] * e[:, b] + g[:, a] * g[:, b])
        t = t + d[:, a] * e[:, b] + d[:, b] * e[:, a] + d[:, a] * g[:, b] + d[:, b] * g[:, a]
        t = t + e[:, a] * g[:, b] + e[:, b] * g[:, a]
        terms.append(w / denom * t)
    return _seqsum(np.stack(terms, axis=1))


def compile_mesh(
    vert,
    face,
    *,
    scale=(1.0, 1.0, 1.0),
    refpos=(0.0, 0.0, 0.0),
    refquat=(1.0, 0.0, 0.0, 0.0),
    maxhullvert: int = -1,
    inertia: str = "legacy",
    need_hull: bool = True,
    where: str = "",
) -> MeshResult:
    """Processes one mesh as MuJoCo's compiler does (asset/mesh, the processing steps).

    Args:
      vert: (n, 3) or flat vertex positions (file or vertex attribute); rounded to float32 first,
        as MuJoCo stores user vertices in single precision.
      face: (m, 3) or flat triangles, or None/empty: faces become the convex hull's.
      scale, refpos, refquat: the mesh attributes; a vertex v becomes
        scale * R(refquat)^T (v - refpos).
      maxhullvert: -1 (no limit) or > 3: qhull stops after that many hull vertices.
      inertia: 'legacy' (default in MuJoCo 4.0) | 'convex' | 'exact' | 'shell'.
      need_hull: False when no collision geom uses the mesh (MuJoCo then skips qhull, so a
        flat shell mesh compiles); the hull is still built when the mesh has no faces or uses
        inertia="convex". hull_* are empty when it is skipped.
      where: location prefix for error messages.
    """
    if inertia not in INERTIA_TYPES:
        raise MJCFError(f"{where} mesh inertia must be one of {INERTIA_TYPES}, got '{inertia}'")
    if maxhullvert != -1 and maxhullvert < 4:
        raise MJCFError(f"{where} maxhullvert must be larger than 3")
    raw = np.asarray(vert, np.float64).reshape(-1)
    if raw.size % 3:
        raise MJCFError(f"{where} vertex data must be a multiple of 3")
    v = raw.astype(np.float32).astype(np.float64).reshape(-1, 3)
    if not np.all(np.isfinite(v)):
        raise MJCFError(f"{where} vertex coordinate is not finite")
    if len(v) < 4:
        raise MJCFError(f"{where} at least 4 vertices required")
    nvert = len(v)
    f = None if face is None else np.asarray(face, np.int64).reshape(-1)
    if f is not None and f.size:
        if f.size % 3:
            raise MJCFError(f"{where} face data must be a multiple of 3")
        bad = np.flatnonzero((f < 0) | (f >= nvert))
        if bad.size:
            raise MJCFError(
                f"{where} in face {bad[0] // 3}, vertex index {f[bad[0]]} does not exist"
            )
        f = f.reshape(-1, 3).astype(np.int32)
    else:
        f = None

    if inertia == "exact" and f is not None:
        # a directed edge used twice means two neighbouring faces disagree on orientation
        area0, _, _ = _triangles(v, f)
        good = f[area0 > np.sqrt(_MINVAL)]
        he = good[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2)
        uniq, count = np.unique(he, axis=0, return_counts=True)
        if np.any(count > 1):
            a, b = uniq[np.argmax(count > 1)] + 1
            raise MJCFError(
                f"{where} faces of mesh have inconsistent orientation. Please check the faces "
                f"containing the vertices {a} and {b}."
            )

    # MuJoCo builds the hull on the vertices before scale/refpos/refquat are applied
    if need_hull or f is None or inertia == "convex":
        hull_vert, hull_face, hull_edge = _hull(v, maxhullvert, where)
    else:
        hull_vert = np.zeros(0, np.int32)
        hull_face = np.zeros((0, 3), np.int32)
        hull_edge = np.zeros((0, 2), np.int32)
    if f is None:
        f = hull_face.copy()
    scale = np.asarray(scale, np.float64).reshape(3)
    if np.prod(scale) < 0:
        # a mirroring scale would turn faces inward; MuJoCo 4.0 re-winds every face (file, XML
        # and hull alike) so that volumes stay positive
        f = f[:, [0, 2, 1]].copy()
        hull_face = hull_face[:, [0, 2, 1]].copy()

    refpos = np.asarray(refpos, np.float64).reshape(3)
    if np.any(refpos != 0):
        v = v - refpos
    refquat = [float(x) for x in np.asarray(refquat, np.float64).reshape(4)]
    if refquat != [1.0, 0.0, 0.0, 0.0]:
        v = _matvec(_quat2mat(_normvec(refquat)), v, transpose=True)
    if np.any(scale != 1):
        v = v * scale

    area, nrm, cen = _triangles(v, f)
    total_area = float(_seqsum(area))
    if total_area < _MINVAL:
        raise MJCFError(f"{where} mesh surface area is too small")
    facecen = _seqsum(area[:, None] * cen) / total_area

    # centre of mass of the pyramids with apex at facecen (MuJoCo weights shells the same way)
    pf = hull_face if inertia == "convex" else f
    if inertia == "shell":
        w, pcen = area, cen
    else:
        parea, pnrm, pcen = (area, nrm, cen) if pf is f else _triangles(v, pf)
        w = _dot3(pcen - facecen, pnrm) * parea / 3
        if inertia == "legacy":
            w = np.abs(w)
    wsum = float(_seqsum(w))
    if inertia == "shell":
        if wsum < _MINVAL:
            raise MJCFError(f"{where} mesh surface area is too small")
    elif wsum < _MINVAL:
        if wsum < 0:
            raise MJCFError(f"{where} mesh volume is negative (misoriented triangles)")
        raise MJCFError(f"{where} mesh volume is too small. Try setting inertia to shell")
    com = _seqsum(w[:, None] * (pcen * 3.0 / 4.0 + facecen / 4.0)) / wsum

    # second moments about the centre of mass, pyramids now with apex at the centre of mass
    vc = v - com
    parea, pnrm, pcen = _triangles(vc, pf)
    if inertia == "shell":
        wt, denom = parea, 12.0
    else:
        wt, denom = _dot3(pcen, pnrm) * parea / 3, 20.0
        if inertia == "legacy":
            wt = np.abs(wt)
    total = float(_seqsum(wt))
    p = _second_moments(vc, pf, wt, denom)
    full = [p[1] + p[2], -p[3], -p[4], -p[3], p[0] + p[2], -p[5], -p[4], -p[5], p[0] + p[1]]
    eigval, quat = eig3(full)
    if eigval[2] <= 0:
        raise MJCFError(f"{where} eigenvalue of mesh inertia must be positive")
    rtol, atol = 1e-6, 1e-9
    e0, e1, e2 = eigval
    if (
        e0 + e1 < e2 * (1 - rtol) - atol
        or e0 + e2 < e1 * (1 - rtol) - atol
        or e1 + e2 < e0 * (1 - rtol) - atol
    ):
        raise MJCFError(f"{where} eigenvalues of mesh inertia violate A + B >= C")
    boxsz = 0.5 * np.sqrt(6 * np.array([e1 + e2 - e0, e0 + e2 - e1, e0 + e1 - e2]) / total)
    conj = [quat[0], -quat[1], -quat[2], -quat[3]]
    v_final = _matvec(_quat2mat(conj), vc)
    aamm = np.concatenate([v_final.min(0), v_final.max(0)])
    return MeshResult(
        vert=v_final.astype(np.float32),
        vert64=v_final,
        face=f.astype(np.int32),
        pos=com,
        quat=quat,
        scale=scale.copy(),
        inertia_type=inertia,
        volume=total,
        area=float(total_area),
        inertia=eigval,
        boxsz=boxsz,
        aamm=aamm,
        hull_vert=hull_vert,
        hull_face=hull_face,
        hull_edge=hull_edge,
    )


# ---------------------------------------------------------------------------------------------
# geoms that use a mesh


def mesh_geom_mass_inertia(
    mesh: MeshResult,
    density: float,
    mass: float | None,
    shellinertia: bool,
    where: str,
) -> tuple[float, np.ndarray]:
    """Mass and principal inertia of a mesh geom (geom mass/density; mesh frame, diagonal).

    The inertia is that of the mesh's equivalent inertia box, so it equals
    mass * mesh.inertia / mesh.volume; its frame is (mesh.pos, mesh.quat) in the asset frame.

    Args:
      density: the geom's density (mass per volume, or per area for an inertia="shell" mesh).
      mass: the geom's mass attribute, or None when unspecified (then density is used).
      shellinertia: the geom attribute; MuJoCo 4.0 rejects it on mesh geoms (shell inertia is
        the mesh asset's inertia="shell").
    """
    if shellinertia:
        raise MJCFError(f"{where} for mesh geoms, inertia should be specified in the mesh asset")
    vol = mesh.volume
    if mass is not None:
        if mass == 0:
            return 0.0, np.zeros(3)
        if vol <= _EPS:
            # MuJoCo leaves such a geom massless rather than dividing by a vanishing volume
            return 0.0, np.zeros(3)
        m = float(mass)
    elif density == 0:
        return 0.0, np.zeros(3)
    else:
        m = float(density) * vol
    b2 = mesh.boxsz**2
    inertia = m * np.array([b2[1] + b2[2], b2[0] + b2[2], b2[0] + b2[1]]) / 3
    if m < 0 or np.any(inertia < 0) or (mass is None and density < 0):
        raise MJCFError(f"{where} mass, inertia or density are negative in geom")
    return m, inertia


def fit_primitive(
    mesh: MeshResult,
    geom_type: int,
    fitscale: float = 1.0,
    fitaabb: bool = False,
    size=None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fits a primitive geom to a mesh (geom/mesh with a primitive type, compiler/fitaabb).

    Args:
      geom_type: mjtGeom value: sphere 2, capsule 3, ellipsoid 4, cylinder 5, box 6.
      fitscale: the geom's fitscale.
      fitaabb: the compiler's fitaabb: fit the mesh's bounding box instead of its equivalent
        inertia box.
      size: (3,) the geom's parsed size; entries the primitive does not use are kept (and, as in
        MuJoCo, multiplied by fitscale). Zeros when None.

    Returns:
      size: (3,) geom_size.
      pos: (3,) offset in the asset frame: the geom's pos becomes pos + R(geom quat) @ offset.
      quat: (4,) mesh_quat: the geom's quat becomes geom quat * quat.
    """
    out = np.zeros(3) if size is None else np.asarray(size, np.float64).copy()
    pos = mesh.pos.copy()
    if not fitaabb:
        b = mesh.boxsz
        if geom_type == _SPHERE:
            out[0] = b.sum() / 3
        elif geom_type == _CAPSULE:
            out[0] = (b[0] + b[1]) / 2
            out[1] = max(0.0, b[2] - out[0] / 2)
        elif geom_type == _CYLINDER:
            out[0] = (b[0] + b[1]) / 2
            out[1] = b[2]
        elif geom_type in (_ELLIPSOID, _BOX):
            out[:] = b
        else:
            raise MJCFError(f"invalid geom type {geom_type} in fitting mesh")
    else:
        # MuJoCo 4.0 fits every primitive to the bounding box itself (3.x measured vertex
        # distances for spheres, capsules and cylinders) and places it at the box centre
        lo, hi = mesh.aamm[:3], mesh.aamm[3:]
        cen = (lo + hi) / 2
        half = hi - cen
        pos = pos + _matvec(_quat2mat(mesh.quat), cen[None])[0]
        if geom_type == _SPHERE:
            out[0] = half.max()
        elif geom_type == _CAPSULE:
            out[0] = max(half[0], half[1])
            out[1] = max(0.0, half[2] - out[0])
        elif geom_type == _CYLINDER:
            out[0] = max(half[0], half[1])
            out[1] = half[2]
        elif geom_type in (_ELLIPSOID, _BOX):
            out[:] = half
        else:
            raise MJCFError(f"invalid geom type {geom_type} in fitting mesh")
    return out * fitscale, pos, mesh.quat.copy()


def mesh_geom_size(mesh: MeshResult) -> np.ndarray:
    """geom_size of a mesh geom: the largest |coordinate| per axis of the processed vertices."""
    return np.maximum(np.abs(mesh.aamm[:3]), np.abs(mesh.aamm[3:]))


def mesh_geom_aabb(mesh: MeshResult) -> np.ndarray:
    """geom_aabb (centre, half-size) of a mesh geom in the geom frame."""
    lo, hi = mesh.aamm[:3], mesh.aamm[3:]
    return np.concatenate([(hi + lo) / 2, (hi - lo) / 2])


_NAME_RE = re.compile(r"[\\/]")


def default_mesh_name(filename: str) -> str:
    """A mesh without a name takes its file's name without path or extension (asset/mesh)."""
    base = _NAME_RE.split(filename)[-1]
    return base[: base.rfind(".")] if "." in base else base


def mesh_graph(result: MeshResult) -> np.ndarray:
    """The convex hull as MuJoCo's ``mesh_graph`` record (empty when no hull was built).

    Layout: numvert, numface, vert_edgeadr (numvert), vert_globalid (numvert), edge_localid
    (each hull vertex's neighbours as local ids, every list ended by -1: numvert + 3 numface
    entries), face_globalid (3 numface). Collision uses it to find the hull neighbours of a
    support vertex (plane-mesh extra contacts). Neighbour order follows the hull faces, which
    may differ from MuJoCo's qhull traversal order.
    """
    ids, face = result.hull_vert, result.hull_face
    if len(ids) == 0:
        return np.zeros(0, np.int32)
    local = {int(g): i for i, g in enumerate(ids)}
    nbrs: list[list[int]] = [[] for _ in ids]
    for a, b in np.asarray(result.hull_edge).tolist():
        nbrs[local[a]].append(local[b])
        nbrs[local[b]].append(local[a])
    adr, edges = [], []
    for lst in nbrs:
        adr.append(len(edges))  # into edge_localid
        edges.extend(sorted(lst) + [-1])
    out = [len(ids), len(face), *adr, *ids.tolist(), *edges, *face.reshape(-1).tolist()]
    return np.asarray(out, np.int32)


# MuJoCo merges hull triangles into one polygon when their unit normals' dot exceeds this
_POLY_COS = 0.99999872


def mesh_polygons(result: MeshResult) -> tuple[np.ndarray, list[np.ndarray]]:
    """The convex hull's faces merged into polygons, as MuJoCo's ``mesh_poly*`` describe them.

    Hull triangles whose normals agree within ``_POLY_COS`` (dot of unit normals) form one
    group; each connected part of a group's boundary is one polygon, traced counter-clockwise
    seen from outside; its normal is the normal of the group's first triangle. Polygons are
    ordered by normal (x, then y, then z, decreasing), the order of MuJoCo's polygon set.

    MuJoCo finds a triangle's group with a tolerance comparator inside a ``std::set``, which is
    not a strict weak order: it sometimes misses the group and splits one flat face in two
    (a dodecahedron's pentagon as a quad and a triangle). We search every group, so such a
    face stays whole here; tests/model_parity.py compares polygons plane by plane for that.

    Returns:
      normals: (npoly, 3) unit outward normals in the mesh frame.
      polys: npoly int32 arrays of vertex ids (ids into ``vert``).
    """
    face = np.asarray(result.hull_face)
    if len(result.hull_vert) == 0 or len(face) == 0:
        return np.zeros((0, 3)), []
    v = result.vert64
    n = np.cross(v[face[:, 1]] - v[face[:, 0]], v[face[:, 2]] - v[face[:, 0]])
    ln = np.linalg.norm(n, axis=1, keepdims=True)
    n = n / np.where(ln > _MINVAL, ln, 1.0)
    gnormal: list[np.ndarray] = []
    gfaces: list[list[int]] = []
    for i, ni in enumerate(n):
        for g, ng in enumerate(gnormal):
            if ng @ ni > _POLY_COS:
                gfaces[g].append(i)
                break
        else:
            gnormal.append(ni)
            gfaces.append([i])
    out = []
    for ng, fs in zip(gnormal, gfaces):
        edges = [(int(f[k]), int(f[(k + 1) % 3])) for f in face[fs] for k in range(3)]
        eset = set(edges)
        boundary = [e for e in edges if (e[1], e[0]) not in eset]
        nxt: dict[int, list[int]] = {}
        for a, b in boundary:
            nxt.setdefault(a, []).append(b)
        used = set()
        for a, b in boundary:
            if (a, b) in used:
                continue
            path = [a]
            cur = (a, b)
            while cur not in used:
                used.add(cur)
                if cur[1] == a:
                    break
                path.append(cur[1])
                cand = [c for c in nxt[cur[1]] if (cur[1], c) not in used]
                if not cand:
                    break
                cur = (cur[1], cand[0])
            if len(path) >= 3:
                out.append((ng, np.asarray(path, np.int32)))
    order = sorted(range(len(out)), key=lambda k: tuple(-out[k][0]))
    return (np.array([out[k][0] for k in order]).reshape(-1, 3), [out[k][1] for k in order])

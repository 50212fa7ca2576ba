"""Regenerates the mesh test assets in this directory (python tests/assets/make_mesh_assets.py).

Deterministic (fixed seeds); the files are committed so tests need neither trimesh nor this script.
"""

from __future__ import annotations

import pathlib

import numpy as np
import trimesh

HERE = pathlib.Path(__file__).resolve().parent


def _rotation(seed: int) -> np.ndarray:
    return trimesh.transformations.random_rotation_matrix(np.random.default_rng(seed).random(3))


def _prism_obj(outline: list[tuple[float, float]], height: float) -> str:
    """A prism whose caps are single polygons and whose sides are quads (OBJ, 1-based)."""
    n = len(outline)
    lines = [f"v {x:.6g} {y:.6g} 0" for x, y in outline]
    lines += [f"v {x:.6g} {y:.6g} {height:.6g}" for x, y in outline]
    lines.append("f " + " ".join(str(i + 1) for i in reversed(range(n))))
    lines.append("f " + " ".join(str(n + i + 1) for i in range(n)))
    for i in range(n):
        j = (i + 1) % n
        lines.append(f"f {i + 1} {j + 1} {n + j + 1} {n + i + 1}")
    return "\n".join(lines) + "\n"


def _msh(vert, normal=None, texcoord=None, face=None) -> bytes:
    vert = np.asarray(vert, np.float32).reshape(-1, 3)
    nn = 0 if normal is None else len(vert)
    nt = 0 if texcoord is None else len(vert)
    nf = 0 if face is None else len(face)
    out = np.array([len(vert), nn, nt, nf], "<i4").tobytes() + vert.astype("<f4").tobytes()
    if normal is not None:
        out += np.asarray(normal, "<f4").tobytes()
    if texcoord is not None:
        out += np.asarray(texcoord, "<f4").tobytes()
    if face is not None:
        out += np.asarray(face, "<i4").tobytes()
    return out


def main() -> None:
    box = trimesh.creation.box([0.3, 0.5, 0.9])
    box.apply_translation([0.2, -0.1, 0.4])
    (HERE / "box.stl").write_bytes(box.export(file_type="stl"))
    (HERE / "box_ascii.stl").write_text(box.export(file_type="stl_ascii"))

    # an ellipsoid-like sphere at a random attitude: distinct principal moments and axes
    ico = trimesh.creation.icosphere(2, radius=0.7)
    ico.apply_scale([1.0, 0.8, 0.6])
    ico.apply_transform(_rotation(1))
    ico.apply_translation([0.3, 0.1, -0.2])
    (HERE / "ellipsoid.stl").write_bytes(ico.export(file_type="stl"))

    # non-convex: legacy, convex and exact inertia all differ
    ring = trimesh.creation.annulus(r_min=0.5, r_max=1.0, height=0.5, sections=16)
    ring.apply_scale([1.0, 0.7, 1.3])  # distinct principal moments: a well-defined frame
    ring.apply_transform(_rotation(2))
    (HERE / "annulus.stl").write_bytes(ring.export(file_type="stl"))

    # OBJ polygons: convex hexagons (fan), a non-convex L (ear clipping), quads on the sides
    ang = np.arange(6) * np.pi / 3
    hexagon = [(np.cos(a) * 0.5, np.sin(a) * 0.3) for a in ang]
    (HERE / "prism_hex.obj").write_text(_prism_obj(hexagon, 0.4))
    ell = [(0, 0), (2, 0), (2, 1), (1, 1), (1, 2), (0, 2)]
    (HERE / "prism_l.obj").write_text(_prism_obj(ell, 0.7))
    # two objects: MuJoCo keeps every vertex but only the first object's faces
    two = _prism_obj(hexagon, 0.4).splitlines()
    (HERE / "two_objects.obj").write_text(
        "\n".join(two[:12] + ["o first"] + two[12:16] + ["o second"] + two[16:]) + "\n"
    )

    # a point cloud on an ellipsoid: no faces, a convex hull with more than 500 vertices
    rng = np.random.default_rng(3)
    pts = rng.normal(size=(700, 3))
    pts = pts / np.linalg.norm(pts, axis=1, keepdims=True) * [0.6, 0.4, 0.25]
    pts = pts @ _rotation(4)[:3, :3].T + [0.05, 0.0, 0.1]
    (HERE / "ellipsoid_cloud.msh").write_bytes(_msh(pts))

    # MSH with normals, texture coordinates and faces (layout check)
    tet = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]]) * [0.4, 0.6, 0.5]
    nrm = tet - tet.mean(0)
    tex = np.array([[0, 0], [1, 0], [0, 1], [1, 1.0]])
    face = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    (HERE / "tetra.msh").write_bytes(_msh(tet, nrm, tex, face))


if __name__ == "__main__":
    main()

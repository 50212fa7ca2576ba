"""Regenerates the mesh assets of models/mesh_scene.xml (run from any directory).

Seeded, so the files are reproducible. The pebble is a subdivided icosphere stretched into an
ellipsoid with a smooth low-amplitude bump field: it stays strictly convex, so every one of its
642 vertices is on the convex hull (the scene needs a hull of at least 500 vertices).
"""

import pathlib

import numpy as np
import trimesh

HERE = pathlib.Path(__file__).resolve().parent


def pebble() -> trimesh.Trimesh:
    sphere = trimesh.creation.icosphere(subdivisions=3, radius=1.0)
    v = sphere.vertices
    # A smooth radial bump field; amplitude small enough to keep the surface convex.
    r = 1.0 + 0.03 * np.sin(2 * v[:, 0]) * np.cos(2 * v[:, 1])
    v = v * r[:, None] * np.array([0.09, 0.07, 0.05])
    return trimesh.Trimesh(v, sphere.faces, process=False)


def rock(seed: int = 7) -> trimesh.Trimesh:
    # The convex hull of random points on a squashed sphere: an irregular, faceted rock.
    rng = np.random.default_rng(seed)
    p = rng.normal(size=(80, 3))
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    p *= np.array([0.08, 0.06, 0.045]) * rng.uniform(0.85, 1.0, size=(80, 1))
    return trimesh.convex.convex_hull(p)


def wedge() -> trimesh.Trimesh:
    v = np.array([[-1, -1, -1], [1, -1, -1], [1, 1, -1], [-1, 1, -1], [-1, -1, 1], [1, -1, 1]],
                 dtype=float) * np.array([0.1, 0.06, 0.04])
    return trimesh.convex.convex_hull(v)


if __name__ == "__main__":
    pebble().export(HERE / "pebble.stl", file_type="stl")  # binary STL
    rock().export(HERE / "rock.obj", file_type="obj")
    wedge().export(HERE / "wedge.stl", file_type="stl")
    for name in ("pebble.stl", "rock.obj", "wedge.stl"):
        mesh = trimesh.load(HERE / name, force="mesh")
        print(name, len(mesh.vertices), "vertices,", len(mesh.convex_hull.vertices), "on hull")

"""Mass and inertia of geoms and bodies, as MuJoCo's compiler infers them.

Seed ``000_14f7d172c1a5ccbe.txt``: body/geom (F0:958-1010: mass or density, shellinertia),
compiler inertiafromgeom / inertiagrouprange / boundmass / boundinertia / balanceinertia /
settotalmass (F0:537-577), inertial/fullinertia (F0:870-881).
"""

from __future__ import annotations

import numpy as np

from mjx_lite.compiler.frames import mat_to_quat, quat_to_mat
from mjx_lite.types import GeomType

_PI = np.pi


def primitive_volume(geom_type: int, size: np.ndarray) -> float:
    r = size
    if geom_type == GeomType.SPHERE:
        return 4.0 / 3.0 * _PI * r[0] ** 3
    if geom_type == GeomType.CAPSULE:
        return _PI * r[0] ** 2 * 2 * r[1] + 4.0 / 3.0 * _PI * r[0] ** 3
    if geom_type == GeomType.ELLIPSOID:
        return 4.0 / 3.0 * _PI * r[0] * r[1] * r[2]
    if geom_type == GeomType.CYLINDER:
        return _PI * r[0] ** 2 * 2 * r[1]
    if geom_type == GeomType.BOX:
        return 8.0 * r[0] * r[1] * r[2]
    return 0.0


def primitive_unit_inertia(geom_type: int, size: np.ndarray) -> np.ndarray:
    """Principal inertia per unit density (solid), in the geom frame."""
    r = size
    if geom_type == GeomType.SPHERE:
        m = primitive_volume(geom_type, r)
        return np.full(3, 0.4 * m * r[0] ** 2)
    if geom_type == GeomType.CAPSULE:
        # Cylinder plus two hemispheres whose centroids sit 3r/8 beyond the cylinder ends.
        mc = _PI * r[0] ** 2 * 2 * r[1]
        ms = 4.0 / 3.0 * _PI * r[0] ** 3
        iz = mc * r[0] ** 2 / 2 + ms * 0.4 * r[0] ** 2
        ix = mc * (r[0] ** 2 / 4 + r[1] ** 2 / 3) + ms * (
            0.4 * r[0] ** 2 + r[1] ** 2 + 0.75 * r[1] * r[0])
        return np.array([ix, ix, iz])
    if geom_type == GeomType.ELLIPSOID:
        m = primitive_volume(geom_type, r)
        return m / 5 * np.array([r[1] ** 2 + r[2] ** 2, r[0] ** 2 + r[2] ** 2,
                                 r[0] ** 2 + r[1] ** 2])
    if geom_type == GeomType.CYLINDER:
        m = primitive_volume(geom_type, r)
        ix = m * (r[0] ** 2 / 4 + r[1] ** 2 / 3)
        return np.array([ix, ix, m * r[0] ** 2 / 2])
    if geom_type == GeomType.BOX:
        m = primitive_volume(geom_type, r)
        return m / 3 * np.array([r[1] ** 2 + r[2] ** 2, r[0] ** 2 + r[2] ** 2,
                                 r[0] ** 2 + r[1] ** 2])
    return np.zeros(3)


def primitive_shell(geom_type: int, size: np.ndarray) -> tuple[float, np.ndarray] | None:
    """Surface area and per-unit-area principal inertia of a thin shell, where closed-form."""
    r = size
    if geom_type == GeomType.SPHERE:
        area = 4 * _PI * r[0] ** 2
        return area, np.full(3, 2.0 / 3.0 * area * r[0] ** 2)
    if geom_type == GeomType.BOX:
        a, b, c = 2 * r
        faces = [(b * c, a, b, c), (a * c, b, a, c), (a * b, c, a, b)]
        area = 2 * (b * c + a * c + a * b)
        inertia = np.zeros(3)
        # Two plates per axis pair, each at distance half-extent from the centre.
        ax, ay, az = r
        plates = {
            0: (b * c, ax, (b, c)), 1: (a * c, ay, (a, c)), 2: (a * b, az, (a, b)),
        }
        for axis in range(3):
            total = 0.0
            for normal, (plate_area, dist, dims) in plates.items():
                m = 2 * plate_area
                others = [k for k in range(3) if k != normal]
                in_plane = dict(zip(others, dims))
                if normal == axis:
                    total += m * (in_plane[others[0]] ** 2 + in_plane[others[1]] ** 2) / 12
                else:
                    other = [k for k in others if k != axis][0]
                    total += m * (in_plane[other] ** 2 / 12 + dist ** 2)
            inertia[axis] = total
        del faces
        return area, inertia
    return None


def combine(masses, inertias, positions, quats) -> tuple[float, np.ndarray, np.ndarray]:
    """Total mass, centre of mass and full inertia tensor about it, in the body frame."""
    masses = np.asarray(masses, dtype=float)
    total = masses.sum()
    com = (masses[:, None] * np.asarray(positions)).sum(0) / total if total > 0 else np.zeros(3)
    tensor = np.zeros((3, 3))
    for m, diag, pos, quat in zip(masses, inertias, positions, quats):
        rot = quat_to_mat(quat)
        d = np.asarray(pos) - com
        tensor += rot @ np.diag(diag) @ rot.T + m * (d @ d * np.eye(3) - np.outer(d, d))
    return total, com, tensor


def principal(tensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Principal moments in decreasing order and the quaternion of their frame.

    An already-diagonal tensor keeps the body axes (sorted), as MuJoCo's Jacobi solver does
    with nothing to rotate; that matters when moments repeat and the frame is otherwise free.
    Other frames equal MuJoCo's up to the sign of each axis.
    """
    tensor = (tensor + tensor.T) / 2
    scale = max(np.abs(np.diag(tensor)).max(), 1e-300)
    if np.abs(tensor - np.diag(np.diag(tensor))).max() <= 1e-14 * scale:
        values, vectors = np.diag(tensor).copy(), np.eye(3)
    else:
        values, vectors = np.linalg.eigh(tensor)
    order = np.argsort(-values, kind="stable")
    values, vectors = values[order], vectors[:, order]
    if np.linalg.det(vectors) < 0:
        vectors[:, 2] = -vectors[:, 2]
    return values, mat_to_quat(vectors)


def full_inertia_matrix(full: np.ndarray) -> np.ndarray:
    """fullinertia = (Ixx, Iyy, Izz, Ixy, Ixz, Iyz) -> symmetric 3x3 (F0:880)."""
    xx, yy, zz, xy, xz, yz = full
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])

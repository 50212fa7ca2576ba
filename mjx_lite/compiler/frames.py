"""Numpy frame algebra for the compiler: orientation specifiers -> unit quaternions (w, x, y, z).

Seed ``000_14f7d172c1a5ccbe.txt``, "Frame orientations" (referenced at F0:857) and compiler/eulerseq
(F0:553): quat, axisangle, euler (intrinsic for lower-case axes, extrinsic for upper-case),
xyaxes, zaxis; at most one per element.
"""

from __future__ import annotations

import numpy as np

from mjx_lite.compiler.parse import Element

ORIENTATIONS = ("quat", "axisangle", "euler", "xyaxes", "zaxis")
_MIN_NORM = 1e-14


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ])


def quat_conj(q: np.ndarray) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    return quat_to_mat(q) @ np.asarray(v, dtype=float)


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    return np.array([
        [w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z],
    ])


def mat_to_quat(mat: np.ndarray) -> np.ndarray:
    """Rotation matrix -> unit quaternion with w >= 0 (numerically stable branch choice)."""
    m = np.asarray(mat, dtype=float)
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        s = np.sqrt(trace + 1.0) * 2
        q = np.array([0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s,
                      (m[1, 0] - m[0, 1]) / s])
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = np.array([(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s,
                      (m[0, 2] + m[2, 0]) / s])
    elif m[1, 1] > m[2, 2]:
        s = np.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = np.array([(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s,
                      (m[1, 2] + m[2, 1]) / s])
    else:
        s = np.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = np.array([(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s,
                      (m[1, 2] + m[2, 1]) / s, 0.25 * s])
    q = q / np.linalg.norm(q)
    return -q if q[0] < 0 else q


def axis_angle_quat(axis: np.ndarray, angle: float) -> np.ndarray:
    axis = np.asarray(axis, dtype=float)
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


def zaxis_quat(z: np.ndarray) -> np.ndarray:
    """Minimal rotation taking (0, 0, 1) to z."""
    z = np.asarray(z, dtype=float)
    z = z / np.linalg.norm(z)
    ref = np.array([0.0, 0.0, 1.0])
    axis = np.cross(ref, z)
    s = np.linalg.norm(axis)
    if s < _MIN_NORM:
        return np.array([1.0, 0, 0, 0]) if z[2] > 0 else np.array([0.0, 1, 0, 0])
    return axis_angle_quat(axis / s, np.arctan2(s, z @ ref))


def normalize_quat(q: np.ndarray, el: Element, attr: str) -> np.ndarray:
    n = np.linalg.norm(q)
    if n < _MIN_NORM:
        raise el.error(f"attribute '{attr}' is a zero quaternion")
    return np.asarray(q, dtype=float) / n


def orientation(el: Element, angle_scale: float, eulerseq: str,
                default=(1.0, 0.0, 0.0, 0.0)) -> np.ndarray:
    """The element's orientation as a unit quaternion (defaults merged)."""
    given = [a for a in ORIENTATIONS if el.has(a)]
    explicit = [a for a in given if el.explicit(a)]
    if len(explicit) > 1:
        raise el.error(f"multiple orientation specifiers: {', '.join(explicit)}")
    if explicit:
        given = explicit
    if not given:
        return np.array(default, dtype=float)
    attr = given[0]
    value = np.asarray(el.get(attr), dtype=float)
    if attr == "quat":
        return normalize_quat(value, el, attr)
    if attr == "axisangle":
        if np.linalg.norm(value[:3]) < _MIN_NORM:
            raise el.error("attribute 'axisangle' has a zero axis")
        return axis_angle_quat(value[:3], value[3] * angle_scale)
    if attr == "euler":
        q = np.array([1.0, 0, 0, 0])
        for axis_char, angle in zip(eulerseq, value):
            axis = np.eye(3)["xyz".index(axis_char.lower())]
            r = axis_angle_quat(axis, angle * angle_scale)
            # Lower case: rotate about the moving (intrinsic) axes; upper case: fixed axes.
            q = quat_mul(q, r) if axis_char.islower() else quat_mul(r, q)
        return q / np.linalg.norm(q)
    if attr == "xyaxes":
        x, y = value[:3], value[3:]
        if np.linalg.norm(x) < _MIN_NORM:
            raise el.error("attribute 'xyaxes' has a zero x axis")
        x = x / np.linalg.norm(x)
        y = y - x * (x @ y)
        if np.linalg.norm(y) < _MIN_NORM:
            raise el.error("attribute 'xyaxes' has parallel axes")
        y = y / np.linalg.norm(y)
        return mat_to_quat(np.stack([x, y, np.cross(x, y)], axis=1))
    if np.linalg.norm(value) < _MIN_NORM:
        raise el.error("attribute 'zaxis' is a zero vector")
    return zaxis_quat(value)


def fromto_frame(fromto: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Midpoint, orientation and half length of a fromto segment.

    MuJoCo 4.0 aligns +z with (from - to), although the reference says from -> to; the
    shapes are symmetric, so only the stored quaternion differs, and it must match.
    """
    p0, p1 = np.asarray(fromto[:3], dtype=float), np.asarray(fromto[3:], dtype=float)
    vec = p0 - p1
    length = np.linalg.norm(vec)
    quat = zaxis_quat(vec) if length > _MIN_NORM else np.array([1.0, 0, 0, 0])
    return (p0 + p1) / 2, quat, length / 2

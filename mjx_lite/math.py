"""Quaternions, rotations and spatial algebra (Computation chapter, "Notation" and
"Forward dynamics": 6-vectors are [angular; linear], expressed in the global frame about the
subtree center of mass, the "c*" convention of cvel, cdof, cinert).

Quaternions are [w, x, y, z]. Every norm and division goes through ``safe_norm`` /
``safe_div`` so that the branch not taken (zero vector, zero mass) cannot leak NaN into
reverse-mode gradients.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

# MuJoCo's mjMINVAL: below it a norm counts as zero.
MINVAL = 1e-15


def safe_norm(x: jax.Array, axis=-1, keepdims: bool = False) -> jax.Array:
    """Euclidean norm whose gradient at 0 is 0 (not NaN)."""
    sq = jp.sum(x * x, axis=axis, keepdims=keepdims)
    pos = sq > 0
    return jp.where(pos, jp.sqrt(jp.where(pos, sq, 1.0)), 0.0)


def safe_div(num: jax.Array, den: jax.Array, eps: float = MINVAL) -> jax.Array:
    """num / den where |den| < eps gives 0 (and a zero gradient), as MuJoCo's guards do."""
    ok = jp.abs(den) >= eps
    return jp.where(ok, num / jp.where(ok, den, 1.0), 0.0)


def normalize(x: jax.Array, axis=-1) -> jax.Array:
    """x / |x|; a zero vector stays zero."""
    n = safe_norm(x, axis=axis, keepdims=True)
    return safe_div(x, n)


def quat_normalize(q: jax.Array) -> jax.Array:
    """mju_normalize4: unit quaternion; a (near) zero quaternion becomes identity."""
    n = safe_norm(q, keepdims=True)
    ok = n >= MINVAL
    ident = jp.zeros_like(q).at[..., 0].set(1.0)
    return jp.where(ok, q / jp.where(ok, n, 1.0), ident)


def quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    """Hamilton product a * b, broadcasting over leading axes."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return jp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conj(q: jax.Array) -> jax.Array:
    """Conjugate, the inverse of a unit quaternion (mju_negQuat)."""
    return q * jp.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


quat_inv = quat_conj


def rotate(v: jax.Array, q: jax.Array) -> jax.Array:
    """Rotates 3-vector v by unit quaternion q (mju_rotVecQuat)."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * jp.cross(u, v)
    return v + w * t + jp.cross(u, t)


def quat_to_mat(q: jax.Array) -> jax.Array:
    """Rotation matrix (..., 3, 3) of unit quaternion q (mju_quat2Mat)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    ww, xx, yy, zz = w * w, x * x, y * y, z * z
    wx, wy, wz, xy, xz, yz = w * x, w * y, w * z, x * y, x * z, y * z
    rows = [
        [ww + xx - yy - zz, 2 * (xy - wz), 2 * (xz + wy)],
        [2 * (xy + wz), ww - xx + yy - zz, 2 * (yz - wx)],
        [2 * (xz - wy), 2 * (yz + wx), ww - xx - yy + zz],
    ]
    return jp.stack([jp.stack(r, axis=-1) for r in rows], axis=-2)


def axis_angle_to_quat(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """Quaternion of a rotation by ``angle`` about unit ``axis`` (mju_axisAngle2Quat)."""
    half = 0.5 * jp.asarray(angle)[..., None]
    return jp.concatenate([jp.cos(half), jp.sin(half) * axis], axis=-1)


def quat_integrate(q: jax.Array, vel: jax.Array, scale=1.0) -> jax.Array:
    """mju_quatIntegrate: q * exp(scale * vel / 2), vel a local-frame angular velocity."""
    n = safe_norm(vel, keepdims=True)
    small = n < 1e-8
    ns = jp.where(small, 1.0, n)
    half = 0.5 * scale * n
    # sin(scale*|v|/2) / |v|, by its Taylor series near 0 so that the gradient stays finite
    s = jp.where(small, 0.5 * scale * (1.0 - half * half / 6.0), jp.sin(half) / ns)
    qrot = jp.concatenate([jp.cos(half), s * vel], axis=-1)
    return quat_normalize(quat_mul(quat_normalize(q), qrot))


def quat_to_vel(q: jax.Array, dt=1.0) -> jax.Array:
    """mju_quat2Vel: rotation vector (axis * angle) / dt of unit q, angle wrapped to (-pi, pi]."""
    u = q[..., 1:]
    s = safe_norm(u, keepdims=True)
    angle = 2.0 * jp.arctan2(s, q[..., :1])
    angle = jp.where(angle > jp.pi, angle - 2.0 * jp.pi, angle)
    # angle / s -> 2 / w as s -> 0
    small = s < 1e-10
    ratio = jp.where(small, 2.0 / jp.where(q[..., :1] == 0, 1.0, q[..., :1]),
                     angle / jp.where(small, 1.0, s))
    return u * ratio / dt


def mat_to_quat(mat: jax.Array) -> jax.Array:
    """Unit quaternion of rotation matrix (..., 3, 3) (mju_mat2Quat), branch-free."""
    m00, m11, m22 = mat[..., 0, 0], mat[..., 1, 1], mat[..., 2, 2]
    tr = m00 + m11 + m22
    cands = jp.stack(
        [
            jp.stack([1 + tr, mat[..., 2, 1] - mat[..., 1, 2], mat[..., 0, 2] - mat[..., 2, 0],
                      mat[..., 1, 0] - mat[..., 0, 1]], -1),
            jp.stack([mat[..., 2, 1] - mat[..., 1, 2], 1 + m00 - m11 - m22,
                      mat[..., 0, 1] + mat[..., 1, 0], mat[..., 0, 2] + mat[..., 2, 0]], -1),
            jp.stack([mat[..., 0, 2] - mat[..., 2, 0], mat[..., 0, 1] + mat[..., 1, 0],
                      1 - m00 + m11 - m22, mat[..., 1, 2] + mat[..., 2, 1]], -1),
            jp.stack([mat[..., 1, 0] - mat[..., 0, 1], mat[..., 0, 2] + mat[..., 2, 0],
                      mat[..., 1, 2] + mat[..., 2, 1], 1 - m00 - m11 + m22], -1),
        ],
        axis=-2,
    )
    # MuJoCo's choice (and so its sign): the trace form when the trace is positive, else the
    # form of the largest diagonal element
    best = jp.where(tr > 0, 0, 1 + jp.argmax(jp.stack([m00, m11, m22], -1), axis=-1))
    q = jp.take_along_axis(cands, best[..., None, None], axis=-2)[..., 0, :]
    return quat_normalize(q)


def motion_cross(v: jax.Array, u: jax.Array) -> jax.Array:
    """Spatial motion cross product v x u (mju_crossMotion), 6-vectors [ang; lin]."""
    w, vl = v[..., :3], v[..., 3:]
    return jp.concatenate(
        [jp.cross(w, u[..., :3]), jp.cross(w, u[..., 3:]) + jp.cross(vl, u[..., :3])], axis=-1
    )


def force_cross(v: jax.Array, f: jax.Array) -> jax.Array:
    """Spatial force cross product v x* f (mju_crossForce)."""
    w, vl = v[..., :3], v[..., 3:]
    return jp.concatenate(
        [jp.cross(w, f[..., :3]) + jp.cross(vl, f[..., 3:]), jp.cross(w, f[..., 3:])], axis=-1
    )


def inert_mul(i: jax.Array, v: jax.Array) -> jax.Array:
    """10-element com-based inertia times 6-vector (mju_mulInertVec).

    The inertia is [Ixx Iyy Izz Ixy Ixz Iyz, m*c (3), m] about the subtree com, with c the
    body com offset from it.
    """
    w, vl = v[..., :3], v[..., 3:]
    mc, mass = i[..., 6:9], i[..., 9:10]
    iw = jp.stack(
        [
            i[..., 0] * w[..., 0] + i[..., 3] * w[..., 1] + i[..., 4] * w[..., 2],
            i[..., 3] * w[..., 0] + i[..., 1] * w[..., 1] + i[..., 5] * w[..., 2],
            i[..., 4] * w[..., 0] + i[..., 5] * w[..., 1] + i[..., 2] * w[..., 2],
        ],
        axis=-1,
    )
    return jp.concatenate([iw + jp.cross(mc, vl), mass * vl - jp.cross(mc, w)], axis=-1)


def inert_com(inertia: jax.Array, mat: jax.Array, dif: jax.Array, mass: jax.Array) -> jax.Array:
    """mju_inertCom: principal inertia rotated by ``mat`` and shifted by ``dif`` -> 10-vector."""
    mass = jp.asarray(mass)[..., None]
    rot = jp.einsum("...ij,...j,...kj->...ik", mat, inertia, mat)
    dd = jp.sum(dif * dif, -1)[..., None, None]
    eye = jp.eye(3, dtype=rot.dtype)
    full = rot + mass[..., None] * (dd * eye - dif[..., :, None] * dif[..., None, :])
    sym = jp.stack(
        [full[..., 0, 0], full[..., 1, 1], full[..., 2, 2], full[..., 0, 1], full[..., 0, 2],
         full[..., 1, 2]],
        axis=-1,
    )
    return jp.concatenate([sym, mass * dif, mass], axis=-1)


def transform_motion(vec: jax.Array, newpos: jax.Array, oldpos: jax.Array) -> jax.Array:
    """Moves a motion 6-vector from point ``oldpos`` to ``newpos`` (mju_transformSpatial)."""
    w = vec[..., :3]
    return jp.concatenate([w, vec[..., 3:] - jp.cross(newpos - oldpos, w)], axis=-1)


def transform_force(vec: jax.Array, newpos: jax.Array, oldpos: jax.Array) -> jax.Array:
    """Moves a force 6-vector [torque; force] from point ``oldpos`` to ``newpos``."""
    f = vec[..., 3:]
    return jp.concatenate([vec[..., :3] - jp.cross(newpos - oldpos, f), f], axis=-1)

"""Passive forces: springs, dampers, gravity compensation, fluid (seed 002, "Passive forces").

MuJoCo 4.0 differences from the 3.x seeds, all matched here:
  * separate ``spring`` (32) and ``damper`` (64) disable bits; with both set, every passive force
    (gravity compensation and fluid included) is zero;
  * polynomial stiffness ``f(x) = a x + b x^2 + c x^3`` and anti-symmetrized damping
    ``f(v) = a v + b v|v| + c v^3`` (``*_stiffnesspoly`` / ``*_dampingpoly`` hold b, c); for ball
    and free rotations the stiffness polynomial is applied to the norm of the rotation vector;
  * actuator ``damping`` adds ``gear^2 * f(v)`` at the actuator's joint or tendon target.
Joint ``springyield`` (elasto-plasticity, mutable ``mjData.plastic`` state) is not modelled.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math, tree
from mjx_lite.math import where
from mjx_lite.types import Data, DisableBit, GeomType, JointType, Model, TrnType

_MINVAL = 1e-15  # mjMINVAL


def apply_ft(m: Model, d: Data, force, torque, point, body) -> jax.Array:
    """Maps world forces/torques applied at points of bodies to joint space (mj_applyFT, summed).

    Args:
      force, torque, point: (k, 3) world-frame vectors.
      body: (k,) static body ids.
    Returns:
      (nv,) generalized force.
    """
    body = np.asarray(body, dtype=int)
    mask = tree.body_dof_mask(m)[body]  # (k, nv)
    com = math.take(d.subtree_com, np.asarray(m.body_rootid)[body])
    # the wrench about the tree's com, where cdof is expressed: (a x r) . f = a . (r x f)
    wrench = jp.concatenate([torque + math.cross(point - com, force), force], axis=-1)
    return jp.sum(where(mask, wrench @ d.cdof.T, 0.0), axis=0)


def object_velocity(m: Model, d: Data, body, point, rot) -> tuple[jax.Array, jax.Array]:
    """Local (angular, linear) velocity of frames rigidly attached to bodies (mj_objectVelocity).

    Args:
      body: (k,) static body ids; point: (k, 3) frame origins; rot: (k, 3, 3) frame orientations.
    """
    body = np.asarray(body, dtype=int)
    cvel = math.take(d.cvel, body)
    com = math.take(d.subtree_com, np.asarray(m.body_rootid)[body])
    lin = cvel[:, 3:] - math.cross(point - com, cvel[:, :3])
    rot_t = jp.swapaxes(rot, -1, -2)
    return jp.einsum("kij,kj->ki", rot_t, cvel[:, :3]), jp.einsum("kij,kj->ki", rot_t, lin)


def quat_sub(qa, qb):
    """Rotation vector v with qa = qb * exp(v) (mju_subQuat), batched over leading axes."""
    w1, v1 = qb[..., :1], -qb[..., 1:]  # conjugate of qb
    w2, v2 = qa[..., :1], qa[..., 1:]
    w = w1 * w2 - jp.sum(v1 * v2, axis=-1, keepdims=True)
    v = w1 * v2 + w2 * v1 + math.cross(v1, v2)
    s = math.safe_norm(v)[..., None]
    w = w[..., :]
    angle = 2.0 * jp.arctan2(s, w)
    angle = where(angle > jp.pi, angle - 2.0 * jp.pi, angle)
    # angle / sin(angle/2) -> 2 / w as the rotation vanishes; keeps the gradient finite
    small = s < 1e-10
    ratio = where(small, 2.0 / where(w == 0, 1.0, w), angle / where(small, 1.0, s))
    return v * ratio


def stiffness_poly(x, k, poly):
    """f(x) = k x + b x^2 + c x^3 (poly = (b, c)), the force being -f."""
    return x * (k + x * (poly[..., 0] + x * poly[..., 1]))


def damping_poly(v, b, poly):
    """Anti-symmetrized f(v) = b v + p1 v|v| + p2 v^3, the force being -f."""
    return v * (b + poly[..., 0] * jp.abs(v) + poly[..., 1] * v * v)


def _vector_spring(dif, k, poly):
    # the polynomial acts on the norm along the displacement: -f(|x|) x / |x|
    n = math.safe_norm(dif)
    return -dif * (k + n * (poly[:, 0] + n * poly[:, 1]))[:, None]


def _joint_spring(m: Model, d: Data) -> jax.Array:
    qfrc = jp.zeros(m.nv, dtype=d.qvel.dtype)
    jtype = np.asarray(m.jnt_type)
    qadr, vadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
    k, poly = m.jnt_stiffness, m.jnt_stiffnesspoly
    # joints whose stiffness is a known zero have no spring (as mj_springdamper skips them):
    # gymnasium humanoid's free joint's quaternion difference and its derivative were ~30
    # kernels a stage of its gradient, for a zero force
    if _known(k, poly):
        springy = (np.asarray(k) != 0) | np.any(np.asarray(poly) != 0, axis=-1)
    else:
        springy = np.ones(m.njnt, dtype=bool)
    jtype = np.where(springy, jtype, -1)
    scalar = np.nonzero((jtype == JointType.HINGE) | (jtype == JointType.SLIDE))[0]
    if scalar.size:
        x = math.take(d.qpos, qadr[scalar]) - m.qpos_spring[qadr[scalar]]
        qfrc = qfrc + math.spread(-stiffness_poly(x, k[scalar], poly[scalar]), vadr[scalar], m.nv)

    def rot_spring(jnt, qoff, voff):
        qi = qadr[jnt][:, None] + qoff + np.arange(4)
        dif = quat_sub(math.take(d.qpos, qi), m.qpos_spring[qi])
        frc = _vector_spring(dif, k[jnt], poly[jnt])
        return qfrc + math.spread(frc, vadr[jnt][:, None] + voff + np.arange(3), m.nv)

    ball = np.nonzero(jtype == JointType.BALL)[0]
    if ball.size:
        qfrc = rot_spring(ball, 0, 0)
    free = np.nonzero(jtype == JointType.FREE)[0]
    if free.size:
        qi = qadr[free][:, None] + np.arange(3)
        dif = math.take(d.qpos, qi) - m.qpos_spring[qi]
        frc = _vector_spring(dif, k[free], poly[free])
        qfrc = qfrc + math.spread(frc, vadr[free][:, None] + np.arange(3), m.nv)
        qfrc = rot_spring(free, 3, 3)
    return qfrc


def _tendon_spring_force(m: Model, d: Data) -> jax.Array:
    """(ntendon,) spring force along each tendon, zero inside the springlength deadband."""
    lower, upper = m.tendon_lengthspring[:, 0], m.tendon_lengthspring[:, 1]
    x = where(d.ten_length < lower, d.ten_length - lower, 0.0)
    x = where(d.ten_length > upper, d.ten_length - upper, x)
    return -stiffness_poly(x, m.tendon_stiffness, m.tendon_stiffnesspoly)


def _tendon_damper_force(m: Model, d: Data) -> jax.Array:
    """(ntendon,) damper force along each tendon: its own damping and, as 4.0 does, the
    damping of actuators that transmit through it, reflected with gear^2."""
    frc = -damping_poly(d.ten_velocity, m.tendon_damping, m.tendon_dampingpoly)
    if m.nu:
        ten = np.nonzero(np.asarray(m.actuator_trntype) == TrnType.TENDON)[0]
        if ten.size:
            tid = np.asarray(m.actuator_trnid)[ten, 0]
            g2 = m.actuator_gear[ten, 0] ** 2
            frc = frc.at[tid].add(-g2 * damping_poly(
                d.ten_velocity[tid], m.actuator_damping[ten], m.actuator_dampingpoly[ten]))
    return frc


def tendon_passive_force(m: Model, d: Data) -> jax.Array:
    """(ntendon,) spring + damper force along each tendon (the disable flags applied)."""
    flags = m.opt.disableflags
    f = jp.zeros(m.ntendon, d.qvel.dtype)
    if m.ntendon and not flags & DisableBit.SPRING:
        f = f + _tendon_spring_force(m, d)
    if m.ntendon and not flags & DisableBit.DAMPER:
        f = f + _tendon_damper_force(m, d)
    return f


def _damper(m: Model, d: Data) -> jax.Array:
    qfrc = -damping_poly(d.qvel, m.dof_damping, m.dof_dampingpoly)
    if m.ntendon:
        qfrc = qfrc + d.ten_J.T @ _tendon_damper_force(m, d)
    if m.nu:
        # 4.0: actuator damping is reflected to its joint/tendon target with gear^2
        trn = np.asarray(m.actuator_trntype)
        tid = np.asarray(m.actuator_trnid)[:, 0]
        jtype = np.asarray(m.jnt_type)
        on_joint = (trn == TrnType.JOINT) & (tid >= 0)
        joint_of = np.where(on_joint, tid, 0)  # only read where on_joint
        jnt = np.nonzero(on_joint & (m.njnt > 0) & np.isin(
            jtype[joint_of] if m.njnt else np.zeros_like(tid),
            (JointType.HINGE, JointType.SLIDE)))[0]
        g2 = m.actuator_gear[:, 0] ** 2
        if jnt.size:
            dof = np.asarray(m.jnt_dofadr)[tid[jnt]]
            f = damping_poly(math.take(d.qvel, dof), m.actuator_damping[jnt],
                             m.actuator_dampingpoly[jnt])
            qfrc = qfrc.at[dof].add(-g2[jnt] * f)
    return qfrc


def gravcomp(m: Model, d: Data) -> jax.Array:
    """qfrc_gravcomp: the weight fraction body_gravcomp cancelled at each body's com."""
    bodies = np.arange(1, m.nbody)
    # as MuJoCo 4.0 (measured): no body with gravcomp at compile time (ngravcomp 0), no
    # force, whatever body_gravcomp is set to later
    if m.opt.disableflags & DisableBit.GRAVITY or bodies.size == 0 or m.ngravcomp == 0:
        return jp.zeros(m.nv, dtype=d.qvel.dtype)
    force = -m.opt.gravity[None] * (m.body_mass * m.body_gravcomp)[bodies, None]
    return apply_ft(m, d, force, jp.zeros_like(force), d.xipos[bodies], bodies)


def semiaxes(gtype, size, xp=jp):
    """Semi-axes (..., 3) of the equivalent ellipsoids of geoms of types ``gtype`` (static,
    (...)) and sizes (..., 3) (mju_geomSemiAxes); ``xp``: jax.numpy, or numpy (the compiler's
    added-mass table)."""
    gtype = np.asarray(gtype)[..., None]
    r = size[..., :1]
    out = xp.where(gtype == GeomType.SPHERE, xp.concatenate([r, r, r], -1), size)
    out = xp.where(gtype == GeomType.CAPSULE, xp.concatenate([r, r, size[..., 1:2] + r], -1),
                   out)
    return xp.where(gtype == GeomType.CYLINDER, xp.concatenate([r, r, size[..., 1:2]], -1), out)


def geom_semiaxes(m: Model) -> jax.Array:
    """(ngeom, 3) semi-axes of each geom's equivalent ellipsoid (``semiaxes``)."""
    return semiaxes(m.geom_type, m.geom_size)


def _inertia_box_fluid(m: Model, d: Data, bodies: np.ndarray, use) -> jax.Array:
    """Inertia-box fluid model (seed fluid chapter, "Inertia model") on bodies where use."""
    mass = m.body_mass[bodies]
    inertia = m.body_inertia[bodies]
    alive = (mass >= _MINVAL) & use
    # full side lengths of the equivalent inertia box
    box = jp.stack([inertia[:, 1] + inertia[:, 2] - inertia[:, 0],
                    inertia[:, 0] + inertia[:, 2] - inertia[:, 1],
                    inertia[:, 0] + inertia[:, 1] - inertia[:, 2]], axis=1)
    box = jp.sqrt(6.0 * jp.maximum(box, _MINVAL) / where(alive, mass, 1.0)[:, None])
    rot = d.ximat[bodies]
    ang, lin = object_velocity(m, d, bodies, d.xipos[bodies], rot)
    lin = lin - jp.einsum("kji,j->ki", rot, m.opt.wind)
    diam = jp.mean(box, axis=1, keepdims=True)
    torque = -jp.pi * diam**3 * m.opt.viscosity * ang
    force = -3.0 * jp.pi * diam * m.opt.viscosity * lin
    b0, b1, b2 = box[:, 0], box[:, 1], box[:, 2]
    area = jp.stack([b1 * b2, b0 * b2, b0 * b1], axis=1)
    moment = jp.stack([b0 * (b1**4 + b2**4), b1 * (b0**4 + b2**4), b2 * (b0**4 + b1**4)], axis=1)
    force = force - 0.5 * m.opt.density * area * jp.abs(lin) * lin
    torque = torque - m.opt.density * moment * jp.abs(ang) * ang / 64.0
    force = where(alive[:, None], jp.einsum("kij,kj->ki", rot, force), 0.0)
    torque = where(alive[:, None], jp.einsum("kij,kj->ki", rot, torque), 0.0)
    return apply_ft(m, d, force, torque, d.xipos[bodies], bodies)


def _ellipsoid_fluid(m: Model, d: Data, geoms: np.ndarray) -> jax.Array:
    """Ellipsoid fluid model (seed fluid chapter, "Ellipsoid model"), one row per geom."""
    rho, beta = m.opt.density, m.opt.viscosity
    prm = m.geom_fluid[geoms]
    # coef (geom_fluid[0]) is 1 on ellipsoid-model geoms and 0 elsewhere, zeroing their rows
    coef, blunt, slender, angular, kutta, magnus = (prm[:, i] for i in range(6))
    vmass, vinertia = prm[:, 6:9], prm[:, 9:12]
    s = geom_semiaxes(m)[geoms]
    bodies = np.asarray(m.geom_bodyid)[geoms]
    rot = d.geom_xmat[geoms]
    point = d.geom_xpos[geoms]
    w, v = object_velocity(m, d, bodies, point, rot)
    v = v - jp.einsum("kji,j->ki", rot, m.opt.wind)

    # added mass (potential flow, velocity part only)
    lin_mom = rho * vmass * v
    ang_mom = rho * vinertia * w
    torque = math.cross(lin_mom, v) + math.cross(ang_mom, w)
    force = math.cross(lin_mom, w)

    s0, s1, s2 = s[:, 0], s[:, 1], s[:, 2]
    volume = 4.0 / 3.0 * jp.pi * s0 * s1 * s2
    r_max = jp.max(s, axis=1)
    r_min = jp.min(s, axis=1)
    r_mid = s0 + s1 + s2 - r_max - r_min
    a_max = jp.pi * r_max * r_mid
    # projected area of the ellipsoid on the plane normal to v (the projection lemma)
    prod = jp.stack([s1 * s2, s2 * s0, s0 * s1], axis=1)
    num = jp.sum(prod**4 * v * v, axis=1)
    den = jp.sum(prod**2 * v * v, axis=1)
    ratio = num / jp.maximum(den, _MINVAL)
    a_proj = jp.pi * where(ratio > 0, jp.sqrt(where(ratio > 0, ratio, 1.0)), 0.0)
    speed = math.safe_norm(v)
    # normal of the cross-section whose projection is a_proj
    normal = prod * v / where(s > 0, s, 1.0)
    nnorm = math.safe_norm(normal)
    cos_alpha = jp.sum(normal * v, axis=1) / jp.maximum(_MINVAL, speed * nnorm)
    nhat = normal / where(nnorm > _MINVAL, nnorm, 1.0)[:, None]
    circ = math.cross(nhat, v) * (kutta * rho * cos_alpha * a_proj)[:, None]
    force = force + math.cross(circ, v)
    force = force + (magnus * rho * volume)[:, None] * math.cross(w, v)

    r_d = (s0 + s1 + s2) / 3.0
    drag = beta * 6.0 * jp.pi * r_d + rho * speed * (blunt * a_proj + slender * (a_max - a_proj))
    force = force - drag[:, None] * v
    i_d = 8.0 / 15.0 * jp.pi * s * jp.stack([jp.maximum(s1, s2), jp.maximum(s0, s2),
                                             jp.maximum(s0, s1)], axis=1) ** 4
    i_max = jp.max(i_d, axis=1, keepdims=True)
    mom = w * (angular[:, None] * i_d + slender[:, None] * (i_max - i_d))
    ang_drag = beta * 8.0 * jp.pi * r_d**3 + rho * math.safe_norm(mom)
    torque = torque - ang_drag[:, None] * w

    force = coef[:, None] * jp.einsum("kij,kj->ki", rot, force)
    torque = coef[:, None] * jp.einsum("kij,kj->ki", rot, torque)
    return apply_ft(m, d, force, torque, point, bodies)


def _known(*values) -> bool:
    """Whether every value is concrete (untraced): a value its shortcuts may read."""
    return not any(isinstance(v, jax.core.Tracer) for v in values)


def _known_zero(*values) -> bool:
    """Whether every value is a concrete (untraced) array of zeros."""
    return _known(*values) and not any(np.any(np.asarray(v)) for v in values)


def fluid(m: Model, d: Data) -> jax.Array:
    """qfrc_fluid: the ellipsoid model on geoms with fluidshape, inertia box on other bodies.

    Both models' forces scale with opt.density or opt.viscosity; with both zero the medium is
    off (seed 002, "Fluid forces": zero by default) and, where they are known zeros (``step``
    or ``forward`` of a Model closed over by a jit), nothing is computed. A traced Model
    computes them, so their derivative w.r.t. density and viscosity stays exact; that
    includes ``rollout``'s RK4 scan, whose derivative rule takes the Model as an argument
    (gymnasium humanoid there: ~11 fluid kernels a stage, ~38 in the gradient's transpose).

    The ellipsoid model is evaluated on the geoms whose interaction coefficient
    (geom_fluid[:, 0]) was non-zero at compile time (``geom_fluidshape``), like MuJoCo's
    fluidshape choice a structural one: most models have none and skip its cost. The
    coefficient itself stays traced: it scales those geoms' forces, and a body whose
    coefficients are all zero at run time gets the inertia-box model.
    """
    qfrc = jp.zeros(m.nv, dtype=d.qvel.dtype)
    bodies = np.arange(1, m.nbody)
    if not bodies.size or _known_zero(m.opt.density, m.opt.viscosity):
        return qfrc
    geom_body = np.asarray(m.geom_bodyid)
    geoms = np.nonzero(np.asarray(m.geom_fluidshape) & (geom_body > 0))[0]
    ell_body = jp.zeros(m.nbody, bool)
    if geoms.size:
        ell_body = jax.ops.segment_max((m.geom_fluid[geoms, 0] > 0).astype(jp.int32),
                                       geom_body[geoms], num_segments=m.nbody) > 0
    qfrc = qfrc + _inertia_box_fluid(m, d, bodies, ~ell_body[bodies])
    if geoms.size:
        qfrc = qfrc + _ellipsoid_fluid(m, d, geoms)
    return qfrc


def passive(m: Model, d: Data) -> Data:
    """Spring, damper, gravity-compensation and fluid forces (mj_passive)."""
    zeros = jp.zeros(m.nv, dtype=d.qvel.dtype)
    flags = m.opt.disableflags
    if flags & DisableBit.SPRING and flags & DisableBit.DAMPER:
        return d.replace(qfrc_spring=zeros, qfrc_damper=zeros, qfrc_gravcomp=zeros,
                         qfrc_fluid=zeros, qfrc_passive=zeros)
    spring = zeros
    if not flags & DisableBit.SPRING:
        spring = _joint_spring(m, d)
        if m.ntendon:
            spring = spring + d.ten_J.T @ _tendon_spring_force(m, d)
    damper = zeros if flags & DisableBit.DAMPER else _damper(m, d)
    qfrc_gravcomp = gravcomp(m, d)
    qfrc_fluid = fluid(m, d)
    actgrav = np.asarray(m.jnt_actgravcomp, dtype=bool)[np.asarray(m.dof_jntid, dtype=int)]
    passive_grav = where(actgrav, 0.0, qfrc_gravcomp)
    return d.replace(qfrc_spring=spring, qfrc_damper=damper, qfrc_gravcomp=qfrc_gravcomp,
                     qfrc_fluid=qfrc_fluid,
                     qfrc_passive=spring + damper + passive_grav + qfrc_fluid)

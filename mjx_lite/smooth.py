"""Position and velocity stages of smooth dynamics (Computation chapter, "Forward dynamics"
and "Simulation pipeline" steps 2-8 and 13-14): forward kinematics, com-based inertias and
motion axes, fixed tendons, the joint-space inertia and its factorization, actuator
transmissions, body velocities and the bias force by recursive Newton-Euler.

All tree recursions are level-wise (``tree.scan_down`` / ``tree.scan_up``); per-joint and
per-dof work is vectorized with static index sets computed from the model's integer fields.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np
from jax.ad_checkpoint import checkpoint_name
from jax.custom_derivatives import SymbolicZero

from mjx_lite import linalg, math, tree
from mjx_lite.math import where
from mjx_lite.types import (
    CamLightType,
    Data,
    DisableBit,
    EqType,
    JointType,
    Model,
    SameFrame,
    SensorType,
    TrnType,
)

# ------------------------------------------------------------------------------------------
# kinematics


def _body_local(m: Model, qpos, mocap_pos, mocap_quat, qpos0, body_pos, body_quat, jnt_pos,
                jnt_axis):
    """Pose of every body relative to its parent (free bodies: in the world), and the joint
    anchors/axes in the parent frame, applying the body's joints in order (mj_kinematics);
    also each ball joint's frame before it turns (local quaternions, in ball-joint order)."""
    nbody = m.nbody
    jtype = np.asarray(m.jnt_type)
    jbody = np.asarray(m.jnt_bodyid)
    qadr = np.asarray(m.jnt_qposadr)
    mocapid = np.asarray(m.body_mocapid)

    pos = jp.asarray(body_pos)
    quat = jp.asarray(body_quat)
    mocap = np.nonzero(mocapid >= 0)[0]
    if mocap.size:
        pos = math.put(pos, mocap, math.take(mocap_pos, mocapid[mocap]))
        quat = math.put(quat, mocap, math.quat_normalize(math.take(mocap_quat, mocapid[mocap])))

    free_j = np.nonzero(jtype == JointType.FREE)[0]
    absolute = np.zeros(nbody, dtype=bool)
    absolute[jbody[free_j]] = True
    if free_j.size:
        fq = qadr[free_j]
        pos = math.put(pos, jbody[free_j], math.take(qpos, fq[:, None] + np.arange(3)))
        fquat = math.take(qpos, fq[:, None] + 3 + np.arange(4))
        quat = math.put(quat, jbody[free_j], math.quat_normalize(fquat))

    anchor = jp.zeros((m.njnt, 3), dtype=pos.dtype)
    axis = jp.zeros((m.njnt, 3), dtype=pos.dtype)
    ball = jtype == JointType.BALL
    ball_prev = jp.zeros((int(ball.sum()), 4), dtype=pos.dtype)
    ball_rank = np.cumsum(ball) - 1
    jaxis = jp.asarray(jnt_axis)
    jpos = jp.asarray(jnt_pos)
    # joints of non-free bodies, applied slot by slot (the k-th joint of each body)
    slot = np.arange(m.njnt) - np.asarray(m.body_jntadr)[jbody]
    for k in range(int(slot.max(initial=-1)) + 1):
        for jt in (JointType.SLIDE, JointType.HINGE, JointType.BALL):
            j = np.nonzero((slot == k) & (jtype == jt))[0]
            if not j.size:
                continue
            b = jbody[j]
            p, q = math.take(pos, b), math.take(quat, b)
            ax = math.rotate(jaxis[j], q)
            an = math.rotate(jpos[j], q) + p
            anchor = math.put(anchor, j, an)
            axis = math.put(axis, j, ax)
            if jt == JointType.SLIDE:
                p = p + ax * (math.take(qpos, qadr[j]) - qpos0[qadr[j]])[:, None]
            else:
                if jt == JointType.HINGE:
                    angle = math.take(qpos, qadr[j]) - qpos0[qadr[j]]
                    qloc = math.axis_angle_to_quat(jaxis[j], angle)
                else:
                    ball_prev = math.put(ball_prev, ball_rank[j], q)
                    qi = qadr[j][:, None] + np.arange(4)
                    qloc = math.quat_normalize(math.take(qpos, qi))
                q = math.quat_mul(q, qloc)
                p = an - math.rotate(jpos[j], q)
            pos = math.put(pos, b, p)
            quat = math.put(quat, b, q)
    return pos, quat, absolute, anchor, axis, ball_prev


def _mat_vec3(mat, v):
    """mju_mulMatVec3 summed in MuJoCo's order (so that, e.g., a geom resting at exactly zero
    distance from a plane gets the same last bit as in MuJoCo)."""
    return (mat[..., :, 0] * v[..., None, 0] + mat[..., :, 1] * v[..., None, 1]
            + mat[..., :, 2] * v[..., None, 2])


def _local_to_global(xpos, xquat, lpos, lquat, sameframe=None, frames=None, xmat=None):
    """Frame of objects at (lpos, lquat) on bodies at (xpos, xquat) (mj_local2Global);
    with the bodies' ``xmat`` the position is rotated by it, as MuJoCo does.

    As MuJoCo does, objects whose compiled ``sameframe`` says they coincide with the body
    frame (or the body inertial frame, given as ``frames`` = (xpos, xmat, xipos, ximat) per
    object) copy that frame, ignoring residual offsets below the compiler's tolerance.
    """
    rotated = math.rotate(lpos, xquat) if xmat is None else _mat_vec3(xmat, lpos)
    gpos = rotated + xpos
    gmat = math.quat_to_mat(math.quat_mul(xquat, lquat))
    if sameframe is None:
        return gpos, gmat
    sf = np.asarray(sameframe)
    bpos, bmat, ipos, imat = frames
    gpos = where((sf == SameFrame.BODY)[:, None], bpos, gpos)
    gpos = where((sf == SameFrame.INERTIA)[:, None], ipos, gpos)
    gmat = where(np.isin(sf, (SameFrame.BODY, SameFrame.BODYROT))[:, None, None], bmat, gmat)
    rot_i = np.isin(sf, (SameFrame.INERTIA, SameFrame.INERTIAROT))[:, None, None]
    return gpos, where(rot_i, imat, gmat)


def _subtree_com(m: Model, xipos: jax.Array) -> jax.Array:
    mass = jp.asarray(m.body_mass)
    tot = tree.scan_up(m, xipos * mass[:, None])
    smass = jp.asarray(m.body_subtreemass)[:, None]
    ok = smass >= math.MINVAL
    return where(ok, tot / where(ok, smass, 1.0), xipos)


def kinematics(m: Model, d: Data) -> Data:
    """Global poses of bodies, joints, geoms, sites, cameras and lights (mj_kinematics)."""
    xpos, xquat, xanchor, xaxis = _tree_poses(m)(
        d.qpos, d.mocap_pos, d.mocap_quat, m.qpos0, m.body_pos, m.body_quat, m.jnt_pos,
        m.jnt_axis)
    xmat = math.quat_to_mat(xquat)

    xipos, ximat = _local_to_global(xpos, xquat, m.body_ipos, m.body_iquat, m.body_sameframe,
                                    (xpos, xmat, xpos, xmat), xmat)
    gb = np.asarray(m.geom_bodyid)
    xpos_g, xmat_g = math.take(xpos, gb), math.take(xmat, gb)
    geom_xpos, geom_xmat = _local_to_global(
        xpos_g, math.take(xquat, gb), m.geom_pos, m.geom_quat, m.geom_sameframe,
        (xpos_g, xmat_g, math.take(xipos, gb), math.take(ximat, gb)), xmat_g)
    sb = np.asarray(m.site_bodyid)
    xpos_s, xmat_s = math.take(xpos, sb), math.take(xmat, sb)
    site_xpos, site_xmat = _local_to_global(
        xpos_s, math.take(xquat, sb), m.site_pos, m.site_quat, m.site_sameframe,
        (xpos_s, xmat_s, math.take(xipos, sb), math.take(ximat, sb)), xmat_s)

    d = d.replace(
        xpos=xpos, xquat=xquat, xmat=xmat, xipos=xipos, ximat=ximat, xanchor=xanchor,
        xaxis=xaxis, geom_xpos=geom_xpos, geom_xmat=geom_xmat, site_xpos=site_xpos,
        site_xmat=site_xmat,
    )
    return camlight(m, d, _subtree_com(m, xipos))


def _world_poses(m: Model, qpos, mocap_pos, mocap_quat, qpos0, body_pos, body_quat, jnt_pos,
                 jnt_axis):
    """((xpos, xquat, xanchor, xaxis), the ball joints' local frames before they turn)."""
    lpos, lquat, absolute, lanchor, laxis, ball_prev = _body_local(
        m, qpos, mocap_pos, mocap_quat, qpos0, body_pos, body_quat, jnt_pos, jnt_axis)
    xpos, xquat = _chain_poses(m, absolute)(lpos, lquat)
    # joint frames: the parent's pose applied to the parent-frame anchors/axes
    jbody = np.asarray(m.jnt_bodyid)
    jpar = np.asarray(m.body_parentid)[jbody]
    xanchor = math.take(xpos, jpar) + math.rotate(lanchor, math.take(xquat, jpar))
    xaxis = math.rotate(laxis, math.take(xquat, jpar))
    free_j = np.nonzero(np.asarray(m.jnt_type) == JointType.FREE)[0]
    if free_j.size:
        xanchor = math.put(xanchor, free_j, math.take(xpos, jbody[free_j]))
        xaxis = math.put(xaxis, free_j, jp.asarray(jnt_axis)[free_j])
    return (xpos, xquat, xanchor, xaxis), ball_prev


def _chain_matrix(parent: np.ndarray) -> np.ndarray:
    """(nbody, nbody) 0/1 matrix: chain[b, a] = 1 where a is b or, following ``parent``, an
    ancestor of b other than the world."""
    chain = np.zeros((parent.size, parent.size))
    for b in range(1, parent.size):
        a = b
        while a > 0:
            chain[b, a] = 1.0
            a = parent[a]
    return chain


def _motion_sources(m: Model):
    """Static layout of ``_tree_poses``' tangent rule, or None where it does not apply.

    A source is what moves a body frame rigidly: a hinge, slide or ball joint, a free joint,
    a mocap body. Returns the sources' (joint or body) ids per kind and the 0/1 matrix
    (nbody + njnt, nsrc) of the sources that move each body frame and each joint frame: a
    body's own and its ancestors' up to a free body (``_chain_poses``' chain); a joint's
    parent body's and those of its own body applied before it (a free joint's: its body's).
    """
    jtype = np.asarray(m.jnt_type)
    jbody = np.asarray(m.jnt_bodyid)
    parent = np.asarray(m.body_parentid)
    nbody, njnt = m.nbody, m.njnt
    free = jtype == JointType.FREE
    if np.any(np.bincount(jbody[free], minlength=nbody)
              * np.asarray(m.body_jntnum) > 1):
        return None  # a free body with other joints: its joints' frames mix two poses
    cut = parent.copy()
    cut[jbody[free]] = 0
    chain = _chain_matrix(cut)
    scalar = np.nonzero(np.isin(jtype, (JointType.HINGE, JointType.SLIDE)))[0]
    ball = np.nonzero(jtype == JointType.BALL)[0]
    free_j = np.nonzero(free)[0]
    mocap = np.nonzero(np.asarray(m.body_mocapid) >= 0)[0]
    joints = np.concatenate([scalar, ball, free_j]).astype(int)
    src_body = np.concatenate([jbody[joints], mocap]).astype(int)
    slot = np.arange(njnt) - np.asarray(m.body_jntadr)[jbody]
    # a free joint and a mocap pose act first on their body
    src_slot = np.concatenate([np.where(free[joints], -1, slot[joints]),
                               np.full(mocap.size, -1)])
    rows = np.zeros((nbody + njnt, src_body.size))
    rows[:nbody] = chain[:, src_body]
    for k in range(njnt):
        if free[k]:
            rows[nbody + k] = chain[jbody[k], src_body]
        else:
            rows[nbody + k] = chain[parent[jbody[k]], src_body] + (
                (src_body == jbody[k]) & (src_slot < slot[k]))
    return scalar, ball, free_j, mocap, rows


def _quat_rate(q, dq):
    """World-frame angular velocity 2 vec(dq conj(q)) / |q| that moves the normalization of q
    (as ``math.quat_normalize``: zero below its MINVAL norm); dq's radial part drops out."""
    n = math.safe_norm(q, keepdims=True)
    ok = n >= math.MINVAL
    unit = q / where(ok, n, 1.0)
    return where(ok, 2.0 * math.quat_mul(dq, math.quat_conj(unit))[..., 1:] / where(ok, n, 1.0),
                 0.0)


def _world_motion(pos, quat, dpos, dquat):
    """(..., 6) source [turn, shift] of a pose given in the world (a free joint's, a mocap
    body's): it turns about its own origin and moves by dpos."""
    w = _quat_rate(quat, dquat)
    return jp.concatenate([w, dpos - math.cross(w, pos)], -1)


def _tree_poses(m: Model):
    """(qpos, mocap_pos, mocap_quat, qpos0, body_pos, body_quat, jnt_pos, jnt_axis) ->
    (xpos, xquat, xanchor, xaxis), as a ``custom_jvp``.

    Its tangent rule is the tree's velocity kinematics (the Jacobian columns mj_jac builds
    from cdof) rather than the derivative of each joint's composition: a source s (a joint,
    or a mocap body) turns what it moves about a world axis at a rate omega_s and shifts it
    by v_s (a hinge: its xaxis times the angle's rate, v = xanchor x omega; a slide: v its
    xaxis times the rate; a ball, free joint or mocap body: the rate of its normalized
    quaternion, about its anchor or body origin). A frame with origin x that the sources S
    move turns at W = sum omega_s and its origin moves by W x x + sum v_s: one product
    with the static source matrix of ``_motion_sources`` and its transpose in reverse mode,
    where the joints' compositions, slot by slot, and the chain's levels transposed into
    ~90 small kernels a stage of gymnasium humanoid's gradient. The model's geometry (body
    and joint poses, axes) has no closed form here: a tangent of it takes the composition's
    own derivative.
    """
    layout = _motion_sources(m)
    primal = jax.custom_jvp(lambda *args: _world_poses(m, *args)[0])

    def rule(primals, tangents):
        dqpos, dmpos, dmquat, dqpos0, *dgeom = tangents
        live = [not isinstance(t, SymbolicZero) for t in tangents]
        if layout is None or any(live[4:]):
            dense = tuple(jp.zeros(t.shape, t.dtype) if isinstance(t, SymbolicZero) else t
                          for t in tangents)
            return jax.jvp(lambda *a: _world_poses(m, *a)[0], primals, dense)
        # saved, not recomputed: under forward._remat's policy these elementwise and
        # gather results would be recomputed in the reverse pass, the whole composition
        # (joint slots, chain levels, their normalizations) again, ~50 kernels a stage
        poses, ball_prev = jax.tree.map(lambda x: checkpoint_name(x, "kinematics"),
                                        _world_poses(m, *primals))
        xpos, xquat, xanchor, xaxis = poses
        qpos, mocap_pos, mocap_quat = primals[:3]
        dtype = xpos.dtype
        scalar, ball, free_j, mocap, rows = layout
        qadr = np.asarray(m.jnt_qposadr)
        zero = jp.zeros((0, 6), dtype)
        parts = []
        if scalar.size:
            rate = (math.take(dqpos, qadr[scalar]) if live[0]
                    else jp.zeros(scalar.size, dtype))
            if live[3]:
                rate = rate - math.take(dqpos0, qadr[scalar])
            ax, an = math.take(xaxis, scalar), math.take(xanchor, scalar)
            hinge = (np.asarray(m.jnt_type)[scalar] == JointType.HINGE)[:, None]
            screw = jp.concatenate([ax * hinge, where(hinge, math.cross(an, ax), ax)], -1)
            parts.append(screw * rate[:, None])
        if ball.size:
            qi = qadr[ball][:, None] + np.arange(4)
            q = math.take(qpos, qi)
            dq = math.take(dqpos, qi) if live[0] else jp.zeros_like(q)
            jpar = np.asarray(m.body_parentid)[np.asarray(m.jnt_bodyid)[ball]]
            frame = math.quat_mul(math.take(xquat, jpar), ball_prev)
            w = math.rotate(_quat_rate(q, dq), frame)
            parts.append(jp.concatenate([w, math.cross(math.take(xanchor, ball), w)], -1))
        if free_j.size:
            qi = qadr[free_j][:, None] + np.arange(7)
            q = math.take(qpos, qi)
            dq = math.take(dqpos, qi) if live[0] else jp.zeros_like(q)
            parts.append(_world_motion(q[:, :3], q[:, 3:], dq[:, :3], dq[:, 3:]))
        if mocap.size:
            mid = np.asarray(m.body_mocapid)[mocap]
            mq = math.take(mocap_quat, mid)
            dp = math.take(dmpos, mid) if live[1] else jp.zeros((mocap.size, 3), dtype)
            dq = math.take(dmquat, mid) if live[2] else jp.zeros_like(mq)
            parts.append(_world_motion(math.take(mocap_pos, mid), mq, dp, dq))
        src = jp.concatenate(parts or [zero]).astype(dtype)
        moved = jp.asarray(rows, dtype) @ src
        turn, shift = moved[:, :3], moved[:, 3:]
        origin = jp.concatenate([xpos, xanchor])
        dorigin = math.cross(turn, origin) + shift
        nbody = m.nbody
        w = turn[:nbody]
        dxquat = 0.5 * math.quat_mul(jp.concatenate([jp.zeros_like(w[:, :1]), w], -1), xquat)
        not_free = (np.asarray(m.jnt_type) != JointType.FREE)[:, None]
        dxaxis = math.cross(turn[nbody:], xaxis) * not_free.astype(dtype)
        return (xpos, xquat, xanchor, xaxis), (dorigin[:nbody], dxquat, dorigin[nbody:],
                                               dxaxis)

    primal.defjvp(rule, symbolic_zeros=True)
    return primal


def _chain_poses(m: Model, absolute: np.ndarray):
    """(lpos, lquat) -> (xpos, xquat): each body's local pose composed with its parent's,
    root to leaves (``tree.scan_down``; a body with a free joint keeps its own, world-frame
    pose), as a ``custom_jvp``.

    Its tangent rule is the chain's velocity kinematics in closed form rather than the
    level-by-level derivative of the composition: with T_a = R_p(a) dlpos_a and Omega_a =
    R_p(a) 2 vec(dlquat_a conj(lquat_a)) (the world-frame translation and rotation that body
    a's local pose adds), and A the static ancestor-or-self mask, a body's angular velocity
    is w = A Omega and its origin moves by A T + w x xpos - A (Omega x xpos) (a rotation added
    at body c turns every body below c about xpos_c); dxquat = [0, w] xquat / 2. Three masked
    sums instead of a derivative per tree level, and their transposes in reverse mode
    (gymnasium humanoid: the transposed levels were ~85 small kernels a forward pass)."""
    identity = np.array([1.0, 0.0, 0.0, 0.0])
    parent = np.asarray(m.body_parentid).copy()
    parent[np.asarray(absolute, bool)] = 0  # a free body's pose is its own
    chain = _chain_matrix(parent)

    def compose(lpos, lquat):
        dtype = lpos.dtype
        absf = jp.asarray(absolute, dtype=dtype)[:, None]

        def combine(par, loc):
            ppos, pquat, _ = par
            pos, quat, a = loc
            gpos = ppos + math.rotate(pos, pquat)
            gquat = math.quat_normalize(math.quat_mul(pquat, quat))
            return (where(a > 0, pos, gpos), where(a > 0, quat, gquat), a)

        root = (jp.zeros(3, dtype), jp.asarray(identity, dtype), jp.zeros(1, dtype))
        xpos, xquat, _ = tree.scan_down(m, combine, (lpos, lquat, absf), root)
        return xpos, xquat

    poses = jax.custom_jvp(compose)

    @poses.defjvp
    def _(primals, tangents):
        lpos, lquat = primals
        dlpos, dlquat = tangents
        xpos, xquat = poses(lpos, lquat)
        pquat = math.take(xquat, parent)  # world's is the identity
        w_local = 2.0 * math.quat_mul(dlquat, math.quat_conj(lquat))[..., 1:]
        lin = math.rotate(dlpos, pquat)
        rot = math.rotate(w_local, pquat)
        a = jp.asarray(chain, xpos.dtype)
        summed = a @ jp.concatenate([rot, lin - math.cross(rot, xpos)], -1)
        w = summed[..., :3]
        dxpos = summed[..., 3:] + math.cross(w, xpos)
        dxquat = 0.5 * math.quat_mul(jp.concatenate([jp.zeros_like(w[..., :1]), w], -1), xquat)
        return (xpos, xquat), (dxpos, dxquat)

    return poses


def _target_frame(pos: jax.Array, target: jax.Array) -> jax.Array:
    """Camera frame looking from ``pos`` at ``target`` with x orthogonal to world z."""
    z = math.normalize(pos - target)
    up = jp.broadcast_to(jp.array([0.0, 0.0, 1.0], dtype=pos.dtype), z.shape)
    x = math.normalize(math.cross(up, z))
    y = math.normalize(math.cross(z, x))
    return jp.stack([x, y, z], axis=-1)


def camlight(m: Model, d: Data, subtree_com: jax.Array | None = None) -> Data:
    """Camera and light poses for every mode (mj_camlight)."""
    com = d.subtree_com if subtree_com is None else subtree_com
    cam_xpos, cam_xmat = d.cam_xpos, d.cam_xmat
    if m.ncam:
        b = np.asarray(m.cam_bodyid)
        tb = np.maximum(np.asarray(m.cam_targetbodyid), 0)
        mode = np.asarray(m.cam_mode)
        fpos, fmat = _local_to_global(d.xpos[b], d.xquat[b], m.cam_pos, m.cam_quat)
        trk = (mode == CamLightType.TRACK)[:, None]
        trkcom = (mode == CamLightType.TRACKCOM)[:, None]
        cam_xpos = where(trk, d.xpos[b] + m.cam_pos0, fpos)
        cam_xpos = where(trkcom, com[b] + m.cam_poscom0, cam_xpos)
        cam_xmat = where((trk | trkcom)[..., None], m.cam_mat0, fmat)
        tgt = np.isin(mode, (CamLightType.TARGETBODY, CamLightType.TARGETBODYCOM))
        if tgt.any():
            target = where((mode == CamLightType.TARGETBODY)[:, None], d.xpos[tb], com[tb])
            look = _target_frame(cam_xpos, target)
            cam_xmat = where(tgt[:, None, None], look, cam_xmat)
    light_xpos, light_xdir = d.light_xpos, d.light_xdir
    if m.nlight:
        b = np.asarray(m.light_bodyid)
        tb = np.maximum(np.asarray(m.light_targetbodyid), 0)
        mode = np.asarray(m.light_mode)
        fpos = d.xpos[b] + math.rotate(m.light_pos, d.xquat[b])
        fdir = math.rotate(m.light_dir, d.xquat[b])
        trk = (mode == CamLightType.TRACK)[:, None]
        trkcom = (mode == CamLightType.TRACKCOM)[:, None]
        light_xpos = where(trk, d.xpos[b] + m.light_pos0, fpos)
        light_xpos = where(trkcom, com[b] + m.light_poscom0, light_xpos)
        light_xdir = where(trk | trkcom, m.light_dir0, fdir)
        tgt = np.isin(mode, (CamLightType.TARGETBODY, CamLightType.TARGETBODYCOM))
        if tgt.any():
            target = where((mode == CamLightType.TARGETBODY)[:, None], d.xpos[tb], com[tb])
            light_xdir = where(tgt[:, None], math.normalize(target - light_xpos), light_xdir)
        # MuJoCo keeps light directions unit length
        light_xdir = math.normalize(light_xdir)
    return d.replace(cam_xpos=cam_xpos, cam_xmat=cam_xmat, light_xpos=light_xpos,
                     light_xdir=light_xdir)


# ------------------------------------------------------------------------------------------
# com-based quantities


def _dof_static(m: Model):
    """Per-dof static facts: joint type, index within the joint, body, joint id."""
    jnt = np.asarray(m.dof_jntid)
    jtype = np.asarray(m.jnt_type)[jnt]
    k = np.arange(m.nv) - np.asarray(m.jnt_dofadr)[jnt]
    return jtype, k, np.asarray(m.dof_bodyid), jnt


def com_pos(m: Model, d: Data) -> Data:
    """subtree_com, com-based body inertias cinert and motion axes cdof (mj_comPos)."""
    subtree_com = _subtree_com(m, d.xipos)
    root = np.asarray(m.body_rootid)
    dif = d.xipos - math.take(subtree_com, root)
    cinert = math.inert_com(m.body_inertia, d.ximat, dif, m.body_mass)
    cinert = cinert.at[0].set(0.0)

    jtype, k, body, jnt = _dof_static(m)
    dtype = d.xpos.dtype
    offset = math.take(subtree_com, root[body]) - math.take(d.xanchor, jnt)
    rot3 = (jtype == JointType.BALL) | ((jtype == JointType.FREE) & (k >= 3))
    col = np.where(jtype == JointType.FREE, k - 3, k).clip(0, 2)
    # ball and free rotations turn about the body frame's axes (columns of xmat)
    ang_ball = math.take(jp.swapaxes(d.xmat, -1, -2).reshape(-1, 3), body * 3 + col)
    xaxis = math.take(d.xaxis, jnt)
    ang = where(rot3[:, None], ang_ball, xaxis)
    is_lin = (jtype == JointType.SLIDE) | ((jtype == JointType.FREE) & (k < 3))
    ang = where(is_lin[:, None], 0.0, ang)
    lin_free = jp.asarray(np.eye(3)[np.clip(k, 0, 2)], dtype=dtype)
    lin = math.cross(ang, offset)
    lin = where((jtype == JointType.SLIDE)[:, None], xaxis, lin)
    lin = where(((jtype == JointType.FREE) & (k < 3))[:, None], lin_free, lin)
    cdof = jp.concatenate([ang, lin], axis=-1).reshape(m.nv, 6)
    d = d.replace(subtree_com=subtree_com, cinert=cinert, cdof=cdof)
    return camlight(m, d)


def crb(m: Model, d: Data) -> Data:
    """Composite rigid-body inertias crb and the dense joint-space inertia qM (mj_crb)."""
    # the world body collects nothing (MuJoCo leaves crb[0] zero)
    crb_ = tree.scan_up(m, d.cinert).at[0].set(0.0)
    body = np.asarray(m.dof_bodyid)
    force = math.inert_mul(math.take(crb_, body), d.cdof)  # (nv, 6)
    anc = tree.dof_ancestors(m)
    lower = where(anc, force @ d.cdof.T, 0.0)
    # the diagonal by mask, not jp.diag (a gather, whose transpose is a scatter kernel)
    eye = np.eye(m.nv, dtype=bool)
    qm = where(eye, lower + jp.asarray(m.dof_armature), lower + lower.T)
    if m.ntendon:
        # tendon armature is inertia along the tendon: M += J' diag(armature) J (MuJoCo >= 3.2;
        # the matching bias term J' armature Jdot qvel vanishes for fixed tendons)
        arm = jp.asarray(m.tendon_armature)
        qm = qm + _in_m_sparsity(m, d.ten_J.T @ (arm[:, None] * d.ten_J))
    return d.replace(crb=crb_, qM=qm + actuator_armature(m, d))


def _in_m_sparsity(m: Model, a: jax.Array) -> jax.Array:
    """``a`` where M's tree sparsity has room (dof pairs in an ancestor relation), else 0.
    MuJoCo 4.0 adds the tendon armature terms J' armature J into its sparse M, so the
    couplings of sibling branches and of different trees are dropped (measured: a tendon
    across two trees, and one across two sibling bodies)."""
    return where(m_sparsity(m), a, 0.0)


def m_sparsity(m: Model) -> np.ndarray:
    """Static (nv, nv) sparsity of M: dof j is dof i, its ancestor or its descendant."""
    anc = tree.dof_ancestors(m)
    return anc | anc.T


def actuator_armature(m: Model, d: Data) -> jax.Array:
    """MuJoCo 4.0's actuator armature: gear^2 * armature of the actuator that jnt_actuatorid
    (tendon_actuatorid) names, on its joint's dof (along its tendon), as reflected inertia."""
    out = jp.zeros((m.nv, m.nv), dtype=d.qpos.dtype)
    joints = np.nonzero(np.asarray(m.jnt_actuatorid) >= 0)[0]
    if joints.size:
        act = np.asarray(m.jnt_actuatorid)[joints]
        dof = np.asarray(m.jnt_dofadr)[joints]
        value = m.actuator_gear[act, 0] ** 2 * m.actuator_armature[act]
        out = out.at[dof, dof].add(value)
    tendons = np.nonzero(np.asarray(m.tendon_actuatorid) >= 0)[0] if m.ntendon else []
    if len(tendons):
        act = np.asarray(m.tendon_actuatorid)[tendons]
        value = m.actuator_gear[act, 0] ** 2 * m.actuator_armature[act]
        jac = d.ten_J[tendons]
        out = out + _in_m_sparsity(m, jac.T @ (value[:, None] * jac))
    return out


# ------------------------------------------------------------------------------------------
# factorization of M
#
# MuJoCo factors M = L' D L with L unit lower triangular (Computation chapter, "Forward
# dynamics": the tree-sparse L'DL whose fill-in stays on the dof ancestor chains). Reversing
# the dof order turns L' D L into an ordinary L D L' factorization, so one dense LAPACK
# Cholesky of the reversed matrix yields MuJoCo's exact L and D. Measured on CPU (2 shared
# cores, float64, jit, factor_m + solve_m, median of 7x300 calls; benchmarks/factor_m.txt):
#   humanoid nv=23: tree-sparse L'DL 318 us, dense Cholesky 38 us (vmap 256: 2070 / 1014 us)
#   ant nv=14:      tree-sparse L'DL  41 us, dense Cholesky 29 us (vmap 256:  643 /  551 us)
# The tree-sparse version is nv unrolled gather/scatter steps; it is kept as a reference.


def factor_m_ltdl(m: Model, qm: jax.Array, *, min_pivot: float | None = None
                  ) -> tuple[jax.Array, jax.Array]:
    """Tree-sparse M = L' D L (mj_factorI); qLD holds L below and D on the diagonal.

    ``min_pivot`` raises pivots below it to it, as mj_factorI does with mjMINVAL, so a
    singular M (a body with dofs but no inertia) gives huge finite inverses instead of NaN."""
    parent = np.asarray(m.dof_parentid)
    qld = qm
    for k in range(m.nv - 1, -1, -1):
        if min_pivot is not None:
            qld = qld.at[k, k].set(jp.maximum(qld[k, k], min_pivot))
        a = []
        j = parent[k]
        while j >= 0:
            a.append(j)
            j = parent[j]
        if not a:
            continue
        a = np.array(a)
        row = qld[k, a]
        scaled = row / qld[k, k]
        qld = qld.at[a[:, None], a[None, :]].add(-scaled[:, None] * row[None, :])
        qld = qld.at[k, a].set(scaled)
    qld = jp.tril(qld)
    return qld, 1.0 / jp.diag(qld)


def factor_m_dense(qm: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The same L' D L factor (same layout) by a dense Cholesky of the dof-reversed M."""
    c = linalg.cholesky(qm[::-1, ::-1])
    cd = jp.diag(c)
    # C = P L' P sqrt(P D P) with P the reversal: unit-scale the columns, undo the reversal
    lt = (c / cd[None, :])[::-1, ::-1]  # = L' (unit upper)
    diag = (cd * cd)[::-1]
    qld = jp.tril(lt.T, -1) + jp.diag(diag)
    return qld, 1.0 / diag


def solve_ltdl(qld: jax.Array, diag_inv: jax.Array, x: jax.Array) -> jax.Array:
    """Solves (L' D L) y = x given qLD (L below, D on the diagonal); x (nv,) or (nv, k)."""
    unit = jp.tril(qld, -1) + jp.eye(qld.shape[0], dtype=qld.dtype)
    vec = x.ndim == 1
    x = x[:, None] if vec else x
    y = linalg.solve_triangular(unit, x, True, True)
    y = y * diag_inv[:, None]
    y = linalg.solve_triangular(unit, y, False, True)
    return y[:, 0] if vec else y


# Which factorization factor_m uses (see the timings above); both give the same qLD layout.
FACTOR = "dense"


def factor_m(m: Model, d: Data) -> Data:
    """Factorizes qM = L' D L into qLD (L strictly below, D on the diagonal) and
    qLDiagInv = 1 / D, MuJoCo's factor in dense storage (mj_factorM)."""
    if FACTOR == "ltdl":
        qld, dinv = factor_m_ltdl(m, d.qM)
    else:
        qld, dinv = factor_m_dense(d.qM)
    return d.replace(qLD=qld, qLDiagInv=dinv)


def solve_m(m: Model, d: Data, x: jax.Array) -> jax.Array:
    """M^-1 x from the factor in d (mj_solveM); x (nv,) or (nv, k)."""
    return solve_ltdl(d.qLD, d.qLDiagInv, x)


def mul_m(m: Model, d: Data, x: jax.Array) -> jax.Array:
    """M x (mj_mulM); x (nv,) or (nv, k)."""
    return d.qM @ x


# ------------------------------------------------------------------------------------------
# tendons, Jacobians, transmissions


def tendon(m: Model, d: Data) -> Data:
    """Tendon lengths and moments, fixed and spatial (mj_tendon): see ``mjx_lite.tendon``."""
    from mjx_lite import tendon as tendon_  # tendon.py imports this module

    return tendon_.tendon(m, d)


def jac_offset(m: Model, d: Data, point: jax.Array, body_id) -> tuple[jax.Array, jax.Array]:
    """What ``jac`` combines with cdof: the point's offset (..., 3) from its tree's center of
    mass (subtree_com of the root) and the mask (..., nv) of the dofs that move the body."""
    mask = jp.asarray(tree.body_dof_mask(m))[body_id]
    root = jp.asarray(np.asarray(m.body_rootid))[body_id]
    return point - d.subtree_com[root], mask


def jac(m: Model, d: Data, point: jax.Array, body_id) -> tuple[jax.Array, jax.Array]:
    """Translational and rotational Jacobians (3, nv) of a point on a body (mj_jac).

    ``body_id`` may be a Python int or a traced integer; ``point`` and ``body_id`` may carry
    matching leading batch axes.
    """
    offset, mask = jac_offset(m, d, point, body_id)
    ang, lin = d.cdof[:, :3].T, d.cdof[:, 3:].T  # (3, nv)
    # ang x offset = -skew(offset) ang, as a matrix product: the elementwise form (a cross
    # product broadcast over points and dofs) transposes into multiply-reduce fusions that
    # jaxlib 0.10's CPU backend hands to YNNPACK, at 150-370 us each for 190 points
    # (gymnasium humanoid's contacts; docs/gradients.md)
    lin = lin - jp.einsum("...ij,jv->...iv", math.skew(offset), ang)
    jacp = where(mask[..., None, :], lin, 0.0)
    jacr = where(mask[..., None, :], ang, 0.0)
    return jacp, jacr


def _site_quat(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
    return math.quat_mul(d.xquat[np.asarray(m.site_bodyid)[ids]], jp.asarray(m.site_quat)[ids])


def transmission(m: Model, d: Data) -> Data:
    """actuator_length and dense actuator_moment (nu, nv) (mj_transmission).

    Body transmissions (adhesion) use the contacts in d.contact, so this runs after collision;
    the MuJoCo 4.0 SO3 transmission is not implemented yet.
    """
    if not m.nu:
        return d
    nu, nv = m.nu, m.nv
    dtype = d.qpos.dtype
    trn = np.asarray(m.actuator_trntype)
    trnid = np.asarray(m.actuator_trnid)
    gear = jp.asarray(m.actuator_gear)
    length = jp.zeros(nu, dtype=dtype)
    moment = jp.zeros((nu, nv), dtype=dtype)
    jtype_all = np.asarray(m.jnt_type)
    qadr_all = np.asarray(m.jnt_qposadr)
    dadr_all = np.asarray(m.jnt_dofadr)

    isjoint = np.isin(trn, (TrnType.JOINT, TrnType.JOINTINPARENT))
    jid = np.where(isjoint, trnid[:, 0], 0)
    jt = jtype_all[jid] if m.njnt else np.zeros(nu, int)

    # slide and hinge: scalar gear
    a = np.nonzero(isjoint & np.isin(jt, (JointType.SLIDE, JointType.HINGE)))[0]
    if a.size:
        length = length.at[a].set(math.take(d.qpos, qadr_all[jid[a]]) * gear[a, 0])
        moment = moment.at[a, dadr_all[jid[a]]].set(gear[a, 0])

    # ball: length = rotation vector . gear axis; jointinparent rotates the gear by q^-1
    a = np.nonzero(isjoint & (jt == JointType.BALL))[0]
    if a.size:
        q = math.quat_normalize(d.qpos[qadr_all[jid[a]][:, None] + np.arange(4)])
        gax = gear[a, :3]
        inpar = (trn[a] == TrnType.JOINTINPARENT)[:, None]
        gax = where(inpar, math.rotate(gax, math.quat_conj(q)), gax)
        length = length.at[a].set(jp.sum(math.quat_to_vel(q) * gax, -1))
        moment = moment.at[a[:, None], dadr_all[jid[a]][:, None] + np.arange(3)].set(gax)

    # free: no meaningful length; translational gear as is, rotational maybe rotated
    a = np.nonzero(isjoint & (jt == JointType.FREE))[0]
    if a.size:
        q = math.quat_normalize(d.qpos[qadr_all[jid[a]][:, None] + 3 + np.arange(4)])
        gax = gear[a, 3:]
        inpar = (trn[a] == TrnType.JOINTINPARENT)[:, None]
        gax = where(inpar, math.rotate(gax, math.quat_conj(q)), gax)
        full = jp.concatenate([gear[a, :3], gax], axis=-1)
        moment = moment.at[a[:, None], dadr_all[jid[a]][:, None] + np.arange(6)].set(full)

    # tendon: scaled tendon length and Jacobian
    a = np.nonzero(trn == TrnType.TENDON)[0]
    if a.size:
        t = trnid[a, 0]
        length = length.at[a].set(d.ten_length[t] * gear[a, 0])
        moment = moment.at[a].set(d.ten_J[t] * gear[a, :1])

    # site without refsite: Jacobian projected on the gear wrench in the site frame
    a = np.nonzero((trn == TrnType.SITE) & (trnid[:, 1] < 0))[0]
    if a.size:
        s = trnid[a, 0]
        sb = np.asarray(m.site_bodyid)[s]
        jp_, jr = jac(m, d, d.site_xpos[s], sb)
        wf = jp.einsum("aij,aj->ai", d.site_xmat[s], gear[a, :3])
        wt = jp.einsum("aij,aj->ai", d.site_xmat[s], gear[a, 3:])
        mom = jp.einsum("aiv,ai->av", jp_, wf) + jp.einsum("aiv,ai->av", jr, wt)
        moment = moment.at[a].set(mom)

    # site with refsite: length and Jacobian relative to the reference site's frame
    a = np.nonzero((trn == TrnType.SITE) & (trnid[:, 1] >= 0))[0]
    if a.size:
        s, r = trnid[a, 0], trnid[a, 1]
        sb, rb = np.asarray(m.site_bodyid)[s], np.asarray(m.site_bodyid)[r]
        rmat = d.site_xmat[r]
        vec = jp.einsum("aji,aj->ai", rmat, d.site_xpos[s] - d.site_xpos[r])
        qrel = math.quat_mul(math.quat_conj(_site_quat(m, d, r)), _site_quat(m, d, s))
        ln = jp.sum(vec * gear[a, :3], -1) + jp.sum(math.quat_to_vel(qrel) * gear[a, 3:], -1)
        wf = jp.einsum("aij,aj->ai", rmat, gear[a, :3])
        wt = jp.einsum("aij,aj->ai", rmat, gear[a, 3:])
        jps, jrs = jac(m, d, d.site_xpos[s], sb)
        jpr, jrr = jac(m, d, d.site_xpos[r], rb)
        # the length is measured in the ref frame, so the ref frame's rotation counts too:
        # d(R' v)/dq = R' (dv/dq - w x v)
        dvec = d.site_xpos[s] - d.site_xpos[r]
        rot_term = jp.swapaxes(math.cross(jp.swapaxes(jrr, -1, -2), dvec[:, None, :]), -1, -2)
        jdiff = jps - jpr - rot_term
        mom = jp.einsum("aiv,ai->av", jdiff, wf) + jp.einsum("aiv,ai->av", jrs - jrr, wt)
        length = length.at[a].set(ln)
        moment = moment.at[a].set(mom)

    # slider-crank: length = a.v - sqrt((a.v)^2 + r^2 - v.v), v crank - slider, a slider z
    a = np.nonzero(trn == TrnType.SLIDERCRANK)[0]
    if a.size:
        s, sl = trnid[a, 0], trnid[a, 1]
        rod = jp.asarray(m.actuator_cranklength)[a]
        axis = d.site_xmat[sl][:, :, 2]
        vec = d.site_xpos[s] - d.site_xpos[sl]
        av = jp.sum(vec * axis, -1)
        det = av * av + rod * rod - jp.sum(vec * vec, -1)
        ok = det > 0
        sdet = jp.sqrt(where(ok, det, 1.0))
        ln = where(ok, av - sdet, av)
        fac = where(ok, 1.0 - av / sdet, 1.0)[:, None]
        dldv = where(ok[:, None], axis * fac + vec / sdet[:, None], axis)
        dlda = where(ok[:, None], vec * fac, vec)
        jps, _ = jac(m, d, d.site_xpos[s], np.asarray(m.site_bodyid)[s])
        jpl, jrl = jac(m, d, d.site_xpos[sl], np.asarray(m.site_bodyid)[sl])
        # d(axis)/dq: rotational Jacobian columns crossed with the axis
        jaxis = math.cross(jp.swapaxes(jrl, -1, -2), axis[:, None, :])  # (a, nv, 3)
        mom = jp.einsum("avi,ai->av", jaxis, dlda) + jp.einsum("aiv,ai->av", jps - jpl, dldv)
        length = length.at[a].set(ln * gear[a, 0])
        moment = moment.at[a].set(mom * gear[a, :1])

    # body: minus the mean normal Jacobian of the contacts touching the body's geoms (gap
    # contacts included), length 0, gear unused (Computation "Actuation model", body)
    a = np.nonzero(trn == TrnType.BODY)[0]
    con = getattr(d, "contact", None)
    if a.size and con is not None and con.dist.shape[0]:
        moment = moment.at[a].set(_body_moment(m, d, con, trnid[a, 0]))

    return d.replace(actuator_length=length, actuator_moment=moment)


def _body_moment(m: Model, d: Data, con, bodies: np.ndarray) -> jax.Array:
    """(len(bodies), nv) moments of body transmissions from the contacts in ``con``."""
    from mjx_lite import constraint  # constraint.py imports this module

    jn = constraint.contact_jacobian(m, d, con, 1)[:, 0]  # (ncon, nv) normal rows
    gb = jp.asarray(np.asarray(m.geom_bodyid))
    real = jp.all(con.geom >= 0, axis=-1)
    if getattr(con, "valid", None) is not None:
        real = real & con.valid
    cb = gb[jp.maximum(con.geom, 0)]  # (ncon, 2)
    body = jp.asarray(bodies)[:, None, None]
    touch = real[None] & jp.any(cb[None] == body, axis=-1)  # (na, ncon)
    count = jp.sum(touch, axis=-1, keepdims=True)
    tot = where(touch, 1.0, 0.0).astype(jn.dtype) @ jn
    return -tot / jp.maximum(count, 1).astype(jn.dtype)


# ------------------------------------------------------------------------------------------
# velocities and bias forces


def _same_body_before(m: Model) -> np.ndarray:
    """Static (nv, nv) mask: [i, j] when dof j is in i's body and its joint precedes i's
    (ball/free rotations use the body velocity from before the whole 3-dof group)."""
    jtype, k, body, jnt = _dof_static(m)
    # free: translations are their own group, rotations a second group
    group = jnt * 2 + ((jtype == JointType.FREE) & (k >= 3))
    out = (body[:, None] == body[None, :]) & (group[None, :] < group[:, None])
    return out


def com_vel(m: Model, d: Data) -> Data:
    """Body spatial velocities cvel and cdof_dot = cvel x cdof (mj_comVel)."""
    jtype, k, body, _ = _dof_static(m)
    vdof = d.cdof * d.qvel[:, None]
    local = jax.ops.segment_sum(vdof, body, num_segments=m.nbody)
    cvel = tree.scan_down(m, lambda p, loc: p + loc, local, jp.zeros(6, d.qvel.dtype))
    parent = np.asarray(m.body_parentid)[body]
    before = cvel[parent] + jp.asarray(_same_body_before(m), dtype=vdof.dtype) @ vdof
    cdof_dot = math.motion_cross(before, d.cdof)
    # free translations have zero cdof_dot by convention
    free_t = ((jtype == JointType.FREE) & (k < 3))[:, None]
    cdof_dot = where(free_t, 0.0, cdof_dot)
    return d.replace(cvel=cvel, cdof_dot=cdof_dot)


def rne(m: Model, d: Data, flg_acc: bool = False) -> Data:
    """qfrc_bias: Coriolis, centrifugal and gravity forces by recursive Newton-Euler (mj_rne).

    With ``flg_acc`` the joint accelerations d.qacc are included (inverse dynamics).
    """
    dtype = d.qvel.dtype
    body = np.asarray(m.dof_bodyid)
    root = jp.zeros(6, dtype)
    if not m.opt.disableflags & DisableBit.GRAVITY:
        root = root.at[3:].set(-jp.asarray(m.opt.gravity, dtype))
    acc = d.cdof_dot * d.qvel[:, None]
    if flg_acc:
        acc = acc + d.cdof * d.qacc[:, None]
    local = jax.ops.segment_sum(acc, body, num_segments=m.nbody)
    cacc = tree.scan_down(m, lambda p, loc: p + loc, local, root)
    f = math.inert_mul(d.cinert, cacc) + math.force_cross(d.cvel, math.inert_mul(d.cinert, d.cvel))
    f = tree.scan_up(m, f.at[0].set(0.0))
    qfrc_bias = jp.sum(d.cdof * math.take(f, body), axis=-1)
    return d.replace(qfrc_bias=qfrc_bias)


def subtree_vel(m: Model, d: Data) -> Data:
    """subtree_linvel and subtree_angmom about each subtree's com (mj_subtreeVel)."""
    mass = jp.asarray(m.body_mass)
    smass = jp.asarray(m.body_subtreemass)
    root = np.asarray(m.body_rootid)
    parent = np.asarray(m.body_parentid)
    bvel = math.transform_motion(d.cvel, d.xipos, d.subtree_com[root])
    lin_mom = tree.scan_up(m, bvel[:, 3:] * mass[:, None])
    linvel = lin_mom / jp.maximum(smass, math.MINVAL)[:, None]

    # own spin: R diag(I) R' w
    wl = jp.einsum("bji,bj->bi", d.ximat, bvel[:, :3]) * jp.asarray(m.body_inertia)
    own = jp.einsum("bij,bj->bi", d.ximat, wl)
    # body's translational momentum about its subtree com
    dx = d.xipos - d.subtree_com
    dp = (bvel[:, 3:] - linvel) * mass[:, None]
    own = own + where((np.arange(m.nbody) > 0)[:, None], math.cross(dx, dp), 0.0)
    # each child subtree's momentum about the parent's subtree com
    dxc = d.subtree_com - d.subtree_com[parent]
    dvc = (linvel - linvel[parent]) * smass[:, None]
    extra = math.cross(dxc, dvc).at[0].set(0.0)
    own = own + jax.ops.segment_sum(extra, parent, num_segments=m.nbody)
    angmom = tree.scan_up(m, own)
    return d.replace(subtree_linvel=linvel, subtree_angmom=angmom)


def tendon_velocity(m: Model, d: Data) -> Data:
    """ten_velocity = ten_J qvel."""
    return d.replace(ten_velocity=d.ten_J @ d.qvel)


def actuator_velocity(m: Model, d: Data) -> Data:
    """actuator_velocity = actuator_moment qvel."""
    return d.replace(actuator_velocity=d.actuator_moment @ d.qvel)


# ------------------------------------------------------------------------------------------
# post-constraint Newton-Euler


def _weld_torque_map(q1inv: jax.Array, q0: jax.Array) -> jax.Array:
    """(n, 3, 3) A with [q1^-1 (0, w) q0]_xyz = A w: the weld rows' rotational Jacobian is
    0.5 torquescale A (jr0 - jr1), so a row force f acts as the world torque
    0.5 torquescale A' f on body 0 (and its opposite on body 1)."""
    basis = jp.concatenate([jp.zeros((3, 1), q0.dtype), jp.eye(3, dtype=q0.dtype)], 1)
    cols = math.quat_mul(math.quat_mul(q1inv[:, None], basis[None]), q0[:, None])[..., 1:]
    return jp.swapaxes(cols, 1, 2)


def _equality_wrenches(m: Model, d: Data, plan) -> tuple[list, list, list]:
    """World [torque; force] of connect and weld rows with their application points/bodies."""
    from mjx_lite import constraint  # constraint.py imports this module

    wrench, point, body = [], [], []
    if not plan.ne:
        return wrench, point, body
    eq_type = np.asarray(m.eq_type)[plan.eq_ids]
    for etype, slots in ((EqType.CONNECT, (0, 1)), (EqType.WELD, (1, 0))):
        sel = np.nonzero(eq_type == etype)[0]
        if not sel.size:
            continue
        ids = plan.eq_ids[sel]
        b, pts, quats, data, site = constraint._eq_points(m, d, ids, slots)
        k = 6 if etype == EqType.WELD else 3
        rows = plan.eq_start[sel][:, None] + np.arange(k)
        f = d.efc_force[rows]
        torque = jp.zeros_like(f[:, :3])
        if etype == EqType.WELD:
            q0 = where(site[:, None], quats[0], math.quat_mul(quats[0], data[:, 6:10]))
            amat = _weld_torque_map(math.quat_conj(quats[1]), q0)
            torque = 0.5 * data[:, 10:11] * jp.einsum("nij,ni->nj", amat, f[:, 3:])
        w = jp.concatenate([torque, f[:, :3]], 1)
        for side, sign in ((0, 1.0), (1, -1.0)):
            wrench.append(sign * w)
            point.append(pts[side])
            body.append(b[side])
    return wrench, point, body


def needs_rne_post(m: Model) -> bool:
    """Whether mj_forward computes cacc / cfrc_* (mj_sensorAcc calls mj_rnePostConstraint only
    for accelerometer, force, torque, framelinacc and frameangacc sensors); otherwise MuJoCo
    leaves them as they were, and so do forward and step."""
    if not m.nsensor or m.opt.disableflags & DisableBit.SENSOR:
        return False
    types = np.asarray(m.sensor_type)
    need = (SensorType.ACCELEROMETER, SensorType.FORCE, SensorType.TORQUE,
            SensorType.FRAMELINACC, SensorType.FRAMEANGACC)
    return bool(np.isin(types, need).any())


def rne_post_constraint(m: Model, d: Data) -> Data:
    """cacc, cfrc_int, cfrc_ext with the final accelerations and constraint forces
    (mj_rnePostConstraint; API reference, "mj_rnePostConstraint").

    cfrc_ext collects xfrc_applied, contact forces (mapped from the contact frames) and the
    forces of connect and weld equalities, each as a [torque; force] about the subtree com of
    the body's root; cfrc_int = cinert cacc + cvel x* (cinert cvel) - cfrc_ext, summed from
    the leaves. MuJoCo 4.0 also collects the forces of spatial tendons on the bodies along
    their paths (``tendon.spatial_wrenches``).
    Like MuJoCo, forward/step call this only when a sensor needs it (see ``needs_rne_post``).
    """
    from mjx_lite import constraint, support, tendon  # they import this module
    from mjx_lite.forward import tendon_jdot_qvel
    dtype = d.qvel.dtype
    nb = m.nbody
    root = np.asarray(m.body_rootid)
    bodies = np.arange(1, nb)

    ext = jp.zeros((nb, 6), dtype)
    if bodies.size:
        x = d.xfrc_applied[bodies]
        ft = jp.concatenate([x[:, 3:], x[:, :3]], 1)
        ext = ext.at[bodies].add(
            math.transform_force(ft, d.subtree_com[root[bodies]], d.xipos[bodies]))

    wrenches, points, owners = [], [], []
    con = getattr(d, "contact", None)
    if con is not None and con.dist.shape[0] and m.nv:
        n = con.dist.shape[0]
        lfrc = jax.vmap(lambda i: support.contact_force(m, d, i))(jp.arange(n))
        # contact frame rows are the axes: world vectors are frame' @ local
        force = jp.einsum("nji,nj->ni", con.frame, lfrc[:, :3])
        torque = jp.einsum("nji,nj->ni", con.frame, lfrc[:, 3:])
        w = jp.concatenate([torque, force], 1)
        gb = jp.asarray(np.asarray(m.geom_bodyid))
        for side, sign in ((0, -1.0), (1, 1.0)):
            g = con.geom[:, side]
            wrenches.append(where((g >= 0)[:, None], sign * w, 0.0))
            points.append(con.pos)
            owners.append(where(g >= 0, gb[jp.maximum(g, 0)], 0))
    ew, ep, eb = _equality_wrenches(m, d, constraint.row_plan(m, 0))
    wrenches += ew
    points += ep
    owners += [jp.asarray(b) for b in eb]
    if tendon.spatial_tendons(m).size:
        force = tendon.tendon_force(m, d, tendon_jdot_qvel(m, d))
        tw, tp, tb = tendon.spatial_wrenches(m, d, force)
        wrenches += tw
        points += tp
        owners += tb
    if wrenches:
        w = jp.concatenate(wrenches)
        b = jp.concatenate(owners)
        com = d.subtree_com[jp.asarray(root)[b]]
        w = math.transform_force(w, com, jp.concatenate(points))
        # the world body receives no external force
        w = where((b > 0)[:, None], w, 0.0)
        ext = ext + jax.ops.segment_sum(w, b, num_segments=nb)

    root_acc = jp.zeros(6, dtype)
    if not m.opt.disableflags & DisableBit.GRAVITY:
        root_acc = root_acc.at[3:].set(-jp.asarray(m.opt.gravity, dtype))
    acc = d.cdof_dot * d.qvel[:, None] + d.cdof * d.qacc[:, None]
    local = jax.ops.segment_sum(acc, np.asarray(m.dof_bodyid), num_segments=nb)
    cacc = tree.scan_down(m, lambda p, loc: p + loc, local, root_acc)
    body = math.inert_mul(d.cinert, cacc) + math.force_cross(
        d.cvel, math.inert_mul(d.cinert, d.cvel))
    cfrc_int = tree.scan_up(m, (body - ext).at[0].set(0.0))
    return d.replace(cacc=cacc, cfrc_int=cfrc_int, cfrc_ext=ext)

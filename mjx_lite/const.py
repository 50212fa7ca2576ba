"""Model constants evaluated at qpos0 (mj_setConst): inverse weights, accelerations, lengths,
mean inertia and the reference poses of cameras and lights.

Pure JAX, so the constants are differentiable with respect to the physical parameters
(``body_mass``, ``body_inertia``, ``dof_armature``, ...). The compiler calls ``set_const`` once;
after randomizing inertial parameters, call it again to refresh the derived fields.
"""

from __future__ import annotations

import jax.numpy as jp
import numpy as np

from mjx_lite import math, smooth, tree
from mjx_lite.io import make_data
from mjx_lite.types import JointType, Model

_MINVAL = 1e-15  # mjMINVAL


def _dof_invweight0(m: Model, minv_diag):
    """Per-dof diag(M^-1), averaged over the translations and the rotations of each joint."""
    jtype = np.asarray(m.jnt_type)[np.asarray(m.dof_jntid)]
    k = np.arange(m.nv) - np.asarray(m.jnt_dofadr)[np.asarray(m.dof_jntid)]
    # group id: joint * 2 + (1 for free rotations)
    group = np.asarray(m.dof_jntid) * 2 + ((jtype == JointType.FREE) & (k >= 3))
    avg = np.zeros((m.nv, m.nv))
    for g in np.unique(group):
        idx = np.nonzero(group == g)[0]
        avg[np.ix_(idx, idx)] = 1.0 / idx.size
    return jp.asarray(avg) @ minv_diag


def set_const(m: Model) -> Model:
    """Returns m with the qpos0 constants recomputed (mj_setConst)."""
    # subtree masses first: subtree_com (and so cdof, M) depends on them
    m = m.replace(body_subtreemass=tree.scan_up(m, jp.asarray(m.body_mass)))
    d = make_data(m)
    d = smooth.kinematics(m, d)
    d = smooth.com_pos(m, d)
    d = smooth.tendon(m, d)
    d = smooth.crb(m, d)
    d = smooth.factor_m(m, d)
    d = smooth.transmission(m, d)
    nv = m.nv
    dtype = d.qpos.dtype
    minv = smooth.solve_m(m, d, jp.eye(nv, dtype=dtype)) if nv else jp.zeros((0, 0), dtype)
    changes = {}
    if nv:
        diag_m = jp.diag(d.qM)
        # dof_M0 is taken before tendon armature joins M (measured on MuJoCo 4.0).
        tendon_arm = jp.einsum("ti,t,ti->i", d.ten_J, m.tendon_armature, d.ten_J) \
            if m.ntendon else 0.0
        changes["dof_M0"] = diag_m - tendon_arm
        dof_inv = _dof_invweight0(m, jp.diag(minv))
        changes["stat"] = m.stat.replace(meaninertia=jp.mean(diag_m))

        # body: translational and rotational blocks of J M^-1 J' at the body's com
        bodies = np.arange(m.nbody)
        jacp, jacr = smooth.jac(m, d, d.xipos, bodies)  # (nbody, 3, nv)
        tran = jp.einsum("bij,jk,bik->b", jacp, minv, jacp) / 3.0
        rot = jp.einsum("bij,jk,bik->b", jacr, minv, jacr) / 3.0
        inv0 = jp.stack([tran, rot], axis=1).at[0].set(0.0)
        # Slider-only simple bodies: MuJoCo 4.0 uses the bare mass (armature ignored).
        sliders = np.nonzero(np.asarray(m.body_simple) == 2)[0]
        if sliders.size:
            inv_mass = 1.0 / jp.maximum(m.body_mass[sliders], _MINVAL)
            inv0 = inv0.at[sliders].set(jp.stack([inv_mass, 0.0 * inv_mass], axis=1))
            dofs = np.concatenate([np.arange(m.body_dofadr[b], m.body_dofadr[b] +
                                             m.body_dofnum[b]) for b in sliders])
            owner = np.searchsorted(sliders, np.asarray(m.dof_bodyid)[dofs])
            dof_inv = dof_inv.at[dofs].set(inv_mass[owner])
        changes["body_invweight0"] = inv0
        changes["dof_invweight0"] = dof_inv
        if m.ntendon:
            changes["tendon_invweight0"] = jp.einsum("ti,ij,tj->t", d.ten_J, minv, d.ten_J)
        if m.nu:
            acc = d.actuator_moment @ minv  # rows: M^-1 moment_i
            changes["actuator_acc0"] = jp.sqrt(jp.sum(acc * acc, axis=1))
    else:
        changes["stat"] = m.stat.replace(meaninertia=jp.asarray(1.0, dtype))
    if m.ntendon:
        changes["tendon_length0"] = d.ten_length
        changes["tendon_lengthspring"] = _lengthspring(m, d.ten_length)
    if m.nu:
        changes["actuator_length0"] = d.actuator_length
    # reference poses as if every camera/light were fixed to its body (mode-independent)
    if m.ncam:
        body = np.asarray(m.cam_bodyid)
        pos0 = jp.einsum("kij,kj->ki", d.xmat[body], m.cam_pos)
        changes["cam_pos0"] = pos0
        changes["cam_poscom0"] = d.xpos[body] + pos0 - d.subtree_com[_com_ref(m, "cam")]
        changes["cam_mat0"] = d.xmat[body] @ math.quat_to_mat(m.cam_quat)
    if m.nlight:
        body = np.asarray(m.light_bodyid)
        pos0 = jp.einsum("kij,kj->ki", d.xmat[body], m.light_pos)
        changes["light_pos0"] = pos0
        changes["light_poscom0"] = d.xpos[body] + pos0 - d.subtree_com[_com_ref(m, "light")]
        changes["light_dir0"] = jp.einsum("kij,kj->ki", d.xmat[body], m.light_dir)
    return m.replace(**changes)


def _com_ref(m: Model, kind: str) -> np.ndarray:
    """Body whose subtree com a camera/light tracks: the target body in targetbodycom mode."""
    body = np.asarray(getattr(m, f"{kind}_bodyid"))
    target = np.asarray(getattr(m, f"{kind}_targetbodyid"))
    mode = np.asarray(getattr(m, f"{kind}_mode"))
    return np.where((mode >= 3) & (target >= 0), target, body)


def _lengthspring(m: Model, length0):
    """Spatial tendons' automatic spring length, the length at qpos_spring (tendon/spatial,
    springlength = -1). The compiler leaves a wrapping tendon's row at its provisional
    length0 (both entries); those rows get the wrapped length at qpos_spring."""
    spring = jp.asarray(m.tendon_lengthspring)
    spatial = np.asarray(m.tendon_type) != 0
    prov = jp.asarray(m.tendon_length0)
    auto = spatial & (spring[:, 0] == prov) & (spring[:, 1] == prov)
    if not spatial.any():
        return spring
    d = make_data(m).replace(qpos=jp.asarray(m.qpos_spring))
    d = smooth.tendon(m, smooth.com_pos(m, smooth.kinematics(m, d)))
    return jp.where(auto[:, None], d.ten_length[:, None], spring)

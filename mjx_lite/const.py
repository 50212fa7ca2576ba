"""Model constants evaluated at qpos0 (mj_setConst): inverse weights, accelerations, lengths,
mean inertia and the reference poses of cameras and lights.

Pure JAX, so the constants are differentiable with respect to the physical parameters
(``body_mass``, ``body_inertia``, ``dof_armature``, ...). The compiler calls ``set_const`` once;
after randomizing inertial parameters, call it again to refresh the derived fields.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math, smooth, tree
from mjx_lite.io import make_data
from mjx_lite.math import where
from mjx_lite.types import GeomType, JointType, Model

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


# one compiled program per model: run op by op, its first call on a wrapping-tendon model
# spent ~30 s compiling each operation alone (jitted: 9 s)
@functools.partial(jax.jit, static_argnames=("meaninertia",))
def set_const(m: Model, *, meaninertia: bool = False) -> Model:
    """Returns m with the qpos0 constants recomputed (mj_setConst).

    MuJoCo 4.0's mj_setConst leaves ``stat.meaninertia`` as compiled (measured), so this does
    too unless ``meaninertia=True`` (the compiler's path: the mean diagonal of M at qpos0)."""
    # subtree masses first: subtree_com (and so cdof, M) depends on them
    m = m.replace(body_subtreemass=tree.scan_up(m, jp.asarray(m.body_mass)))
    d = make_data(m)
    d = smooth.kinematics(m, d)
    d = smooth.com_pos(m, d)
    d = smooth.tendon(m, d)
    d = smooth.crb(m, d)
    # mj_setConst's factorization clamps tiny pivots (singular M stays finite)
    qld, dinv = smooth.factor_m_ltdl(m, d.qM, min_pivot=_MINVAL) if m.nv else (d.qLD, d.qLDiagInv)
    d = smooth.transmission(m, d.replace(qLD=qld, qLDiagInv=dinv))
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
        if meaninertia:
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
    elif meaninertia:
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
    if m.ngeom:
        changes.update(_geom_bounds(m))
    return m.replace(**changes)


def _geom_bounds(m: Model) -> dict:
    """geom_rbound and geom_aabb (centre, half sizes, geom frame) from geom_size, and the
    size of height-field geoms from hfield_size, which MuJoCo 4.0's mj_setConst rewrites
    (measured: it rewrites them after geom_size changes). Mesh bounds come from the mesh
    and stay as compiled."""
    gtype = np.asarray(m.geom_type)
    s = jp.asarray(m.geom_size)
    zero = jp.zeros_like(s[:, 0])
    if m.nhfield:
        hs = jp.asarray(m.hfield_size)[np.clip(np.asarray(m.geom_dataid), 0, None)]
        is_hf = (gtype == GeomType.HFIELD)[:, None]
        s = where(is_hf, jp.stack([hs[:, 0], hs[:, 1], 0.25 * hs[:, 2] + 0.5 * hs[:, 3]],
                                     axis=1), s)
    else:
        hs = jp.zeros((s.shape[0], 4), s.dtype)
    r0, r1, r2 = s[:, 0], s[:, 1], s[:, 2]
    hf_centre = (hs[:, 2] - hs[:, 3]) / 2
    hf_half = (hs[:, 2] + hs[:, 3]) / 2
    per_type = {  # type: (rbound, centre z, half sizes)
        GeomType.SPHERE: (r0, zero, (r0, r0, r0)),
        GeomType.CAPSULE: (r0 + r1, zero, (r0, r0, r0 + r1)),
        GeomType.ELLIPSOID: (jp.maximum(jp.maximum(r0, r1), r2), zero, (r0, r1, r2)),
        GeomType.CYLINDER: (jp.sqrt(r0 * r0 + r1 * r1), zero, (r0, r0, r1)),
        GeomType.BOX: (jp.sqrt(r0 * r0 + r1 * r1 + r2 * r2), zero, (r0, r1, r2)),
        GeomType.HFIELD: (jp.sqrt(hs[:, 0] ** 2 + hs[:, 1] ** 2 + (jp.abs(hf_centre) +
                                                                   hf_half) ** 2),
                          hf_centre, (hs[:, 0], hs[:, 1], hf_half)),
    }
    rbound = jp.asarray(m.geom_rbound)
    aabb = jp.asarray(m.geom_aabb)
    for t, (rb, cz, half) in per_type.items():
        sel = gtype == t
        if not sel.any():
            continue
        box = jp.stack([zero, zero, cz, *half], axis=1)
        rbound = where(sel, rb, rbound)
        aabb = where(sel[:, None], box, aabb)
    return {"geom_size": s, "geom_rbound": rbound, "geom_aabb": aabb}


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
    return where(auto[:, None], d.ten_length[:, None], spring)

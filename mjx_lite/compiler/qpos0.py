"""The constants mj_setConst computes at qpos0, evaluated in numpy for the compiler.

``mjx_lite.const.set_const`` computes the same quantities in JAX (differentiable, for models
whose parameters were changed after compilation); compiling a model cannot afford XLA's compile
time for every new model structure, so the compiler evaluates the formulas here, at qpos0, with
plain numpy. Seed ``002``, "Constraint model" (invweight0 scales soft constraints) and the
actuator shortcuts' dampratio (XML reference, actuator/position). A test checks both agree.

At qpos0 every joint is at its reference, so body poses compose body frames (``body_xpos0``),
and the joint-space inertia is M = sum_b J_b' I_b J_b over bodies, with J_b the Jacobian of the
body's centre of mass and rotation, plus armature on the diagonal.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from mjx_lite.compiler.frames import quat_mul, quat_to_mat
from mjx_lite.types import JointType, TrnType, WrapType

_MINVAL = 1e-15


def supported(f: dict) -> bool:
    """Whether every transmission and tendon has a closed form here (else use set_const)."""
    for t in range(f.get("ntendon", 0)):
        adr, num = f["tendon_adr"][t], f["tendon_num"][t]
        types = set(int(x) for x in f["wrap_type"][adr:adr + num])
        if types & {WrapType.SPHERE, WrapType.CYLINDER}:
            return False
    trn = set(int(x) for x in f.get("actuator_trntype", ()))
    return not trn & {TrnType.SLIDERCRANK, TrnType.BODY, TrnType.SO3} and not any(
        f["actuator_trntype"][i] == TrnType.SITE and f["actuator_trnid"][i][1] >= 0
        for i in range(f.get("nu", 0)))


def _jacobians(f: dict, point: np.ndarray, body: int, dof_axes, dof_anchor, dof_lin):
    """(3, nv) translational and rotational Jacobians of a point attached to ``body``."""
    nv = f["nv"]
    jacp, jacr = np.zeros((3, nv)), np.zeros((3, nv))
    b = body
    while b > 0:
        for k in range(f["body_dofnum"][b]):
            d = f["body_dofadr"][b] + k
            if dof_lin[d]:
                jacp[:, d] = dof_axes[d]
            else:
                jacr[:, d] = dof_axes[d]
                jacp[:, d] = np.cross(dof_axes[d], point - dof_anchor[d])
        b = f["body_parentid"][b]
    return jacp, jacr


def _dof_frames(f: dict, xpos, xmat):
    """World axis, anchor and translational flag of every dof at qpos0."""
    nv = f["nv"]
    axes, anchor, lin = np.zeros((nv, 3)), np.zeros((nv, 3)), np.zeros(nv, dtype=bool)
    for j in range(f["njnt"]):
        b, d0, jtype = f["jnt_bodyid"][j], f["jnt_dofadr"][j], f["jnt_type"][j]
        p = xpos[b] + xmat[b] @ f["jnt_pos"][j]
        if jtype == JointType.FREE:
            axes[d0:d0 + 3], lin[d0:d0 + 3] = np.eye(3), True
            axes[d0 + 3:d0 + 6], anchor[d0 + 3:d0 + 6] = xmat[b].T, xpos[b]
        elif jtype == JointType.BALL:
            axes[d0:d0 + 3], anchor[d0:d0 + 3] = xmat[b].T, p
        else:
            axes[d0] = xmat[b] @ f["jnt_axis"][j]
            anchor[d0], lin[d0] = p, jtype == JointType.SLIDE
    return axes, anchor, lin


def constants(f: dict) -> dict:
    """dof_M0, dof_invweight0, body_invweight0, tendon_invweight0, actuator_acc0, the
    dampratio -> kv conversion and stat.meaninertia, from the compiled fields ``f``."""
    nbody, nv = f["nbody"], f["nv"]
    xpos, xquat = f["body_xpos0"], f["body_xquat0"]
    xmat = np.array([quat_to_mat(q) for q in xquat])
    xipos = xpos + np.einsum("bij,bj->bi", xmat, f["body_ipos"])
    ximat = np.array([quat_to_mat(quat_mul(xquat[b], f["body_iquat"][b])) for b in range(nbody)])
    axes, anchor, lin = _dof_frames(f, xpos, xmat)
    jac = {b: _jacobians(f, xipos[b], b, axes, anchor, lin) for b in range(nbody)}
    mass_matrix = np.zeros((nv, nv))
    for b in range(1, nbody):
        jacp, jacr = jac[b]
        inertia = ximat[b] @ np.diag(f["body_inertia"][b]) @ ximat[b].T
        mass_matrix += f["body_mass"][b] * jacp.T @ jacp + jacr.T @ inertia @ jacr
    mass_matrix += np.diag(f["dof_armature"])
    for j in np.nonzero(np.asarray(f["jnt_actuatorid"]) >= 0)[0]:
        act, dof = f["jnt_actuatorid"][j], f["jnt_dofadr"][j]
        mass_matrix[dof, dof] += f["actuator_gear"][act][0] ** 2 * f["actuator_armature"][act]
    # dof_M0 is taken before tendon armature joins M (measured on MuJoCo 4.0).
    dof_m0 = np.diag(mass_matrix).copy()
    ten_jac = _tendon_jacobian(f, xpos, xmat, axes, anchor, lin)
    if f.get("ntendon", 0):
        arm = np.array(f["tendon_armature"], dtype=float)
        for t in np.nonzero(np.asarray(f["tendon_actuatorid"]) >= 0)[0]:
            act = f["tendon_actuatorid"][t]
            arm[t] += f["actuator_gear"][act][0] ** 2 * f["actuator_armature"][act]
        mass_matrix += ten_jac.T @ np.diag(arm) @ ten_jac
    out: dict = {}
    if nv == 0:
        out["meaninertia"] = 1.0
        return out
    factor = MujocoFactor(mass_matrix)
    out["dof_M0"] = dof_m0
    out["meaninertia"] = float(np.diag(mass_matrix).mean())
    dof_inv = _group_mean(f, np.diag(factor.quad(np.eye(nv))))
    inv0 = np.zeros((nbody, 2))
    for b in range(1, nbody):
        jacp, jacr = jac[b]
        inv0[b] = [np.trace(factor.quad(jacp)) / 3, np.trace(factor.quad(jacr)) / 3]
        if f["body_simple"][b] == 2:
            # Slider-only simple bodies: MuJoCo 4.0 uses the bare mass (measured: armature
            # and the number of sliders do not enter).
            inv0[b] = [1.0 / max(f["body_mass"][b], _MINVAL), 0.0]
            adr, num = f["body_dofadr"][b], f["body_dofnum"][b]
            dof_inv[adr:adr + num] = inv0[b, 0]
    out["body_invweight0"] = inv0
    out["dof_invweight0"] = dof_inv
    if f.get("ntendon", 0):
        out["tendon_invweight0"] = np.diag(factor.quad(ten_jac))
    if f.get("nu", 0):
        moment = _actuator_moment(f, ten_jac, xpos, xmat, axes, anchor, lin)
        acc = factor.solve(moment)
        out["actuator_acc0"] = np.sqrt((acc * acc).sum(1))
        out["actuator_biasprm"] = _dampratio_to_kv(f, moment, factor)
    return out


class MujocoFactor:
    """M = L' D L as MuJoCo factors it (from the last dof up), pivots clamped at 1e-15, so a
    singular M gives MuJoCo's large finite values rather than an error. Products go through
    triangular solves, not an explicit inverse, which keeps J M^-1 J' accurate there too."""

    def __init__(self, mass_matrix: np.ndarray):
        n = len(mass_matrix)
        rev = mass_matrix[::-1, ::-1]
        lower, d = np.eye(n), np.zeros(n)
        for j in range(n):
            d[j] = max(rev[j, j] - (lower[j, :j] ** 2 * d[:j]).sum(), _MINVAL)
            for i in range(j + 1, n):
                lower[i, j] = (rev[i, j] - (lower[i, :j] * lower[j, :j] * d[:j]).sum()) / d[j]
        self.lower, self.d = lower, d

    def _half(self, rows: np.ndarray) -> np.ndarray:
        # rows (k, nv) -> L^-1 applied to each row, in the reversed dof order
        return solve_triangular(self.lower, rows[:, ::-1].T, lower=True, unit_diagonal=True)

    def quad(self, rows: np.ndarray) -> np.ndarray:
        """rows M^-1 rows' for rows of shape (k, nv)."""
        z = self._half(np.atleast_2d(rows))
        return z.T @ (z / self.d[:, None])

    def solve(self, rows: np.ndarray) -> np.ndarray:
        """M^-1 applied to each row of (k, nv)."""
        z = self._half(np.atleast_2d(rows)) / self.d[:, None]
        x = solve_triangular(self.lower.T, z, lower=False, unit_diagonal=True)
        return x.T[:, ::-1]


def _group_mean(f: dict, minv_diag: np.ndarray) -> np.ndarray:
    """diag(M^-1) averaged over each joint's translations and rotations (free: two groups)."""
    out = np.zeros_like(minv_diag)
    for j in range(f["njnt"]):
        d0, jtype = f["jnt_dofadr"][j], f["jnt_type"][j]
        groups = {JointType.FREE: [(0, 3), (3, 6)], JointType.BALL: [(0, 3)]}.get(
            JointType(jtype), [(0, 1)])
        for a, b in groups:
            out[d0 + a:d0 + b] = minv_diag[d0 + a:d0 + b].mean()
    return out


def _tendon_jacobian(f, xpos, xmat, axes, anchor, lin) -> np.ndarray:
    """(ntendon, nv) at qpos0 for fixed tendons and straight spatial tendons with pulleys."""
    nt, nv = f.get("ntendon", 0), f["nv"]
    out = np.zeros((nt, nv))
    for t in range(nt):
        adr, num = f["tendon_adr"][t], f["tendon_num"][t]
        types, objs, prm = (f["wrap_type"][adr:adr + num], f["wrap_objid"][adr:adr + num],
                            f["wrap_prm"][adr:adr + num])
        divisor = 1.0
        for k in range(num):
            if types[k] == WrapType.JOINT:
                out[t, f["jnt_dofadr"][objs[k]]] += prm[k]
            elif types[k] == WrapType.PULLEY:
                divisor = prm[k]
            elif types[k] == WrapType.SITE and k + 1 < num and types[k + 1] == WrapType.SITE:
                pa, ja = _site_jac(f, objs[k], xpos, xmat, axes, anchor, lin)
                pb, jb = _site_jac(f, objs[k + 1], xpos, xmat, axes, anchor, lin)
                direction = pb - pa
                length = np.linalg.norm(direction)
                if length > _MINVAL:
                    out[t] += direction / length @ (jb - ja) / divisor
    return out


def _site_jac(f, site, xpos, xmat, axes, anchor, lin):
    b = f["site_bodyid"][site]
    point = xpos[b] + xmat[b] @ f["site_pos"][site]
    jacp, _ = _jacobians(f, point, b, axes, anchor, lin)
    return point, jacp


def _actuator_moment(f, ten_jac, xpos, xmat, axes, anchor, lin) -> np.ndarray:
    nu, nv = f["nu"], f["nv"]
    moment = np.zeros((nu, nv))
    for i in range(nu):
        trn, target, gear = f["actuator_trntype"][i], f["actuator_trnid"][i][0], \
            f["actuator_gear"][i]
        if trn in (TrnType.JOINT, TrnType.JOINTINPARENT):
            jtype, d0 = f["jnt_type"][target], f["jnt_dofadr"][target]
            if jtype == JointType.FREE:
                rot = gear[3:]
                if trn == TrnType.JOINTINPARENT:  # the torque is given in the parent frame
                    rot = xmat[f["jnt_bodyid"][target]].T @ rot
                moment[i, d0:d0 + 6] = np.concatenate([gear[:3], rot])
            elif jtype == JointType.BALL:
                # jointinparent rotates the gear by the joint's rotation: identity at qpos0.
                moment[i, d0:d0 + 3] = gear[:3]
            else:
                moment[i, d0] = gear[0]
        elif trn == TrnType.TENDON:
            moment[i] = gear[0] * ten_jac[target]
        elif trn == TrnType.SITE:
            b = f["site_bodyid"][target]
            point = xpos[b] + xmat[b] @ f["site_pos"][target]
            jacp, jacr = _jacobians(f, point, b, axes, anchor, lin)
            rot = xmat[b] @ quat_to_mat(f["site_quat"][target])
            moment[i] = (rot @ gear[:3]) @ jacp + (rot @ gear[3:]) @ jacr
    return moment


def _dampratio_to_kv(f, moment, factor: MujocoFactor) -> np.ndarray:
    """Position-like actuators store a positive dampratio in biasprm[2] until here:
    kv = dampratio * 2 * sqrt(kp * m_eff), m_eff = 1 / (moment M^-1 moment')."""
    bias = np.array(f["actuator_biasprm"], dtype=float)
    gain = f["actuator_gainprm"]
    for i in range(f["nu"]):
        kp = gain[i][0]
        if bias[i][2] > 0 and kp == -bias[i][1]:
            denom = float(factor.quad(moment[i])[0, 0])
            mass = 1.0 / denom if denom > _MINVAL else 0.0
            bias[i][2] = -bias[i][2] * 2 * np.sqrt(kp * mass)
    return bias

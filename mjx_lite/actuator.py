"""Actuation: activation dynamics, gain/bias force generation and clamping (mj_fwdActuation).

Seed 002, "Actuation model" (activation dynamics, force generation) and the XML reference
(ctrlrange, forcerange, actrange, actearly, joint/tendon actuatorfrcrange, actuatorgravcomp).
The muscle curves follow the "Muscles" section of the modeling chapter: FL, FV and FP are the
piecewise-quadratic curves of its FLV figure (FP linear beyond (1 + lmax) / 2), checked numerically
against MuJoCo 4.0's mju_muscleGain / mju_muscleBias / mju_muscleDynamics.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.math import where
from mjx_lite.types import (
    BiasType,
    Data,
    DisableBit,
    DynType,
    GainType,
    JointType,
    Model,
    TrnType,
)

_MINVAL = 1e-15  # mjMINVAL


def _safe(x):
    return jp.maximum(x, _MINVAL)


def sigmoid(x):
    """Quintic smoothstep 6x^5 - 15x^4 + 10x^3, clamped to [0, 1] outside (mju_sigmoid)."""
    y = jp.clip(x, 0.0, 1.0)
    return y * y * y * (3.0 * y * (2.0 * y - 5.0) + 10.0)


def muscle_dynamics(ctrl, act, prm):
    """Muscle act_dot: (ctrl - act) / tau, tau between activation and deactivation constants."""
    ctrl_c = jp.clip(ctrl, 0.0, 1.0)
    act_c = jp.clip(act, 0.0, 1.0)
    tau_act = prm[..., 0] * (0.5 + 1.5 * act_c)
    tau_deact = prm[..., 1] / (0.5 + 1.5 * act_c)
    width = prm[..., 2]
    dctrl = ctrl_c - act
    hard = where(dctrl > 0, tau_act, tau_deact)
    smooth = tau_deact + (tau_act - tau_deact) * sigmoid(
        dctrl / where(width < _MINVAL, 1.0, width) + 0.5)
    tau = where(width < _MINVAL, hard, smooth)
    return dctrl / _safe(tau)


def _muscle_scale(length, lengthrange, acc0, prm):
    """Scaled length L, optimal length L0 and peak force F0 of the Muscles section."""
    rng0, rng1, force, scale = prm[..., 0], prm[..., 1], prm[..., 2], prm[..., 3]
    f0 = where(force < 0, scale / _safe(acc0), force)
    l0 = (lengthrange[..., 1] - lengthrange[..., 0]) / _safe(rng1 - rng0)
    scaled = rng0 + (length - lengthrange[..., 0]) / _safe(l0)
    return scaled, l0, f0


def muscle_gain_length(x, lmin, lmax):
    """Active force-length curve FL: two quadratic pieces either side of the optimum L = 1."""
    a = 0.5 * (lmin + 1.0)
    b = 0.5 * (1.0 + lmax)
    x1 = (x - lmin) / _safe(a - lmin)
    x2 = (1.0 - x) / _safe(1.0 - a)
    x3 = (x - 1.0) / _safe(b - 1.0)
    x4 = (lmax - x) / _safe(lmax - b)
    out = where(x <= a, 0.5 * x1 * x1,
                   where(x <= 1.0, 1.0 - 0.5 * x2 * x2,
                            where(x <= b, 1.0 - 0.5 * x3 * x3, 0.5 * x4 * x4)))
    return where((x < lmin) | (x > lmax), 0.0, out)


def muscle_gain(length, vel, lengthrange, acc0, prm):
    """Muscle gain -F0 * FL(L) * FV(V)."""
    scaled, l0, f0 = _muscle_scale(length, lengthrange, acc0, prm)
    lmin, lmax, vmax, fvmax = prm[..., 4], prm[..., 5], prm[..., 6], prm[..., 8]
    v = vel / _safe(l0 * vmax)
    fl = muscle_gain_length(scaled, lmin, lmax)
    y = fvmax - 1.0
    fv = where(v <= -1.0, 0.0,
                  where(v <= 0.0, (v + 1.0) * (v + 1.0),
                           where(v <= y, fvmax - (y - v) * (y - v) / _safe(y), fvmax)))
    return -f0 * fl * fv


def muscle_bias(length, lengthrange, acc0, prm):
    """Muscle bias -F0 * FP(L): quadratic rise beyond L = 1, then linear (C1 at the joint)."""
    scaled, _, f0 = _muscle_scale(length, lengthrange, acc0, prm)
    lmax, fpmax = prm[..., 5], prm[..., 7]
    b = 0.5 * (1.0 + lmax)
    x_quad = (scaled - 1.0) / _safe(b - 1.0)
    x_lin = (scaled - b) / _safe(b - 1.0)
    fp = where(scaled <= 1.0, 0.0,
                  where(scaled <= b, 0.5 * fpmax * x_quad**2, fpmax * (0.5 + x_lin)))
    return -f0 * fp


def disabled_actuators(m: Model) -> np.ndarray:
    """(nu,) static mask of actuators whose group is in opt.disableactuator (groups 0..30)."""
    group = np.asarray(m.actuator_group, dtype=np.int64)
    valid = (group >= 0) & (group <= 30)
    bits = (int(m.opt.disableactuator) >> np.clip(group, 0, 30)) & 1
    return valid & (bits == 1)


def clamped_ctrl(m: Model, d: Data) -> jax.Array:
    """ctrl clamped to ctrlrange where ctrllimited, unless clampctrl is disabled."""
    ctrl = d.ctrl
    if m.opt.disableflags & DisableBit.CLAMPCTRL or m.nu == 0:
        return ctrl
    lim = np.asarray(m.actuator_ctrllimited, dtype=bool)
    rng = m.actuator_ctrlrange
    return where(lim, jp.clip(ctrl, rng[:, 0], rng[:, 1]), ctrl)


def act_dot(m: Model, d: Data, ctrl: jax.Array) -> jax.Array:
    """(na,) activation derivative of every stateful actuator.

    MuJoCo 4.0 computes act_dot of group-disabled actuators too (their force is zeroed and the
    integrator leaves their act unchanged).
    """
    out = jp.zeros(m.na, dtype=d.act.dtype)
    dyn = np.asarray(m.actuator_dyntype)
    adr = np.asarray(m.actuator_actadr)
    num = np.asarray(m.actuator_actnum)
    last = adr + num - 1
    for types, fn in (
        ((DynType.INTEGRATOR,), lambda i: ctrl[i]),
        ((DynType.FILTER, DynType.FILTEREXACT),
         lambda i: (ctrl[i] - d.act[last[i]]) / _safe(m.actuator_dynprm[i, 0])),
        ((DynType.MUSCLE,),
         lambda i: muscle_dynamics(ctrl[i], d.act[last[i]], m.actuator_dynprm[i])),
    ):
        idx = np.nonzero(np.isin(dyn, types) & (num > 0))[0]
        if idx.size:
            out = out.at[last[idx]].set(fn(idx))
    return out


def next_act(m: Model, act, act_dot_, h, idx: np.ndarray):
    """Activation after one step of length h for actuators idx (mj_nextActivation).

    Args:
      act, act_dot_: (len(idx),) current activation and its derivative.
    """
    dyn = np.asarray(m.actuator_dyntype)[idx]
    tau = _safe(m.actuator_dynprm[idx, 0])
    exact = act + act_dot_ * tau * (1.0 - jp.exp(-h / tau))
    nxt = where(dyn == DynType.FILTEREXACT, exact, act + act_dot_ * h)
    lim = np.asarray(m.actuator_actlimited, dtype=bool)[idx]
    rng = m.actuator_actrange[idx]
    return where(lim, jp.clip(nxt, rng[:, 0], rng[:, 1]), nxt)


def actuator_force(m: Model, d: Data, ctrl: jax.Array, act_dot_: jax.Array) -> jax.Array:
    """(nu,) scalar actuator forces: gain * (ctrl or act) + bias, clamped to forcerange."""
    dyn = np.asarray(m.actuator_dyntype)
    adr = np.asarray(m.actuator_actadr)
    num = np.asarray(m.actuator_actnum)
    stateful = np.nonzero((dyn != DynType.NONE) & (num > 0))[0]
    inp = ctrl
    if stateful.size:
        last = (adr + num - 1)[stateful]
        act = d.act[last]
        early = np.asarray(m.actuator_actearly, dtype=bool)[stateful]
        if early.any():
            act = where(early, next_act(m, act, act_dot_[last], m.opt.timestep, stateful), act)
        inp = inp.at[stateful].set(act)

    length, vel = d.actuator_length, d.actuator_velocity
    gprm, bprm = m.actuator_gainprm, m.actuator_biasprm
    gtype = np.asarray(m.actuator_gaintype)
    btype = np.asarray(m.actuator_biastype)
    gain = where(gtype == GainType.AFFINE,
                    gprm[:, 0] + gprm[:, 1] * length + gprm[:, 2] * vel, gprm[:, 0])
    bias = where(btype == BiasType.AFFINE,
                    bprm[:, 0] + bprm[:, 1] * length + bprm[:, 2] * vel, 0.0)
    mus = np.nonzero(gtype == GainType.MUSCLE)[0]
    if mus.size:
        g = muscle_gain(length[mus], vel[mus], m.actuator_lengthrange[mus],
                        m.actuator_acc0[mus], gprm[mus])
        gain = gain.at[mus].set(g)
    mus = np.nonzero(btype == BiasType.MUSCLE)[0]
    if mus.size:
        b = muscle_bias(length[mus], m.actuator_lengthrange[mus], m.actuator_acc0[mus],
                        bprm[mus])
        bias = bias.at[mus].set(b)
    force = gain * inp + bias
    lim = np.asarray(m.actuator_forcelimited, dtype=bool)
    rng = m.actuator_forcerange
    force = where(lim, jp.clip(force, rng[:, 0], rng[:, 1]), force)
    return where(disabled_actuators(m), 0.0, force)


def _tendon_clamped(m: Model, force: jax.Array) -> jax.Array:
    """Scales the forces of actuators on tendons with actuatorfrcrange so that their sum fits.

    MuJoCo 4.0 sums the scalar actuator forces of each limited tendon (gear not applied), clamps
    the sum, and rescales each actuator_force by clamped / sum (found numerically).
    """
    if not m.ntendon:
        return force
    lim_ten = np.nonzero(np.asarray(m.tendon_actfrclimited, dtype=bool))[0]
    trn = np.asarray(m.actuator_trntype)
    tid = np.asarray(m.actuator_trnid)[:, 0]
    covered = (trn == TrnType.TENDON) & np.isin(tid, lim_ten)
    if not covered.any():
        return force
    sel = np.nonzero(covered)[0]
    onehot = (tid[sel][None, :] == lim_ten[:, None]).astype(float)  # (nlim, nsel)
    total = onehot @ force[sel]
    rng = m.tendon_actfrcrange[lim_ten]
    clamped = jp.clip(total, rng[:, 0], rng[:, 1])
    nonzero = total != 0
    scale = where(nonzero, clamped / where(nonzero, total, 1.0), 1.0)
    return force * jp.ones_like(force).at[sel].set(scale @ onehot)


def fwd_actuation(m: Model, d: Data) -> Data:
    """act_dot, actuator_force and qfrc_actuator (mj_fwdActuation)."""
    zeros_v = jp.zeros(m.nv, dtype=d.qvel.dtype)
    actgrav = np.asarray(m.jnt_actgravcomp, dtype=bool)
    dof_actgrav = actgrav[np.asarray(m.dof_jntid, dtype=int)] if m.nv else np.zeros(0, bool)
    grav = zeros_v
    if dof_actgrav.any():
        grav = where(dof_actgrav, d.qfrc_gravcomp, 0.0)
    if m.opt.disableflags & DisableBit.ACTUATION:
        # MuJoCo 4.0 leaves act_dot untouched and the integrator leaves act unchanged
        return d.replace(actuator_force=jp.zeros(m.nu, dtype=d.qvel.dtype),
                         qfrc_actuator=zeros_v)
    if m.nu == 0:
        return d.replace(qfrc_actuator=_clamp_joint(m, grav))
    ctrl = clamped_ctrl(m, d)
    adot = act_dot(m, d, ctrl)
    force = _tendon_clamped(m, actuator_force(m, d, ctrl, adot))
    qfrc = d.actuator_moment.T @ force + grav
    return d.replace(act_dot=adot, actuator_force=force, qfrc_actuator=_clamp_joint(m, qfrc))


def _clamp_joint(m: Model, qfrc: jax.Array) -> jax.Array:
    """Clamps the total actuator force of scalar joints with actuatorfrclimited."""
    jtype = np.asarray(m.jnt_type)
    lim = np.asarray(m.jnt_actfrclimited, dtype=bool) & np.isin(
        jtype, (JointType.HINGE, JointType.SLIDE))
    jnt = np.nonzero(lim)[0]
    if not jnt.size:
        return qfrc
    dof = np.asarray(m.jnt_dofadr)[jnt]
    rng = m.jnt_actfrcrange[jnt]
    return qfrc.at[dof].set(jp.clip(qfrc[dof], rng[:, 0], rng[:, 1]))

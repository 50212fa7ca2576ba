"""Transition Jacobians A, B, C, D by automatic differentiation (API reference,
``mjd_transitionFD``; Computation, "Numerical integration" for the state).

The state is x = [qpos in the tangent space (nv), qvel (nv), act (na)], the input u = ctrl;
one ``step`` maps (x, u) to the next state y and the sensor values s computed on the way:

  A = dy/dx (2nv+na, 2nv+na)   B = dy/du (2nv+na, nu)
  C = ds/dx (nsensordata, 2nv+na)   D = ds/du (nsensordata, nu)

Positions are perturbed and compared on the configuration manifold as MuJoCo does:
x's position block moves qpos by ``integrate_pos`` (quaternions of free and ball joints by
the exponential map, in the joint's local frame), and y's is the ``diff_pos`` of the next
qpos from the unperturbed next qpos (the logarithm), both smooth at a zero tangent. The
derivatives are exact (no eps): forward-mode AD, one tangent per column. Unlike
``mjd_transitionFD`` every integrator is supported, RK4 included.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.forward import integrate_pos, step
from mjx_lite.types import Data, JointType, Model

__all__ = ["diff_pos", "transition_jacobians"]


def diff_pos(m: Model, qpos1: jax.Array, qpos2: jax.Array) -> jax.Array:
    """(nv,) tangent v with integrate_pos(qpos1, v, 1) = qpos2 (mj_differentiatePos)."""
    jtype = np.asarray(m.jnt_type)
    qadr, vadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
    v = jp.zeros(m.nv, dtype=qpos1.dtype)
    scalar = np.isin(jtype, (JointType.HINGE, JointType.SLIDE))
    if scalar.any():
        v = v.at[vadr[scalar]].set(qpos2[qadr[scalar]] - qpos1[qadr[scalar]])
    free = jtype == JointType.FREE
    if free.any():
        qi = qadr[free][:, None] + np.arange(3)
        v = v.at[vadr[free][:, None] + np.arange(3)].set(qpos2[qi] - qpos1[qi])
    for kind, qoff, voff in ((JointType.BALL, 0, 0), (JointType.FREE, 3, 3)):
        sel = jtype == kind
        if sel.any():
            qi = qadr[sel][:, None] + qoff + np.arange(4)
            q1 = math.quat_normalize(qpos1[qi])
            q2 = math.quat_normalize(qpos2[qi])
            rel = math.quat_mul(math.quat_conj(q1), q2)
            v = v.at[vadr[sel][:, None] + voff + np.arange(3)].set(math.quat_to_vel(rel))
    return v


def transition_jacobians(m: Model, d: Data, *, loop: str = "fixed",
                         adjoint: str = "implicit") -> tuple[jax.Array, ...]:
    """(A, B, C, D) of one ``step`` at d's state and ctrl, as ``mjd_transitionFD`` defines them.

    Args:
      loop, adjoint: passed to ``step``. The default implicit adjoint gives the derivative of
        the converged constraint solve (what finite differences of a converged MuJoCo see);
        "unroll" gives that of exactly ``opt.iterations`` iterations.

    Returns:
      A (2nv+na, 2nv+na), B (2nv+na, nu), C (nsensordata, 2nv+na), D (nsensordata, nu).
    """
    nv, na = m.nv, m.na
    dtype = d.qvel.dtype
    qpos_next = jax.lax.stop_gradient(step(m, d, loop=loop, adjoint=adjoint).qpos)

    def f(x, u):
        dq, dv, da = x[:nv], x[nv:2 * nv], x[2 * nv:]
        di = d.replace(qpos=integrate_pos(m, d.qpos, dq, 1.0), qvel=d.qvel + dv,
                       act=d.act + da, ctrl=d.ctrl + u)
        dn = step(m, di, loop=loop, adjoint=adjoint)
        y = jp.concatenate([diff_pos(m, qpos_next, dn.qpos), dn.qvel, dn.act])
        return y, dn.sensordata

    x0 = jp.zeros(2 * nv + na, dtype)
    u0 = jp.zeros(m.nu, dtype)
    (a, b), (c, dd) = jax.jacfwd(f, argnums=(0, 1))(x0, u0)
    return a, b, c, dd

"""Forward dynamics stages, integrators, forward and step (seed 002, "Simulation pipeline",
"Forward dynamics" and "Numerical integration").

``forward`` runs the stages in MuJoCo's order; ``step`` = integrate(forward). Constraints are
solved by ``solver.solve`` (Newton, CG or PGS) on the rows of ``constraint.make_constraint``.
Integrators (MuJoCo 4.0):
  * Euler: semi-implicit, with joint damping (dof and actuator ``damping`` polynomials at joint
    targets) implicit unless ``eulerdamp`` is disabled;
  * implicit: (M - h dF/dv) with the derivatives of actuator, passive and RNE forces, restricted
    to M's sparsity, solved with LU;
  * implicitfast: the same without RNE, symmetrized; 4.0 reinstates the exact (RNE included,
    unsymmetrized) block of standalone free bodies;
  * RK4: the classical tableau; in ``step`` its 4 forward passes run in one ``lax.scan``, the
    first with the sensors and the qacc check, so a step traces the forward pass once.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import (
    constraint,
    linalg,
    math,
    sensor,
    smooth,
    smoothing,
    solver,
    support,
    tendon,
)
from mjx_lite.actuator import disabled_actuators, fwd_actuation, next_act
from mjx_lite.collision.driver import collision
from mjx_lite.math import where
from mjx_lite.passive import apply_ft, fluid, passive
from mjx_lite.types import (
    Data,
    DisableBit,
    EnableBit,
    IntegratorType,
    JointType,
    Model,
    TrnType,
)

__all__ = [
    "constraint_solve", "forward", "fwd_acceleration", "fwd_actuation", "fwd_position",
    "fwd_velocity", "integrate_pos", "inverse", "step",
]


def fwd_position(m: Model, d: Data) -> Data:
    """Position-dependent stages in MuJoCo's order: kinematics, com, tendons, inertia and its
    factor, collision, constraint rows, transmission."""
    d = smooth.kinematics(m, d)
    d = smooth.com_pos(m, d)
    d = smooth.tendon(m, d)
    d = smooth.crb(m, d)
    d = smooth.factor_m(m, d)
    d = collision(m, d)
    d = constraint.make_constraint(m, d)
    return smooth.transmission(m, d)


def fwd_velocity(m: Model, d: Data) -> Data:
    """Velocity-dependent stages: tendon/actuator velocities, cvel, passive forces, qfrc_bias."""
    d = smooth.tendon_velocity(m, d)
    d = smooth.actuator_velocity(m, d)
    d = smooth.com_vel(m, d)
    # MuJoCo 4.0 folds a velocity bias (Jdot qvel) of connect/weld rows into efc_aref.
    d = constraint.reference_constraint(m, d)
    d = passive(m, d)
    d = smooth.rne(m, d)
    return d.replace(qfrc_bias=d.qfrc_bias + tendon_armature_bias(m, d))


def tendon_armature_bias(m: Model, d: Data) -> jax.Array:
    """(nv,) bias force of spatial-tendon armature, J' armature (Jdot qvel) (XML reference,
    tendon/spatial/armature: kinetic energy 0.5 armature v^2 with v = J qvel)."""
    jdot_qvel = tendon_jdot_qvel(m, d)
    if jdot_qvel is None:
        return jp.zeros_like(d.qvel)
    spatial = tendon.spatial_tendons(m)
    return d.ten_J[spatial].T @ (jp.asarray(m.tendon_armature)[spatial] * jdot_qvel)


def tendon_jdot_qvel(m: Model, d: Data):
    """Jdot qvel of the spatial tendons (``tendon.spatial_tendons`` order), or None where no
    spatial tendon has armature (the only use of the term).

    Jdot qvel is the rate of change of J(q) qvel along the motion with fixed qvel: a jvp of
    the tendon Jacobian through kinematics and com_pos, exact for every wrap type. Fixed
    tendons have a constant J and no such term."""
    spatial = tendon.spatial_tendons(m)
    arm = m.tendon_armature
    if not spatial.size or (not isinstance(arm, jax.core.Tracer)
                            and not np.any(np.asarray(arm)[spatial])):
        return None

    def ten_vel(t):
        q = integrate_pos(m, d.qpos, d.qvel, t)
        dt = smooth.com_pos(m, smooth.kinematics(m, d.replace(qpos=q)))
        return smooth.tendon(m, dt).ten_J[spatial] @ d.qvel

    _, jdot_qvel = jax.jvp(ten_vel, (jp.zeros((), d.qvel.dtype),),
                           (jp.ones((), d.qvel.dtype),))
    return jdot_qvel


def xfrc_accumulate(m: Model, d: Data) -> jax.Array:
    """xfrc_applied (force, torque at each body's com) mapped to joint space."""
    bodies = np.arange(1, m.nbody)
    if not bodies.size:
        return jp.zeros(m.nv, dtype=d.qvel.dtype)
    x = math.take(d.xfrc_applied, bodies)
    return apply_ft(m, d, x[:, :3], x[:, 3:], math.take(d.xipos, bodies), bodies)


def fwd_acceleration(m: Model, d: Data) -> Data:
    """qfrc_smooth (passive - bias + applied + actuator + mapped xfrc) and qacc_smooth."""
    qfrc = (d.qfrc_passive - d.qfrc_bias + d.qfrc_applied + d.qfrc_actuator
            + xfrc_accumulate(m, d))
    return d.replace(qfrc_smooth=qfrc, qacc_smooth=smooth.solve_m(m, d, qfrc))


def constraint_solve(m: Model, d: Data, *, loop: str = "fixed", adjoint: str = "unroll") -> Data:
    """The constraint solver (Newton, CG or PGS as m.opt.solver says) -> qacc."""
    return solver.solve(m, d, loop=loop, adjoint=adjoint)


def forward(m: Model, d: Data, *, loop: str = "fixed", adjoint: str = "unroll",
            contact_smoothing: float = 0.0) -> Data:
    """Forward dynamics (mj_forward): every stage up to qacc, and the sensors.

    ``loop="fixed"`` runs exactly ``opt.iterations`` solver iterations (reverse-mode AD at any
    count); ``"early_exit"`` stops at convergence (forward-only speed). ``adjoint`` selects the
    backward mode of the solve: "unroll" (through the iterations) or "implicit" (the optimality
    condition at the solution, which the forward then converges to, see ``solver.solve``).
    ``contact_smoothing`` (a distance, static) leaves the result unchanged and gives it the
    derivative of a model whose contacts push from that far apart (``mjx_lite.smoothing``).
    """
    return smoothing.smoothed(
        lambda m, d: _forward(m, d, loop=loop, adjoint=adjoint, sensors=True), m, d,
        contact_smoothing)


# Elementwise and data-movement primitives, whose outputs reverse mode recomputes instead of
# saving. A step saves about 1,500 intermediates otherwise (ant), and inside a scan each one
# costs a write to and a read from its stacked (steps, ...) buffer, while the recomputation
# fuses into the backward pass's own kernels. Matrix products, loops, the solver's custom
# derivative rules and everything not listed are still saved, values tagged with
# ``checkpoint_name`` among them: per-row constraint data (efc_D, efc_R, efc_aref, the
# solver's row zones) that the fused kernels forming a (nefc, nv) cotangent would otherwise
# recompute once per column (gymnasium humanoid, implicit gradient: 5-7% of the run), and
# efc_J. A scatter (``x.at[i].set``) is data movement too: saved, its output (e.g. the
# contact rows of make_constraint's pyramid) kept a copy of values already saved elsewhere.
_RECOMPUTED = frozenset({
    "abs", "acos", "add", "and", "argmax", "argmin", "asin", "atan", "atan2", "broadcast_in_dim",
    "ceil", "clamp", "concatenate", "convert_element_type", "copy", "copy_p", "cos", "cumsum",
    "div", "dynamic_slice", "dynamic_update_slice", "eq", "exp", "exp2", "expand_dims",
    "expm1", "floor", "gather", "ge", "gt", "integer_pow", "iota", "is_finite", "le", "log",
    "log1p", "logistic", "lt", "max", "min", "mjx_lite_cross", "mjx_lite_pick", "mul", "ne",
    "neg", "not", "or",
    "pad", "pow",
    "reduce_and", "reduce_max", "reduce_min", "reduce_or", "reduce_sum", "rem", "reshape",
    "rev", "round", "rsqrt", "scatter", "select_n", "sign", "sin", "slice", "sqrt", "square",
    "squeeze", "stack",
    "stop_gradient", "sub", "tan", "tanh", "transpose", "xor",
})


# Products that contract at most this many entries (3-vector dots, 3x3 and 4x4 rotations and
# quaternion matrices) cost about what their output's write and read cost, and like the
# elementwise ops they fuse into their consumers when recomputed. Together with ``stack``
# (jax 0.10's primitive for jnp.stack, data movement as concatenate is), recomputed rather
# than saved: gymnasium humanoid, implicit gradient, one-process A/Bs: batch 64 14.2 ->
# 11.0 s, peak 3,198 -> 2,545 MB; batch 1 295 -> 290 ms, 50.0 -> 39.8 MB; ant 7.9 -> 5.6 MB
# at batch 1 (89.5 against 88.2 ms) and 502 -> 356 MB at batch 64 (3.78 against 3.75 s).
_SMALL_CONTRACTION = 4


def _saved(prim, *args, **params) -> bool:
    if prim.name == "dot_general":
        (contract, _), _ = params["dimension_numbers"]
        return int(np.prod([args[0].shape[i] for i in contract])) > _SMALL_CONTRACTION
    return prim.name not in _RECOMPUTED


def _remat(fn):
    """``fn`` under ``jax.checkpoint`` with the policy above: plain evaluation and forward
    mode are unaffected; reverse mode through a 100-step rollout stores 1.7-4x less (ant and
    humanoid, batch 1 and 64) and, on ant at batch 1, runs 14% (unrolled) and 22% (implicit
    adjoint) faster (benchmarks/results/cpu_x32_grad.md)."""
    def call(first, *args):
        # the Model's known leaves closed over, not checkpointed arguments (split_traced)
        traced, known = support.split_traced(first)
        return jax.checkpoint(lambda t, *a: fn(support.join_traced(t, known), *a),
                              policy=_saved, prevent_cse=False)(traced, *args)

    return call


def _forward(m: Model, d: Data, *, loop: str, adjoint: str, sensors: bool) -> Data:
    d = _remat(lambda m, d: _smooth_dynamics(m, d, sensors))(m, d)
    solve = lambda m, d: constraint_solve(m, d, loop=loop, adjoint=adjoint)  # noqa: E731
    # not around the unrolled solve: its iteration scan, which checkpoints each iteration,
    # stores 2.3x more under an enclosing policy (100 iterations)
    d = (_remat(solve) if adjoint == "implicit" else solve)(m, d)
    return _remat(_acceleration_sensors)(m, d) if sensors else d


def _sensors(m: Model, d: Data, when) -> Data:
    """The sensors of a Data forward-computed without them, where the unbatched scalar ``when``
    is true (every stage's inputs are still in it: later stages write no field a position or
    velocity sensor reads). A ``lax.cond`` whose branches return only the fields the sensors
    write: carrying the whole Data through a cond copies it (RK4's stage scan ran 1.7x slower
    that way on gymnasium ant)."""
    def position_velocity(m, d):
        return sensor.sensor_vel(m, sensor.sensor_pos(m, d))

    def compute(m, d):
        return _remat(_acceleration_sensors)(m, _remat(position_velocity)(m, d))

    written = []

    def probe(d):
        # without _remat: a checkpoint's outputs are all new arrays, so every field would
        # look written and the cond would carry the whole Data (with no sensor: a cond where
        # none is needed, in every RK4 stage)
        out = _acceleration_sensors(m, position_velocity(m, d))
        written.extend(f.name for f in dataclasses.fields(d)
                       if getattr(out, f.name) is not getattr(d, f.name))

    jax.eval_shape(probe, d)
    if not written:
        return d

    def fields(x):
        return {f: getattr(x, f) for f in written}

    return d.replace(**jax.lax.cond(when, lambda d: fields(compute(m, d)), fields, d))


def _acceleration_sensors(m: Model, d: Data) -> Data:
    if smooth.needs_rne_post(m):
        # as mj_sensorAcc: cacc / cfrc_* only when a sensor needs them
        d = smooth.rne_post_constraint(m, d)
    return sensor.sensor_acc(m, d)


def _smooth_dynamics(m: Model, d: Data, sensors: bool) -> Data:
    """The stages before the constraint solve, with the position and velocity sensors."""
    # RK4's inner stages skip the sensors, as mj_forwardSkip does inside mj_RungeKutta.
    d = fwd_position(m, d)
    if sensors:
        d = sensor.sensor_pos(m, d)
    if sensor.energy_enabled(m):  # mj_energyPos / mj_energyVel, with or without sensors
        d = sensor.energy_pos(m, d)
    d = fwd_velocity(m, d)
    if sensors:
        d = sensor.sensor_vel(m, d)
    if sensor.energy_enabled(m):
        d = sensor.energy_vel(m, d)
    d = fwd_actuation(m, d)
    return fwd_acceleration(m, d)


# ------------------------------------------------------------------------------------------
# integration


def integrate_pos(m: Model, qpos: jax.Array, qvel: jax.Array, h) -> jax.Array:
    """qpos advanced by qvel over h, quaternions on the sphere (mj_integratePos)."""
    jtype = np.asarray(m.jnt_type)
    qadr, vadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
    scalar = np.isin(jtype, (JointType.HINGE, JointType.SLIDE))
    if scalar.any():
        qpos = qpos + math.spread(h * math.take(qvel, vadr[scalar]), qadr[scalar], qpos.shape[0])
    free = jtype == JointType.FREE
    if free.any():
        qi = qadr[free][:, None] + np.arange(3)
        qpos = qpos + math.spread(h * math.take(qvel, vadr[free][:, None] + np.arange(3)), qi,
                                  qpos.shape[0])
    for kind, qoff, voff in ((JointType.BALL, 0, 0), (JointType.FREE, 3, 3)):
        sel = jtype == kind
        if sel.any():
            qi = qadr[sel][:, None] + qoff + np.arange(4)
            vi = vadr[sel][:, None] + voff + np.arange(3)
            qpos = math.put(qpos, qi, math.quat_integrate(math.take(qpos, qi),
                                                          math.take(qvel, vi), h))
    return qpos


def _advance_act(m: Model, act, act_dot, h):
    """act after one step (mj_advance): filterexact exactly, then actrange clamping."""
    if not m.na or m.opt.disableflags & DisableBit.ACTUATION:
        return act
    adr = np.asarray(m.actuator_actadr)
    num = np.asarray(m.actuator_actnum)
    # group-disabled actuators keep their activation
    idx = np.nonzero((num > 0) & ~disabled_actuators(m))[0]
    if not idx.size:
        return act
    # actuators with several activations are not produced by this compiler (DCMOTOR/PID)
    last = (adr + num - 1)[idx]
    return act.at[last].set(next_act(m, act[last], act_dot[last], h, idx))


def _advance(m: Model, d: Data, act_dot, qacc, qvel=None) -> Data:
    """Integrates act, then qvel, then qpos with the new (or the given) velocity; time += h."""
    h = m.opt.timestep
    act = _advance_act(m, d.act, act_dot, h)
    new_qvel = d.qvel + h * qacc
    qpos = integrate_pos(m, d.qpos, new_qvel if qvel is None else qvel, h)
    return d.replace(act=act, qvel=new_qvel, qpos=qpos, time=d.time + h)


def _euler_damping(m: Model, d: Data) -> jax.Array:
    """(nv,) derivative of joint-level damping forces: dof and actuator polynomial dampers."""
    v = d.qvel
    poly = m.dof_dampingpoly
    diag = m.dof_damping + 2.0 * poly[:, 0] * jp.abs(v) + 3.0 * poly[:, 1] * v * v
    if m.nu:
        trn = np.asarray(m.actuator_trntype)
        tid = np.asarray(m.actuator_trnid)[:, 0]
        jtype = np.asarray(m.jnt_type)
        # trnid is a site, tendon or body id for other transmissions: index joints only
        is_joint = trn == TrnType.JOINT
        joint_of = np.where(is_joint, tid, 0)
        sel = np.nonzero(is_joint & np.isin(
            jtype[joint_of], (JointType.HINGE, JointType.SLIDE)))[0]
        if sel.size:
            dof = np.asarray(m.jnt_dofadr)[tid[sel]]
            vs = v[dof]
            p = m.actuator_dampingpoly[sel]
            dd = m.actuator_damping[sel] + 2.0 * p[:, 0] * jp.abs(vs) + 3.0 * p[:, 1] * vs * vs
            diag = diag.at[dof].add(m.actuator_gear[sel, 0] ** 2 * dd)
    return diag


def _actuator_vel_deriv(m: Model, d: Data) -> jax.Array:
    """(nv, nv) d qfrc_actuator / d qvel (mjd_actuator_vel), by forward-mode AD.

    MuJoCo 4.0 differentiates affine and muscle velocity terms and drops actuators whose
    force is saturated by forcerange or by a joint's actuatorfrcrange; the derivative of the
    clamped pipeline has exactly these zeros.
    """

    def qfrc(qvel):
        dv = d.replace(qvel=qvel, actuator_velocity=d.actuator_moment @ qvel)
        return fwd_actuation(m, dv).qfrc_actuator

    return jax.jacfwd(qfrc)(d.qvel)


def _passive_vel_deriv(m: Model, d: Data) -> jax.Array:
    """(nv, nv) d qfrc_passive / d qvel: dampers and fluid forces (mjd_passive_vel)."""
    deriv = jp.zeros((m.nv, m.nv), dtype=d.qvel.dtype)
    flags = m.opt.disableflags
    if flags & DisableBit.SPRING and flags & DisableBit.DAMPER:
        return deriv
    if not flags & DisableBit.DAMPER:
        deriv = deriv - jp.diag(_euler_damping(m, d))
        if m.ntendon:
            v = d.ten_velocity
            p = m.tendon_dampingpoly
            dt = m.tendon_damping + 2.0 * p[:, 0] * jp.abs(v) + 3.0 * p[:, 1] * v * v
            if m.nu:
                trn = np.asarray(m.actuator_trntype)
                ten = np.nonzero(trn == TrnType.TENDON)[0]
                if ten.size:
                    tid = np.asarray(m.actuator_trnid)[ten, 0]
                    vt = v[tid]
                    pa = m.actuator_dampingpoly[ten]
                    da = (m.actuator_damping[ten] + 2.0 * pa[:, 0] * jp.abs(vt)
                          + 3.0 * pa[:, 1] * vt * vt)
                    dt = dt.at[tid].add(m.actuator_gear[ten, 0] ** 2 * da)
            deriv = deriv - d.ten_J.T @ (dt[:, None] * d.ten_J)

    def qfrc_fluid(qvel):
        dv = smooth.com_vel(m, d.replace(qvel=qvel))
        return fluid(m, dv)

    deriv = deriv + jax.jacfwd(qfrc_fluid)(d.qvel)
    return deriv


def _rne_vel_deriv(m: Model, d: Data) -> jax.Array:
    """(nv, nv) d qfrc_bias / d qvel (mjd_rne_vel), by forward-mode AD of com_vel + rne."""

    def bias(qvel):
        dv = smooth.com_vel(m, d.replace(qvel=qvel))
        return smooth.rne(m, dv).qfrc_bias

    return jax.jacfwd(bias)(d.qvel)


def _standalone_free_dofs(m: Model) -> np.ndarray:
    """(nv,) static mask of the dofs of free bodies without jointed descendants."""
    out = np.zeros(m.nv, dtype=bool)
    jtype = np.asarray(m.jnt_type)
    parent = np.asarray(m.body_parentid)
    dofnum = np.asarray(m.body_dofnum)
    has_dof_desc = np.zeros(m.nbody, dtype=bool)
    for b in range(m.nbody - 1, 0, -1):
        if dofnum[b] > 0 or has_dof_desc[b]:
            has_dof_desc[parent[b]] |= True
    for j in np.nonzero(jtype == JointType.FREE)[0]:
        b = int(np.asarray(m.jnt_bodyid)[j])
        if not has_dof_desc[b] and np.asarray(m.body_jntnum)[b] == 1:
            adr = int(np.asarray(m.jnt_dofadr)[j])
            out[adr:adr + 6] = True
    return out


def _implicit_matrix(m: Model, d: Data) -> jax.Array:
    """M - h dF/dv of the implicit and implicitfast integrators (restricted to M's
    sparsity; implicitfast symmetrized, without RNE, except 4.0's standalone free bodies)."""
    h = m.opt.timestep
    passive_act = _passive_vel_deriv(m, d)
    if m.nu and not m.opt.disableflags & DisableBit.ACTUATION:
        passive_act = passive_act + _actuator_vel_deriv(m, d)
    rne = _rne_vel_deriv(m, d)
    sparse = smooth.m_sparsity(m)
    if m.opt.integrator == IntegratorType.IMPLICIT:
        deriv = passive_act - rne
    else:
        deriv = 0.5 * (passive_act + passive_act.T)
        free = _standalone_free_dofs(m)
        if free.any():
            # 4.0: standalone free bodies keep their exact (unsymmetrized, gyroscopic) block
            block = free[:, None] & free[None, :] & sparse
            deriv = where(block, passive_act - rne, deriv)
    return d.qM - h * where(sparse, deriv, 0.0)


def _implicit_qacc(m: Model, d: Data) -> jax.Array:
    """Implicit-in-velocity acceleration (M - h dF/dv)^-1 (qfrc_smooth + qfrc_constraint)."""
    # not symmetric: LAPACK's LU (mjx_lite.linalg has only the symmetric positive definite
    # solves, see its docstring for the CPU hang this can meet under a large vmap)
    return jp.linalg.solve(_implicit_matrix(m, d), d.qfrc_smooth + d.qfrc_constraint)


def _euler_damped(m: Model):
    """Whether mj_Euler's implicit damping applies: (traced) the model has joint-level
    damping, or None when eulerdamp or the damper is disabled."""
    if m.opt.disableflags & DisableBit.EULERDAMP or m.opt.disableflags & DisableBit.DAMPER:
        return None
    damped = jp.any(m.dof_damping > 0) | jp.any(m.dof_dampingpoly != 0)
    if m.nu:
        damped = damped | jp.any(m.actuator_damping > 0) | jp.any(m.actuator_dampingpoly != 0)
    return damped


def _euler_matrix(m: Model, d: Data) -> jax.Array:
    """M + h B, B the joint-level damping mj_Euler treats implicitly."""
    return d.qM + m.opt.timestep * jp.diag(_euler_damping(m, d))


def _euler_qacc(m: Model, d: Data) -> jax.Array:
    damped = _euler_damped(m)
    if damped is None:
        return d.qacc
    solved = linalg.spd_solve(_euler_matrix(m, d), d.qfrc_smooth + d.qfrc_constraint)
    # mj_Euler solves again only when the model has damping; otherwise it integrates qacc as
    # the solver left it (a solve stopped at its tolerance has M qacc != qfrc_smooth +
    # qfrc_constraint, so re-solving would move qvel by up to ~1e-5 from MuJoCo's)
    return where(damped, solved, d.qacc)


# the classical tableau with a row per stage (stage 0's is zero: it evaluates the initial state)
_RK4_A = ((0.0, 0.0, 0.0), (0.5, 0.0, 0.0), (0.0, 0.5, 0.0), (0.0, 0.0, 1.0))
_RK4_B = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)


def _rot_dofs(m: Model) -> np.ndarray:
    """(k, 3) static dof indices of ball joints and the rotations of free joints."""
    jtype = np.asarray(m.jnt_type)
    vadr = np.asarray(m.jnt_dofadr)
    starts = np.concatenate([vadr[jtype == JointType.BALL], vadr[jtype == JointType.FREE] + 3])
    return starts[:, None] + np.arange(3)


def _dexp_inv(x, y):
    """Inverse of the SO(3) exponential's differential at x applied to y (closed form)."""
    th2 = jp.sum(x * x, axis=-1, keepdims=True)
    small = th2 < 1e-8
    th = jp.sqrt(where(small, 1.0, th2))
    half = 0.5 * th
    c = where(small, 1.0 / 12.0 + th2 / 720.0,
                 (1.0 - half * jp.cos(half) / jp.sin(half)) / where(small, 1.0, th2))
    xy = math.cross(x, y)
    return y - 0.5 * xy + c * math.cross(x, xy)


def _rk4(m: Model, d: Data, loop: str, adjoint: str, first=None) -> Data:
    """RK4 (mj_RungeKutta), with MuJoCo 4.0's Runge-Kutta-Munthe-Kaas correction for ball and
    free rotations: each stage's angular velocity is mapped through dexp^-1 at minus the
    stage's rotation vector before the stages are combined (found to match 4.0 exactly).

    With ``first=None``, ``d`` is forward-computed and is the first stage; the 3 others run in
    one ``lax.scan``. Given ``first(m, d, initial)`` (what ``step`` does to a forward-computed
    state where the scalar ``initial`` is true: sensors and the qacc check), ``d`` is the raw
    state and the scan runs all 4 stages: the forward pass is then traced and compiled once
    per step, not twice.

    Data is left from the last stage's forward pass, except the state (advanced from the
    initial one), qacc (the B-weighted acceleration, so qvel_next = qvel + h qacc) and
    qacc_warmstart (the last stage's qacc).
    """
    rk4 = RK4Stages(m, d.qpos.dtype, loop, adjoint, first)
    if first is None:  # d, forward-computed, is stage 0
        init, stages = rk4.begin(d, computed=True), jp.arange(1, 4)
    else:
        init, stages = rk4.begin(d), jp.arange(4)
    # the last stage's Data rides in the carry (stacking every stage's Data as scan output
    # would write three copies of it)
    return rk4.finish(jax.lax.scan(lambda c, i: (rk4.stage(c, i), None), init, stages)[0])


class RK4Stages:
    """RK4's stages as a scan body over a carry (ks, accs, actds, Data, initial state): ``begin``
    makes the carry of a step, ``stage(carry, i)`` runs stage i, ``finish`` combines the four
    into the stepped Data. ``step`` scans the 4 stages of one step; a differentiated
    ``rollout`` scans the 4 T stages of T steps in one scan (``rollout._rk4_stages``)."""

    STATE = ("qpos", "qvel", "act", "time")

    def __init__(self, m: Model, dtype, loop: str, adjoint: str, first=None):
        self.m, self.loop, self.adjoint, self.first = m, loop, adjoint, first
        self.a = jp.asarray(np.array(_RK4_A), dtype)  # tableau in the state dtype (float32)
        self.c = jp.asarray(np.array(_RK4_A).sum(axis=1), dtype)
        self.b = jp.asarray(_RK4_B, dtype)
        self.rot = _rot_dofs(m)

    def stage(self, carry, i):
        m, a, h, first = self.m, self.a, self.m.opt.timestep, self.first
        # rows >= i of ks (nv), accs (nv), actds (na) are zero; x0: the initial state
        ks, accs, actds, prev, x0 = carry

        def stage_state(ks, accs, actds, x0):
            dvel = a[i] @ ks[:3]
            return dvel, dict(qpos=integrate_pos(m, x0["qpos"], dvel, h),
                              qvel=x0["qvel"] + h * (a[i] @ accs[:3]),
                              act=x0["act"] + h * (a[i] @ actds[:3]),
                              time=x0["time"] + self.c[i] * h)

        # under the forward pass's remat policy, as the stages themselves: saved by default,
        # this glue's scalars and 3-vectors (the free joint's quaternion norms) were written
        # to their stacked buffers one kernel each
        dvel, state = _remat(stage_state)(ks, accs, actds, x0)
        # each stage starts from the last one's Data (what the stages do not compute passes
        # through, as in MuJoCo's one mjData: stage 0's sensors, the warnings counted so far)
        di = prev.replace(**state)
        if first is not None:
            # stage 0 evaluates the initial state itself, bit for bit
            initial = i == 0
            di = di.replace(**{f: where(initial, x0[f], getattr(di, f)) for f in self.STATE})
        di = _forward(m, di, loop=self.loop, adjoint=self.adjoint, sensors=False)
        if first is not None:
            # stage 0 may reset the state (the qacc check); the later stages start from it
            di = first(m, di, initial)
            x0 = {f: where(initial, getattr(di, f), x0[f]) for f in self.STATE}
        k = di.qvel
        if self.rot.size:
            rot = self.rot
            k = _remat(lambda dvel, k: math.put(
                k, rot, _dexp_inv(-h * math.take(dvel, rot), math.take(k, rot))))(dvel, k)
        ks = ks.at[i].set(k)
        accs = accs.at[i].set(di.qacc)
        actds = actds.at[i].set(di.act_dot)
        return ks, accs, actds, di, x0

    def begin(self, d: Data, computed: bool = False):
        """The carry of a step from ``d`` (forward-computed and stage 0 if ``computed``)."""
        # An initial carry that is unbatched where the body's is batched makes vmap batch the
        # body a second time (gymnasium ant, implicit gradient: 0.5 s of trace), and one
        # without a tangent where the body's has one makes JAX linearize it a second time.
        # on_state(x) is x, made to depend on the time, so batched under vmap and with a
        # tangent where the time is (a select whose other branch, taken only at a NaN time,
        # is the time: not 0 * time, which is NaN at inf; not jnp.where, which returns an
        # empty operand as it is)
        anchor = d.time == d.time
        on_state = lambda x: jax.lax.select(  # noqa: E731
            jp.broadcast_to(anchor, x.shape), x, jp.broadcast_to(d.time, x.shape).astype(x.dtype))
        x0 = {f: getattr(d, f) for f in self.STATE}
        if computed:
            rows = lambda x: jp.zeros((4,) + x.shape, x.dtype).at[0].set(x)  # noqa: E731
        else:
            rows = lambda x: on_state(jp.zeros((4,) + x.shape, x.dtype))  # noqa: E731
        # empty arrays (na = 0, no mocap, ...): the body batches them
        return jax.tree.map(lambda x: on_state(x) if x.size == 0 else x,
                            (rows(d.qvel), rows(d.qacc), rows(d.act_dot), d, x0))

    def finish(self, carry) -> Data:
        ks, accs, actds, last, x0 = carry
        b = self.b
        dvel, dacc, dact = b @ ks, b @ accs, b @ actds
        # restore the initial state, then advance it with the weighted derivatives
        last = last.replace(qacc=dacc, qacc_warmstart=last.qacc, **x0)
        return _remat(_advance)(self.m, last, dact, dacc, dvel)


def integrate(m: Model, d: Data, *, loop: str = "fixed", adjoint: str = "unroll") -> Data:
    """Advances a forward-computed Data by one timestep with m.opt.integrator."""
    integ = m.opt.integrator
    if integ == IntegratorType.RK4:
        return _rk4(m, d, loop, adjoint)
    return _remat(_integrate_one_stage)(m, d)


def _integrate_one_stage(m: Model, d: Data) -> Data:
    integ = m.opt.integrator
    d = d.replace(qacc_warmstart=d.qacc)
    if integ == IntegratorType.EULER:
        qacc = _euler_qacc(m, d)
    elif integ in (IntegratorType.IMPLICIT, IntegratorType.IMPLICITFAST):
        qacc = _implicit_qacc(m, d)
    else:
        raise NotImplementedError(f"integrator {integ!r} is not supported")
    return _advance(m, d, d.act_dot, qacc)


def step(m: Model, d: Data, *, loop: str = "fixed", adjoint: str = "unroll",
         contact_smoothing: float = 0.0) -> Data:
    """One simulation step (mj_step): divergence checks of qpos and qvel, forward, the check
    of qacc (a reset runs forward again on the reset state), then integrate.
    ``contact_smoothing``: see ``forward``."""
    return smoothing.smoothed(lambda m, d: _step(m, d, loop, adjoint), m, d,
                              contact_smoothing)


def rk4_first_stage(loop: str, adjoint: str):
    """What ``step`` does after RK4's first forward pass (``RK4Stages``' ``first``): the
    sensors and the qacc check, inside the stage scan."""
    def first(m, d, initial):
        fwd = lambda m, d: forward(m, d, loop=loop, adjoint=adjoint)  # noqa: E731
        return support.check_acc(m, _sensors(m, d, initial), fwd, initial)

    return first


def _step(m: Model, d: Data, loop: str, adjoint: str) -> Data:
    d = support.check_pos_vel(m, d)

    def fwd(m, d):
        return forward(m, d, loop=loop, adjoint=adjoint)

    if m.opt.integrator == IntegratorType.RK4:
        return _rk4(m, d, loop, adjoint, first=rk4_first_stage(loop, adjoint))
    if loop == "early_exit" and adjoint == "unroll" and d.efc_J.shape[0]:
        # the solver's while_loop has no reverse-mode derivative anyway: both passes share
        # one loop, so forward is compiled once
        d = support.forward_checked(m, d, fwd)
    else:
        d = support.check_acc(m, fwd(m, d), fwd)
    return integrate(m, d, loop=loop, adjoint=adjoint)


def _check_discrete(m: Model) -> None:
    if m.opt.enableflags & EnableBit.INVDISCRETE and m.opt.integrator == IntegratorType.RK4:
        raise NotImplementedError(
            "invdiscrete: discrete inverse dynamics is not supported by the RK4 integrator "
            "(MuJoCo 4.0 raises the same)")


def _continuous_qacc(m: Model, d: Data) -> jax.Array:
    """The continuous-time acceleration whose integrator step gives the discrete one in
    d.qacc ((qvel_next - qvel) / h), for the invdiscrete flag (mj_discreteAcc): M^-1 A qacc,
    A the matrix the integrator solves with (M + h B for Euler's implicit damping, M - h
    dF/dv for implicit and implicitfast)."""
    integ = m.opt.integrator
    _check_discrete(m)
    if integ == IntegratorType.EULER:
        damped = _euler_damped(m)
        if damped is None:
            return d.qacc
        return where(damped, smooth.solve_m(m, d, _euler_matrix(m, d) @ d.qacc), d.qacc)
    return smooth.solve_m(m, d, _implicit_matrix(m, d) @ d.qacc)


def inverse(m: Model, d: Data) -> Data:
    """Inverse dynamics (mj_inverse; seed 002, "Inverse dynamics" and "Simulation pipeline"):
    from qpos, qvel and qacc, the position and velocity stages and their sensors, the
    constraint force of qacc in closed form (``solver.inverse_constraint``), then
    qfrc_inverse = M qacc + qfrc_bias - qfrc_passive - qfrc_constraint and the acceleration
    sensors. Actuation is not run (as in MuJoCo, actuator_force is read as given).

    With the invdiscrete flag, d.qacc is the discrete-time acceleration (qvel_next - qvel) / h
    of the model's integrator; it is mapped to continuous time for the computation and
    returned unchanged (RK4 raises, as in MuJoCo, before anything is computed)."""
    _check_discrete(m)
    energy = sensor.energy_enabled(m)
    d = sensor.sensor_pos(m, fwd_position(m, d))
    if energy:
        d = sensor.energy_pos(m, d)
    d = sensor.sensor_vel(m, fwd_velocity(m, d))
    if energy:
        d = sensor.energy_vel(m, d)
    qacc_given = d.qacc
    if m.opt.enableflags & EnableBit.INVDISCRETE:
        d = d.replace(qacc=_continuous_qacc(m, d))
    d = solver.inverse_constraint(m, d)
    qfrc = smooth.mul_m(m, d, d.qacc) + d.qfrc_bias
    if smooth.needs_rne_post(m):
        d = smooth.rne_post_constraint(m, d)
    d = sensor.sensor_acc(m, d)
    qfrc = qfrc - d.qfrc_passive - d.qfrc_constraint
    return d.replace(qfrc_inverse=qfrc, qacc=qacc_given)

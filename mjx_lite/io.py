"""Data creation and reset: ``make_data`` leaves Data as ``mj_makeData`` + ``mj_resetData`` do."""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.collision.driver import contact_budget
from mjx_lite.collision.types import Contact
from mjx_lite.constraint import nefc_budget
from mjx_lite.types import NISLAND, Data, Model

_N_WARNING = 7  # mjNWARNING in MuJoCo 4.0 (mjWARN_VGEOMFULL is gone)


def make_data(m: Model) -> Data:
    """qpos = qpos0, mocap poses from the model, everything else zero (as mj_resetData).

    Built in numpy and transferred in one ``jax.device_put``: each eager ``jp.zeros`` of a new
    shape compiles a program of its own (about 60 a model, 0.5-1 s a fresh model)."""
    fdt = jax.dtypes.canonicalize_dtype(float)  # float32 unless jax_enable_x64
    zeros = lambda *shape: np.zeros(shape, dtype=fdt)  # noqa: E731
    # the model's arrays, or their tracers where make_data runs under a transformation
    model_array = lambda x: (x.astype(fdt) if isinstance(x, jax.core.Tracer)  # noqa: E731
                             else np.asarray(x, dtype=fdt))
    mocap_bodies = np.nonzero(np.asarray(m.body_mocapid) >= 0)[0]
    order = np.argsort(np.asarray(m.body_mocapid)[mocap_bodies])
    mocap_bodies = mocap_bodies[order]
    mocap_pos = model_array(m.body_pos)[mocap_bodies].reshape(m.nmocap, 3)
    mocap_quat = model_array(m.body_quat)[mocap_bodies].reshape(m.nmocap, 4)
    nb, nv = m.nbody, m.nv
    nefc = nefc_budget(m, contact_budget(m))
    d = Data(
        time=np.zeros((), dtype=fdt),
        qpos=model_array(m.qpos0),
        qvel=zeros(nv),
        act=zeros(m.na),
        qacc_warmstart=zeros(nv),
        ctrl=zeros(m.nu),
        qfrc_applied=zeros(nv),
        xfrc_applied=zeros(nb, 6),
        eq_active=np.asarray(m.eq_active0, dtype=bool),
        mocap_pos=mocap_pos,
        mocap_quat=mocap_quat,
        qacc=zeros(nv),
        act_dot=zeros(m.na),
        userdata=zeros(m.nuserdata),
        sensordata=zeros(m.nsensordata),
        xpos=zeros(nb, 3),
        xquat=zeros(nb, 4),
        xmat=zeros(nb, 3, 3),
        xipos=zeros(nb, 3),
        ximat=zeros(nb, 3, 3),
        xanchor=zeros(m.njnt, 3),
        xaxis=zeros(m.njnt, 3),
        geom_xpos=zeros(m.ngeom, 3),
        geom_xmat=zeros(m.ngeom, 3, 3),
        site_xpos=zeros(m.nsite, 3),
        site_xmat=zeros(m.nsite, 3, 3),
        cam_xpos=zeros(m.ncam, 3),
        cam_xmat=zeros(m.ncam, 3, 3),
        light_xpos=zeros(m.nlight, 3),
        light_xdir=zeros(m.nlight, 3),
        subtree_com=zeros(nb, 3),
        cdof=zeros(nv, 6),
        cinert=zeros(nb, 10),
        ten_wrapadr=np.zeros(m.ntendon, dtype=np.int32),
        ten_wrapnum=np.zeros(m.ntendon, dtype=np.int32),
        ten_J=zeros(m.ntendon, nv),
        ten_length=zeros(m.ntendon),
        wrap_obj=np.zeros((m.nwrap, 2), dtype=np.int32),
        wrap_xpos=zeros(m.nwrap, 6),
        actuator_length=zeros(m.nu),
        actuator_moment=zeros(m.nu, nv),
        crb=zeros(nb, 10),
        qM=zeros(nv, nv),
        qLD=zeros(nv, nv),
        qLDiagInv=zeros(nv),
        ncon=np.zeros((), dtype=np.int32),
        contact=Contact.zeros(contact_budget(m), fdt, xp=np),
        ten_velocity=zeros(m.ntendon),
        actuator_velocity=zeros(m.nu),
        cvel=zeros(nb, 6),
        cdof_dot=zeros(nv, 6),
        qfrc_bias=zeros(nv),
        qfrc_spring=zeros(nv),
        qfrc_damper=zeros(nv),
        qfrc_gravcomp=zeros(nv),
        qfrc_fluid=zeros(nv),
        qfrc_passive=zeros(nv),
        subtree_linvel=zeros(nb, 3),
        subtree_angmom=zeros(nb, 3),
        actuator_force=zeros(m.nu),
        qfrc_actuator=zeros(nv),
        qfrc_smooth=zeros(nv),
        qacc_smooth=zeros(nv),
        qfrc_constraint=zeros(nv),
        qfrc_inverse=zeros(nv),
        cacc=zeros(nb, 6),
        cfrc_int=zeros(nb, 6),
        cfrc_ext=zeros(nb, 6),
        energy=zeros(2),
        solver_niter=np.zeros(NISLAND, dtype=np.int32),
        nisland=np.zeros((), dtype=np.int32),
        tree_island=np.full(m.ntree, -1, dtype=np.int32),
        dof_island=np.full(nv, -1, dtype=np.int32),
        efc_island=np.full(nefc, -1, dtype=np.int32),
        warning_count=np.zeros(_N_WARNING, dtype=np.int32),
        # constraint rows: the static budget of constraint.nefc_budget (contact slots included)
        efc_type=np.zeros(nefc, dtype=np.int32),
        efc_id=np.zeros(nefc, dtype=np.int32),
        efc_J=zeros(nefc, nv),
        efc_pos=zeros(nefc),
        efc_margin=zeros(nefc),
        efc_frictionloss=zeros(nefc),
        efc_diagA=zeros(nefc),
        efc_KBIP=zeros(nefc, 4),
        efc_D=zeros(nefc),
        efc_R=np.ones(nefc, dtype=fdt),
        efc_vel=zeros(nefc),
        efc_aref=zeros(nefc),
        efc_force=zeros(nefc),
        efc_state=np.zeros(nefc, dtype=np.int32),
        efc_active=np.zeros(nefc, dtype=bool),
    )
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(d)):
        # under a transformation of the model (a reset inside a differentiated step): one
        # device_put of every field would give the constant ones instantiated zero tangents,
        # which reverse mode then stores per step (reset_data's 101 residual arrays a stage
        # in gymnasium ant's RK4 stage scan); leaf by leaf, only the model's fields have one
        return jax.tree.map(jp.asarray, d)
    return jax.device_put(d)


def reset_keyframe(m: Model, key) -> Data:
    """Data reset to keyframe ``key`` (mj_resetDataKeyframe): make_data, then the keyframe's
    time, qpos, qvel, act, ctrl and mocap poses. ``key`` may be traced (e.g. drawn per env)."""
    if m.nkey == 0:
        raise ValueError("reset_keyframe: the model has no keyframes")
    if isinstance(key, (int, np.integer)) and not 0 <= key < m.nkey:
        raise ValueError(f"reset_keyframe: key {key} out of range [0, {m.nkey})")
    d = make_data(m)
    dtype = d.qpos.dtype
    take = lambda field: jp.asarray(field, dtype)[key]  # noqa: E731
    return d.replace(
        time=take(m.key_time), qpos=take(m.key_qpos), qvel=take(m.key_qvel),
        act=take(m.key_act), ctrl=take(m.key_ctrl),
        mocap_pos=take(m.key_mpos).reshape(m.nmocap, 3),
        mocap_quat=take(m.key_mquat).reshape(m.nmocap, 4))


def where(mask, on_true, on_false):
    """Per-environment select between two batched pytrees (Data, or an env State).

    ``mask`` has the batch shape (B,) (or is a scalar); each leaf of shape (B, ...) takes
    ``on_true`` where mask is set: the batched reset of an autoreset wrapper.
    """
    mask = jp.asarray(mask)

    def pick(a, b):
        m = mask.reshape(mask.shape + (1,) * (jp.ndim(a) - mask.ndim))
        return math.where(m, a, b)

    return jax.tree.map(pick, on_true, on_false)

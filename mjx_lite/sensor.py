"""Sensors (XML reference, "sensor"; Computation chapter, "Simulation pipeline": sensors are
evaluated after the position, velocity and acceleration stages).

``sensor_pos``, ``sensor_vel`` and ``sensor_acc`` each fill the sensors whose
``sensor_needstage`` is that stage, one vectorized computation per sensor type, written at
``sensor_adr``; ``cutoff`` clamps real (symmetric) and positive (upper) values. With the
sensor disable bit set, sensordata is left as it is.

Frame sensors read the object frame by one gather from a table stacked over the object
kinds a model uses (body inertial frame, body frame, geom, site, camera).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math, smooth, tree
from mjx_lite.types import (
    Data,
    DataType,
    DisableBit,
    GeomType,
    Model,
    ObjType,
    Stage,
    TrnType,
)
from mjx_lite.types import (
    SensorType as S,
)

# mjtConstraint values of limit rows (constraint.py)
_LIMIT_JOINT, _LIMIT_TENDON = 3, 4

_FRAME_KINDS = (ObjType.BODY, ObjType.XBODY, ObjType.GEOM, ObjType.SITE, ObjType.CAMERA)


# ------------------------------------------------------------------------------------------
# helpers


def _write(m: Model, data: jax.Array, ids: np.ndarray, values: jax.Array) -> jax.Array:
    """Writes (k, dim) values of sensors ``ids`` (all of one dim) at sensor_adr."""
    values = values.reshape(ids.size, -1)
    adr = np.asarray(m.sensor_adr)[ids][:, None] + np.arange(values.shape[1])
    return data.at[adr].set(values.astype(data.dtype))


def _cutoff(m: Model, data: jax.Array, stage: Stage) -> jax.Array:
    """Clamps REAL sensors to [-cutoff, cutoff] and POSITIVE ones to cutoff (cutoff > 0)."""
    ids = np.nonzero(np.asarray(m.sensor_needstage) == stage)[0]
    dtype_ = np.asarray(m.sensor_datatype)[ids]
    ids = ids[np.isin(dtype_, (DataType.REAL, DataType.POSITIVE))
              & (np.asarray(m.sensor_type)[ids] != S.GEOMFROMTO)]
    if not ids.size:
        return data
    dim = np.asarray(m.sensor_dim)[ids]
    rows = np.repeat(ids, dim)
    adr = np.repeat(np.asarray(m.sensor_adr)[ids], dim) + \
        np.arange(dim.sum()) - np.repeat(np.cumsum(dim) - dim, dim)
    cut = jp.asarray(m.sensor_cutoff)[rows]
    pos = np.asarray(m.sensor_datatype)[rows] == DataType.POSITIVE
    v = data[adr]
    lo = jp.where(pos, v, -cut)
    clipped = jp.where(cut > 0, jp.minimum(jp.maximum(v, lo), cut), v)
    return data.at[adr].set(clipped)


def _frame_tables(m: Model, d: Data, kinds):
    """Stacked (pos, mat, quat, body) of every object of the given kinds and the offsets."""
    pos, mat, quat, body, off = [], [], [], [], {}
    n = 0
    for k in kinds:
        off[k] = n
        if k == ObjType.BODY:
            b = np.arange(m.nbody)
            p, r = d.xipos, d.ximat
            q = math.quat_mul(d.xquat, jp.asarray(m.body_iquat))
        elif k == ObjType.XBODY:
            b = np.arange(m.nbody)
            p, r, q = d.xpos, d.xmat, d.xquat
        elif k == ObjType.GEOM:
            b = np.asarray(m.geom_bodyid)
            p, r = d.geom_xpos, d.geom_xmat
            q = math.quat_mul(d.xquat[b], jp.asarray(m.geom_quat))
        elif k == ObjType.SITE:
            b = np.asarray(m.site_bodyid)
            p, r = d.site_xpos, d.site_xmat
            q = math.quat_mul(d.xquat[b], jp.asarray(m.site_quat))
        elif k == ObjType.CAMERA:
            b = np.asarray(m.cam_bodyid)
            p, r = d.cam_xpos, d.cam_xmat
            q = math.quat_mul(d.xquat[b], jp.asarray(m.cam_quat))
        else:
            raise NotImplementedError(f"frame sensor object type {k}")
        pos.append(p)
        mat.append(r)
        quat.append(q)
        body.append(b)
        n += b.size
    return (jp.concatenate(pos), jp.concatenate(mat), jp.concatenate(quat),
            np.concatenate(body).astype(np.int64), off)


def _frames(m: Model, d: Data, objtype: np.ndarray, objid: np.ndarray):
    """pos (k, 3), mat (k, 3, 3), quat (k, 4), body (k,) of frame objects (static ids)."""
    kinds = [k for k in _FRAME_KINDS if np.any(objtype == k)]
    pos, mat, quat, body, off = _frame_tables(m, d, kinds)
    row = np.array([off[int(t)] + int(i) for t, i in zip(objtype, objid)], dtype=np.int64)
    return pos[row], mat[row], quat[row], body[row]


def _object_velocity(m: Model, d: Data, pos: jax.Array, body: np.ndarray) -> jax.Array:
    """World-frame [ang; lin] velocity of points on bodies (mj_objectVelocity, global)."""
    root = np.asarray(m.body_rootid)[body]
    return math.transform_motion(d.cvel[body], pos, d.subtree_com[root])


def _limit_row(m: Model, d: Data, ctype: int, objid: np.ndarray, field: jax.Array,
               offset=None) -> jax.Array:
    """``field`` (minus ``offset``) at the first active limit row of each object; 0 without
    one (MuJoCo reads the limit's constraint row; none exists away from the limit)."""
    if not d.efc_type.shape[0]:
        return jp.zeros(objid.size, d.qpos.dtype)
    hit = (d.efc_type[None, :] == ctype) & (d.efc_id[None, :] == objid[:, None]) & \
        d.efc_active[None, :].astype(bool)
    val = field[jp.argmax(hit, axis=1)]
    if offset is not None:
        val = val - offset
    return jp.where(jp.any(hit, axis=1), val, 0.0)


def _sensor_ids(m: Model, stage: Stage):
    typ = np.asarray(m.sensor_type)
    need = np.asarray(m.sensor_needstage)
    return {int(t): np.nonzero((typ == t) & (need == stage))[0] for t in np.unique(typ)
            if np.any((typ == t) & (need == stage))}


def _disabled(m: Model) -> bool:
    return bool(m.opt.disableflags & DisableBit.SENSOR) or not m.nsensor


# ------------------------------------------------------------------------------------------
# position stage


def _inside_site(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
    """1 where the object's position is inside the site's shape (in the site frame)."""
    if np.any(np.asarray(m.sensor_intprm)[ids, 0]):
        raise NotImplementedError("insidesite with enclosed='true' is not implemented")
    objtype = np.asarray(m.sensor_objtype)[ids]
    objid = np.asarray(m.sensor_objid)[ids]
    site = np.asarray(m.sensor_refid)[ids]
    pos, _, _, _ = _frames(m, d, objtype, objid)
    loc = jp.einsum("kji,kj->ki", d.site_xmat[site], pos - d.site_xpos[site])
    size = jp.asarray(m.site_size)[site]
    stype = np.asarray(m.site_type)[site]
    x, y, z = loc[:, 0], loc[:, 1], loc[:, 2]
    r2 = x * x + y * y
    sphere = x * x + y * y + z * z <= size[:, 0] ** 2
    zc = jp.clip(z, -size[:, 1], size[:, 1])
    capsule = r2 + (z - zc) ** 2 <= size[:, 0] ** 2
    ell = (x / size[:, 0]) ** 2 + (y / size[:, 1]) ** 2 + (z / size[:, 2]) ** 2 <= 1.0
    cyl = (r2 <= size[:, 0] ** 2) & (jp.abs(z) <= size[:, 1])
    box = jp.all(jp.abs(loc) <= size, axis=-1)
    out = jp.where(stype == GeomType.SPHERE, sphere,
                   jp.where(stype == GeomType.CAPSULE, capsule,
                            jp.where(stype == GeomType.ELLIPSOID, ell,
                                     jp.where(stype == GeomType.CYLINDER, cyl, box))))
    return out.astype(d.qpos.dtype)


def _frame_pos_sensors(m: Model, d: Data, stype: int, ids: np.ndarray) -> jax.Array:
    objtype = np.asarray(m.sensor_objtype)[ids]
    objid = np.asarray(m.sensor_objid)[ids]
    reftype = np.asarray(m.sensor_reftype)[ids]
    refid = np.asarray(m.sensor_refid)[ids]
    pos, mat, quat, _ = _frames(m, d, objtype, objid)
    has_ref = refid >= 0
    if np.any(has_ref):
        rtype = np.where(has_ref, reftype, ObjType.XBODY)
        rpos, rmat, rquat, _ = _frames(m, d, rtype, np.maximum(refid, 0))
    if stype == S.FRAMEPOS:
        if np.any(has_ref):
            rel = jp.einsum("kji,kj->ki", rmat, pos - rpos)
            pos = jp.where(has_ref[:, None], rel, pos)
        return pos
    if stype == S.FRAMEQUAT:
        if np.any(has_ref):
            rel = math.quat_mul(math.quat_conj(rquat), quat)
            quat = jp.where(has_ref[:, None], rel, quat)
        return quat
    axis = mat[:, :, {S.FRAMEXAXIS: 0, S.FRAMEYAXIS: 1, S.FRAMEZAXIS: 2}[stype]]
    if np.any(has_ref):
        rel = jp.einsum("kji,kj->ki", rmat, axis)
        axis = jp.where(has_ref[:, None], rel, axis)
    return axis


def sensor_pos(m: Model, d: Data) -> Data:
    """Position-dependent sensors (mj_sensorPos)."""
    if _disabled(m):
        return d
    data = d.sensordata
    objid_all = np.asarray(m.sensor_objid)
    for stype, ids in _sensor_ids(m, Stage.POS).items():
        objid = objid_all[ids]
        if stype == S.MAGNETOMETER:
            mag = jp.asarray(m.opt.magnetic, data.dtype)
            val = jp.einsum("kji,j->ki", d.site_xmat[objid], mag)
        elif stype == S.JOINTPOS:
            val = d.qpos[np.asarray(m.jnt_qposadr)[objid]]
        elif stype == S.TENDONPOS:
            val = d.ten_length[objid]
        elif stype == S.ACTUATORPOS:
            val = d.actuator_length[objid]
        elif stype == S.BALLQUAT:
            adr = np.asarray(m.jnt_qposadr)[objid]
            val = math.quat_normalize(d.qpos[adr[:, None] + np.arange(4)])
        elif stype == S.JOINTLIMITPOS:
            val = _limit_row(m, d, _LIMIT_JOINT, objid, d.efc_pos,
                             jp.asarray(m.jnt_margin)[objid])
        elif stype == S.TENDONLIMITPOS:
            val = _limit_row(m, d, _LIMIT_TENDON, objid, d.efc_pos,
                             jp.asarray(m.tendon_margin)[objid])
        elif stype in (S.FRAMEPOS, S.FRAMEQUAT, S.FRAMEXAXIS, S.FRAMEYAXIS, S.FRAMEZAXIS):
            val = _frame_pos_sensors(m, d, stype, ids)
        elif stype == S.SUBTREECOM:
            val = d.subtree_com[objid]
        elif stype == S.INSIDESITE:
            val = _inside_site(m, d, ids)
        elif stype == S.CLOCK:
            val = jp.broadcast_to(d.time, (ids.size,))
        else:
            raise NotImplementedError(f"sensor type {S(stype).name} is not implemented")
        data = _write(m, data, ids, val)
    return d.replace(sensordata=_cutoff(m, data, Stage.POS))


# ------------------------------------------------------------------------------------------
# velocity stage


def _frame_vel_sensors(m: Model, d: Data, stype: int, ids: np.ndarray) -> jax.Array:
    objtype = np.asarray(m.sensor_objtype)[ids]
    objid = np.asarray(m.sensor_objid)[ids]
    reftype = np.asarray(m.sensor_reftype)[ids]
    refid = np.asarray(m.sensor_refid)[ids]
    pos, _, _, body = _frames(m, d, objtype, objid)
    vel = _object_velocity(m, d, pos, body)
    ang, lin = vel[:, :3], vel[:, 3:]
    has_ref = refid >= 0
    if not np.any(has_ref):
        return lin if stype == S.FRAMELINVEL else ang
    rtype = np.where(has_ref, reftype, ObjType.XBODY)
    rpos, rmat, _, rbody = _frames(m, d, rtype, np.maximum(refid, 0))
    rvel = _object_velocity(m, d, rpos, rbody)
    if stype == S.FRAMELINVEL:
        # velocity relative to the (rotating) reference frame, in its coordinates
        rel = lin - rvel[:, 3:] - jp.cross(rvel[:, :3], pos - rpos)
        return jp.where(has_ref[:, None], jp.einsum("kji,kj->ki", rmat, rel), lin)
    rel = jp.einsum("kji,kj->ki", rmat, ang - rvel[:, :3])
    return jp.where(has_ref[:, None], rel, ang)


def sensor_vel(m: Model, d: Data) -> Data:
    """Velocity-dependent sensors (mj_sensorVel)."""
    if _disabled(m):
        return d
    data = d.sensordata
    objid_all = np.asarray(m.sensor_objid)
    groups = _sensor_ids(m, Stage.VEL)
    if S.SUBTREELINVEL in groups or S.SUBTREEANGMOM in groups:
        d = smooth.subtree_vel(m, d)
    for stype, ids in groups.items():
        objid = objid_all[ids]
        if stype in (S.VELOCIMETER, S.GYRO):
            sb = np.asarray(m.site_bodyid)[objid]
            vel = _object_velocity(m, d, d.site_xpos[objid], sb)
            part = vel[:, 3:] if stype == S.VELOCIMETER else vel[:, :3]
            val = jp.einsum("kji,kj->ki", d.site_xmat[objid], part)
        elif stype == S.JOINTVEL:
            val = d.qvel[np.asarray(m.jnt_dofadr)[objid]]
        elif stype == S.TENDONVEL:
            val = d.ten_velocity[objid]
        elif stype == S.ACTUATORVEL:
            val = d.actuator_velocity[objid]
        elif stype == S.BALLANGVEL:
            adr = np.asarray(m.jnt_dofadr)[objid]
            val = d.qvel[adr[:, None] + np.arange(3)]
        elif stype == S.JOINTLIMITVEL:
            val = _limit_row(m, d, _LIMIT_JOINT, objid, d.efc_vel)
        elif stype == S.TENDONLIMITVEL:
            val = _limit_row(m, d, _LIMIT_TENDON, objid, d.efc_vel)
        elif stype in (S.FRAMELINVEL, S.FRAMEANGVEL):
            val = _frame_vel_sensors(m, d, stype, ids)
        elif stype == S.SUBTREELINVEL:
            val = d.subtree_linvel[objid]
        elif stype == S.SUBTREEANGMOM:
            val = d.subtree_angmom[objid]
        else:
            raise NotImplementedError(f"sensor type {S(stype).name} is not implemented")
        data = _write(m, data, ids, val)
    return d.replace(sensordata=_cutoff(m, data, Stage.VEL))


# ------------------------------------------------------------------------------------------
# acceleration stage


def _cacc(m: Model, d: Data) -> jax.Array:
    """Body com-based accelerations with gravity as a root acceleration, from qacc (the
    cacc of mj_rnePostConstraint)."""
    dtype = d.qvel.dtype
    root = jp.zeros(6, dtype)
    if not m.opt.disableflags & DisableBit.GRAVITY:
        root = root.at[3:].set(-jp.asarray(m.opt.gravity, dtype))
    acc = d.cdof_dot * d.qvel[:, None] + d.cdof * d.qacc[:, None]
    local = jax.ops.segment_sum(acc, np.asarray(m.dof_bodyid), num_segments=m.nbody)
    return tree.scan_down(m, lambda p, loc: p + loc, local, root)


def _object_acc(m: Model, d: Data, cacc: jax.Array, pos: jax.Array, body: np.ndarray):
    """World-frame [ang; lin] acceleration of points on bodies, the linear part including
    the w x v term of a point moving with its body (mj_objectAcceleration)."""
    root = np.asarray(m.body_rootid)[body]
    vel = math.transform_motion(d.cvel[body], pos, d.subtree_com[root])
    acc = math.transform_motion(cacc[body], pos, d.subtree_com[root])
    return acc.at[:, 3:].add(jp.cross(vel[:, :3], vel[:, 3:]))


def sensor_acc(m: Model, d: Data) -> Data:
    """Acceleration/force-dependent sensors (mj_sensorAcc): accelerometer, framelinacc,
    frameangacc, actuator / joint- and tendon-actuator forces and limit forces. Sensors that
    need interaction forces (touch, force, torque, contact) are not implemented."""
    if _disabled(m):
        return d
    data = d.sensordata
    objid_all = np.asarray(m.sensor_objid)
    groups = _sensor_ids(m, Stage.ACC)
    acc_types = (S.ACCELEROMETER, S.FRAMELINACC, S.FRAMEANGACC)
    cacc = _cacc(m, d) if any(t in groups for t in acc_types) else None
    for stype, ids in groups.items():
        objid = objid_all[ids]
        if stype == S.ACCELEROMETER:
            sb = np.asarray(m.site_bodyid)[objid]
            acc = _object_acc(m, d, cacc, d.site_xpos[objid], sb)
            val = jp.einsum("kji,kj->ki", d.site_xmat[objid], acc[:, 3:])
        elif stype in (S.FRAMELINACC, S.FRAMEANGACC):
            pos, _, _, body = _frames(m, d, np.asarray(m.sensor_objtype)[ids], objid)
            acc = _object_acc(m, d, cacc, pos, body)
            val = acc[:, 3:] if stype == S.FRAMELINACC else acc[:, :3]
        elif stype == S.ACTUATORFRC:
            val = d.actuator_force[objid]
        elif stype == S.JOINTACTFRC:
            val = d.qfrc_actuator[np.asarray(m.jnt_dofadr)[objid]]
        elif stype == S.TENDONACTFRC:
            # total force of the actuators transmitting through the tendon
            trn = np.asarray(m.actuator_trntype) == TrnType.TENDON
            tid = np.asarray(m.actuator_trnid)[:, 0]
            sel = jp.asarray((trn[None, :] & (tid[None, :] == objid[:, None])), d.qpos.dtype)
            val = sel @ d.actuator_force if m.nu else jp.zeros(ids.size, d.qpos.dtype)
        elif stype == S.JOINTLIMITFRC:
            val = _limit_row(m, d, _LIMIT_JOINT, objid, d.efc_force)
        elif stype == S.TENDONLIMITFRC:
            val = _limit_row(m, d, _LIMIT_TENDON, objid, d.efc_force)
        else:
            raise NotImplementedError(
                f"sensor type {S(stype).name} needs cacc / cfrc_int (not implemented)")
        data = _write(m, data, ids, val)
    return d.replace(sensordata=_cutoff(m, data, Stage.ACC))



"""Sensors (XML reference, "sensor"; Computation chapter, "Simulation pipeline": sensors are
evaluated after the position, velocity and acceleration stages).

``sensor_pos``, ``sensor_vel`` and ``sensor_acc`` each fill the sensors whose
``sensor_needstage`` is that stage, one vectorized computation per sensor type, written at
``sensor_adr``; ``cutoff`` clamps real (symmetric) and positive (upper) values. With the
sensor disable bit set, sensordata is left as it is.

Frame sensors read the object frame by one gather from a table stacked over the object
kinds a model uses (body inertial frame, body frame, geom, site, camera). Rangefinders cast
one vmapped ``ray`` per site group and per camera (depth image; the ``normal`` field
raises); distance/normal/fromto run the collision functions once per geom-type key with the
cutoff as margin (pairs without one raise); touch sums contact normal forces whose ray meets
the site; contact sensors match, reduce and extract d.contact in MuJoCo's contact order (the
linvel / angvel fields raise); force/torque read ``cfrc_int``; e_potential / e_kinetic and
the energy flag's ``d.energy`` follow mj_energyPos / mj_energyVel. Tactile sensors are not
implemented.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math, smooth, tree
from mjx_lite.math import where
from mjx_lite.passive import quat_sub
from mjx_lite.types import (
    Data,
    DataType,
    DisableBit,
    EnableBit,
    GeomType,
    JointType,
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
              & ~np.isin(np.asarray(m.sensor_type)[ids], (S.GEOMFROMTO, S.CONTACT))]
    if not ids.size:
        return data
    dim = np.asarray(m.sensor_dim)[ids]
    rows = np.repeat(ids, dim)
    adr = np.repeat(np.asarray(m.sensor_adr)[ids], dim) + \
        np.arange(dim.sum()) - np.repeat(np.cumsum(dim) - dim, dim)
    cut = jp.asarray(m.sensor_cutoff)[rows]
    pos = np.asarray(m.sensor_datatype)[rows] == DataType.POSITIVE
    v = data[adr]
    lo = where(pos, v, -cut)
    clipped = where(cut > 0, jp.minimum(jp.maximum(v, lo), cut), v)
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
    return where(jp.any(hit, axis=1), val, 0.0)


def _sensor_ids(m: Model, stage: Stage):
    typ = np.asarray(m.sensor_type)
    need = np.asarray(m.sensor_needstage)
    return {int(t): np.nonzero((typ == t) & (need == stage))[0] for t in np.unique(typ)
            if np.any((typ == t) & (need == stage))}


def _disabled(m: Model) -> bool:
    return bool(m.opt.disableflags & DisableBit.SENSOR) or not m.nsensor


# ------------------------------------------------------------------------------------------
# energy (XML reference, option/flag "energy"; sensors e_potential, e_kinetic)


def _spring_energy(x, k, poly):
    """Integral of the polynomial spring force f(x) = k x + b x^2 + c x^3 (passive.py)."""
    return x * x * (0.5 * k + x * (poly[..., 0] / 3.0 + x * poly[..., 1] / 4.0))


def potential_energy(m: Model, d: Data) -> jax.Array:
    """Gravity (-sum m_b g . xipos_b) plus the energy stored in joint and tendon springs
    (mj_energyPos); ball and free rotations use the norm of the rotation vector."""
    dtype = d.qpos.dtype
    e = jp.zeros((), dtype)
    if not m.opt.disableflags & DisableBit.GRAVITY and m.nbody > 1:
        g = jp.asarray(m.opt.gravity, dtype)
        e = e - jp.sum(jp.asarray(m.body_mass)[1:] * (d.xipos[1:] @ g))
    if m.opt.disableflags & DisableBit.SPRING:
        return e
    jtype = np.asarray(m.jnt_type)
    qadr = np.asarray(m.jnt_qposadr)
    k, poly = jp.asarray(m.jnt_stiffness), jp.asarray(m.jnt_stiffnesspoly)
    spring = jp.asarray(m.qpos_spring)
    scalar = np.nonzero((jtype == JointType.HINGE) | (jtype == JointType.SLIDE))[0]
    if scalar.size:
        x = d.qpos[qadr[scalar]] - spring[qadr[scalar]]
        e = e + jp.sum(_spring_energy(x, k[scalar], poly[scalar]))
    free = np.nonzero(jtype == JointType.FREE)[0]
    if free.size:
        qi = qadr[free][:, None] + np.arange(3)
        x = math.safe_norm(d.qpos[qi] - spring[qi], axis=-1)
        e = e + jp.sum(_spring_energy(x, k[free], poly[free]))
    rot = np.nonzero((jtype == JointType.BALL) | (jtype == JointType.FREE))[0]
    if rot.size:
        qi = qadr[rot][:, None] + np.where(jtype[rot] == JointType.FREE, 3, 0)[:, None] + \
            np.arange(4)
        dif = quat_sub(math.quat_normalize(d.qpos[qi]), spring[qi])
        x = math.safe_norm(dif, axis=-1)
        e = e + jp.sum(_spring_energy(x, k[rot], poly[rot]))
    if m.ntendon:
        lower, upper = m.tendon_lengthspring[:, 0], m.tendon_lengthspring[:, 1]
        x = where(d.ten_length < lower, d.ten_length - lower, 0.0)
        x = where(d.ten_length > upper, d.ten_length - upper, x)
        e = e + jp.sum(_spring_energy(x, jp.asarray(m.tendon_stiffness),
                                      jp.asarray(m.tendon_stiffnesspoly)))
    return e


def kinetic_energy(m: Model, d: Data) -> jax.Array:
    """0.5 qvel' M qvel (mj_energyVel), the current value. (MuJoCo 4.0's e_kinetic sensor
    with the energy flag repeats the previous forward's energy[1] once its never-cleared
    ``flg_energyvel`` is set; that staleness is not reproduced.)"""
    return 0.5 * d.qvel @ smooth.mul_m(m, d, d.qvel)


def energy_enabled(m: Model) -> bool:
    return bool(m.opt.enableflags & EnableBit.ENERGY)


def energy_pos(m: Model, d: Data) -> Data:
    """d.energy[0] (position stage, after the position sensors, with the energy flag)."""
    return d.replace(energy=d.energy.at[0].set(potential_energy(m, d)))


def energy_vel(m: Model, d: Data) -> Data:
    """d.energy[1] (velocity stage, after the velocity sensors, with the energy flag)."""
    return d.replace(energy=d.energy.at[1].set(kinetic_energy(m, d)))


# ------------------------------------------------------------------------------------------
# collision sensors (XML reference, "Collision sensors": distance, normal, fromto)


def _sensor_geoms(m: Model, objtype: int, objid: int) -> np.ndarray:
    if objtype == ObjType.GEOM:
        return np.array([objid])
    adr, num = int(m.body_geomadr[objid]), int(m.body_geomnum[objid])
    return np.arange(adr, adr + num) if num > 0 else np.zeros(0, np.int64)


def _geom_distance(m: Model, d: Data, ids: np.ndarray):
    """(dist, fromto) of each sensor: the smallest signed distance over its geom pairs
    (mj_geomDistance with distmax = cutoff; distmax and a zero fromto if none is closer).

    One vmapped collider call per geom-type key over every pair of every sensor; a pair is
    run in type order and its fromto swapped back when the sensor names it the other way.
    """
    from mjx_lite.collision import driver  # collision imports smooth; keep sensor light

    dtype = d.geom_xpos.dtype
    gtype = np.asarray(m.geom_type)
    sens, ga, gb = [], [], []
    for k, i in enumerate(ids):
        g1 = _sensor_geoms(m, int(m.sensor_objtype[i]), int(m.sensor_objid[i]))
        g2 = _sensor_geoms(m, int(m.sensor_reftype[i]), int(m.sensor_refid[i]))
        for a in g1:
            for b in g2:
                sens.append(k)
                ga.append(a)
                gb.append(b)
    cutoff = jp.asarray(m.sensor_cutoff, dtype)[ids]
    if not sens:
        return cutoff, jp.zeros((ids.size, 6), dtype)
    sens, ga, gb = np.array(sens), np.array(ga), np.array(gb)
    flip = gtype[ga] > gtype[gb]
    g1, g2 = np.where(flip, gb, ga), np.where(flip, ga, gb)
    npair = sens.size
    pdist = jp.zeros(npair, dtype)
    pft = jp.zeros((npair, 6), dtype)
    size = jp.asarray(m.geom_size, dtype)
    for key in sorted({(int(gtype[a]), int(gtype[b])) for a, b in zip(g1, g2)}):
        rows = np.nonzero((gtype[g1] == key[0]) & (gtype[g2] == key[1]))[0]
        fn = driver.collider(m, key, single=True)
        if fn is None or GeomType.HFIELD in key:  # height fields collide as prism sets
            raise NotImplementedError(
                "distance/normal/fromto sensor: no distance function for "
                + "-".join(GeomType(t).name.lower() for t in key) + " geom pairs")
        a, b = g1[rows], g2[rows]
        args = [d.geom_xpos[a], d.geom_xmat[a], size[a], d.geom_xpos[b], d.geom_xmat[b],
                size[b], cutoff[sens[rows]]]
        mesh = getattr(fn, "MESH", None)
        if mesh is not None:
            args += [driver._mesh_verts(m, a).astype(dtype) if mesh[0] else None,
                     driver._mesh_verts(m, b).astype(dtype) if mesh[1] else None]
        dist, pos, normal, _, valid = jax.vmap(fn)(*args)
        # the closest contact of the pair (first of equals, as MuJoCo's strict <)
        dist = where(valid, dist, jp.inf)
        j = jp.argmin(dist, axis=1)
        take = lambda x, j=j: jp.take_along_axis(  # noqa: E731
            x, j.reshape((-1,) + (1,) * (x.ndim - 1)), axis=1)[:, 0]
        dmin, p, n = take(dist), take(pos), take(normal)
        frm = p - n * (0.5 * dmin)[:, None]
        to = p + n * (0.5 * dmin)[:, None]
        fl = flip[rows][:, None]
        ft = jp.concatenate([where(fl, to, frm), where(fl, frm, to)], axis=1)
        pdist = pdist.at[rows].set(dmin)
        pft = pft.at[rows].set(where(jp.isfinite(dmin)[:, None], ft, 0.0))
    # per sensor: the first pair (in loop order) of smallest distance below the cutoff
    closer = pdist < cutoff[sens]
    best_d = jax.ops.segment_min(where(closer, pdist, jp.inf), sens, num_segments=ids.size)
    is_best = closer & (pdist == best_d[sens])
    order = where(is_best, jp.arange(npair), npair)
    first = jax.ops.segment_min(order, sens, num_segments=ids.size)
    found = first < npair
    fc = jp.minimum(first, npair - 1)
    dist = where(found, pdist[fc], cutoff)
    fromto = where(found[:, None], pft[fc], 0.0)
    return dist, fromto


def _ray_fields(mask: int, dist, vec, pnt, depth) -> jax.Array:
    """(n, size) ``data`` fields of n rays in order (fill_raydata): dist, dir (0 without a
    hit), origin, point (0 without a hit), depth (-1 without a hit)."""
    hit = (dist >= 0)[:, None]
    fields = {0: dist[:, None], 1: where(hit, vec, 0.0), 2: pnt,
              3: where(hit, pnt + dist[:, None] * vec, 0.0),
              5: where(hit, depth[:, None], -1.0)}
    return jp.concatenate([fields[k] for k in range(6) if mask & (1 << k)], axis=1)


def _camera_rays(m: Model, d: Data, cam: int):
    """Origins and unit directions of a camera's pixel rays, row-major from the top-left
    pixel, through pixel centres: perspective rays from the camera position with focal
    length (height / 2) / tan(fovy / 2) in pixels; orthographic rays along -z from a grid
    fovy wide and fovy high on the image plane."""
    w, h = (int(x) for x in np.asarray(m.cam_resolution)[cam])
    col = np.tile(np.arange(w), h) + 0.5 - 0.5 * w
    row = np.repeat(np.arange(h), w) + 0.5 - 0.5 * h
    pos, mat = d.cam_xpos[cam], d.cam_xmat[cam]
    fovy = jp.asarray(m.cam_fovy, pos.dtype)[cam]
    if int(np.asarray(m.cam_projection)[cam]) == 0:  # perspective
        f = 0.5 * h / jp.tan(fovy * np.pi / 360.0)
        local = jp.stack([col / f, -row / f, -jp.ones(col.size, pos.dtype)], axis=1)
        vec = math.normalize(local @ mat.T)
        return jp.broadcast_to(pos, vec.shape), vec
    # MuJoCo 4.0 (measured): the fovy extent spans the image both across and down
    local = jp.stack([col * (fovy / w), -row * (fovy / h), jp.zeros(col.size, pos.dtype)],
                     axis=1)
    return pos + local @ mat.T, jp.broadcast_to(-mat[:, 2], (col.size, 3))


def _rangefinder(m: Model, d: Data, ids: np.ndarray) -> list[jax.Array]:
    """Rangefinders (XML reference, "sensor/rangefinder"): a site's ray along its +z axis,
    geoms of the site's body excluded; a camera's depth image, one ray per pixel, geoms of
    the camera's body excluded, depth measured along the camera's view axis. One vmapped
    ray per sensor kind; returns each sensor's ``data`` block."""
    from mjx_lite.ray import ray as cast_ray  # the package exports the function as `ray`

    masks = np.asarray(m.sensor_intprm)[ids, 0]
    if np.any(masks & (1 << 4)):
        raise NotImplementedError("rangefinder data 'normal' is not implemented")
    objtype = np.asarray(m.sensor_objtype)[ids]
    objid = np.asarray(m.sensor_objid)[ids]
    cast = jax.vmap(lambda p, v, b: cast_ray(m, d, p, v, bodyexclude=b)[0])
    out = [None] * ids.size
    rows = np.nonzero(objtype == ObjType.SITE)[0]
    if rows.size:
        site = objid[rows]
        pnt, vec = d.site_xpos[site], d.site_xmat[site][:, :, 2]
        dist = cast(pnt, vec, jp.asarray(np.asarray(m.site_bodyid)[site]))
        for r in rows:
            k = int(np.nonzero(rows == r)[0][0])
            out[r] = _ray_fields(int(masks[r]), dist[k:k + 1], vec[k:k + 1], pnt[k:k + 1],
                                 dist[k:k + 1]).reshape(-1)
    for r in np.nonzero(objtype == ObjType.CAMERA)[0]:
        cam = int(objid[r])
        pnt, vec = _camera_rays(m, d, cam)
        body = jp.full(vec.shape[0], int(np.asarray(m.cam_bodyid)[cam]))
        dist = cast(pnt, vec, body)
        point = pnt + dist[:, None] * vec
        depth = -((point - d.cam_xpos[cam]) @ d.cam_xmat[cam][:, 2])
        out[r] = _ray_fields(int(masks[r]), dist, vec, pnt, depth).reshape(-1)
    return out


def _camprojection(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
    """Pixel coordinates (origin top-left) of the site in the camera image: the pinhole
    projection with focal length 0.5 res_y / tan(fovy / 2) (XML reference,
    "sensor/camprojection"); points behind the camera are projected too."""
    site = np.asarray(m.sensor_objid)[ids]
    cam = np.asarray(m.sensor_refid)[ids]
    res = np.asarray(m.cam_resolution)[cam].astype(np.float64)
    p = jp.einsum("kji,kj->ki", d.cam_xmat[cam], d.site_xpos[site] - d.cam_xpos[cam])
    f = 0.5 / jp.tan(jp.asarray(m.cam_fovy)[cam] * (np.pi / 360.0)) * res[:, 1]
    z = p[:, 2]
    u = (-f * p[:, 0] + 0.5 * res[:, 0] * z) / z
    v = (f * p[:, 1] + 0.5 * res[:, 1] * z) / z
    return jp.stack([u, v], axis=-1)


def _collision_sensors(m: Model, d: Data, groups: dict) -> dict:
    """Values of the distance, normal and fromto sensors, by type, from one geom-distance
    computation over all of them (each collider is traced once)."""
    types = [t for t in (S.GEOMDIST, S.GEOMNORMAL, S.GEOMFROMTO) if t in groups]
    ids = np.concatenate([groups[t] for t in types])
    dist, fromto = _geom_distance(m, d, ids)
    out, k = {}, 0
    for t in types:
        n = groups[t].size
        if t == S.GEOMDIST:
            out[t] = dist[k:k + n]
        elif t == S.GEOMFROMTO:
            out[t] = fromto[k:k + n]
        else:
            v = fromto[k:k + n, 3:] - fromto[k:k + n, :3]
            norm = math.safe_norm(v, axis=-1)[:, None]
            out[t] = where(norm > 0, v / where(norm > 0, norm, 1.0), 0.0)
        k += n
    return out


# ------------------------------------------------------------------------------------------
# contact sensors (XML reference, "sensor/contact": matching, reduction, extraction)

# data fields (bit k of intprm[0]) and their sizes; linvel / angvel are bits 7, 8
_CONDATA_SIZE = (1, 3, 3, 1, 3, 3, 3, 3, 3)
_REDUCE_NONE, _REDUCE_MINDIST, _REDUCE_MAXFORCE, _REDUCE_NETFORCE = 0, 1, 2, 3


def _contact_slots(m: Model):
    """Static per-slot geoms and the permutation of d.contact's slots into MuJoCo's contact
    order: by candidate pair in MuJoCo's pair order (collision.pairs.geom_pairs), then by
    the collider's contact index. (The driver lays slots out by geom-type key instead.)"""
    from mjx_lite.collision import driver, pairs

    rank = {p: k for k, p in enumerate(pairs.geom_pairs(m))}
    key, g1, g2 = [], [], []
    if driver.max_geom_pairs(m) is not None:
        raise NotImplementedError(f"contact sensors with a custom numeric "
                                  f"{driver.MAX_GEOM_PAIRS}* cap (its slots hold traced geoms)")
    for grp in driver._groups(m):
        n = driver.collider(m, grp.types).NCON
        for a, b, ip in zip(grp.geom1, grp.geom2, grp.ipair):
            r = rank[(int(a), int(b), int(ip))]
            key += [(r, k) for k in range(n)]
            g1 += [int(a)] * n
            g2 += [int(b)] * n
    order = np.array(sorted(range(len(key)), key=key.__getitem__), dtype=np.int64)
    g1, g2 = np.array(g1, np.int64), np.array(g2, np.int64)
    return order, g1[order], g2[order]


def _object_match(m: Model, body: np.ndarray, geom: np.ndarray, objtype: int, objid: int):
    """checkMatch of a sensor object against the contact's bodies/geoms (static)."""
    if objtype in (ObjType.UNKNOWN, ObjType.SITE):
        return np.ones(body.shape, bool)  # the site test is applied separately (traced)
    if objtype == ObjType.GEOM:
        return geom == objid
    if objtype == ObjType.BODY:
        return body == objid
    if objtype == ObjType.XBODY:  # subtree: objid is body or one of its ancestors
        parent = np.asarray(m.body_parentid)
        out = np.zeros(body.shape, bool)
        for k, b in enumerate(body):
            while b > objid:
                b = parent[b]
            out[k] = b == objid
        return out
    raise NotImplementedError(f"contact sensor object type {objtype}")


def _contact_match(m: Model, g1: np.ndarray, g2: np.ndarray, t1, i1, t2, i2):
    """Static (match, flip) of every slot for one sensor (matchContact without the site
    volume test): flip where the sensor's first object is the contact's second."""
    gb = np.asarray(m.geom_bodyid)
    b1, b2 = gb[g1], gb[g2]
    m11, m12 = _object_match(m, b1, g1, t1, i1), _object_match(m, b2, g2, t1, i1)
    m21, m22 = _object_match(m, b1, g1, t2, i2), _object_match(m, b2, g2, t2, i2)
    match = (m11 | m12) & (m21 | m22)
    unk1, unk2 = t1 == ObjType.UNKNOWN, t2 == ObjType.UNKNOWN
    if unk1 and unk2:
        return np.ones(g1.shape, bool), np.zeros(g1.shape, bool)
    if not unk1 and not unk2:
        regular, reverse = m11 & m22, m12 & m21
        return match & (regular | reverse), reverse & ~regular
    if not unk1:
        return match, ~m11
    return match, ~m22


def _inside(pos, mat, size, stype: int, point):
    """Whether world points lie inside a site's volume (mju_insideGeom), one site."""
    loc = (point - pos) @ mat
    x, y, z = loc[..., 0], loc[..., 1], loc[..., 2]
    r2 = x * x + y * y
    if stype == GeomType.SPHERE:
        return r2 + z * z <= size[0] ** 2
    if stype == GeomType.CAPSULE:
        zc = jp.clip(z, -size[1], size[1])
        return r2 + (z - zc) ** 2 <= size[0] ** 2
    if stype == GeomType.ELLIPSOID:
        return (x / size[0]) ** 2 + (y / size[1]) ** 2 + (z / size[2]) ** 2 <= 1.0
    if stype == GeomType.CYLINDER:
        return (r2 <= size[0] ** 2) & (jp.abs(z) <= size[1])
    if stype == GeomType.BOX:
        return jp.all(jp.abs(loc) <= size, axis=-1)
    raise NotImplementedError(f"contact sensor on a {GeomType(stype).name} site")


def _contact_sensors(m: Model, d: Data, ids: np.ndarray) -> list[jax.Array]:
    """Each contact sensor's block: matched contacts (static geom/body/subtree tests, traced
    validity and site volume), reduced to ``num`` slots by a stable sort over MuJoCo's
    contact order (none: order; mindist: dist ascending; maxforce: force norm descending;
    ties by order) or to one force-weighted synthetic contact (netforce), then the
    requested fields, the normal and tangent flipped (force/torque z negated) when the
    sensor's first object is the contact's second geom."""
    from mjx_lite import support

    dtype = d.qpos.dtype
    intprm = np.asarray(m.sensor_intprm)[ids]
    # (the compiler rejects linvel / angvel with netforce, as MuJoCo does)
    want_vel = intprm[:, 0] & (1 << 7 | 1 << 8)
    con = getattr(d, "contact", None)
    nslot = 0 if con is None else int(con.dist.shape[0])
    if nslot == 0:
        return [jp.zeros(int(m.sensor_dim[i]), dtype) for i in ids]
    order, g1, g2 = _contact_slots(m)
    valid = con.valid[order]
    dist, pos, frame = con.dist[order], con.pos[order], con.frame[order]
    need_force = np.any(intprm[:, 0] & 0b110) or np.any(intprm[:, 1] >= _REDUCE_MAXFORCE)
    force = None
    if need_force:
        force = jax.vmap(lambda i: support.contact_force(m, d, i))(jp.asarray(order))
    rel_vel = None
    if np.any(want_vel):
        # [ang; lin] velocity of geom 2's body relative to geom 1's at the contact point,
        # world axes (measured: MuJoCo 4.0's linvel / angvel in the contact frame)
        gb = np.asarray(m.geom_bodyid)
        rel_vel = (_object_velocity(m, d, pos, gb[g2]) - _object_velocity(m, d, pos, gb[g1]))
    out = []
    for i, (spec, reduce, num) in zip(ids, intprm):
        t1, i1 = int(m.sensor_objtype[i]), int(m.sensor_objid[i])
        t2, i2 = int(m.sensor_reftype[i]), int(m.sensor_refid[i])
        smatch, sflip = _contact_match(m, g1, g2, t1, i1, t2, i2)
        mask = valid & jp.asarray(smatch)
        if t1 == ObjType.SITE:
            mask = mask & _inside(d.site_xpos[i1], d.site_xmat[i1],
                                  jp.asarray(m.site_size, dtype)[i1], int(m.site_type[i1]),
                                  pos)
        nmatch = jp.sum(mask).astype(dtype)
        sign = jp.asarray(np.where(sflip, -1.0, 1.0), dtype)
        fields = [k for k in range(9) if spec & (1 << k)]
        if reduce == _REDUCE_NETFORCE:
            w = where(mask[:, None], force * sign[:, None], 0.0)
            weight = math.safe_norm(w[:, :3], axis=-1)
            total = jp.sum(weight)
            point = jp.sum(weight[:, None] * pos, axis=0) / jp.maximum(total, 1e-15)
            fj = jp.einsum("kji,kj->ki", frame, w[:, :3])
            tj = jp.einsum("kji,kj->ki", frame, w[:, 3:]) + math.cross(pos - point, fj)
            val = {0: nmatch[None], 1: jp.sum(fj, axis=0), 2: jp.sum(tj, axis=0),
                   3: jp.zeros(1, dtype), 4: point, 5: jp.eye(3, dtype=dtype)[0],
                   6: jp.eye(3, dtype=dtype)[1]}
            slot = jp.concatenate([val[k] for k in fields])
            slot = where(nmatch > 0, slot, 0.0)
            block = jp.zeros(int(m.sensor_dim[i]), dtype).at[:slot.size].set(slot)
            out.append(block)
            continue
        if reduce == _REDUCE_MINDIST:
            crit = dist
        elif reduce == _REDUCE_MAXFORCE:
            crit = -jp.sum(force[:, :3] ** 2, axis=-1)
        else:
            crit = jp.zeros(nslot, dtype)
        # matched first, by criterion, ties (and 'none') in MuJoCo's contact order
        rank = jp.lexsort((crit, ~mask))
        k = min(int(num), nslot)
        sel = rank[:k]
        present = (jp.arange(k) < nmatch)[:, None]
        s = sign[sel][:, None]
        val = {0: jp.broadcast_to(nmatch, (k, 1)), 3: dist[sel][:, None], 4: pos[sel],
               5: frame[sel, 0] * s, 6: frame[sel, 1] * s}
        # flipped: the frame becomes (-normal, -tangent1, tangent2) and the relative motion
        # and force change sign, so only the third component changes sign
        zflip = where(s > 0, 1.0, jp.asarray([1.0, 1.0, -1.0], dtype))
        if force is not None:
            val[1] = force[sel, :3] * zflip
            val[2] = force[sel, 3:] * zflip
        if rel_vel is not None:
            val[7] = jp.einsum("kji,ki->kj", frame[sel], rel_vel[sel, 3:]) * zflip
            val[8] = jp.einsum("kji,ki->kj", frame[sel], rel_vel[sel, :3]) * zflip
        slots = where(present, jp.concatenate([val[f] for f in fields], axis=1), 0.0)
        block = jp.zeros(int(m.sensor_dim[i]), dtype).at[:slots.size].set(slots.reshape(-1))
        out.append(block)
    return out


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
    out = where(stype == GeomType.SPHERE, sphere,
                   where(stype == GeomType.CAPSULE, capsule,
                            where(stype == GeomType.ELLIPSOID, ell,
                                     where(stype == GeomType.CYLINDER, cyl, box))))
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
            pos = where(has_ref[:, None], rel, pos)
        return pos
    if stype == S.FRAMEQUAT:
        if np.any(has_ref):
            rel = math.quat_mul(math.quat_conj(rquat), quat)
            quat = where(has_ref[:, None], rel, quat)
        return quat
    axis = mat[:, :, {S.FRAMEXAXIS: 0, S.FRAMEYAXIS: 1, S.FRAMEZAXIS: 2}[stype]]
    if np.any(has_ref):
        rel = jp.einsum("kji,kj->ki", rmat, axis)
        axis = where(has_ref[:, None], rel, axis)
    return axis


def sensor_pos(m: Model, d: Data) -> Data:
    """Position-dependent sensors (mj_sensorPos)."""
    if _disabled(m):
        return d
    data = d.sensordata
    objid_all = np.asarray(m.sensor_objid)
    groups = _sensor_ids(m, Stage.POS)
    if S.E_POTENTIAL in groups and not energy_enabled(m):
        # MuJoCo 4.0 (measured): without the energy flag, an e_potential sensor fills
        # d.energy[0], and [1] too when an e_kinetic sensor exists; e_kinetic alone does not.
        d = energy_pos(m, d)
        if S.E_KINETIC in groups:
            d = energy_vel(m, d)
    collision_vals = None
    for stype, ids in groups.items():
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
        elif stype == S.CAMPROJECTION:
            val = _camprojection(m, d, ids)
        elif stype == S.CONTACT:
            for i, v in zip(ids, _contact_sensors(m, d, ids)):
                data = _write(m, data, np.array([i]), v)
            continue
        elif stype == S.RANGEFINDER:
            for i, v in zip(ids, _rangefinder(m, d, ids)):
                data = _write(m, data, np.array([i]), v)
            continue
        elif stype in (S.GEOMDIST, S.GEOMNORMAL, S.GEOMFROMTO):
            if collision_vals is None:
                collision_vals = _collision_sensors(m, d, groups)
            val = collision_vals[stype]
        elif stype == S.E_POTENTIAL:
            val = jp.broadcast_to(potential_energy(m, d), (ids.size,))
        elif stype == S.E_KINETIC:
            val = jp.broadcast_to(kinetic_energy(m, d), (ids.size,))
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
        rel = lin - rvel[:, 3:] - math.cross(rvel[:, :3], pos - rpos)
        return where(has_ref[:, None], jp.einsum("kji,kj->ki", rmat, rel), lin)
    rel = jp.einsum("kji,kj->ki", rmat, ang - rvel[:, :3])
    return where(has_ref[:, None], rel, ang)


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
        elif stype == S.CONTACT:
            for i, v in zip(ids, _contact_sensors(m, d, ids)):
                data = _write(m, data, np.array([i]), v)
            continue
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
    return acc.at[:, 3:].add(math.cross(vel[:, :3], vel[:, 3:]))


def _touch(m: Model, d: Data, ids: np.ndarray) -> jax.Array:
    """Normal force of the contacts on the site's body whose normal ray, from the contact
    point into that body, meets the site's volume (XML reference, "sensor/touch")."""
    from mjx_lite import support
    from mjx_lite.ray import ray_box, ray_capsule, ray_cylinder, ray_ellipsoid, ray_sphere

    dtype = d.qvel.dtype
    con = getattr(d, "contact", None)
    if con is None or not con.dist.shape[0]:
        return jp.zeros(ids.size, dtype)
    n = con.dist.shape[0]
    fn = jax.vmap(lambda i: support.contact_force(m, d, i))(jp.arange(n))[:, 0]
    gb = jp.asarray(np.asarray(m.geom_bodyid))
    b1, b2 = gb[jp.maximum(con.geom[:, 0], 0)], gb[jp.maximum(con.geom[:, 1], 0)]
    active = con.valid & (con.efc_address >= 0) & (fn > 0)
    normal = con.frame[:, 0]
    site = np.asarray(m.sensor_objid)[ids]
    body = jp.asarray(np.asarray(m.site_bodyid)[site])
    stype = np.asarray(m.site_type)[site]
    size = jp.asarray(m.site_size, dtype)[site]
    ray_fns = {GeomType.SPHERE: ray_sphere, GeomType.CAPSULE: ray_capsule,
               GeomType.ELLIPSOID: ray_ellipsoid, GeomType.CYLINDER: ray_cylinder,
               GeomType.BOX: ray_box}
    out = jp.zeros(ids.size, dtype)
    for t in np.unique(stype):
        if int(t) not in ray_fns:
            raise NotImplementedError(f"touch sensor on a {GeomType(int(t)).name} site")
        rows = np.nonzero(stype == t)[0]

        def one(pos, mat, sz, b, f=ray_fns[int(t)]):
            mine = active & ((b1 == b) | (b2 == b))
            # the ray points into the sensor's body: along the normal unless it is geom2's
            ray_dir = where((b2 == b)[:, None], -normal, normal)
            hit = jax.vmap(f, (None, None, None, 0, 0))(pos, mat, sz, con.pos, ray_dir) >= 0
            return jp.sum(where(mine & hit, fn, 0.0))

        val = jax.vmap(one)(d.site_xpos[site[rows]], d.site_xmat[site[rows]], size[rows],
                            body[rows])
        out = out.at[rows].set(val)
    return out


def _force_torque(m: Model, d: Data, stype: int, ids: np.ndarray) -> jax.Array:
    """cfrc_int of the site's body, moved to the site and rotated into its frame."""
    site = np.asarray(m.sensor_objid)[ids]
    body = np.asarray(m.site_bodyid)[site]
    root = np.asarray(m.body_rootid)[body]
    ft = math.transform_force(d.cfrc_int[body], d.site_xpos[site], d.subtree_com[root])
    part = ft[:, 3:] if stype == S.FORCE else ft[:, :3]
    return jp.einsum("kji,kj->ki", d.site_xmat[site], part)


def sensor_acc(m: Model, d: Data) -> Data:
    """Acceleration/force-dependent sensors (mj_sensorAcc): touch, accelerometer, force,
    torque, framelinacc, frameangacc, actuator / joint- and tendon-actuator forces and limit
    forces. Force and torque read ``d.cfrc_int`` (smooth.rne_post_constraint, which forward
    runs first when such a sensor exists); touch reads the contact forces."""
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
        elif stype == S.CONTACT:
            for i, v in zip(ids, _contact_sensors(m, d, ids)):
                data = _write(m, data, np.array([i]), v)
            continue
        elif stype == S.TOUCH:
            val = _touch(m, d, ids)
        elif stype in (S.FORCE, S.TORQUE):
            val = _force_torque(m, d, stype, ids)
        elif stype == S.JOINTLIMITFRC:
            val = _limit_row(m, d, _LIMIT_JOINT, objid, d.efc_force)
        elif stype == S.TENDONLIMITFRC:
            val = _limit_row(m, d, _LIMIT_TENDON, objid, d.efc_force)
        else:
            raise NotImplementedError(
                f"sensor type {S(stype).name} needs cacc / cfrc_int (not implemented)")
        data = _write(m, data, ids, val)
    return d.replace(sensordata=_cutoff(m, data, Stage.ACC))



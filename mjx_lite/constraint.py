"""Constraint rows (Computation chapter, "Constraint model" and "Solver / Parameters").

``make_constraint`` builds MuJoCo's ``efc_*`` rows in MuJoCo's order: equality (connect, weld,
joint, tendon), friction loss (dofs, then tendons), limits (joints, then tendons), contacts.
``reference_constraint`` adds the velocity-dependent ``efc_vel`` and ``efc_aref``.

Every family owns a static row budget decided by model structure, so shapes never depend on
the state: rows that MuJoCo would not instantiate (inactive equality, joint inside its limit,
zero friction loss, empty contact slot, unused cone dimensions) stay in place with
``efc_active`` False, zero Jacobian and zero ``efc_D``, which makes them exact no-ops in the
solver. Compacting the active rows reproduces MuJoCo's ``efc_*`` arrays row for row.

Contacts come from a Contact pytree shaped like ``mjContact`` (``dist, pos, frame, includemargin,
friction (5), solref, solreffriction, solimp, dim, geom (2)``, plus ``valid`` when slots can be
empty): ``d.contact`` when Data carries one, otherwise the ``contact`` argument. Each slot gets
the rows of the largest condim the model can produce (``contact_width``).
"""

from __future__ import annotations

import copy
import functools

import jax
import jax.numpy as jp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

from mjx_lite import math, smooth, tree
from mjx_lite.math import where
from mjx_lite.types import ConeType, Data, DisableBit, EnableBit, EqType, JointType, Model, ObjType

# mjtConstraint and mjtConstraintState values.
EQUALITY, FRICTION_DOF, FRICTION_TENDON, LIMIT_JOINT, LIMIT_TENDON = 0, 1, 2, 3, 4
CONTACT_FRICTIONLESS, CONTACT_PYRAMIDAL, CONTACT_ELLIPTIC = 5, 6, 7
SATISFIED, QUADRATIC, LINEARNEG, LINEARPOS, CONE = 0, 1, 2, 3, 4

# mjMINVAL, mjMINIMP, mjMAXIMP, mjMINMU (mjmodel.h numeric constants).
MINVAL = 1e-15
MINIMP, MAXIMP = 0.0001, 0.9999
MINMU = 1e-5

__all__ = [
    "make_constraint", "reference_constraint", "row_plan", "nefc_budget", "contact_width",
    "compact", "RowPlan",
]


# ------------------------------------------------------------------------------------------
# static row plan


class RowPlan:
    """Static row layout: family boundaries and the element behind each row (numpy only).

    Attributes: ne, nf, nl (rows of the equality, friction and limit families), ncon (contact
    slots), width (rows per contact slot), nefc (total); eq_rows[i] = (first row, size) per
    equality; the per-type index arrays used to scatter rows into place.
    """

    def __init__(self, m: Model, ncon: int):
        disabled = lambda bit: bool(m.opt.disableflags & bit)  # noqa: E731
        constraint_off = disabled(DisableBit.CONSTRAINT)

        # equality: rows for every supported equality (eq_active is state and masks them)
        eq_type = np.asarray(m.eq_type)
        size = {EqType.CONNECT: 3, EqType.WELD: 6, EqType.JOINT: 1, EqType.TENDON: 1}
        unsupported = [t for t in eq_type if int(t) not in size]
        if unsupported and not (constraint_off or disabled(DisableBit.EQUALITY)):
            raise NotImplementedError(f"equality types {sorted(set(unsupported))} (flex) "
                                      "are not supported")
        if constraint_off or disabled(DisableBit.EQUALITY):
            eq_ids = np.zeros(0, int)
        else:
            eq_ids = np.arange(m.neq)
        sizes = np.array([size[int(eq_type[i])] for i in eq_ids], dtype=int)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int) if sizes.size else sizes
        self.eq_ids, self.eq_start, self.eq_size = eq_ids, starts, sizes
        self.ne = int(sizes.sum())

        # friction loss: every dof and every tendon (dof_frictionloss is a traced parameter)
        if constraint_off or disabled(DisableBit.FRICTIONLOSS):
            self.fr_dof, self.fr_ten = np.zeros(0, int), np.zeros(0, int)
        else:
            self.fr_dof, self.fr_ten = np.arange(m.nv), np.arange(m.ntendon)
        self.nf = self.fr_dof.size + self.fr_ten.size

        # limits: limited joints (2 rows slide/hinge, 1 ball) then limited tendons (2 rows)
        lim_jnt, lim_side, lim_ten, lim_tside = [], [], [], []
        if not (constraint_off or disabled(DisableBit.LIMIT)):
            jtype = np.asarray(m.jnt_type)
            for j in np.nonzero(np.asarray(m.jnt_limited))[0]:
                if jtype[j] in (JointType.SLIDE, JointType.HINGE):
                    lim_jnt += [j, j]
                    lim_side += [-1, 1]
                elif jtype[j] == JointType.BALL:
                    lim_jnt.append(j)
                    lim_side.append(0)
            for t in np.nonzero(np.asarray(m.tendon_limited))[0]:
                lim_ten += [t, t]
                lim_tside += [-1, 1]
        self.lim_jnt, self.lim_side = np.array(lim_jnt, int), np.array(lim_side, int)
        self.lim_ten, self.lim_tside = np.array(lim_ten, int), np.array(lim_tside, int)
        self.nl = self.lim_jnt.size + self.lim_ten.size

        # contacts: a fixed number of rows per slot
        contact_off = constraint_off or disabled(DisableBit.CONTACT) or m.nv == 0
        self.ncon = 0 if contact_off else int(ncon)
        self.maxdim = contact_maxdim(m)
        self.width = contact_width(m)
        self.elliptic = m.opt.cone == ConeType.ELLIPTIC
        self.nc = self.ncon * self.width
        self.nefc = self.ne + self.nf + self.nl + self.nc
        self._model = m

    @functools.cached_property
    def live(self) -> np.ndarray:
        """Rows that can ever be active, ascending: all but a pyramidal slot's rows beyond its
        static condim bound (``driver.slot_condims``), which every slot of the uniform width
        carries. Gymnasium humanoid: 336 of 819 (its geoms touch each other with condim 1,
        the floor with 3). Every row where the slots do not follow the model's layout (a
        ``contact`` given to make_constraint) or the cones are elliptic."""
        rows = np.arange(self.nefc)
        if self.elliptic or not self.nc:
            return rows
        from mjx_lite.collision.driver import slot_condims  # noqa: PLC0415 (driver imports us)

        dims = slot_condims(self._model)
        if dims.size != self.ncon:
            return rows
        nrow = np.where(dims > 1, 2 * (dims - 1), 1)
        keep = np.arange(self.width)[None, :] < nrow[:, None]
        s0 = self.nefc - self.nc
        return np.concatenate([rows[:s0], s0 + np.flatnonzero(keep.ravel())])

    def compacted(self) -> RowPlan:
        """This layout restricted to ``live`` (pyramidal: the contact rows are scalar rows to
        the primal solvers, which read only the family sizes); ``ncon`` and ``width`` no
        longer describe the contact rows, so nothing that reshapes them by slot may use it."""
        out = copy.copy(self)
        out.nc = self.live.size - (self.nefc - self.nc)
        out.nefc = self.live.size
        out.is_compacted = True
        out.__dict__["live"] = np.arange(out.nefc)
        return out

    is_compacted = False


def contact_maxdim(m: Model) -> int:
    """Largest condim any contact of the model can have (geoms and explicit pairs)."""
    dims = [1] + list(np.asarray(m.geom_condim).ravel()) + list(np.asarray(m.pair_dim).ravel())
    return int(max(dims))


def contact_width(m: Model) -> int:
    """efc rows per contact slot: condim (elliptic) or 2 (condim - 1) (pyramidal), at least 1."""
    dim = contact_maxdim(m)
    if m.opt.cone == ConeType.ELLIPTIC:
        return dim
    return max(1, 2 * (dim - 1))


def row_plan(m: Model, ncon: int = 0) -> RowPlan:
    """The static row layout of ``m`` with ``ncon`` contact slots."""
    return RowPlan(m, ncon)


def nefc_budget(m: Model, ncon: int = 0) -> int:
    """Number of efc rows (the static budget) for ``m`` with ``ncon`` contact slots."""
    return RowPlan(m, ncon).nefc


# ------------------------------------------------------------------------------------------
# soft-constraint parameters (Computation "Parameters", Modeling "Solver parameters")


def _clamp_solimp(solimp: jax.Array) -> jax.Array:
    lo = jp.array([MINIMP, MINIMP, 0.0, MINIMP, 1.0], dtype=solimp.dtype)
    hi = jp.array([MAXIMP, MAXIMP, jp.inf, MAXIMP, jp.inf], dtype=solimp.dtype)
    return jp.clip(solimp, lo, hi)


def _safe_solref(m: Model, solref: jax.Array, default: jax.Array) -> jax.Array:
    """Mixed-sign solref falls back to ``default``; refsafe keeps timeconst >= 2 timestep."""
    mixed = (solref[..., 0] > 0) ^ (solref[..., 1] > 0)
    solref = where(mixed[..., None], default, solref)
    if not m.opt.disableflags & DisableBit.REFSAFE:
        tc = where(solref[..., 0] > 0,
                      jp.maximum(solref[..., 0], 2 * m.opt.timestep), solref[..., 0])
        solref = solref.at[..., 0].set(tc)
    return solref


def impedance(solimp: jax.Array, x: jax.Array) -> jax.Array:
    """Impedance d(r) of the violation r = pos - margin (Modeling, "Impedance"); solimp (..., 5).

    A sigmoid of |r| / width from d0 to dwidth made of two power splines that meet at midpoint;
    flat when d0 == dwidth or width is zero.
    """
    d0, dw, width, mid, power = (solimp[..., k] for k in range(5))
    flat = (d0 == dw) | (width <= MINVAL)
    xs = jp.abs(x) / where(flat, 1.0, width)
    inside = (xs > 0) & (xs < 1)
    # keep the spline's arguments in (0, 1) so that powers and their gradients stay finite
    xi = where(inside, xs, 0.5)
    lower = xi <= mid
    a = 1.0 / jp.power(mid, power - 1)
    b = 1.0 / jp.power(1 - mid, power - 1)
    y = where(lower, a * jp.power(xi, power), 1 - b * jp.power(1 - xi, power))
    y = where(power == 1, xi, y)
    imp = where(inside, d0 + y * (dw - d0), where(xs >= 1, dw, d0))
    return where(flat, 0.5 * (d0 + dw), imp)


def _kb(ref: jax.Array, dmax: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Stiffness K and damping B of the reference acceleration (standard or direct solref)."""
    std_k = 1.0 / jp.maximum(MINVAL, dmax * dmax * ref[..., 0] ** 2 * ref[..., 1] ** 2)
    dir_k = -ref[..., 0] / jp.maximum(MINVAL, dmax * dmax)
    std_b = 2.0 / jp.maximum(MINVAL, dmax * ref[..., 0])
    dir_b = -ref[..., 1] / jp.maximum(MINVAL, dmax)
    k = where(ref[..., 0] > 0, std_k, dir_k)
    b = where(ref[..., 1] > 0, std_b, dir_b)
    return k, b


# ------------------------------------------------------------------------------------------
# families: each returns a dict of row arrays in MuJoCo's order within the family


def _rows(n, nv, dtype):
    z = jp.zeros(n, dtype)
    return dict(J=jp.zeros((n, nv), dtype), pos=z, margin=z, frictionloss=z, diag=z,
                solref=jp.zeros((n, 2), dtype), solimp=jp.zeros((n, 5), dtype),
                imp_x=z, type=jp.zeros(n, jp.int32), id=jp.zeros(n, jp.int32),
                active=jp.zeros(n, bool), kzero=jp.zeros(n, bool),
                reffr=jp.zeros((n, 2), dtype))


def _eq_points(m: Model, d: Data, ids: np.ndarray, anchor_slot: tuple[int, int]):
    """World anchor points, bodies and frame quaternions of connect/weld equalities.

    Body semantic: anchors eq_data[3*slot:3*slot+3] in body frames; site semantic: sites.
    """
    site = np.asarray(m.eq_objtype)[ids] == ObjType.SITE
    o1, o2 = np.asarray(m.eq_obj1id)[ids], np.asarray(m.eq_obj2id)[ids]
    sb = np.asarray(m.site_bodyid)
    b = [np.where(site, sb[np.where(site, o, 0)] if m.nsite else o, o) for o in (o1, o2)]
    data = jp.asarray(m.eq_data)[ids]
    pts, quats = [], []
    for j, o in enumerate((o1, o2)):
        anchor = data[:, 3 * anchor_slot[j]:3 * anchor_slot[j] + 3]
        p_body = d.xpos[b[j]] + jp.einsum("nij,nj->ni", d.xmat[b[j]], anchor)
        q_body = d.xquat[b[j]]
        if m.nsite:
            oi = np.where(site, o, 0)
            p_site = d.site_xpos[oi]
            q_site = math.quat_mul(d.xquat[b[j]], jp.asarray(m.site_quat)[oi])
            p_body = where(site[:, None], p_site, p_body)
            q_body = where(site[:, None], q_site, q_body)
        pts.append(p_body)
        quats.append(q_body)
    return b, pts, quats, data, site


def _weld_rot(quat0, quat1, relpose, site, jrot):
    """Weld orientation residual and its Jacobian (scaled later by torquescale).

    r = [q1^-1 q0 relpose]_xyz; J = 0.5 [q1^-1 (w0 - w1) q0 relpose]_xyz per dof.
    """
    q0 = where(site[:, None], quat0, math.quat_mul(quat0, relpose))
    q1inv = math.quat_conj(quat1)
    err = math.quat_mul(q1inv, q0)[:, 1:]
    axis = jp.swapaxes(jrot, 1, 2)  # (n, nv, 3)
    pure = jp.concatenate([jp.zeros(axis.shape[:-1] + (1,), axis.dtype), axis], -1)
    prod = math.quat_mul(math.quat_mul(q1inv[:, None], pure), q0[:, None])
    return err, 0.5 * jp.swapaxes(prod[..., 1:], 1, 2), q0, q1inv


def _equality(m: Model, d: Data, p: RowPlan, dtype):
    out = _rows(p.ne, m.nv, dtype)
    if not p.ne:
        return out
    eq_type = np.asarray(m.eq_type)[p.eq_ids]
    parts = []  # (row indices, dict of per-row arrays)
    biw = jp.asarray(m.body_invweight0)

    for etype, slots in ((EqType.CONNECT, (0, 1)), (EqType.WELD, (1, 0))):
        sel = np.nonzero(eq_type == etype)[0]
        if not sel.size:
            continue
        ids = p.eq_ids[sel]
        b, pts, quats, data, site = _eq_points(m, d, ids, slots)
        jp0, jr0 = smooth.jac(m, d, pts[0], b[0])
        jp1, jr1 = smooth.jac(m, d, pts[1], b[1])
        cpos, jac = pts[0] - pts[1], jp0 - jp1
        tran = biw[b[0], 0] + biw[b[1], 0]
        diag = jp.repeat(tran[:, None], 3, 1)
        if etype == EqType.WELD:
            ts = data[:, 10]
            err, jrot, _, _ = _weld_rot(quats[0], quats[1], data[:, 6:10], site, jr0 - jr1)
            cpos = jp.concatenate([cpos, err * ts[:, None]], 1)
            jac = jp.concatenate([jac, jrot * ts[:, None, None]], 1)
            rot = biw[b[0], 1] + biw[b[1], 1]
            diag = jp.concatenate([diag, jp.repeat(rot[:, None], 3, 1)], 1)
        k = cpos.shape[1]
        rows = (p.eq_start[sel][:, None] + np.arange(k)[None]).ravel()
        # impedance of connect / weld uses the norm of the whole residual (getposdim)
        nrm = jp.repeat(math.safe_norm(cpos)[:, None], k, 1)
        parts.append((rows, ids, k, dict(J=jac.reshape(-1, m.nv), pos=cpos.ravel(),
                                         diag=diag.ravel(), imp_x=nrm.ravel())))

    for etype in (EqType.JOINT, EqType.TENDON):
        sel = np.nonzero(eq_type == etype)[0]
        if not sel.size:
            continue
        ids = p.eq_ids[sel]
        o1, o2 = np.asarray(m.eq_obj1id)[ids], np.asarray(m.eq_obj2id)[ids]
        has2 = o2 >= 0
        o2s = np.where(has2, o2, 0)
        if etype == EqType.JOINT:
            qadr, dadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
            qpos0 = jp.asarray(m.qpos0)
            pos1, ref1 = d.qpos[qadr[o1]], qpos0[qadr[o1]]
            pos2, ref2 = d.qpos[qadr[o2s]], qpos0[qadr[o2s]]
            j1 = jp.zeros((ids.size, m.nv), dtype).at[np.arange(ids.size), dadr[o1]].set(1.0)
            j2 = jp.zeros((ids.size, m.nv), dtype).at[np.arange(ids.size), dadr[o2s]].set(1.0)
            iw = jp.asarray(m.dof_invweight0)
            diag = iw[dadr[o1]] + where(has2, iw[dadr[o2s]], 0.0)
        else:
            l0 = jp.asarray(m.tendon_length0)
            pos1, ref1 = d.ten_length[o1], l0[o1]
            pos2, ref2 = d.ten_length[o2s], l0[o2s]
            j1, j2 = d.ten_J[o1], d.ten_J[o2s]
            iw = jp.asarray(m.tendon_invweight0)
            diag = iw[o1] + where(has2, iw[o2s], 0.0)
        data = jp.asarray(m.eq_data)[ids]
        dif = where(has2, pos2 - ref2, 0.0)
        poly = data[:, 1] * dif + data[:, 2] * dif**2 + data[:, 3] * dif**3 + data[:, 4] * dif**4
        deriv = (data[:, 1] + 2 * data[:, 2] * dif + 3 * data[:, 3] * dif**2
                 + 4 * data[:, 4] * dif**3)
        cpos = pos1 - ref1 - data[:, 0] - where(has2, poly, 0.0)
        jac = j1 - where(has2, deriv, 0.0)[:, None] * j2
        parts.append((p.eq_start[sel], ids, 1, dict(J=jac, pos=cpos, diag=diag, imp_x=cpos)))

    for rows, ids, k, vals in parts:
        for name, v in vals.items():
            out[name] = out[name].at[rows].set(v)
        rid = np.repeat(ids, k)
        out["id"] = out["id"].at[rows].set(rid.astype(np.int32))
        out["active"] = out["active"].at[rows].set(d.eq_active[rid])
        out["solref"] = out["solref"].at[rows].set(jp.asarray(m.eq_solref)[rid])
        out["solimp"] = out["solimp"].at[rows].set(jp.asarray(m.eq_solimp)[rid])
    out["type"] = jp.full(p.ne, EQUALITY, jp.int32)
    return out


def _friction(m: Model, d: Data, p: RowPlan, dtype):
    out = _rows(p.nf, m.nv, dtype)
    if not p.nf:
        return out
    ndof = p.fr_dof.size
    jac = jp.concatenate([jp.eye(m.nv, dtype=dtype)[p.fr_dof], d.ten_J[p.fr_ten]], 0)
    floss = jp.concatenate([jp.asarray(m.dof_frictionloss)[p.fr_dof],
                            jp.asarray(m.tendon_frictionloss)[p.fr_ten]])
    out.update(
        J=jac, frictionloss=floss, active=floss > 0, kzero=jp.ones(p.nf, bool),
        diag=jp.concatenate([jp.asarray(m.dof_invweight0)[p.fr_dof],
                             jp.asarray(m.tendon_invweight0)[p.fr_ten]]),
        solref=jp.concatenate([jp.asarray(m.dof_solref)[p.fr_dof],
                               jp.asarray(m.tendon_solref_fri)[p.fr_ten]]),
        solimp=jp.concatenate([jp.asarray(m.dof_solimp)[p.fr_dof],
                               jp.asarray(m.tendon_solimp_fri)[p.fr_ten]]),
        type=jp.asarray(np.r_[np.full(ndof, FRICTION_DOF), np.full(p.fr_ten.size,
                                                                      FRICTION_TENDON)],
                        jp.int32),
        id=jp.asarray(np.r_[p.fr_dof, p.fr_ten], jp.int32))
    return out


def _limit(m: Model, d: Data, p: RowPlan, dtype):
    out = _rows(p.nl, m.nv, dtype)
    if not p.nl:
        return out
    nj = p.lim_jnt.size
    jnt, side = p.lim_jnt, p.lim_side
    qadr, dadr = np.asarray(m.jnt_qposadr)[jnt], np.asarray(m.jnt_dofadr)[jnt]
    rng = jp.asarray(m.jnt_range)[jnt]
    ball = side == 0
    # slide / hinge: dist = side * (range[side] - q), Jacobian -side on the dof
    value = math.take(d.qpos, qadr)
    upper = where(side > 0, rng[:, 1], rng[:, 0])
    dist = side * (upper - value)
    jac = jp.zeros((nj, m.nv), dtype).at[np.arange(nj), dadr].set(-side.astype(float))
    if ball.any():
        bi = np.nonzero(ball)[0]
        quat = math.quat_normalize(d.qpos[qadr[bi][:, None] + np.arange(4)])
        aa = math.quat_to_vel(quat)
        angle = math.safe_norm(aa)
        axis = where((angle >= MINVAL)[:, None], math.safe_div(aa, angle[:, None]),
                        jp.array([1.0, 0.0, 0.0], dtype))
        dist = dist.at[bi].set(jp.max(rng[bi], axis=1) - angle)
        jb = jp.zeros((bi.size, m.nv), dtype)
        jb = jb.at[np.arange(bi.size)[:, None], dadr[bi][:, None] + np.arange(3)].set(-axis)
        jac = jac.at[bi].set(jb)
    jmargin = jp.asarray(m.jnt_margin)[jnt]
    tid, tside = p.lim_ten, p.lim_tside
    trng = jp.asarray(m.tendon_range)[tid]
    tdist = tside * (where(tside > 0, trng[:, 1], trng[:, 0]) - d.ten_length[tid])
    tmargin = jp.asarray(m.tendon_margin)[tid]
    pos = jp.concatenate([dist, tdist])
    margin = jp.concatenate([jmargin, tmargin])
    out.update(
        J=jp.concatenate([jac, -tside[:, None] * d.ten_J[tid]], 0),
        pos=pos, margin=margin, imp_x=pos - margin, active=pos < margin,
        diag=jp.concatenate([jp.asarray(m.dof_invweight0)[dadr],
                             jp.asarray(m.tendon_invweight0)[tid]]),
        solref=jp.concatenate([jp.asarray(m.jnt_solref)[jnt],
                               jp.asarray(m.tendon_solref_lim)[tid]]),
        solimp=jp.concatenate([jp.asarray(m.jnt_solimp)[jnt],
                               jp.asarray(m.tendon_solimp_lim)[tid]]),
        type=jp.asarray(np.r_[np.full(nj, LIMIT_JOINT), np.full(tid.size, LIMIT_TENDON)],
                        jp.int32),
        id=jp.asarray(np.r_[jnt, tid], jp.int32))
    return out


def _cdof_cols(d: Data) -> jax.Array:
    """(6, nv): cdof's translational rows, then its rotational ones."""
    return jp.concatenate([d.cdof[:, 3:].T, d.cdof[:, :3].T])


def _point_rows(m: Model, d: Data, point, bodies, lin, ang=None):
    """(..., nv) rows J_2 - J_1 of directions ``lin`` (..., 3) at the contact points (..., 3)
    of body pair ``bodies`` (...), and each side's dof mask (..., nv); leading axes broadcast
    as in ``smooth.jac_offset``.

    A direction d of a point on a body has the row [d, offset x d (+ ang)] . cdof (smooth.jac's
    columns); geom 1's enters with negative sign, the force acting from geom 1 to geom 2
    (Computation, "Friction cones").
    """
    # both sides' 6-vectors times cols in one product: its transpose is one contraction over
    # the 2 n k rows and one product back, where a product per term (frame, and each side's
    # moment) transposed into three of each (gymnasium humanoid: those contractions over its
    # 570 rows were the costliest kernels of the reverse pass). A per-contact (3, 3) x (3, nv)
    # product and its transposes run as batched dots of tiny matrices, which jaxlib 0.10's CPU
    # backend runs several times slower.
    sides, masks = [], []
    for body in bodies:
        offset, mask = smooth.jac_offset(m, d, point, body)
        moment = math.cross(offset, lin)
        sides.append(jp.concatenate([lin, moment if ang is None else moment + ang], -1))
        masks.append(mask)
    shape = sides[0].shape[:-1]  # both sides' rows have lin's shape
    both = (jp.concatenate(sides).reshape(-1, 6) @ _cdof_cols(d)).reshape(2, *shape, -1)
    rows = where(masks[1], both[1], 0.0) - where(masks[0], both[0], 0.0)
    return rows, masks


def contact_jacobian(m: Model, d: Data, con, nrows: int = 6) -> jax.Array:
    """(ncon, nrows, nv) Jacobian of each contact in its frame: normal, 2 tangents, 3 rotations,
    the first ``nrows`` of them.

    The force acts from geom 1 towards geom 2, so geom 1's point Jacobian enters with
    negative sign (Computation, "Friction cones").
    """
    # Rows no contact uses are not built: the backward pass would carry them (their
    # cotangents are zero, but XLA cannot tell), e.g. the 3 rotation rows at condim <= 3.
    n = con.pos.shape[0]
    nlin, nrot = min(nrows, 3), max(nrows - 3, 0)
    gb = jp.asarray(np.asarray(m.geom_bodyid))
    bodies = (gb[con.geom[:, 0]][:, None], gb[con.geom[:, 1]][:, None])
    jlin, (mask1, mask2) = _point_rows(m, d, con.pos[:, None], bodies, con.frame[:, :nlin])
    if not nrot:
        return jlin
    cols = _cdof_cols(d)
    frame_ang = (con.frame[:, :nrot].reshape(-1, 3) @ cols[3:]).reshape(n, nrot, -1)
    jrot = where(mask2, frame_ang, 0.0) - where(mask1, frame_ang, 0.0)
    return jp.concatenate([jlin, jrot], 1)


def _pyramid_jacobian(m: Model, d: Data, p: RowPlan, con, fr, dim, rowmask) -> jax.Array:
    """(ncon * width, nv) pyramidal contact rows J_n +- mu_k J_k (Computation, "Friction
    cones"), zero where ``rowmask`` is off.

    Each edge row is the Jacobian of one direction, [n +- mu_k t_k, offset x (n +- mu_k t_k)]
    for a tangent t_k, [n, offset x n +- mu_k r_k] for a rotation axis r_k, so the edges are
    formed on the 6-vectors before the product with cdof, and only for the rows that can
    ever be active (``RowPlan.live``): gymnasium humanoid's 161 condim-1 slots build their
    normal row alone, where the (ncon, 3, nv) frame rows and their (ncon, width, nv) edge
    combinations cost its implicit-gradient's backward pass the two costliest products.
    """
    n, w = p.ncon, p.width
    s0 = p.nefc - p.nc
    rows = p.live[p.live >= s0] - s0  # static (slot, edge) of each row that can be active
    slot, edge = rows // w, rows % w
    pair = edge // 2
    sign = np.where(edge % 2 == 0, 1.0, -1.0)
    axis = pair + 1  # frame row of the edge's direction: 1, 2 tangents, 3, 4, 5 rotations
    coef = math.take(fr.reshape(-1), slot * 5 + np.minimum(pair, 4)) * sign.astype(fr.dtype)
    # condim 1 in a pyramidal slot: its first row is the plain normal
    coef = where(np.asarray(edge == 0) & (math.take(dim, slot) <= 1), 0.0, coef)
    frame = con.frame.reshape(-1, 3)
    normal = math.take(frame, slot * 3)
    other = math.take(frame, slot * 3 + np.where(axis < 3, axis, axis - 3)) * coef[:, None]
    linear = axis < 3
    if linear.all():
        lin, ang = normal + other, None
    else:
        on = linear[:, None].astype(other.dtype)
        lin, ang = normal + other * on, other * (1 - on)
    gb = jp.asarray(np.asarray(m.geom_bodyid))
    bodies = tuple(math.take(gb[geom], slot) for geom in (con.geom[:, 0], con.geom[:, 1]))
    jac, _ = _point_rows(m, d, math.take(con.pos, slot), bodies, lin, ang)
    jac = where(math.take(rowmask.reshape(-1), rows)[:, None], jac, 0.0)
    return math.spread(jac, rows, n * w)


def contact_active(con) -> jax.Array:
    """Slots that produce rows: real (``valid``) and not excluded (in the gap band, MuJoCo 4.0
    keeps them in d.contact without rows)."""
    act = jp.ones(con.dist.shape, bool)
    if getattr(con, "valid", None) is not None:
        act = act & con.valid
    if getattr(con, "exclude", None) is not None:
        act = act & (con.exclude == 0)
    else:
        act = act & (con.dist < con.includemargin)
    return act


def _contact(m: Model, d: Data, p: RowPlan, con, dtype):
    out = _rows(p.nc, m.nv, dtype)
    if not p.nc:
        return out
    n, w = p.ncon, p.width
    dim = jp.asarray(con.dim, jp.int32)
    fr = jp.maximum(MINMU, con.friction)  # mj_assignFriction clamps to mjMINMU
    gb = jp.asarray(np.asarray(m.geom_bodyid))
    biw = jp.asarray(m.body_invweight0)
    b1, b2 = gb[con.geom[:, 0]], gb[con.geom[:, 1]]
    tran = biw[b1, 0] + biw[b2, 0]
    rot = biw[b1, 1] + biw[b2, 1]
    j = np.arange(w)
    if p.elliptic:
        jac = contact_jacobian(m, d, con, w)
        nrow = dim
        diag = where(j[None] < 3, tran[:, None], rot[:, None])
        pos = where(j[None] == 0, con.dist[:, None], 0.0)
        margin = where(j[None] == 0, con.includemargin[:, None], 0.0)
        ctype = where(dim > 1, CONTACT_ELLIPTIC, CONTACT_FRICTIONLESS)
        kzero = jp.broadcast_to(j[None] > 0, (n, w))
    else:
        pair = j // 2  # friction dimension k-1 of the edge pair
        f = fr[:, np.minimum(pair, 4)]
        nrow = where(dim > 1, 2 * (dim - 1), 1)
        fri = where(pair[None] < 2, tran[:, None], rot[:, None])
        diag = where((dim > 1)[:, None], tran[:, None] + f * f * fri, tran[:, None])
        pos = jp.broadcast_to(con.dist[:, None], (n, w))
        margin = jp.broadcast_to(con.includemargin[:, None], (n, w))
        ctype = where(dim > 1, CONTACT_PYRAMIDAL, CONTACT_FRICTIONLESS)
        kzero = jp.zeros((n, w), bool)
    # MuJoCo skips a contact between bodies that no dof moves (a structural test: a contact
    # whose normal Jacobian is zero at this pose, e.g. a slider on a floor, keeps its rows)
    moves = jp.asarray(tree.body_dof_mask(m).any(axis=1))
    nonempty = moves[b1] | moves[b2]
    active = contact_active(con) & nonempty
    rowmask = active[:, None] & (j[None] < nrow[:, None])
    if p.elliptic:
        jac = where(rowmask[..., None], jac, 0.0).reshape(-1, m.nv)
    else:
        jac = _pyramid_jacobian(m, d, p, con, fr, dim, rowmask)
    out.update(
        J=jac,
        pos=pos.reshape(-1), margin=margin.reshape(-1), diag=diag.reshape(-1),
        solref=jp.repeat(con.solref, w, 0), solimp=jp.repeat(con.solimp, w, 0),
        reffr=jp.repeat(con.solreffriction, w, 0),
        type=jp.repeat(ctype, w).astype(jp.int32),
        id=jp.repeat(jp.arange(n, dtype=jp.int32), w),
        active=rowmask.reshape(-1), kzero=kzero.reshape(-1))
    return out


def _contact_r(m: Model, p: RowPlan, con, r: jax.Array) -> jax.Array:
    """Friction-dimension regularizers: R1 = R0 / impratio; elliptic R_j mu_j^2 = R1 mu_1^2;
    pyramidal edges share 2 mu^2 R0 with mu = friction_1 sqrt(R1 / R0)."""
    n, w = p.ncon, p.width
    rc = r.reshape(n, w)
    r0 = rc[:, 0]
    r1 = r0 / jp.maximum(MINVAL, m.opt.impratio)
    fr = jp.maximum(MINMU, con.friction)
    dim = jp.asarray(con.dim, jp.int32)
    if p.elliptic:
        j = np.arange(w)
        fj = fr[:, np.clip(j - 1, 0, 4)]
        rj = r1[:, None] * fr[:, :1] ** 2 / (fj * fj)
        new = where(j[None] == 0, r0[:, None], rj)
    else:
        mu2 = fr[:, 0] ** 2 * r1 / r0
        new = jp.broadcast_to((2 * mu2 * r0)[:, None], (n, w))
    return where((dim > 1)[:, None], new, rc).reshape(-1)


def contact_mu(m: Model, con) -> jax.Array:
    """mu of the regularized cone, friction_1 sqrt(R1 / R0) = friction_1 / sqrt(impratio)."""
    fr0 = jp.maximum(MINMU, con.friction[:, 0])
    return fr0 * jp.sqrt(1.0 / jp.maximum(MINVAL, m.opt.impratio))


def _get_contact(d: Data, contact):
    if contact is not None:
        return contact
    return getattr(d, "contact", None)


def make_constraint(m: Model, d: Data, contact=None) -> Data:
    """efc rows at the current positions (mj_makeConstraint): J, pos, margin, frictionloss,
    impedance, R, D, KBIP, diagA, type, id, active; a given ``contact`` replaces d.contact."""
    if contact is not None and hasattr(d, "contact"):
        d = d.replace(contact=contact)
    con = _get_contact(d, contact)
    ncon = 0 if con is None else int(con.dist.shape[0])
    p = RowPlan(m, ncon)
    dtype = d.qpos.dtype
    fams = [_equality(m, d, p, dtype), _friction(m, d, p, dtype), _limit(m, d, p, dtype),
            _contact(m, d, p, con, dtype)]
    rows = {k: jp.concatenate([f[k] for f in fams]) for k in fams[0]}

    # MuJoCo drops a non-contact constraint whose Jacobian (all its rows) is identically zero
    ncnt = p.ne + p.nf + p.nl
    group = np.arange(p.nefc)
    group[:p.ne] = np.repeat(np.arange(p.eq_ids.size), p.eq_size)
    nonempty = jax.ops.segment_max(jp.any(rows["J"] != 0, axis=-1).astype(jp.int32), group,
                                   num_segments=p.nefc)[group] > 0
    active = rows["active"] & jp.concatenate([nonempty[:ncnt], jp.ones(p.nc, bool)])

    default_ref = jp.array([0.02, 1.0], dtype)
    solref = _safe_solref(m, rows["solref"], default_ref)
    reffr = _safe_solref(m, rows["reffr"], jp.zeros(2, dtype))
    solimp = _clamp_solimp(rows["solimp"])
    imp_solimp, imp_x = solimp[:ncnt], rows["imp_x"][:ncnt]
    if p.nc:
        # a contact's rows share its violation and solimp: its impedance once per slot, not
        # per row (its powers and their derivatives ran over gymnasium humanoid's 819 rows),
        # so the contact family leaves its rows' imp_x unset; one call for both (each call's
        # splines and selects are kernels of their own, and their transposes again)
        imp_solimp = jp.concatenate([imp_solimp, _clamp_solimp(con.solimp)])
        imp_x = jp.concatenate([imp_x, con.dist - con.includemargin])
    imp = impedance(imp_solimp, imp_x)
    if p.nc:
        imp = jp.concatenate([imp[:ncnt], jp.repeat(imp[ncnt:], p.width)])
    diag = rows["diag"]
    if m.opt.enableflags & EnableBit.DIAGEXACT:
        # MuJoCo 4.0's diagexact (not in the seeds; measured on 4.0: efc_diagA / (J M^-1 J')_ii
        # is 1 on equality, friction and limit rows, and a contact's rows follow its first
        # row's exact value through the usual friction scaling, as they follow the bodies'
        # inverse weights without the flag)
        diag = jp.sum(rows["J"] * smooth.solve_m(m, d, rows["J"].T).T, -1)
    # friction-loss rows sit at zero violation: d = d0 (Modeling, "Friction")
    r = jp.maximum(MINVAL, (1 - imp) * diag / imp)
    if p.nc:
        r = r.at[ncnt:].set(_contact_r(m, p, con, r[ncnt:]))
    # elliptic friction rows use solreffriction when it is set
    use_fr = rows["kzero"] & (rows["type"] == CONTACT_ELLIPTIC) & jp.any(reffr != 0, -1)
    ref = where(use_fr[:, None], reffr, solref)
    k, b = _kb(ref, solimp[:, 1])
    k = where(rows["kzero"], 0.0, k)
    diag_a = r * imp / (1 - imp)

    # inactive rows: zero Jacobian and D so that they are exact no-ops in every solver
    r = where(active, r, 1.0)
    kbip = jp.stack([k, b, imp, jp.zeros_like(imp)], -1)
    if p.nc and getattr(d, "contact", None) is con:
        # as mj_makeConstraint: first efc row of each contact (-1 without rows), cone mu
        slot_active = active[ncnt:].reshape(p.ncon, p.width)[:, 0]
        start = ncnt + p.width * jp.arange(p.ncon, dtype=jp.int32)
        frictional = slot_active & (jp.asarray(con.dim) > 1)
        d = d.replace(contact=con.replace(
            efc_address=where(slot_active, start, -1).astype(jp.int32),
            mu=where(frictional, contact_mu(m, con), con.mu)))
    # per-row values that reverse mode would otherwise recompute (forward's checkpoint policy)
    # inside the fused kernels that form the (nefc, nv) Jacobian's cotangent, once per column;
    # and the Jacobian itself: the solve's backward reads it as an input anyway, and unnamed,
    # the policy also saved the (ncon, rows, nv) contact rows it is selected from, to rebuild
    # it inside this stage's backward (gymnasium humanoid, batch 1, implicit gradient: 383 ->
    # 340 ms, peak 78 -> 51 MB)
    active = checkpoint_name(active, "efc_active")
    r = checkpoint_name(r, "efc_R")
    d = d.replace(
        efc_type=rows["type"], efc_id=rows["id"],
        efc_J=checkpoint_name(where(active[:, None], rows["J"], 0.0), "efc_J"),
        efc_pos=where(active, rows["pos"], 0.0),
        efc_margin=where(active, rows["margin"], 0.0),
        efc_frictionloss=where(active, rows["frictionloss"], 0.0),
        efc_diagA=where(active, diag_a, 0.0), efc_KBIP=where(active[:, None], kbip, 0.0),
        efc_D=checkpoint_name(where(active, 1.0 / r, 0.0), "efc_D"), efc_R=r,
        efc_active=active)
    # as mj_fwdPosition runs mj_island right after mj_makeConstraint
    from mjx_lite import island  # noqa: PLC0415 (island builds on RowPlan)

    return island.island(m, d)


# ------------------------------------------------------------------------------------------
# reference acceleration


def _bias_acc(m: Model, d: Data) -> jax.Array:
    """(nbody, 6) spatial acceleration of each body at zero qacc: sum of cdof_dot * qvel."""
    mask = jp.asarray(tree.body_dof_mask(m), d.qvel.dtype)
    return mask @ (d.cdof_dot * d.qvel[:, None])


def _point_acc(m: Model, d: Data, bias, point, body):
    """Acceleration of a body-fixed point at zero qacc (com-frame spatial algebra)."""
    root = np.asarray(m.body_rootid)[body]
    r = point - d.subtree_com[root]
    w, v = d.cvel[body, :3], d.cvel[body, 3:]
    al, a = bias[body, :3], bias[body, 3:]
    vp = v + math.cross(w, r)
    return a + math.cross(al, r) + math.cross(w, vp)


def _eq_jdot_v(m: Model, d: Data, p: RowPlan) -> jax.Array:
    """Jdot qvel of connect and weld rows (MuJoCo 4.0 subtracts it from aref, "Dual
    problem"); zero for the other rows."""
    out = jp.zeros(p.nefc, d.qvel.dtype)
    if not p.ne:
        return out
    eq_type = np.asarray(m.eq_type)[p.eq_ids]
    bias = _bias_acc(m, d)
    for etype, slots in ((EqType.CONNECT, (0, 1)), (EqType.WELD, (1, 0))):
        sel = np.nonzero(eq_type == etype)[0]
        if not sel.size:
            continue
        ids = p.eq_ids[sel]
        b, pts, quats, data, site = _eq_points(m, d, ids, slots)
        lin = _point_acc(m, d, bias, pts[0], b[0]) - _point_acc(m, d, bias, pts[1], b[1])
        if etype == EqType.WELD:
            # d/dt of 0.5 [q1^-1 (w0 - w1) q0 rel]_xyz with q' = 0.5 w q (world angular rates)
            w0, w1 = d.cvel[b[0], :3], d.cvel[b[1], :3]
            dw = w0 - w1
            dal = bias[b[0], :3] - bias[b[1], :3]
            q0 = where(site[:, None], quats[0], math.quat_mul(quats[0], data[:, 6:10]))
            q1inv = math.quat_conj(quats[1])
            pure = lambda x: jp.concatenate([jp.zeros_like(x[:, :1]), x], 1)  # noqa: E731
            mul = math.quat_mul
            t1 = mul(mul(mul(-0.5 * q1inv, pure(w1)), pure(dw)), q0)
            t2 = mul(mul(q1inv, pure(dal)), q0)
            t3 = mul(mul(q1inv, pure(dw)), mul(0.5 * pure(w0), q0))
            ang = 0.5 * (t1 + t2 + t3)[:, 1:] * data[:, 10:11]
            lin = jp.concatenate([lin, ang], 1)
        k = lin.shape[1]
        rows = (p.eq_start[sel][:, None] + np.arange(k)[None]).ravel()
        out = out.at[rows].set(lin.ravel())
    return out


def reference_constraint(m: Model, d: Data, contact=None) -> Data:
    """efc_vel = J qvel and efc_aref = -B vel - K imp (pos - margin) - Jdot qvel
    (mj_referenceConstraint); needs cvel and cdof_dot (after com_vel)."""
    con = _get_contact(d, contact)
    ncon = 0 if con is None else int(con.dist.shape[0])
    p = RowPlan(m, ncon)
    vel = d.efc_J @ d.qvel
    k, b, imp = d.efc_KBIP[:, 0], d.efc_KBIP[:, 1], d.efc_KBIP[:, 2]
    aref = -b * vel - k * imp * (d.efc_pos - d.efc_margin)
    aref = aref - where(d.efc_active, _eq_jdot_v(m, d, p), 0.0)
    aref = checkpoint_name(where(d.efc_active, aref, 0.0), "efc_aref")
    return d.replace(efc_vel=vel, efc_aref=aref)


def compact(d: Data, fields=("efc_J", "efc_pos", "efc_margin", "efc_frictionloss", "efc_D",
                             "efc_R", "efc_aref", "efc_force", "efc_state", "efc_type",
                             "efc_id", "efc_diagA", "efc_vel")) -> dict:
    """Host-side: the active rows of the given efc fields, MuJoCo's dense efc arrays (fields
    not yet computed for the current row budget are left out)."""
    act = np.asarray(d.efc_active)
    out = {f: np.asarray(getattr(d, f)) for f in fields}
    return {f: v[act] for f, v in out.items() if v.shape[:1] == act.shape}

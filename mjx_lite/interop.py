"""Optional bridge to MuJoCo C (``pip install mujoco``): copy models and states both ways.

``import mjx_lite`` never imports this module; it imports ``mujoco`` lazily, only when called.
Useful to open an mjx_lite state in MuJoCo's viewer, or to compare with MuJoCo C field by field.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jp
import numpy as np

from mjx_lite import types
from mjx_lite.types import Data, Model, Option, Statistic

# What MuJoCo 4.0 allocates per step in its arena: contacts (ncon) and the island partition
# (nisland, tree_island, dof_island, efc_island; a new MjData has none, and writes to them do
# not stay). Neither direction copies them: a count without its arrays would leave an MjData
# inconsistent. collision and make_constraint (mj_island) refill them.
_PER_STEP = ("contact", "ncon", "nisland", "tree_island", "dof_island", "efc_island")
# Fields whose MuJoCo storage is a flat 3x3 matrix; mjx_lite keeps them as (..., 3, 3).
_MAT_FIELDS = {"cam_mat0", "xmat", "ximat", "geom_xmat", "site_xmat", "cam_xmat"}
NAME_KINDS = (
    "body", "jnt", "geom", "site", "cam", "light", "mesh", "hfield", "mat", "pair",
    "exclude", "eq", "tendon", "actuator", "sensor", "numeric", "text", "key",
)


def _traced(cls) -> set[str]:
    return set(cls._tree_children)


def _convert(name: str, value, traced: bool):
    value = np.array(value)
    if name in _MAT_FIELDS:
        value = value.reshape(value.shape[:-1] + (3, 3))
    if traced:
        return jp.asarray(value, dtype=float)
    return value


def _names(mjm, kind: str) -> tuple[str, ...]:
    count = {"jnt": mjm.njnt, "cam": mjm.ncam, "mat": mjm.nmat, "eq": mjm.neq,
             "actuator": mjm.nu}.get(kind, None)
    if count is None:
        count = getattr(mjm, "n" + kind)
    adr = getattr(mjm, f"name_{kind}adr")
    buf = bytes(mjm.names)
    return tuple(buf[a:buf.index(b"\0", a)].decode() for a in adr[:count])


def tree_depth(parentid: np.ndarray) -> np.ndarray:
    """Depth of each body in the kinematic tree (world = 0); parents precede children."""
    depth = np.zeros(len(parentid), dtype=np.int32)
    for i in range(1, len(parentid)):
        depth[i] = depth[parentid[i]] + 1
    return depth


def hfield_cell(size: np.ndarray, nrow: np.ndarray, ncol: np.ndarray) -> np.ndarray:
    """(nhfield, 2) grid spacing (dx, dy) of each height field."""
    size = np.asarray(size, float).reshape(-1, 4)
    return np.stack([2 * size[:, 0] / np.maximum(np.asarray(ncol) - 1, 1),
                     2 * size[:, 1] / np.maximum(np.asarray(nrow) - 1, 1)], -1)


def geom_extra(margin, gap, pair_geom1, pair_geom2, pair_margin, pair_gap) -> np.ndarray:
    """(ngeom,) the largest margin + gap a geom collides with at compile time: its own, or
    that of an explicit pair it is in."""
    extra = np.asarray(margin, float) + np.asarray(gap, float)
    for g1, g2, pm, pg in zip(pair_geom1, pair_geom2, pair_margin, pair_gap):
        extra[[g1, g2]] = np.maximum(extra[[g1, g2]], pm + pg)
    return extra


def geom_fluidshape(geom_fluid, ngeom: int) -> np.ndarray:
    """(ngeom,) bool: the geoms whose fluid interaction coefficient (geom_fluid column 0,
    fluidshape="ellipsoid") is non-zero, the ones passive.fluid runs the ellipsoid model on."""
    return np.asarray(geom_fluid).reshape(ngeom, 12)[:, 0] != 0


def geom_reach(rbound, extra, geom_type) -> np.ndarray:
    """(ngeom,) how far past a geom's centre its contacts can reach, for the static prism
    windows of height fields (collision.hfield): rbound plus ``geom_extra``; a height
    field's own entry is that margin alone (MuJoCo grows the partner's box by the pair's
    margin)."""
    hfield = np.asarray(geom_type) == 1  # mjGEOM_HFIELD
    return np.where(hfield, 0.0, np.asarray(rbound, float)) + extra


def wrap_sideid(wrap_type: np.ndarray, wrap_prm: np.ndarray) -> np.ndarray:
    """Side-site ids of sphere/cylinder wraps (MuJoCo keeps them in wrap_prm as floats), so
    traced code can use them as static indices."""
    geom_wrap = np.isin(wrap_type, (4, 5))  # mjWRAP_SPHERE, mjWRAP_CYLINDER
    return np.where(geom_wrap, np.rint(wrap_prm), -1).astype(np.int32)


def model_from_mujoco(mjm) -> Model:
    """Builds an mjx_lite Model from a ``mujoco.MjModel`` (float dtype follows jax_enable_x64)."""
    traced = _traced(Model)
    values = {}
    for f in dataclasses.fields(Model):
        name = f.name
        if name == "opt":
            opt = {}
            for g in dataclasses.fields(Option):
                v = getattr(mjm.opt, g.name)
                if g.name in _traced(Option):
                    opt[g.name] = jp.asarray(np.array(v), dtype=float)
                else:
                    enum_type = {"integrator": types.IntegratorType, "cone": types.ConeType,
                                 "jacobian": types.JacobianType, "solver": types.SolverType}
                    opt[g.name] = enum_type[g.name](int(v)) if g.name in enum_type else int(v)
            values[name] = Option(**opt)
        elif name == "stat":
            values[name] = Statistic(**{
                g.name: jp.asarray(np.array(getattr(mjm.stat, g.name)), dtype=float)
                for g in dataclasses.fields(Statistic)})
        elif name == "numeric_data":
            values[name] = tuple(
                tuple(float(x) for x in mjm.numeric_data[a:a + s])
                for a, s in zip(mjm.numeric_adr, mjm.numeric_size))
        elif name == "text_data":
            buf = bytes(mjm.text_data)
            values[name] = tuple(buf[a:a + s - 1].decode()
                                 for a, s in zip(mjm.text_adr, mjm.text_size))
        elif name == "names":
            values[name] = tuple((k, _names(mjm, k)) for k in NAME_KINDS)
        elif name == "body_depth":
            values[name] = tree_depth(np.array(mjm.body_parentid))
        elif name == "wrap_sideid":
            values[name] = wrap_sideid(np.array(mjm.wrap_type), np.array(mjm.wrap_prm))
        elif name == "dof_depth":
            values[name] = tree_depth(np.array(mjm.body_parentid))[np.array(mjm.dof_bodyid)]
        elif name == "hfield_cell":
            values[name] = hfield_cell(np.array(mjm.hfield_size), np.array(mjm.hfield_nrow),
                                       np.array(mjm.hfield_ncol))
        elif name == "geom_fluidshape":
            values[name] = geom_fluidshape(mjm.geom_fluid, mjm.ngeom)
        elif name in ("geom_extra", "geom_reach"):
            extra = geom_extra(mjm.geom_margin, mjm.geom_gap, mjm.pair_geom1, mjm.pair_geom2,
                               mjm.pair_margin, mjm.pair_gap)
            values[name] = (extra if name == "geom_extra"
                            else geom_reach(mjm.geom_rbound, extra, mjm.geom_type))
        elif name == "signature":
            values[name] = int(mjm.signature)
        else:
            v = getattr(mjm, name)
            is_array = isinstance(v, np.ndarray)
            values[name] = _convert(name, v, name in traced) if is_array else int(v)
    return Model(**values)


def data_from_mujoco(mjm, mjd, m: Model | None = None) -> Data:
    """Copies a ``mujoco.MjData`` of ``mjm`` into an mjx_lite Data (every field Data has).

    Sparse MuJoCo 4.0 storage (``M``, ``qLD``, ``actuator_moment``, ``ten_J``) is expanded to
    dense.
    """
    import mujoco

    from mjx_lite.io import make_data

    m = model_from_mujoco(mjm) if m is None else m
    d = make_data(m)
    values = {}
    for name in d.fields():
        ref = getattr(d, name)
        if name in _PER_STEP:
            continue  # contacts keep their static slots; run collision.collision to fill
        if name == "qM":
            full = np.zeros((mjm.nv, mjm.nv))
            mujoco.mj_fullM(mjm, mjd, full)
            v = full
        elif name == "qLD":  # MuJoCo stores the factor in M's sparsity pattern
            v = _sparse_rows(mjd.qLD, mjm.M_rownnz, mjm.M_rowadr, mjm.M_colind, mjm.nv, mjm.nv)
        elif name == "actuator_moment":
            v = _sparse_rows(mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr,
                             mjd.moment_colind, mjm.nu, mjm.nv)
        elif name == "ten_J":
            v = _sparse_rows(mjd.ten_J, mjm.ten_J_rownnz, mjm.ten_J_rowadr, mjm.ten_J_colind,
                             mjm.ntendon, mjm.nv)
        elif name == "warning_count":
            v = np.array([w.number for w in mjd.warning][: np.size(ref)])
        elif hasattr(mjd, name):
            v = np.array(getattr(mjd, name))
        else:
            continue
        if v.size != np.size(ref):
            continue
        values[name] = jp.asarray(v.reshape(np.shape(ref)), dtype=ref.dtype)
    return d.replace(**values)


def _sparse_rows(values, rownnz, rowadr, colind, nrow: int, ncol: int) -> np.ndarray:
    dense = np.zeros((nrow, ncol))
    values = np.asarray(values)
    for i in range(nrow):
        a, n = int(rowadr[i]), int(rownnz[i])
        dense[i, np.asarray(colind[a:a + n])] = values[a:a + n]
    return dense


def _dense_to_sparse(dense, rowadr, rownnz, colind) -> np.ndarray:
    """Values of ``dense`` at a CSR pattern's (row, colind) positions, in storage order."""
    rows = np.repeat(np.arange(len(rownnz)), np.asarray(rownnz))
    cols = np.concatenate([np.asarray(colind)[a:a + n] for a, n in zip(rowadr, rownnz)] or [[]])
    return np.asarray(dense)[rows, cols.astype(int)]


def data_to_mujoco(m: Model, d: Data, mjm, mjd=None):
    """Copies every field of ``d`` that ``mujoco.MjData`` also has into an MjData of ``mjm``
    (a new one unless given): state, positions, dynamics, and the dense ``qM``,
    ``actuator_moment``, ``ten_J`` back into MuJoCo's sparse storage.

    ``data_from_mujoco(mjm, data_to_mujoco(m, d, mjm), m)`` reproduces ``d`` bit for bit
    (float64), except contacts, the island partition and ``efc_*`` constraint rows: MuJoCo
    allocates those per step (ncon, nisland, nefc) while mjx_lite keeps static budgets;
    collision and make_constraint refill them.
    """
    import mujoco

    if mjd is None:
        mjd = mujoco.MjData(mjm)
    for name in d.fields():
        if name in _PER_STEP:
            continue
        v = np.asarray(getattr(d, name), dtype=np.float64)
        if name in ("qM", "qLD"):  # both live in M's sparsity pattern in MuJoCo
            target = mjd.M if name == "qM" else mjd.qLD
            target[...] = _dense_to_sparse(v, mjm.M_rowadr, mjm.M_rownnz, mjm.M_colind)
        elif name == "actuator_moment":
            # MuJoCo keeps the actuator moment rows compressed; store every nonzero.
            nz = [np.nonzero(row)[0] for row in v.reshape(mjm.nu, mjm.nv)]
            rownnz = np.array([len(c) for c in nz], dtype=np.int32)
            rowadr = np.concatenate([[0], np.cumsum(rownnz)[:-1]]).astype(np.int32)
            mjd.moment_rownnz[...] = rownnz
            mjd.moment_rowadr[...] = rowadr
            if rownnz.sum():
                cols = np.concatenate(nz)
                mjd.moment_colind[:len(cols)] = cols
                mjd.actuator_moment[:len(cols)] = _dense_to_sparse(v, rowadr, rownnz, cols)
        elif name == "ten_J":
            mjd.ten_J[...] = _dense_to_sparse(v.reshape(mjm.ntendon, mjm.nv), mjm.ten_J_rowadr,
                                              mjm.ten_J_rownnz, mjm.ten_J_colind)
        elif name == "warning_count":
            for w, n in zip(mjd.warning, v.reshape(-1)):
                w.number = int(n)
        elif name == "time":
            mjd.time = float(v)
        elif hasattr(mjd, name):
            target = getattr(mjd, name)
            if isinstance(target, np.ndarray) and target.size == v.size:
                target[...] = v.reshape(np.shape(target))
    return mjd

"""Constraint islands (MuJoCo 4.0's mj_island, on by default: the ``island`` disable bit).

Trees (kinematic subtrees hanging from the world) coupled by constraint rows form islands; MuJoCo
4.0 solves each island on its own, with its own line search, termination test, scale and
iteration count (``solver_niter[island]``), so a rollout matches MuJoCo only if we do the same.

Each active efc row touches the trees MuJoCo assigns it: the trees of the two geoms' bodies
for a contact, of the two bodies for connect and weld, the dof's or joint's tree for dof
friction and joint limits, and for every other row (joint and tendon equality, tendon friction
and limits) the trees of the nonzero entries of its Jacobian. Islands are the connected
components of the tree graph, numbered as MuJoCo's flood fill numbers them: in the order of
their lowest tree. Trees without a row are in no island (-1) and their dofs keep qacc_smooth.

Fixed shapes: components come from a boolean transitive closure of the (ntree, ntree)
adjacency by repeated squaring, so there are at most ntree islands, and ``nisland`` is traced.
"""

from __future__ import annotations

import jax.numpy as jp
import numpy as np

from mjx_lite.constraint import RowPlan
from mjx_lite.math import where
from mjx_lite.types import Data, DisableBit, EqType, Model, ObjType

__all__ = ["island", "islands_enabled", "max_islands"]


def islands_enabled(m: Model) -> bool:
    return not m.opt.disableflags & DisableBit.ISLAND


def max_islands(m: Model) -> int:
    """Static number of island slots: one per tree, or one monolithic island when disabled."""
    return max(1, int(m.ntree)) if islands_enabled(m) else 1


def _static_row_trees(m: Model, p: RowPlan) -> tuple[np.ndarray, np.ndarray]:
    """(nefc - nc, ntree) trees of the rows whose trees follow from the model alone, and a
    (nefc - nc,) mask of the rows whose trees come from their Jacobian."""
    nrow = p.ne + p.nf + p.nl
    trees = np.zeros((nrow, max(1, m.ntree)), bool)
    scan = np.zeros(nrow, bool)
    body_tree = np.asarray(m.body_treeid)
    dof_tree = np.asarray(m.dof_treeid)

    def mark(row, body_ids):
        for b in body_ids:
            if body_tree[b] >= 0:
                trees[row, body_tree[b]] = True

    eq_type, objtype = np.asarray(m.eq_type), np.asarray(m.eq_objtype)
    for i, start, size in zip(p.eq_ids, p.eq_start, p.eq_size):
        rows = range(start, start + size)
        if eq_type[i] in (EqType.CONNECT, EqType.WELD):
            b = [int(m.eq_obj1id[i]), int(m.eq_obj2id[i])]
            if objtype[i] == ObjType.SITE:
                b = [int(m.site_bodyid[x]) for x in b]
            for r in rows:
                mark(r, b)
        else:
            scan[list(rows)] = True
    for k, dof in enumerate(p.fr_dof):
        trees[p.ne + k, dof_tree[dof]] = True
    scan[p.ne + p.fr_dof.size: p.ne + p.nf] = True  # tendon friction
    s0 = p.ne + p.nf
    for k, j in enumerate(p.lim_jnt):
        trees[s0 + k, dof_tree[int(m.jnt_dofadr[j])]] = True
    scan[s0 + p.lim_jnt.size: nrow] = True  # tendon limits
    return trees, scan


def island(m: Model, d: Data) -> Data:
    """Sets nisland, tree_island, dof_island and efc_island from the active efc rows."""
    ntree = max(1, int(m.ntree))
    nv = m.nv
    p = RowPlan(m, 0 if getattr(d, "contact", None) is None else int(d.contact.dist.shape[0]))
    if not islands_enabled(m) or p.nefc == 0 or m.ntree == 0:
        return d.replace(nisland=jp.zeros((), jp.int32),
                         tree_island=jp.full(m.ntree, -1, jp.int32),
                         dof_island=jp.full(nv, -1, jp.int32),
                         efc_island=jp.full(p.nefc, -1, jp.int32))
    dof_tree = np.asarray(m.dof_treeid)
    onehot = jp.asarray(dof_tree[:, None] == np.arange(ntree)[None, :], d.qpos.dtype)
    static, scan = _static_row_trees(m, p)
    nrow = static.shape[0]
    from_jac = (jp.abs(d.efc_J[:nrow]) @ onehot) > 0
    touch = jp.asarray(static) | (jp.asarray(scan)[:, None] & from_jac)
    if p.nc:
        body_tree = jp.asarray(np.asarray(m.body_treeid))
        geom_body = jp.asarray(np.asarray(m.geom_bodyid))
        g = d.contact.geom
        tree = where(g >= 0, body_tree[geom_body[jp.maximum(g, 0)]], -1)  # (ncon, 2)
        slot = (tree[:, :, None] == jp.arange(ntree)[None, None, :]).any(1)  # (ncon, ntree)
        touch = jp.concatenate([touch, jp.repeat(slot, p.width, axis=0)])
    touch = touch & d.efc_active[:, None]

    # tree graph and its transitive closure (repeated squaring: paths of length 2^k)
    tf = touch.astype(d.qpos.dtype)
    adj = (tf.T @ tf) > 0
    has_edge = jp.diagonal(adj)
    reach = adj
    for _ in range(int(np.ceil(np.log2(max(2, ntree))))):
        rf = reach.astype(d.qpos.dtype)
        reach = (rf @ rf) > 0
    lowest = jp.argmax(reach, axis=1)  # lowest tree of each tree's component
    root = has_edge & (lowest == jp.arange(ntree))
    tree_island = where(has_edge, jp.cumsum(root)[lowest] - 1, -1).astype(jp.int32)

    first = jp.argmax(touch, axis=1)
    efc_island = where(touch.any(1), tree_island[first], -1).astype(jp.int32)
    dof_island = tree_island[jp.asarray(dof_tree)] if nv else jp.zeros(0, jp.int32)
    return d.replace(nisland=jp.sum(root).astype(jp.int32), tree_island=tree_island[:m.ntree],
                     dof_island=dof_island, efc_island=efc_island)


def membership(m: Model, d: Data):
    """(dof (nv, K), efc (nefc, K)) one-hot island membership used by the solvers: the
    monolithic solve (islands disabled) is one island holding every dof and every row."""
    k = max_islands(m)
    dtype = d.qpos.dtype
    if not islands_enabled(m):
        return jp.ones((m.nv, 1), dtype), jp.ones((d.efc_J.shape[0], 1), dtype)
    ids = jp.arange(k)
    return ((d.dof_island[:, None] == ids).astype(dtype),
            (d.efc_island[:, None] == ids).astype(dtype))


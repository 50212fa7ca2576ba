"""Level-wise passes over the kinematic tree (Computation chapter, "Forward dynamics": the
recursive algorithms run root -> leaves or leaves -> root).

Bodies are binned by depth once from the static ``m.body_parentid`` / ``m.body_depth``; going
down, each level gathers its parents' values in one indexed read; going up, each level sums
its children into its parents by one static gather and a sum. A pass costs a few ops per
depth level, not per body.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.types import Model


@functools.lru_cache(maxsize=64)
def _plan_cached(parent_bytes: bytes, depth_bytes: bytes) -> tuple:
    parent = np.frombuffer(parent_bytes, dtype=np.int64)
    depth = np.frombuffer(depth_bytes, dtype=np.int64)
    ids = [np.array([0])]
    local_parent = []
    for lvl in range(1, int(depth.max(initial=0)) + 1):
        lvl_ids = np.nonzero(depth == lvl)[0]
        # a body's parent sits one level up: index it inside that level's array
        pos_in_prev = {int(b): k for k, b in enumerate(ids[-1])}
        local_parent.append(np.array([pos_in_prev[int(p)] for p in parent[lvl_ids]]))
        ids.append(lvl_ids)
    # concatenating the level arrays gives bodies in level order; this undoes it
    order = np.argsort(np.concatenate(ids), kind="stable")
    for a in ids + local_parent + [order]:
        a.setflags(write=False)
    return tuple(ids), tuple(local_parent), order


def _plan(m: Model) -> tuple:
    parent = np.asarray(m.body_parentid, dtype=np.int64)
    depth = np.asarray(m.body_depth, dtype=np.int64)
    return _plan_cached(parent.tobytes(), depth.tobytes())


def levels(m: Model) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Static (body ids, parent ids) per depth level 1..max, world (level 0) excluded."""
    ids, _, _ = _plan(m)
    parent = np.asarray(m.body_parentid)
    return tuple((i, parent[i]) for i in ids[1:])


def scan_down(m: Model, fn, local, root):
    """Root -> leaves: out[i] = fn(out[parent[i]], local[i]); out[0] = root.

    Each level gathers its parents from the level above by a static index; no scatter.

    Args:
      m: model (only static tree fields are read).
      fn: vectorized combine of (parent values, local values) pytrees with a leading level axis.
      local: pytree of (nbody, ...) arrays.
      root: pytree of per-body values for the world body (no leading axis).

    Returns:
      pytree of (nbody, ...) arrays.
    """
    ids, local_parent, order = _plan(m)
    prev = jax.tree.map(lambda r, loc: jp.asarray(r, dtype=loc.dtype)[None], root, local)
    outs = [prev]
    for lvl_ids, lp in zip(ids[1:], local_parent, strict=True):
        par = jax.tree.map(lambda o, p=lp: math.take(o, p), prev)
        loc = jax.tree.map(lambda x, i=lvl_ids: math.take(x, i), local)
        prev = fn(par, loc)
        outs.append(prev)
    return jax.tree.map(lambda *xs: math.take(jp.concatenate(xs, axis=0), order), *outs)


def scan_up(m: Model, x):
    """Leaves -> root: subtree sums, out[i] = x[i] + sum of out[c] over children c of i.

    Each level adds its children with ``math.spread`` (a static gather and a sum: no scatter,
    and no 0/1 matrix product, which XLA's CPU backend runs as a dot kernel of its own: 2-9
    us each for these sizes, measured in ant's gradient).
    """
    ids, local_parent, order = _plan(m)

    def one(a):
        acc = math.take(a, ids[-1])
        outs = [acc]
        for lvl in range(len(ids) - 2, -1, -1):
            acc = math.take(a, ids[lvl]) + math.spread(acc, local_parent[lvl], len(ids[lvl]))
            outs.append(acc)
        return math.take(jp.concatenate(outs[::-1], axis=0), order)

    return jax.tree.map(one, x)


@functools.lru_cache(maxsize=64)
def _dof_ancestor_cached(dof_parent_bytes: bytes) -> np.ndarray:
    parent = np.frombuffer(dof_parent_bytes, dtype=np.int64)
    nv = len(parent)
    anc = np.zeros((nv, nv), dtype=bool)
    for i in range(nv):
        j = i
        while j >= 0:
            anc[i, j] = True
            j = parent[j]
    anc.setflags(write=False)
    return anc


def dof_ancestors(m: Model) -> np.ndarray:
    """Static (nv, nv) mask: [i, j] is True when dof j is dof i or one of its ancestors."""
    return _dof_ancestor_cached(np.asarray(m.dof_parentid, dtype=np.int64).tobytes())


def body_dof_mask(m: Model) -> np.ndarray:
    """Static (nbody, nv) mask: [b, j] is True when dof j moves body b (its kinematic chain)."""
    anc = dof_ancestors(m)
    out = np.zeros((m.nbody, m.nv), dtype=bool)
    adr, num = np.asarray(m.body_dofadr), np.asarray(m.body_dofnum)
    parent = np.asarray(m.body_parentid)
    for b in range(1, m.nbody):
        # the deepest dof on the path to the root: own last dof or the nearest ancestor's
        c = b
        while c > 0 and num[c] == 0:
            c = parent[c]
        if c > 0:
            out[b] = anc[adr[c] + num[c] - 1]
    return out

"""Level-wise passes over the kinematic tree (Computation chapter, "Forward dynamics": the
recursive algorithms run root -> leaves or leaves -> root).

Bodies are binned by depth once from the static ``m.body_parentid`` / ``m.body_depth``; going
down, each level gathers its parents' values in one indexed read; going up, each level
scatter-adds into its parents in one segment sum. A pass costs one op per depth level, not
per body.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.types import Model


@functools.lru_cache(maxsize=64)
def _levels_cached(parent_bytes: bytes, depth_bytes: bytes) -> tuple:
    parent = np.frombuffer(parent_bytes, dtype=np.int64)
    depth = np.frombuffer(depth_bytes, dtype=np.int64)
    out = []
    for lvl in range(1, int(depth.max(initial=0)) + 1):
        ids = np.nonzero(depth == lvl)[0]
        out.append((ids, parent[ids]))
    return tuple(out)


def levels(m: Model) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Static (body ids, parent ids) per depth level 1..max, world (level 0) excluded."""
    parent = np.asarray(m.body_parentid, dtype=np.int64)
    depth = np.asarray(m.body_depth, dtype=np.int64)
    return _levels_cached(parent.tobytes(), depth.tobytes())


def scan_down(m: Model, fn, local, root):
    """Root -> leaves: out[i] = fn(out[parent[i]], local[i]); out[0] = root.

    Args:
      m: model (only static tree fields are read).
      fn: vectorized combine of (parent values, local values) pytrees with a leading level axis.
      local: pytree of (nbody, ...) arrays.
      root: pytree of per-body values for the world body (no leading axis).

    Returns:
      pytree of (nbody, ...) arrays.
    """
    out = jax.tree.map(lambda loc, r: jp.zeros_like(loc).at[0].set(r), local, root)
    for ids, pids in levels(m):
        par = jax.tree.map(lambda o, p=pids: o[p], out)
        loc = jax.tree.map(lambda x, i=ids: x[i], local)
        val = fn(par, loc)
        out = jax.tree.map(lambda o, v, i=ids: o.at[i].set(v), out, val)
    return out


def scan_up(m: Model, x):
    """Leaves -> root: subtree sums, out[i] = x[i] + sum of out[c] over children c of i."""
    for ids, pids in reversed(levels(m)):
        x = jax.tree.map(lambda a, i=ids, p=pids: a.at[p].add(a[i]), x)
    return x


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

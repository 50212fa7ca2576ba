"""Quaternions, rotations and spatial algebra (Computation chapter, "Notation" and
"Forward dynamics": 6-vectors are [angular; linear], expressed in the global frame about the
subtree center of mass, the "c*" convention of cvel, cdof, cinert).

Quaternions are [w, x, y, z]. Every norm and division goes through ``safe_norm`` /
``safe_div`` so that the branch not taken (zero vector, zero mass) cannot leak NaN into
reverse-mode gradients.
"""

from __future__ import annotations

import functools

import jax
import jax.extend.core
import jax.interpreters.ad
import jax.interpreters.batching
import jax.interpreters.mlir
import jax.numpy as jp
import numpy as np

# MuJoCo's mjMINVAL: below it a norm counts as zero.
MINVAL = 1e-15

# Compile time: these helpers run on every body, joint, geom and contact, in every stage, and
# component-wise code (x[..., 0] ... stacked back) costs two traced ops per component. They are
# written instead as one gather of the components each output needs, a product with a constant
# sign table and a sum over the last axis: a handful of ops whatever the formula, with the
# same terms added in the same order, so results are unchanged (see tests/test_smooth.py).


def where(condition, x, y) -> jax.Array:
    """``where(condition, x, y)`` (same promotion and broadcasting, same select), traced
    as plain ops: jnp wraps it in a ``jit`` of its own, one call equation a use (1,132 in
    gymnasium ant's step) that every transformation and the lowering walk into separately."""
    if jax.typeof(x).weak_type and jax.typeof(y).weak_type:
        return jp.where(condition, x, y)  # keeps the result weakly typed, as jnp does
    x, y = (jp.asarray(v, jp.result_type(x, y)) for v in (x, y))
    condition = jp.asarray(condition)
    if condition.dtype != jp.bool_:
        condition = condition != 0
    shape = jp.broadcast_shapes(condition.shape, x.shape, y.shape)
    if condition.ndim:  # a scalar condition selects whole arrays
        condition = jp.broadcast_to(condition, shape)
    return jax.lax.select(condition, jp.broadcast_to(x, shape), jp.broadcast_to(y, shape))

def lanewise(tree, ref):
    """``tree`` unchanged, but varying with ``ref`` under ``vmap``: a loop's initial carry.

    JAX batches a ``while_loop`` or ``scan`` body once per round of its fixpoint over which
    carry entries vary per lane; an entry that starts as a constant (a zero counter, an empty
    polytope) and turns per-lane inside costs another round, and nested loops multiply the
    rounds (an EPA's horizon walk inside its expansion inside ``compact_map``: 9.6 s of
    tracing for one cylinder-box group). Marked varying from the start, the body is batched
    once. ``ref``: any array that varies per lane. XLA folds the select away."""
    flat = jp.ravel(ref)
    never = (flat[0] != flat[0]) & (flat[0] == flat[0])
    return jax.tree.map(lambda a: where(never, a, a), tree)


def pick(x: jax.Array, idx) -> jax.Array:
    """x[..., idx] for a static integer array ``idx`` (any shape), as a single gather.

    Args:
      x: (..., n) array.
      idx: numpy integer array of shape S with entries in [0, n).

    Returns:
      (..., *S) array.
    """
    return _pick_p.bind(x, index=_StaticIndex(idx, x.shape[-1], last=True))


def take(x: jax.Array, idx) -> jax.Array:
    """x[idx] for a static integer array ``idx`` (any shape) indexing the leading axis: (n, ...)
    -> (*S, ...). Its reverse-mode transpose is ``pick``'s (gathers, not a scatter-add)."""
    return _pick_p.bind(x, index=_StaticIndex(idx, x.shape[0], last=False))


class _StaticIndex:
    """The static index of ``pick`` (``last``) or ``take``, hashable as a primitive parameter
    must be, and, for the transpose, where each of the n entries was picked: ``table[j]`` the
    flat positions that hold j, in order, padded with ``idx.size`` to the most often picked
    entry's count."""

    def __init__(self, idx, n: int, last: bool):
        self.idx = np.asarray(idx, dtype=np.int32)
        self.n, self.last = int(n), bool(last)
        self._key = (self.n, self.last, self.idx.shape, self.idx.tobytes())

    @functools.cached_property
    def table(self) -> np.ndarray:
        # only the transpose reads it, so a forward trace does not build it
        flat = self.idx.ravel()
        k = int(np.bincount(flat, minlength=self.n).max()) if flat.size else 0
        table = np.full((self.n, k), flat.size, np.int32)
        seen = np.zeros(self.n, np.int32)
        for pos, j in enumerate(flat):
            table[j, seen[j]] = pos
            seen[j] += 1
        return table

    @functools.cached_property
    def run(self):
        """(first entry, length, ascending) where the index is one ascending run (a, a+1,
        ...) or one repeated entry (a, a, ...), else None."""
        flat = self.idx.ravel()
        if flat.size == 0:
            return None
        a, k = int(flat[0]), flat.size
        if np.array_equal(flat, np.arange(a, a + k)):
            return a, k, True
        if np.all(flat == a):
            return a, k, False
        return None

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, _StaticIndex) and self._key == other._key

    def __repr__(self):
        return f"{'[..., ' if self.last else '['}{self.idx.tolist()}]"

    def out_shape(self, shape):
        return (shape[:-1] + self.idx.shape) if self.last else (self.idx.shape + shape[1:])


def _pick_gather(x, *, index: _StaticIndex):
    # An index that is one ascending run or one repeated entry is read as a slice (and a
    # broadcast), which XLA fuses into each consumer, where a gather read by more than one
    # becomes a kernel of its own (gymnasium ant's implicit gradient: 1,714 -> 1,659 kernels,
    # run 96-98 -> 89-90 ms at batch 1; several runs as slices concatenated gave more kernels)
    axis = x.ndim - 1 if index.last else 0
    if index.idx.size == 0:
        return jp.zeros(index.out_shape(x.shape), x.dtype)
    if index.run is not None:
        a, k, ascending = index.run
        out = jax.lax.slice_in_dim(x, a, a + (k if ascending else 1), axis=axis)
        if not ascending:
            shape = list(out.shape)
            shape[axis] = k
            out = jax.lax.broadcast_in_dim(out, shape, tuple(range(x.ndim)))
        return out.reshape(index.out_shape(x.shape))
    if index.last:
        nd = x.ndim - 1
        dnums = jax.lax.GatherDimensionNumbers(
            offset_dims=tuple(range(nd)), collapsed_slice_dims=(nd,), start_index_map=(nd,))
        sizes = x.shape[:-1] + (1,)
    else:
        s = index.idx.ndim
        dnums = jax.lax.GatherDimensionNumbers(
            offset_dims=tuple(range(s, s + x.ndim - 1)), collapsed_slice_dims=(0,),
            start_index_map=(0,))
        sizes = (1,) + x.shape[1:]
    return jax.lax.gather(x, index.idx[..., None], dnums, slice_sizes=sizes,
                          mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def spread(v: jax.Array, idx, n: int) -> jax.Array:
    """The (n, ...) array whose row j sums the rows of v (shape (*S, ...)) at the positions
    where the static index ``idx`` (shape S) holds j: ``jp.zeros((n, ...)).at[idx].add(v)``
    as at most k gathers (k: the most often repeated entry), which fuse into their
    consumers where a scatter-add is an XLA kernel of its own; it is ``take``'s transpose,
    and ``take`` is its."""
    return _spread(v, _StaticIndex(idx, n, last=False))


def put(x: jax.Array, idx, v: jax.Array) -> jax.Array:
    """``x.at[idx].set(v)`` for a static index of distinct rows, as one gather from x and v
    (its transpose: gathers again, not the scatter a set's transpose is)."""
    idx = np.asarray(idx, dtype=np.int32)
    rows = np.arange(x.shape[0], dtype=np.int32)
    rows[idx.ravel()] = x.shape[0] + np.arange(idx.size, dtype=np.int32)
    return take(jp.concatenate([x, v.reshape((idx.size,) + x.shape[1:]).astype(x.dtype)]), rows)


def _spread(v, index: _StaticIndex):
    # The cotangent of entry j sums over the positions that picked j: one gather of an (n, k)
    # table (k: the most often picked entry; unfilled places read a zero appended to the
    # cotangents) and a sum over k, which fuse into one kernel. JAX's transpose of a gather is
    # a scatter-add, an XLA kernel of its own (163 of them in gymnasium ant's implicit-adjoint
    # gradient, 2026-11-27); k gathers and k - 1 adds ran 1.3x the kernels of this form.
    p, s = index.idx.size, index.idx.ndim
    if index.last:
        flat, again, axis = v.reshape(v.shape[:v.ndim - s] + (p,)), pick, -1
        shape = v.shape[:v.ndim - s] + (index.n,)
    else:
        flat, again, axis = v.reshape((p,) + v.shape[s:]), take, 0
        shape = (index.n,) + v.shape[s:]
    if not p:  # nothing was picked
        return jp.zeros(shape, v.dtype)
    if index.run is not None:
        # one run: the cotangents (summed, for one repeated entry) padded with zeros, which
        # XLA fuses as it does the slice that picked them
        a, _, ascending = index.run
        if not ascending:
            flat = jp.sum(flat, axis=axis, keepdims=True, dtype=flat.dtype)
        config = [(0, 0, 0)] * flat.ndim
        config[axis % flat.ndim] = (a, index.n - a - flat.shape[axis], 0)
        return jax.lax.pad(flat, jp.zeros((), flat.dtype), config)
    table = index.table
    if table.shape[1] == 1 and (table < p).all():  # a permutation
        return again(flat, table[:, 0])
    if table.shape[1] == 1:
        # distinct entries: each unfilled place reads a zero of its own, so that the gather's
        # own transpose (a forward spread's, in reverse mode) picks each source once; one
        # shared zero made it sum the cotangents of all places that read it (gymnasium
        # humanoid's contact rows put into their slot layout: an (n, 483) table, 2.5x the
        # implicit gradient's time)
        unfilled = table[:, 0] == p
        table = table.copy()
        table[unfilled, 0] = p + np.arange(int(unfilled.sum()))
        shape = list(flat.shape)
        shape[axis] = int(unfilled.sum())
        return again(jp.concatenate([flat, jp.zeros(shape, flat.dtype)], axis), table[:, 0])
    pad = jp.zeros_like(jax.lax.slice_in_dim(flat, 0, 1, axis=axis))
    return jp.sum(again(jp.concatenate([flat, pad], axis), table), axis=-1 if index.last else 1,
                  dtype=flat.dtype)  # an integer sum would widen to the default int


def _pick_transpose(ct, x, *, index: _StaticIndex):
    return [_spread(ct, index)]


def _pick_batch(args, dims, *, index: _StaticIndex):
    (x,), (dim,) = args, dims
    s = index.idx.ndim
    if index.last:
        if dim == x.ndim - 1:  # the picked axis is the batch's: put the batch in front
            x, dim = jp.moveaxis(x, dim, 0), 0
        return _pick_p.bind(x, index=index), dim
    if dim == 0:  # the picked axis is the batch's: put the batch behind it
        x, dim = jp.moveaxis(x, 0, 1), 1
    return _pick_p.bind(x, index=index), dim - 1 + s


_pick_p = jax.extend.core.Primitive("mjx_lite_pick")
_pick_p.def_impl(_pick_gather)
_pick_p.def_abstract_eval(
    lambda x, *, index: jax.core.ShapedArray(index.out_shape(x.shape), x.dtype))
jax.interpreters.mlir.register_lowering(
    _pick_p, jax.interpreters.mlir.lower_fun(_pick_gather, multiple_results=False))
jax.interpreters.ad.deflinear2(_pick_p, _pick_transpose)
jax.interpreters.batching.primitive_batchers[_pick_p] = _pick_batch


def lane_select(on, x: jax.Array, y: jax.Array) -> jax.Array:
    """``where(on, x, y)`` for a scalar boolean ``on`` (one per vmapped lane) and x, y of one
    shape, as a primitive linear in (x, y). Differentiated, its mask stays that scalar: a
    ``where`` broadcasts its condition, and instantiates a zero tangent for a constant branch,
    from known values only, so reverse mode stores both as residuals of the full shape. Used
    by the divergence resets (``support.reset_where``, ``check_acc``): with them, gymnasium
    ant's RK4 stage scan stored 351 residual arrays a stage under the implicit gradient, now
    150 (jit 42.8 -> 40.3 s in a one-process A/B, run time unchanged). Not a ``custom_jvp``:
    its call boundary cost humanoid's forward rollout 16% (XLA fused less across it)."""
    return _select_p.bind(jp.asarray(on, bool), x, y, invert=False)


def keep_where(on, x: jax.Array) -> jax.Array:
    """``where(on, x, 0)`` as ``lane_select``, the zero never materialized."""
    return _select_p.bind(jp.asarray(on, bool), x, invert=False)


def _select_impl(on, x, y=None, *, invert=False):
    on = on.reshape(on.shape + (1,) * (x.ndim - on.ndim))  # a lane's flag over its entries
    on = jp.broadcast_to(~on if invert else on, x.shape)
    return jax.lax.select(on, x, jp.zeros_like(x) if y is None else y)


def _select_jvp(primals, tangents, *, invert):
    on, *_ = primals
    live = [t for t in tangents[1:] if type(t) is not jax.interpreters.ad.Zero]
    out = _select_p.bind(*primals, invert=invert)
    if not live:
        return out, jax.interpreters.ad.Zero(jax.typeof(out).to_tangent_aval())
    if len(live) == 2:
        return out, _select_p.bind(on, *live, invert=invert)
    # one branch's tangent is zero: keep the other's where it is taken (the flag itself
    # inverted inside, not ~on here: each ~on would be a residual of its own)
    return out, _select_p.bind(on, live[0], invert=invert != (live[0] is not tangents[1]))


def _select_transpose(ct, on, x, y=None, *, invert):
    linear = jax.interpreters.ad.is_undefined_primal
    keep = lambda flip: (ct if type(ct) is jax.interpreters.ad.Zero  # noqa: E731
                         else _select_p.bind(on, ct, invert=invert != flip))
    cts = [None, keep(False) if linear(x) else None]
    if y is not None:
        cts.append(keep(True) if linear(y) else None)
    return cts


def _select_batch(args, dims, *, invert):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    # all batched in front: the flag's leading axes then line up with the operands'
    args = [jp.moveaxis(a, d, 0) if d is not None else jp.broadcast_to(a, (size,) + a.shape)
            for a, d in zip(args, dims)]
    return _select_p.bind(*args, invert=invert), 0


_select_p = jax.extend.core.Primitive("mjx_lite_lane_select")
_select_p.def_impl(_select_impl)
_select_p.def_abstract_eval(
    lambda on, x, *y, invert: jax.core.ShapedArray(x.shape, x.dtype))
jax.interpreters.mlir.register_lowering(
    _select_p, jax.interpreters.mlir.lower_fun(_select_impl, multiple_results=False))
jax.interpreters.ad.primitive_jvps[_select_p] = _select_jvp
jax.interpreters.ad.primitive_transposes[_select_p] = _select_transpose
jax.interpreters.batching.primitive_batchers[_select_p] = _select_batch


def _signed_sum(terms: jax.Array, sign: np.ndarray) -> jax.Array:
    """sum over the last axis of terms * sign, sign a static table (exact: +-1, 0 or 2)."""
    return jp.sum(terms * np.asarray(sign, dtype=terms.dtype), axis=-1)


_CROSS_A = np.array([1, 2, 0])
_CROSS_B = np.array([2, 0, 1])


def cross(a: jax.Array, b: jax.Array) -> jax.Array:
    """3-vector cross product a x b, broadcasting over leading axes (jp.cross in 7 ops).

    A primitive, bilinear as JAX's products are: its tangent is da x b + a x db, and reverse
    mode sends b x ct and ct x a back, written by components (slices, which fuse). Written
    as picks, each pick transposed into a gather of a product with the cotangent, ~7 kernels
    a cross product in a reverse pass (gymnasium humanoid: ~110 a stage of its gradient;
    contact rows and frames, cdof, RNE); the picks stay in the forward pass, where they fuse
    into their consumers (by components there, the forward ran 4% faster and the gradient 3%,
    session 59; this way the gradient gains 1.6% and the forward nothing)."""
    a, b = jp.asarray(a), jp.asarray(b)
    dtype = jp.result_type(a, b)
    shape = jp.broadcast_shapes(a.shape, b.shape)
    return _cross_p.bind(jp.broadcast_to(a.astype(dtype), shape),
                         jp.broadcast_to(b.astype(dtype), shape))


def _cross_impl(a, b):
    return pick(a, _CROSS_A) * pick(b, _CROSS_B) - pick(a, _CROSS_B) * pick(b, _CROSS_A)


def _cross_by_components(a, b):
    ax, ay, az = (a[..., i:i + 1] for i in range(3))
    bx, by, bz = (b[..., i:i + 1] for i in range(3))
    return jp.concatenate([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], -1)


def _cross_batch(args, dims):
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    args = [jp.moveaxis(x, d, 0) if d is not None else jp.broadcast_to(x, (size,) + x.shape)
            for x, d in zip(args, dims)]
    return _cross_p.bind(*args), 0


_cross_p = jax.extend.core.Primitive("mjx_lite_cross")
_cross_p.def_impl(_cross_impl)
_cross_p.def_abstract_eval(lambda a, b: jax.core.ShapedArray(a.shape, a.dtype))
jax.interpreters.mlir.register_lowering(
    _cross_p, jax.interpreters.mlir.lower_fun(_cross_impl, multiple_results=False))
jax.interpreters.ad.defbilinear(_cross_p, lambda ct, a, b: _cross_by_components(b, ct),
                                lambda ct, a, b: _cross_by_components(ct, a))
jax.interpreters.batching.primitive_batchers[_cross_p] = _cross_batch


_SKEW_IDX = np.array([[0, 2, 1], [2, 0, 0], [1, 0, 0]])
_SKEW_SIGN = np.array([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]])


def skew(v: jax.Array) -> jax.Array:
    """(..., 3, 3) matrix [v]x with [v]x u = v x u."""
    return pick(v, _SKEW_IDX) * _SKEW_SIGN.astype(v.dtype)


@jax.custom_jvp
def _round_product(x):
    return jax.lax.select(x == x, x, -x)


@_round_product.defjvp
def _round_product_jvp(primals, tangents):
    return _round_product(primals[0]), tangents[0]


def rounded(x):
    """x (an array or a tuple of arrays), each product in it rounded on its own.

    XLA's CPU backend contracts a * b + c into a fused multiply-add, whose single rounding
    breaks exact ties (axis-aligned poses) another way than MuJoCo's (and numpy's) two do.
    ``select(x == x, x, -x)`` is x itself (NaN stays NaN) but opaque to that contraction (an
    optimization barrier is not); its derivative is the identity. It replaced
    ``nextafter(x, x)``, whose expansion (about 40 HLO operations each) made up 44% of the
    GJK/EPA search's HLO: the same searches bit for bit (8,000 float64 cylinder queries),
    cylinder-box group compile 19.2 -> 15.5 s."""
    return tuple(_round_product(t) for t in x) if isinstance(x, tuple) else _round_product(x)


def rounded_cross(a, b):
    """a x b (..., 3) with each product rounded before the difference (``rounded``: no fused
    multiply-add), as MuJoCo's x86-64 build and numpy compute it; the collision ports whose
    ties are decided by the last bit use it."""
    left, right = rounded((a[..., _CROSS_A] * b[..., _CROSS_B],
                           a[..., _CROSS_B] * b[..., _CROSS_A]))
    return left - right


def dot3(a: jax.Array, b: jax.Array) -> jax.Array:
    """a . b over a last axis of 3, broadcasting: the products rounded (``rounded``) and
    summed left to right, as ``jp.sum(a * b, -1)`` computes it, but elementwise. That sum is
    a reduction, which jaxlib 0.10's CPU backend hands to YNNPACK at tens of microseconds
    each under vmap (a vmapped cylinder-box group: 132 such calls, 8 of its 13 ms)."""
    return sum_last(rounded(a * b))


def sum_last(x: jax.Array) -> jax.Array:
    """x summed over its last axis (short and static) left to right, elementwise: no reduce
    op, which jaxlib 0.10's CPU backend hands to YNNPACK in float32 at tens of microseconds a
    call under vmap (see ``dot3``)."""
    total = x[..., 0]
    for i in range(1, x.shape[-1]):
        total = total + x[..., i]
    return total


def argmax(x: jax.Array, axis: int = -1) -> jax.Array:
    """``jp.argmax(x, axis)`` (int32: the first index of the maximum) as two integer
    reductions: the largest order-preserving integer key of x, then the least index that
    has it. ``jp.argmax`` lowers to one variadic (value, index) reduction, which XLA's CPU
    backend does not vectorize, and a float maximum goes to YNNPACK, slow under vmap: the
    support search over a 642-vertex mesh, vmapped over 1,024 lanes, took 1.4 ms a call
    either way."""
    x = jp.asarray(x)
    if x.dtype not in (jp.float32, jp.float64):
        return jp.argmax(x, axis).astype(jp.int32)
    x = jp.where(x == 0, jp.zeros((), x.dtype), x)  # -0 and +0 compare equal: one key
    ibits = jp.int64 if x.dtype == jp.float64 else jp.int32
    bits = jax.lax.bitcast_convert_type(x, ibits)
    # negative floats order backwards as integers: flip their magnitude bits
    key = bits ^ ((bits >> (8 * x.dtype.itemsize - 1)) & jp.iinfo(ibits).max)
    top = jp.max(key, axis=axis, keepdims=True)
    idx = jax.lax.broadcasted_iota(jp.int32, x.shape, axis % x.ndim)
    return jp.min(jp.where(key == top, idx, x.shape[axis] - 1), axis=axis)


def argmin(x: jax.Array, axis: int = -1) -> jax.Array:
    """``jp.argmin(x, axis)`` the way of ``argmax``: the first index of the least value."""
    return argmax(-jp.asarray(x), axis)


def safe_norm(x: jax.Array, axis=-1, keepdims: bool = False) -> jax.Array:
    """Euclidean norm whose gradient at 0 is 0 (not NaN)."""
    sq = jp.sum(x * x, axis=axis, keepdims=keepdims)
    pos = sq > 0
    return where(pos, jp.sqrt(where(pos, sq, 1.0)), 0.0)


def safe_div(num: jax.Array, den: jax.Array, eps: float = MINVAL) -> jax.Array:
    """num / den where |den| < eps gives 0 (and a zero gradient), as MuJoCo's guards do."""
    ok = jp.abs(den) >= eps
    return where(ok, num / where(ok, den, 1.0), 0.0)


def normalize(x: jax.Array, axis=-1) -> jax.Array:
    """x / |x|; a zero vector stays zero."""
    n = safe_norm(x, axis=axis, keepdims=True)
    return safe_div(x, n)


def quat_normalize(q: jax.Array) -> jax.Array:
    """mju_normalize4: unit quaternion; a (near) zero quaternion becomes identity.

    Like MuJoCo, a quaternion whose norm is within MINVAL of 1 keeps its value (dividing
    would move it by an ulp, and a contact at exactly zero distance, as gymnasium's point
    sphere on its floor, then flips on or off where MuJoCo's does not); its derivative is
    still the normalization's, so gradients agree with finite differences."""
    n = safe_norm(q, keepdims=True)
    ok = n >= MINVAL
    ident = np.array([1.0, 0.0, 0.0, 0.0], dtype=q.dtype)
    unit = q / where(ok, n, 1.0)
    # (q - unit) is exact (Sterbenz), so the sum is exactly q
    unit = where(jp.abs(n - 1.0) > MINVAL, unit, jax.lax.stop_gradient(q - unit) + unit)
    return where(ok, unit, ident)


# Hamilton product: (a b)[i] = sum_j sign[i, j] a[j] b[idx[i, j]], e.g.
# (a b)[1] = aw bx + ax bw + ay bz - az by
_QMUL_IDX = np.array([[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]])
_QMUL_SIGN = np.array([[1, -1, -1, -1], [1, 1, 1, -1], [1, -1, 1, 1], [1, 1, -1, 1]])


def quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    """Hamilton product a * b, broadcasting over leading axes."""
    a, b = jp.asarray(a), jp.asarray(b)
    return _signed_sum(a[..., None, :] * pick(b, _QMUL_IDX), _QMUL_SIGN)


def quat_conj(q: jax.Array) -> jax.Array:
    """Conjugate, the inverse of a unit quaternion (mju_negQuat)."""
    return q * jp.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


quat_inv = quat_conj


def rotate(v: jax.Array, q: jax.Array) -> jax.Array:
    """Rotates 3-vector v by unit quaternion q (mju_rotVecQuat)."""
    q = jp.asarray(q)
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * cross(u, v)
    return v + w * t + cross(u, t)


# entries of the rotation matrix as signed sums of products q[i] q[j] (index 4 i + j), e.g.
# mat[0, 0] = ww + xx - yy - zz, mat[0, 1] = 2 (xy - wz); zero-weight terms pad to 4
_W, _X, _Y, _Z = 0, 1, 2, 3
_Q2M_TERMS = [
    [(_W, _W, 1), (_X, _X, 1), (_Y, _Y, -1), (_Z, _Z, -1)],
    [(_X, _Y, 2), (_W, _Z, -2)], [(_X, _Z, 2), (_W, _Y, 2)],
    [(_X, _Y, 2), (_W, _Z, 2)],
    [(_W, _W, 1), (_X, _X, -1), (_Y, _Y, 1), (_Z, _Z, -1)], [(_Y, _Z, 2), (_W, _X, -2)],
    [(_X, _Z, 2), (_W, _Y, -2)], [(_Y, _Z, 2), (_W, _X, 2)],
    [(_W, _W, 1), (_X, _X, -1), (_Y, _Y, -1), (_Z, _Z, 1)],
]
_Q2M_IDX = np.array([[4 * i + j for i, j, _ in t] + [0] * (4 - len(t)) for t in _Q2M_TERMS])
_Q2M_SIGN = np.array([[s for _, _, s in t] + [0] * (4 - len(t)) for t in _Q2M_TERMS])


def quat_to_mat(q: jax.Array) -> jax.Array:
    """Rotation matrix (..., 3, 3) of unit quaternion q (mju_quat2Mat)."""
    q = jp.asarray(q)
    qq = (q[..., :, None] * q[..., None, :]).reshape(q.shape[:-1] + (16,))
    return _signed_sum(pick(qq, _Q2M_IDX), _Q2M_SIGN).reshape(q.shape[:-1] + (3, 3))


def axis_angle_to_quat(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """Quaternion of a rotation by ``angle`` about unit ``axis`` (mju_axisAngle2Quat)."""
    half = 0.5 * jp.asarray(angle)[..., None]
    return jp.concatenate([jp.cos(half), jp.sin(half) * axis], axis=-1)


def quat_integrate(q: jax.Array, vel: jax.Array, scale=1.0) -> jax.Array:
    """mju_quatIntegrate: q * exp(scale * vel / 2), vel a local-frame angular velocity."""
    n = safe_norm(vel, keepdims=True)
    small = n < 1e-8
    ns = where(small, 1.0, n)
    half = 0.5 * scale * n
    # sin(scale*|v|/2) / |v|, by its Taylor series near 0 so that the gradient stays finite
    s = where(small, 0.5 * scale * (1.0 - half * half / 6.0), jp.sin(half) / ns)
    qrot = jp.concatenate([jp.cos(half), s * vel], axis=-1)
    return quat_normalize(quat_mul(quat_normalize(q), qrot))


def quat_to_vel(q: jax.Array, dt=1.0) -> jax.Array:
    """mju_quat2Vel: rotation vector (axis * angle) / dt of unit q, angle wrapped to (-pi, pi]."""
    u = q[..., 1:]
    s = safe_norm(u, keepdims=True)
    angle = 2.0 * jp.arctan2(s, q[..., :1])
    angle = where(angle > jp.pi, angle - 2.0 * jp.pi, angle)
    # angle / s -> 2 / w as s -> 0
    small = s < 1e-10
    ratio = where(small, 2.0 / where(q[..., :1] == 0, 1.0, q[..., :1]),
                     angle / where(small, 1.0, s))
    return u * ratio / dt


def mat_to_quat(mat: jax.Array) -> jax.Array:
    """Unit quaternion of rotation matrix (..., 3, 3) (mju_mat2Quat), branch-free."""
    m00, m11, m22 = mat[..., 0, 0], mat[..., 1, 1], mat[..., 2, 2]
    tr = m00 + m11 + m22
    cands = jp.stack(
        [
            jp.stack([1 + tr, mat[..., 2, 1] - mat[..., 1, 2], mat[..., 0, 2] - mat[..., 2, 0],
                      mat[..., 1, 0] - mat[..., 0, 1]], -1),
            jp.stack([mat[..., 2, 1] - mat[..., 1, 2], 1 + m00 - m11 - m22,
                      mat[..., 0, 1] + mat[..., 1, 0], mat[..., 0, 2] + mat[..., 2, 0]], -1),
            jp.stack([mat[..., 0, 2] - mat[..., 2, 0], mat[..., 0, 1] + mat[..., 1, 0],
                      1 - m00 + m11 - m22, mat[..., 1, 2] + mat[..., 2, 1]], -1),
            jp.stack([mat[..., 1, 0] - mat[..., 0, 1], mat[..., 0, 2] + mat[..., 2, 0],
                      mat[..., 1, 2] + mat[..., 2, 1], 1 - m00 - m11 + m22], -1),
        ],
        axis=-2,
    )
    # MuJoCo's choice (and so its sign): the trace form when the trace is positive, else the
    # form of the largest diagonal element
    best = where(tr > 0, 0, 1 + jp.argmax(jp.stack([m00, m11, m22], -1), axis=-1))
    q = jp.take_along_axis(cands, best[..., None, None], axis=-2)[..., 0, :]
    return quat_normalize(q)


def motion_cross(v: jax.Array, u: jax.Array) -> jax.Array:
    """Spatial motion cross product v x u (mju_crossMotion), 6-vectors [ang; lin]."""
    w, vl = v[..., :3], v[..., 3:]
    return jp.concatenate(
        [cross(w, u[..., :3]), cross(w, u[..., 3:]) + cross(vl, u[..., :3])], axis=-1
    )


def force_cross(v: jax.Array, f: jax.Array) -> jax.Array:
    """Spatial force cross product v x* f (mju_crossForce)."""
    w, vl = v[..., :3], v[..., 3:]
    return jp.concatenate(
        [cross(w, f[..., :3]) + cross(vl, f[..., 3:]), cross(w, f[..., 3:])], axis=-1
    )


# the symmetric 3x3 of [Ixx Iyy Izz Ixy Ixz Iyz], and back (row-major 3x3 -> the 6 entries)
_SYM3 = np.array([[0, 3, 4], [3, 1, 5], [4, 5, 2]])
_SYM6 = np.array([0, 4, 8, 1, 2, 5])


def inert_mul(i: jax.Array, v: jax.Array) -> jax.Array:
    """10-element com-based inertia times 6-vector (mju_mulInertVec).

    The inertia is [Ixx Iyy Izz Ixy Ixz Iyz, m*c (3), m] about the subtree com, with c the
    body com offset from it.
    """
    w, vl = v[..., :3], v[..., 3:]
    mc, mass = i[..., 6:9], i[..., 9:10]
    iw = jp.sum(pick(i, _SYM3) * w[..., None, :], axis=-1)
    return jp.concatenate([iw + cross(mc, vl), mass * vl - cross(mc, w)], axis=-1)


def inert_com(inertia: jax.Array, mat: jax.Array, dif: jax.Array, mass: jax.Array) -> jax.Array:
    """mju_inertCom: principal inertia rotated by ``mat`` and shifted by ``dif`` -> 10-vector."""
    mass = jp.asarray(mass)[..., None]
    rot = jp.einsum("...ij,...j,...kj->...ik", mat, inertia, mat)
    dd = jp.sum(dif * dif, -1)[..., None, None]
    eye = jp.eye(3, dtype=rot.dtype)
    full = rot + mass[..., None] * (dd * eye - dif[..., :, None] * dif[..., None, :])
    sym = pick(full.reshape(full.shape[:-2] + (9,)), _SYM6)
    return jp.concatenate([sym, mass * dif, mass], axis=-1)


def transform_motion(vec: jax.Array, newpos: jax.Array, oldpos: jax.Array) -> jax.Array:
    """Moves a motion 6-vector from point ``oldpos`` to ``newpos`` (mju_transformSpatial)."""
    w = vec[..., :3]
    return jp.concatenate([w, vec[..., 3:] - cross(newpos - oldpos, w)], axis=-1)


def transform_force(vec: jax.Array, newpos: jax.Array, oldpos: jax.Array) -> jax.Array:
    """Moves a force 6-vector [torque; force] from point ``oldpos`` to ``newpos``."""
    f = vec[..., 3:]
    return jp.concatenate([vec[..., :3] - cross(newpos - oldpos, f), f], axis=-1)

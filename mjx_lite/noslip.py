"""MuJoCo's noslip post-processor (mj_solNoSlip), run after the main constraint solver when
``opt.noslip_iterations`` > 0 (seed ``../shared/seeds/000_14f7d172c1a5ccbe.txt:465-468``: "a
modified PGS method to suppress slip/drift in friction dimensions resulting from the
soft-constraint model").

Starting from the main solver's efc_force, Gauss-Seidel sweeps over the friction dimensions
only minimize the dual cost 0.5 f'A f + f'b with A = J M^-1 J' WITHOUT the regularizer R,
every other force held fixed. As measured on MuJoCo 4.0 (float64: forces, qacc and iteration
counts reproduced, see tests/test_noslip.py), one sweep visits, in this order:

- every friction-loss row (dofs, then tendons), its exact minimizer clipped to
  [-frictionloss, frictionloss] (no revert test);
- every contact in MuJoCo's contact order. Pyramidal: each pair of opposing pyramid edges
  (rows 2k, 2k+1) in turn, their sum (the normal part) fixed, the split minimized in closed
  form and clipped so both edges stay non-negative. Elliptic: the tangential block given the
  solved normal force, a QCQP on the friction ellipse of that normal force (``_qcqp``, PGS's),
  its answer put on the ellipse when the constraint is active; zero friction where the normal
  force is below mjMINVAL. Contact blocks are undone where they raise the cost by more than
  1e-10, as in PGS, and their diagonal is clamped to 1e-10 after R is removed.

Islands (MuJoCo 4.0) are solved independently: each has its own improvement (the sum of the
cost decreases of its sweep, the first sweep also counting 0.5 f'R f of its rows, the
regularizer's share that the sweep removes), scaled by 1 / (its share of trace(qM)) like
PGS's, and stops after the sweep whose scaled improvement is below ``opt.noslip_tolerance``
or after ``opt.noslip_iterations`` sweeps. Its sweep count is added to
``solver_niter[island]``. Then qacc = qacc_smooth + M^-1 J' f, qfrc_constraint = J' f, and
efc_state is the dual state of the forces (MuJoCo's dualState: friction loss LINEARPOS /
LINEARNEG at the bounds, unilateral rows SATISFIED where f <= 0, elliptic contacts by cone
zone), also where the main solver was Newton or CG.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.constraint import (
    CONE,
    CONTACT_ELLIPTIC,
    CONTACT_PYRAMIDAL,
    LINEARNEG,
    LINEARPOS,
    QUADRATIC,
    SATISFIED,
    RowPlan,
    contact_mu,
)
from mjx_lite.math import where
from mjx_lite.solver import (
    _MINVAL,
    _REVERT,
    _contact_order,
    _islands,
    _niter_out,
    _plan,
    _qcqp,
    _safe_sqrt,
    dual_terms,
)
from mjx_lite.types import Data, Model

__all__ = ["noslip"]

_DIAG_MIN = 1e-10  # contact blocks: the diagonal of A (AR less R) clamped from below


def _dual_state(m: Model, p: RowPlan, d: Data, f: jax.Array) -> jax.Array:
    """efc_state of dual forces (MuJoCo's dualState): equality QUADRATIC; friction loss
    LINEARPOS at -frictionloss, LINEARNEG at +frictionloss; limits and pyramidal or
    frictionless contacts SATISFIED where f <= 0; elliptic contacts by the zone of
    (f0 / mu, f_i / friction_i)."""
    idx = np.arange(p.nefc)
    floss = d.efc_frictionloss
    is_fr = (idx >= p.ne) & (idx < p.ne + p.nf)
    fr = where(f <= -floss, LINEARPOS, where(f >= floss, LINEARNEG, QUADRATIC))
    st = where(is_fr, fr, where(idx >= p.ne + p.nf, where(f <= 0, SATISFIED, QUADRATIC),
                                QUADRATIC))
    if p.elliptic and p.nc:
        s0, w = p.ne + p.nf + p.nl, p.width
        fc = f[s0:].reshape(p.ncon, w)
        act = d.efc_active[s0:].reshape(p.ncon, w)[:, 1:]
        mu = contact_mu(m, d.contact)
        fric = jp.maximum(1e-5, d.contact.friction)[:, : w - 1]
        n = fc[:, 0] / mu
        t = _safe_sqrt(jp.sum(where(act, (fc[:, 1:] / fric) ** 2, 0.0), -1))
        zone = where(mu * n >= t, SATISFIED, where(n + mu * t <= 0, QUADRATIC, CONE))
        cone = (d.efc_type[s0:].reshape(p.ncon, w)[:, 0] == CONTACT_ELLIPTIC)[:, None]
        blk = where(cone, zone[:, None], st[s0:].reshape(p.ncon, w))
        st = st.at[s0:].set(blk.ravel())
    return where(d.efc_active, st, SATISFIED).astype(jp.int32)


def noslip(m: Model, d: Data, *, loop: str = "fixed") -> Data:
    """The noslip post-processor on a solved Data: efc_force, qacc, qfrc_constraint, efc_state,
    solver_niter (see the module docstring).

    Args:
      loop: "fixed" runs ``opt.noslip_iterations`` sweeps in ``lax.scan`` (islands past their
        tolerance frozen by a mask; reverse-mode differentiable); "early_exit" a while_loop
        that stops when every island has (forward only).
    """
    p = _plan(m, d)
    if p.nefc == 0 or m.opt.noslip_iterations <= 0:
        return d
    dtype = d.efc_force.dtype
    minv_jt, a, b = dual_terms(m, d)
    act = d.efc_active
    floss = d.efc_frictionloss
    isl = _islands(m, d)
    nisl = isl.scale.shape[0]
    row_island = jp.argmax(isl.efc, axis=1).astype(jp.int32)
    # islands without rows take no sweep (MuJoCo has no such island)
    empty = (act.astype(dtype) @ isl.efc) == 0
    fr_rows = np.arange(p.ne, p.ne + p.nf)
    s0, w = p.ne + p.nf + p.nl, p.width
    if p.nc:
        # contact slots in MuJoCo's contact order
        slots = jp.argsort(_contact_order(m, d, p)).astype(jp.int32)
        fric = jp.maximum(1e-5, d.contact.friction)[:, : max(w - 1, 1)]

    def scalar(carry, i):
        """One friction-loss row: its minimizer clipped to the box (MuJoCo keeps it even where
        the cost rises: no revert test)."""
        f, imp, done = carry
        res = a[i] @ f + b[i]
        ainv = 1.0 / jp.maximum(_MINVAL, a[i, i])
        fi = jp.clip(f[i] - res * ainv, -floss[i], floss[i])
        delta = fi - f[i]
        change = 0.5 * delta * delta / ainv + delta * res
        k = row_island[i]
        ok = act[i] & ~done[k]
        return (f.at[i].set(where(ok, fi, f[i])), imp.at[k].add(where(ok, -change, 0.0)),
                done), None

    def block(f, rows, new, res, ac, ok):
        """Accepts ``new`` on ``rows`` unless it raises the cost by more than 1e-10."""
        old = f[rows]
        delta = new - old
        change = 0.5 * delta @ ac @ delta + delta @ res
        keep = ok & (change <= _REVERT)
        return f.at[rows].set(where(keep, new, old)), where(keep, change, 0.0)

    def pyramid_pair(f, j):
        """Opposing edges j, j + 1: f_j + f_j+1 = 2 mid fixed, the split y minimized."""
        rows = j + jp.arange(2)
        res = a[rows] @ f + b[rows]
        ac = a[rows][:, rows]
        ac = ac.at[jp.arange(2), jp.arange(2)].set(jp.maximum(_DIAG_MIN, jp.diagonal(ac)))
        old = f[rows]
        bc = res - ac @ old
        mid = 0.5 * (old[0] + old[1])
        k1 = ac[0, 0] + ac[1, 1] - ac[0, 1] - ac[1, 0]
        k0 = mid * (ac[0, 0] - ac[1, 1]) + bc[0] - bc[1]
        y = jp.clip(-k0 / where(k1 < _MINVAL, 1.0, k1), -mid, mid)
        y = where(k1 < _MINVAL, 0.0, y)
        new = jp.stack([mid + y, mid - y])
        # the clipped ends exactly as MuJoCo writes them
        new = where(y <= -mid, jp.stack([jp.zeros_like(mid), 2 * mid]), new)
        new = where(y >= mid, jp.stack([2 * mid, jp.zeros_like(mid)]), new)
        ok = (d.efc_type[j] == CONTACT_PYRAMIDAL) & act[j] & act[j + 1]
        return block(f, rows, new, res, ac, ok)

    def cone_friction(f, c):
        """Elliptic contact slot c: its friction block given the normal force."""
        start = s0 + c * w
        rows = start + 1 + jp.arange(w - 1)
        mask = act[rows]
        m2 = mask[:, None] & mask[None, :]
        ac = where(m2, a[rows][:, rows], 0.0)
        ac = ac.at[jp.arange(w - 1), jp.arange(w - 1)].set(
            where(mask, jp.maximum(_DIAG_MIN, jp.diagonal(ac)), 0.0))
        res = where(mask, a[rows] @ f + b[rows], 0.0)
        old = where(mask, f[rows], 0.0)
        bc = res - ac @ old
        fn = f[start]
        mu = fric[c]
        v, on = _qcqp(ac, bc, mu, fn, mask)
        s = jp.sum(where(mask, v * v / mu**2, 0.0))
        shrink = _safe_sqrt(fn * fn / jp.maximum(_MINVAL, s))
        v = where(on, v * shrink, v)
        new = where(mask & (fn >= _MINVAL), v, 0.0)
        ok = (d.efc_type[start] == CONTACT_ELLIPTIC) & act[start]
        fn_, change = block(f, rows, new, res, ac, ok)
        return fn_, change

    def contact(carry, q):
        f, imp, done = carry
        c = slots[q]
        k = row_island[s0 + c * w]
        run = ~done[k]
        total = jp.zeros((), dtype)
        if p.elliptic:
            fn, change = cone_friction(f, c)
            f = where(run, fn, f)
            total = total + where(run, change, 0.0)
        else:
            for e in range(w // 2):
                fn, change = pyramid_pair(f, s0 + c * w + 2 * e)
                f = where(run, fn, f)
                total = total + where(run, change, 0.0)
        return (f, imp.at[k].add(-total), done), None

    def sweep(carry):
        f, done, it, niter = carry
        # the first sweep's improvement counts the regularizer's share it removes
        imp = where(it == 0, (0.5 * f * f * d.efc_R * act) @ isl.efc, 0.0)
        state = (f, imp, done)
        if fr_rows.size:
            state, _ = jax.lax.scan(scalar, state, jp.asarray(fr_rows, jp.int32))
        if p.nc and w > 1:
            state, _ = jax.lax.scan(contact, state, jp.arange(p.ncon, dtype=jp.int32))
        f, imp, _ = state
        conv = isl.scale * imp < m.opt.noslip_tolerance
        niter = niter + (~done).astype(jp.int32)
        return f, done | conv, it + 1, niter

    carry = (d.efc_force, empty, jp.zeros((), jp.int32), jp.zeros(nisl, jp.int32))
    if loop == "early_exit":
        carry = jax.lax.while_loop(
            lambda c: jp.any(~c[1]) & (c[2] < m.opt.noslip_iterations), sweep, carry)
    else:
        remat_sweep = jax.checkpoint(sweep, prevent_cse=False)  # as in the main solvers
        carry, _ = jax.lax.scan(lambda c, _: (remat_sweep(c), None), carry, None,
                                length=m.opt.noslip_iterations)
    f, niter = carry[0], carry[3]
    qfrc = d.efc_J.T @ f
    return d.replace(qacc=d.qacc_smooth + minv_jt @ f, qfrc_constraint=qfrc, efc_force=f,
                     efc_state=_dual_state(m, p, d, f),
                     solver_niter=d.solver_niter + _niter_out(niter))


"""Constraint solvers (Computation chapter, "Constraint solver": "Reduced primal problem",
"Dual problem", "Algorithms").

Newton and CG minimize the reduced primal cost over accelerations,
  cost(a) = 0.5 (a - a0)' M (a - a0) + s(J a - aref),
where s is the soft-constraint penalty of every efc row (quadratic, Huber for friction loss,
half-quadratic for limits and pyramidal contacts, the elliptic-cone shadow for elliptic
contacts). Its negative gradient in jar = J a - aref is efc_force.

Both run exactly ``opt.iterations`` iterations inside ``lax.scan``, so reverse-mode AD works
at any count; convergence (``tolerance``) freezes the iterate through a mask. The line search
is a ``while_loop`` that is never differentiated: its step takes the derivative of the 1-D
Newton point at the step (see ``_linesearch``).
``loop="early_exit"`` uses ``lax.while_loop`` instead (faster; with ``adjoint="implicit"``
differentiable too, as the implicit adjoint never differentiates the iterations). The implicit
adjoint differentiates the minimizer, so with it the forward returns the minimizer: islands the
configured iterations leave unconverged take Newton iterations until they converge.

The solution is characterised by ``residual(m, d, qacc) = 0`` (the primal gradient), and
``hessian(m, d, qacc)`` is its Jacobian: an implicit adjoint needs only these two (the
differentiated forward keeps the Cholesky factor of the last Newton iterate's Hessian, so the
adjoint does not build and factor it again).

PGS solves the dual problem with up to ``opt.iterations`` projected Gauss-Seidel sweeps,
MuJoCo 4.0's algorithm step for step: every sweep visits the active constraints in a
pseudo-random order (Fisher-Yates with PCG32, fixed seed), scalar rows take their exact
projected minimizer, elliptic contacts a ray update then a QCQP on their friction ellipse,
and sweeps are accelerated by Nesterov momentum with adaptive gradient restart. Iterates,
``solver_niter`` and forces match MuJoCo's to rounding, not only at convergence.

Islands (MuJoCo 4.0, on unless the ``island`` disable bit is set; see ``island.py``): every
solver treats each island as its own problem, with its own line search step, conjugate
direction, momentum, termination test and iteration count (``solver_niter[island]``); dofs in
no island keep qacc_smooth. The islands run side by side in one fixed-shape loop, a converged
island frozen by a mask. Termination tests are scaled by 1 / (the island's share of the trace
of the current qM), MuJoCo 4.0's scale (no longer stat.meaninertia); islands disabled, one
island holds every dof.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

from mjx_lite import island, linalg, math, smooth
from mjx_lite.constraint import (
    CONE,
    CONTACT_ELLIPTIC,
    LINEARNEG,
    LINEARPOS,
    QUADRATIC,
    SATISFIED,
    RowPlan,
    contact_mu,
)
from mjx_lite.dataclasses import PyTreeNode
from mjx_lite.math import where
from mjx_lite.types import NISLAND, Data, DisableBit, Model, SolverType

__all__ = ["solve", "residual", "hessian", "inverse_constraint", "Context",
           "constraint_cost"]


class Context(PyTreeNode):
    """Primal solver state (one iterate).

    Fields: qacc (nv,), Ma (nv,) = M qacc, jar (nefc,) = J qacc - aref, cost (K,) per island,
    grad (nv,), Mgrad (nv,) preconditioned gradient, search (nv,), done (K,) bool, niter (K,)
    int; K island slots (one when islands are disabled); factor (nv, nv) the Cholesky factor
    of the Hessian at qacc, kept only where the implicit adjoint asks for it (else None).
    """

    qacc: jax.Array
    Ma: jax.Array
    jar: jax.Array
    cost: jax.Array
    grad: jax.Array
    Mgrad: jax.Array
    search: jax.Array
    done: jax.Array
    niter: jax.Array
    factor: jax.Array | None = None


class _Cone(PyTreeNode):
    """Per contact slot (elliptic cones): mu (ncon,), friction (ncon, width - 1), D0 (ncon,)."""

    mu: jax.Array
    friction: jax.Array
    d0: jax.Array


def _plan(m: Model, d: Data) -> RowPlan:
    con = getattr(d, "contact", None)
    ncon = 0 if con is None else int(con.dist.shape[0])
    p = RowPlan(m, ncon)
    if p.nefc == d.efc_J.shape[0]:
        return p
    if _compacts(m, p) and p.live.size == d.efc_J.shape[0]:
        return p.compacted()  # a Data of the live rows only (``solve``)
    raise ValueError(f"efc budget {d.efc_J.shape[0]} does not match the model's {p.nefc}; "
                     "run constraint.make_constraint first")


# the Data fields with one entry per efc row
_EFC_FIELDS = ("efc_island", "efc_type", "efc_id", "efc_J", "efc_pos", "efc_margin",
               "efc_frictionloss", "efc_diagA", "efc_KBIP", "efc_D", "efc_R", "efc_vel",
               "efc_aref", "efc_force", "efc_state", "efc_active")


def _compacts(m: Model, p: RowPlan) -> bool:
    """Whether ``solve`` runs on the live rows only: the primal solvers with pyramidal cones
    (PGS, elliptic cones and noslip group contact rows by slot), where rows never active
    exist (``RowPlan.live``)."""
    return (m.opt.solver != SolverType.PGS and not p.elliptic and m.opt.noslip_iterations <= 0
            and not p.is_compacted and p.live.size < p.nefc)


def _cone(m: Model, d: Data, p: RowPlan) -> _Cone | None:
    if not (p.elliptic and p.nc):
        return None
    con = d.contact
    w = p.width
    fr = jp.maximum(1e-5, con.friction)[:, : w - 1]
    d0 = d.efc_D[p.ne + p.nf + p.nl:].reshape(p.ncon, w)[:, 0]
    return _Cone(mu=contact_mu(m, con), friction=fr, d0=d0)


def _safe_sqrt(x):
    pos = x > 0
    return where(pos, jp.sqrt(where(pos, x, 1.0)), 0.0)


def _row_update(m: Model, d: Data, p: RowPlan, cone: _Cone | None, jar: jax.Array):
    """efc_force, efc_state and the penalty s(jar) (mj_constraintUpdate).

    Returns (force, state, per-row cost (an elliptic contact's on its first row), quadratic-row
    mask, cone slots in the middle zone, cone data for the Hessian).
    """
    dd, r, floss = d.efc_D, d.efc_R, d.efc_frictionloss
    ne, nf = p.ne, p.nf
    idx = np.arange(p.nefc)
    is_eq = idx < ne
    is_fr = (idx >= ne) & (idx < ne + nf)
    is_cone = (d.efc_type == CONTACT_ELLIPTIC) if cone is not None else jp.zeros(p.nefc, bool)
    # friction loss: Huber with linear zones beyond |jar| = R floss
    lin_neg = is_fr & (jar <= -r * floss) & (floss > 0)
    lin_pos = is_fr & (jar >= r * floss) & (floss > 0)
    # unilateral rows (limits, frictionless and pyramidal contacts): quadratic when jar < 0
    uni = ~is_eq & ~is_fr & ~is_cone
    quad = is_eq | (is_fr & ~lin_neg & ~lin_pos) | (uni & (jar < 0))
    # row zones saved by forward's checkpoint policy rather than recomputed from jar in the
    # backward's fused kernels, which would redo them for each of the nv columns of J's
    # cotangent (see constraint.make_constraint)
    quad = checkpoint_name(quad, "efc_quad")
    lin_neg = checkpoint_name(lin_neg, "efc_linneg")
    lin_pos = checkpoint_name(lin_pos, "efc_linpos")
    force = where(quad, -dd * jar, 0.0)
    force = where(lin_neg, floss, where(lin_pos, -floss, force))
    cost_rows = where(quad, 0.5 * dd * jar * jar, 0.0)
    cost_rows += where(lin_neg, -0.5 * r * floss * floss - floss * jar, 0.0)
    cost_rows += where(lin_pos, -0.5 * r * floss * floss + floss * jar, 0.0)
    state = where(quad, QUADRATIC, SATISFIED)
    state = where(lin_neg, LINEARNEG, where(lin_pos, LINEARPOS, state))
    middle = None
    hcone = None
    if cone is not None:
        s0 = ne + nf + p.nl
        w = p.width
        jc = jar[s0:].reshape(p.ncon, w)
        conerow = is_cone[s0:].reshape(p.ncon, w)[:, 0]
        mu, fr = cone.mu, cone.friction
        u0 = jc[:, 0] * mu
        ut = jc[:, 1:] * fr
        t = _safe_sqrt(jp.sum(ut * ut, -1))
        top = (u0 >= mu * t) | ((t <= 0) & (u0 >= 0))
        bottom = ~top & ((mu * u0 + t <= 0) | ((t <= 0) & (u0 < 0)))
        middle = conerow & ~top & ~bottom
        bottom = conerow & bottom
        dm = cone.d0 / (mu * mu * (1 + mu * mu))
        nmt = u0 - mu * t
        f0 = -dm * nmt * mu
        tsafe = where(middle, t, 1.0)
        ft = -(f0 / tsafe)[:, None] * ut * fr
        dc = dd[s0:].reshape(p.ncon, w)
        fmid = jp.concatenate([f0[:, None], ft], 1)
        fbot = -dc * jc
        fc = where(middle[:, None], fmid, where(bottom[:, None], fbot, 0.0))
        cc = where(middle, 0.5 * dm * nmt * nmt,
                      where(bottom, 0.5 * jp.sum(dc * jc * jc, -1), 0.0))
        sc = where(middle, CONE, where(bottom, QUADRATIC, SATISFIED))
        sel = conerow[:, None]
        force = force.at[s0:].set(where(sel, fc, force[s0:].reshape(p.ncon, w)).ravel())
        crow = cost_rows[s0:].reshape(p.ncon, w)
        crow = where(sel, jp.zeros_like(crow).at[:, 0].set(cc), crow)
        cost_rows = cost_rows.at[s0:].set(crow.ravel())
        state = state.at[s0:].set(
            where(sel, sc[:, None], state[s0:].reshape(p.ncon, w)).ravel())
        quad = quad.at[s0:].set(where(sel, bottom[:, None],
                                         quad[s0:].reshape(p.ncon, w)).ravel())
        hcone = (u0, ut, t, dm)
    state = where(d.efc_active, state, SATISFIED)
    return force, state, cost_rows, quad, middle, hcone


def _cone_hessian(cone: _Cone, middle, hcone):
    """(ncon, w, w) Hessian of the middle-zone cone penalty in jar coordinates."""
    u0, ut, t, dm = hcone
    mu, fr = cone.mu, cone.friction
    w = ut.shape[1] + 1
    tsafe = where(middle, t, 1.0)
    h = jp.zeros((ut.shape[0], w, w), ut.dtype)
    h = h.at[:, 0, 0].set(1.0)
    h = h.at[:, 0, 1:].set(-(mu / tsafe)[:, None] * ut)
    h = h.at[:, 1:, 0].set(-(mu / tsafe)[:, None] * ut)
    blk = (mu * u0 / tsafe**3)[:, None, None] * ut[:, :, None] * ut[:, None, :]
    blk = blk + ((mu * mu - mu * u0 / tsafe)[:, None, None] * jp.eye(w - 1, dtype=ut.dtype))
    h = h.at[:, 1:, 1:].set(blk)
    # back from U = diag(mu, friction) jar coordinates, scaled by the middle-zone weight
    scl = jp.concatenate([mu[:, None], fr], 1)
    h = h * scl[:, :, None] * scl[:, None, :] * dm[:, None, None]
    return where(middle[:, None, None], h, 0.0)


def _hessian(m: Model, d: Data, p: RowPlan, cone, quad, middle, hcone):
    jq = d.efc_J * where(quad, d.efc_D, 0.0)[:, None]
    h = d.qM + d.efc_J.T @ jq
    if cone is not None:
        s0 = p.ne + p.nf + p.nl
        jc = d.efc_J[s0:].reshape(p.ncon, p.width, m.nv)
        hc = _cone_hessian(cone, middle, hcone)
        h = h + jp.einsum("niv,nij,njw->vw", jc, hc, jc)
    return h


_MINVAL = 1e-15  # mjMINVAL


def constraint_cost(m: Model, d: Data, qacc: jax.Array) -> jax.Array:
    """The reduced primal cost at qacc (Computation, "Reduced primal problem")."""
    p = _plan(m, d)
    jar = d.efc_J @ qacc - d.efc_aref
    _, _, s, _, _, _ = _row_update(m, d, p, _cone(m, d, p), jar)
    ma = d.qM @ qacc
    return 0.5 * jp.dot(qacc - d.qacc_smooth, ma - d.qfrc_smooth) + jp.sum(s)


def residual(m: Model, d: Data, qacc: jax.Array) -> jax.Array:
    """Primal gradient M qacc - qfrc_smooth - J' efc_force; zero at the solution."""
    p = _plan(m, d)
    jar = d.efc_J @ qacc - d.efc_aref
    force = _row_update(m, d, p, _cone(m, d, p), jar)[0]
    return d.qM @ qacc - d.qfrc_smooth - d.efc_J.T @ force


def hessian(m: Model, d: Data, qacc: jax.Array) -> jax.Array:
    """(nv, nv) Hessian of the primal cost at qacc: M + J' D_active J + cone blocks."""
    p = _plan(m, d)
    cone = _cone(m, d, p)
    jar = d.efc_J @ qacc - d.efc_aref
    _, _, _, quad, middle, hcone = _row_update(m, d, p, cone, jar)
    return _hessian(m, d, p, cone, quad, middle, hcone)


# ------------------------------------------------------------------------------------------
# primal solvers


class _Islands(PyTreeNode):
    """Island membership for the primal solvers: dof (nv, K) and efc (nefc, K) one-hot (rows
    of zeros outside every island), scale (K,) = 1 / the island's share of trace(qM) (MuJoCo
    4.0's termination scale), empty (K,) island slots without dofs."""

    dof: jax.Array
    efc: jax.Array
    scale: jax.Array
    empty: jax.Array


def _islands(m: Model, d: Data) -> _Islands:
    dof, efc = island.membership(m, d)
    inertia = jp.diagonal(d.qM) @ dof
    return _Islands(dof=dof, efc=efc, scale=1.0 / jp.maximum(_MINVAL, inertia),
                    empty=jp.sum(dof, 0) == 0)


def _evaluate(m, d, p, cone, isl: _Islands, qacc, ma, jar, newton: bool, need_mgrad=None,
              factor: bool = False):
    """Per-island cost (K,), gradient, preconditioned gradient at qacc and (Newton with
    ``factor``, else None) the Hessian's Cholesky factor.

    ``need_mgrad`` (Newton only): a function of the gradient saying (traced bool) whether
    another iteration will use the preconditioned gradient; where none will, the Hessian is
    neither built nor factored (a ``cond``: a real skip unbatched, a select under vmap) and
    mgrad is zero. With the iterations=1 of RL settings that halves the factorizations:
    mujoco-mjx's humanoid, batch 1, one step 578 -> 406 us on this CPU (two other processes
    running)."""
    force, _, s, quad, middle, hcone = _row_update(m, d, p, cone, jar)
    gauss = 0.5 * (qacc - d.qacc_smooth) * (ma - d.qfrc_smooth)
    cost = gauss @ isl.dof + s @ isl.efc
    grad = ma - d.qfrc_smooth - d.efc_J.T @ force
    if newton and factor:
        low = linalg.cholesky(_hessian(m, d, p, cone, quad, middle, hcone))
        return cost, grad, linalg.cho_solve(low, grad), low
    if newton:
        # islands are blocks of H (rows couple only trees of one island): one solve serves all
        def precondition(grad):
            return linalg.spd_solve(_hessian(m, d, p, cone, quad, middle, hcone), grad)

        if need_mgrad is None:
            mgrad = precondition(grad)
        elif m.opt.iterations <= 1:
            # no iteration ever follows: skipped at trace time, also under vmap
            mgrad = jp.zeros_like(grad)
        else:
            mgrad = jax.lax.cond(need_mgrad(grad), precondition, jp.zeros_like, grad)
    else:
        mgrad = smooth.solve_m(m, d, grad)
    return cost, grad, mgrad, None


def _linesearch(m, d, p, cone, isl: _Islands, ctx: Context, differentiated: bool,
                polish: bool = False):
    """(alpha, v = J search, mv = M search): MuJoCo 4.0's line search (``_search``).

    The search itself is a ``while_loop`` and is never differentiated: under reverse mode it
    runs on constants, and ``alpha`` takes the derivative of the 1-D Newton point at the step
    it returns, alpha - slope(alpha) / curvature(alpha) (the correction is zero in value). The
    cost is piecewise quadratic along the search, so within the piece that holds alpha that
    point does not depend on where it is taken from: whenever the search ends on a Newton
    point of its final piece, as every converged search does, this is exactly the derivative
    of the unrolled search, without differentiating its ``ls_iterations + 3`` steps (which a
    fixed-length loop would run to the end under vmap, where a ``cond`` becomes a select).
    A search cut off by its budget or ending on a bracket midpoint gets the derivative of the
    minimizer along the search direction instead; one that takes no step, none."""
    srch = ctx.search
    v = d.efc_J @ srch
    mv = d.qM @ srch
    if not differentiated:
        return _search(m, d, p, cone, isl, ctx, v, mv, polish), v, mv
    sg = jax.lax.stop_gradient
    args = (m, d, cone, isl, ctx, v, mv)
    alpha = _search(sg(m), sg(d), p, sg(cone), sg(isl), sg(ctx), sg(v), sg(mv), polish)

    def correction(alpha, args):
        """The Newton point's offset from alpha, zero in value where the search converged."""
        m, d, cone, isl, ctx, v, mv = args
        _, _, slope, curvature = _point(m, d, p, cone, isl, ctx, v, mv)(alpha)
        snorm = _safe_sqrt((ctx.search * ctx.search) @ isl.dof)
        ok = (snorm >= _MINVAL) & (alpha != 0) & (curvature > _MINVAL)
        return where(ok, -slope / where(ok, curvature, 1.0), 0.0)

    # a custom_jvp so that the forward pass does not evaluate the correction at all
    @jax.custom_jvp
    def step_length(alpha, args):
        return alpha

    @step_length.defjvp
    def step_length_jvp(primals, tangents):
        alpha, args = primals
        _, dcorrection = jax.jvp(lambda a: correction(alpha, a), (args,), (tangents[1],))
        return alpha, dcorrection

    return step_length(alpha, args), v, mv


def _point(m, d, p, cone, isl: _Islands, ctx: Context, v, mv):
    """point(alpha) = (alpha, cost, slope, curvature) per island along ctx.search, the
    curvature kept positive as MuJoCo does."""
    g1 = (ctx.search * (ctx.Ma - d.qfrc_smooth)) @ isl.dof
    g2 = (ctx.search * mv) @ isl.dof

    def cost1(alpha):
        s = _row_update(m, d, p, cone, ctx.jar + (isl.efc @ alpha) * v)[2] @ isl.efc
        return alpha * g1 + 0.5 * alpha * alpha * g2 + s

    def point(alpha):
        ones = jp.ones_like(alpha)
        first = lambda a: jax.jvp(cost1, (a,), (ones,))  # noqa: E731
        (cost, d1), (_, d2) = jax.jvp(first, (alpha,), (ones,))
        return alpha, cost, d1, where(d2 > 0, d2, _MINVAL)

    return point


# ulps within which the search takes two of its values (slopes, costs) for rounding of
# each other: see _search's ``polish`` and its out-of-budget end
_ROUNDING_ULPS = 16


def _search(m, d, p, cone, isl: _Islands, ctx: Context, v, mv, polish: bool = False):
    """MuJoCo 4.0's line search on the piecewise-quadratic cost, one step length per island
    (islands share no row, so each island's cost depends on its own step only and one
    forward-mode pass with a unit tangent gives every island's derivatives).

    As MuJoCo runs it, counting cost evaluations against ``ls_iterations``: a Newton step
    from 0; then Newton steps in the same direction until the slope changes sign
    (one-sided); then bracketed steps, each evaluating the bracket's midpoint and, for a
    bracket end that one of the three candidates (the two ends' Newton points and the
    midpoint) improves, the Newton point from its new end. A
    point whose slope is below ``tolerance * ls_tolerance`` (scaled) ends the search; so
    does the budget, with the last Newton point (one-sided) or the cheaper bracket end (of
    two whose costs agree to rounding, the one with the smaller slope).
    Here every scan step performs one evaluation, its phase saying which: 0 one-sided, 1
    midpoint, 2 and 3 the new Newton points of the low and high ends; 4 done. With a
    small ``ls_iterations`` (the mujoco-mjx test models use 4) where the search stops
    decides the iterate, so the schedule, not only the minimizer, must be MuJoCo's.

    A step whose searches have all ended changes nothing, so the ``while_loop`` stops there
    (at most ``ls_iterations + 3`` steps; usually two or three run).

    ``polish`` (the implicit adjoint's forward, whose contract is the minimizer, not MuJoCo's
    iterates): a slope within rounding of the first one, ``_ROUNDING_ULPS`` ulps of it,
    passes the slope test too. In float32 the scaled tolerance (1e-10 by default) is below
    what a slope can resolve, and the search went on bracketing rounding noise until
    the bracket or budget ran out: gymnasium humanoid, 11 search steps a stage (float64:
    the floor is ~1e-15 of the first slope, below the tolerance as a rule)."""
    srch = ctx.search
    point = _point(m, d, p, cone, isl, ctx, v, mv)

    def newton(pt):
        return pt[0] - pt[2] / pt[3]

    def pick(c, a, b):
        return tuple(where(c, x, y) for x, y in zip(a, b))

    k = isl.scale.shape[0]
    dtype = ctx.qacc.dtype
    snorm = _safe_sqrt((srch * srch) @ isl.dof)
    gtol = m.opt.tolerance * m.opt.ls_tolerance * snorm / isl.scale
    budget = m.opt.ls_iterations
    one_sided, midpoint, next1, next2, done = 0, 1, 2, 3, 4
    rounding = _ROUNDING_ULPS * jp.finfo(dtype).eps  # relative
    p0 = point(jp.zeros(k, dtype))
    if polish:
        gtol = jp.maximum(gtol, rounding * jp.abs(p0[2]))
    # MuJoCo 4.0 keeps this first Newton point even where it costs more than 0 (measured: the
    # public 3.x source falls back to 0 there, and 4.0's step and neval differ from that)
    p1 = point(newton(p0))
    direction = where(p1[2] < 0, 1.0, -1.0)
    start_done = (jp.abs(p1[2]) < gtol) | (snorm < _MINVAL)
    phase = where(start_done, done, one_sided).astype(jp.int32)
    st = dict(p1=p1, p2=p1, p1n=p1, p2n=p1, phase=phase,
              alpha=where(snorm < _MINVAL, 0.0, p1[0]), p2set=jp.zeros(k, bool),
              pending2=jp.zeros(k, bool), lsiter=jp.full(k, 2, jp.int32))

    def update(end, cands):
        """updateBracket: the candidate with the smallest same-sign slope replaces the end."""
        moved = jp.zeros(k, bool)
        for c in cands:
            better = (((end[2] < 0) & (c[2] < 0) & (end[2] < c[2]))
                      | ((end[2] > 0) & (c[2] > 0) & (end[2] > c[2])))
            end = pick(better, c, end)
            moved = moved | better
        return end, moved

    def body(st):
        ph, p1, p2, n = st["phase"], st["p1"], st["p2"], st["lsiter"]
        at = where(ph == midpoint, 0.5 * (p1[0] + p2[0]),
                      where(ph == next2, newton(p2), newton(p1)))
        new = point(at)
        outs = {}

        # one-sided search: Newton steps from p1 while its slope points the same way
        going = (p1[2] * direction <= -gtol) & (n < budget)
        give_up = (n >= budget) | ~st["p2set"]  # the search ends at p1 without a bracket
        outs[one_sided] = dict(
            p1=pick(going, new, p1), p2=pick(going, p1, p2), p2set=st["p2set"] | going,
            p1n=pick(going, st["p1n"], new), p2n=pick(going, st["p2n"], p1),
            phase=where(going, where(jp.abs(new[2]) < gtol, done, one_sided),
                           where(give_up, done, midpoint)),
            alpha=where(going, new[0], p1[0]),
            lsiter=where(going | ~give_up, n + 1, n))

        # bracketed search: the midpoint, convergence among the candidates, bracket updates
        cands = (st["p1n"], st["p2n"], new)
        best, found = cands[0], jp.abs(cands[0][2]) < gtol
        for c in cands[1:]:
            ok = jp.abs(c[2]) < gtol
            best = pick(ok & (~found | (c[1] < best[1])), c, best)
            found = found | ok
        q1, moved1 = update(p1, cands)
        q2, moved2 = update(p2, cands)
        out_of_budget = n >= budget
        # out of budget: the cheaper bracket end if it improves on 0, else no step. Where
        # the two ends' costs agree to rounding, their order is noise (the ends differ in
        # cost by the square of their distance from the minimizer, in slope by the distance
        # itself): the end with the smaller slope is the one nearer the minimizer
        tie = jp.abs(p1[1] - p2[1]) <= rounding * jp.maximum(jp.abs(p1[1]), jp.abs(p2[1]))
        first = where(tie, jp.abs(p1[2]) <= jp.abs(p2[2]), p1[1] <= p2[1])
        end1 = first & (p1[1] < p0[1])
        end2 = ~first & (p2[1] < p0[1])
        final = where(end1, p1[0], where(end2, p2[0], 0.0))
        outs[midpoint] = dict(
            p1=pick(out_of_budget | found, p1, q1), p2=pick(out_of_budget | found, p2, q2),
            pending2=moved1 & moved2,
            phase=where(out_of_budget | found, done, where(
                moved1, next1, where(moved2, next2, done))),
            alpha=where(out_of_budget, final, where(found, best[0], new[0])),
            lsiter=where(out_of_budget, n, n + 1))
        outs[next1] = dict(p1n=new, lsiter=n + 1,
                           phase=where(st["pending2"], next2, midpoint))
        outs[next2] = dict(p2n=new, lsiter=n + 1, phase=jp.full(k, midpoint, jp.int32))

        merged = dict(st)
        for phase_id, out in outs.items():
            sel = ph == phase_id
            for key, val in out.items():
                merged[key] = jax.tree_util.tree_map(
                    lambda a, b, sel=sel: where(sel, a, b), val, merged[key])
        return merged

    # every step evaluates one point; the searches themselves stop MuJoCo's way
    steps = max(1, budget) + 3
    pack, unpack = _packing(st, dtype)
    searching = lambda s: jp.any(unpack(s)["phase"] != done)  # noqa: E731
    st = jax.lax.while_loop(lambda c: (c[0] < steps) & searching(c[1]),
                            lambda c: (c[0] + 1, pack(body(unpack(c[1])))), (0, pack(st)))[1]
    return unpack(st)["alpha"]


def _packing(state, dtype):
    """(pack, unpack) between a pytree of (k,) arrays (float, int, bool) and one (n, k) array
    of ``dtype``: a loop carrying the search's 21 small values separately updates each in a
    kernel of its own and copies each first (XLA's copies protect the values the other
    kernels still read): 52 kernels a search step on CPU at batch 1 (gymnasium ant), 36 with
    one carried array. Integers up to 2^24 and booleans are exact in either float type."""
    leaves, tree = jax.tree_util.tree_flatten(state)
    kinds = [leaf.dtype for leaf in leaves]

    def pack(st):
        return jp.stack([x.astype(dtype) for x in jax.tree_util.tree_leaves(st)])

    def unpack(arr):
        return jax.tree_util.tree_unflatten(
            tree, [(arr[i] != 0) if kind == jp.bool_ else arr[i].astype(kind)
                   for i, kind in enumerate(kinds)])

    return pack, unpack


def _cost_change(m, d, p, cone, isl: _Islands, ctx: Context, alpha, v, mv, jar):
    """Per-island cost change of the step alpha (K,), without cancellation: the cost holds
    constants as large as 1e12 (a contact 1.3 m deep in mujoco-mjx's sensor.xml) whose
    rounding, 2e-8 after MuJoCo's scaling, would swamp an improvement that MuJoCo 4.0
    measures to ~1e-3 of itself (measured there: 9.04e-9 at iteration 30 of CG, where a
    difference of total costs gives 0 and stops the solve). Rows that keep their zone take
    their change in closed form; rows that change zone (and elliptic cones) the difference."""
    step = isl.efc @ alpha
    dx = step * v
    x0 = ctx.jar
    a_dof = isl.dof @ alpha
    gauss = (a_dof * ctx.search * (ctx.Ma - d.qfrc_smooth + 0.5 * a_dof * mv)) @ isl.dof
    dd, r, floss = d.efc_D, d.efc_R, d.efc_frictionloss
    idx = np.arange(p.nefc)
    is_eq = idx < p.ne
    is_fr = (idx >= p.ne) & (idx < p.ne + p.nf)
    quad_change = dd * dx * (x0 + 0.5 * dx)
    bound = r * floss

    def zone(x):  # friction loss: -1, 0, 1 for linear negative, quadratic, linear positive
        lin = is_fr & (floss > 0)
        return where(lin & (x <= -bound), -1, where(lin & (x >= bound), 1, 0))

    def scalar_cost(x, z):
        quad = is_eq | (is_fr & (z == 0)) | (~is_eq & ~is_fr & (x < 0))
        return where(quad, 0.5 * dd * x * x, z * floss * x - jp.abs(z) * 0.5 * r * floss**2)

    z0, z1 = zone(x0), zone(jar)
    same = where(is_eq, True, where(is_fr, z0 == z1, (x0 < 0) == (jar < 0)))
    kept = where(is_fr & (z0 != 0), z0 * floss * dx,
                    where(is_eq | is_fr | (x0 < 0), quad_change, 0.0))
    rows = where(same, kept, scalar_cost(jar, z1) - scalar_cost(x0, z0))
    if cone is not None:
        is_cone = d.efc_type == CONTACT_ELLIPTIC
        direct = _row_update(m, d, p, cone, jar)[2] - _row_update(m, d, p, cone, x0)[2]
        rows = where(is_cone, direct, rows)
    rows = where(d.efc_active, rows, 0.0)
    return gauss + rows @ isl.efc


def _primal_step(m, d, p, cone, isl: _Islands, newton: bool, differentiated: bool,
                 ctx: Context, polish: bool = False) -> Context:
    alpha, v, mv = _linesearch(m, d, p, cone, isl, ctx, differentiated, polish)
    a_dof = isl.dof @ alpha
    dq, dma, djar = a_dof * ctx.search, a_dof * mv, (isl.efc @ alpha) * v
    # Once an island's step is rounding noise (the solve has converged but tolerance 0 keeps
    # it going), its line search is a ratio of two vanishing numbers whose derivative is
    # noise times a large factor: unrolled through 50 Newton iterations on gymnasium hopper
    # that put 2.9e-4 into the gradient. Such a step keeps its value and passes no
    # derivative, so the unrolled adjoint ends where the iterate stopped changing.
    eps = 64 * jp.finfo(dq.dtype).eps
    moved = jp.max(jp.abs(dq)[:, None] * isl.dof, axis=0)
    size = jp.max(jp.abs(ctx.qacc)[:, None] * isl.dof, axis=0)
    noise = moved <= eps * jp.maximum(size, 1.0)
    noise_dof = (isl.dof @ noise.astype(dq.dtype)) > 0.5
    noise_efc = (isl.efc @ noise.astype(dq.dtype)) > 0.5
    sg = jax.lax.stop_gradient
    qacc = ctx.qacc + where(noise_dof, sg(dq), dq)
    ma = ctx.Ma + where(noise_dof, sg(dma), dma)
    jar = ctx.jar + where(noise_efc, sg(djar), djar)
    improvement = -isl.scale * _cost_change(m, d, p, cone, isl, ctx, alpha, v, mv, jar)
    tol = m.opt.tolerance
    stalled = alpha == 0

    def stops(grad):  # improvement or gradient ends the island's solve
        return (improvement < tol) | (isl.scale * _safe_sqrt((grad * grad) @ isl.dof) < tol)

    def next_iteration(grad):
        # the Hessian at the new iterate serves only a next iteration (and the Newton
        # decrement test below): none follows when every island has stopped, or the
        # iteration budget is spent
        running = ~(ctx.done | stalled | stops(grad))
        return jp.any(running) & (jp.max(ctx.niter) + 1 < m.opt.iterations)

    # the implicit adjoint's forward keeps the factor at every iterate, the final one its solve's
    keep_factor = ctx.factor is not None
    cost, grad, mgrad, low = _evaluate(m, d, p, cone, isl, qacc, ma, jar, newton,
                                       None if keep_factor else next_iteration, keep_factor)
    if newton:
        search = -mgrad
    else:
        # Hager-Zhang conjugate direction (MuJoCo 4.0 CG), clipped at 0 to restart
        y, my = grad - ctx.grad, mgrad - ctx.Mgrad
        dy = (ctx.search * y) @ isl.dof
        dy_ok = jp.abs(dy) > 1e-30
        dys = where(dy_ok, dy, 1.0)
        beta = ((my * grad) @ isl.dof
                - 2 * ((y * my) @ isl.dof) * ((ctx.search * grad) @ isl.dof) / dys) / dys
        beta = where(dy_ok, jp.maximum(beta, 0.0), 0.0)
        search = -mgrad + (isl.dof @ beta) * ctx.search
    done = stops(grad)
    if newton:
        # Newton decrement 0.5 g' H^-1 g: the predicted improvement of the next iteration
        # (where mgrad was skipped no iteration follows and done no longer matters)
        done = done | (isl.scale * 0.5 * ((grad * mgrad) @ isl.dof) < tol)
    # a line search that finds no step ends the island's solve without counting an iteration
    new = Context(qacc=qacc, Ma=ma, jar=jar, cost=cost, grad=grad, Mgrad=mgrad,
                  search=search, done=done | stalled, niter=ctx.niter + 1, factor=low)
    # islands that have converged keep their iterate; dofs and rows in no island never move
    frozen = ctx.done | stalled
    running = (~frozen).astype(isl.dof.dtype)
    keep_dof = (isl.dof @ running) < 0.5
    keep_efc = (isl.efc @ running) < 0.5
    keep = Context(qacc=keep_dof, Ma=keep_dof, jar=keep_efc, cost=frozen, grad=keep_dof,
                   Mgrad=keep_dof, search=keep_dof, done=ctx.done, niter=frozen,
                   # H is block diagonal by island, so is its Cholesky factor: rows keep too
                   factor=None if low is None else keep_dof[:, None])
    return jax.tree_util.tree_map(lambda k, o, n: where(k, o, n), keep, ctx, new)


def _init(m: Model, d: Data, p: RowPlan, cone, isl: _Islands, newton: bool,
          start: jax.Array | None = None, factor: bool = False) -> Context:
    """The first iterate: the warmstart or qacc_smooth, whichever costs less, or ``start``."""
    def at(qacc):
        ma = d.qM @ qacc
        jar = d.efc_J @ qacc - d.efc_aref
        return qacc, ma, jar

    qacc = d.qacc_smooth if start is None else start
    if start is None and not m.opt.disableflags & DisableBit.WARMSTART:
        # start from the warmstart unless the unconstrained acceleration costs less (compared
        # over the whole model, before islands)
        qw, maw, jarw = at(d.qacc_warmstart)
        cw = (0.5 * jp.dot(qw - d.qacc_smooth, maw - d.qfrc_smooth)
              + jp.sum(_row_update(m, d, p, cone, jarw)[2]))
        cs = jp.sum(_row_update(m, d, p, cone, d.efc_J @ d.qacc_smooth - d.efc_aref)[2])
        qacc = where(cw < cs, qw, d.qacc_smooth)
    if island.islands_enabled(m):
        # dofs in no island are unconstrained: qacc_smooth
        qacc = where(jp.sum(isl.dof, 1) > 0, qacc, d.qacc_smooth)
    qacc, ma, jar = at(qacc)
    cost, grad, mgrad, low = _evaluate(m, d, p, cone, isl, qacc, ma, jar, newton,
                                       factor=factor)
    # duality-gap certificate (MuJoCo 4.0): 0.5 g' M^-1 g bounds the suboptimality
    mg = mgrad if not newton else smooth.solve_m(m, d, grad)
    cert = isl.scale * 0.5 * ((grad * mg) @ isl.dof) < m.opt.tolerance
    if newton:
        cert = cert & (isl.scale * _safe_sqrt((grad * grad) @ isl.dof) < m.opt.tolerance)
    k = isl.scale.shape[0]
    return Context(qacc=qacc, Ma=ma, jar=jar, cost=cost, grad=grad, Mgrad=mgrad,
                   search=-mgrad, done=cert | isl.empty | (p.nefc == 0),
                   niter=jp.zeros(k, jp.int32), factor=low)


def _solve_primal(m: Model, d: Data, p: RowPlan, newton: bool, loop: str, *,
                  differentiated: bool, start: jax.Array | None = None,
                  done: jax.Array | None = None, factor: bool = False,
                  polish: bool = False) -> Context:
    """``differentiated``: reverse mode runs through the iterations (the unrolled adjoint
    with the fixed loop), so every loop inside must be of fixed length. ``start``: the first
    iterate (default: ``_init``'s choice); ``done``: islands already solved, which keep it.
    ``factor`` (Newton): keep the Hessian's Cholesky factor at the returned iterate.
    ``polish``: the line search's stop of the implicit adjoint's forward (``_search``)."""
    cone = _cone(m, d, p)
    isl = _islands(m, d)
    ctx = _init(m, d, p, cone, isl, newton, start, factor)
    if done is not None:
        ctx = ctx.replace(done=ctx.done | done)
    differentiated = differentiated and loop == "fixed"
    step = lambda c: _primal_step(  # noqa: E731
        m, d, p, cone, isl, newton, differentiated, c, polish)
    if loop == "early_exit":
        if m.opt.iterations == 1:
            # one iteration, or none where every island is done: the step keeps a done
            # island's iterate, so running it is the loop without the loop's overhead
            return step(ctx)
        # islands iterate in lockstep: a running island has done max(niter) iterations
        cond = lambda c: jp.any(~c.done) & (jp.max(c.niter) < m.opt.iterations)  # noqa: E731
        return jax.lax.while_loop(cond, step, ctx)
    # remat per iteration: reverse mode keeps only the carry of each iteration, not the
    # line search's internals (ant, 100 steps, 100 iterations: 335 GB without)
    step = jax.checkpoint(step, prevent_cse=False)
    ctx, _ = jax.lax.scan(lambda c, _: (step(c), None), ctx, None, length=m.opt.iterations)
    return ctx


# ------------------------------------------------------------------------------------------
# dual solver


# MuJoCo 4.0 visits the constraints of every sweep in a fresh pseudo-random order: a
# Fisher-Yates pass over the active constraints (a scalar row, or a whole elliptic contact),
# driven by PCG32 (XSH-RR output, LCG multiplier below, increment 1) seeded with state 1 at
# every solve, the permutation carried over from sweep to sweep. The draws depend on the
# number of active constraints, a traced quantity, so the generator runs in JAX; its 64-bit
# state is kept as two uint32 halves so that it works without jax_enable_x64.
_PCG_MULT_HI, _PCG_MULT_LO = 0x5851F42D, 0x4C957F2D
_REVERT = 1e-10  # a constraint update that raises the dual cost by more than this is undone
_QCQP_ITERATIONS = 20


def _mul32(a, b):
    """(high, low) uint32 halves of the 64-bit product of two uint32 arrays."""
    m16 = jp.uint32(0xFFFF)
    a0, a1, b0, b1 = a & m16, a >> 16, b & m16, b >> 16
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> 16) + (p01 & m16) + (p10 & m16)
    return p11 + (p01 >> 16) + (p10 >> 16) + (mid >> 16), a * b


def _pcg32(hi, lo):
    """One PCG32 draw from the state (hi, lo): (output, next hi, next lo), all uint32."""
    # output from the current state: rotate(((s >> 18) ^ s) >> 27, s >> 59)
    t_lo = lo ^ ((lo >> 18) | (hi << 14))
    t_hi = hi ^ (hi >> 18)
    x = (t_lo >> 27) | (t_hi << 5)
    rot = hi >> 27
    out = (x >> rot) | (x << ((jp.uint32(32) - rot) & jp.uint32(31)))
    # s * multiplier + 1 (mod 2^64)
    h, l1 = _mul32(lo, jp.uint32(_PCG_MULT_LO))
    h = h + lo * jp.uint32(_PCG_MULT_HI) + hi * jp.uint32(_PCG_MULT_LO)
    l2 = l1 + jp.uint32(1)
    return out, h + (l2 == 0).astype(jp.uint32), l2


def _shuffle(perm, rng, n):
    """Fisher-Yates pass over perm[:n] (n traced, perm (U,) int32), as MuJoCo's PGS does
    before every sweep: for i = n .. 2, swap perm[i - 1] with perm[draw % i]. A loop of n - 1
    draws (integers only, so it needs no reverse-mode rule): the budget U can be ~40x the
    active rows (humanoid 819 vs ~20), and U draws a sweep cost more than the sweep."""
    if perm.shape[0] < 2:
        return perm, rng

    def body(s, carry):
        perm, hi, lo = carry
        i = n - s
        out, hi, lo = _pcg32(hi, lo)
        j = (out % i.astype(jp.uint32)).astype(jp.int32)
        a, b = perm[i - 1], perm[j]
        return perm.at[i - 1].set(b).at[j].set(a), hi, lo

    perm, hi, lo = jax.lax.fori_loop(0, jp.maximum(n - 1, 0), body, (perm, *rng))
    return perm, (hi, lo)


def _qcqp(a, b, d, r, mask):
    """min 0.5 x'A x + x'b  s.t.  sum (x_i / d_i)^2 <= r^2 over the dims in ``mask``.

    Newton's method on the multiplier of the ellipsoid constraint, with the exits and
    thresholds of MuJoCo's mju_QCQP2/3/mju_QCQP. Returns (x, constrained).
    """
    n = b.shape[0]
    eye = jp.eye(n, dtype=b.dtype)
    m2 = mask[:, None] & mask[None, :]
    ds = where(mask, d, 1.0)
    bs = where(mask, b * ds, 0.0)
    As = where(m2, a * ds[:, None] * ds[None, :], eye)
    small = jp.sum(mask) <= 3  # 2 and 3 friction dims test the determinant, more the pivots

    def body(carry, _):
        la, v, done, fail = carry
        ala = As + la * jp.diag(mask.astype(b.dtype))
        chol = linalg.cholesky(ala)
        piv = jp.diagonal(chol) ** 2
        bad = where(small, jp.prod(piv) < 1e-10, jp.any(piv < 1e-10))
        bad = bad | ~jp.all(jp.isfinite(piv))
        chol = where(bad, eye, chol)
        vv = -linalg.cho_solve(chol, bs)
        val = vv @ vv - r * r
        deriv = -2.0 * vv @ linalg.cho_solve(chol, vv)
        delta = -val / where(deriv != 0, deriv, -1.0)
        stop = bad | (val < 1e-10) | (delta < 1e-10)
        new = (where(stop, la, la + delta), where(bad, 0.0, vv), done | stop, bad)
        return jax.tree_util.tree_map(lambda o, x: where(done, o, x), carry, new), None

    init = (jp.zeros((), b.dtype), jp.zeros_like(b), jp.asarray(False), jp.asarray(False))
    (la, v, _, fail), _ = jax.lax.scan(body, init, None, length=_QCQP_ITERATIONS)
    return v * ds, (la != 0) & ~fail


class _Dual(PyTreeNode):
    """The dual problem and the constraint layout PGS walks: ar (nefc, nefc) = A + R, b (nefc,),
    act (nefc,), unit_start (U,) first row of each unit (a scalar row or an elliptic contact
    slot), unit_block (U,) whether the unit is an elliptic cone, friction (ncon, width - 1)."""

    ar: jax.Array
    b: jax.Array
    act: jax.Array
    unit_start: jax.Array
    unit_block: jax.Array
    friction: jax.Array


def _dual_project(p: RowPlan, d: Data, dual: _Dual, f):
    """Projects forces onto the admissible set: friction loss into its box, limits and contacts
    non-negative, elliptic forces radially into their cone (the momentum step's projection)."""
    idx = np.arange(p.nefc)
    is_fr = (idx >= p.ne) & (idx < p.ne + p.nf)
    floss = d.efc_frictionloss
    is_cone = jp.zeros(p.nefc, bool)
    if p.elliptic and p.nc:
        is_cone = d.efc_type == CONTACT_ELLIPTIC
    out = where(is_fr, jp.clip(f, -floss, floss), f)
    out = where((idx >= p.ne + p.nf) & ~is_cone, jp.maximum(out, 0.0), out)
    if p.elliptic and p.nc:
        s0, w = p.ne + p.nf + p.nl, p.width
        fc = out[s0:].reshape(p.ncon, w)
        cone = is_cone[s0:].reshape(p.ncon, w)[:, 0]
        act = dual.act[s0:].reshape(p.ncon, w)[:, 1:]
        mu = dual.friction
        f0 = fc[:, 0]
        s = jp.sum(where(act, fc[:, 1:] ** 2 / mu**2, 0.0), -1)
        shrink = _safe_sqrt(f0 * f0 / jp.maximum(_MINVAL, s))
        ft = where((s > f0 * f0)[:, None], fc[:, 1:] * shrink[:, None], fc[:, 1:])
        blk = jp.concatenate([f0[:, None], ft], 1)
        blk = where((f0 < 0)[:, None], 0.0, blk)
        fc = where(cone[:, None], blk, fc)
        out = out.at[s0:].set(fc.ravel())
    return out


def _scalar_update(p: RowPlan, d: Data, dual: _Dual, f, i):
    """Exact minimization along row i, projected: (forces, dual cost change)."""
    res = dual.ar[i] @ f + dual.b[i]
    a = dual.ar[i, i]
    a = where(a > 0, a, 1.0)  # padding visits (masked by the caller) keep finite tangents
    floss = d.efc_frictionloss[i]
    fi = f[i] - res / a
    is_fr = (i >= p.ne) & (i < p.ne + p.nf)
    fi = where(is_fr, jp.clip(fi, -floss, floss), fi)
    fi = where(i >= p.ne + p.nf, jp.maximum(fi, 0.0), fi)
    delta = fi - f[i]
    change = 0.5 * delta * delta * a + delta * res
    keep = change <= _REVERT
    return f.at[i].set(where(keep, fi, f[i])), where(keep, change, 0.0)


def _cone_update(p: RowPlan, dual: _Dual, f, unit):
    """One elliptic contact (Computation, "Algorithms"): a line search along the ray through the
    current force, then the friction forces on the ellipse of the new normal force (a QCQP).
    Returns (forces, dual cost change)."""
    w = p.width
    start = dual.unit_start[unit]
    rows = start + jp.arange(w)
    mask = dual.act[rows]
    m2 = mask[:, None] & mask[None, :]
    a = where(m2, dual.ar[rows][:, rows], 0.0)
    res = where(mask, dual.ar[rows] @ f + dual.b[rows], 0.0)
    old = where(mask, f[rows], 0.0)
    mu = dual.friction[unit - (dual.unit_start.shape[0] - p.ncon)]
    # normal force near zero: a plain normal update; otherwise the ray update
    f0n = jp.maximum(old[0] - res[0] / where(a[0, 0] > 0, a[0, 0], 1.0), 0.0)
    low = jp.zeros_like(old).at[0].set(f0n)
    den = old @ a @ old
    x = -(old @ res) / where(den >= _MINVAL, den, 1.0)
    x = where(old[0] + x * old[0] < 0, -old[0] / where(old[0] != 0, old[0], 1.0), x)
    ray = where(den >= _MINVAL, old + x * old, old)
    new = where(old[0] < _MINVAL, low, ray)
    # friction with the normal force fixed
    fn = new[0]
    bc = res[1:] - a[1:, 1:] @ old[1:] + a[1:, 0] * (fn - old[0])
    v, on = _qcqp(a[1:, 1:], bc, mu, fn, mask[1:])
    s = jp.sum(where(mask[1:], v * v / mu**2, 0.0))
    v = where(on, v * _safe_sqrt(fn * fn / jp.maximum(_MINVAL, s)), v)
    new = new.at[1:].set(where(fn < _MINVAL, 0.0, where(mask[1:], v, 0.0)))
    delta = new - old
    change = 0.5 * delta @ a @ delta + delta @ res
    keep = change <= _REVERT
    blk = where(keep, new, old)
    return f.at[rows].set(where(mask, blk, f[rows])), where(keep, change, 0.0)


def _contact_order(m: Model, d: Data, p: RowPlan) -> jax.Array:
    """(ncon,) position of each contact slot in MuJoCo's contact order: by candidate geom pair
    in MuJoCo's pair order (collision.pairs.geom_pairs), then by slot (the collider's contact
    index). Our collision driver lays slots out by geom-type key; contacts copied from MuJoCo
    are already in its order, which this keeps."""
    from mjx_lite.collision import pairs  # noqa: PLC0415 (collision imports the solver's deps)

    ngeom = max(1, m.ngeom)
    cand = pairs.geom_pairs(m)
    keys = np.array([min(a, b) * ngeom + max(a, b) for a, b, _ in cand] or [0], np.int64)
    order = np.argsort(keys, kind="stable")
    skeys = jp.asarray(keys[order])
    srank = jp.asarray(np.arange(len(cand) or 1)[order], jp.int32)
    g = d.contact.geom
    key = jp.minimum(g[:, 0], g[:, 1]) * ngeom + jp.maximum(g[:, 0], g[:, 1])
    at = jp.clip(jp.searchsorted(skeys, key), 0, skeys.shape[0] - 1)
    rank = where(skeys[at] == key, srank[at], len(cand))
    slot_key = rank * p.ncon + jp.arange(p.ncon)
    return jp.argsort(jp.argsort(slot_key)).astype(jp.int32)


def dual_terms(m: Model, d: Data):
    """The dual problem's data (seed 002's Solver section): M^-1 J' (nv, nefc), A = J M^-1 J'
    and b = J qacc_smooth - aref; the forces f give qacc = qacc_smooth + M^-1 J' f. PGS adds R
    to A; noslip (``noslip.py``) works on A without it."""
    minv_jt = smooth.solve_m(m, d, d.efc_J.T)
    return minv_jt, d.efc_J @ minv_jt, d.efc_J @ d.qacc_smooth - d.efc_aref


def _solve_pgs(m: Model, d: Data, p: RowPlan, loop: str):
    """Projected Gauss-Seidel on the dual, as MuJoCo 4.0 runs it:
    min 0.5 f'(A + R) f + f'(J a0 - aref), f in Omega.

    Each sweep visits the active constraints in a pseudo-random order (see ``_shuffle``):
    scalar rows take their exact projected minimizer, elliptic contacts the ray and QCQP
    updates of ``_cone_update``; an update that raises the cost by more than 1e-10 is undone.
    Nesterov momentum with adaptive restart (O'Donoghue and Candes): from the third sweep
    after a (re)start, the sweep starts at x_k + (k - 1) / (k + 2) (x_k - x_{k-1}), projected
    into Omega; the momentum count k restarts at 0 when the sweep's step from that point goes
    against the extrapolation. A sweep counts as an iteration; an island stops once the cost
    improvement of its sweep, scaled by its termination scale, falls below ``tolerance``.
    Islands are solved side by side: each has its own generator, permutation, momentum and
    count, and since no row couples two islands, visiting one island's units after another's
    is the same as solving them one at a time.
    """
    minv_jt, a, b = dual_terms(m, d)
    ar = a + jp.diag(d.efc_R)
    act = d.efc_active
    blocks = p.elliptic and p.nc > 0
    nscalar = p.ne + p.nf + p.nl if blocks else p.nefc
    starts = np.arange(nscalar)
    if blocks:
        starts = np.concatenate([starts, nscalar + p.width * np.arange(p.ncon)])
        friction = jp.maximum(1e-5, d.contact.friction)[:, : p.width - 1]
    else:
        friction = jp.zeros((0, 1), b.dtype)
    nunit = starts.size
    unit_block = np.arange(nunit) >= nscalar
    if blocks:
        unit_block = jp.asarray(unit_block) & (d.efc_type[starts] == CONTACT_ELLIPTIC)
    dual = _Dual(ar=ar, b=b, act=act, unit_start=jp.asarray(starts, jp.int32),
                 unit_block=jp.asarray(unit_block), friction=friction)
    unit_active = act[starts]
    # island of each unit and row; the monolithic solve is island 0
    isl = _islands(m, d)
    nisl = isl.scale.shape[0]
    row_island = jp.argmax(isl.efc, axis=1).astype(jp.int32)
    unit_island = row_island[starts]
    # each island's active units in MuJoCo's row order, the list its permutation indexes:
    # equality, friction and limit rows as laid out, contacts in MuJoCo's contact order;
    # islands one after the other
    unit_key = jp.arange(nunit, dtype=jp.int32)
    if p.nc:
        s0 = p.ne + p.nf + p.nl
        per_slot = 1 if blocks else p.width
        rank = _contact_order(m, d, p)
        within = jp.asarray(np.arange(nunit - s0) % per_slot, jp.int32)
        slot = (np.arange(nunit - s0) // per_slot).astype(np.int32)
        unit_key = unit_key.at[s0:].set(s0 + rank[slot] * per_slot + within)
    unit_key = where(unit_active, unit_island, nisl) * (2 * nunit) + unit_key
    active_units = jp.argsort(unit_key).astype(jp.int32)
    nactive = jax.ops.segment_sum(unit_active.astype(jp.int32), unit_island, nisl)
    ends = jp.cumsum(nactive)
    offset = ends - nactive

    def dual_cost(f):
        return 0.5 * f @ ar @ f + f @ b

    f0 = jp.zeros_like(b)
    if not m.opt.disableflags & DisableBit.WARMSTART:
        jar = d.efc_J @ d.qacc_warmstart - d.efc_aref
        fw = _row_update(m, d, p, _cone(m, d, p), jar)[0]
        f0 = where(dual_cost(fw) < 0.0, fw, f0)

    def sweep(carry):
        f, prev, k, perm, rng, done, it = carry
        # momentum: extrapolate from the third sweep after a (re)start, then project
        beta = (k - 1).astype(b.dtype) / (k + 2).astype(b.dtype)
        extrapolate = ((it > 0) & (beta > 0))[row_island]
        y = f + beta[row_island] * (f - prev)
        y = where(extrapolate, _dual_project(p, d, dual, y), f)
        y = where(act, y, 0.0)
        perm, rng = jax.vmap(_shuffle)(perm, rng, nactive)

        def visit(carry, q):
            f, improvement = carry
            i = jp.minimum(jp.searchsorted(ends, q, side="right"), nisl - 1)
            unit = active_units[offset[i] + perm[i, q - offset[i]]]
            if blocks:
                fn, change = jax.lax.cond(
                    dual.unit_block[unit],
                    lambda f: _cone_update(p, dual, f, unit),
                    lambda f: _scalar_update(p, d, dual, f, dual.unit_start[unit]), f)
            else:
                fn, change = _scalar_update(p, d, dual, f, dual.unit_start[unit])
            ok = (q < ends[-1]) & ~done[i]
            return (where(ok, fn, f), improvement.at[i].add(-where(ok, change, 0.0))), None

        init = (y, jp.zeros(nisl, b.dtype))
        if loop == "early_exit":
            # forward only: visit just the active units (a while loop), where the scan below
            # steps through every row of the budget (819 on humanoid, of which ~20 active)
            fn, improvement = jax.lax.fori_loop(0, ends[-1], lambda q, c: visit(c, q)[0], init)
        else:
            (fn, improvement), _ = jax.lax.scan(visit, init, jp.arange(nunit))
        # adaptive restart: the step from y goes against the extrapolation y - x_k
        restart = ((fn - y) * (y - f)) @ isl.efc < 0
        kn = where(restart, 0, k + 1)
        conv = isl.scale * improvement < m.opt.tolerance
        new = (fn, f, kn, perm, rng, done | conv, it + 1)
        # converged islands keep their forces and counters
        keep_row = done[row_island]
        return (where(keep_row, f, fn), where(keep_row, prev, f)) + tuple(
            jax.tree_util.tree_map(
                lambda o, x: where(done.reshape(done.shape + (1,) * (o.ndim - 1)), o, x),
                carry[2:], new[2:]))

    # every island shuffles with its own generator, seeded alike
    rng = (jp.zeros(nisl, jp.uint32), jp.ones(nisl, jp.uint32))
    perm = jp.tile(jp.arange(nunit, dtype=jp.int32), (nisl, 1))
    carry = (f0, f0, jp.zeros(nisl, jp.int32), perm, rng, nactive == 0,
             jp.zeros(nisl, jp.int32))
    if loop == "early_exit":
        carry = jax.lax.while_loop(
            lambda c: jp.any(~c[5]) & (jp.max(c[6]) < m.opt.iterations), sweep, carry)
    else:
        remat_sweep = jax.checkpoint(sweep, prevent_cse=False)  # as in _solve_primal
        carry, _ = jax.lax.scan(lambda c, _: (remat_sweep(c), None), carry, None,
                                length=m.opt.iterations)
    f, niter = carry[0], carry[6]
    qacc = d.qacc_smooth + minv_jt @ f
    return qacc, f, niter


# ------------------------------------------------------------------------------------------
# implicit adjoint


# The implicit adjoint is the derivative of the minimizer, so the forward it pairs with must
# return the minimizer: where the configured solver's opt.iterations leave an island
# unconverged, Newton iterations continue from its iterate until opt.tolerance's tests pass
# (at tolerance 0: until the step stalls at rounding) or this many more have run.
IMPLICIT_MAX_POLISH = 100


def _iterate(m: Model, d: Data, loop: str, factor: bool = False):
    """(qacc, niter, factor) of the configured solver, then Newton to convergence (see
    ``IMPLICIT_MAX_POLISH``), without any derivative rule. With ``factor``, the Cholesky
    factor of ``hessian`` at qacc, else None: the Newton iterations then factor the Hessian
    at every iterate (not only where another iteration will use it) and keep the last."""
    p = _plan(m, d)

    def newton(iterations, start=None, done=None):
        budget = m.replace(opt=m.opt.replace(iterations=iterations))
        return _solve_primal(budget, d, p, True, "early_exit", differentiated=False,
                             start=start, done=done, factor=factor, polish=True)

    if m.opt.solver == SolverType.NEWTON:
        # Newton's own loop, run on: where opt.iterations converge it stops where they do (the
        # fixed loop's answer, see test_early_exit_matches_fixed), at no extra cost
        ctx = newton(m.opt.iterations + IMPLICIT_MAX_POLISH)
        return ctx.qacc, ctx.niter, ctx.factor
    if m.opt.solver == SolverType.PGS:
        # PGS's stop is a dual improvement: the Newton start's own tests decide
        qacc, _, niter = _solve_pgs(m, d, p, loop)
        done = None
    else:
        ctx = _solve_primal(m, d, p, False, loop, differentiated=False)
        qacc, niter, done = ctx.qacc, ctx.niter, ctx.done
    polish = newton(IMPLICIT_MAX_POLISH, start=qacc, done=done)
    return polish.qacc, niter + polish.niter, polish.factor


def _solve_implicit(m: Model, d: Data, loop: str):
    """(qacc, niter) whose derivative is that of the exact minimizer (implicit function
    theorem on ``residual(m, d, qacc) = 0``).

    The tangent is dqacc = -H^-1 (d residual / d(m, d)) . (dm, dd) with H = ``hessian`` at the
    solution: one Cholesky solve, whatever the iteration count or loop, with the factor of the
    final Newton iterate (the differentiated forward keeps it). It is linear in the
    tangents, so JAX transposes it for reverse mode (one solve with H, which is symmetric, and
    one VJP of the residual); forward mode (jvp, jacfwd) works too. The iterations themselves
    are never differentiated, so ``loop="early_exit"`` (a while_loop) may run them.
    """

    @jax.custom_jvp
    def run(m, d):
        return _iterate(m, d, loop)[:2]

    @run.defjvp
    def run_jvp(primals, tangents):
        mm, dd = primals
        # named, so that reverse mode under a remat policy saves them: a while_loop's outputs
        # are never saved, and the backward pass would run the iterations again
        qacc, niter, low = _iterate(mm, dd, loop, factor=True)
        qacc = checkpoint_name(qacc, "implicit_qacc")
        low = checkpoint_name(low, "implicit_factor")
        # residual's change with the problem data at a fixed qacc
        _, dres = jax.jvp(lambda a, b: residual(a, b, qacc), (mm, dd), tangents)
        dqacc = -linalg.cho_solve(low, dres)
        return (qacc, niter), (dqacc, np.zeros(niter.shape, jax.dtypes.float0))

    return run(m, d)


def inverse_constraint(m: Model, d: Data) -> Data:
    """The constraint force of ``d.qacc`` in closed form (mj_invConstraint; seed 002,
    "Inverse dynamics": given the acceleration, the soft-constraint problem is diagonal and
    each row's force follows from its own J qacc - aref): efc_force, efc_state and
    qfrc_constraint from the primal update at jar = J qacc - aref, whatever the solver."""
    p = _plan(m, d)
    if p.nefc == 0:
        return d.replace(qfrc_constraint=jp.zeros_like(d.qacc))
    jar = d.efc_J @ d.qacc - d.efc_aref
    force, state, _, _, _, _ = _row_update(m, d, p, _cone(m, d, p), jar)
    return d.replace(qfrc_constraint=d.efc_J.T @ force, efc_force=force,
                     efc_state=state.astype(jp.int32))


def _niter_out(niter: jax.Array) -> jax.Array:
    """solver_niter as mjData keeps it: (mjNISLAND,), one count per island."""
    niter = jp.atleast_1d(niter).astype(jp.int32)[:NISLAND]
    return jp.zeros(NISLAND, jp.int32).at[: niter.shape[0]].set(niter)


def solve(m: Model, d: Data, *, loop: str = "fixed", adjoint: str = "unroll") -> Data:
    """Constraint forces and accelerations (mj_fwdConstraint): qacc, qfrc_constraint,
    efc_force, efc_state, solver_niter. With opt.noslip_iterations > 0, MuJoCo's noslip
    post-processor follows the main solver (``noslip.py``; its sweeps are counted in
    solver_niter and it sets efc_state to the dual state of its forces).

    Args:
      loop: "fixed" runs exactly opt.iterations iterations in lax.scan (differentiable);
        "early_exit" stops at convergence with lax.while_loop (forward only).
      adjoint: "unroll" differentiates through the iterations (the derivative of the map
        computed, converged or not; each line search passes the derivative of its final
        Newton point, see ``_linesearch``); "implicit" differentiates the optimality
        condition at the returned qacc (the derivative of the exact solution: equal to the
        unrolled one at convergence, cost independent of the iterations, any ``loop``); so
        that qacc is the solution, islands that opt.iterations leave unconverged continue
        with up to ``IMPLICIT_MAX_POLISH`` Newton iterations (not differentiated), counted in
        solver_niter. Where opt.iterations converge, both adjoints run the same forward.
        Noslip has no implicit rule: under either adjoint its sweeps are unrolled (with
        "implicit", in the fixed loop whatever ``loop`` says).
    """
    if loop not in ("fixed", "early_exit"):
        raise ValueError(f"loop must be 'fixed' or 'early_exit', got {loop!r}")
    if adjoint not in ("unroll", "implicit"):
        raise ValueError(f"adjoint must be 'unroll' or 'implicit', got {adjoint!r}")
    p = _plan(m, d)
    if _compacts(m, p):
        # Rows that are never active are exact no-ops in every iteration (zero J and D), so
        # the solve runs without them; their force is zero and their state SATISFIED.
        # Gymnasium humanoid (336 of 819 rows live), batch 1, 100 steps, one-process A/B:
        # forward 112.2 -> 91.8 ms, implicit gradient 336.4 -> 308.2 ms.
        live = p.live
        out = _solve(m, d.replace(**{f: math.take(getattr(d, f), live) for f in _EFC_FIELDS}),
                     loop, adjoint)
        # back in place, dead rows zero: no force, and SATISFIED (0) as their state
        force = math.spread(out.efc_force, live, p.nefc)
        state = math.spread(out.efc_state, live, p.nefc)
        # the collision driver's contacts never activate a dead row; contacts of some other
        # layout that happen to have its slot count could: their solve fails loudly (NaN)
        dead = np.setdiff1d(np.arange(p.nefc), live)
        leak = jp.any(math.take(d.efc_active, dead))
        qacc = where(leak, jp.nan, out.qacc)
        return d.replace(qacc=qacc, qfrc_constraint=out.qfrc_constraint, efc_force=force,
                         efc_state=state, solver_niter=out.solver_niter)
    return _solve(m, d, loop, adjoint)


def _solve(m: Model, d: Data, loop: str, adjoint: str) -> Data:
    p = _plan(m, d)
    if p.nefc == 0:
        return d.replace(qacc=d.qacc_smooth, qfrc_constraint=jp.zeros_like(d.qacc_smooth),
                         solver_niter=jp.zeros(NISLAND, jp.int32))
    jar = None
    if adjoint == "implicit":
        qacc, niter = _solve_implicit(m, d, loop)
        # forces from the primal update at the solution, so that they carry its derivative
        # (for PGS they equal the dual iterate at convergence)
        out = inverse_constraint(m, d.replace(qacc=qacc)).replace(
            solver_niter=_niter_out(niter))
        # noslip is not differentiated implicitly: its sweeps are unrolled on top of the
        # implicit solution, in the fixed loop whatever ``loop`` says (a while_loop would
        # stop reverse mode)
        return _noslip(m, out, "fixed")
    if m.opt.solver == SolverType.PGS:
        qacc, pgs_force, niter = _solve_pgs(m, d, p, loop)
    else:
        ctx = _solve_primal(m, d, p, m.opt.solver == SolverType.NEWTON, loop,
                            differentiated=True)
        qacc, niter, jar = ctx.qacc, ctx.niter, ctx.jar
    if jar is None:
        jar = d.efc_J @ qacc - d.efc_aref
    force, state, _, _, _, _ = _row_update(m, d, p, _cone(m, d, p), jar)
    if m.opt.solver == SolverType.PGS:
        # the dual iterate is the force; the primal update only supplies the state
        force = pgs_force
    out = d.replace(qacc=qacc, qfrc_constraint=d.efc_J.T @ force, efc_force=force,
                    efc_state=state.astype(jp.int32), solver_niter=_niter_out(niter))
    return _noslip(m, out, loop)


def _noslip(m: Model, d: Data, loop: str) -> Data:
    """MuJoCo's noslip post-processor after the main solver, where opt.noslip_iterations > 0
    (``noslip.py``)."""
    if m.opt.noslip_iterations <= 0:
        return d
    from mjx_lite import noslip  # noqa: PLC0415 (noslip builds on this module's pieces)

    return noslip.noslip(m, d, loop=loop)

"""Where jit time goes: traced-op counts and XLA compile seconds per pipeline stage.

    python benchmarks/compile_profile.py hopper                 # stages, step, vmapped rollout
    python benchmarks/compile_profile.py ant --only rollout --batch 4 --steps 5
    python benchmarks/compile_profile.py humanoid --prims kinematics   # ops by primitive

For each stage (run on a forward-computed Data, each jitted alone) it prints the number of
jaxpr equations, sub-jaxprs included (scan / while / cond bodies counted once), then the
lowering and compile seconds. ``step`` is measured alone and as ``benchmarks/run.py`` times
it: a ``jax.vmap`` of an N-step ``lax.scan`` rollout. Models are looked up as run.py does.
Unset ``JAX_COMPILATION_CACHE_DIR`` so that compiles are not cache reads.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import time

import jax
from run import _model_path


def count_eqns(jaxpr) -> collections.Counter:
    """Equations of a jaxpr by primitive name, nested jaxprs (loop bodies, branches) included."""
    out: collections.Counter = collections.Counter()
    for e in jaxpr.eqns:
        out[e.primitive.name] += 1
        for p in e.params.values():
            for q in p if isinstance(p, (list, tuple)) else [p]:
                j = getattr(q, "jaxpr", None)
                if j is not None:
                    out.update(count_eqns(j if hasattr(j, "eqns") else j.jaxpr))
    return out


def _stages(loop: str) -> list:
    from mjx_lite import constraint, sensor, smooth, solver
    from mjx_lite.collision.driver import collision

    fwd = importlib.import_module("mjx_lite.forward")
    part = functools.partial
    return [
        ("kinematics", smooth.kinematics),
        ("com_pos", smooth.com_pos),
        ("tendon", smooth.tendon),
        ("crb", smooth.crb),
        ("factor_m", smooth.factor_m),
        ("collision", collision),
        ("make_constraint", constraint.make_constraint),
        ("transmission", smooth.transmission),
        ("sensor_pos", sensor.sensor_pos),
        ("fwd_velocity", fwd.fwd_velocity),
        ("fwd_actuation", fwd.fwd_actuation),
        ("fwd_acceleration", fwd.fwd_acceleration),
        ("solve", part(solver.solve, loop=loop)),
        ("integrate", part(fwd.integrate, loop=loop)),
        ("forward", part(fwd.forward, loop=loop)),
        ("step", part(fwd.step, loop=loop)),
    ]


def _compile(fn, *args) -> tuple[float, float, float]:
    """Seconds to lower, and wall and CPU seconds to compile (CPU time of this process: the
    steadier figure on a shared machine)."""
    t0 = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    t1, c1 = time.perf_counter(), time.process_time()
    lowered.compile()
    return t1 - t0, time.perf_counter() - t1, time.process_time() - c1


def _runtime_us(fn, m, d, reps: int = 100) -> float:
    """Microseconds per call of ``fn(m, d)``: a jitted scan of ``reps`` calls fed back. The
    next call's qpos depends on every output (a select XLA cannot fold), else a stage that
    leaves qpos alone is loop-invariant and XLA hoists it out of the loop."""
    import jax.numpy as jp

    def body(d, _):
        out = fn(m, d)
        total = sum(jp.sum(x) for x in jax.tree.leaves(out)
                    if jp.issubdtype(x.dtype, jp.floating))
        return out.replace(qpos=out.qpos + jp.where(total == 1.2345, 1e-30, 0.0)), None

    run = jax.jit(lambda m, d: jax.lax.scan(body, d, None, length=reps)[0])
    jax.block_until_ready(run(m, d))
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        jax.block_until_ready(run(m, d))
        best = min(best, time.perf_counter() - t0)
    return best / reps * 1e6


def _pipeline(stages, m, d):
    for _, fn in stages:
        d = fn(m, d)
    return d


def rollout(step, nsteps: int):
    """vmap over Data of an nsteps lax.scan of step (as benchmarks/run.py times it)."""

    def run(m, d):
        return jax.lax.scan(lambda d, _: (step(m, d), None), d, None, length=nsteps)[0]

    return jax.vmap(run, in_axes=(None, 0))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--loop", default="early_exit", choices=["early_exit", "fixed"])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--only", nargs="+", help="stage names (and/or 'rollout') to measure")
    parser.add_argument("--no-compile", action="store_true", help="op counts only")
    parser.add_argument("--prims", nargs="*", default=[],
                        help="stages whose op counts are broken down by primitive")
    parser.add_argument("--x64", action="store_true")
    parser.add_argument("--solver", choices=["PGS", "CG", "NEWTON"],
                        help="override the model's solver (run.py runs PGS models as NEWTON)")
    parser.add_argument("--runtime", action="store_true",
                        help="also microseconds per call, batch 1 (a scan of 100 calls, so "
                             "dispatch overhead is not counted): a pipeline stage's is the "
                             "increment of the pipeline up to it over the one before it")
    parser.add_argument("--settle", type=int, default=0,
                        help="steps (early exit) from the initial state before measuring, so "
                             "that a model resting on the floor has its contacts")
    args = parser.parse_args(argv)
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    import mjx_lite

    m = mjx_lite.load_model(_model_path(args.model))
    if args.solver:
        from mjx_lite.types import SolverType

        m = m.replace(opt=m.opt.replace(solver=SolverType[args.solver]))
    d = mjx_lite.make_data(m)
    if args.settle:
        d = jax.jit(lambda m, d: jax.lax.scan(
            lambda d, _: (mjx_lite.step(m, d, loop="early_exit"), None), d, None,
            length=args.settle)[0])(m, d)
    d = jax.jit(functools.partial(mjx_lite.forward, loop=args.loop))(m, d)
    print(f"{args.model}: nbody {m.nbody} nv {m.nv} ngeom {m.ngeom} integrator "
          f"{m.opt.integrator!r} solver {m.opt.solver!r} loop {args.loop!r}")
    print(f"{'stage':18s} {'eqns':>7s} {'lower s':>8s} {'compile s':>9s} {'(cpu s)':>8s}",
          flush=True)
    step = None
    stages = _stages(args.loop)
    whole = ("integrate", "forward", "step")
    upto: dict = {-1: 0.0}  # run time of the pipeline up to stage k

    def pipeline_us(k):
        if k not in upto:
            upto[k] = _runtime_us(functools.partial(_pipeline, stages[: k + 1]), m, d)
        return upto[k]

    for k, (name, fn) in enumerate(stages):
        step = fn if name == "step" else step
        if args.only and name not in args.only:
            continue
        counts = count_eqns(jax.make_jaxpr(fn)(m, d).jaxpr)
        line = f"{name:18s} {sum(counts.values()):7d}"
        if not args.no_compile:
            lo, co, cpu = _compile(fn, m, d)
            line += f" {lo:8.1f} {co:9.1f} {cpu:8.1f}"
        if args.runtime and name in whole:
            line += f" {_runtime_us(fn, m, d):9.1f} us"
        elif args.runtime:
            # a stage alone is loop-invariant where it ignores qpos (XLA hoists it out of the
            # timing loop), so it is timed as the pipeline up to it minus the one before
            line += f" {pipeline_us(k) - pipeline_us(k - 1):9.1f} us (pipeline {upto[k]:.1f})"
        print(line, flush=True)
        if name in args.prims:
            print("   ", ", ".join(f"{k} {v}" for k, v in counts.most_common(12)))
    if not args.only or "rollout" in args.only:
        db = jax.tree.map(lambda x: jax.numpy.broadcast_to(x, (args.batch,) + x.shape), d)
        fn = rollout(step, args.steps)
        counts = count_eqns(jax.make_jaxpr(fn)(m, db).jaxpr)
        line = f"{'rollout':18s} {sum(counts.values()):7d}"
        if not args.no_compile:
            lo, co, cpu = _compile(fn, m, db)
            line += f" {lo:8.1f} {co:9.1f} {cpu:8.1f}"
        print(line + f"   (vmap {args.batch} x scan {args.steps} of step)", flush=True)


if __name__ == "__main__":
    main()

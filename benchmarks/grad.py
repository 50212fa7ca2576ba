"""Gradient benchmark: forward rollout vs its gradients, mjx_lite next to MJX.

    python benchmarks/grad.py                          # humanoid and ant, 100 steps, batch 1 64
    python benchmarks/grad.py --models cartpole --steps 20 --batches 1 --no-mjx
    python benchmarks/grad.py --models ant --iterations 1    # equal iterations with MJX

For each model and batch size: jit seconds (the fastest of ``--jit-rounds`` compiles, the
programs compiled in alternation), run seconds (the fastest of ``--rounds`` warm
calls; mjx_lite's programs of a batch are compiled first, then called in alternation, so
that each ratio is taken over the same stretch of this host's drifting speed, ``--repeat``
times in a row each, the calls after the first timed) and peak memory
(XLA's buffer assignment: arguments + outputs + temporaries of the compiled program) of
  forward     a vmapped rollout of ``step`` with open-loop controls (``mjx_lite.rollout``,
              a ``lax.scan``; the fixed-iteration loop that ``unroll`` differentiates),
  fwd-implicit the same with the implicit gradient's step options (early-exit loop; the
              solve continued to convergence where ``iterations`` leave it short, as the
              implicit adjoint's forward does): the map ``implicit`` differentiates,
  unroll      jax.grad of a loss of the final state w.r.t. the controls, through the iterations,
  checkpoint  the same with ``jax.checkpoint`` per step (rollout(checkpoint=True)),
  implicit    the implicit solver adjoint with the early-exit loop,
each also as a ratio to the forward rollout (``implicit`` to ``fwd-implicit`` too), the jit
seconds split into JAX's trace and
lowering and XLA's compile; then MJX's forward and gradient at
``iterations=1`` (its solver's while_loop is reverse-differentiable only then). float32.
Disable the persistent compilation cache when measuring jit seconds.

``--cpus 0`` runs the process (and MJX's child processes, which inherit it) on the listed
cores only, as ``taskset -c 0`` would: with one core, XLA's CPU client sizes its thread pool
to one worker, and the thunk executor's hand-offs of a backward pass's independent kernels
to the other core, which cost gymnasium ant's batch-1 gradient about a third of its time on
this 2-core host, stay on the core (docs/gradients.md, "Session 56").
"""

from __future__ import annotations

import argparse
import importlib
import os

import jax
import jax.numpy as jp

# benchmarks/run.py, beside this script
from run import (
    _in_child,
    _model_path,
    add_xla_argument,
    compile_timed,
    interleaved,
    measure,
    use_xla_argument,
)


def _measure(fn, *args, engine: str = "mjx_lite") -> dict:
    # the fastest of 3 warm calls: one call is at the mercy of this shared host's noise
    return measure(fn, *args, repeats=3, engine=engine)[1]


def _programs(step, m, d, nsteps: int, rollout=None):
    """forward(ctrls) and loss(ctrls) over a batch: ctrls (B, T, nu), d batched. ``step_fn``
    is a step function scanned over the controls, or, given ``rollout(m, d, ctrls, options,
    checkpoint) -> final Data``, the options it is called with."""

    def one(d, ctrls, step_fn, checkpoint=False):
        if rollout is not None:
            d = rollout(m, d, ctrls, step_fn, checkpoint)
        else:
            def body(d, u):
                return step_fn(m, d.replace(ctrl=u)), None

            if checkpoint:
                body = jax.checkpoint(body)
            d, _ = jax.lax.scan(body, d, ctrls)
        return jp.sum(d.qpos**2) + jp.sum(d.qvel**2)

    def forward(db, ctrls, step_fn=step):
        return jax.vmap(lambda d, c: one(d, c, step_fn))(db, ctrls)

    def grad(db, ctrls, step_fn=step, checkpoint=False):
        f = lambda c: jp.sum(jax.vmap(lambda d, u: one(d, u, step_fn, checkpoint))(db, c))  # noqa: E731
        return jax.grad(f)(ctrls)

    return forward, grad


def _batch(d, batch: int, key):
    def one(k):
        return d.replace(qvel=d.qvel + 0.01 * jax.random.normal(k, d.qvel.shape, d.qvel.dtype))

    return jax.vmap(one)(jax.random.split(key, batch))


# step options of the implicit-adjoint gradient: the early-exit loop, the solve's adjoint
IMPLICIT = {"loop": "early_exit", "adjoint": "implicit"}


def mjx_lite_programs(lib, path, nsteps: int, iterations: int | None = None,
                      solver: str | None = None):
    """(m, d, forward, grad) of ``_programs`` for the model at ``path``, with ``lib`` the
    mjx_lite package (or a renamed copy of it, as ``ab.py`` loads two) and its solver and
    iteration count set where given."""
    solver_type = importlib.import_module(lib.__name__ + ".types").SolverType
    m = lib.load_model(path)
    if iterations is not None:
        m = m.replace(opt=m.opt.replace(iterations=iterations))
    if solver is not None:
        m = m.replace(opt=m.opt.replace(solver=int(solver_type[solver])))
    d = lib.make_data(m)

    # the library's rollout, its scan of step (its initial carry has dense tangents, so JAX
    # linearizes the step once, not twice: see rollout._dense_tangents)
    def rollout(m, d, ctrls, options, checkpoint):
        return lib.rollout(m, d, ctrls, checkpoint=checkpoint, fields=(), **options)[0]

    return (m, d) + _programs({}, m, d, nsteps, rollout=rollout)


def bench_mjx_lite(path, batches, nsteps: int, iterations: int | None, report,
                   solver: str | None = None, skip=(), rounds: int = 3,
                   repeat: int = 2, jit_rounds: int = 1, jit_fresh: bool = False) -> None:
    import mjx_lite

    m, d, forward, grad = mjx_lite_programs(mjx_lite, path, nsteps, iterations, solver)
    for b in batches:
        db, ctrls = _inputs(m, d, b, nsteps)
        programs = _named_programs(forward, grad)
        # every program compiled first, then timed in alternation (run.interleaved)
        compiled = {}
        measured = {name: [] for name in programs if name not in skip}
        for _ in range(1 if jit_fresh else jit_rounds):
            for name in measured:
                # a new function object each round: JAX traces and XLA compiles it afresh
                exe, r = compile_timed(lambda x, c, fn=programs[name]: fn(x, c), db, ctrls)
                compiled.setdefault(name, exe)
                measured[name].append(r)
        if jit_fresh:
            # jit seconds from fresh processes, the programs in alternation: within one
            # process a program compiled after others ran up to 40% slower than the same
            # program compiled first (ant batch-1 forward 13.1 s first, 18.5 s twice after)
            first = {name: rs[0] for name, rs in measured.items()}
            fresh = {name: [] for name in first}
            for _ in range(jit_rounds):
                for name in first:
                    r = _in_child(_fresh_jit, (str(path), nsteps, iterations, solver, b, name),
                                  timeout_s=1800)
                    if "error" not in r:
                        fresh[name].append(dict(first[name], **r))
            measured = {name: fresh[name] or [first[name]] for name in first}
        results = {name: dict(min(rs, key=lambda r: r["jit_s"]),
                              jit_all=[r["jit_s"] for r in rs])
                   for name, rs in measured.items()}
        for name, run_s in interleaved(compiled, (db, ctrls), rounds, repeat).items():
            results[name]["run_s"] = run_s
        for name in programs:
            if name in skip:
                report(f"  batch {b}", name, {"error": "skipped (--skip)"}, None)
                continue
            base = next(iter(results.values()))
            report(f"  batch {b}", name, results[name], None if name == "forward" else base)
        if "implicit" in results and "fwd-implicit" in results:
            # the backward's cost over the forward it differentiates
            report(f"  batch {b}", "implicit", results["implicit"], results["fwd-implicit"],
                   "fwd-implicit")


def _inputs(m, d, batch: int, nsteps: int) -> tuple:
    """mjx_lite's (batched Data, zero controls) of a batch, the same in every process."""
    return _batch(d, batch, jax.random.key(0)), jp.zeros((batch, nsteps, m.nu), d.qpos.dtype)


def _named_programs(forward, grad) -> dict:
    return {
        "forward": forward,
        "fwd-implicit": lambda x, c: forward(x, c, step_fn=IMPLICIT),
        "unroll": grad,
        "checkpoint": lambda x, c: grad(x, c, checkpoint=True),
        "implicit": lambda x, c: grad(x, c, step_fn=IMPLICIT),
    }


def _fresh_jit(path: str, nsteps: int, iterations, solver, batch: int, name: str) -> dict:
    """{jit_s, split} of mjx_lite's program ``name`` traced and compiled first thing in a
    child process (``run._in_child``)."""
    import mjx_lite

    m, d, forward, grad = mjx_lite_programs(mjx_lite, path, nsteps, iterations, solver)
    _, r = compile_timed(_named_programs(forward, grad)[name], *_inputs(m, d, batch, nsteps))
    return {"jit_s": r["jit_s"], "split": r["split"]}


def _mjx_program(path: str, batch: int, nsteps: int, solver: str | None, name: str) -> dict:
    """One MJX measurement (``name``: "forward" or "unroll") at ``iterations=1``; runs in a
    child process (``run._in_child``)."""
    import mujoco
    from mujoco import mjx

    mjm = mujoco.MjModel.from_xml_path(path)
    mjm.opt.iterations = 1
    if solver is not None:
        mjm.opt.solver = getattr(mujoco.mjtSolver, f"mjSOL_{solver}")
    try:
        m = mjx.put_model(mjm)
        d = mjx.make_data(m)
    except Exception as e:  # noqa: BLE001 - MJX rejects some features; report, don't crash
        return {"error": f"{type(e).__name__}: {e}"[:120], "rejected": True}
    forward, grad = _programs(mjx.step, m, d, nsteps)
    db = _batch(d, batch, jax.random.key(0))
    ctrls = jp.zeros((batch, nsteps, mjm.nu), jp.float32)
    try:
        return _measure({"forward": forward, "unroll": grad}[name], db, ctrls, engine="MJX")
    except Exception as e:  # noqa: BLE001
        return {"error": type(e).__name__}


def bench_mjx(path, batches, nsteps: int, report, solver: str | None = None,
              timeout_s: float = 3600) -> None:
    """MJX's forward and unrolled gradient, each in a fresh child process: jaxlib 0.10's CPU
    runtime deadlocks now and then in MJX (gymnasium humanoid's gradient at batch 64 did,
    2026-11-27), and a hung child is retried (``run._in_child``) instead of stopping the run."""
    for b in batches:
        base = None
        for name in ("forward", "unroll"):
            r = _in_child(_mjx_program, (str(path), b, nsteps, solver, name), timeout_s)
            if r.get("rejected"):
                report("", "error", r, None)
                return
            tries = r.pop("tries", 1)
            if tries > 1 and "error" not in r:
                r["note"] = f"{tries} tries"
            base = base or (None if "error" in r else r)
            report(f"  batch {b}", name, r, None if name == "forward" else base)


def _fmt(name: str, r: dict, base: dict | None, base_name: str = "forward") -> str:
    if "error" in r:
        return f"    {name:<12} error: {r['error']}"
    s = f"    {name:<12} jit {r['jit_s']:7.1f} s  run {r['run_s'] * 1e3:9.1f} ms"
    if r["peak_mb"] is not None:
        s += f"  peak {r['peak_mb']:8.1f} MB"
    if base is not None and "error" not in base:
        s += (f"  | x {base_name}: run {r['run_s'] / base['run_s']:5.2f}  jit "
              f"{r['jit_s'] / base['jit_s']:5.2f}")
        if r["peak_mb"] is not None and base["peak_mb"]:
            s += f"  mem {r['peak_mb'] / base['peak_mb']:6.1f}"
    if "split" in r:
        s += "  (jit: trace {:.1f} + lower {:.1f} + compile {:.1f} s)".format(*r["split"])
    if len(r.get("jit_all", ())) > 1:
        s += "  (jit rounds: " + " ".join(f"{t:.1f}" for t in r["jit_all"]) + " s)"
    if "note" in r:
        s += f"  ({r['note']})"
    return s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", nargs="+", default=["humanoid", "ant"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--no-mjx", action="store_true")
    parser.add_argument("--no-mjx-lite", action="store_true", help="MJX's rows only")
    parser.add_argument("--solver", choices=["CG", "NEWTON"], default=None,
                        help="solver for both engines (default: the model's; MJX has no PGS)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="solver iterations for mjx_lite (default: the model's)")
    parser.add_argument("--skip", nargs="+", default=[],
                        choices=["fwd-implicit", "unroll", "checkpoint", "implicit"],
                        help="mjx_lite programs not to run (gymnasium humanoid's unrolled "
                             "gradient at batch 64 needs more than 23 GB)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="mjx_lite's programs of a batch are timed in alternation, this "
                             "many rounds (the fastest timed call counts)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="calls of a program in a row within a round; those after the "
                             "first are timed (run.interleaved)")
    parser.add_argument("--jit-rounds", type=int, default=1,
                        help="mjx_lite's programs of a batch are compiled in alternation this "
                             "many rounds, each time traced and compiled afresh; the fastest "
                             "jit counts (this host's compile times of one program move by "
                             "10-25%% between calls)")
    parser.add_argument("--jit-fresh", action="store_true",
                        help="take jit seconds from --jit-rounds fresh processes per program "
                             "(each compiles it first thing), not from the timing process")
    parser.add_argument("--mjx-timeout", type=float, default=3600,
                        help="seconds one MJX measurement may take before it is given up")
    parser.add_argument("--cpus", type=int, nargs="+", default=None,
                        help="cores this process and its children run on (sched_setaffinity, "
                             "set before JAX starts its CPU client); default: all")
    add_xla_argument(parser)
    args = parser.parse_args()
    if args.cpus is not None:
        # before the first JAX call below: the CPU client sizes its thread pool from the
        # cores the process may run on when it starts
        os.sched_setaffinity(0, args.cpus)
    print(f"cores: {sorted(os.sched_getaffinity(0))}", flush=True)
    print(use_xla_argument(args), flush=True)
    its = "model's" if args.iterations is None else args.iterations
    print(f"device {jax.devices()[0].device_kind}, float32, {args.steps} steps, mjx_lite "
          f"iterations: {its}", flush=True)
    header = [None]

    def report(group, name, r, base, base_name="forward"):
        # one line per measurement, printed as it lands: a long run cut short keeps its rows
        if group != header[0]:
            print(group, flush=True)
            header[0] = group
        print(_fmt(name, r, base, base_name), flush=True)

    for name in args.models:
        path = _model_path(name)
        if not args.no_mjx_lite:
            print(f"{name} / mjx_lite", flush=True)
            header[0] = None
            bench_mjx_lite(path, args.batches, args.steps, args.iterations, report,
                           args.solver, args.skip, args.rounds, args.repeat,
                           args.jit_rounds, args.jit_fresh)
        if not args.no_mjx:
            print(f"{name} / MJX (iterations=1)", flush=True)
            header[0] = None
            bench_mjx(path, args.batches, args.steps, report, args.solver, args.mjx_timeout)


if __name__ == "__main__":
    main()

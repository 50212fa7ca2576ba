"""Benchmark runner: mjx_lite next to MJX and MuJoCo C, same models, batches and machine, one run.

    python benchmarks/run.py                      # ant and humanoid, batches 1 64 1024
    python benchmarks/run.py --models ant --batches 1 64 --steps 50 --disable contact,limit
    python benchmarks/run.py --disable '' --models ant hopper half_cheetah humanoid \
        mjx:humanoid/humanoid                     # with contacts; mjx: = the MJX wheel's test_data

For each model it prints: MJCF compile seconds (mjx_lite's own compiler vs mujoco's), and per
batch size the jit seconds and steps/s of a jitted, vmapped ``step`` rolled out with
``lax.scan`` for mjx_lite and MJX, and single-thread steps/s of MuJoCo C (``mj_step`` in a
loop, batch 1 only: a batch of B costs B times as much on one thread), then the timings of
the two factorizations of M (tree-sparse L'DL vs dense Cholesky). float32 unless --x64.
Results go to stdout and to benchmarks/results/<device>.md.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import time

import jax

from mjx_lite.types import SolverType

ROOT = pathlib.Path(__file__).resolve().parent.parent
_FLAG_BITS = {"constraint": 1, "equality": 2, "frictionloss": 4, "limit": 8, "contact": 16,
              "spring": 32, "damper": 64, "gravity": 128}


def _model_path(name: str) -> pathlib.Path:
    if name.startswith("mjx:"):
        import importlib.util

        spec = importlib.util.find_spec("mujoco.mjx")
        base = pathlib.Path(next(iter(spec.submodule_search_locations)))
        return base / "test_data" / f"{name[4:]}.xml"
    local = ROOT / "models" / f"{name}.xml"
    if local.exists():
        return local
    import importlib.util

    spec = importlib.util.find_spec("gymnasium")
    gym = pathlib.Path(next(iter(spec.submodule_search_locations))) / "envs/mujoco/assets"
    return gym / f"{name}.xml"


def _factor_choice() -> str:
    from mjx_lite import smooth

    return smooth.FACTOR


# engine -> (its command-line flag, the environment variable that carries the choice into the
# child processes, the default choice): MJX keeps XLA's defaults, since mjx_lite's options slow
# it down (its humanoid forward at batch 1 98.5 -> 183 ms)
_XLA_CHOICE = {"mjx_lite": ("--xla", "MJX_LITE_XLA", "mjx_lite"),
               "MJX": ("--mjx-xla", "MJX_LITE_XLA_MJX", "default")}


def xla_options(engine: str = "mjx_lite") -> dict:
    """The XLA compile options of ``engine``'s programs: ``mjx_lite.compiler_options()`` or
    XLA's defaults ({}), as its flag chose (``_XLA_CHOICE``)."""
    _, var, default = _XLA_CHOICE[engine]
    if os.environ.get(var, default) == "default":
        return {}
    import mjx_lite

    return mjx_lite.compiler_options()


def add_xla_argument(parser) -> None:
    for engine, (flag, _, default) in _XLA_CHOICE.items():
        parser.add_argument(flag, choices=["mjx_lite", "default"], default=default,
                            help=f"compile options of {engine}'s programs: "
                                 f"mjx_lite.compiler_options() or XLA's defaults "
                                 f"(default: {default})")


def use_xla_argument(args) -> str:
    """Puts the engines' choices in the environment (``xla_options``); returns them in
    words."""
    words = []
    for engine, (flag, var, _) in _XLA_CHOICE.items():
        os.environ[var] = choice = getattr(args, flag[2:].replace("-", "_"))
        words.append(f"{engine} {choice} {xla_options(engine)}")
    return "XLA compile options: " + ", ".join(words)


def compile_timed(fn, *args, engine: str = "mjx_lite") -> tuple:
    """(compiled, {jit_s, peak_mb, split}) of ``jax.jit(fn)`` on ``args`` with ``engine``'s
    ``xla_options``: jit seconds are JAX's trace and lowering plus XLA's compile (``split``:
    the three), peak the compiled program's buffers (arguments + outputs + temporaries, XLA's
    memory analysis)."""
    t0 = time.perf_counter()
    traced = jax.jit(fn).trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile(compiler_options=xla_options(engine) or None)
    t3 = time.perf_counter()
    return compiled, {"jit_s": t3 - t0, "peak_mb": peak_mb(compiled),
                      "split": (t1 - t0, t2 - t1, t3 - t2)}


def measure(fn, *args, repeats: int = 1, engine: str = "mjx_lite") -> tuple:
    """(output, {jit_s, run_s, peak_mb, split}) of ``jax.jit(fn)(*args)`` (``compile_timed``),
    run seconds the fastest of ``repeats`` warm calls."""
    compiled, info = compile_timed(fn, *args, engine=engine)
    jax.block_until_ready(compiled(*args))
    run_s = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(compiled(*args))
        run_s = min(run_s, time.perf_counter() - t0)
    return out, dict(info, run_s=run_s)


def interleaved(compiled: dict, args, rounds: int, repeat: int = 1) -> dict:
    """{name: fastest of ``rounds`` warm calls} of compiled programs on the same ``args``,
    called in turn each round: this host's speed drifts by 10-40% over minutes, so programs
    timed one after the other (each in its own window) can differ by that much where the
    same code runs; called in alternation, each ratio is taken over the same windows. With
    ``repeat`` > 1 each program is called that many times in a row within a round and only
    the calls after its first are timed: a program's call right after another program's ran
    slower than after its own (gymnasium humanoid's implicit gradient at batch 64, 5 GB of
    buffers: 29.2-30.9 s after the forward, 17.3-22.1 s after itself, one process), and an
    optimizer calls its gradient back to back."""
    for fn in compiled.values():
        jax.block_until_ready(fn(*args))
    best = dict.fromkeys(compiled, float("inf"))
    for _ in range(rounds):
        for name, fn in compiled.items():
            for call in range(repeat):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(*args))
                if call or repeat == 1:
                    best[name] = min(best[name], time.perf_counter() - t0)
    return best


def peak_mb(compiled):
    """The compiled program's buffers in MB (arguments + outputs + temporaries, less aliased
    ones), or None where the backend does not say."""
    mem = compiled.memory_analysis()
    if mem is None:
        return None
    return (mem.argument_size_in_bytes + mem.output_size_in_bytes
            + mem.temp_size_in_bytes - mem.alias_size_in_bytes) / 2**20


def _rollout_fn(step, nsteps: int):
    def rollout(m, d):
        def body(d, _):
            return step(m, d), None

        d, _ = jax.lax.scan(body, d, None, length=nsteps)
        return d

    return jax.vmap(rollout, in_axes=(None, 0))


def _batch(d, batch: int, key):
    def one(k):
        return d.replace(qvel=d.qvel + 0.01 * jax.random.normal(k, d.qvel.shape, d.qvel.dtype))

    return jax.vmap(one)(jax.random.split(key, batch))


def solver_residual(m, qpos, qvel, act, ctrl, qacc) -> float:
    """MuJoCo's gradient termination measure at a state and an engine's qacc at that same state:
    the norm of the primal gradient M qacc - qfrc_smooth - J' f(qacc) over trace(M), evaluated
    by mjx_lite's constraint model (so both engines are judged by the same yardstick)."""
    import jax.numpy as jp

    import mjx_lite
    from mjx_lite import solver

    def res(qpos, qvel, act, ctrl, qacc):
        d = mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel, act=act, ctrl=ctrl)
        d = mjx_lite.forward(m, d, loop="early_exit")
        return jp.linalg.norm(solver.residual(m, d, qacc)) / jp.trace(d.qM)

    return float(jax.jit(res)(*(jp.asarray(x, m.body_mass.dtype)
                                for x in (qpos, qvel, act, ctrl, qacc))))


def _state_at_end(forward, m, final) -> tuple:
    """Batch member 0 of a rollout's final Data, with the engine's own qacc computed there by
    its ``forward`` (warm-started from the rollout): ``step`` leaves the qacc of the state
    before its integration, which is not the final state's."""
    import numpy as np

    d0 = jax.jit(forward)(m, jax.tree.map(lambda x: x[0], final))
    return tuple(np.asarray(x) for x in (d0.qpos, d0.qvel, d0.act, d0.ctrl, d0.qacc))


def _mjx_lite_batch(path, disable: int, batch: int, nsteps: int, loop: str, x64: bool,
                    residual: bool) -> dict:
    """One mjx_lite batch size (run in a child process, see ``bench``)."""
    import functools

    import mjx_lite

    if x64:
        jax.config.update("jax_enable_x64", True)
    m = _mjx_lite_model(path, disable)
    d = mjx_lite.make_data(m)
    fn = _rollout_fn(functools.partial(mjx_lite.step, loop=loop), nsteps)
    db = _batch(d, batch, jax.random.key(0))
    final, t = measure(fn, m, db)
    out = {**t, "steps_per_s": batch * nsteps / t["run_s"],
           "niter": float(final.solver_niter.max(-1).mean())}  # the busiest island
    if residual:
        out["state"] = _state_at_end(functools.partial(mjx_lite.forward, loop=loop), m, final)
    return out


def _mjx_lite_model(path, disable: int):
    import mjx_lite

    m = mjx_lite.load_model(path)
    m = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | disable))
    if m.opt.solver == SolverType.PGS:  # MJX has no PGS: every engine runs Newton
        m = m.replace(opt=m.opt.replace(solver=SolverType.NEWTON))
    return m


def _mjx_batch(path, disable: int, batch: int, nsteps: int, x64: bool, residual: bool) -> dict:
    """One MJX batch size (run in a child process, see ``bench``)."""
    import mujoco
    from mujoco import mjx

    if x64:
        jax.config.update("jax_enable_x64", True)
    mjm = mujoco.MjModel.from_xml_path(str(path))
    mjm.opt.disableflags |= disable
    _newton_for_pgs(mjm)
    try:
        m = mjx.put_model(mjm)
        d = mjx.make_data(m)
    except Exception as e:  # noqa: BLE001 - MJX rejects some features; report, don't crash
        return {"model_error": f"{type(e).__name__}: {e}"[:120]}
    fn = _rollout_fn(mjx.step, nsteps)
    db = _batch(d, batch, jax.random.key(0))
    try:
        final, t = measure(fn, m, db, engine="MJX")
    except Exception as e:  # noqa: BLE001
        import traceback

        traceback.print_exc()  # the table keeps the type; the log gets the cause
        return {"error": f"{type(e).__name__}"}
    out = {**t, "steps_per_s": batch * nsteps / t["run_s"],
           "niter": None}  # MJX keeps its iteration count inside the solver, not in Data
    if residual:
        out["state"] = _state_at_end(mjx.forward, m, final)
    return out


def _child(queue, fn, args):
    queue.put(fn(*args))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, all threads (Linux /proc; 0 elsewhere)."""
    try:
        fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _in_child(fn, args, timeout_s: float, tries: int = 3, stall_s: float = 90) -> dict:
    """``fn(*args)`` in a fresh process, retried when it hangs. jaxlib 0.10's CPU runtime
    deadlocks now and then (every thread parked in a futex wait under a LAPACK solve's
    ``ParallelBatchMap``, see docs/batching.md), in mjx_lite's rollouts as in MJX's: a child
    whose CPU time has not grown for ``stall_s`` seconds is taken as hung, killed and run
    again; the result says how many tries it took."""
    import multiprocessing as mp
    import queue as queue_mod

    ctx = mp.get_context("spawn")
    for attempt in range(1, tries + 1):
        q = ctx.Queue()
        proc = ctx.Process(target=_child, args=(q, fn, args))
        proc.start()
        start, out = time.perf_counter(), None
        last_cpu, last_change = 0.0, start
        while out is None:
            try:
                out = q.get(timeout=10)
            except queue_mod.Empty:
                now, cpu = time.perf_counter(), _cpu_seconds(proc.pid)
                if cpu > last_cpu + 0.5:
                    last_cpu, last_change = cpu, now
                if not proc.is_alive():  # crashed (an exception in the child): no retry
                    try:
                        out = q.get(timeout=1)
                    except queue_mod.Empty:
                        out = {"error": f"child exited with code {proc.exitcode}"}
                elif now - last_change > stall_s:
                    out = {"error": f"hung (no CPU progress for {stall_s:.0f} s)"}
                elif now - start > timeout_s:
                    out = {"error": f"no result in {timeout_s:.0f} s"}
        proc.kill()
        proc.join()
        if "hung" not in out.get("error", ""):
            out["tries"] = attempt
            return out
    return out


def bench(batch_fn, path, disable: int, batches, nsteps: int, *args,
          residual: bool = True) -> dict:
    """Each batch size of one engine in a fresh child process (so jit seconds are never a
    cache hit), the first with the state for the residual column; a line per cell as it ends."""
    out = {}
    for b in batches:
        r = _in_child(batch_fn, (path, disable, b, nsteps, *args,
                                 residual and b == batches[0]), timeout_s=1800)
        print(f"  {batch_fn.__name__.strip('_')} {path.stem} batch {b}: " + ", ".join(
            f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
            for k, v in r.items() if k not in ("state", "split")), flush=True)
        if "model_error" in r:
            return {"error": r["model_error"]}
        out[b] = r
    return out


def _newton_for_pgs(mjm) -> None:
    """A model that asks for PGS runs Newton on every engine: MJX has no PGS."""
    import mujoco

    if mjm.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
        mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON


def bench_mujoco_c(path, disable: int, nsteps: int) -> dict:
    import mujoco

    mjm = mujoco.MjModel.from_xml_path(str(path))
    mjm.opt.disableflags |= disable
    _newton_for_pgs(mjm)
    mjd = mujoco.MjData(mjm)
    n = max(nsteps * 20, 1000)
    t0 = time.perf_counter()
    for _ in range(n):
        mujoco.mj_step(mjm, mjd)
    return {"steps_per_s": n / (time.perf_counter() - t0)}


def bench_factor(path, batch: int = 256, reps: int = 50) -> dict:
    """factor_m + solve_m at qpos0: MuJoCo's tree-sparse L'DL (unrolled over dofs) vs one
    dense Cholesky (smooth.FACTOR chooses; both give the same qLD), single call and vmapped."""
    import jax.numpy as jp

    import mjx_lite
    from mjx_lite import smooth

    m = mjx_lite.load_model(path)
    d = mjx_lite.make_data(m)
    qm = smooth.crb(m, smooth.com_pos(m, smooth.kinematics(m, d))).qM
    rhs = jp.ones(m.nv, qm.dtype)
    qms = jp.broadcast_to(qm, (batch,) + qm.shape)
    out = {"nv": m.nv}
    methods = {"tree-sparse": lambda q: smooth.factor_m_ltdl(m, q),
               "dense": smooth.factor_m_dense}
    for name, factor in methods.items():
        def solve(q, factor=factor):
            return smooth.solve_ltdl(*factor(q), rhs)

        for label, fn, arg in (("single", jax.jit(solve), qm),
                               (f"vmap{batch}", jax.jit(jax.vmap(solve)), qms)):
            jax.block_until_ready(fn(arg))
            t0 = time.perf_counter()
            for _ in range(reps):
                jax.block_until_ready(fn(arg))
            out[(name, label)] = (time.perf_counter() - t0) / reps * 1e6
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["ant", "humanoid"])
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 64, 1024])
    parser.add_argument("--steps", type=int, default=100, help="steps per rollout (scan length)")
    parser.add_argument("--disable", default="contact,limit,equality,frictionloss",
                        help="comma-separated disable flags applied to every engine ('' = none)")
    parser.add_argument("--x64", action="store_true", help="float64 (default float32)")
    parser.add_argument("--no-mjx", action="store_true")
    parser.add_argument("--loop", default="early_exit", choices=["early_exit", "fixed"],
                        help="mjx_lite's solver loop (MJX always exits early)")
    parser.add_argument("--suffix", default="",
                        help="appended to the result file's name, so a run of other batch "
                             "sizes does not overwrite an earlier table")
    parser.add_argument("--no-factor", action="store_true",
                        help="skip the tree-sparse vs dense factorization timings")
    parser.add_argument("--no-residual", action="store_true",
                        help="skip the residual column (its forward passes cost jit time)")
    add_xla_argument(parser)
    args = parser.parse_args(argv)
    print(use_xla_argument(args), flush=True)
    import mujoco

    if args.x64:
        jax.config.update("jax_enable_x64", True)
    disable = 0
    for name in filter(None, args.disable.split(",")):
        disable |= _FLAG_BITS[name]
    device = jax.devices()[0]
    header = (f"device: {device.platform} ({device.device_kind}), {os.cpu_count()} cpus, "
              f"{platform.processor() or platform.machine()}; dtype "
              f"{'float64' if args.x64 else 'float32'}; disabled: {args.disable or 'none'}; "
              f"{args.steps} steps per rollout; XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; "
              f"compile options: mjx_lite {xla_options()} (--xla {args.xla}), MJX "
              f"{xla_options('MJX')} (--mjx-xla {args.mjx_xla}); "
              f"mjx_lite solver loop {args.loop!r}; models "
              f"that ask for PGS run Newton on every engine (MJX has no PGS); "
              f"each engine and batch size in a fresh process; solver iters = mean over the "
              f"batch of the final step's count (MJX does not record it); residual = "
              f"|M qacc - qfrc_smooth - J'f| / trace(M) with mjx_lite's constraint model, at "
              f"batch member 0's final state, qacc from the engine's own warm-started forward "
              f"there (first batch size only)")
    lines = [header, "", "| model | engine | load s | batch | jit s | steps/s | "
             "peak MB | solver iters | residual |", "|---|---|---|---|---|---|---|---|---|"]
    print(header)
    plot_rows: list = []
    notes: list = []
    for name in args.models:
        path = _model_path(name)
        t0 = time.perf_counter()
        ours = _mjx_lite_model(path, disable)
        load_s = {"mjx_lite": time.perf_counter() - t0}
        t0 = time.perf_counter()
        mujoco.MjModel.from_xml_path(str(path))
        load_s["MJX"] = time.perf_counter() - t0
        residual = not args.no_residual
        results = {"mjx_lite": bench(_mjx_lite_batch, path, disable, args.batches, args.steps,
                                     args.loop, args.x64, residual=residual)}
        if not args.no_mjx:
            results["MJX"] = bench(_mjx_batch, path, disable, args.batches, args.steps,
                                   args.x64, residual=residual)
        for engine, res in results.items():
            res["load_s"] = load_s[engine]
            retried = {b: r["tries"] for b, r in res.items() if isinstance(r, dict)
                       and r.get("tries", 1) > 1}
            if retried:
                notes.append(f"{name} {engine}: hung and re-run, tries per batch {retried}")
                print(notes[-1])
            for b in args.batches:
                r = res.get(b, {})
                if "state" in r:
                    r["residual"] = solver_residual(ours, *r.pop("state"))
        results["MuJoCo C (1 thread)"] = bench_mujoco_c(path, disable, args.steps)
        for engine, res in results.items():
            if "error" in res:
                lines.append(f"| {name} | {engine} | | | | {res['error']} | | | |")
                continue
            load = f"{res['load_s']:.3f}" if "load_s" in res else ""
            if engine.startswith("MuJoCo C"):
                lines.append(f"| {name} | {engine} | | 1 | | {res['steps_per_s']:.0f} | | | |")
                plot_rows += [(name, engine, b, res["steps_per_s"]) for b in args.batches]
                continue
            for b in args.batches:
                r = res.get(b, {})
                if "error" in r:
                    lines.append(f"| {name} | {engine} | {load} | {b} | | {r['error']} | | | |")
                else:
                    niter = "n/a" if r["niter"] is None else f"{r['niter']:.1f}"
                    residual = f"{r['residual']:.1e}" if "residual" in r else ""
                    peak = "" if r["peak_mb"] is None else f"{r['peak_mb']:.2f}"
                    lines.append(f"| {name} | {engine} | {load} | {b} | {r['jit_s']:.2f} | "
                                 f"{r['steps_per_s']:.0f} | {peak} | {niter} | "
                                 f"{residual} |")
                    plot_rows.append((name, engine, b, r["steps_per_s"]))
        print("\n".join(lines[-(len(args.batches) * 2 + 1):]), flush=True)
    if not args.no_factor:
        lines += ["", f"factor_m + solve_m, one right-hand side, microseconds per call "
                  f"(smooth.FACTOR = {_factor_choice()!r} is used by step)", "",
                  "| model | nv | method | single | vmap 256 |", "|---|---|---|---|---|"]
        for name in args.models:
            res = bench_factor(_model_path(name))
            for method in ("tree-sparse", "dense"):
                lines.append(f"| {name} | {res['nv']} | {method} | "
                             f"{res[(method, 'single')]:.0f} | {res[(method, 'vmap256')]:.0f} |")
    if notes:
        lines += ["", "XLA CPU deadlocks (docs/batching.md), cells re-run:", ""]
        lines += [f"- {n}" for n in notes]
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(exist_ok=True)
    tag = "smooth" if disable & _FLAG_BITS["contact"] else "contact"
    out = out_dir / f"{device.platform}_{'x64' if args.x64 else 'x32'}_{tag}{args.suffix}.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[2:]))
    print(f"written to {out.relative_to(ROOT)}")
    png = _plot(plot_rows, out.with_suffix(".png"), header)
    if png:
        print(f"plot: {png.relative_to(ROOT)}")


def _plot(rows: list, path: pathlib.Path, title: str):
    """steps/s against batch size, one line per (model, engine); MuJoCo C as a flat line.
    Needs matplotlib (the `plots` extra); without it, no figure."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (model, engine), pts in sorted(rows_by_series(rows).items()):
        xs, ys = zip(*sorted(pts))
        style = "--" if engine.startswith("MuJoCo C") else "-o"
        ax.plot(xs, ys, style, label=f"{model} / {engine}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("steps/s (batch x steps / wall s)")
    ax.set_title(title[:90], fontsize=7)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def rows_by_series(rows: list) -> dict:
    series: dict = {}
    for model, engine, batch, sps in rows:
        series.setdefault((model, engine), []).append((batch, sps))
    return series


if __name__ == "__main__":
    main()

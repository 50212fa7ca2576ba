"""The ``mjx-lite`` command: inspect a model, run a batched rollout, benchmark.

    mjx-lite info MODEL.xml
    mjx-lite simulate MODEL.xml --steps N --batch B [--x64] [--html out.html] [--ctrl random|zero]
                      [--plot heights.png]
    mjx-lite bench [ARGS...]

Bad input (missing file, malformed XML, unsupported feature: MJCFError, OSError or the
pipeline's NotImplementedError) prints one line and exits with 2.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import math
import pathlib
import subprocess
import sys
import time

import numpy as np

EXIT_BAD_INPUT = 2
_GEOM = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf")
_JOINT = ("free", "ball", "slide", "hinge")
_DYN = ("none", "integrator", "filter", "filterexact", "muscle", "user")
_GAIN = ("fixed", "affine", "muscle", "user")
_BIAS = ("none", "affine", "muscle", "user")
_EQ = ("connect", "weld", "joint", "tendon", "flex", "distance")
_INTEGRATOR = ("Euler", "RK4", "implicit", "implicitfast")
_CONE = ("pyramidal", "elliptic")
_SOLVER = ("PGS", "CG", "Newton")


def _name(table: tuple[str, ...], i: int) -> str:
    return table[i] if 0 <= i < len(table) else str(i)


def _counts(values, table) -> str:
    c = collections.Counter(_name(table, int(v)) for v in np.asarray(values).reshape(-1))
    return ", ".join(f"{k} x{n}" for k, n in sorted(c.items())) or "none"


def _load(path: str):
    import mjx_lite

    t0 = time.perf_counter()
    m = mjx_lite.load_model(path)
    return m, time.perf_counter() - t0


def features(m) -> dict[str, str]:
    """The MJCF features a compiled model uses, as printable lines keyed by topic."""
    out = {
        "integrator": _name(_INTEGRATOR, int(m.opt.integrator)),
        "solver": f"{_name(_SOLVER, int(m.opt.solver))}, cone "
                  f"{_name(_CONE, int(m.opt.cone))}, {m.opt.iterations} iterations",
        "joints": _counts(m.jnt_type, _JOINT),
        "geoms": _counts(m.geom_type, _GEOM),
    }
    if m.nu:
        out["actuator dyn"] = _counts(m.actuator_dyntype, _DYN)
        out["actuator gain"] = _counts(m.actuator_gaintype, _GAIN)
        out["actuator bias"] = _counts(m.actuator_biastype, _BIAS)
    if m.ntendon:
        out["tendons"] = f"{m.ntendon} ({m.nwrap} wrap objects)"
    if m.neq:
        out["equality"] = _counts(m.eq_type, _EQ)
    if m.nsensor:
        c = collections.Counter(_sensor_name(int(v)) for v in np.asarray(m.sensor_type))
        out["sensors"] = ", ".join(f"{k} x{n}" for k, n in sorted(c.items()))
    if m.nmesh:
        out["meshes"] = f"{m.nmesh} ({m.nmeshvert} vertices, {m.nmeshface} faces)"
    if m.nhfield:
        out["height fields"] = str(m.nhfield)
    if m.npair or m.nexclude:
        out["contact pairs"] = f"{m.npair} explicit, {m.nexclude} excluded"
    limited = int(np.sum(np.asarray(m.jnt_limited)))
    if limited:
        out["joint limits"] = f"{limited} limited joints"
    if m.nkey:
        out["keyframes"] = str(m.nkey)
    return out


def _sensor_name(v: int) -> str:
    from mjx_lite.types import SensorType

    try:
        return SensorType(v).name.lower()
    except ValueError:
        return str(v)


def unsupported(m) -> list[str]:
    """Features the compiler accepts but the simulation pipeline does not act on."""
    notes = []
    try:  # the collision stage reports the geom pairs it has no function for
        from mjx_lite.collision.driver import missing_colliders
    except ImportError:
        missing_colliders = None
    if missing_colliders is not None:
        notes += [f"collision {pair}" for pair in missing_colliders(m)]
    elif np.any(np.asarray(m.geom_type) == 8):
        notes.append("sdf geoms (no collision function)")
    return notes


def cmd_info(args) -> int:
    m, load_s = _load(args.model)
    print(f"{args.model}")
    print(f"  compile: {load_s:.3f} s")
    sizes = ("nq", "nv", "nu", "na", "nbody", "njnt", "ngeom", "nsite", "ncam", "nlight",
             "nmesh", "nhfield", "nmat", "ntendon", "neq", "nsensor", "nkey", "nmocap")
    print("  sizes: " + " ".join(f"{k}={getattr(m, k)}" for k in sizes))
    print(f"  timestep: {float(np.asarray(m.opt.timestep)):g} s")
    for k, v in features(m).items():
        print(f"  {k}: {v}")
    notes = unsupported(m)
    print("  unsupported: " + ("; ".join(notes) if notes else "none"))
    return 0


class _Progress:
    """A one-line text progress bar on stderr."""

    open = False  # a bar's line is on stderr without its newline yet

    def __init__(self, label: str, total: int, stream=None):
        self.label, self.total, self.stream = label, total, stream or sys.stderr
        self.t0 = time.perf_counter()

    def update(self, done: int) -> None:
        width = 30
        frac = done / max(self.total, 1)
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        rate = done / max(time.perf_counter() - self.t0, 1e-9)
        self.stream.write(f"\r{self.label:<9}[{bar}] {done}/{self.total} ({rate:,.0f}/s)")
        self.stream.flush()
        _Progress.open = True

    def done(self, note: str = "") -> None:
        self.stream.write(f"\r{self.label:<9}done in {time.perf_counter() - self.t0:.2f} s"
                          f"{note}{' ' * 30}\n")
        self.stream.flush()
        _Progress.open = False


def _ctrl_sampler(m, kind: str):
    import jax
    import jax.numpy as jp

    lo = np.where(np.asarray(m.actuator_ctrllimited), np.asarray(m.actuator_ctrlrange)[:, 0], -1)
    hi = np.where(np.asarray(m.actuator_ctrllimited), np.asarray(m.actuator_ctrlrange)[:, 1], 1)

    def sample(key, shape):
        if kind == "zero" or m.nu == 0:
            return jp.zeros(shape + (m.nu,))
        return jax.random.uniform(key, shape + (m.nu,), minval=jp.asarray(lo),
                                  maxval=jp.asarray(hi))

    return sample


def _rollout_fn(m, nsteps: int, ctrl: str, record: int, loop: str = "fixed"):
    """jit(d_batched, key) -> (d, poses of the first ``record`` members per step)."""
    import jax

    import mjx_lite

    sample = _ctrl_sampler(m, ctrl)
    step = jax.vmap(lambda d: mjx_lite.step(m, d, loop=loop))

    def run(d, key):
        def body(d, k):
            new = step(d.replace(ctrl=sample(k, d.ctrl.shape[:1])))
            # The scan carry must keep its dtypes even where a stage widens an int field.
            d = jax.tree_util.tree_map(lambda a, b: a.astype(b.dtype), new, d)
            return d, (d.xpos[:record], d.xquat[:record], d.time[0])

        return jax.lax.scan(body, d, jax.random.split(key, nsteps))

    return jax.jit(run, compiler_options=mjx_lite.compiler_options())


def cmd_simulate(args) -> int:
    import jax

    if args.x64:
        jax.config.update("jax_enable_x64", True)
    import mjx_lite
    from mjx_lite.errors import MJCFError
    from mjx_lite.types import DisableBit

    m, load_s = _load(args.model)
    flags = {"constraint": DisableBit.CONSTRAINT, "contact": DisableBit.CONTACT,
             "limit": DisableBit.LIMIT, "equality": DisableBit.EQUALITY}
    disable = 0
    for name in filter(None, args.disable.split(",")):
        if name not in flags:
            raise MJCFError(f"--disable: unknown flag {name!r} (one of {', '.join(flags)})")
        disable |= flags[name]
    m = m.replace(opt=m.opt.replace(disableflags=int(m.opt.disableflags) | int(disable)))
    print(f"compile model: {load_s:.3f} s ({m.nbody} bodies, nv={m.nv}, nu={m.nu})")
    d = mjx_lite.make_data(m)
    db = jax.tree_util.tree_map(lambda x: jax.numpy.broadcast_to(x, (args.batch,) + x.shape), d)
    if args.plot:
        _require_matplotlib()
    record = min(args.batch, args.html_members) if args.html or args.plot else 1
    chunk = max(1, math.ceil(args.steps / 50))
    nfull, rem = divmod(args.steps, chunk)
    key = jax.random.key(args.seed)

    bar = _Progress("jit", 1)
    bar.update(0)
    fns = {}
    for n in {chunk if nfull else 0, rem} - {0}:
        fns[n] = _rollout_fn(m, n, args.ctrl, record, args.loop).lower(db, key).compile()
    bar.done()

    poses, done = [], 0
    bar = _Progress("simulate", args.steps)
    t0 = time.perf_counter()
    while done < args.steps:
        n = chunk if args.steps - done >= chunk else rem
        key, sub = jax.random.split(key)
        db, rec = fns[n](db, sub)
        if args.html or args.plot:
            poses.append(jax.device_get(rec))
        else:
            jax.block_until_ready(db.qpos)
        done += n
        bar.update(done)
    jax.block_until_ready(db.qpos)
    wall = time.perf_counter() - t0
    bar.done()
    print(f"{args.steps} steps x {args.batch} batch in {wall:.3f} s: "
          f"{args.steps * args.batch / wall:,.0f} steps/s "
          f"({args.steps / wall:,.0f} batched steps/s, {'float64' if args.x64 else 'float32'}, "
          f"{args.loop} solver loop)")
    if not np.all(np.isfinite(np.asarray(db.qpos))):
        print("warning: the final state has non-finite qpos", file=sys.stderr)
    if args.plot:
        _plot(m, poses, args.plot, args.model)
        print(f"wrote {args.plot}")
    if args.html:
        from mjx_lite import viewer

        xpos = np.concatenate([p[0] for p in poses])
        xquat = np.concatenate([p[1] for p in poses])
        times = np.concatenate([p[2] for p in poses])
        path = viewer.save_html(m, (xpos, xquat, times), args.html, quantize=not args.no_quantize,
                                title=pathlib.Path(args.model).name)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB, {record} batch members)")
    return 0


def _require_matplotlib():
    if importlib.util.find_spec("matplotlib") is None:
        raise OSError("--plot needs matplotlib: pip install 'mjx_lite[plots]'")


def _plot(m, poses, path: str, title: str) -> None:
    """Height of each moving body's origin over time, one panel per recorded batch member
    (at most 4), saved as a PNG."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    xpos = np.concatenate([p[0] for p in poses])  # (T, B, nbody, 3)
    times = np.concatenate([p[2] for p in poses])
    nplot = min(xpos.shape[1], 4)
    fig, axes = plt.subplots(1, nplot, figsize=(4 * nplot, 3), squeeze=False, sharey=True)
    names = dict(m.names).get("body", ()) if m.names else ()
    for b, ax in enumerate(axes[0]):
        for i in range(1, m.nbody):
            ax.plot(times, xpos[:, b, i, 2], lw=1, label=names[i] if i < len(names) else str(i))
        ax.set_title(f"batch member {b}")
        ax.set_xlabel("time (s)")
    axes[0, 0].set_ylabel("body height z (m)")
    if m.nbody <= 12:
        axes[0, -1].legend(fontsize=7)
    fig.suptitle(pathlib.Path(title).name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _builtin_bench(argv) -> int:
    import jax

    import mjx_lite

    path = pathlib.Path(mjx_lite.__file__).parent / "assets" / "pendulum.xml"
    m = mjx_lite.load_model(path)
    d = mjx_lite.make_data(m)
    nsteps = 100
    print(f"built-in benchmark: {path.name}, {nsteps} steps per rollout, "
          f"{jax.devices()[0].platform}")
    for batch in (1, 64):
        db = jax.tree_util.tree_map(lambda x, b=batch: jax.numpy.broadcast_to(x, (b,) + x.shape),
                                    d)
        fn = _rollout_fn(m, nsteps, "zero", 1)
        key = jax.random.key(0)
        t0 = time.perf_counter()
        compiled = fn.lower(db, key).compile()
        jit_s = time.perf_counter() - t0
        jax.block_until_ready(compiled(db, key))
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(db, key))
        run_s = time.perf_counter() - t0
        print(f"  batch {batch:5d}: jit {jit_s:.2f} s, {batch * nsteps / run_s:,.0f} steps/s")
    return 0


def _find_runner() -> pathlib.Path | None:
    for root in (pathlib.Path.cwd(), pathlib.Path(__file__).resolve().parent.parent):
        if (root / "benchmarks" / "run.py").is_file():
            return root / "benchmarks" / "run.py"
    return None


def cmd_bench(args) -> int:
    runner = _find_runner()
    if runner is None:
        return _builtin_bench(args.rest)
    # as a script in its own interpreter: the runner starts each cell in a spawned child,
    # which must be able to import the runner's functions by the module it was run as
    proc = subprocess.Popen([sys.executable, str(runner), *args.rest], stdout=subprocess.PIPE,
                            text=True)
    for line in proc.stdout:
        print(line, end="", flush=True)
    return proc.wait()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mjx-lite", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="sizes, features, unsupported parts, compile time")
    info.add_argument("model")
    info.set_defaults(fn=cmd_info)
    sim = sub.add_parser("simulate", help="a batched rollout with progress and steps/s")
    sim.add_argument("model")
    sim.add_argument("--steps", type=int, default=1000)
    sim.add_argument("--batch", type=int, default=1)
    sim.add_argument("--x64", action="store_true", help="float64 (default float32)")
    sim.add_argument("--html", help="write the trajectory viewer to this file")
    sim.add_argument("--html-members", type=int, default=16,
                     help="batch members stored in the viewer file (default 16)")
    sim.add_argument("--no-quantize", action="store_true",
                     help="store float32 poses in the viewer file (default int16)")
    sim.add_argument("--plot", help="write a PNG of body heights over time (needs matplotlib)")
    sim.add_argument("--ctrl", choices=("random", "zero"), default="zero")
    sim.add_argument("--seed", type=int, default=0)
    # Nothing is differentiated here, so the solver stops where MuJoCo's would; under vmap
    # the batch runs until its slowest member converges.
    sim.add_argument("--loop", choices=("early_exit", "fixed"), default="early_exit",
                     help="solver loop: stop at the tolerance (default) or run every iteration")
    sim.add_argument("--disable", default="",
                     help="comma-separated: constraint, contact, limit, equality")
    sim.set_defaults(fn=cmd_simulate)
    bench = sub.add_parser("bench", help="benchmarks/run.py if in the checkout, else a small one")
    bench.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for the runner")
    bench.set_defaults(fn=cmd_bench)
    return p


def main(argv=None) -> int:
    """Entry point of the ``mjx-lite`` script; returns the exit code."""
    from mjx_lite.errors import MJCFError

    p = parser()
    args, extra = p.parse_known_args(argv)
    if args.command == "bench":
        args.rest = extra + list(args.rest)  # everything after "bench" goes to the runner
    elif extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "steps", 1) < 1 or getattr(args, "batch", 1) < 1:
        print("mjx-lite: error: --steps and --batch must be positive", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return args.fn(args)
    except (MJCFError, OSError, NotImplementedError) as e:
        if _Progress.open:  # the error goes on a line of its own, below the bar
            print(file=sys.stderr)
            _Progress.open = False
        print(f"mjx-lite: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())

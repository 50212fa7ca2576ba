"""A/B of two source trees in one process: the same rollout program compiled from each tree's
``mjx_lite``, timed in alternation, so that the host's drift (this 2-core CI host's run times
move by 5-10% between processes minutes apart) falls on both alike.

    git worktree add /tmp/base HEAD
    python benchmarks/ab.py /tmp/base . --model humanoid --program implicit --rounds 15

Each tree's package is copied under its own name (``mjx_lite_a``, ``mjx_lite_b``: the
package's own imports renamed), both programs are compiled, then each round runs one after
the other. Programs, built by ``grad.py``'s helpers: ``forward`` (a 100-step ``rollout``, the
model's solver set to ``--solver`` with ``--iterations``) or ``implicit`` (the gradient of a
loss of its final state w.r.t. the controls, early-exit loop, implicit adjoint) or
``fwd-implicit`` (the forward of that gradient's options, evaluated only). Prints jit
seconds, min and median run ms, peak memory (``run.peak_mb``) and a checksum of the output
per tree.
"""

from __future__ import annotations

import argparse
import importlib
import pathlib
import re
import shutil
import sys
import tempfile
import time

import jax
import jax.numpy as jp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from grad import _batch, _named_programs, mjx_lite_programs  # noqa: E402
from run import _model_path, add_xla_argument, peak_mb, use_xla_argument, xla_options  # noqa: E402


def _copy_package(tree: pathlib.Path, name: str, dest: pathlib.Path) -> None:
    target = dest / name
    shutil.copytree(tree / "mjx_lite", target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in target.rglob("*.py"):
        path.write_text(re.sub(r"\bmjx_lite\b", name, path.read_text()))


def _program(pkg: str, args):
    m, d, forward, grad = mjx_lite_programs(importlib.import_module(pkg),
                                            _model_path(args.model), args.steps,
                                            args.iterations, args.solver)
    fn = _named_programs(forward, grad)[args.program]
    ds = _batch(d, args.batch, jax.random.key(0))
    ctrls = jp.zeros((args.batch, args.steps, m.nu), d.qpos.dtype)
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(ds, ctrls).compile(compiler_options=xla_options() or None)
    jit_s = time.perf_counter() - start
    out = jax.block_until_ready(compiled(ds, ctrls))
    return compiled, (ds, ctrls), jit_s, float(np.sum(np.abs(np.asarray(out)))), peak_mb(compiled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree_a", type=pathlib.Path)
    parser.add_argument("tree_b", type=pathlib.Path)
    parser.add_argument("--model", default="humanoid")
    parser.add_argument("--program", choices=["forward", "fwd-implicit", "implicit"],
                        default="implicit")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--solver", choices=["NEWTON", "CG"], default="NEWTON")
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    add_xla_argument(parser)
    args = parser.parse_args()
    print(use_xla_argument(args), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        names = ("mjx_lite_a", "mjx_lite_b")
        for tree, name in zip((args.tree_a, args.tree_b), names):
            _copy_package(tree.resolve(), name, tmp)
        sys.path.insert(0, str(tmp))
        programs = {name: _program(name, args) for name in names}
        times = {name: [] for name in names}
        for _ in range(args.rounds):
            for name, (compiled, inputs, *_) in programs.items():
                start = time.perf_counter()
                jax.block_until_ready(compiled(*inputs))
                times[name].append((time.perf_counter() - start) * 1e3)
    for name, tree in zip(names, (args.tree_a, args.tree_b)):
        _, _, jit_s, checksum, peak = programs[name]
        run = np.array(times[name])
        print(f"{name} ({tree}) {args.model} {args.program} batch {args.batch}: jit {jit_s:.1f} s,"
              f" run min {run.min():.1f} median {np.median(run):.1f} ms,"
              f" peak {peak:.1f} MB, output checksum {checksum:.9e}")


if __name__ == "__main__":
    main()

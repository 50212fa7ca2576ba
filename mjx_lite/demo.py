"""``python -m mjx_lite.demo``: simulate the bundled pendulum model and say what happened.

Loads ``mjx_lite/assets/pendulum.xml`` (a single and a double pendulum) with mjx_lite's own
compiler, rolls it out under ``jax.jit`` from the "swing" keyframe, then runs a ``jax.vmap``
batch of rollouts from different starting angles, and prints time, energy, final angles and
steps per second.
"""

from __future__ import annotations

import argparse
import importlib.resources
import sys
import time

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite

# The public names the demo uses; the pipeline ones land with the smooth-dynamics issue.
_REQUIRED = ("load_model", "make_data", "step", "forward", "full_m")


def _missing_api() -> list[str]:
    return [name for name in _REQUIRED if not hasattr(mjx_lite, name)]


def energy(m: mjx_lite.Model, d: mjx_lite.Data) -> tuple[jax.Array, jax.Array]:
    """Potential and kinetic energy, computed from a forward pass (as MuJoCo's mj_energy*)."""
    d = mjx_lite.forward(m, d)
    potential = -jp.sum(m.body_mass * (d.xipos @ m.opt.gravity))
    kinetic = 0.5 * d.qvel @ mjx_lite.full_m(m, d) @ d.qvel
    return potential, kinetic


def rollout(m: mjx_lite.Model, d: mjx_lite.Data, steps: int) -> mjx_lite.Data:
    """``steps`` calls of mjx_lite.step in one lax.scan."""
    d, _ = jax.lax.scan(lambda d, _: (mjx_lite.step(m, d), None), d, None, length=steps)
    return d


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="steps per rollout")
    parser.add_argument("--batch", type=int, default=64, help="rollouts in the vmap batch")
    args = parser.parse_args(argv)

    missing = _missing_api()
    if missing:
        print(f"mjx_lite {mjx_lite.__version__} does not provide {', '.join(missing)} yet; "
              "the demo needs the compiler and the simulation pipeline.", file=sys.stderr)
        return 1

    path = importlib.resources.files("mjx_lite") / "assets" / "pendulum.xml"
    with importlib.resources.as_file(path) as file:
        m = mjx_lite.load_model(str(file))
    d0 = mjx_lite.make_data(m).replace(qpos=m.key_qpos[0])
    print(f"model: {path.name}: nbody={m.nbody} nq={m.nq} nv={m.nv}, "
          f"timestep={float(m.opt.timestep):g} s, dtype={m.body_mass.dtype}")

    run = jax.jit(rollout, static_argnums=2)
    tic = time.perf_counter()
    jax.block_until_ready(run(m, d0, args.steps))
    compile_s = time.perf_counter() - tic
    tic = time.perf_counter()
    d = jax.block_until_ready(run(m, d0, args.steps))
    run_s = time.perf_counter() - tic

    e0 = [float(x) for x in jax.jit(energy)(m, d0)]
    e1 = [float(x) for x in jax.jit(energy)(m, d)]
    angles = np.degrees(np.asarray(d.qpos))
    print(f"single rollout: {args.steps} steps to t={float(d.time):.3f} s "
          f"(first call incl. jit {compile_s:.2f} s, then {args.steps / run_s:,.0f} steps/s)")
    print(f"energy (potential + kinetic): {sum(e0):.6f} J -> {sum(e1):.6f} J "
          "(joint damping dissipates)")
    print("final angles (deg): single {:.2f}; double {:.2f}, {:.2f}".format(*angles))

    # A batch of starting angles for the single pendulum: vmap over Data.
    starts = jp.linspace(-1.5, 1.5, args.batch)
    batch = jax.vmap(lambda a: d0.replace(qpos=d0.qpos.at[0].set(a)))(starts)
    run_batch = jax.jit(jax.vmap(rollout, in_axes=(None, 0, None)), static_argnums=2)
    jax.block_until_ready(run_batch(m, batch, args.steps))
    tic = time.perf_counter()
    out = jax.block_until_ready(run_batch(m, batch, args.steps))
    batch_s = time.perf_counter() - tic
    spread = np.degrees(np.asarray(out.qpos[:, 0]))
    print(f"vmap batch of {args.batch}: {args.batch * args.steps / batch_s:,.0f} steps/s; "
          f"final single-pendulum angles {spread.min():.1f} .. {spread.max():.1f} deg")
    return 0


if __name__ == "__main__":
    sys.exit(main())

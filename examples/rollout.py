"""Roll out a batch of gym hoppers with random controls: jit + vmap over step.

Run: python examples/rollout.py [--batch 16] [--steps 200]
The model is read with MuJoCo's compiler through mjx_lite.interop (mjx_lite's own compiler can
replace it); contacts and limits are disabled because the constraint solver is not wired in yet.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite.forward import step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    import gymnasium
    import mujoco

    from mjx_lite import interop

    path = pathlib.Path(gymnasium.__file__).parent / "envs/mujoco/assets/hopper.xml"
    mjm = mujoco.MjModel.from_xml_path(str(path))
    mjm.opt.disableflags |= 16 | 8 | 2 | 4  # smooth dynamics only
    m = interop.model_from_mujoco(mjm)
    d = mjx_lite.make_data(m)

    key = jax.random.PRNGKey(0)
    ctrl = 0.5 * jax.random.normal(key, (args.batch, args.steps, m.nu))
    batch = jax.vmap(lambda _: d)(jp.arange(args.batch))

    @jax.jit
    def rollout(d, ctrl):
        def body(d, u):
            d = step(m, d.replace(ctrl=u))
            return d, d.qpos[1]
        return jax.lax.scan(body, d, ctrl)

    run = jax.vmap(rollout)
    t0 = time.perf_counter()
    final, height = jax.block_until_ready(run(batch, ctrl))
    t1 = time.perf_counter()
    final, height = jax.block_until_ready(run(batch, ctrl))
    t2 = time.perf_counter()
    print(f"jit + first run {t1 - t0:.1f} s; {args.batch * args.steps / (t2 - t1):.0f} steps/s")
    print("final time", float(final.time[0]), "mean torso height", float(np.mean(height[:, -1])))


if __name__ == "__main__":
    main()

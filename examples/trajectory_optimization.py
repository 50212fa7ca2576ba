"""Cartpole swing-up by gradient descent on open-loop controls through a 200-step rollout.

Run: python examples/trajectory_optimization.py [--iterations 300] [--png cost.png]

The pole starts hanging (angle pi); the controls u_t = tanh(w_t) stay inside ctrlrange, and
Adam on w minimizes a running cost plus a terminal cost on the upright pole. The gradient runs
through ``mjx_lite.rollout`` with the implicit solver adjoint and the early-exit loop (the
rail limits are the constraints). Prints the final pole angle and saves cost vs iteration.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite

MODEL = pathlib.Path(__file__).resolve().parent.parent / "models" / "cartpole.xml"
STEPS = 200


def wrap(angle):
    """Angle from upright, in (-pi, pi]."""
    return jp.arctan2(jp.sin(angle), jp.cos(angle))


def make_cost(m, d):
    def cost(w):
        ctrls = jp.tanh(w)[:, None]
        final, traj = mjx_lite.rollout(m, d, ctrls, loop="early_exit", adjoint="implicit",
                                       fields=("qpos", "qvel"))
        up = 1.0 - jp.cos(traj["qpos"][:, 1])  # 0 upright, 2 hanging
        run = jp.mean(up) + 0.01 * jp.mean(traj["qpos"][:, 0] ** 2) + 1e-3 * jp.mean(ctrls**2)
        end = (10.0 * (1.0 - jp.cos(final.qpos[1])) + 0.1 * final.qvel[1] ** 2
               + 0.1 * final.qvel[0] ** 2)
        return run + end, final

    return cost


def optimize(iterations: int = 300, lr: float = 0.1, seed: int = 0):
    """Adam on the open-loop controls; returns (costs per iteration, final pole angle)."""
    m = mjx_lite.load_model(str(MODEL))
    d = mjx_lite.make_data(m)
    d = d.replace(qpos=d.qpos.at[1].set(jp.pi))
    cost = make_cost(m, d)
    grad = jax.jit(jax.value_and_grad(cost, has_aux=True))
    w = 0.1 * jax.random.normal(jax.random.PRNGKey(seed), (STEPS,))
    mom, var = jp.zeros_like(w), jp.zeros_like(w)
    b1, b2 = 0.9, 0.999
    costs, angle = [], None
    for i in range(1, iterations + 1):
        (c, final), g = grad(w)
        costs.append(float(c))
        angle = float(wrap(final.qpos[1]))
        mom = b1 * mom + (1 - b1) * g
        var = b2 * var + (1 - b2) * g * g
        w = w - lr * (mom / (1 - b1**i)) / (jp.sqrt(var / (1 - b2**i)) + 1e-8)
    return np.asarray(costs), angle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--png", default="trajectory_optimization.png")
    args = parser.parse_args()
    t = time.time()
    costs, angle = optimize(args.iterations)
    print(f"cost {costs[0]:.3f} -> {costs[-1]:.3f}; final pole angle from upright "
          f"{angle:+.4f} rad; {time.time() - t:.1f} s")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.semilogy(costs)
    ax.set_xlabel("iteration")
    ax.set_ylabel("cost")
    ax.set_title("cartpole swing-up (200-step rollout)")
    fig.tight_layout()
    fig.savefig(args.png, dpi=100)
    print(f"saved {args.png}")


if __name__ == "__main__":
    main()

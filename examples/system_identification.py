"""System identification on gymnasium's hopper: body masses and joint damping from 2 s of
trajectory under random controls, with contacts.

Run: python examples/system_identification.py [--seconds 2] [--iterations 8]

A "true" hopper generates a trajectory (random controls, falling onto the floor). The model
to identify starts with every body mass and every nonzero dof damping perturbed by +-30%.
Each recorded transition (qpos, qvel, ctrl) -> next qvel is predicted by one ``step`` of the
candidate model (equation error: well conditioned, where matching a whole chaotic 2 s
trajectory is not), and Gauss-Newton on the prediction residuals recovers the parameters;
the residual Jacobian w.r.t. the parameters is forward-mode AD (``jax.jacfwd``) through
``step`` with the implicit solver adjoint, vmapped over the transitions.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite


def hopper_path() -> pathlib.Path:
    import importlib.util

    spec = importlib.util.find_spec("gymnasium")
    root = pathlib.Path(next(iter(spec.submodule_search_locations)))
    return root / "envs" / "mujoco" / "assets" / "hopper.xml"


def simulate(m, d, ctrls):
    """States before each step and qvel after it, for every control row."""
    def one(d, u):
        d = d.replace(ctrl=u)
        nxt = mjx_lite.step(m, d, loop="early_exit", adjoint="implicit")
        return nxt, (d.qpos, d.qvel, d.qacc_warmstart, u, nxt.qvel)

    _, rec = jax.lax.scan(one, d, ctrls)
    return rec


def identify(seconds: float = 2.0, iterations: int = 8, stride: int = 1, seed: int = 0):
    """Returns (true, initial, identified) parameter vectors [body masses, nonzero damping]."""
    m = mjx_lite.load_model(str(hopper_path()))
    d = mjx_lite.make_data(m)
    rng = np.random.default_rng(seed)
    steps = int(round(seconds / float(m.opt.timestep)))
    ctrls = jp.asarray(rng.uniform(-1.0, 1.0, (steps, m.nu)))
    qpos, qvel, warm, ctrl, qvel_next = jax.jit(simulate)(m, d, ctrls)
    sel = slice(None, None, stride)
    qpos, qvel, warm, ctrl, qvel_next = (x[sel] for x in (qpos, qvel, warm, ctrl, qvel_next))

    bodies = np.arange(1, m.nbody)
    dofs = np.nonzero(np.asarray(m.dof_damping) > 0)[0]
    true = np.concatenate([np.asarray(m.body_mass)[bodies], np.asarray(m.dof_damping)[dofs]])
    guess = true * (1.0 + 0.3 * rng.choice([-1.0, 1.0], true.shape))
    h = m.opt.timestep

    def residuals(scale):
        p = jp.asarray(guess) * scale
        mm = m.replace(body_mass=m.body_mass.at[bodies].set(p[:bodies.size]),
                       dof_damping=m.dof_damping.at[dofs].set(p[bodies.size:]))

        def one(qp, qv, w, u, target):
            di = d.replace(qpos=qp, qvel=qv, qacc_warmstart=w, ctrl=u)
            nxt = mjx_lite.step(mm, di, loop="early_exit", adjoint="implicit")
            return (nxt.qvel - target) / h  # an acceleration error

        return jax.vmap(one)(qpos, qvel, warm, ctrl, qvel_next).ravel()

    lin = jax.jit(lambda s: (residuals(s), jax.jacfwd(residuals)(s)))
    scale = jp.ones(true.shape)
    for _ in range(iterations):
        r, jac = lin(scale)
        # Gauss-Newton with a small Levenberg damping for the first, far-off steps
        jtj = jac.T @ jac
        delta = jp.linalg.solve(jtj + 1e-9 * jp.trace(jtj) * jp.eye(scale.size), -jac.T @ r)
        scale = scale + delta
    return true, guess, guess * np.asarray(scale)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--stride", type=int, default=1)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    t = time.time()
    true, guess, found = identify(args.seconds, args.iterations, args.stride)
    err0 = np.abs(guess / true - 1).max()
    err = np.abs(found / true - 1).max()
    print(f"parameters: {true.size}; worst relative error {err0:.1%} -> {err:.2e} "
          f"({time.time() - t:.1f} s)")
    for name, a, b, c in zip(range(true.size), true, guess, found):
        print(f"  p{name}: true {a:.6g}  start {b:.6g}  identified {c:.6g}")


if __name__ == "__main__":
    main()

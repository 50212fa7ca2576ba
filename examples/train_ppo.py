"""PPO in plain JAX on mjx_lite's InvertedPendulum-v5 (gymnasium's task, batched and autoreset).

One jitted call per iteration collects ``--unroll`` steps from ``--num-envs`` envs (a
``lax.scan`` over the vmapped env) and runs the clipped-surrogate updates (Adam, minibatches,
epochs), so after the first compile the loop runs without Python in the way. Training stops when
the mean return of the last ``--window`` finished (stochastic-policy) episodes reaches
``--target``; a deterministic evaluation then reports the mean-action policy's return.

    python examples/train_ppo.py                 # InvertedPendulum to mean return >= 950
    python examples/train_ppo.py --out curve.png
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import time

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import envs

# ------------------------------------------------------------------------------------------
# networks and optimizer (no dependencies beyond jax)


def _init_mlp(key, sizes, last_scale):
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (k, n_in, n_out) in enumerate(zip(keys, sizes[:-1], sizes[1:], strict=True)):
        # orthogonal init, as PPO implementations use: small last layer keeps early actions calm
        scale = last_scale if i == len(sizes) - 2 else np.sqrt(2.0)
        w = jax.nn.initializers.orthogonal(scale)(k, (n_in, n_out), jp.float32)
        params.append((w, jp.zeros(n_out, jp.float32)))
    return params


def _mlp(params, x):
    for w, b in params[:-1]:
        x = jp.tanh(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def init_params(key, obs_size, act_size, hidden=64):
    k1, k2 = jax.random.split(key)
    return {"pi": _init_mlp(k1, [obs_size, hidden, hidden, act_size], 0.01),
            "v": _init_mlp(k2, [obs_size, hidden, hidden, 1], 1.0),
            "log_std": jp.zeros(act_size, jp.float32)}


def _log_prob(params, obs, act):
    mean = _mlp(params["pi"], obs)
    log_std = params["log_std"]
    z = (act - mean) / jp.exp(log_std)
    return jp.sum(-0.5 * z**2 - log_std - 0.5 * jp.log(2 * jp.pi), axis=-1)


def _value(params, obs):
    return _mlp(params["v"], obs)[..., 0]


def adam_init(params):
    zeros = jax.tree.map(jp.zeros_like, params)
    return {"m": zeros, "v": zeros, "t": jp.zeros((), jp.int32)}


def adam_update(params, grads, opt, lr, b1=0.9, b2=0.999, eps=1e-5, max_norm=0.5):
    norm = jp.sqrt(sum(jp.sum(g**2) for g in jax.tree.leaves(grads)))
    grads = jax.tree.map(lambda g: g * jp.minimum(1.0, max_norm / (norm + 1e-8)), grads)
    t = opt["t"] + 1
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g**2, opt["v"], grads)
    mhat = jax.tree.map(lambda m: m / (1 - b1**t), m)
    vhat = jax.tree.map(lambda v: v / (1 - b2**t), v)
    # keep each parameter's dtype (float32) when JAX runs with x64 on
    params = jax.tree.map(lambda p, m, v: (p - lr * m / (jp.sqrt(v) + eps)).astype(p.dtype),
                          params, mhat, vhat)
    return params, {"m": m, "v": v, "t": t}


# ------------------------------------------------------------------------------------------
# PPO


def make_train_iter(env, args):
    """(params, opt, state, ep_ret, key) -> same + (finished returns, finished mask, stats)."""
    act_lo, act_hi = -args.action_bound, args.action_bound
    gamma, lam = args.gamma, args.gae_lambda

    def rollout(params, state, ep_ret, key):
        def body(carry, k):
            state, ep_ret = carry
            obs = state.obs.astype(jp.float32)
            mean = _mlp(params["pi"], obs)
            act = mean + jp.exp(params["log_std"]) * jax.random.normal(k, mean.shape)
            logp = _log_prob(params, obs, act)
            nxt = env.step(state, jp.clip(act, act_lo, act_hi))
            ep_ret = ep_ret + nxt.reward
            done = nxt.done > 0
            out = {"obs": obs, "act": act, "logp": logp, "reward": nxt.reward,
                   "done": nxt.done, "term": nxt.done * (1 - nxt.truncation),
                   "final_obs": nxt.info["final_obs"].astype(jp.float32),
                   "ret": ep_ret, "finished": done}
            return (nxt, jp.where(done, 0.0, ep_ret)), out

        keys = jax.random.split(key, args.unroll)
        (state, ep_ret), traj = jax.lax.scan(body, (state, ep_ret), keys)
        return state, ep_ret, traj

    def gae(params, traj):
        v = _value(params, traj["obs"])
        v_next = _value(params, traj["final_obs"])  # final obs of the step (pre-reset)
        delta = traj["reward"] + gamma * v_next * (1 - traj["term"]) - v

        def back(adv, x):
            d, done = x
            adv = d + gamma * lam * (1 - done) * adv
            return adv, adv

        _, adv = jax.lax.scan(back, jp.zeros_like(delta[0]), (delta, traj["done"]),
                              reverse=True)
        return adv, adv + v

    def loss_fn(params, batch):
        logp = _log_prob(params, batch["obs"], batch["act"])
        ratio = jp.exp(logp - batch["logp"])
        adv = batch["adv"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -jp.mean(jp.minimum(ratio * adv,
                                 jp.clip(ratio, 1 - args.clip, 1 + args.clip) * adv))
        v_loss = jp.mean((_value(params, batch["obs"]) - batch["target"]) ** 2)
        entropy = jp.sum(params["log_std"] + 0.5 * jp.log(2 * jp.pi * jp.e))
        return pg + args.vf_coef * v_loss - args.ent_coef * entropy, (pg, v_loss)

    def update(params, opt, traj, key):
        adv, target = gae(params, traj)
        flat = {"obs": traj["obs"], "act": traj["act"], "logp": traj["logp"], "adv": adv,
                "target": target}
        flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), flat)
        n = flat["adv"].shape[0]
        mb = n // args.minibatches

        def epoch(carry, k):
            params, opt = carry
            perm = jax.random.permutation(k, n)

            def minibatch(carry, idx):
                params, opt = carry
                batch = jax.tree.map(lambda x: x[idx], flat)
                (_, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch)
                params, opt = adam_update(params, grads, opt, args.lr)
                return (params, opt), aux

            idx = perm[: mb * args.minibatches].reshape(args.minibatches, mb)
            return jax.lax.scan(minibatch, (params, opt), idx)

        (params, opt), aux = jax.lax.scan(epoch, (params, opt),
                                          jax.random.split(key, args.epochs))
        return params, opt, jax.tree.map(jp.mean, aux)

    @jax.jit
    def train_iter(params, opt, state, ep_ret, key):
        k1, k2 = jax.random.split(key)
        state, ep_ret, traj = rollout(params, state, ep_ret, k1)
        params, opt, (pg, v_loss) = update(params, opt, traj, k2)
        return params, opt, state, ep_ret, traj["ret"], traj["finished"], (pg, v_loss)

    return train_iter


def evaluate(task: envs.Env, params, n_envs: int, length: int, seed: int) -> float:
    """Mean return of the mean-action policy over n_envs episodes of at most ``length``."""
    env = envs.VmapWrapper(envs.EpisodeWrapper(task, length), n_envs)

    @jax.jit
    def run(key):
        def body(carry, _):
            state, ret, alive = carry
            act = _mlp(params["pi"], state.obs.astype(jp.float32))
            state = env.step(state, act)
            ret = ret + alive * state.reward
            return (state, ret, alive * (1 - state.done)), None

        state = env.reset(key)
        zeros = jp.zeros(n_envs, state.reward.dtype)
        (_, ret, _), _ = jax.lax.scan(body, (state, zeros, zeros + 1), None, length=length)
        return ret

    return float(np.mean(run(jax.random.PRNGKey(seed))))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--unroll", type=int, default=64, help="env steps per iteration per env")
    p.add_argument("--max-iters", type=int, default=400)
    p.add_argument("--time-limit", type=float, default=600.0, help="seconds")
    p.add_argument("--target", type=float, default=950.0)
    p.add_argument("--window", type=int, default=20, help="finished episodes averaged")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--minibatches", type=int, default=8)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--action-bound", type=float, default=3.0, help="InvertedPendulum ctrlrange")
    p.add_argument("--episode-length", type=int, default=1000)
    p.add_argument("--eval-envs", type=int, default=8, help="0 skips the final evaluation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=pathlib.Path, default=pathlib.Path("ppo_inverted_pendulum.png"))
    args = p.parse_args(argv)

    task = envs.InvertedPendulum()
    env = envs.AutoResetWrapper(envs.VmapWrapper(
        envs.EpisodeWrapper(task, args.episode_length), args.num_envs))
    key = jax.random.PRNGKey(args.seed)
    key, k_env, k_par = jax.random.split(key, 3)
    params = init_params(k_par, task.observation_size, task.action_size)
    opt = adam_init(params)
    state = jax.jit(env.reset)(k_env)
    ep_ret = jp.zeros(args.num_envs, state.reward.dtype)
    train_iter = make_train_iter(env, args)

    recent = collections.deque(maxlen=args.window)
    curve = []  # (env steps, seconds, windowed mean return)
    t0 = time.perf_counter()
    steps, solved_at, mean = 0, None, float("nan")
    for it in range(args.max_iters):
        key, k = jax.random.split(key)
        params, opt, state, ep_ret, rets, finished, (pg, v_loss) = train_iter(
            params, opt, state, ep_ret, k)
        finished = np.asarray(finished)
        recent.extend(np.asarray(rets)[finished].tolist())
        steps += args.num_envs * args.unroll
        elapsed = time.perf_counter() - t0
        mean = float(np.mean(recent)) if recent else float("nan")
        curve.append((steps, elapsed, mean))
        print(f"iter {it:4d}  steps {steps:8d}  {elapsed:7.1f} s  episodes {int(finished.sum()):4d}"
              f"  mean return (last {len(recent)}) {mean:7.1f}  v_loss {float(v_loss):.3g}",
              flush=True)
        if len(recent) == args.window and mean >= args.target:
            solved_at = elapsed
            print(f"reached mean return {mean:.1f} >= {args.target} after {steps} steps, "
                  f"{elapsed:.1f} s (first-iteration compile included)", flush=True)
            break
        if elapsed > args.time_limit:
            print(f"time limit {args.time_limit:.0f} s reached without the target", flush=True)
            break
    result = {"solved_seconds": solved_at, "steps": steps, "mean_return": mean, "curve": curve}
    if args.eval_envs:
        result["eval_return"] = evaluate(task, params, args.eval_envs, args.episode_length,
                                         args.seed + 1)
        print(f"deterministic policy: mean return {result['eval_return']:.1f} over "
              f"{args.eval_envs} episodes", flush=True)
    _plot(curve, args.out, args.target)
    return result


def _plot(curve, out: pathlib.Path, target: float) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no learning-curve PNG", file=sys.stderr)
        return
    steps, _, mean = np.array(curve, dtype=float).T if curve else ([], [], [])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(steps, mean, label="mean return (recent episodes)")
    ax.axhline(target, color="gray", ls="--", label=f"target {target:g}")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("return")
    ax.set_title("PPO on mjx_lite InvertedPendulum-v5")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(f"learning curve saved to {out}", flush=True)


if __name__ == "__main__":
    main()

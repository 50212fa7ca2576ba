"""mjx_lite.envs against gymnasium's MuJoCo v5 envs, and the wrappers' contracts.

Parity: gymnasium's env is driven to random states; the pre-step MjData is copied into mjx_lite
(float64), both take the same random action, and obs, reward and terminated are compared
(relative tolerance ``TOL``, as tests/parity.py defines it). CI runs InvertedPendulum through
the DomainRandomizationWrapper on a few states; the acceptance tier runs all nine tasks on 100.
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jp
import numpy as np
import pytest

from mjx_lite import envs, interop, io, load_model_from_string

TOL = 1e-9
ACCEPTANCE_FILE = pathlib.Path(__file__).with_name("acceptance") / "envs.txt"


def _gym_env(name: str):
    gym = pytest.importorskip("gymnasium")
    return gym.make(f"{name}-v5").unwrapped


def _collect(genv, env, n: int, seed: int, mjm=None):
    """n (pre-step Data, action, gymnasium obs, reward, terminated) from random states."""
    rng = np.random.default_rng(seed)
    genv.action_space.seed(seed)
    datas, actions, obs, rew, term = [], [], [], [], []
    for i in range(n):
        genv.reset(seed=seed * 1000 + i)
        for _ in range(int(rng.integers(0, 40))):
            genv.step(genv.action_space.sample())
        datas.append(interop.data_from_mujoco(genv.model, genv.data, env.model))
        # float64 actions: gymnasium computes the control cost in the action's dtype
        a = genv.action_space.sample().astype(np.float64)
        o, r, t, _, _ = genv.step(a)
        actions.append(a)
        obs.append(o)
        rew.append(r)
        term.append(t)
    batch = jax.tree.map(lambda *x: jp.stack(x), *datas)
    return batch, np.stack(actions), np.stack(obs), np.array(rew, float), np.array(term)


def _errors(state, obs, rew, term):
    ours_obs = np.asarray(state.obs)
    scale = np.maximum(np.max(np.abs(obs), axis=1), 1e-300)
    obs_err = np.max(np.abs(ours_obs - obs), axis=1) / scale
    rew_err = np.abs(np.asarray(state.reward) - rew) / np.maximum(np.abs(rew), 1.0)
    term_ok = (np.asarray(state.done) > 0) == term
    return obs_err, rew_err, term_ok


def _batched_step(env):
    def one(d, a):
        return env.step(env.state_from_data(d), a)

    return jax.jit(jax.vmap(one))


@pytest.mark.acceptance
def test_envs_match_gymnasium_acceptance():
    lines = [f"# worst relative error vs gymnasium v5 step from 100 random states (tol {TOL:g})"]
    failures = []
    for name in envs.TASKS:
        genv = _gym_env(name)
        env = envs.TASKS[name]()
        d, a, obs, rew, term = _collect(genv, env, 100, seed=1)
        state = _batched_step(env)(d, jp.asarray(a))
        obs_err, rew_err, term_ok = _errors(state, obs, rew, term)
        line = (f"{name}: obs {obs_err.max():.1e}  reward {rew_err.max():.1e}  "
                f"terminated {int(term_ok.sum())}/{term_ok.size} equal  "
                f"({int(term.sum())} terminated)")
        lines.append(line)
        print(line, flush=True)
        ACCEPTANCE_FILE.write_text("\n".join(lines) + "\n")  # per task: a long run keeps results
        if obs_err.max() > TOL or rew_err.max() > TOL or not term_ok.all():
            failures.append(line)
    ACCEPTANCE_FILE.write_text("\n".join(lines) + "\n")
    assert not failures, failures


EPISODE_STEPS = 200
EPISODE_FILE = pathlib.Path(__file__).with_name("acceptance") / "envs_episode.txt"


def _gym_episode(genv, qpos, qvel, actions):
    """Observations and rewards of gymnasium's env from (qpos, qvel) under ``actions``."""
    genv.set_state(qpos, qvel)
    obs, rew = [], []
    for a in actions:
        o, r, _, _, _ = genv.step(a)
        obs.append(o)
        rew.append(r)
    return np.stack(obs), np.array(rew, float)


@pytest.mark.acceptance
def test_envs_episode_within_rollout_bound():
    """End to end over an episode: each task from a gymnasium reset state, the same random
    actions for 200 env steps (terminations ignored: the unwrapped env keeps stepping).
    mjx_lite's obs and reward deviate from gymnasium's by at most the constraint issue's
    rollout bound: 10 x gymnasium's own deviation when qpos is perturbed by 1e-9, + 1e-8
    (chaos measured, not declared), the deviation taken as its largest so far: an episode is
    5x longer than that issue's 200 steps, and on HalfCheetah both perturbed runs reach O(1)
    distance by env step 90, after which the distance at one step is a random draw (step
    183: 0.55, having been 14 at step 170). The per-step ratio is written too."""
    lines = [f"# {EPISODE_STEPS}-step episodes vs gymnasium v5: max |ours - gym| over obs and "
             "reward, gymnasium's self-deviation (qpos + 1e-9), worst ratio dev / (10 x "
             "largest self-dev so far + 1e-8)"]
    failures = []
    for name in envs.TASKS:
        genv = _gym_env(name)
        env = envs.TASKS[name]()
        genv.reset(seed=7)
        qpos, qvel = genv.data.qpos.copy(), genv.data.qvel.copy()
        genv.set_state(qpos, qvel)
        d0 = interop.data_from_mujoco(genv.model, genv.data, env.model)
        rng = np.random.default_rng(7)
        low, high = genv.action_space.low, genv.action_space.high
        actions = rng.uniform(low, high, (EPISODE_STEPS, low.size))
        runs = [_gym_episode(genv, qpos + eps, qvel, actions) for eps in (0.0, 1e-9)]

        def episode(state, acts, env=env):
            def body(st, a):
                st = env.step(st, a)
                return st, (st.obs, st.reward)

            return jax.lax.scan(body, state, acts)[1]

        obs, rew = jax.jit(episode)(env.state_from_data(d0), jp.asarray(actions))
        dev = np.maximum(np.abs(np.asarray(obs) - runs[0][0]).max(axis=1),
                         np.abs(np.asarray(rew) - runs[0][1]))
        selfdev = np.maximum(np.abs(runs[1][0] - runs[0][0]).max(axis=1),
                             np.abs(runs[1][1] - runs[0][1]))
        ratio = dev / (10 * np.maximum.accumulate(selfdev) + 1e-8)
        per_step = dev / (10 * selfdev + 1e-8)
        worst = int(np.argmax(ratio))
        line = (f"{name}: max dev {dev.max():.1e}  max self-dev {selfdev.max():.1e}  worst "
                f"ratio {ratio[worst]:.2f} at step {worst} (per-step self-dev: "
                f"{per_step.max():.2f} at step {int(np.argmax(per_step))})  "
                f"{'ok' if ratio.max() <= 1 else 'FAIL'}")
        lines.append(line)
        print(line, flush=True)
        EPISODE_FILE.write_text("\n".join(lines) + "\n")
        if ratio.max() > 1:
            failures.append(line)
    assert not failures, failures


# ------------------------------------------------------------------------------------------
# CI tier: io helpers, each wrapper, one task's parity

_KEYFRAME_XML = """
<mujoco>
  <worldbody>
    <body mocap="true" pos="0 0 1"><geom size=".1" contype="0" conaffinity="0"/></body>
    <body><joint type="free"/><geom size=".1"/></body>
    <body pos="1 0 0"><joint name="h" type="hinge"/><geom size=".1"/></body>
  </worldbody>
  <actuator><motor joint="h"/></actuator>
  <keyframe>
    <key time="1.5" qpos="1 2 3 1 0 0 0 .5" qvel="1 2 3 4 5 6 7" ctrl="0.3"
         mpos="0 1 2" mquat="0 1 0 0"/>
  </keyframe>
</mujoco>
"""


def test_reset_keyframe_matches_mujoco():
    mujoco = pytest.importorskip("mujoco")
    mjm = mujoco.MjModel.from_xml_string(_KEYFRAME_XML)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
    d = io.reset_keyframe(load_model_from_string(_KEYFRAME_XML), 0)
    for f in ("time", "qpos", "qvel", "act", "ctrl", "mocap_pos", "mocap_quat"):
        np.testing.assert_array_equal(np.asarray(getattr(d, f)), getattr(mjd, f), err_msg=f)


def test_where_selects_per_env():
    m = load_model_from_string(_KEYFRAME_XML)
    a = jax.tree.map(lambda x: jp.stack([x, x, x]), io.make_data(m))
    b = jax.tree.map(lambda x: jp.stack([x, x, x]), io.reset_keyframe(m, 0))
    out = jax.jit(io.where)(jp.array([True, False, True]), b, a)
    np.testing.assert_array_equal(out.qpos[0], b.qpos[0])
    np.testing.assert_array_equal(out.qpos[1], a.qpos[1])
    np.testing.assert_array_equal(out.qvel[2], b.qvel[2])
    np.testing.assert_array_equal(out.time, [1.5, 0.0, 1.5])


def _scale_masses(m, key):
    scale = jax.random.uniform(key, np.shape(m.body_mass), minval=0.5, maxval=2.0)
    return m.replace(body_mass=m.body_mass * scale)


@pytest.mark.acceptance  # minutes of compile: kept out of the CI tier
def test_domain_randomization_step_matches_gymnasium_on_changed_models():
    """Vmap over 4 Models with randomized body_mass (+ set_const) and 4 states; each env equals
    gymnasium's InvertedPendulum-v5 whose MjModel got the same masses and mj_setConst."""
    mujoco = pytest.importorskip("mujoco")
    genv = _gym_env("InvertedPendulum")
    env = envs.InvertedPendulum()
    dr = envs.DomainRandomizationWrapper(env, _scale_masses, jax.random.PRNGKey(3), 4)
    masses = np.asarray(dr.models.body_mass)
    assert np.ptp(masses[:, 1]) > 0  # the four models differ
    datas, actions, obs, rew, term = [], [], [], [], []
    for i in range(4):
        genv.model.body_mass[:] = masses[i]
        mujoco.mj_setConst(genv.model, genv.data)
        d, a, o, r, t = _collect(genv, env, 1, seed=10 + i)
        datas.append(d)
        actions.append(a)
        obs.append(o)
        rew.append(r)
        term.append(t)
    d = jax.tree.map(lambda *x: jp.concatenate(x), *datas)
    state = jax.vmap(env.state_from_data)(d)
    out = jax.jit(dr.step)(state, jp.asarray(np.concatenate(actions)))
    obs_err, rew_err, term_ok = _errors(out, np.concatenate(obs), np.concatenate(rew),
                                        np.concatenate(term))
    assert obs_err.max() <= TOL and rew_err.max() <= TOL and term_ok.all(), (obs_err, rew_err)
    np.testing.assert_allclose(np.asarray(dr.models.body_subtreemass[:, 0]),
                               masses.sum(axis=1), rtol=1e-12)


def test_episode_autoreset_and_gym_adapter():
    """Episode limit 5 on 3 envs through the VectorEnv adapter: truncation at steps 5 and 10,
    every reset draws a new initial state (different across resets and across envs)."""
    pytest.importorskip("gymnasium")
    from mjx_lite.envs.gym_adapter import VectorEnv

    venv = VectorEnv("InvertedPendulum", num_envs=3, episode_length=5)
    obs, _ = venv.reset(seed=0)
    assert obs.shape == (3, 4) and venv.action_space.shape == (3, 1)
    starts = [obs]
    for t in range(1, 11):
        obs, rew, terminated, truncated, infos = venv.step(np.zeros((3, 1), np.float32))
        assert not terminated.any()
        np.testing.assert_array_equal(rew, 1.0)
        if t % 5:
            assert not truncated.any() and "final_obs" not in infos
        else:
            assert truncated.all() and infos["_final_obs"].all()
            assert not np.array_equal(infos["final_obs"], obs)
            starts.append(obs)
    starts = np.stack(starts)  # (3 resets, 3 envs, obs)
    # fresh draws: no two initial states equal, across resets or envs
    flat = starts.reshape(-1, 4)
    assert len({row.tobytes() for row in flat}) == flat.shape[0]
    # initial states are gymnasium's distribution: qpos0 + U(-0.01, 0.01)
    assert np.all(np.abs(flat) <= 0.01)
    assert np.all(np.asarray(venv.state.info["steps"]) == 0)


@pytest.mark.acceptance  # minutes of compile: kept out of the CI tier
def test_train_ppo_example_runs(tmp_path):
    """examples/train_ppo.py end to end in a reduced form (2 short iterations)."""
    import importlib.util

    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "train_ppo.py"
    spec = importlib.util.spec_from_file_location("train_ppo", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "curve.png"
    result = mod.main(["--max-iters", "2", "--num-envs", "4", "--unroll", "8",
                       "--minibatches", "2", "--epochs", "2", "--episode-length", "20",
                       "--eval-envs", "0", "--out", str(out)])
    assert result["steps"] == 2 * 4 * 8
    assert len(result["curve"]) == 2


PPO_FILE = pathlib.Path(__file__).with_name("acceptance") / "ppo.txt"


@pytest.mark.acceptance  # minutes of training: kept out of the CI tier
def test_train_ppo_reaches_target_in_time(tmp_path):
    """examples/train_ppo.py as a user runs it (float32, default settings, its own process so
    the tests' float64 does not apply): InvertedPendulum's mean return reaches 950 within the
    issue's 10 minutes, first compile included; the figures go to tests/acceptance/ppo.txt."""
    import os
    import subprocess
    import sys
    import time

    script = pathlib.Path(__file__).resolve().parent.parent / "examples" / "train_ppo.py"
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "curve.png")],
                         env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    assert out.returncode == 0, out.stdout + out.stderr
    reached = [line for line in out.stdout.splitlines() if line.startswith("reached")]
    evaluated = [line for line in out.stdout.splitlines() if line.startswith("deterministic")]
    PPO_FILE.write_text(
        "# python examples/train_ppo.py (defaults: 32 envs, float32), this machine's CPU\n"
        + "\n".join(reached + evaluated
                    + [f"process wall time {wall:.1f} s (interpreter and imports included)"])
        + "\n")
    assert reached, out.stdout[-2000:]
    assert float(reached[0].split(", ")[-1].split(" s")[0]) <= 600.0

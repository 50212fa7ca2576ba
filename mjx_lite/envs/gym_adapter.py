"""gymnasium ``VectorEnv`` around a batched mjx_lite env: numpy in, numpy out.

Autoreset follows gymnasium's SAME_STEP mode: when a sub-env finishes, ``step`` returns the
first observation of its next episode (drawn fresh), and ``infos['final_obs']`` /
``infos['_final_obs']`` hold the last observation of the finished one. Importing this module
imports gymnasium; ``mjx_lite.envs`` itself does not.
"""

from __future__ import annotations

import jax
import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv as _GymVectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.vector.vector_env import AutoresetMode

from mjx_lite import envs as _envs
from mjx_lite.xla import compiler_options


class VectorEnv(_GymVectorEnv):
    """``num_envs`` copies of a task stepped together by one jitted, vmapped call.

    Args:
      task: a task name from ``mjx_lite.envs.TASKS`` or an unbatched ``Env`` (wrap time limits
        yourself in that case, e.g. with ``EpisodeWrapper``).
      num_envs: batch size.
      episode_length: time limit when ``task`` is a name (gymnasium's by default).
      **task_kwargs: forwarded to the task's constructor.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, task: str | _envs.Env, num_envs: int, episode_length: int | None = None,
                 **task_kwargs):
        if isinstance(task, str):
            env = _envs.TASKS[task](**task_kwargs)
            env = _envs.EpisodeWrapper(env, episode_length or _envs.EPISODE_LENGTH[task])
        else:
            env = task
        self.env = _envs.AutoResetWrapper(_envs.VmapWrapper(env, num_envs))
        self.num_envs = num_envs
        model = env.unwrapped.model
        lo, hi = np.asarray(model.actuator_ctrlrange, np.float32).T.reshape(2, -1)
        limited = np.asarray(model.actuator_ctrllimited, bool).reshape(-1)
        lo = np.where(limited, lo, -np.inf).astype(np.float32)
        hi = np.where(limited, hi, np.inf).astype(np.float32)
        self.single_action_space = spaces.Box(lo, hi, dtype=np.float32)
        obs_size = env.observation_size
        self.single_observation_space = spaces.Box(-np.inf, np.inf, (obs_size,), np.float64)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        options = compiler_options()
        self._reset = jax.jit(self.env.reset, compiler_options=options)
        self._step = jax.jit(self.env.step, compiler_options=options)
        self._state = None
        self._key = jax.random.PRNGKey(0)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Fresh random initial states for every sub-env."""
        if seed is not None:
            self._key = jax.random.PRNGKey(seed)
        self._key, key = jax.random.split(self._key)
        self._state = self._reset(key)
        return np.asarray(self._state.obs), {}

    def step(self, actions):
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions).reshape(self.num_envs, -1)
        self._state = self._step(self._state, actions)
        s = jax.device_get(self._state)
        done = np.asarray(s.done) > 0
        truncated = np.asarray(s.truncation) > 0
        terminated = done & ~truncated
        infos = {k: np.asarray(v) for k, v in s.metrics.items()}
        if done.any():
            infos["final_obs"] = np.asarray(s.info["final_obs"])
            infos["_final_obs"] = done
        return np.asarray(s.obs), np.asarray(s.reward), terminated, truncated, infos

    @property
    def state(self):
        """The batched ``State`` (for inspection, e.g. ``state.data.qpos``)."""
        return self._state

"""The functional environment API: ``reset(key) -> State``, ``step(state, action) -> State``.

Everything is a pure function of its arguments, so ``jax.jit`` and ``jax.vmap`` apply to an
environment's ``reset`` and ``step`` directly; wrappers (``wrappers.py``) add batching, episode
limits, autoreset and domain randomization around the same two calls.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
from typing import Any

import jax
import jax.numpy as jp

from mjx_lite.forward import forward as mj_forward
from mjx_lite.forward import step as mj_step
from mjx_lite.io import make_data
from mjx_lite.smooth import rne_post_constraint
from mjx_lite.types import Data, Model


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    """One environment's state (add a leading batch axis with ``VmapWrapper``).

    Attributes:
      data: the simulation Data after the last substep (as gymnasium's MjData after ``step``).
      obs: observation, (obs_size,).
      reward: scalar reward of the last step.
      done: 1.0 when the episode ended (termination or, with ``EpisodeWrapper``, time limit).
      truncation: 1.0 when the episode ended by the time limit only.
      metrics: named reward terms and quantities of the last step (floats).
      info: wrapper bookkeeping (step counters, the autoreset key, the final observation).
    """

    data: Data
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    truncation: jax.Array
    metrics: dict[str, jax.Array] = dataclasses.field(default_factory=dict)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)

    def replace(self, **changes) -> State:
        return dataclasses.replace(self, **changes)


class Env:
    """Interface: ``reset(key)``, ``step(state, action)``, sizes and ``dt``."""

    def reset(self, key: jax.Array) -> State:
        raise NotImplementedError

    def step(self, state: State, action: jax.Array) -> State:
        raise NotImplementedError

    @property
    def observation_size(self) -> int:
        raise NotImplementedError

    @property
    def action_size(self) -> int:
        raise NotImplementedError

    @property
    def unwrapped(self) -> Env:
        return self


def gym_asset(name: str) -> pathlib.Path:
    """Path of a model file shipped with gymnasium's MuJoCo envs, found without importing it."""
    spec = importlib.util.find_spec("gymnasium")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"gymnasium is not installed: pass xml_file for {name!r}")
    root = pathlib.Path(next(iter(spec.submodule_search_locations)))
    return root / "envs" / "mujoco" / "assets" / name


class MujocoEnv(Env):
    """A task on one Model stepped ``frame_skip`` times per action (gymnasium's MujocoEnv).

    Subclasses implement ``reset_model(m, key) -> (qpos, qvel)`` and
    ``task_step(m, data_before, data_after, action) -> (obs, reward, terminated, metrics)``
    and ``observation(m, data)``; every method takes the Model explicitly so that
    ``DomainRandomizationWrapper`` can vmap them over a batch of Models. ``reset``/``step``
    use ``self.model``. ``solver_loop`` is passed to ``forward``/``step`` as ``loop``:
    "early_exit" (default) stops the constraint solver at its tolerance as MuJoCo C does;
    "fixed" runs every iteration (needed only to differentiate through a step).
    """

    solver_loop = "early_exit"

    def __init__(self, model: Model, frame_skip: int):
        self.model = model
        self.frame_skip = int(frame_skip)

    @property
    def dt(self):
        """Seconds per action: timestep * frame_skip (gymnasium's ``dt``)."""
        return self.model.opt.timestep * self.frame_skip

    @property
    def action_size(self) -> int:
        return self.model.nu

    @property
    def observation_size(self) -> int:
        d = jax.eval_shape(lambda: self.reset_with(self.model, jax.random.PRNGKey(0)))
        return d.obs.shape[-1]

    # -- the simulation, as gymnasium's MujocoEnv ------------------------------------------

    def pipeline_init(self, m: Model, qpos, qvel) -> Data:
        """mj_resetData, set qpos and qvel, mj_forward (gymnasium's reset + set_state)."""
        d = make_data(m)
        d = d.replace(qpos=jp.asarray(qpos, d.qpos.dtype), qvel=jp.asarray(qvel, d.qvel.dtype))
        return mj_forward(m, d, loop=self.solver_loop)

    def pipeline_step(self, m: Model, d: Data, action) -> Data:
        """ctrl = action, ``frame_skip`` mj_steps, then mj_rnePostConstraint (as gymnasium)."""
        d = d.replace(ctrl=jp.asarray(action, d.ctrl.dtype))
        loop = self.solver_loop
        d = jax.lax.fori_loop(0, self.frame_skip, lambda _, x: mj_step(m, x, loop=loop), d)
        return rne_post_constraint(m, d)

    # -- the functional API ---------------------------------------------------------------

    def reset_with(self, m: Model, key: jax.Array) -> State:
        qpos, qvel, info = self.reset_model(m, key)
        d = self.pipeline_init(m, qpos, qvel)
        obs = self.observation(m, d, info)
        zero = jp.zeros((), d.qpos.dtype)
        metrics = {k: zero for k in self.metric_names}
        return State(data=d, obs=obs, reward=zero, done=zero, truncation=zero,
                     metrics=metrics, info=info)

    def step_with(self, m: Model, state: State, action: jax.Array) -> State:
        d0 = state.data
        d1 = self.pipeline_step(m, d0, action)
        obs, reward, terminated, metrics = self.task_step(m, d0, d1, action, state.info)
        dtype = d1.qpos.dtype
        return state.replace(data=d1, obs=obs, reward=jp.asarray(reward, dtype),
                             done=jp.asarray(terminated, dtype),
                             metrics={k: jp.asarray(v, dtype) for k, v in metrics.items()})

    def state_from_data(self, d: Data, info: dict | None = None) -> State:
        """A State around an existing Data (e.g. one copied from MuJoCo with
        ``interop.data_from_mujoco``), with its observation and zero reward."""
        info = {} if info is None else info
        zero = jp.zeros((), d.qpos.dtype)
        return State(data=d, obs=self.observation(self.model, d, info), reward=zero, done=zero,
                     truncation=zero, metrics={k: zero for k in self.metric_names}, info=info)

    def reset(self, key: jax.Array) -> State:
        return self.reset_with(self.model, key)

    def step(self, state: State, action: jax.Array) -> State:
        return self.step_with(self.model, state, action)

    # -- per task --------------------------------------------------------------------------

    metric_names: tuple[str, ...] = ()

    def reset_model(self, m: Model, key: jax.Array):
        raise NotImplementedError

    def observation(self, m: Model, d: Data, info: dict) -> jax.Array:
        raise NotImplementedError

    def task_step(self, m: Model, d0: Data, d1: Data, action, info: dict):
        raise NotImplementedError

"""Wrappers around the functional API: batching, episode limits, autoreset, randomized Models.

Usual stacking (innermost first): ``EpisodeWrapper`` -> ``VmapWrapper`` (or
``DomainRandomizationWrapper``) -> ``AutoResetWrapper``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp

from mjx_lite import io
from mjx_lite.const import set_const
from mjx_lite.envs.base import Env, MujocoEnv, State
from mjx_lite.math import where
from mjx_lite.types import Model


class Wrapper(Env):
    """Forwards everything it does not override to the wrapped env."""

    def __init__(self, env: Env):
        self.env = env

    def reset(self, key):
        return self.env.reset(key)

    def step(self, state, action):
        return self.env.step(state, action)

    @property
    def observation_size(self) -> int:
        return self.env.observation_size

    @property
    def action_size(self) -> int:
        return self.env.action_size

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    def __getattr__(self, name):
        if name == "env":  # not set yet (during unpickling)
            raise AttributeError(name)
        return getattr(self.env, name)


def _batch_keys(key, batch_size):
    """One key per env: a single key is split into ``batch_size``; a (B, 2) batch is kept."""
    key = jp.asarray(key)
    if key.ndim == 1:
        if batch_size is None:
            raise ValueError("a single key needs batch_size to make a batch")
        return jax.random.split(key, batch_size)
    return key


class VmapWrapper(Wrapper):
    """Batches reset and step with jax.vmap. ``reset`` takes one key (split into
    ``batch_size``) or a (B, 2) batch of keys."""

    def __init__(self, env: Env, batch_size: int | None = None):
        super().__init__(env)
        self.batch_size = batch_size

    def reset(self, key):
        return jax.vmap(self.env.reset)(_batch_keys(key, self.batch_size))

    def step(self, state, action):
        return jax.vmap(self.env.step)(state, action)


class EpisodeWrapper(Wrapper):
    """Ends an episode after ``episode_length`` steps: done = 1 and truncation = 1 unless the
    task terminated on that same step (gymnasium's TimeLimit; v5 tasks use 1000, Reacher 50)."""

    def __init__(self, env: Env, episode_length: int = 1000, action_repeat: int = 1):
        super().__init__(env)
        self.episode_length = episode_length
        self.action_repeat = action_repeat

    def reset(self, key):
        state = self.env.reset(key)
        info = dict(state.info, steps=jp.zeros((), jp.int32))
        return state.replace(info=info, truncation=jp.zeros_like(state.done))

    def step(self, state, action):
        def repeat(s, _):
            s = self.env.step(s, action)
            return s, s.reward

        if self.action_repeat == 1:
            state, rewards = self.env.step(state, action), None
        else:
            state, rewards = jax.lax.scan(repeat, state, None, length=self.action_repeat)
            state = state.replace(reward=jp.sum(rewards, axis=0))
        steps = state.info["steps"] + self.action_repeat
        out_of_time = steps >= self.episode_length
        truncation = where(out_of_time & (state.done == 0), 1.0, 0.0).astype(state.done.dtype)
        done = where(out_of_time, jp.ones_like(state.done), state.done)
        return state.replace(done=done, truncation=truncation,
                             info=dict(state.info, steps=steps))


class AutoResetWrapper(Wrapper):
    """Resets finished envs to a FRESH random initial state drawn from a per-env key carried in
    ``info['rng']`` (unlike a cached first state, every episode starts somewhere new).

    The returned state keeps the finished step's ``reward``, ``done`` and ``truncation``; its
    ``obs`` and ``data`` are the new episode's and ``info['final_obs']`` holds the last
    observation of the finished one (for bootstrapping at truncation). Wrap a batched env.
    """

    def reset(self, key):
        key = jp.asarray(key)
        batch = getattr(self.env, "batch_size", None)
        keys = _batch_keys(key, batch) if key.ndim == 1 and batch is not None else key
        split = jax.vmap(jax.random.split)(keys) if keys.ndim == 2 else jax.random.split(keys)
        reset_keys, carry = (split[:, 0], split[:, 1]) if keys.ndim == 2 else (split[0], split[1])
        state = self.env.reset(reset_keys)
        return state.replace(info=dict(state.info, rng=carry, final_obs=state.obs))

    def step(self, state, action):
        rng = state.info["rng"]
        batched = rng.ndim == 2
        split = jax.vmap(jax.random.split)(rng) if batched else jax.random.split(rng)
        reset_keys, carry = (split[:, 0], split[:, 1]) if batched else (split[0], split[1])
        info = {k: v for k, v in state.info.items() if k not in ("rng", "final_obs")}
        state = self.env.step(state.replace(info=info), action)
        fresh = self.env.reset(reset_keys)
        fresh = fresh.replace(info=dict(fresh.info, rng=carry, final_obs=state.obs))
        stepped = state.replace(info=dict(state.info, rng=carry, final_obs=state.obs))
        done = state.done > 0
        new = io.where(done, fresh, stepped)
        return new.replace(reward=state.reward, done=state.done, truncation=state.truncation,
                           metrics=state.metrics)


class DomainRandomizationWrapper(Wrapper):
    """One randomized Model per env: ``randomize(model, key) -> Model`` is vmapped over
    ``batch_size`` keys, then ``set_const`` refreshes the qpos0 constants of every Model (so a
    randomized mass or size behaves as compiling the changed XML; see mjx_lite/const.py).
    ``reset`` and ``step`` vmap the task over (Model, State) pairs. Wraps a MujocoEnv (or an
    EpisodeWrapper around one)."""

    def __init__(self, env: Env, randomize: Callable[[Model, jax.Array], Model],
                 key: jax.Array, batch_size: int, *, recompute_constants: bool = True):
        super().__init__(env)
        self.batch_size = batch_size
        base = env.unwrapped
        if not isinstance(base, MujocoEnv):
            raise TypeError("DomainRandomizationWrapper needs a MujocoEnv underneath")

        def one(k):
            m = randomize(base.model, k)
            return set_const(m) if recompute_constants else m

        self.models = jax.jit(jax.vmap(one))(jax.random.split(key, batch_size))

    def _with_model(self, fn, m, *args):
        base = self.env.unwrapped
        saved = base.model
        base.model = m  # traced inside vmap: the inner env's reset/step read self.model
        try:
            return fn(*args)
        finally:
            base.model = saved

    def reset(self, key):
        keys = _batch_keys(key, self.batch_size)
        return jax.vmap(lambda m, k: self._with_model(self.env.reset, m, k))(self.models, keys)

    def step(self, state: State, action):
        return jax.vmap(lambda m, s, a: self._with_model(self.env.step, m, s, a))(
            self.models, state, action)

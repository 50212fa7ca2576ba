"""RL environments on mjx_lite: a functional API, wrappers and gymnasium's MuJoCo v5 tasks.

``make("Hopper", batch_size=1024)`` gives a jit/vmap-able batched env with gymnasium's time
limit and autoreset; ``gym_adapter.VectorEnv`` exposes it to numpy-based RL libraries.
"""

from mjx_lite.envs.base import Env, MujocoEnv, State
from mjx_lite.envs.tasks import (
    TASKS,
    Ant,
    HalfCheetah,
    Hopper,
    Humanoid,
    InvertedDoublePendulum,
    InvertedPendulum,
    Reacher,
    Swimmer,
    Walker2d,
)
from mjx_lite.envs.wrappers import (
    AutoResetWrapper,
    DomainRandomizationWrapper,
    EpisodeWrapper,
    VmapWrapper,
    Wrapper,
)

# gymnasium's registered max_episode_steps for the v5 tasks
EPISODE_LENGTH = {name: 1000 for name in TASKS} | {"Reacher": 50}


def make(name: str, batch_size: int | None = None, episode_length: int | None = None,
         auto_reset: bool = True, **task_kwargs) -> Env:
    """A task by name, with gymnasium's time limit; batched and autoreset when
    ``batch_size`` is given."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)}")
    env: Env = TASKS[name](**task_kwargs)
    env = EpisodeWrapper(env, episode_length or EPISODE_LENGTH[name])
    if batch_size is not None:
        env = VmapWrapper(env, batch_size)
        if auto_reset:
            env = AutoResetWrapper(env)
    return env


__all__ = [
    "EPISODE_LENGTH", "TASKS", "Ant", "AutoResetWrapper", "DomainRandomizationWrapper", "Env",
    "EpisodeWrapper", "HalfCheetah", "Hopper", "Humanoid", "InvertedDoublePendulum",
    "InvertedPendulum", "MujocoEnv", "Reacher", "State", "Swimmer", "VmapWrapper", "Walker2d",
    "Wrapper", "make",
]

"""gymnasium's MuJoCo v5 tasks on mjx_lite, with v5's default parameters, observations, rewards,
terminations, frame skips and reset noise (gymnasium/envs/mujoco/*_v5.py), on the same XML.

Each task draws its reset noise from a JAX key, so the distribution (not the numbers) of initial
states equals gymnasium's. ``action`` is written to ``ctrl`` unclipped, as gymnasium does.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.compiler.assemble import load_model
from mjx_lite.envs.base import MujocoEnv, gym_asset
from mjx_lite.support import name2id
from mjx_lite.types import Data, Model, ObjType


def _load(xml_file, default: str) -> Model:
    return load_model(str(xml_file if xml_file is not None else gym_asset(default)))


def _uniform(key, shape, scale, dtype):
    return jax.random.uniform(key, shape, dtype, minval=-scale, maxval=scale)


def _normal(key, shape, scale, dtype):
    return scale * jax.random.normal(key, shape, dtype)


def _dtype():
    return jp.zeros(()).dtype  # float64 when x64 is on, else float32


class _Noisy(MujocoEnv):
    """Reset: qpos0 + U(-s, s); qvel + U(-s, s) or s * N(0, 1) (``normal_qvel``)."""

    normal_qvel = False

    def __init__(self, model, frame_skip, reset_noise_scale):
        super().__init__(model, frame_skip)
        self.reset_noise_scale = reset_noise_scale

    def reset_model(self, m: Model, key):
        dtype = _dtype()
        k1, k2 = jax.random.split(key)
        s = self.reset_noise_scale
        qpos = jp.asarray(m.qpos0, dtype) + _uniform(k1, (m.nq,), s, dtype)
        noise = (_normal if self.normal_qvel else _uniform)(k2, (m.nv,), s, dtype)
        return qpos, noise, {}


def _ctrl_cost(weight, action):
    return weight * jp.sum(jp.square(action))


class InvertedPendulum(_Noisy):
    """InvertedPendulum-v5: obs [qpos, qvel]; reward 1 while |pole angle| <= 0.2."""

    metric_names = ("reward_survive",)

    def __init__(self, xml_file=None, frame_skip: int = 2, reset_noise_scale: float = 0.01):
        super().__init__(_load(xml_file, "inverted_pendulum.xml"), frame_skip, reset_noise_scale)

    def observation(self, m, d, info):
        return jp.concatenate([d.qpos, d.qvel])

    def task_step(self, m, d0, d1, action, info):
        obs = self.observation(m, d1, info)
        terminated = ~jp.all(jp.isfinite(obs)) | (jp.abs(obs[1]) > 0.2)
        reward = 1.0 - terminated
        return obs, reward, terminated, {"reward_survive": reward}


class InvertedDoublePendulum(_Noisy):
    """InvertedDoublePendulum-v5: alive bonus minus distance and velocity penalties."""

    normal_qvel = True
    metric_names = ("reward_survive", "distance_penalty", "velocity_penalty")

    def __init__(self, xml_file=None, frame_skip: int = 5, healthy_reward: float = 10.0,
                 reset_noise_scale: float = 0.1):
        super().__init__(_load(xml_file, "inverted_double_pendulum.xml"), frame_skip,
                         reset_noise_scale)
        self.healthy_reward = healthy_reward

    def observation(self, m, d, info):
        return jp.concatenate([d.qpos[:1], jp.sin(d.qpos[1:]), jp.cos(d.qpos[1:]),
                               jp.clip(d.qvel, -10, 10), jp.clip(d.qfrc_constraint, -10, 10)[:1]])

    def task_step(self, m, d0, d1, action, info):
        x, y = d1.site_xpos[0, 0], d1.site_xpos[0, 2]
        terminated = y <= 1
        v1, v2 = d1.qvel[1], d1.qvel[2]
        dist_penalty = 0.01 * x**2 + (y - 2) ** 2
        vel_penalty = 1e-3 * v1**2 + 5e-3 * v2**2
        alive = self.healthy_reward * (1.0 - terminated)
        metrics = {"reward_survive": alive, "distance_penalty": -dist_penalty,
                   "velocity_penalty": -vel_penalty}
        return self.observation(m, d1, info), alive - dist_penalty - vel_penalty, terminated, \
            metrics


class Reacher(MujocoEnv):
    """Reacher-v5: fingertip-to-target distance and control penalties; never terminates."""

    metric_names = ("reward_dist", "reward_ctrl")

    def __init__(self, xml_file=None, frame_skip: int = 2, reward_dist_weight: float = 1.0,
                 reward_control_weight: float = 1.0):
        super().__init__(_load(xml_file, "reacher.xml"), frame_skip)
        self.reward_dist_weight = reward_dist_weight
        self.reward_control_weight = reward_control_weight
        self._fingertip = name2id(self.model, ObjType.BODY, "fingertip")
        self._target = name2id(self.model, ObjType.BODY, "target")

    def reset_model(self, m, key):
        dtype = _dtype()
        k1, k2, k3 = jax.random.split(key, 3)
        qpos = jp.asarray(m.qpos0, dtype) + _uniform(k1, (m.nq,), 0.1, dtype)

        # gymnasium redraws the goal in [-0.2, 0.2]^2 until it lies inside the 0.2 disc
        def draw(carry):
            k, _ = carry
            k, sub = jax.random.split(k)
            return k, _uniform(sub, (2,), 0.2, dtype)

        _, goal = jax.lax.while_loop(lambda c: jp.linalg.norm(c[1]) >= 0.2, draw,
                                     draw((k2, jp.zeros(2, dtype))))
        qpos = qpos.at[-2:].set(goal)
        qvel = _uniform(k3, (m.nv,), 0.005, dtype).at[-2:].set(0.0)
        return qpos, qvel, {}

    def _vec(self, d):
        return d.xpos[self._fingertip] - d.xpos[self._target]

    def observation(self, m, d, info):
        theta = d.qpos[:2]
        return jp.concatenate([jp.cos(theta), jp.sin(theta), d.qpos[2:], d.qvel[:2],
                               self._vec(d)[:2]])

    def task_step(self, m, d0, d1, action, info):
        reward_dist = -jp.linalg.norm(self._vec(d1)) * self.reward_dist_weight
        reward_ctrl = -jp.sum(jp.square(action)) * self.reward_control_weight
        return self.observation(m, d1, info), reward_dist + reward_ctrl, jp.zeros((), bool), \
            {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl}


class _Locomotion(_Noisy):
    """Forward progress over dt, control cost, optional healthy bonus and termination."""

    skip = 1  # leading qpos entries left out of the observation
    clip_qvel = False
    metric_names = ("reward_forward", "reward_ctrl", "reward_survive", "x_velocity")

    def __init__(self, model, frame_skip, reset_noise_scale, forward_reward_weight,
                 ctrl_cost_weight, healthy_reward=0.0, terminate_when_unhealthy=False,
                 exclude_current_positions_from_observation=True):
        super().__init__(model, frame_skip, reset_noise_scale)
        self.forward_reward_weight = forward_reward_weight
        self.ctrl_cost_weight = ctrl_cost_weight
        self.healthy_reward = healthy_reward
        self.terminate_when_unhealthy = terminate_when_unhealthy
        self.exclude = exclude_current_positions_from_observation

    def position(self, m, d):
        return d.qpos[0]

    def is_healthy(self, m, d):
        return jp.ones((), bool)

    def extra_cost(self, m, d, action):
        return {}

    def observation(self, m, d, info):
        qvel = jp.clip(d.qvel, -10, 10) if self.clip_qvel else d.qvel
        return jp.concatenate([d.qpos[self.skip if self.exclude else 0:], qvel])

    def task_step(self, m, d0, d1, action, info):
        dt = m.opt.timestep * self.frame_skip
        x_velocity = (self.position(m, d1) - self.position(m, d0)) / dt
        forward = self.forward_reward_weight * x_velocity
        healthy = self.is_healthy(m, d1)
        survive = healthy * self.healthy_reward
        ctrl = _ctrl_cost(self.ctrl_cost_weight, self.control(d1, action))
        extra = self.extra_cost(m, d1, action)
        reward = forward + survive - ctrl - sum(extra.values())
        terminated = (~healthy) & self.terminate_when_unhealthy
        metrics = {"reward_forward": forward, "reward_ctrl": -ctrl, "reward_survive": survive,
                   "x_velocity": x_velocity}
        metrics.update({k: -v for k, v in extra.items()})
        return self.observation(m, d1, info), reward, terminated, metrics

    def control(self, d, action):
        return action


class Swimmer(_Locomotion):
    """Swimmer-v5: forward velocity of qpos[0] minus a small control cost."""

    skip = 2
    metric_names = ("reward_forward", "reward_ctrl", "reward_survive", "x_velocity")

    def __init__(self, xml_file=None, frame_skip: int = 4, forward_reward_weight: float = 1.0,
                 ctrl_cost_weight: float = 1e-4, reset_noise_scale: float = 0.1,
                 exclude_current_positions_from_observation: bool = True):
        super().__init__(_load(xml_file, "swimmer.xml"), frame_skip, reset_noise_scale,
                         forward_reward_weight, ctrl_cost_weight,
                         exclude_current_positions_from_observation=
                         exclude_current_positions_from_observation)


class HalfCheetah(_Locomotion):
    """HalfCheetah-v5: forward velocity minus control cost; never terminates."""

    normal_qvel = True

    def __init__(self, xml_file=None, frame_skip: int = 5, forward_reward_weight: float = 1.0,
                 ctrl_cost_weight: float = 0.1, reset_noise_scale: float = 0.1,
                 exclude_current_positions_from_observation: bool = True):
        super().__init__(_load(xml_file, "half_cheetah.xml"), frame_skip, reset_noise_scale,
                         forward_reward_weight, ctrl_cost_weight,
                         exclude_current_positions_from_observation=
                         exclude_current_positions_from_observation)


class Hopper(_Locomotion):
    """Hopper-v5: healthy while |state[2:]| < 100, z > 0.7 and |angle| < 0.2."""

    clip_qvel = True

    def __init__(self, xml_file=None, frame_skip: int = 4, forward_reward_weight: float = 1.0,
                 ctrl_cost_weight: float = 1e-3, healthy_reward: float = 1.0,
                 terminate_when_unhealthy: bool = True,
                 healthy_state_range=(-100.0, 100.0), healthy_z_range=(0.7, float("inf")),
                 healthy_angle_range=(-0.2, 0.2), reset_noise_scale: float = 5e-3,
                 exclude_current_positions_from_observation: bool = True):
        super().__init__(_load(xml_file, "hopper.xml"), frame_skip, reset_noise_scale,
                         forward_reward_weight, ctrl_cost_weight, healthy_reward,
                         terminate_when_unhealthy, exclude_current_positions_from_observation)
        self.healthy_state_range = healthy_state_range
        self.healthy_z_range = healthy_z_range
        self.healthy_angle_range = healthy_angle_range

    def is_healthy(self, m, d):
        z, angle = d.qpos[1], d.qpos[2]
        state = jp.concatenate([d.qpos, d.qvel])[2:]
        lo, hi = self.healthy_state_range
        zlo, zhi = self.healthy_z_range
        alo, ahi = self.healthy_angle_range
        return (jp.all((lo < state) & (state < hi)) & (zlo < z) & (z < zhi)
                & (alo < angle) & (angle < ahi))


class Walker2d(_Locomotion):
    """Walker2d-v5 (walker2d_v5.xml): healthy while 0.8 < z < 2 and |angle| < 1."""

    clip_qvel = True

    def __init__(self, xml_file=None, frame_skip: int = 4, forward_reward_weight: float = 1.0,
                 ctrl_cost_weight: float = 1e-3, healthy_reward: float = 1.0,
                 terminate_when_unhealthy: bool = True, healthy_z_range=(0.8, 2.0),
                 healthy_angle_range=(-1.0, 1.0), reset_noise_scale: float = 5e-3,
                 exclude_current_positions_from_observation: bool = True):
        super().__init__(_load(xml_file, "walker2d_v5.xml"), frame_skip, reset_noise_scale,
                         forward_reward_weight, ctrl_cost_weight, healthy_reward,
                         terminate_when_unhealthy, exclude_current_positions_from_observation)
        self.healthy_z_range = healthy_z_range
        self.healthy_angle_range = healthy_angle_range

    def is_healthy(self, m, d):
        z, angle = d.qpos[1], d.qpos[2]
        zlo, zhi = self.healthy_z_range
        alo, ahi = self.healthy_angle_range
        return (zlo < z) & (z < zhi) & (alo < angle) & (angle < ahi)


class Ant(_Locomotion):
    """Ant-v5: torso xy progress, control and clipped contact-force costs, cfrc_ext in obs."""

    skip = 2
    normal_qvel = True
    metric_names = ("reward_forward", "reward_ctrl", "reward_survive", "x_velocity",
                    "reward_contact")

    def __init__(self, xml_file=None, frame_skip: int = 5, forward_reward_weight: float = 1.0,
                 ctrl_cost_weight: float = 0.5, contact_cost_weight: float = 5e-4,
                 healthy_reward: float = 1.0, main_body: int | str = 1,
                 terminate_when_unhealthy: bool = True, healthy_z_range=(0.2, 1.0),
                 contact_force_range=(-1.0, 1.0), reset_noise_scale: float = 0.1,
                 exclude_current_positions_from_observation: bool = True,
                 include_cfrc_ext_in_observation: bool = True):
        super().__init__(_load(xml_file, "ant.xml"), frame_skip, reset_noise_scale,
                         forward_reward_weight, ctrl_cost_weight, healthy_reward,
                         terminate_when_unhealthy, exclude_current_positions_from_observation)
        self.contact_cost_weight = contact_cost_weight
        self.healthy_z_range = healthy_z_range
        self.contact_force_range = contact_force_range
        self.main_body = (main_body if isinstance(main_body, (int, np.integer))
                          else name2id(self.model, ObjType.BODY, main_body))
        self.include_cfrc_ext = include_cfrc_ext_in_observation

    def position(self, m, d):
        return d.xpos[self.main_body, 0]

    def _contact_forces(self, d):
        return jp.clip(d.cfrc_ext, *self.contact_force_range)

    def is_healthy(self, m, d):
        state = jp.concatenate([d.qpos, d.qvel])
        lo, hi = self.healthy_z_range
        return jp.all(jp.isfinite(state)) & (lo <= state[2]) & (state[2] <= hi)

    def extra_cost(self, m, d, action):
        return {"reward_contact":
                self.contact_cost_weight * jp.sum(jp.square(self._contact_forces(d)))}

    def observation(self, m, d, info):
        obs = [d.qpos[self.skip if self.exclude else 0:], d.qvel]
        if self.include_cfrc_ext:
            obs.append(self._contact_forces(d)[1:].ravel())
        return jp.concatenate(obs)


class Humanoid(_Locomotion):
    """Humanoid-v5: mass-centre progress, ctrl and capped contact costs, 1 < z < 2 healthy."""

    skip = 2
    metric_names = ("reward_forward", "reward_ctrl", "reward_survive", "x_velocity",
                    "reward_contact")

    def __init__(self, xml_file=None, frame_skip: int = 5, forward_reward_weight: float = 1.25,
                 ctrl_cost_weight: float = 0.1, contact_cost_weight: float = 5e-7,
                 contact_cost_range=(-np.inf, 10.0), healthy_reward: float = 5.0,
                 terminate_when_unhealthy: bool = True, healthy_z_range=(1.0, 2.0),
                 reset_noise_scale: float = 1e-2,
                 exclude_current_positions_from_observation: bool = True,
                 include_cinert_in_observation: bool = True,
                 include_cvel_in_observation: bool = True,
                 include_qfrc_actuator_in_observation: bool = True,
                 include_cfrc_ext_in_observation: bool = True):
        super().__init__(_load(xml_file, "humanoid.xml"), frame_skip, reset_noise_scale,
                         forward_reward_weight, ctrl_cost_weight, healthy_reward,
                         terminate_when_unhealthy, exclude_current_positions_from_observation)
        self.contact_cost_weight = contact_cost_weight
        self.contact_cost_range = contact_cost_range
        self.healthy_z_range = healthy_z_range
        self.include = (include_cinert_in_observation, include_cvel_in_observation,
                        include_qfrc_actuator_in_observation, include_cfrc_ext_in_observation)

    def position(self, m, d):
        # gymnasium's mass_center: body_mass-weighted xipos
        mass = jp.asarray(m.body_mass, d.xipos.dtype)
        return (mass @ d.xipos)[0] / jp.sum(mass)

    def control(self, d, action):
        return d.ctrl  # v5 charges data.ctrl, which equals the action

    def is_healthy(self, m, d):
        lo, hi = self.healthy_z_range
        return (lo < d.qpos[2]) & (d.qpos[2] < hi)

    def extra_cost(self, m, d, action):
        cost = self.contact_cost_weight * jp.sum(jp.square(d.cfrc_ext))
        return {"reward_contact": jp.clip(cost, *self.contact_cost_range)}

    def observation(self, m, d: Data, info):
        cinert, cvel, qfrc, cfrc = self.include
        obs = [d.qpos[self.skip if self.exclude else 0:], d.qvel]
        if cinert:
            obs.append(d.cinert[1:].ravel())
        if cvel:
            obs.append(d.cvel[1:].ravel())
        if qfrc:
            obs.append(d.qfrc_actuator[6:])
        if cfrc:
            obs.append(d.cfrc_ext[1:].ravel())
        return jp.concatenate(obs)


TASKS = {
    "InvertedPendulum": InvertedPendulum,
    "InvertedDoublePendulum": InvertedDoublePendulum,
    "Reacher": Reacher,
    "Swimmer": Swimmer,
    "Hopper": Hopper,
    "Walker2d": Walker2d,
    "HalfCheetah": HalfCheetah,
    "Ant": Ant,
    "Humanoid": Humanoid,
}

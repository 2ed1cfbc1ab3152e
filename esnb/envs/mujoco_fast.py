"""Gymnasium v5's MuJoCo locomotion steps, computed straight from ``MjData``.

Gymnasium's ``step`` spends about a third of a HalfCheetah step in Python around the physics:
``mj_rnePostConstraint`` every step (its results, ``cacc``/``cfrc_*``, are read only by tasks
that observe or cost contact forces), an action-shape check, properties recomputing the state
vector, an info dict. :func:`fast_core` returns, for the v5 classes listed in ``_STEPS``, a
``step`` that calls ``mujoco.mj_step`` itself and computes the same observation, reward,
``terminated`` and ``truncated`` with the same numpy expressions in the same order, so the bits
are gymnasium's (``tests/test_mujoco_fast.py`` steps both side by side for whole episodes).
Resets stay gymnasium's own (its ``np_random`` draws the reset noise). The task's settings
(``ctrl_cost_weight``, healthy ranges, ``frame_skip``, ``xml_file``, ...) are read from the
made environment, so any ``env_kwargs`` gymnasium takes are honoured; an environment that
renders, or any other class (a v4 id, a subclass), keeps gymnasium's step.
"""

from __future__ import annotations

import mujoco
import numpy as np
from gymnasium.envs.mujoco import (
    ant_v5,
    half_cheetah_v5,
    hopper_v5,
    humanoid_v5,
    inverted_double_pendulum_v5,
    inverted_pendulum_v5,
    swimmer_v5,
    walker2d_v5,
)

# np.sum(x) is np.add.reduce(x, None) behind a Python wrapper: called directly, the same bits
_concat, _clip, _sum, _square = np.concatenate, np.clip, np.add.reduce, np.square


class MujocoCore:
    """A v5 MuJoCo environment with :func:`fast_core`'s step and gymnasium's reset.

    ``step(action) -> (obs, reward, terminated, truncated, info)`` with an empty info dict
    (nothing in esnb reads a MuJoCo task's info); ``reset(seed=)`` is the environment's own.
    """

    def __init__(self, env, step):
        self.unwrapped = env
        self.model, self.data = env.model, env.data
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self.step = step
        self.reset = env.reset

    def close(self) -> None:
        self.unwrapped.close()


def fast_core(env) -> MujocoCore | None:
    """A :class:`MujocoCore` for the unwrapped gymnasium environment ``env`` when its class is
    one this module reproduces and it does not render; else None (keep gymnasium's step)."""
    build = _STEPS.get(type(env))
    if build is None or getattr(env, "render_mode", None) is not None:
        return None
    return MujocoCore(env, build(env))


def _physics(env, forces: bool = False):
    """``(advance(action), qpos, qvel)``: set the controls and take ``frame_skip`` physics
    steps, then ``mj_rnePostConstraint`` only when ``forces`` (the task reads ``cfrc_ext``)."""
    model, data = env.model, env.data
    ctrl, nstep, mj_step = data.ctrl, int(env.frame_skip), mujoco.mj_step
    rne = mujoco.mj_rnePostConstraint

    if forces:
        def advance(action):
            ctrl[:] = action
            mj_step(model, data, nstep=nstep)
            rne(model, data)
    else:
        def advance(action):
            ctrl[:] = action
            mj_step(model, data, nstep=nstep)

    return advance, data.qpos, data.qvel


def _forward_runner(skip: int):
    """HalfCheetah's and Swimmer's step: forward velocity of ``qpos[0]`` minus a control
    cost; the observation leaves out the first ``skip`` positions (by default)."""

    def build(env):
        advance, qpos, qvel = _physics(env)
        dt, fw, cw = env.dt, env._forward_reward_weight, env._ctrl_cost_weight
        first = skip if env._exclude_current_positions_from_observation else 0

        def step(action):
            before = qpos[0]
            advance(action)
            x_velocity = (qpos[0] - before) / dt
            obs = _concat((qpos[first:], qvel))
            reward = fw * x_velocity - cw * _sum(_square(action), None)
            return obs, reward, False, False, {}

        return step

    return build


def _hopper_walker(healthy):
    """Hopper's and Walker2d's step: they differ only in the health check ``healthy(env)``
    builds (a function of qpos, qvel)."""

    def build(env):
        advance, qpos, qvel = _physics(env)
        dt, fw, cw = env.dt, env._forward_reward_weight, env._ctrl_cost_weight
        hr, terminate = env._healthy_reward, env._terminate_when_unhealthy
        skip = 1 if env._exclude_current_positions_from_observation else 0
        is_healthy = healthy(env, qpos, qvel)

        def step(action):
            before = qpos[0]
            advance(action)
            x_velocity = (qpos[0] - before) / dt
            obs = _concat((qpos[skip:], _clip(qvel, -10, 10)))
            ok = is_healthy()
            rewards = fw * x_velocity + ok * hr
            reward = rewards - cw * _sum(_square(action), None)
            return obs, reward, (not ok) and terminate, False, {}

        return step

    return build


def _hopper_health(env, qpos, qvel):
    min_state, max_state = env._healthy_state_range
    min_z, max_z = env._healthy_z_range
    min_angle, max_angle = env._healthy_angle_range
    logical_and, all_ = np.logical_and, np.all

    def healthy():
        z, angle = qpos[1:3]
        state = _concat((qpos, qvel))[2:]
        return all((all_(logical_and(min_state < state, state < max_state)),
                    min_z < z < max_z, min_angle < angle < max_angle))

    return healthy


def _walker_health(env, qpos, qvel):
    min_z, max_z = env._healthy_z_range
    min_angle, max_angle = env._healthy_angle_range

    def healthy():
        z, angle = qpos[1:3]
        return (min_z < z < max_z) and (min_angle < angle < max_angle)

    return healthy


def _ant(env):
    advance, qpos, qvel = _physics(env, forces=True)
    data = env.data
    dt, fw, cw = env.dt, env._forward_reward_weight, env._ctrl_cost_weight
    ccw, hr = env._contact_cost_weight, env._healthy_reward
    terminate = env._terminate_when_unhealthy
    min_z, max_z = env._healthy_z_range
    low, high = env._contact_force_range
    xpos, body = data.xpos, env.model.body(env._main_body).id
    cfrc_ext, isfinite = data.cfrc_ext, np.isfinite
    skip = 2 if env._exclude_current_positions_from_observation else 0
    observe_forces = env._include_cfrc_ext_in_observation

    def step(action):
        before = xpos[body, :2].copy()
        advance(action)
        x_velocity = ((xpos[body, :2] - before) / dt)[0]
        forces = _clip(cfrc_ext, low, high)
        if observe_forces:
            obs = _concat((qpos[skip:], qvel, forces[1:].flatten()))
        else:
            obs = _concat((qpos[skip:], qvel))
        state = _concat((qpos, qvel))
        ok = isfinite(state).all() and min_z <= state[2] <= max_z
        rewards = x_velocity * fw + ok * hr
        costs = cw * _sum(_square(action), None) + ccw * _sum(_square(forces), None)
        return obs, rewards - costs, (not ok) and terminate, False, {}

    return step


def _humanoid(env):
    advance, qpos, qvel = _physics(env, forces=True)
    model, data = env.model, env.data
    dt, fw, cw = env.dt, env._forward_reward_weight, env._ctrl_cost_weight
    ccw, hr = env._contact_cost_weight, env._healthy_reward
    terminate = env._terminate_when_unhealthy
    min_cost, max_cost = env._contact_cost_range
    min_z, max_z = env._healthy_z_range
    skip = 2 if env._exclude_current_positions_from_observation else 0
    ctrl, cfrc_ext, mass_center = data.ctrl, data.cfrc_ext, humanoid_v5.mass_center
    # what gymnasium puts after the velocities (flat copies; an excluded part is an empty
    # array, which adds nothing to the concatenation)
    parts = [(env._include_cinert_in_observation, data.cinert, 1),
             (env._include_cvel_in_observation, data.cvel, 1),
             (env._include_qfrc_actuator_in_observation, data.qfrc_actuator, 6),
             (env._include_cfrc_ext_in_observation, data.cfrc_ext, 1)]
    extras = [(array, start) for included, array, start in parts if included is True]

    def step(action):
        before = mass_center(model, data)
        advance(action)
        x_velocity = ((mass_center(model, data) - before) / dt)[0]
        obs = _concat([qpos[skip:], qvel] + [a[s:].flatten() for a, s in extras])
        ok = min_z < qpos[2] < max_z
        contact = _clip(ccw * _sum(_square(cfrc_ext), None), min_cost, max_cost)
        rewards = fw * x_velocity + ok * hr
        costs = cw * _sum(_square(ctrl), None) + contact
        return obs, rewards - costs, (not ok) and terminate, False, {}

    return step


def _inverted_pendulum(env):
    advance, qpos, qvel = _physics(env)
    isfinite, abs_ = np.isfinite, np.abs

    def step(action):
        advance(action)
        obs = _concat([qpos, qvel])
        terminated = bool(not isfinite(obs).all() or (abs_(obs[1]) > 0.2))
        return obs, int(not terminated), terminated, False, {}

    return step


def _inverted_double_pendulum(env):
    advance, qpos, qvel = _physics(env)
    data, hr = env.data, env._healthy_reward
    site_xpos, qfrc_constraint, sin, cos = data.site_xpos, data.qfrc_constraint, np.sin, np.cos

    def step(action):
        advance(action)
        x, _, y = site_xpos[0]
        obs = _concat([qpos[:1], sin(qpos[1:]), cos(qpos[1:]), _clip(qvel, -10, 10),
                       _clip(qfrc_constraint, -10, 10)[:1]])
        terminated = bool(y <= 1)
        v1, v2 = qvel[1:3]
        dist_penalty = 0.01 * x**2 + (y - 2) ** 2
        vel_penalty = 1e-3 * v1**2 + 5e-3 * v2**2
        reward = hr * int(not terminated) - dist_penalty - vel_penalty
        return obs, reward, terminated, False, {}

    return step


#: gymnasium's v5 class -> the builder of its step
_STEPS = {
    half_cheetah_v5.HalfCheetahEnv: _forward_runner(1),
    swimmer_v5.SwimmerEnv: _forward_runner(2),
    hopper_v5.HopperEnv: _hopper_walker(_hopper_health),
    walker2d_v5.Walker2dEnv: _hopper_walker(_walker_health),
    ant_v5.AntEnv: _ant,
    humanoid_v5.HumanoidEnv: _humanoid,
    inverted_pendulum_v5.InvertedPendulumEnv: _inverted_pendulum,
    inverted_double_pendulum_v5.InvertedDoublePendulumEnv: _inverted_double_pendulum,
}

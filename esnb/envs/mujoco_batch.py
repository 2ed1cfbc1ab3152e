"""Lock-step episodes of a MuJoCo v5 task stepped as the rows of one ``mujoco.batch.Batch``.

:func:`esnb.envs.lockstep.run_lockstep` gives a task's episodes one stacked policy forward per
step but still steps each live episode's environment in a Python loop: ~6 µs of Python per
episode around ~28 µs of HalfCheetah physics. Here every live episode is a state row of one
``Batch`` (``nthread=1``: a worker process has one core); a step is one policy forward, one
``Batch.step`` of rows ``0..k-1`` and one set of numpy expressions over those rows computing
the observations, rewards and terminations that :mod:`esnb.envs.mujoco_fast` computes per
episode, so the Python per step is shared by the ``k`` episodes. Measured (``esnb bench
rollout``, HalfCheetah-v5, a 10-pair task, on a loaded 2-core machine): ES's worker loop 1.46x
as many steps per CPU second as the per-episode lock step (12,943 against 8,894), the
batch's ``step`` ~80% of the loop's time (profiled), the stacked policy forward ~10%.

Bits: the batch's step is ``mj_step`` on each row's integration state (MuJoCo's documented
guarantee; the tests check it). Resets stay gymnasium's own (its ``np_random`` draws the reset
noise): one environment is reset with the episode's seed and its ``mjSTATE_INTEGRATION``
state copied into the episode's row. The row-wise expressions are the per-episode ones with a
leading axis: element-wise operations, comparisons, clipping, and float32 sums of squares
along ``axis=1`` of contiguous rows (the same pairwise loop per row, checked bitwise for 1 to
17 components); ``sin``/``cos`` take each row's two angles as the same contiguous pair
gymnasium passes. ``x ** 2`` is the exception: numpy's array power squares (``x * x``) where a
float64 scalar's calls ``pow``, which differs in the last bit for ~1 in 1,300 values
(measured), so InvertedDoublePendulum's penalties are computed per row on Python floats (also
``pow``). Every episode is :func:`run_lockstep`'s, field for field (``tests/test_mujoco_batch.py``).

Batched: HalfCheetah, Swimmer, Hopper, Walker2d, InvertedPendulum, InvertedDoublePendulum (its
``site_xpos`` and ``qfrc_constraint`` are derived fields the batch binds, one substep behind the
state as after ``mj_step``). Not batched: Ant and Humanoid read ``cfrc_ext``, which gymnasium
computes with ``mj_rnePostConstraint`` after the step; the batch never calls it, and a force
sensor added to make ``mj_step`` compute it does not give gymnasium's values (they differed in
166 of 300 Ant steps, measured), so :func:`supports` leaves them, and any environment that
renders, another class, or a wrapper, to :func:`run_lockstep`.
"""

from __future__ import annotations

import weakref

import mujoco
import numpy as np
from gymnasium.envs.mujoco import (
    half_cheetah_v5,
    hopper_v5,
    inverted_double_pendulum_v5,
    inverted_pendulum_v5,
    swimmer_v5,
    walker2d_v5,
)
from mujoco.batch import Batch

from esnb.envs.lockstep import EpisodeSpec
from esnb.envs.mujoco_fast import MujocoCore
from esnb.envs.rollout import Episode, finish_episode
from esnb.nets.batch_policy import BatchPolicy

_INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION
_sum, _square, _clip, _isfinite = np.add.reduce, np.square, np.clip, np.isfinite


def supports(env) -> bool:
    """Whether :func:`run_batched` runs ``env``'s episodes: a :class:`esnb.envs.FastEnv` whose
    core is :mod:`esnb.envs.mujoco_fast`'s (a v5 class, not rendering, only gymnasium's
    bookkeeping wrappers) of a task this module batches."""
    core = getattr(env, "core", None)
    return isinstance(core, MujocoCore) and type(core.unwrapped) in _BUILDERS


class _Rows:
    """One environment's batch of ``width`` rows: the task's step over rows ``0..k-1`` and the
    observation buffers of collecting episodes (reused across calls)."""

    def __init__(self, env, width: int):
        u = env.core.unwrapped
        self.model, self.data = u.model, u.data
        self.batch = Batch(u.model, width, nthread=1)
        if self.batch.nstate != mujoco.mj_stateSize(u.model, _INTEGRATION):
            raise RuntimeError("a batch row is not an mjSTATE_INTEGRATION state")
        self.state = self.batch.state
        ids = [np.arange(k, dtype=np.int32) for k in range(width)] + [None]
        self.step = _BUILDERS[type(u)](u, self.batch, ids)
        self.buffers: list[np.ndarray] = []

    def load(self, slot: int) -> None:
        """Copy the environment's state (just reset) into row ``slot``."""
        mujoco.mj_getState(self.model, self.data, self.state[slot], _INTEGRATION)


#: FastEnv -> {width: _Rows}; environments are cached per thread, so are their batches
_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _rows_for(env, width: int) -> _Rows:
    per_env = _ROWS.setdefault(env, {})
    if width not in per_env:
        per_env[width] = _Rows(env, width)
    return per_env[width]


class _Live:
    """A running episode: what stays per episode (its row's numbers are arrays by slot)."""

    __slots__ = ("index", "buf", "perturb")

    def __init__(self, index: int, buf, perturb):
        self.index, self.buf, self.perturb = index, buf, perturb


def run_batched(envs: list, policy: BatchPolicy, episodes: list[EpisodeSpec]) -> list[Episode]:
    """Run ``episodes`` in lock step as the rows of one batch, at most ``policy.width`` at once.

    Parameters
    ----------
    envs : list of FastEnv
        ``envs[0]`` resets every episode (its state is then copied into the episode's row);
        :func:`supports` must hold for it.
    policy : BatchPolicy
        Its slots get each episode's parameters as it starts; slot ``j`` acts for row ``j``.
    episodes : list of EpisodeSpec

    Returns
    -------
    list of Episode
        In the order of ``episodes``: :func:`esnb.envs.lockstep.run_lockstep`'s, bit for bit.
    """
    env = envs[0]
    width, limit, reset = policy.width, env.limit, env.core.reset
    rows = _rows_for(env, width)
    step, state = rows.step, rows.state
    obs = np.zeros((width, policy.spec.obs_dim), dtype=np.float64)
    totals = np.zeros(width, dtype=np.float64)
    steps = np.zeros(width, dtype=np.int64)
    results: list[Episode | None] = [None] * len(episodes)
    live: list[_Live] = []
    waiting = iter(range(len(episodes)))
    collecting = 0

    def start(slot: int) -> bool:
        nonlocal collecting
        i = next(waiting, None)
        if i is None:
            return False
        spec = episodes[i]
        policy.load(slot, spec.params() if callable(spec.params) else spec.params)
        obs[slot], _ = reset(seed=int(spec.seed))
        rows.load(slot)
        totals[slot], steps[slot] = 0.0, 0
        buf = None
        if spec.collect_obs:
            collecting += 1
            buf = rows.buffers.pop() if rows.buffers else np.empty((limit + 1, obs.shape[1]))
        ep = _Live(i, buf, spec.perturb)
        if slot == len(live):
            live.append(ep)
        else:
            live[slot] = ep
        return True

    # exploration noise goes on the raw outputs, the bounds after it (perturb clips)
    noisy = any(e.perturb is not None for e in episodes)
    while len(live) < width and start(len(live)):
        pass
    while live:
        k = len(live)
        if collecting:
            for j, ep in enumerate(live):
                if ep.buf is not None:
                    ep.buf[steps[j]] = obs[j]
        actions = policy.act(obs, k, clip=not noisy)
        rowwise = None
        if noisy:
            actions, rowwise = _perturbed(policy, actions, live)
        reward, terminated = step(k, actions, obs, rowwise)
        steps[:k] += 1
        finite = _isfinite(reward)
        np.add(totals[:k], reward, out=totals[:k], where=finite)
        done = ~finite
        done |= steps[:k] >= limit
        if terminated is not None:
            done |= terminated
        if not done.any():
            continue
        for j in np.flatnonzero(done)[::-1].tolist():  # from the highest slot (as run_lockstep)
            ep = live[j]
            ended = terminated is not None and bool(terminated[j])
            results[ep.index] = finish_episode(float(totals[j]), int(steps[j]), limit, ended,
                                               False, bool(finite[j]), obs[j], ep.buf)
            if ep.buf is not None:
                collecting -= 1
                rows.buffers.append(ep.buf)
            if not start(j):
                last = live.pop()
                m = len(live)
                if j < m:
                    policy.move(m, j)
                    live[j] = last
                    state[j], obs[j], totals[j], steps[j] = state[m], obs[m], totals[m], steps[m]
    return results


def _perturbed(policy: BatchPolicy, raw: np.ndarray, live: list) -> tuple:
    """The actions of a step with exploration noise: each perturbed row ``perturb(raw row)``,
    the others clipped to the bounds. ``(actions [k, act_dim], rowwise)``: ``rowwise`` is None
    when every row is float32 of the policy's shape, else each row's action as given (its
    control cost is then computed per row, on its own dtype, as gymnasium's step would)."""
    actions = policy.clip(raw)
    given = None
    for j, ep in enumerate(live):
        if ep.perturb is None:
            continue
        a = ep.perturb(raw[j])
        if given is None and isinstance(a, np.ndarray) and a.dtype == actions.dtype \
                and a.shape == actions.shape[1:]:
            actions[j] = a
            continue
        if given is None:
            given = list(actions)
        given[j] = a
    if given is None:
        return actions, None
    return np.array([np.broadcast_to(a, actions.shape[1:]) for a in given], np.float64), given


def _ctrl_cost(weight, actions: np.ndarray, rowwise) -> np.ndarray:
    """``weight * sum(square(action))`` per row (a float32 sum for float32 actions)."""
    if rowwise is None:
        return weight * _sum(_square(actions), 1)
    return np.array([weight * _sum(_square(a), None) for a in rowwise], dtype=np.float64)


# -- the tasks' steps over rows 0..k-1: build(env, batch, ids) -> step(k, actions, obs,
# rowwise) -> (reward [k], terminated [k] or None), the observations written into obs[:k] --
def _fields(env, batch):
    return batch.bind("qpos"), batch.bind("qvel"), batch.bind("ctrl"), int(env.frame_skip)


def _forward_runner(skip: int):
    """HalfCheetah's and Swimmer's step (:func:`esnb.envs.mujoco_fast._forward_runner`)."""

    def build(env, batch, ids):
        qpos, qvel, ctrl, nstep = _fields(env, batch)
        dt, fw, cw = env.dt, env._forward_reward_weight, env._ctrl_cost_weight
        first = skip if env._exclude_current_positions_from_observation else 0
        npos = qpos.shape[1] - first

        def step(k, actions, obs, rowwise):
            before = qpos[:k, 0].copy()
            ctrl[:k] = actions
            batch.step(ids[k], nstep=nstep)
            x_velocity = (qpos[:k, 0] - before) / dt
            obs[:k, :npos] = qpos[:k, first:]
            obs[:k, npos:] = qvel[:k]
            return fw * x_velocity - _ctrl_cost(cw, actions, rowwise), None

        return step

    return build


def _hopper_walker(hopper: bool):
    """Hopper's and Walker2d's step (:func:`esnb.envs.mujoco_fast._hopper_walker`): Hopper's
    health also bounds every state component after the first two."""

    def build(env, batch, ids):
        qpos, qvel, ctrl, nstep = _fields(env, batch)
        dt, fw, cw = env.dt, env._forward_reward_weight, env._ctrl_cost_weight
        hr, terminate = env._healthy_reward, bool(env._terminate_when_unhealthy)
        skip = 1 if env._exclude_current_positions_from_observation else 0
        npos = qpos.shape[1] - skip
        min_z, max_z = env._healthy_z_range
        min_angle, max_angle = env._healthy_angle_range
        min_state, max_state = env._healthy_state_range if hopper else (None, None)

        def healthy(k):
            z, angle = qpos[:k, 1], qpos[:k, 2]
            ok = (min_z < z) & (z < max_z) & (min_angle < angle) & (angle < max_angle)
            if hopper:
                for part in (qpos[:k, 2:], qvel[:k]):
                    ok &= ((min_state < part) & (part < max_state)).all(axis=1)
            return ok

        def step(k, actions, obs, rowwise):
            before = qpos[:k, 0].copy()
            ctrl[:k] = actions
            batch.step(ids[k], nstep=nstep)
            x_velocity = (qpos[:k, 0] - before) / dt
            obs[:k, :npos] = qpos[:k, skip:]
            _clip(qvel[:k], -10, 10, out=obs[:k, npos:])
            ok = healthy(k)
            rewards = fw * x_velocity + ok * hr
            reward = rewards - _ctrl_cost(cw, actions, rowwise)
            return reward, (~ok if terminate else np.zeros(k, dtype=bool))

        return step

    return build


def _inverted_pendulum(env, batch, ids):
    qpos, qvel, ctrl, nstep = _fields(env, batch)
    nq = qpos.shape[1]

    def step(k, actions, obs, rowwise):
        ctrl[:k] = actions
        batch.step(ids[k], nstep=nstep)
        obs[:k, :nq] = qpos[:k]
        obs[:k, nq:] = qvel[:k]
        rows = obs[:k]
        terminated = ~_isfinite(rows).all(axis=1) | (np.abs(rows[:, 1]) > 0.2)
        return (~terminated).astype(np.float64), terminated

    return step


def _inverted_double_pendulum(env, batch, ids):
    qpos, qvel, ctrl, nstep = _fields(env, batch)
    site_xpos, qfrc_constraint = batch.bind("site_xpos"), batch.bind("qfrc_constraint")
    hr = env._healthy_reward
    sin, cos = np.sin, np.cos
    # [qpos[:1], sin(qpos[1:]), cos(qpos[1:]), clip(qvel), clip(qfrc_constraint)[:1]]
    s, c, v = 1, qpos.shape[1], 2 * qpos.shape[1] - 1
    f = v + qvel.shape[1]

    def step(k, actions, obs, rowwise):
        ctrl[:k] = actions
        batch.step(ids[k], nstep=nstep)
        obs[:k, 0] = qpos[:k, 0]
        sin(qpos[:k, 1:], out=obs[:k, s:c])
        cos(qpos[:k, 1:], out=obs[:k, c:v])
        _clip(qvel[:k], -10, 10, out=obs[:k, v:f])
        _clip(qfrc_constraint[:k, :1], -10, 10, out=obs[:k, f:f + 1])
        y = site_xpos[:k, 0, 2]
        terminated = y <= 1
        # gymnasium's x**2 on float64 scalars is pow(): per row, on Python floats (also pow)
        reward = [hr * int(not term) - (0.01 * x**2 + (yy - 2) ** 2)
                  - (1e-3 * v1**2 + 5e-3 * v2**2)
                  for term, x, yy, v1, v2 in zip(terminated.tolist(),
                                                 site_xpos[:k, 0, 0].tolist(), y.tolist(),
                                                 qvel[:k, 1].tolist(), qvel[:k, 2].tolist())]
        return np.array(reward, dtype=np.float64), terminated

    return step


#: gymnasium's v5 class -> the builder of its step over rows
_BUILDERS = {
    half_cheetah_v5.HalfCheetahEnv: _forward_runner(1),
    swimmer_v5.SwimmerEnv: _forward_runner(2),
    hopper_v5.HopperEnv: _hopper_walker(hopper=True),
    walker2d_v5.Walker2dEnv: _hopper_walker(hopper=False),
    inverted_pendulum_v5.InvertedPendulumEnv: _inverted_pendulum,
    inverted_double_pendulum_v5.InvertedDoublePendulumEnv: _inverted_double_pendulum,
}

"""IMPALA's worker-side tasks (Espeholt et al. 2018, arXiv 1802.01561): actor slots and
greedy evaluation (run on Dask workers, or inline in the driver).

An *actor* is a slot: ``envs_per_actor`` environments stepped in lockstep with one batched
numpy forward per step (:class:`~esnb.rl.impala.actor_critic.NumpyActor`; torch's on frames,
whose observations stay uint8 in the unrolls). Its state (environments,
current observations, episode counters, random generator) lives on the worker in a
module-level table keyed by ``(run, slot)``, so episodes continue from one task to the next.
A task runs ``segments`` consecutive unroll segments of T steps with the parameters it was
given and returns ``segments * envs_per_actor`` unrolls, time-major.

If a slot's task lands on a worker that does not hold its state (the runner pins slots to
workers, but a worker can die or Dask can move a task), the slot starts fresh episodes there:
every unroll is self-contained (it starts in some state and bootstraps at its end), so this
costs only the abandoned episodes.

A slot steps its environments in lockstep, unroll segment by unroll segment (not whole
episodes), so it keeps its own stepping; greedy evaluation runs whole episodes in lock step on
:func:`esnb.envs.lockstep.run_lockstep` (ES's), one batched forward a step.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from esnb.envs.lockstep import EpisodeSpec, run_lockstep
from esnb.envs.rollout import FastEnv, cached_envs
from esnb.rl.impala.actor_critic import ActorCriticSpec, NumpyActor


@dataclass(frozen=True)
class ActorConfig:
    """What every actor task of a run shares (small; sent with each task).

    Attributes
    ----------
    run : str
        Unique run token: the key of the actors' state on workers.
    env_id : str
        Gymnasium id.
    spec : ActorCriticSpec
        The network (actors use its policy part).
    envs_per_actor : int
        Environments one actor steps in lockstep (one numpy forward for all of them).
    seed : int
        Root seed; slot ``k`` draws from ``SeedSequence([seed, k, task])``.
    max_episode_steps : int, optional
        Episode cap (None: the env's own time limit).
    env_kwargs : tuple of (key, value)
        Extra ``gymnasium.make`` arguments.
    life_loss : bool
        A lost life (an env whose ``info`` has ``lives``: Atari) ends the learning segment
        (``terminated`` at that step: no bootstrap across it) while the game goes on; the
        episode's return and length stay the whole game's.
    """

    run: str
    env_id: str
    spec: ActorCriticSpec
    envs_per_actor: int = 8
    seed: int = 0
    max_episode_steps: int | None = None
    env_kwargs: tuple = ()
    life_loss: bool = False


class _ActorState:
    """One slot's environments and where their episodes are."""

    def __init__(self, cfg: ActorConfig, slot: int, task: int):
        self.rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            [int(cfg.seed), int(slot), int(task)])))
        n = cfg.envs_per_actor
        self.envs = [FastEnv(cfg.env_id, cfg.max_episode_steps, dict(cfg.env_kwargs))
                     for _ in range(n)]
        self.limit = self.envs[0].limit
        self.obs = np.zeros((n, cfg.spec.obs_dim), dtype=cfg.spec.obs_dtype)
        #: each environment's lives (-1: the env counts none)
        self.lives = np.full(n, -1, dtype=np.int64)
        for e in range(n):
            self.obs[e] = self._reset(e, seed=int(self.rng.integers(2**31 - 1)))
        self.t = np.zeros(n, dtype=np.int64)
        self.ep_return = np.zeros(n, dtype=np.float64)

    def _reset(self, e: int, seed: int | None = None) -> np.ndarray:
        """Start environment ``e``'s next episode. Each environment is seeded once, at its first
        episode (its generator then runs on, as Ape-X's actors do): an ALE environment given a
        seed reloads its ROM, which cost 7% of a Pong actor's time at every game's end
        (profiled)."""
        obs, info = self.envs[e].core.reset(seed=seed)
        self.lives[e] = int(info.get("lives", -1))
        return np.ravel(obs)

    def life_lost(self, e: int, info: dict) -> bool:
        """Whether this step took a life of environment ``e`` (and note its lives)."""
        lives = int(info.get("lives", -1))
        lost = 0 <= lives < self.lives[e]
        self.lives[e] = lives
        return lost


_STATES: dict[tuple[str, int], _ActorState] = {}
_LOCK = threading.Lock()


def _state(cfg: ActorConfig, slot: int, task: int) -> tuple[_ActorState, bool]:
    with _LOCK:
        st = _STATES.get((cfg.run, slot))
        if st is None:
            st = _STATES[(cfg.run, slot)] = _ActorState(cfg, slot, task)
            return st, True
        return st, False


def impala_unrolls(cfg: ActorConfig, payload: dict, slot: int, task: int, segments: int,
                   unroll_length: int) -> dict:
    """Run ``segments`` unroll segments of actor ``slot`` with the parameters in ``payload``.

    Parameters
    ----------
    cfg : ActorConfig
    payload : dict
        ``version``, ``params`` (actor parameters), ``obs_mean``, ``obs_std`` (or None), as
        :meth:`esnb.rl.impala.learner.ImpalaLearner.actor_payload` makes them.
    slot, task : int
        The actor and its task counter (seeds a fresh state).
    segments, unroll_length : int
        S segments of T steps: S * envs_per_actor unrolls.

    Returns
    -------
    dict
        Time-major unrolls ``u = s * envs_per_actor + e``: ``obs`` [T+1, U, obs_dim] (float32;
        frames uint8),
        ``actions`` [T, U] int64 or [T, U, act_dim] float32 (unclipped samples), ``rewards``
        float32 [T, U], ``terminated``/``truncated`` bool [T, U], ``behaviour_log_probs``
        float32 [T, U], ``trunc_t``/``trunc_u`` int64 [n] and ``trunc_obs`` [n, obs_dim]
        (dtype of ``obs``: observations a time limit cut off), ``finite`` bool [U] (False: the
        env returned a non-finite number; drop that unroll), ``version``, ``episode_returns``,
        ``episode_lengths``, ``frames``, ``seconds``, ``fresh`` (state made by this task).
    """
    t0 = time.perf_counter()
    S, T = int(segments), int(unroll_length)
    if S < 1 or T < 1:
        raise ValueError(f"segments and unroll_length must be >= 1, got {S}, {T}")
    spec = cfg.spec
    st, fresh = _state(cfg, slot, task)
    actor = NumpyActor(spec, payload["params"], payload.get("obs_mean"), payload.get("obs_std"))
    E, D = cfg.envs_per_actor, spec.obs_dim
    rng, envs, limit = st.rng, st.envs, st.limit
    steps = [env.core.step for env in envs]
    flat_obs = len(envs[0].observation_space.shape) == 1

    obs = np.empty((S, T + 1, E, D), dtype=spec.obs_dtype)  # frames: uint8, as the env's
    if spec.discrete:
        actions = np.empty((S, T, E), dtype=np.int64)
    else:
        actions = np.empty((S, T, E, spec.act_dim), dtype=np.float32)
    rewards = np.zeros((S, T, E), dtype=np.float32)
    terminated = np.zeros((S, T, E), dtype=bool)
    truncated = np.zeros((S, T, E), dtype=bool)
    logps = np.empty((S, T, E), dtype=np.float32)
    finite = np.ones((S, E), dtype=bool)
    trunc_pos: list[tuple[int, int, int]] = []
    trunc_obs: list[np.ndarray] = []
    ep_returns: list[float] = []
    ep_lengths: list[int] = []

    cur, t_ep, ep_ret = st.obs, st.t, st.ep_return
    life_loss = cfg.life_loss
    for s in range(S):
        obs[s, 0] = cur
        for t in range(T):
            a, lp = actor.sample(cur, rng)
            actions[s, t] = a
            logps[s, t] = lp
            env_a = actor.env_actions(a)
            if spec.discrete:
                env_a = env_a.tolist()  # python ints: what Discrete envs expect
            nxt = obs[s, t + 1]
            rew = rewards[s, t]
            for e in range(E):
                o, r, term, trunc, info = steps[e](env_a[e])
                nxt[e] = o if flat_obs else np.ravel(o)
                rew[e] = r
                t_ep[e] += 1
                trunc = (trunc or t_ep[e] >= limit) and not term
                if life_loss and st.life_lost(e, info) and not (term or trunc):
                    terminated[s, t, e] = True  # the segment ends here, the game goes on
                if term or trunc:
                    terminated[s, t, e] = term
                    truncated[s, t, e] = trunc
                    if trunc:
                        trunc_pos.append((s, t, e))
                        trunc_obs.append(nxt[e].copy())
                    ep_returns.append(float(ep_ret[e] + r))
                    ep_lengths.append(int(t_ep[e]))
                    ep_ret[e] = -r  # (+ r below)
                    t_ep[e] = 0
                    nxt[e] = st._reset(e)
            ep_ret += rew
            if not (np.isfinite(rew).all() and np.isfinite(nxt).all()):
                # a broken simulation (checked once per step, for all envs): drop the
                # unroll, end the episode without counting it, start a new one
                for e in np.flatnonzero(~(np.isfinite(rew) & np.isfinite(nxt).all(axis=1))):
                    finite[s, e] = False
                    rew[e], terminated[s, t, e], truncated[s, t, e] = 0.0, True, False
                    ep_ret[e], t_ep[e] = 0.0, 0
                    nxt[e] = st._reset(e)
            cur = nxt
        if s + 1 < S:
            obs[s + 1, 0] = cur
    st.obs = cur.copy()

    # [S, T, E, ...] -> time-major [T, S*E, ...]: unroll u = s * E + e
    def tm(x):
        x = np.moveaxis(x, 1, 0)
        return np.ascontiguousarray(x.reshape(x.shape[0], S * E, *x.shape[3:]))

    pos = np.asarray(trunc_pos, dtype=np.int64).reshape(-1, 3)
    cut = np.stack(trunc_obs) if trunc_obs else np.zeros((0, D), dtype=spec.obs_dtype)
    bad = ~np.isfinite(cut).all(axis=1)  # a time limit cut off a broken state
    finite[pos[bad, 0], pos[bad, 2]] = False
    ep_returns_arr = np.asarray(ep_returns, dtype=np.float64)
    ep_ok = np.isfinite(ep_returns_arr)
    frames = S * T * E
    return {
        "obs": tm(obs), "actions": tm(actions), "rewards": tm(rewards),
        "terminated": tm(terminated), "truncated": tm(truncated),
        "behaviour_log_probs": tm(logps),
        "trunc_t": pos[:, 1].copy(), "trunc_u": pos[:, 0] * E + pos[:, 2],
        "trunc_obs": cut,
        "finite": finite.reshape(S * E),
        "version": int(payload["version"]), "slot": int(slot), "task": int(task),
        "episode_returns": ep_returns_arr[ep_ok],
        "episode_lengths": np.asarray(ep_lengths, dtype=np.int64)[ep_ok],
        "frames": frames, "fresh": fresh, "seconds": time.perf_counter() - t0,
    }


def impala_evaluate(cfg: ActorConfig, payload: dict, env_seeds: np.ndarray) -> dict:
    """Greedy episodes (argmax / clipped mean) of the published policy, one per seed.

    The episodes run in lock step (:func:`esnb.envs.lockstep.run_lockstep`): one batched
    forward a step for all live episodes (on frames a single-frame forward costs nearly what a
    batch does), each episode the one :func:`esnb.envs.rollout.run_episode` would run.
    """
    t0 = time.perf_counter()
    seeds = [int(s) for s in env_seeds]
    envs = cached_envs(cfg.env_id, cfg.max_episode_steps, cfg.env_kwargs, len(seeds))
    actor = NumpyActor(cfg.spec, payload["params"], payload.get("obs_mean"),
                       payload.get("obs_std"))
    episodes = run_lockstep(envs, GreedyRows(actor, len(envs)),
                            [EpisodeSpec(None, seed) for seed in seeds])
    lengths = np.array([ep.length for ep in episodes], dtype=np.int64)
    return {"returns": np.array([ep.ret for ep in episodes], dtype=np.float64),
            "lengths": lengths, "finite": np.array([ep.finite for ep in episodes], dtype=bool),
            "steps": int(lengths.sum()), "seconds": time.perf_counter() - t0}


class GreedyRows:
    """:func:`~esnb.envs.lockstep.run_lockstep`'s policy when every episode acts with one
    parameter vector: the greedy action of each live row, one batched forward a step."""

    def __init__(self, actor: NumpyActor, width: int):
        self.actor, self.spec, self.width = actor, actor.spec, int(width)

    def load(self, slot: int, params) -> None:
        """Nothing to load: all slots share the actor's parameters."""

    def move(self, src: int, dst: int) -> None:
        """Nothing to move: all slots share the actor's parameters."""

    def act(self, rows: np.ndarray, k: int, clip: bool = True) -> np.ndarray:
        return self.actor.greedy(rows[:k])


def drop_actors(run: str) -> int:
    """Close and forget this worker's actors of ``run``; returns how many there were."""
    with _LOCK:
        keys = [k for k in _STATES if k[0] == run]
        states = [_STATES.pop(k) for k in keys]
    for st in states:
        for env in st.envs:
            env.close()
    return len(states)


def actor_slots(run: str) -> list[int]:
    """The slots of ``run`` whose actors live in this process (diagnostics, tests)."""
    with _LOCK:
        return sorted(k[1] for k in _STATES if k[0] == run)

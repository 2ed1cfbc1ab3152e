"""Monte-Carlo DQNs sharing one replay buffer: the machinery of EORL (Khadilkar 2023) and of
its baselines.

Algorithm 1 of the paper, one call of :meth:`MCLearner.run_episode` per episode:

1. choose the policy of the episode (:class:`esnb.runners.eorl.evolution.EORLLearner`:
   epsilon-greedily over the fitness values, a fresh child first; the baselines: their own
   rule);
2. run one episode with that policy, epsilon-greedy over its Q-values, on esnb's one episode
   loop (:mod:`esnb.rl.eorl.episodes`);
3. add its transitions, with their Monte-Carlo returns, to the shared FIFO buffer
   (:class:`esnb.replay.ReplayBuffer`, ``100 x timeout`` transitions);
4. train **every** policy on its own independently drawn sample of ``min(4096, size)``
   transitions (without replacement), 2 full-batch passes each (:mod:`esnb.rl.eorl.mc_dqn`);
5. update the fitness of the policy that ran and maybe call an evolutionary operator
   (:mod:`esnb.evo`); decay epsilon.

:class:`MCLearner` is the shared machinery (it is also the VAN baseline with ``n = 1``); the
other baselines are in :mod:`esnb.runners.eorl.baselines`, EORL itself in
:mod:`esnb.runners.eorl.evolution`; the maths below them is :mod:`esnb.rl.eorl`. No Dask
here: a learner is one process's work, and a table of runs spreads whole runs over a cluster
(:mod:`esnb.runners.eorl.table`).

Random streams (all from the run's seed, independent): initial weights, actions (epsilon draws
and random actions), environment seeds, replay samples, evolution, evaluation. Changing
``kappa`` therefore never changes which environment seeds or samples a run would have drawn.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from esnb.record import restore_rng
from esnb.replay import ReplayBuffer, join_state, split_state
from esnb.rl.constants import resolve_env
from esnb.rl.eorl.episodes import (
    Episode,
    Sample,
    StateIndex,
    default_eps_decay,
    epsilon_greedy,
    make_eorl_env,
    play,
    positive_int,
)
from esnb.rl.eorl.mc_dqn import PopulationQNet, mc_returns

_STREAMS = ("init", "act", "env", "sample", "evo", "eval")


def draw(buffer: ReplayBuffer, size: int, rng: np.random.Generator):
    """``(sids, actions, returns)`` of ``size`` distinct transitions of a FIFO ``buffer`` drawn
    uniformly (all of them when it holds no more than ``size``)."""
    n = len(buffer)
    # a FIFO ring that never evicts holds its items in slots [0, n)
    assert n == buffer.filled, "EORL's buffers must be plain FIFO rings"
    a = buffer.storage.arrays
    if n <= size:
        return a["sid"][:n], a["action"][:n], a["ret"][:n]
    slots = (rng.choice(n, size=size, replace=False, shuffle=False) if size > 0
             else np.zeros(0, dtype=np.int64))
    return a["sid"][slots], a["action"][slots], a["ret"][slots]


class MCLearner:
    """Monte-Carlo DQNs sharing one FIFO buffer; with ``n = 1`` the paper's VAN baseline.

    Parameters
    ----------
    env : str
        ``"bitflip"``, ``"gridnav"`` or their gymnasium ids.
    env_kwargs : dict, optional
        ``n_bits``/``subgoal`` (BitFlip) or ``size``/``subgoals``/``stochasticity`` (GridNav).
    episodes : int
        ``E``, the planned length (drives the schedules, PER's beta annealing and, with it,
        the default epsilon decay).
    seed : int
        Seeds every random stream of the run.
    n : int
        Networks in the population.
    eps_decay : float, optional
        Epsilon multiplier per episode (default :func:`default_eps_decay`).
    hidden : tuple of int
        Hidden layers.
    lr : float
        Adam step size; an ``lr`` entry in ``run_episode``'s controls overrides it.
    batch_size : int
        Sample size per member and episode (capped at the buffer size).
    epochs : int
        Passes over each sample.
    minibatch : int, optional
        None: a pass is one full-batch step (esnb's reading of the paper); else mini-batches
        of this size (a Keras ``fit(batch_size=32)`` reading: ~128x the steps).
    buffer_factor : int
        Buffer capacity in multiples of the environment's timeout.
    device : str
        Where the networks train (:class:`~esnb.rl.eorl.mc_dqn.PopulationQNet`).

    The values (the paper's) are declared and checked once, in
    :mod:`esnb.runners.eorl.config`; build a learner from its settings with :meth:`of` (the
    learner takes them as given).
    """

    algorithm: ClassVar[str] = "VAN"

    def __init__(self, env: str, env_kwargs: dict | None, episodes: int, seed: int, *,
                 n: int, eps_decay: float | None, hidden, lr: float, batch_size: int,
                 epochs: int, minibatch: int | None, buffer_factor: int, device: str = "cpu"):
        self.env_id = resolve_env(env)
        self.env_kwargs = dict(env_kwargs or {})
        self.episodes, self.n = int(episodes), int(n)
        self.batch_size, self.epochs = int(batch_size), int(epochs)
        self.minibatch = None if minibatch is None else int(minibatch)
        self.buffer_factor = int(buffer_factor)
        if eps_decay is None:
            eps_decay = default_eps_decay(self.env_id, self.episodes)
        self.eps_decay = float(eps_decay)
        self.env = make_eorl_env(self.env_id, self.env_kwargs)
        self.core = self.env.core  # the environment itself (for its timeout, goals, ...)
        self.timeout = int(self.core.timeout)
        self.n_actions = int(self.core.action_space.n)
        self.obs_dim = int(np.prod(self.core.observation_space.shape))
        self.seed = int(seed)
        seqs = np.random.SeedSequence(self.seed).spawn(len(_STREAMS))
        self.rngs = {k: np.random.Generator(np.random.PCG64(s)) for k, s in zip(_STREAMS, seqs)}
        self.states = StateIndex(self.input_dim)
        self.net = PopulationQNet(self.n, self.input_dim, self.n_actions, self.rngs["init"],
                                  hidden=hidden, lr=lr, device=device)
        self.capacity = self.buffer_factor * self.timeout
        self.buffer = self._make_buffer()
        self.episode = 0
        self.env_steps = 0
        self.epsilon = 1.0

    @classmethod
    def of(cls, config) -> MCLearner:
        """The learner of ``config``, a settings dataclass of :mod:`esnb.runners.eorl.config`
        (the one of this learner's runner)."""
        return cls(config.env, config.env_kwargs, config.episodes, config.seed,
                   **config.learner_kwargs())

    # -- hooks the baselines override ----------------------------------------------------------
    @property
    def input_dim(self) -> int:
        return self.obs_dim

    def _make_buffer(self) -> ReplayBuffer:
        return ReplayBuffer(self.capacity, spec={"sid": "int64", "action": "int64",
                                                 "ret": "float64"})

    def features(self, obs: np.ndarray) -> np.ndarray:
        """The network input of an observation (float32)."""
        return np.asarray(obs, dtype=np.float32).reshape(-1)

    def choose_member(self, epsilon: float) -> int:
        return 0

    def trained_members(self) -> np.ndarray:
        return np.ones(self.n, dtype=bool)

    def training_rewards(self, ep: Episode, controls: dict) -> np.ndarray:
        """Rewards the Monte-Carlo targets are built from (CBE adds its bonus)."""
        return ep.rewards

    def store(self, ep: Episode, controls: dict) -> None:
        g = mc_returns(self.training_rewards(ep, controls))
        self.buffer.add({"sid": ep.sids, "action": ep.actions, "ret": g})

    def sample(self, member: int, size: int) -> Sample:
        """Member's sample: ``size`` distinct transitions drawn uniformly (the whole buffer
        when it holds no more than ``size``)."""
        return Sample(member, *draw(self.buffer, size, self.rngs["sample"]))

    def after_fit(self, samples: list[Sample], q_of) -> None:
        """Called after the last pass with ``q_of(sample) -> Q(s_k, a_k)`` before that pass."""

    def after_episode(self, e: int, member: int, ep: Episode, epsilon: float,
                      controls: dict) -> dict[str, Any]:
        return {}

    def best_member(self) -> int:
        return 0

    # -- one episode -------------------------------------------------------------------------
    def run_episode(self, controls: dict | None = None) -> dict[str, Any]:
        """Run, store, train and evolve for one episode; returns its history row."""
        controls = dict(controls or {})
        e = self.episode + 1
        eps = self.epsilon
        t0 = time.perf_counter()
        member = self.choose_member(eps)
        ep = self.rollout(member, eps)
        self.store(ep, controls)
        t1 = time.perf_counter()
        info = self.train(controls.get("lr"))
        t2 = time.perf_counter()
        extra = self.after_episode(e, member, ep, eps, controls)
        self.episode = e
        self.env_steps += ep.length
        self.epsilon = eps * self.eps_decay
        return {
            "env_steps": self.env_steps,
            "return": ep.ret,
            "length": ep.length,
            "terminated": ep.terminated,
            "member": member,
            "epsilon": eps,
            "buffer_size": len(self.buffer),
            "states": self.states.size,
            **info,
            "rollout_time": t1 - t0,
            "train_time": t2 - t1,
            **extra,
        }

    def rollout(self, member: int, epsilon: float, rng_act: np.random.Generator | None = None,
                env_seed: int | None = None, record: bool = True) -> Episode:
        """One epsilon-greedy episode of ``member`` (:func:`~esnb.rl.eorl.episodes.epsilon_greedy`
        on the one episode loop).

        ``record=False`` (evaluation) leaves the state index alone; ``sids`` are then -1.
        """
        rng = self.rngs["act"] if rng_act is None else rng_act
        if env_seed is None:
            env_seed = int(self.rngs["env"].integers(2**31 - 1))
        act, sids = epsilon_greedy(self.net.member_numpy(member), self.features,
                                   self.states if record else None, epsilon, rng,
                                   self.timeout, self.n_actions)
        return play(self.env, act, sids, env_seed)

    # -- training ----------------------------------------------------------------------------
    def train(self, lr: float | None = None) -> dict[str, Any]:
        """Train the members of :meth:`trained_members` on their own samples."""
        members = np.flatnonzero(self.trained_members())
        if len(self.buffer) == 0 or len(members) == 0:
            return {"loss": np.nan, "sample_states": 0}
        size = min(self.batch_size, len(self.buffer))
        samples = [self.sample(int(i), size) for i in members]
        if self.minibatch is None:
            # a sample of the whole buffer is the same for every member: aggregate it once
            shared = size == len(self.buffer) and all(s.weights is None for s in samples)
            x, stats, pos = self._aggregate(samples[:1] if shared else samples, shared=shared)
            loss, q = self.net.fit(x, *stats, members=self._mask(members), epochs=self.epochs,
                                   lr=lr)
            self.after_fit(samples, lambda s: q[s.member, pos[s.sids], s.actions])
            return {"loss": float(np.nanmean(loss)), "sample_states": len(x)}
        rng = self.rngs["sample"]
        losses = []
        for _ in range(self.epochs):
            orders = [rng.permutation(len(s.sids)) for s in samples]
            for start in range(0, size, self.minibatch):
                chunk = [s.subset(o[start:start + self.minibatch])
                         for s, o in zip(samples, orders)]
                x, stats, pos = self._aggregate(chunk)
                loss, q = self.net.fit(x, *stats, members=self._mask(members), lr=lr)
                losses.append(np.nanmean(loss))
                self.after_fit(chunk, lambda s, q=q, pos=pos: q[s.member, pos[s.sids],
                                                                s.actions])
        return {"loss": float(losses[-1]), "sample_states": -1}

    def _mask(self, members: np.ndarray) -> np.ndarray:
        mask = np.zeros(self.n, dtype=bool)
        mask[members] = True
        return mask

    def _aggregate(self, samples: list[Sample], shared: bool = False):
        """Per member, distinct state and action: weight sums, weighted target sums; and the
        distinct states ``x`` of all samples with the map ``pos`` from state number to row.

        ``shared``: ``samples`` holds one sample that every member uses (statistics computed
        once and broadcast).
        """
        all_sids = np.concatenate([s.sids for s in samples])
        present = np.zeros(self.states.size, dtype=bool)
        present[all_sids] = True
        used = np.flatnonzero(present)
        pos = np.full(self.states.size, -1, dtype=np.int64)
        pos[used] = np.arange(len(used))
        u, a_n = len(used), self.n_actions
        n = 1 if shared else self.n
        member = (lambda s: 0) if shared else (lambda s: s.member)
        keys = np.concatenate([member(s) * (u * a_n) + pos[s.sids] * a_n + s.actions
                               for s in samples])
        member_of = np.concatenate([np.full(len(s.sids), member(s)) for s in samples])
        g = np.concatenate([s.returns for s in samples])
        if all(s.weights is None for s in samples):
            w, wg = None, g
        else:
            w = np.concatenate([np.ones(len(s.sids)) if s.weights is None
                                else np.asarray(s.weights, np.float64) for s in samples])
            wg = w * g
        count = np.bincount(keys, weights=w, minlength=n * u * a_n).reshape(n, u, a_n)
        tsum = np.bincount(keys, weights=wg, minlength=n * u * a_n).reshape(n, u, a_n)
        tsq = np.bincount(member_of, weights=wg * g, minlength=n)
        batch = np.bincount(member_of, minlength=n).astype(np.float64)
        if shared:
            count, tsum = (np.broadcast_to(a, (self.n, u, a_n)) for a in (count, tsum))
            tsq, batch = (np.broadcast_to(a, (self.n,)) for a in (tsq, batch))
        return self.states.rows[used], (count, tsum, tsq, batch), pos

    # -- evaluation --------------------------------------------------------------------------
    def evaluate(self, episodes: int = 10, member: int | None = None) -> np.ndarray:
        """Returns of greedy (epsilon = 0) episodes of ``member`` (default the best one);
        nothing is stored or trained, and the training streams are not touched."""
        episodes = positive_int("episodes", episodes)
        member = self.best_member() if member is None else int(member)
        rng = self.rngs["eval"]
        out = np.empty(episodes)
        for k in range(episodes):
            ep = self.rollout(member, 0.0, rng_act=rng, env_seed=int(rng.integers(2**31 - 1)),
                              record=False)
            out[k] = ep.ret
        return out

    # -- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta, buf = split_state(self.buffer.state_dict())
        arrays = {f"net.{k}": v for k, v in self.net.state_dict().items()}
        arrays.update({f"buffer.{k}": v for k, v in buf.items()})
        arrays["states"] = self.states.rows.copy()
        meta = {
            "learner": self.algorithm,
            "buffer": meta,
            "rngs": {k: r.bit_generator.state for k, r in self.rngs.items()},
            "episode": self.episode,
            "env_steps": self.env_steps,
            "epsilon": self.epsilon,
            "num_params": self.net.num_params,
            "net_layout": "out_in",  # esnb.nets' W [out, in]; absent: saved [in, out]
        }
        return meta, arrays

    def load_state_dict(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        if meta.get("learner") != self.algorithm:
            raise ValueError(f"state of a {meta.get('learner')!r} learner, this is "
                             f"{self.algorithm!r}")
        if int(meta["num_params"]) != self.net.num_params:
            raise ValueError(f"state has networks of {meta['num_params']} parameters, this "
                             f"learner {self.net.num_params}")
        self.net.load_state_dict({k[4:]: v for k, v in arrays.items() if k.startswith("net.")},
                                 weights_in_out=meta.get("net_layout") != "out_in")
        self.buffer.load_state_dict(join_state(
            meta["buffer"], {k[7:]: v for k, v in arrays.items() if k.startswith("buffer.")}))
        self.states.load(arrays["states"])
        for k, r in self.rngs.items():
            restore_rng(r, meta["rngs"][k], f"rngs[{k}]")
        self.episode = int(meta["episode"])
        self.env_steps = int(meta["env_steps"])
        self.epsilon = float(meta["epsilon"])

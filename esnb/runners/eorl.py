"""``esnb.EORL`` and its baselines as runners: one episode per iteration, live controls.

EORL (Khadilkar 2023): a population of Monte-Carlo DQNs sharing one replay buffer, with
crossover and mutation between them (:mod:`esnb.rl.eorl_learners`, :mod:`esnb.evo`). The
baselines of the paper's tables, on the same network, buffer and budget, are :class:`VAN`,
:class:`PER`, :class:`HER`, :class:`CBE` and :class:`CEMRLRoundRobin`
(:mod:`esnb.rl.eorl_baselines`); CER is not implemented.

A single run is one process's work: per episode the whole population trains in one batched
pass of a few milliseconds (measured: see ``docs/DESIGN.md``), far below what a Dask round
trip costs, so the members of one run are never spread over workers. Clusters run many
independent runs side by side: :func:`esnb.runners.eorl_table.run_table`.

Live controls: ``kappa``, ``mu``, ``schedule``, ``sigma``, ``q`` (EORL), ``beta`` (CBE) and
``lr`` (all), read once per episode.
"""

from __future__ import annotations

from collections import deque
from typing import Any, ClassVar

import numpy as np

from esnb.controls import Control, Controls, ControlSnapshot
from esnb.evo.operators import SIGMA
from esnb.evo.population import Q
from esnb.evo.schedules import SCHEDULES, VARIANTS, variant_settings
from esnb.rl.eorl_baselines import (
    CBE_BETA,
    CEM_NOISE,
    CEM_REPLACE_PROB,
    HER_GOALS,
    HER_K,
    PER_ALPHA,
    PER_BETA0,
    CBELearner,
    CEMRRLearner,
    HERLearner,
    PERLearner,
)
from esnb.rl.eorl_learners import (
    BATCH_SIZE,
    BUFFER_FACTOR,
    EPOCHS,
    EORLLearner,
    MCLearner,
    resolve_env,
)
from esnb.rl.mc_dqn import HIDDEN, LR
from esnb.runners.base import Runner

DEFAULT_VARIANT = "EORL-05-05"

#: table name -> (runner class name, extra constructor arguments), in the paper's column order
#: (CER left out: not implemented)
ALGORITHMS: dict[str, tuple[str, dict]] = {
    "VAN": ("VAN", {}),
    "HER": ("HER", {}),
    "PER": ("PER", {}),
    "CBE": ("CBE", {}),
    "EORL-FIX": ("EORL", {"variant": "EORL-FIX"}),
    "CEM-RL": ("CEMRLRoundRobin", {}),
    "EORL-05-00": ("EORL", {"variant": "EORL-05-00"}),
    "EORL-05-05": ("EORL", {"variant": "EORL-05-05"}),
    "EORL-10-05": ("EORL", {"variant": "EORL-10-05"}),
    "EORL-ACTV": ("EORL", {"variant": "EORL-ACTV"}),
}


def common_controls(lr: float, env: str, seed: int, episodes: int) -> list[Control]:
    return [
        Control("lr", "float", lr, low=0.0, low_open=True, high=1.0, log=True,
                help="Adam step size of every network"),
        Control("env", "str", env, live=False, help="environment id"),
        Control("seed", "int", seed, low=0, live=False, help="seed of every random draw"),
        Control("episodes", "int", episodes, low=1, live=False,
                help="planned episodes E (schedules, epsilon decay, PER's beta)"),
    ]


class EpisodeRunner(Runner):
    """A Monte-Carlo DQN learner (:class:`~esnb.rl.eorl_learners.MCLearner`) as a runner.

    Subclasses name their learner and add controls. Each iteration is one episode; the history
    row has the episode's return, its mean over the last 100 episodes, epsilon, the loss and
    timings, plus what the learner reports (operators, fitness, ...).
    """

    algorithm: ClassVar[str] = "VAN"
    iteration_column = "episode"
    learner_class: ClassVar[type] = MCLearner
    plot_default_panels = False

    def __init__(self, env: str = "bitflip", env_kwargs: dict | None = None,
                 episodes: int = 400, seed: int = 0, client=None, *,
                 eps_decay: float | None = None, hidden=HIDDEN, lr: float = LR,
                 batch_size: int = BATCH_SIZE, epochs: int = EPOCHS,
                 minibatch: int | None = None, buffer_factor: int = BUFFER_FACTOR,
                 name: str | None = None, _extra_controls: tuple = (),
                 _learner_kwargs: dict | None = None):
        env_id = resolve_env(env)
        controls = Controls([*common_controls(lr, env_id, seed, episodes), *_extra_controls])
        super().__init__(controls, name=name)
        # the client is accepted for a uniform runner interface (Runner.load passes one); a
        # run's work stays in this process (see the module docstring)
        self.client = client
        self.learner = self.learner_class(
            env_id, env_kwargs, episodes, seed, eps_decay=eps_decay, hidden=hidden, lr=lr,
            batch_size=batch_size, epochs=epochs, minibatch=minibatch,
            buffer_factor=buffer_factor, **(_learner_kwargs or {}))
        self._config = dict(env=env_id, env_kwargs=dict(env_kwargs or {}),
                            episodes=int(episodes), seed=int(seed),
                            eps_decay=self.learner.eps_decay, hidden=list(self.learner.net.hidden),
                            lr=float(lr), batch_size=int(batch_size), epochs=int(epochs),
                            minibatch=minibatch, buffer_factor=int(buffer_factor))
        self._recent: deque = deque(maxlen=100)

    plot_panels = (
        {"title": "return vs {x}", "x": "iteration", "y_label": "return",
         "y": [{"column": "return", "label": "episode return", "color": "#aec7e8"},
               {"column": "return_avg100", "label": "mean of last 100", "color": "#1f77b4"}]},
        {"title": "exploration vs {x}", "x": "iteration", "y": ["epsilon"]},
        {"title": "loss vs {x}", "x": "iteration", "y": ["loss"], "y_axis_type": "log"},
    )

    # -- runner protocol ---------------------------------------------------------------------
    def _iteration(self, snap: ControlSnapshot) -> dict[str, Any]:
        row = self.learner.run_episode(dict(snap.values))
        self._recent.append(row["return"])
        return {"return_avg100": float(np.mean(self._recent)), **row}

    def _progress(self) -> dict[str, float]:
        return {"episodes": self.learner.episode, "env_steps": self.learner.env_steps}

    def config_dict(self) -> dict[str, Any]:
        return {**self._config, "name": self.name}

    def _state_dict(self):
        meta, arrays = self.learner.state_dict()
        meta["recent"] = list(self._recent)
        return meta, arrays

    def _load_state_dict(self, meta, arrays):
        self.learner.load_state_dict(meta, arrays)
        self._recent = deque(meta["recent"], maxlen=100)

    # -- public ------------------------------------------------------------------------------
    @property
    def returns(self) -> np.ndarray:
        """Returns of the episodes run so far."""
        return np.array([r["return"] for r in self._records], dtype=np.float64)

    def evaluate(self, episodes: int = 10) -> np.ndarray:
        """Returns of greedy episodes of the best member (nothing stored or trained)."""
        with self._iter_lock:
            return self.learner.evaluate(episodes)


class VAN(EpisodeRunner):
    """One Monte-Carlo DQN (the paper's vanilla DQN baseline). Arguments as
    :class:`EpisodeRunner`."""

    algorithm = "VAN"
    learner_class = MCLearner


class PER(EpisodeRunner):
    """One Monte-Carlo DQN with prioritised replay (alpha 0.6, beta 0.4 -> 1)."""

    algorithm = "PER"
    learner_class = PERLearner

    def __init__(self, env: str = "bitflip", env_kwargs: dict | None = None,
                 episodes: int = 400, seed: int = 0, client=None, *,
                 alpha: float = PER_ALPHA, beta0: float = PER_BETA0, **kwargs):
        super().__init__(env, env_kwargs, episodes, seed, client,
                         _learner_kwargs=dict(alpha=alpha, beta0=beta0), **kwargs)
        self._config.update(alpha=float(alpha), beta0=float(beta0))


class HER(EpisodeRunner):
    """One goal-conditioned Monte-Carlo DQN with hindsight relabelling from a goal buffer of
    the 8 best terminal states."""

    algorithm = "HER"
    learner_class = HERLearner

    def __init__(self, env: str = "bitflip", env_kwargs: dict | None = None,
                 episodes: int = 400, seed: int = 0, client=None, *, her_k: int = HER_K,
                 goal_buffer: int = HER_GOALS, **kwargs):
        super().__init__(env, env_kwargs, episodes, seed, client,
                         _learner_kwargs=dict(her_k=her_k, goal_buffer=goal_buffer), **kwargs)
        self._config.update(her_k=int(her_k), goal_buffer=int(goal_buffer))


class CBE(EpisodeRunner):
    """One Monte-Carlo DQN with the count bonus ``beta / sqrt(1 + N(s, a))`` (live ``beta``)."""

    algorithm = "CBE"
    learner_class = CBELearner

    def __init__(self, env: str = "bitflip", env_kwargs: dict | None = None,
                 episodes: int = 400, seed: int = 0, client=None, *, beta: float = CBE_BETA,
                 **kwargs):
        extra = (Control("beta", "float", beta, low=0.0, high=1000.0,
                         help="count-bonus scale beta"),)
        super().__init__(env, env_kwargs, episodes, seed, client, _extra_controls=extra,
                         **kwargs)


class CEMRLRoundRobin(EpisodeRunner):
    """The paper's round-robin CEM-RL baseline: ``n`` policies in turn; a bottom-half one is
    replaced (p = 0.5) by a noisy copy of a fitter-half one and leaves the RL pool."""

    algorithm = "CEM-RL"
    learner_class = CEMRRLearner

    def __init__(self, env: str = "bitflip", env_kwargs: dict | None = None,
                 episodes: int = 400, seed: int = 0, client=None, *, n: int = 8,
                 replace_prob: float = CEM_REPLACE_PROB, noise: float = CEM_NOISE, **kwargs):
        extra = (Control("n", "int", n, low=2, high=10_000, live=False,
                         help="population size"),)
        super().__init__(env, env_kwargs, episodes, seed, client, _extra_controls=extra,
                         _learner_kwargs=dict(n=n, replace_prob=replace_prob, noise=noise),
                         **kwargs)
        self._config.update(n=int(n), replace_prob=float(replace_prob), noise=float(noise))


def eorl_controls(kappa: float, mu: float, schedule: str, sigma: float, q: float, n: int
                  ) -> list[Control]:
    """EORL's own controls (besides ``lr``, ``env``, ``seed``, ``episodes``)."""
    return [
        Control("kappa", "float", kappa, low=0.0, high=1.0,
                help="crossover rate (probability scale at the start)"),
        Control("mu", "float", mu, low=0.0, high=1.0,
                help="mutation rate (probability scale at the start)"),
        Control("schedule", "choice", schedule, choices=SCHEDULES,
                help="uniform: rates x (1 - e/E); active: grows while good returns are missing"),
        Control("sigma", "float", sigma, low=0.0, high=10.0,
                help="std of the multiplicative noise factor N(1, sigma)"),
        Control("q", "float", q, low=0.0, high=1.0,
                help="fitness smoothing: A <- q A + (1 - q) return"),
        Control("n", "int", n, low=2, high=10_000, live=False, help="population size"),
    ]


class EORL(EpisodeRunner):
    """EORL (Khadilkar 2023): ``n`` Monte-Carlo DQNs sharing one buffer, with crossover and
    mutation.

    Parameters
    ----------
    env : str
        ``"bitflip"`` / ``"gridnav"`` (or ``"esnb/BitFlip-v0"`` / ``"esnb/GridNav-v0"``).
    env_kwargs : dict, optional
        ``{"n_bits": 6, "subgoal": True}`` or ``{"size": 12, "subgoals": "2+",
        "stochasticity": 0.1}``.
    episodes : int
        Planned episodes ``E`` (400 on BitFlip; 1000, 2500 or 4000 on GridNav).
    seed : int
    client : distributed.Client, optional
        Accepted for a uniform interface; one run trains in this process.
    variant : str, optional
        ``"EORL-FIX"``, ``"EORL-05-00"``, ``"EORL-05-05"``, ``"EORL-10-05"`` or
        ``"EORL-ACTV"``: sets ``kappa``, ``mu`` and ``schedule``. Default EORL-05-05 unless
        those are given.
    kappa, mu : float, optional
        Crossover and mutation rates in [0, 1]. Live.
    schedule : {"uniform", "active"}, optional
        Uniform Random or Active Random. Live.
    n : int
        Population size (>= 2; 8).
    sigma : float
        Noise factor std (0.25). Live.
    q : float
        Fitness smoothing (0.9). Live.
    eps_decay, hidden, lr, batch_size, epochs, minibatch, buffer_factor, name
        As :class:`EpisodeRunner` (the paper's values by default).

    Examples
    --------
    >>> run = EORL("bitflip", {"n_bits": 6}, episodes=400, variant="EORL-ACTV", seed=0)
    >>> run.step(400).returns[-100:].mean()  # doctest: +SKIP
    """

    algorithm = "EORL"
    learner_class = EORLLearner

    plot_panels = EpisodeRunner.plot_panels + (
        {"title": "fitness vs {x}", "x": "iteration",
         "y": ["fitness_max", "fitness_mean", "fitness_min"]},
        {"title": "operator probabilities vs {x}", "x": "iteration", "y": ["p_cross", "p_mut"]},
    )

    def __init__(self, env: str = "bitflip", env_kwargs: dict | None = None,
                 episodes: int = 400, seed: int = 0, client=None, *,
                 variant: str | None = None, kappa: float | None = None,
                 mu: float | None = None, schedule: str | None = None, n: int = 8,
                 sigma: float = SIGMA, q: float = Q, **kwargs):
        given = {k: v for k, v in (("kappa", kappa), ("mu", mu), ("schedule", schedule))
                 if v is not None}
        if variant is not None and given:
            raise ValueError(f"pass either variant or {', '.join(given)}, not both "
                             f"(variants: {', '.join(VARIANTS)})")
        if variant is None and not given:
            variant = DEFAULT_VARIANT
        if variant is not None:
            kappa, mu, schedule = variant_settings(variant)
        else:
            d_kappa, d_mu, d_schedule = variant_settings(DEFAULT_VARIANT)
            kappa = d_kappa if kappa is None else kappa
            mu = d_mu if mu is None else mu
            schedule = d_schedule if schedule is None else schedule
        extra = tuple(eorl_controls(kappa, mu, schedule, sigma, q, n))
        super().__init__(env, env_kwargs, episodes, seed, client, _extra_controls=extra,
                         _learner_kwargs=dict(n=n), **kwargs)
        self.variant = variant
        self._config.update(variant=variant, n=int(n), sigma=float(sigma), q=float(q))
        if variant is None:
            self._config.update(kappa=float(kappa), mu=float(mu), schedule=schedule)

    @property
    def fitness(self) -> np.ndarray:
        """The population's fitness values ``A`` (a copy)."""
        return self.learner.population.fitness.copy()


def runner_class(name: str) -> type[EpisodeRunner]:
    """The runner class called ``name`` in this module (``"EORL"``, ``"VAN"``, ...)."""
    classes = {c.__name__: c for c in (EORL, VAN, PER, HER, CBE, CEMRLRoundRobin)}
    if name not in classes:
        raise ValueError(f"unknown EORL-family runner {name!r}; valid: {', '.join(classes)}")
    return classes[name]


def make_runner(algorithm: str, env: str = "bitflip", env_kwargs: dict | None = None,
                episodes: int = 400, seed: int = 0, **kwargs) -> EpisodeRunner:
    """A runner for a table column name (``"VAN"``, ``"CEM-RL"``, ``"EORL-ACTV"``, ...)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; valid: {', '.join(ALGORITHMS)} "
                         f"(CER is not implemented)")
    cls_name, extra = ALGORITHMS[algorithm]
    return runner_class(cls_name)(env, env_kwargs, episodes, seed, **{**extra, **kwargs})

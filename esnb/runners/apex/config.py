"""The settings of ``esnb.ApeX`` and ``esnb.ApeXDPG`` (Horgan et al. 2018, "Distributed
Prioritized Experience Replay"), each declared once (see :mod:`esnb.settings`).

:class:`ApeXConfig` declares what both variants share; :class:`ApeXDQNConfig` and
:class:`ApeXDPGConfig` add their learner's settings and re-declare, with
:func:`~esnb.settings.derive`, the few shared ones whose default differs by variant
(environment, actors, exploration, eviction, samples per insert, replay sizes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from esnb.nets.conv import KINDS
from esnb.rl.constants import APEX_REWARD_CLIPPINGS
from esnb.rl.constants import DQN_LOSSES as LOSSES
from esnb.rl.constants import DQN_OPTIMIZERS as OPTIMIZERS
from esnb.settings import EnvSettings, RLSettings, derive, setting

VARIANTS = ("dqn", "dpg")
LR = dict(low=0.0, low_open=True, high=1.0, log=True, live=True)


@dataclass(frozen=True)
class ApeXConfig(EnvSettings):
    """What Ape-X DQN and DPG share: actors, replay, learner schedule, placement."""

    #: the variant these settings build (``variant`` must equal it)
    VARIANT: ClassVar[str] = ""

    variant: str = setting("dqn", choices=VARIANTS, cli=False,
                           help="dqn: discrete actions, epsilon-greedy actors; dpg: bounded "
                                "Box actions, Gaussian-noise actors (esnb.ApeXDPG)")
    seed: int = derive(EnvSettings, "seed",
                       help="seeds the networks, environments, exploration, replay and "
                            "evaluations")
    num_actors: int = setting(8, low=1, high=100_000, control=True,
                              help="actors N, each with its own environment and exploration "
                                   "rate")
    batch_size: int = setting(256, low=1, high=65_536, live=True,
                              help="transitions per update")
    gamma: float = derive(RLSettings, "gamma")
    n_step: int = setting(3, low=1, high=1000, help="steps per transition (paper: 3)")
    target_period: int = setting(100, low=1, high=10_000_000, live=True,
                                 help="updates between target network copies")
    reward_clipping: str = setting(
        "none", choices=APEX_REWARD_CLIPPINGS,
        help="clip each reward before the actors sum it into n-step returns: none, or abs_one "
             "([-1, 1], as DQN and Ape-X on Atari); episode returns stay raw")
    exploration: float = setting(0.4, low=0.0, high=10.0, live=True,
                                 help="base epsilon: actor i uses base^(1 + alpha i/(N-1))")
    exploration_alpha: float = setting(7.0, low=0.0, high=100.0, live=True,
                                       help="spread of exploration across actors (0: the same "
                                            "for all)")
    capacity: int = setting(2**17, low=1, high=2**31,
                            help="replay hard capacity (preallocated rows)")
    soft_capacity: int | None = setting(None, kind="int", low=1, high=2**31,
                                        help="replay size above which the excess is evicted "
                                             "every evict_interval updates (none: capacity/2)")
    eviction: str = setting("fifo", choices=("fifo", "priority"),
                            help="how the excess goes: oldest first, or sampled with "
                                 "P ~ p^-0.4")
    alpha: float = setting(0.6, low=0.0, high=10.0, help="prioritisation exponent")
    beta: float = setting(0.4, low=0.0, high=1.0, live=True,
                          help="importance-sampling exponent of the replay")
    priority_eps: float = setting(1e-6, low=0.0, low_open=True, high=1.0,
                                  help="added to |TD error| for the priorities")
    min_size: int = setting(2000, low=1, high=2**31,
                            help="items in the replay before the learner starts (and after a "
                                 "replay recovery)")
    samples_per_insert: float | None = setting(
        None, kind="float", low=0.0, low_open=True, high=1e6,
        help="rate limit: the learner waits when it sampled more than this many transitions "
             "per inserted one, the actors back off when ahead (none: actors run flat out)")
    learner_chunk: int = setting(16, low=1, high=1024, live=True,
                                 help="batches sampled per replay call and trained in a row")
    param_period: int = setting(50, low=1, high=1_000_000, live=True,
                                help="updates between parameter publications to the actors")
    evict_interval: int = setting(100, low=1, high=1_000_000, live=True,
                                  help="updates between evictions of the excess over the soft "
                                       "capacity (paper: 100)")
    flush_size: int = setting(200, low=1, high=1_000_000, paper=100,
                              why="half the replay calls of the paper's 100 on a 2-core laptop, "
                                  "where each call costs the replay's worker ~1 ms",
                              help="transitions per actor push to the replay (the paper's "
                                   "actors buffer at most 100)")
    actor_max_episode_steps: int | None = setting(
        None, kind="int", low=1,
        help="cap of the actors' training episodes in agent steps, a truncation (none: "
             "max_episode_steps); evaluations keep max_episode_steps")
    actor_param_period: int = setting(
        50, low=1, high=10_000_000, paper=400,
        why="a laptop's few actors refresh often: it costs one small read and keeps their "
            "policy near the learner's (50 per actor is what 400 steps of an 8-actor group "
            "gave before the setting counted per actor)",
        help="env steps of each actor between reads of its control: parameters, exploration, "
             "stop (the paper: parameters every 400 frames)")
    eval_interval: int = setting(1000, low=0, high=100_000_000, live=True,
                                 help="greedy evaluation every n updates (0: never)")
    eval_episodes: int = setting(10, low=1, high=1000, live=True,
                                 help="episodes per evaluation")
    target_return: float | None = setting(None, kind="float", low=-1e12, high=1e12,
                                          help="stop once an evaluation's mean return reaches "
                                               "it (none: never)")
    loops: int | None = setting(None, kind="int", low=1, high=100_000,
                                help="actor loop tasks (none: one per worker)")
    actor_workers: str = setting("all", choices=("all", "others"),
                                 help="whether actor loops may share the replay's worker")
    replay_worker: str | None = setting(None, kind="str",
                                        help="address of the worker to hold the replay (none: "
                                             "see replay_resources)")
    replay_resources: Any = setting(
        "auto", kind="dict", special=("auto",), nullable=True,
        help="worker resources the replay asks for; auto: the long-lived actor worker of "
             "esnb.cluster.actor_resources if the cluster has one, else the first worker")
    replay_checkpoint: str | None = setting(None, kind="str",
                                            help="the replay's recovery checkpoint file, to "
                                                 "recreate it when its worker dies (none: in "
                                                 "the run folder, or a private folder removed "
                                                 "on close; '': never)")
    replay_checkpoint_interval: float = setting(30.0, low=0.0, low_open=True, high=1e6,
                                                help="seconds between replay checkpoints")
    inline_actor_steps: int = setting(256, low=1, high=1_000_000, live=True,
                                      help="env steps an actor loop takes per pass: in an "
                                           "inline run, before each learner chunk")
    iteration_seconds: float = setting(0.25, low=0.0, low_open=True, high=3600.0,
                                       help="learning time per iteration (history row) on a "
                                            "cluster; an inline iteration is one chunk")
    learner_threads: int | None = setting(1, kind="int", low=1, high=1024, nullable=True,
                                          help="torch threads of the learner (none: leave "
                                               "them); small nets gain nothing from more")
    device: str = derive(RLSettings, "device")

    def check(self) -> None:
        if self.variant != self.VARIANT:
            raise ValueError(f"variant {self.variant!r} is built by "
                             f"{'esnb.ApeXDPG' if self.variant == 'dpg' else 'esnb.ApeX'}; "
                             f"these settings are Ape-X {self.VARIANT.upper()}'s")
        soft = self.capacity // 2 if self.soft_capacity is None else self.soft_capacity
        if soft > self.capacity:
            raise ValueError(f"soft_capacity must be an integer in [1, capacity="
                             f"{self.capacity}] or None, got {self.soft_capacity!r}")
        if self.min_size > soft:
            raise ValueError(f"min_size {self.min_size} exceeds what the replay keeps ({soft}): "
                             f"the learner would never start")

    @property
    def soft(self) -> int:
        """The replay's soft capacity (``capacity // 2`` unless given)."""
        return self.capacity // 2 if self.soft_capacity is None else self.soft_capacity


@dataclass(frozen=True)
class ApeXDQNConfig(ApeXConfig):
    """Ape-X DQN: double Q-learning with n-step targets on a dueling network, epsilon-greedy
    actors (paper section 3.1 and appendix C)."""

    algorithm = "ApeX"
    title = "Ape-X"
    VARIANT = "dqn"
    #: its network takes frames (a conv torso): pixel environments are not refused
    takes_frames: ClassVar[bool] = True
    paper_by_env = {"ALE/": (
        {"actor_param_period": 100, "actor_max_episode_steps": 12_500},
        "Horgan et al. 2018, section 4: actors copy the parameters every 400 frames and "
        "training episodes are limited to 50,000 frames, 4 frames an agent step")}

    num_actors: int = derive(ApeXConfig, "num_actors", paper=360,
                             why="the paper's 360 actor machines; N also sets each actor's "
                                 "epsilon, so the paper preset keeps it (slow on 2 cores)")
    batch_size: int = derive(ApeXConfig, "batch_size", paper=512,
                             why="halves the learner's time per update on a CPU")
    target_period: int = derive(
        ApeXConfig, "target_period", paper=2500,
        why="the value horizon grows by n steps per copy: on CartPole 100 solved in ~6k "
            "updates where 500 needed ~12.5k (measured, inline, 2 seeds)")
    capacity: int = derive(ApeXConfig, "capacity", paper=2_200_000,
                           why="the paper's 2M soft limit plus headroom for inserts between "
                               "evictions; 131k rows suit short laptop runs")
    soft_capacity: int | None = derive(ApeXConfig, "soft_capacity", paper=2_000_000,
                                       why="see capacity")
    min_size: int = derive(ApeXConfig, "min_size", paper=50_000,
                           why="short laptop runs start learning sooner")
    reward_clipping: str = derive(
        ApeXConfig, "reward_clipping", paper="abs_one",
        why="clipping changes what a vector task rewards; the paper clips Atari rewards to "
            "[-1, 1] (as DQN)")
    torso: str = setting("auto", choices=("auto", "mlp", *KINDS),
                         help="the Q-network's torso: auto (the observation space decides: an "
                              "MLP on vectors, MinAtar's conv on 10x10 frames, the Nature DQN's "
                              "on Atari's, the paper's), mlp, or a conv torso of esnb.nets.conv")
    hidden: tuple[int, ...] = setting((64, 64), low=1,
                                      help="MLP torso of the Q-network (dueling heads on top); "
                                           "after a conv torso each stream has the paper's "
                                           "one hidden layer (MinAtar 128, Nature 512)")
    life_loss: bool = setting(True, kind="bool",
                              help="a lost life (Atari) ends the actor's n-step returns as a "
                                   "termination (no bootstrap across it) while the game goes "
                                   "on; scores and evaluations stay whole games (DeepMind's "
                                   "DQN agents)")
    dueling: bool = setting(True, help="value and advantage heads (paper: yes)")
    double: bool = setting(True, help="double Q-learning targets (paper: yes)")
    loss: str = setting("huber", choices=LOSSES, paper="mse",
                        why="Huber (as DQN) is more forgiving of the large early TD errors "
                            "of short runs",
                        help="per-item loss: Huber (delta 1) or the paper's 1/2 delta^2")
    optimizer: str = setting(
        "adam", choices=OPTIMIZERS, paper="rmsprop_centered",
        why="Adam learns the small control tasks faster; the paper's centred RMSProp "
            "(TensorFlow semantics) was tuned for Atari",
        help="adam, or centred RMSProp with TensorFlow's semantics (decay 0.95, epsilon 1.5e-7 "
             "inside the square root, mean square starting at 1)")
    lr: float = setting(1e-3, **LR, paper=0.00025 / 4,
                        why="Adam's step size for small control tasks",
                        help="the optimizer's step size")
    grad_clip: float = setting(40.0, low=0.0, low_open=True, high=1e9,
                               help="global gradient-norm clip (paper: 40)")


@dataclass(frozen=True)
class ApeXDPGConfig(ApeXConfig):
    """Ape-X DPG: an n-step TD critic and a deterministic policy gradient actor, Gaussian
    exploration noise (paper section 3.2 and appendix D)."""

    algorithm = "ApeX-DPG"
    title = "Ape-X DPG"
    VARIANT = "dpg"

    variant: str = derive(ApeXConfig, "variant", "dpg")
    env: str = derive(ApeXConfig, "env", "InvertedPendulum-v5")
    num_actors: int = derive(ApeXConfig, "num_actors", 4, paper=64,
                             why="the paper's 64 actors; N is kept by the paper preset (slow "
                                 "on 2 cores)")
    exploration: float = derive(ApeXConfig, "exploration", 0.3,
                                help="Gaussian noise std, a fraction of the action half-range")
    exploration_alpha: float = derive(ApeXConfig, "exploration_alpha", 0.0)
    capacity: int = derive(ApeXConfig, "capacity", paper=1_100_000,
                           why="the paper's 1M replay plus headroom; 131k rows suit short "
                               "laptop runs")
    soft_capacity: int | None = derive(ApeXConfig, "soft_capacity", paper=1_000_000,
                                       why="see capacity")
    eviction: str = derive(ApeXConfig, "eviction", "priority")
    # "hyperparameters are otherwise as per DQN" (Horgan et al. 2018, appendix D): 50,000
    min_size: int = derive(ApeXConfig, "min_size", paper=50_000,
                           why="short laptop runs start learning sooner; the paper's DPG is "
                               "'otherwise as per DQN': 50,000")
    # a DPG learner sharing 2 cores with actors ran 7 updates/s flat out and 25 with the
    # limiter, and only the latter reached 900 on InvertedPendulum-v5 in 5 minutes (measured)
    samples_per_insert: float | None = derive(
        ApeXConfig, "samples_per_insert", 16.0, paper=None,
        why="flat-out actors starved the learner on 2 cores: 7 updates/s against 25 with the "
            "limiter, and only the latter reached 900 on InvertedPendulum-v5 in 5 min")
    actor_hidden: tuple[int, ...] = setting((300, 200), low=1,
                                            help="actor layers, tanh (paper: 300, 200)")
    critic_hidden: tuple[int, ...] = setting((400, 300), low=1,
                                             help="critic layers, tanh; the action joins at "
                                                  "the second (paper: 400, 300)")
    actor_lr: float = setting(1e-4, **LR, help="Adam step size of the actor (paper: 1e-4)")
    critic_lr: float = setting(1e-4, **LR, help="Adam step size of the critic (paper: 1e-4)")
    actor_clip: float = setting(1.0, low=0.0, low_open=True, high=1e9,
                                help="element-wise clip of the actor's gradient (paper: 1)")
    critic_grad_clip: float | None = setting(
        None, kind="float", low=0.0, low_open=True, high=1e9, paper=40.0,
        why="the laptop runs were tuned without it; the paper's DPG is 'otherwise as per "
            "DQN', whose gradient norm is clipped at 40",
        help="global norm clip of the critic's gradient (none: no clipping)")


CONFIGS = {"dqn": ApeXDQNConfig, "dpg": ApeXDPGConfig}

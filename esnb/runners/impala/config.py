"""The settings of ``esnb.Impala`` (Espeholt et al. 2018, arXiv 1802.01561), each declared once
(see :mod:`esnb.settings`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from esnb.nets.conv import KINDS
from esnb.rl.constants import CORRECTIONS, REWARD_CLIPPINGS
from esnb.rl.constants import IMPALA_OPTIMIZERS as OPTIMIZERS
from esnb.rl.impala.actor_critic import INIT_SCHEMES
from esnb.settings import EnvSettings, RLSettings, derive, setting

_RATIO = dict(low=0.0, low_open=True, high=1e6, log=True, live=True)
_CODE = "google-deepmind/scalable_agent's experiment.py default"


@dataclass(frozen=True)
class ImpalaConfig(EnvSettings):
    """IMPALA: actor slots on the workers produce unrolls with the parameters they were handed;
    one learner corrects them with V-trace.

    ``preset="paper"`` takes the values of the authors' released code for DMLab
    (``google-deepmind/scalable_agent``, ``experiment.py`` flags and README command): RMSProp
    with TensorFlow 1's semantics (``rmsprop_tf``: epsilon 0.1 under the square root, mean
    square from one, decay 0.99, no momentum), learning rate 0.00048 decayed linearly to 0
    over the run, entropy cost 0.00025, rewards clipped to [-1, 1], unrolls of 100 steps,
    batches of 32, 48 environments. On Atari ids (``ALE/<Game>-v5``) it takes the paper's own
    Atari table instead (arXiv 1802.01561v3, appendix G, table G.1): learning rate 0.0006,
    entropy cost 0.01, RMSProp epsilon 0.01, unrolls of 20, a lost life ending the learning
    segment (``life_loss``). On frames (``ALE/<Game>-v5``, MinAtar) the network is the
    paper's feed-forward Atari one: ``torso`` auto takes the shallow torso on Atari frames in
    the laptop preset and the deep residual one in ``paper`` (``auto-deep``), then one ReLU
    layer of 256 and linear policy and baseline heads (the LSTM of its DMLab runs is not
    built); rewards are clipped to [-1, 1] in the loss (``reward_clipping``), the game's
    scores stay raw. On vectors policy and value are separate MLPs. Gradient clipping stays at
    40 (the paper's tables; the released code does not clip). ``rmsprop`` is torch's RMSProp,
    whose epsilon is added outside the root: TF's 0.1 acts like torch's ~0.32 for small second
    moments. ``obs_norm`` none means on for Box actions and off for Discrete ones (the paper's
    Atari and DMLab tasks are discrete: off, as the paper's frames / 255).
    """

    algorithm = "Impala"
    title = "IMPALA"
    #: its network takes frames (a conv torso): pixel environments are not refused
    takes_frames: ClassVar[bool] = True
    paper_by_env = {"ALE/": (
        {"lr": 0.0006, "entropy_cost": 0.01, "rmsprop_eps": 0.01, "unroll_length": 20,
         "life_loss": True},
        "the IMPALA paper's Atari table, arXiv 1802.01561v3 appendix G table G.1; the values "
        "above are the released code's DMLab ones")}
    laptop_by_env = {"ALE/": (
        {"lr": 5e-4, "lr_schedule": "constant", "updates_per_iteration": 10,
         "eval_interval": 500, "init_scheme": "orthogonal"},
        "measured on Pong, 2 cores: RLlib's tuned Pong IMPALA (Adam 5e-4, about constant, "
        "batches of ~1,000 steps, summed losses clipped at 40) as esnb settings (Adam 5e-4 "
        "constant, batches of 32 unrolls of 20) is the first setting seen to move Pong here: "
        "the training return rose from -20.3 to -18.8 and the entropy fell from 1.785 to 1.705 "
        "between 3M and 4M agent steps. Adam 2.5e-4 with batches of 4 (and A2C's RMSProp "
        "carried over) kept the policy uniform for 3M steps; at RMSProp 7e-4 with batches of 4 "
        "the conv torso stops seeing the frames, and so did the value with unrolls of 50 "
        "(docs/notes.md). Frames stay 84x84: at 42x42 (env_kwargs screen_size, RLlib's fast "
        "Pong's) a run makes 2.2x the agent steps a second here, but seed 0 was still at -20.1 "
        "with a uniform policy at 4.4M agent steps where at 84x84 it was at -17.8. Evaluations "
        "of whole games every 500 learner steps, 10 learner steps a history row. A2C's "
        "orthogonal init (OpenAI baselines) left -20 about 1M agent steps sooner on seeds 0 "
        "and 1 and climbed 4-5 points a million past 5M where the default init climbed ~2: "
        "seed 0 at +0.4 by 7.2M agent steps against -11.8, then +18 by 8.2M and 21-0 in all "
        "10 final games at 10M (the results page; docs/results/probes)")}

    env: str = derive(EnvSettings, "env",
                      help="gymnasium id with Box observations (vectors, or frames: ALE/<Game>-v5, "
                           "MinAtar/<Game>-v1) and Discrete or Box actions")
    # -- the loss and the learner (live) ---------------------------------------------------
    lr: float = setting(1e-3, low=0.0, low_open=True, high=1.0, log=True, live=True,
                        paper=0.00048, why="Adam at 1e-3 learns the small laptop tasks in a "
                                           "minute; 0.00048 is the released code's RMSProp rate",
                        help="learning rate of the optimiser")
    # the released code's decay (to 0 over the run's frames) is also what holds a solved
    # policy: on CartPole, 2,000 learner steps, 5 seeds, the final parameters scored 500, 497,
    # 496, 500, 498 on 50 new seeds with it, and 500, 500, 165, 500, 500 at a constant 1e-3
    # (collapses to 9-89 after solving) -- BENCHMARKS.md, "IMPALA after it solves"
    lr_schedule: str = setting("linear", choices=("constant", "linear"),
                               help="linear: lr x (1 - the fraction done of the run's env-step "
                                    "budget, else of its learner-step budget; none given: "
                                    "constant), as the released code; constant: lr as set")
    entropy_cost: float = setting(0.01, low=0.0, high=10.0, live=True, paper=0.00025,
                                  why=f"{_CODE} (DMLab); CartPole-sized tasks explore too "
                                      f"little with it",
                                  help="weight of the entropy bonus")
    baseline_cost: float = setting(0.5, low=0.0, high=100.0, live=True,
                                   help="weight of 1/2 sum (v_s - V)^2")
    clip_rho_threshold: float = setting(1.0, **_RATIO, help="rho bar: clip of the importance "
                                                            "ratio in the V-trace TD errors")
    clip_pg_rho_threshold: float = setting(1.0, **_RATIO,
                                           help="rho bar pg: clip of the ratio weighting "
                                                "policy-gradient advantages")
    clip_c_threshold: float = setting(1.0, **_RATIO, help="c bar: clip of the trace "
                                                          "coefficients")
    vtrace_lambda: float = setting(1.0, low=0.0, high=1.0, live=True,
                                   help="lambda: scales the trace coefficients c_t")
    correction: str = setting("vtrace", choices=CORRECTIONS, live=True,
                              help="'none' forces rho = c = 1 (no off-policy correction)")
    unroll_length: int = setting(20, low=1, high=10_000, live=True, paper=100,
                                 why=f"{_CODE} (DMLab; the Atari runs used 20); short unrolls "
                                     f"keep a laptop's learner steps short",
                                 help="T: steps per unroll (queued unrolls of another length "
                                      "are dropped)")
    batch_size: int = setting(32, low=1, high=100_000, live=True,
                              help="B: unrolls per learner step")
    max_grad_norm: float = setting(40.0, low=0.0, high=1e9, live=True,
                                   help="clip the gradient's global norm (0: no clipping)")
    actor_lag: int = setting(0, low=0, high=100_000, live=True,
                             help="lag injection: actors get parameters this many versions old")
    queue_batches: int = setting(2, low=1, high=1000, live=True,
                                 help="actors wait while this many batches of unrolls are queued")
    eval_interval: int = setting(100, low=0, high=10**9, live=True,
                                 help="greedy evaluation every n learner steps (0: never)")
    eval_episodes: int = setting(10, low=1, high=10_000, live=True,
                                 help="episodes per greedy evaluation")
    # -- fixed ---------------------------------------------------------------------------------
    discount: float = setting(0.99, low=0.0, high=1.0, control=True, help="gamma")
    reward_scale: float = setting(1.0, low=0.0, low_open=True, high=1e6, control=True,
                                  help="rewards are multiplied by this in the loss (after "
                                       "clipping)")
    reward_clipping: str = setting("none", choices=REWARD_CLIPPINGS, control=True,
                                   paper="abs_one",
                                   why="clipping changes what a Box-action task rewards; "
                                       "the paper clips Atari and DMLab rewards",
                                   help="clip rewards in the loss: none, abs_one ([-1, 1], the "
                                        "paper's) or soft_asymmetric (the code's DMLab-30 "
                                        "squashing)")
    life_loss: bool = setting(True, kind="bool", control=True,
                              help="a lost life (Atari) ends the learning segment: no "
                                   "bootstrap across it, while the game goes on; scores and "
                                   "evaluations stay whole games (DeepMind's agents)")
    obs_norm: bool | None = setting(None, kind="bool", control=True,
                                    help="normalise observations with running statistics "
                                         "(none: on for Box actions, off for Discrete ones and "
                                         "for frames, which the network scales)")
    optimizer: str = setting("adam", choices=OPTIMIZERS, control=True, paper="rmsprop_tf",
                             why="Adam (eps 1e-5) learns the small laptop tasks faster and "
                                 "more reliably",
                             help="adam; rmsprop: torch's; rmsprop_tf: the released code's, "
                                  "TensorFlow 1's RMSProp (mean square from 1, epsilon under "
                                  "the root)")
    rmsprop_eps: float = setting(0.1, low=0.0, low_open=True, high=10.0, log=True,
                                 help="RMSProp epsilon: rmsprop adds it to sqrt(ms) (torch), "
                                      "rmsprop_tf under the root (TensorFlow; the released "
                                      "code's 0.1)")
    rmsprop_decay: float = setting(0.99, low=0.0, high=1.0, high_open=True,
                                   help="RMSProp decay of the mean square")
    # -- networks ------------------------------------------------------------------------------
    torso: str = setting("auto", choices=("auto", "auto-deep", "mlp", *KINDS),
                         paper="auto-deep",
                         why="the deep torso gives the paper's best Atari scores (its section "
                             "5.3); its 15 convolutions take 53M multiply-adds per 84x84x4 "
                             "stack, 23x the shallow torso's 2.3M (counted from the shapes)",
                         help="the network's torso: auto (the observation space decides: MLPs "
                              "on vectors, MinAtar's conv on 10x10 frames, the paper's shallow "
                              "torso on Atari's), auto-deep (the same with the paper's deep "
                              "residual torso on Atari), mlp, or a conv torso of esnb.nets.conv")
    hidden: tuple[int, ...] = setting((64, 64), low=1,
                                      help="hidden sizes of both MLPs (policy and value are "
                                           "separate networks; frames: one shared ReLU layer of "
                                           "256, MinAtar 128)")
    activation: str = setting("tanh", choices=("tanh", "relu"),
                             help="hidden activation of the MLPs (vector observations)")
    init_log_std: float = setting(-0.5, low=-20.0, high=2.0,
                                  help="initial log-std of Gaussian policies")
    init_scheme: str = setting("default", choices=INIT_SCHEMES,
                               help="how the network is drawn: default (conv torso torch's "
                                    "uniform, MLPs normalised columns, policy output 0.01) or "
                                    "orthogonal (OpenAI baselines' A2C/PPO: orthogonal, zero "
                                    "biases, gain sqrt 2, policy output 0.01, value 1; not the "
                                    "paper's)")
    # -- actors --------------------------------------------------------------------------------
    actors: int | None = setting(None, kind="int", low=1, paper=3,
                                 why="the README's 48 actors as 3 slots of 16 environments; "
                                     "the laptop default follows the workers",
                                 help="actor slots (none: actors_per_worker x workers)")
    actors_per_worker: int = setting(2, low=1, high=1000,
                                     help="slots per worker: 2 keep a worker busy while a "
                                          "finished task's result travels")
    envs_per_actor: int = setting(16, low=1, high=4096,
                                  help="environments per slot, stepped in lockstep with one "
                                       "numpy forward")
    updates_per_iteration: int = setting(10, low=1, high=100_000,
                                         help="learner steps per history row (and per "
                                              "controls snapshot)")
    min_task_runtime: float = setting(0.05, low=0.0, high=3600.0,
                                      help="seconds an actor task should at least run on a "
                                           "cluster (segments are batched to reach it); "
                                           "shorter tasks lower the policy lag")
    max_segments: int = setting(64, low=1, high=100_000, help="most unroll segments per task")
    segments_per_task: int | None = setting(
        None, kind="int", low=1,
        help="fix the segments per task (none: adaptive on a cluster; in a reproducible "
             "run ceil(batch_size / envs_per_actor))")
    learner_threads: int | None = setting(
        1, kind="int", low=1, high=1024, nullable=True,
        help="torch threads of this process, set when the runner is made (none: leave torch "
             "alone); 1: the learner's matrices are small and the cores belong to the actors")
    device: str = derive(RLSettings, "device")

"""The settings of ``esnb.AESRL`` (Lee et al. 2020) and ``esnb.CEMRL`` (Pourchot and Sigaud
2019), each declared once (see :mod:`esnb.settings`).

What both share -- the environment, the TD3 networks and hyperparameters, the replay, the
evaluation of the mean -- is declared in :class:`PopulationRLConfig`; each algorithm adds its
own and re-declares (:func:`~esnb.settings.derive`) the few whose default or paper value
differs. Paper values come from the papers and, where they defer to it, the authors' released
code (``KyunghyunLee/aes-rl``; ``apourchot/CEM-RL``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from esnb.aes.distribution import env_defaults
from esnb.aes.rules import MEAN_RULES, VARIANCE_RULES
from esnb.aes.sep_cem import VARIANCE_FORMS
from esnb.settings import EnvSettings, RLSettings, derive, setting

#: why the laptop networks are smaller than the papers' 400-300
CPU_WHY = ("~150 TD3 updates/s at 400-300 on a 2-core laptop, ~900/s at 64-64; the paper: "
           "400-300 (Humanoid 256-256)")
#: settings resolved per environment from Table 5 of the AES-RL paper when None
ENV_DEPENDENT = ("r", "f_b_absolute", "f_b_relative", "p_desired")


@dataclass(frozen=True)
class PopulationRLConfig(EnvSettings):
    """What AES-RL and CEM-RL share: environment, TD3 networks and updates, replay."""

    env: str = derive(EnvSettings, "env", "HalfCheetah-v5",
                      help="gymnasium environment id with a bounded Box action space")
    var_init: float = setting(1e-3, low=0.0, low_open=True, high=10.0, log=True,
                              help="initial variance of every parameter (the papers' "
                                   "sigma_init is a variance)")
    a_noise: float = setting(0.1, low=0.0, high=10.0, live=True,
                             help="exploration noise on the individuals' actions, in units of "
                                  "the action half-range")
    eval_episodes: int = setting(5, low=1, high=1000, live=True,
                                 help="noise-free episodes per evaluation of the mean")
    rl_start_step: int = setting(10_000, low=0, control=True,
                                 help="env steps before the first RL individual")
    actor_hidden: tuple[int, ...] = setting((64, 64), low=1, paper=(400, 300), why=CPU_WHY,
                                            help="hidden layers of the actors (tanh)")
    critic_hidden: tuple[int, ...] = setting((64, 64), low=1, paper=(400, 300), why=CPU_WHY,
                                             help="hidden layers of the twin critic "
                                                  "(leaky ReLU)")
    batch_size: int = setting(100, low=1, high=100_000,
                              help="transitions per TD3 step of the critic and of the actors")
    actor_lr: float = setting(1e-3, low=0.0, low_open=True, high=1.0, log=True,
                              help="Adam step size of an RL individual's actor (fresh Adam per "
                                   "individual)")
    critic_lr: float = setting(1e-3, low=0.0, low_open=True, high=1.0, log=True,
                               help="Adam step size of the shared critic")
    gamma: float = derive(RLSettings, "gamma")
    tau: float = setting(0.005, low=0.0, low_open=True, high=1.0,
                         help="soft update rate of the target critic")
    policy_noise: float = setting(0.2, low=0.0, high=10.0,
                                  help="TD3 target policy smoothing noise (half-range units)")
    noise_clip: float = setting(0.5, low=0.0, high=10.0,
                                help="clip of the target policy noise (half-range units)")
    replay_capacity: int = setting(200_000, low=1, high=100_000_000,
                                   help="transitions in the shared replay")
    critic_exclusive: bool = setting(True, help="keep evaluations off the critic's worker while "
                                                "there are other workers")
    device: str = derive(RLSettings, "device",
                         help="where the shared critic computes: auto (cuda when torch sees a "
                              "CUDA device on the critic's worker, else cpu), cpu, cuda or "
                              "cuda:N; the RL individuals' actors train on CPUs")
    critic_resources: Any = setting(
        "auto", kind="dict", special=("auto",), nullable=True,
        help="worker resources the critic's actor asks for; auto: {\"GPU\": 1} when device "
             "is not cpu and a worker declares GPU (make_client(gpu_workers=N)), else a "
             "worker of its own as usual; none: always as usual")


@dataclass(frozen=True)
class AESRLConfig(PopulationRLConfig):
    """AES-RL: asynchronous ES + TD3 with a shared critic; one update of ``(mu, var)`` per
    evaluated individual."""

    algorithm = "AESRL"
    title = "AES-RL"
    paper_by_env = {"Humanoid": (
        {"actor_hidden": (256, 256), "critic_hidden": (256, 256), "actor_lr": 3e-4,
         "critic_lr": 3e-4},
        "the paper's appendix A (256-256 on Humanoid) and the released Humanoid config "
        "(learning rate 3e-4)")}

    batch_size: int = derive(PopulationRLConfig, "batch_size", paper=256,
                             why="CEM-RL's 100 (the AES-RL paper: 'same as CEM-RL'); the "
                                 "released AES-RL configs use 256")
    mean_rule: str = setting("relative_baseline", choices=tuple(MEAN_RULES), live=True,
                             help="how far the mean moves toward each individual (p)")
    var_rule: str = setting("online_adaptive", choices=tuple(VARIANCE_RULES), live=True,
                            help="how the variance follows each update")
    r: float | None = setting(None, kind="float", low=0.0, low_open=True, high=1e9, log=True,
                              live=True, help="fixed range r of fixed_linear / fixed_sigmoid "
                                              "(none: Table 5's value for the env)")
    f_b_absolute: float | None = setting(None, kind="float", low=-1e9, high=1e9, live=True,
                                         help="baseline f_b of absolute_baseline (none: "
                                              "Table 5's -r for the env)")
    f_b_relative: float | None = setting(None, kind="float", low=0.0, low_open=True,
                                         high=1e9, log=True, live=True,
                                         help="baseline f_b of relative_baseline (none: "
                                              "Table 5's r for the env)")
    p_pos: float = setting(1.0, low=0.0, high=1.0, live=True, help="p_sg for an improving z")
    p_neg: float = setting(0.0, low=0.0, high=1.0, live=True,
                           help="p_sg for a non-improving z (> 0 moves the mean away from it)")
    var_n: float = setting(10.0, low=1.0, high=1e6, log=True, live=True,
                           help="n of the online_fixed variance rule")
    p_desired: float | None = setting(None, kind="float", low=0.0, high=1.0, live=True,
                                      help="desired share of RL individuals, eq. 3 (none: "
                                           "0.5, Swimmer 0.1)")
    k_rl: float = setting(50.0, low=0.0, high=1e6, live=True, help="gain K_rl of eq. 3")
    var_floor: float = setting(1e-5, low=0.0, low_open=True, high=1.0, log=True, live=True,
                               help="lower limit of every variance (sigma_limit, a variance)")
    critic_chunk: int = setting(1000, low=1, high=10_000_000,
                                help="critic updates per call of the critic actor")
    critic_ratio: float = setting(1.0, low=0.0, low_open=True, high=1e6,
                                  help="critic updates allowed per collected env step")
    last_episodes: int = setting(10, low=1, high=100_000,
                                 help="an RL individual takes as many actor steps as the env "
                                      "steps of this many last episodes")
    inflight_per_thread: int = setting(2, low=1, high=1000,
                                       help="individuals in flight per evaluation thread")
    mean_eval_inflight: int | None = setting(None, kind="int", low=1,
                                             help="evaluations of the mean in flight at most "
                                                  "(none: one per evaluation thread)")
    rank_window: int = setting(10, low=2, high=1_000_000,
                               help="window n of the rank_async / rank_window rules")
    warmup_actions: str = setting("policy", choices=("policy", "random"),
                                  help="warm-up individuals act with their own policy (the "
                                       "paper's Algorithm 1) or uniformly at random (the "
                                       "released code; such episodes only fill the replay)")
    max_retries: int = setting(2, low=0, high=100,
                               help="failed runs of an individual (a lost worker) before it "
                                    "is dropped")

    @classmethod
    def prepare(cls, values: dict[str, Any]) -> dict[str, Any]:
        """None for ``r``, ``f_b_absolute``, ``f_b_relative``, ``p_desired``: the paper's
        value for the environment (:func:`esnb.aes.env_defaults`)."""
        if any(values.get(k) is None for k in ENV_DEPENDENT):
            table = env_defaults(str(values["env"]))
            values = {**values, **{k: table[k] for k in ENV_DEPENDENT if values.get(k) is None}}
        return values


@dataclass(frozen=True)
class CEMRLConfig(PopulationRLConfig):
    """CEM-RL: sep-CEM + TD3, serial (CEM-RL's interleaved order in this process) or
    parallel-synchronous (P-CEM-RL: each generation's actors and episodes as parallel
    tasks)."""

    algorithm = "CEMRL"
    title = "CEM-RL"

    a_noise: float = derive(PopulationRLConfig, "a_noise", 0.0,
                            help="exploration noise on the individuals' actions, in units of "
                                 "the action half-range (CEM-RL: none; AES-RL's paper: 0.1)")
    eval_episodes: int = derive(PopulationRLConfig, "eval_episodes", paper=10,
                                why="half the evaluation cost per generation")
    replay_capacity: int = derive(PopulationRLConfig, "replay_capacity", paper=1_000_000,
                                  why="AES-RL's 2e5 (its appendix C); ~170 MB for "
                                      "HalfCheetah at 1e6")
    critic_exclusive: bool = derive(PopulationRLConfig, "critic_exclusive", False,
                                    help="P-CEM-RL: keep evaluations off the critic's worker "
                                         "(the released P-CEM-RL trained its critic on an "
                                         "actor worker)")
    parallel: bool = setting(False, control=True,
                             help="P-CEM-RL: each generation's actors and episodes as "
                                  "parallel tasks (false: CEM-RL's order in this process)")
    pop_size: int = setting(10, low=2, high=10_000, control=True,
                            help="individuals per generation")
    n_rl: int | None = setting(None, kind="int", low=0, high=10_000, control=True,
                               help="RL individuals per generation (none: half of them)")
    eps_init: float = setting(1e-3, low=0.0, high=10.0,
                              help="sep-CEM's initial additive variance")
    eps_limit: float = setting(1e-5, low=0.0, high=10.0,
                               help="the value the additive variance decays toward")
    eps_tau: float = setting(0.95, low=0.0, high=1.0,
                             help="decay of the additive variance per generation")
    variance_form: str = setting("code", choices=VARIANCE_FORMS,
                                 help="sep-CEM's variance with the released codes' extra 1/K_e "
                                      "(code) or eq. 2 as printed (paper)")
    antithetic: bool = setting(False, paper=True,
                               why="kept off so that runs match esnb's earlier CEM-RL",
                               help="mirrored sampling (needs an even pop_size)")
    eval_interval: int = setting(1, low=0, high=100_000, live=True,
                                 help="evaluate the mean every n generations (0: never)")

    @classmethod
    def prepare(cls, values: dict[str, Any]) -> dict[str, Any]:
        """``n_rl`` None: half the population (CEM-RL's)."""
        if values.get("n_rl") is None:
            values = {**values, "n_rl": int(values["pop_size"]) // 2}
        return values

    def check(self) -> None:
        if self.n_rl is not None and self.n_rl > self.pop_size:
            raise ValueError(f"n_rl must be <= pop_size={self.pop_size}, got {self.n_rl}")
        if self.antithetic and self.pop_size % 2:
            raise ValueError(f"antithetic sampling needs an even pop_size, got "
                             f"{self.pop_size}")

"""The settings of ``esnb.EORL`` (Khadilkar 2023) and of its baselines, each declared once (see
:mod:`esnb.settings`).

:class:`EpisodeConfig` holds what every runner of the family shares (the environment, the
Monte-Carlo DQN, its buffer and budget); each baseline's config adds its own settings, and
:class:`PopulationConfig` the population size of EORL and round-robin CEM-RL.

The defaults are already the paper's (section 4.1: 32-8 ReLU networks, learning rate 0.01,
samples of 4,096, 2 epochs, a buffer of 100 x timeout, epsilon decaying from 1 per episode,
sigma 0.25, q 0.9, n = 8; 400 BitFlip episodes), so ``preset="paper"`` changes nothing.
What the paper leaves open is esnb's choice and said where it is declared: EORL-ACTV's rates,
HER's ``her_k``, CEM-RL's noise, CER's thresholds and mixing, and whether an epoch is one
full-batch step (``minibatch`` none) or Keras mini-batches (``minibatch=32``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from esnb.evo.operators import SIGMA
from esnb.evo.population import Q
from esnb.evo.schedules import SCHEDULES, VARIANTS
from esnb.rl.constants import ENV_IDS, resolve_env
from esnb.runners.eorl.columns import COLUMNS
from esnb.settings import EnvSettings, RLSettings, Settings, derive, setting

#: the variant a run takes when neither ``variant`` nor a rate is given
DEFAULT_VARIANT = "EORL-05-05"
#: the settings a variant sets
VARIANT_SETTINGS = ("kappa", "mu", "schedule")


@dataclass(frozen=True)
class EpisodeConfig(Settings):
    """One Monte-Carlo DQN (the paper's vanilla DQN baseline, VAN); what every runner of the
    EORL family shares."""

    algorithm = "VAN"

    env: str = setting("bitflip", choices=(*ENV_IDS, *ENV_IDS.values()), control=True,
                       help="bitflip or gridnav (or their gymnasium ids)")
    env_kwargs: dict = setting({}, help="the environment's version: n_bits, subgoal (BitFlip); "
                                        "size, subgoals, stochasticity (GridNav)")
    episodes: int = setting(400, low=1, control=True,
                            help="planned episodes E: schedules, epsilon decay and PER's beta "
                                 "follow it (paper: 400 on BitFlip; 1000, 2500 or 4000 on "
                                 "GridNav)")
    seed: int = derive(EnvSettings, "seed")
    lr: float = setting(0.01, low=0.0, low_open=True, high=1.0, log=True, live=True,
                        help="Adam step size of every network")
    eps_decay: float | None = setting(None, kind="float", low=0.0, low_open=True, high=1.0,
                                      help="epsilon multiplier per episode (none: the paper's, "
                                           "0.99 on BitFlip, 0.995/0.998/0.999 on GridNav for "
                                           "1000/2500/4000 episodes)")
    hidden: tuple[int, ...] = setting((32, 8), low=1, help="hidden layers (ReLU)")
    batch_size: int = setting(4096, low=1,
                              help="sample size per network and episode (capped at the buffer)")
    epochs: int = setting(2, low=1, help="passes over each sample per episode")
    minibatch: int | None = setting(None, kind="int", low=1,
                                    help="mini-batch size (none: a pass is one full-batch step; "
                                         "32: Keras' fit)")
    buffer_factor: int = setting(100, low=1,
                                 help="buffer capacity in multiples of the environment's timeout")
    device: str = derive(RLSettings, "device")

    #: settings that are not learner constructor arguments besides the live ones (read every
    #: episode): the learner's positional arguments and EORL's variant name
    RUN_ONLY: ClassVar[tuple[str, ...]] = ("env", "env_kwargs", "episodes", "seed", "variant")

    @classmethod
    def prepare(cls, values: dict[str, Any]) -> dict[str, Any]:
        """``env``: the gymnasium id of a short name."""
        if values.get("env") in ENV_IDS:
            values = {**values, "env": resolve_env(values["env"])}
        return values

    def learner_kwargs(self) -> dict[str, Any]:
        """The learner's constructor arguments (besides env, env_kwargs, episodes, seed)."""
        # one network unless the config declares a population (PopulationConfig's n)
        return {"n": 1, **{name: getattr(self, name)
                           for name, (meta, _) in self.declarations().items()
                           if name not in self.RUN_ONLY and (not meta.live or name == "lr")}}


@dataclass(frozen=True)
class PERConfig(EpisodeConfig):
    """One Monte-Carlo DQN with proportional prioritised replay (Schaul et al. 2016)."""

    algorithm = "PER"

    alpha: float = setting(0.6, low=0.0, high=1.0, help="priority exponent")
    beta0: float = setting(0.4, low=0.0, high=1.0,
                           help="importance-sampling exponent at the first episode, annealed "
                                "linearly to 1 at the last planned one")


@dataclass(frozen=True)
class HERConfig(EpisodeConfig):
    """One goal-conditioned Monte-Carlo DQN with hindsight relabelling from a goal buffer of
    the best episodes' terminal states."""

    algorithm = "HER"

    her_k: int = setting(4, low=0, high=1000,
                         help="goals drawn from the goal buffer to relabel each episode (the "
                              "HER paper's k; EORL's paper does not say)")
    goal_buffer: int = setting(8, low=1, high=10_000,
                               help="terminal states kept (of the best episodes)")


@dataclass(frozen=True)
class CBEConfig(EpisodeConfig):
    """One Monte-Carlo DQN with the count bonus ``beta / sqrt(1 + N(s, a))`` (MBIE-EB)."""

    algorithm = "CBE"

    beta: float = setting(1.0, low=0.0, high=1000.0, live=True,
                          help="count-bonus scale beta")


@dataclass(frozen=True)
class CERConfig(EpisodeConfig):
    """One Monte-Carlo DQN with contrastive experience replay (Khadilkar and Meisheri 2023): a
    second buffer of marked transitions and their contrastive samples, mixed into every
    training sample. Every value is esnb's choice: only the CER paper's abstract was available
    (see :mod:`esnb.runners.eorl.cer`)."""

    algorithm = "CER"

    cer_fraction: float = setting(0.25, low=0.0, high=1.0,
                                  help="share of each training sample drawn from the CER "
                                       "buffer (capped at its size)")
    cer_buffer_factor: int = setting(10, low=1, high=10_000,
                                     help="CER buffer capacity in multiples of the "
                                          "environment's timeout")
    state_z: float = setting(2.0, low=0.0, high=100.0,
                             help="a state deviation ||x' - x|| is significant above its "
                                  "running mean + state_z standard deviations")
    return_z: float = setting(2.0, low=0.0, high=100.0,
                              help="a return-to-go is unusual when it is more than return_z "
                                   "standard deviations from its running mean")
    contrast_radius: float = setting(0.0, low=0.0, high=1e6,
                                     help="L2 distance within which a state is similar to a "
                                          "marked one (0: the same state)")
    contrast_k: int = setting(3, low=0, high=1000,
                              help="contrastive samples (similar state, other action) added "
                                   "per marked transition, at most")


@dataclass(frozen=True)
class PopulationConfig(EpisodeConfig):
    """A population of Monte-Carlo DQNs sharing one buffer."""

    n: int = setting(8, low=2, high=10_000, control=True, help="population size")


@dataclass(frozen=True)
class CEMRLRoundRobinConfig(PopulationConfig):
    """The paper's round-robin CEM-RL: policies in turn, bottom-half ones replaced by noisy
    copies of fitter ones."""

    algorithm = "CEM-RL"

    replace_prob: float = setting(0.5, low=0.0, high=1.0,
                                  help="chance that a bottom-half policy is replaced")
    noise: float = setting(1e-3, low=0.0, high=1e3,
                           help="variance of the Gaussian noise added to the elite a new "
                                "policy is drawn from (CEM-RL's initial noise)")


@dataclass(frozen=True)
class EORLConfig(PopulationConfig):
    """EORL: ``n`` Monte-Carlo DQNs sharing one buffer, with crossover and mutation.

    A ``variant`` (EORL-FIX, EORL-05-00, EORL-05-05, EORL-10-05, EORL-ACTV) sets ``kappa``,
    ``mu`` and ``schedule``; give either a variant or rates (a rate not given takes
    EORL-05-05's). EORL-ACTV's rates (0.05, 0.05) are esnb's choice: the paper does not
    give them.
    """

    algorithm = "EORL"

    variant: str | None = setting(None, choices=tuple(VARIANTS), nullable=True,
                                  help="a named (kappa, mu, schedule) of the paper (none: "
                                       "EORL-05-05 unless rates are given)")
    kappa: float | None = setting(None, kind="float", low=0.0, high=1.0, live=True,
                                  help="crossover rate (probability scale at the start; none: "
                                       "the variant's)")
    mu: float | None = setting(None, kind="float", low=0.0, high=1.0, live=True,
                               help="mutation rate (probability scale at the start; none: the "
                                    "variant's)")
    schedule: str | None = setting(None, choices=SCHEDULES, nullable=True, live=True,
                                   help="uniform: rates x (1 - e/E); active: grows while good "
                                        "returns are missing (none: the variant's)")
    sigma: float = setting(SIGMA, low=0.0, high=10.0, live=True,
                           help="std of the multiplicative noise factor N(1, sigma)")
    q: float = setting(Q, low=0.0, high=1.0, live=True,
                       help="fitness smoothing: A <- q A + (1 - q) return")

    @classmethod
    def prepare(cls, values: dict[str, Any]) -> dict[str, Any]:
        """``variant``'s rates and schedule (a variant and other rates are refused); rates
        not given take EORL-05-05's."""
        values = super().prepare(values)
        rates = {k: values.get(k) for k in VARIANT_SETTINGS}
        variant = values.get("variant")
        if variant is None and all(v is None for v in rates.values()):
            variant = DEFAULT_VARIANT
        if variant is not None and variant not in VARIANTS:
            return values  # the field's own check names the valid variants
        named = dict(zip(VARIANT_SETTINGS, VARIANTS[variant or DEFAULT_VARIANT]))
        if variant is not None:
            clash = [k for k, v in rates.items() if v is not None and v != named[k]]
            if clash:
                raise ValueError(f"pass either variant or {', '.join(clash)}, not both "
                                 f"(variants: {', '.join(VARIANTS)})")
        return {**values, "variant": variant,
                **{k: named[k] if v is None else v for k, v in rates.items()}}

    def check(self) -> None:
        missing = [k for k in VARIANT_SETTINGS if getattr(self, k) is None]
        if missing:
            raise ValueError(f"{', '.join(missing)} unset: build EORLConfig with "
                             f"EORLConfig.build (it takes them from the variant)")


@dataclass(frozen=True)
class EORLCommand(Settings):
    """``esnb train eorl``'s flags that are no setting of a runner: which algorithm of the
    paper's tables, and the environment's version (turned into the runner class and its
    ``env_kwargs`` by :func:`esnb.runners.eorl.command.adapt`)."""

    algorithm: ClassVar[str] = "esnb train eorl"

    algorithm_name: str = setting(
        "EORL", choices=("EORL", *COLUMNS), flag="--algorithm",
        help="EORL (with --variant or --kappa/--mu/--schedule) or a table column")
    size: int = setting(6, low=1, help="bits (bitflip) or grid side (gridnav)")
    subgoal: str = setting("0", choices=("0", "1", "2+", "2-"),
                           help="bitflip: 0 or 1; gridnav: 0, 1, 2+ or 2-")
    stochasticity: float = setting(0.0, low=0.0, high=1.0,
                                   help="gridnav only: probability of a random move")

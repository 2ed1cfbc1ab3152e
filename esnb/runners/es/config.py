"""The settings of ``esnb.ES``: OpenAI-ES (Salimans et al. 2017) and IW-ES (Campos et al.
2018), each declared once (see :mod:`esnb.settings`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from esnb.es.iw import NORMALIZATIONS
from esnb.es.shaping import SHAPINGS
from esnb.nets.policy import ACTIVATIONS
from esnb.settings import EnvSettings, setting

#: OpenAI's released code samples perturbations from a table of 250M float32 entries (1 GB)
PAPER_NOISE_SIZE = 250_000_000


def _even(value: int) -> str | None:
    return None if value % 2 == 0 else "must be even (mirrored sampling evaluates pairs)"


@dataclass(frozen=True)
class ESConfig(EnvSettings):
    """OpenAI-ES with a shared noise table, mirrored sampling, centered ranks and Adam; with
    ``iw_k > 0``, IW-ES's importance-weighted reuse of each batch."""

    algorithm = "ES"
    title = "OpenAI-ES"
    #: iw_distributed: workers replay IW-ES updates on their replicas (docs/scale_out.md);
    #: nothing to set. min_task_runtime: tasks are sized to workers (tasks_per_worker)
    retired = ("iw_distributed", "min_task_runtime")
    #: ``esnb demo``: HalfCheetah-v5 reaches 2,000 in 2M env steps with a larger step size
    #: (evaluations every 10 generations keep the rollouts' share of the time)
    presets = {"demo": {"env": "HalfCheetah-v5", "lr": 0.02, "eval_interval": 10}}

    population: int = setting(40, low=2, high=100_000, check=_even, live=True, paper=10_000,
                              why="OpenAI's released config ran 10,000 episodes per batch on "
                                  "hundreds of cores; 40 keeps a laptop generation near a "
                                  "second",
                              help="episodes per generation (mirrored pairs x 2)")
    sigma: float = setting(0.02, low=0.0, low_open=True, high=10.0, log=True, live=True,
                           help="std of the parameter perturbations")
    lr: float = setting(0.01, low=0.0, low_open=True, high=1.0, log=True, live=True,
                        help="Adam step size")
    weight_decay: float = setting(0.005, low=0.0, high=1.0, live=True,
                                  help="L2 coefficient added to the negated gradient")
    shaping: str = setting("centered_ranks", choices=tuple(SHAPINGS), live=True,
                           help="fitness shaping applied to the returns")
    eval_interval: int = setting(5, low=0, high=100_000, live=True,
                                 help="evaluate the mean policy every n generations (0: never)")
    eval_episodes: int = setting(5, low=1, high=1000, live=True,
                                 help="noise-free episodes per evaluation")
    obs_norm: bool = setting(True, control=True,
                             help="normalise observations with running statistics")
    obs_stat_prob: float = setting(0.01, low=0.0, high=1.0, live=True,
                                   help="fraction of rollouts whose observations update the "
                                        "normalisation (OpenAI: 0.01)")
    hidden: tuple[int, ...] = setting((64, 64), low=1,
                                      help="hidden layer sizes of the MLP policy (IW-ES: 64, 64)")
    activation: str = setting("tanh", choices=ACTIVATIONS, help="hidden activation")
    action_noise: float = setting(0.0, low=0.0, high=10.0, paper=0.01,
                                  why="ES explores in parameter space; the released code added "
                                      "this small action noise on MuJoCo, esnb leaves it opt-in",
                                  help="std of Gaussian noise on Box actions in training "
                                       "rollouts (OpenAI's ac_noise_std)")
    noise_size: int | None = setting(
        None, kind="int", low=1, high=2**29, paper=PAPER_NOISE_SIZE,
        why="1 GB per process on a 2-core laptop; 25M entries (100 MB, dask config "
            "esnb.noise.size) cover policies up to 25M parameters",
        help="entries of the shared noise table (none: dask config esnb.noise.size, 25M; at "
             "most 2**29: a task packs its offsets in 29 bits)")
    noise_seed: int | None = setting(None, kind="int", low=0,
                                     help="seed of the noise table (none: dask config "
                                          "esnb.noise.seed, 123)")
    tasks_per_worker: int = setting(
        1, low=1, high=100_000,
        help="tasks a generation's mirrored pairs are split into, per worker: 1 steps all of a "
             "worker's episodes in lock step in one task (the fastest: a task of one pair "
             "steps 2 episodes at a time); more make a lost worker's share of a generation "
             "smaller. A task holds at least one pair")
    iw_k: int = setting(0, low=0, high=1000, live=True, special=("auto",),
                        help="IW-ES: importance-weighted updates per batch at most (0: plain "
                             "OpenAI-ES; 'auto': up to iw_k_max while ESS/n stays above "
                             "iw_ess_threshold)")
    iw_adaptive: bool = setting(False, live=True,
                                help="stop a batch's IW updates once ESS/n falls below the "
                                     "threshold")
    iw_ess_threshold: float = setting(0.5, low=0.0, low_open=True, high=1.0, live=True,
                                      help="ESS/n an IW update needs (adaptive mode)")
    iw_clip: float = setting(1.0, low=0.0, low_open=True, high=1e6, log=True, live=True,
                             help="clip c of the importance weights (the paper: 1)")
    iw_normalize: str = setting("sum", choices=NORMALIZATIONS, live=True,
                                help="gradient normalised by the sum of clipped weights (eq. 3) "
                                     "or by n")
    iw_k_max: int = setting(10, low=1, high=1000, help="the most IW updates with iw_k='auto'")
    @classmethod
    def prepare(cls, values: dict[str, Any]) -> dict[str, Any]:
        """``iw_k="auto"``: adaptive IW-ES with at most ``iw_k_max`` updates per batch."""
        if values.get("iw_k") == "auto":
            values = {**values, "iw_k": values.get("iw_k_max", 10), "iw_adaptive": True}
        return values

    def check(self) -> None:
        if self.iw_k == "auto":
            raise ValueError("iw_k 'auto' must be built with ESConfig.build (it sets "
                             "iw_adaptive)")

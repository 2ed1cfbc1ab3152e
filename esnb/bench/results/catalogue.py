"""What the results page runs, and what it sets beside each result: the source paper's number
and a peer's, each with its source.

An :class:`Entry` is one algorithm in one preset on one environment at one budget (counted in
the runner's own progress counters, never in seconds: a seeded run then does the same work on
any machine). :data:`ENTRIES` are those that fit a laptop; :data:`NOT_RUN` says, for the other
presets, why not. A :class:`Reference` is a number somebody published, with the setting it was
measured at and where it is written; where nothing comparable exists the page says so instead
of inventing one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from esnb.bench.results.aggregate import TaskSet
from esnb.runners.es.config import ESConfig


@dataclass(frozen=True)
class Reference:
    """A published number.

    Attributes
    ----------
    value : str
        As published (``"488.69 ± 16.11"``), or a dash when the source has no such number.
    setting : str
        What it was measured on (environment version, budget, seeds).
    source : str
        Where it is written (paper and table, or repository, file and commit).
    """

    value: str
    setting: str
    source: str


@dataclass(frozen=True)
class Entry:
    """One row of the results page.

    Attributes
    ----------
    key : str
        File names of its data and plot (``docs/results/<key>.json``, ``<key>.svg``).
    algorithm : str
        ``esnb train <algorithm>``; ``"eorl-table"`` runs a cell of EORL's tables instead
        (:func:`esnb.runners.eorl.tasks.run_one`).
    preset : str
        ``laptop`` or ``paper``.
    env : str
    budget : dict
        ``{progress counter: amount}`` as ``runner.start(**budget)`` takes it.
    settings : dict
        Settings besides the preset's, each one that differs from it (every one of them is
        printed on the page).
    eval_episodes : int
        Episodes of the final, noise-free evaluation of the final parameters (new episode
        seeds, not the ones the run was selected on).
    seeds : int
        Seeds the entry is run with (5; an entry of an hour and more a seed on 2 cores, 3).
        Until they are all run the page says how many of them the score rests on.
    paper, peer : Reference, optional
    note : str
        How to read the row beside its references: why esnb's number is below the paper's,
        or why they are not comparable.
    score_range : (float, float), optional
        The least and the most a final score can be (Pong: -21 to +21 a game; CartPole-v1: 0
        to 500), where the task bounds it. The page cuts the seeds' interval there: the true
        mean lies inside, so the cut interval covers it as often as the uncut one.
    """

    key: str
    algorithm: str
    preset: str
    env: str
    budget: dict[str, float]
    title: str
    settings: dict[str, Any] = field(default_factory=dict)
    eval_episodes: int = 20
    seeds: int = 5
    paper: Reference | None = None
    peer: Reference | None = None
    note: str = ""
    score_range: tuple[float, float] | None = None

    def command(self, seed: str = "S") -> str:
        """The ``esnb train`` command of one seed of this entry (for the page)."""
        if self.algorithm == "eorl-table":
            return f"esnb bench eorl-table (cell {self.env}, {self.settings})"
        flags = [f"--env {self.env}", f"--preset {self.preset}", f"--seed {seed}"]
        flags += [f"--{k.replace('_', '-')} {_flag_value(v)}" for k, v in self.settings.items()]
        flags += [f"--{_budget_flag(k)} {v:,.0f}".replace(",", "") for k, v in self.budget.items()]
        return f"esnb train {self.algorithm} " + " ".join(flags)


def _flag_value(v: Any) -> str:
    return " ".join(str(x) for x in v) if isinstance(v, tuple | list) else str(v)


def _budget_flag(counter: str) -> str:
    return {"env_steps": "steps", "learner_steps": "learner-steps",
            "generations": "generations", "episodes": "episodes"}.get(counter, counter)


AES_TABLE3 = "Lee et al. 2020 (AES-RL), Table 3: mean ± sd over 10 runs, 1M steps, MuJoCo v2"
CLEANRL_TD3 = ("CleanRL `td3_continuous_action.py`, docs/rl-algorithms/td3.md (vwxyzjn/cleanrl "
               "at 0a247b6): mean ± sd over 3 seeds, 1M steps, MuJoCo v2")

#: ES: the demo's step size (its population and sigma are the laptop preset's)
_ES = {"lr": ESConfig.presets["demo"]["lr"]}
#: AES-RL / CEM-RL in small: the setting of ``esnb bench aes-rules`` (BENCHMARKS.md)
_AES_SMALL = dict(rl_start_step=1_000)


def _aes_small(algorithm: str, title: str, paper: str, note: str, **settings) -> Entry:
    """AES-RL or CEM-RL on InvertedPendulum-v5, 5,000 env steps, RL from 1,000."""
    return Entry(f"{algorithm}-invpendulum", algorithm, "laptop", "InvertedPendulum-v5",
                 {"env_steps": 5_000}, title, settings={**_AES_SMALL, **settings},
                 eval_episodes=10,
                 paper=Reference(paper, "HalfCheetah-v2, 1M steps", AES_TABLE3),
                 peer=Reference("9018.31 ± 1078.31", "HalfCheetah-v2, 1M steps (TD3)",
                                CLEANRL_TD3),
                 note=note)


def _minatar_impala(game: str, note: str) -> Entry:
    """IMPALA's laptop preset on a MinAtar game: 2M agent steps, games capped at 10,000."""
    return Entry(f"impala-minatar-{game.lower()}", "impala", "laptop", f"MinAtar/{game}-v1",
                 {"env_steps": 2_000_000}, f"IMPALA on MinAtar {game}",
                 settings={"max_episode_steps": 10_000},
                 paper=Reference("—", "MinAtar, 5M frames, curves only",
                                 "Young & Tian 2019 (MinAtar) plot DQN and online "
                                 "actor-critic curves, no table; IMPALA is not among its "
                                 "agents"),
                 note=note + "The laptop preset as on every vector task (Adam 1e-3 decayed "
                      "linearly to 0 over the budget, entropy 0.01, 32 unrolls of 20) with "
                      "MinAtar's conv torso; MinAtar has no time limit of its own, so games "
                      "are capped at 10,000 agent steps. 4-7 minutes a seed here (more under "
                      "load).")


#: Ape-X DQN on MinAtar: the settings of BENCHMARKS.md's MinAtar Breakout run (Adam 3e-4,
#: batch 128, target copy every 500 updates, 8 sampled transitions per inserted one)
_APEX_MINATAR = dict(max_episode_steps=10_000, lr=3e-4, batch_size=128, target_period=500,
                     samples_per_insert=8.0, min_size=5_000)


def _minatar_apex(game: str) -> Entry:
    """Ape-X DQN's laptop preset on a MinAtar game with :data:`_APEX_MINATAR`, 30,000
    updates (about 490,000 agent steps: ~16 inserted per update of 128 at 8 per insert)."""
    return Entry(f"apex-minatar-{game.lower()}", "apex", "laptop", f"MinAtar/{game}-v1",
                 {"learner_steps": 30_000}, f"Ape-X DQN on MinAtar {game}",
                 settings=_APEX_MINATAR,
                 paper=Reference("—", "MinAtar, 5M frames, curves only",
                                 "Young & Tian 2019 (MinAtar) plot DQN curves, no table; "
                                 "Ape-X is not among its agents"),
                 note="IMPALA's row above has the random policy's score. The laptop "
                      "preset (8 actors, n = 3, a dueling head of 128 on "
                      "MinAtar's conv torso) with a smaller step size, larger batches and a "
                      "replay rate limit (its settings above): with actors flat out on 2 "
                      "cores the learner falls behind. Games are capped at 10,000 agent "
                      "steps.")


def _gridnav(algorithm: str, title: str, paper: str, note: str) -> Entry:
    """A cell of EORL's Table 3: GridNav 8 x 8, subgoal version 1, no stochasticity."""
    return Entry(f"{algorithm.lower()}-gridnav8", "eorl-table", "laptop", "gridnav",
                 {"episodes": 1000}, title,
                 settings={"algorithm": algorithm, "size": 8, "subgoals": "1",
                           "stochasticity": 0.0},
                 paper=Reference(paper, "GridNav 8 x 8, subgoal 1, p = 0, mean of the last "
                                 "100 episodes", "Khadilkar 2023 (EORL), Table 3"),
                 note=note)


ENTRIES: tuple[Entry, ...] = (
    Entry("es-halfcheetah", "es", "laptop", "HalfCheetah-v5", {"env_steps": 2_000_000},
          "OpenAI-ES", settings=_ES, eval_episodes=10,
          paper=Reference("—", "HalfCheetah (Gym, 2017), timesteps to reach TRPO's score",
                          "Salimans et al. 2017 report timesteps to reach a share of TRPO's "
                          "score, not a score at a budget; AES-RL's Table 3 gives CEM (an ES) "
                          "2940 ± 353 at 1M steps on HalfCheetah-v2"),
          peer=Reference("not measured", "EvoTorch 0.6.1 + Ray on this machine",
                         "EvoTorch installs here (esnb bench rollout measures its throughput: "
                         "esnb's is 3.2-3.4x); a scored EvoTorch run is not on this page yet"),
          note="2M env steps is the demo's budget (about 2 minutes here); OpenAI-ES's own runs "
               "use population 10,000 (the paper preset) and far more steps."),
    Entry("iwes-halfcheetah", "es", "laptop", "HalfCheetah-v5", {"env_steps": 2_000_000},
          "IW-ES (K = 2)", settings={**_ES, "iw_k": 2}, eval_episodes=10,
          paper=Reference("—", "Ant-v2, curves only", "Campos et al. 2018 (IW-ES) show curves "
                          "on Ant-v2 (Figures 1-4), no table of scores"),
          note="The same budget as OpenAI-ES above: IW-ES's claim is more progress from the "
               "same env steps at small learning rates; at lr 0.02 the paper (Figure 4) warns "
               "that the reuse can hurt."),
    Entry("apex-cartpole", "apex", "laptop", "CartPole-v1", {"learner_steps": 4_000},
          "Ape-X DQN", score_range=(0, 500), peer=Reference(
              "488.69 ± 16.11", "CartPole-v1, 500,000 env steps",
              "CleanRL `dqn.py`, docs/rl-algorithms/dqn.md (vwxyzjn/cleanrl at 01bd173)"),
          paper=Reference("—", "Atari only", "Horgan et al. 2018 (Ape-X) report Atari-57 "
                          "human-normalised scores; no CartPole"),
          note="CleanRL's figure is its training episodes' return over 500,000 env steps; "
               "esnb's is a greedy evaluation after 4,000 learner steps."),
    Entry("apex-dpg-invpendulum", "apex-dpg", "laptop", "InvertedPendulum-v5",
          {"learner_steps": 2_500}, "Ape-X DPG", eval_episodes=10, score_range=(0, 1000),
          paper=Reference("—", "DeepMind control suite from features", "Horgan et al. 2018 "
                          "(Ape-X) show DPG curves on manipulator/humanoid/walker tasks; no "
                          "InvertedPendulum"),
          note="1000 is the most an episode can return."),
    Entry("impala-cartpole", "impala", "laptop", "CartPole-v1", {"learner_steps": 2_000},
          "IMPALA", score_range=(0, 500),
          peer=Reference("stops at 150", "CartPole-v0 (episodes of 200), ≤ 500,000 env steps",
                         "RLlib tuned example rllib/tuned_examples/impala/cartpole-impala.yaml "
                         "(ray-project/ray at 0ec52e8): its stopping target, not a score"),
          paper=Reference("—", "DMLab-30 and Atari", "Espeholt et al. 2018 (IMPALA): no "
                          "CartPole"),
          note="The learning rate decays linearly to 0 over the learner-step budget "
               "(lr_schedule linear), so the final parameters are the ones judged."),
    Entry("impala-cartpole-paper", "impala", "paper", "CartPole-v1", {"env_steps": 1_280_000},
          "IMPALA (paper preset)", score_range=(0, 500),
          paper=Reference("—", "DMLab-30 and Atari", "Espeholt et al. 2018 (IMPALA): no "
                          "CartPole"),
          note="The paper preset's values off Atari (the released code's DMLab ones) on "
               "CartPole: RMSProp (TF1) lr 4.8e-4, "
               "entropy 2.5e-4, unrolls of 100, rewards clipped to [-1, 1] (a CartPole reward "
               "is 1: no change). The budget is the laptop row's env steps (2,000 learner "
               "steps of 32 x 20 frames); with unrolls of 100 that is 400 learner steps."),
    Entry("impala-pong", "impala", "laptop", "ALE/Pong-v5", {"env_steps": 10_000_000},
          "IMPALA on Pong", eval_episodes=10, seeds=3, score_range=(-21, 21),
          paper=Reference("—", "57 Atari games, 200M frames (50M agent steps)",
                          "Espeholt et al. 2018 (IMPALA), appendix: Atari scores at 200M frames "
                          "(its per-game table is not among the sources esnb holds)"),
          peer=Reference("20.36 ± 0.20", "PPO, PongNoFrameskip-v4, 10M agent steps",
                         "CleanRL docs, rl-algorithms/ppo.md (ppo_atari.py)"),
          note="The laptop preset on Atari (settings page): the shallow torso drawn as A2C "
               "draws it (init_scheme orthogonal), Adam 5e-4 constant, batches of 32 unrolls "
               "of 20, 2 workers x 2 actors x 16 environments; a score is 10 whole games (21 "
               "points to one side) of the final parameters, greedy. +21 is the most a game "
               "can give. 10M agent steps (40M frames), CleanRL's PPO's budget. Seed 0 ran "
               "7.21M agent steps as a probe in one session and was resumed to 10M in the "
               "next (the preset had taken its init; Adam's rate is constant, so a longer "
               "budget is the same run gone on): its training score (the mean of its last 100 "
               "games) passed -15 at 3.9M agent steps, 0 at 7.2M and +18 at 8.3M, its greedy "
               "evaluations were 19.9 to 21.0 from 8.0M on, and its final 10 games all 21-0. "
               "Wall-clock 4 h 03 min, about half of it beside the test suite or other runs "
               "(~900 agent steps/s alone, 430-700 beside them). Seed 1, from scratch over "
               "three sessions (its checkpoint committed between them): -15 at 4.2M, 0 at "
               "7.1M and +18 at 9.4M; greedy evaluations 16.4 to 20.3 from 8.3M on but "
               "one of 2.0 at 9.3M (a dip the next two, 20.1 and 20.2, left behind); final "
               "20.30; 4 h 45 min, a third of it beside the test suite. Seed 2, alone over two "
               "sessions, was the slowest: -15 at 4.2M (67 min), 0 at 7.7M, +10 only at "
               "9.95M, still climbing when its budget ended; greedy evaluations 15.5 at "
               "7.4M, 18.0, 19.4 and 17.8 at 9.0-9.7M, then 9.4 at 9.9M and a final 14.60 "
               "(sd 6.6 over its 10 games), below +18 on its own, so the three seeds' "
               "mean of 18.63 has a wide interval; 2 h 49 min at ~1,000-"
               "1,160 agent steps/s. At the default init "
               "seed 0 was at "
               "-6.8 at 8M (docs/results/probes/impala-pong-default-seed0: off -20 only after "
               "3M steps, climbing ~2 points a million); A2C's orthogonal init started ~1M "
               "agent steps sooner on both seeds tried and climbed 4-5 points a million past "
               "5M, while a tenth of the entropy cost, advantages scaled to unit spread and "
               "42x42 frames did not (docs/notes.md, docs/results/probes). "
               "RLlib's tuned IMPALA reaches 18 "
               "by about 5M with 128 workers. On this machine RLlib 2.60's IMPALA (its own "
               "Atari wrapper, the same network, 64 environments on 2 actor processes) sampled "
               "468 agent steps/s against esnb's 943 (esnb bench impala-vs-rllib, "
               "BENCHMARKS.md: 2.0x). Trained alone to a score, the mean of the last 100 "
               "games on both sides (esnb bench impala-vs-rllib --to-score -15, figure "
               "results/impala-pong-rllib.svg), both passed -20 after about the same agent "
               "steps, esnb's seed 2 at 1.13M in 20.1 min, RLlib at 1.08M in 29.9 min "
               "(1.5x the wall-clock); RLlib stood at -19.8 at 1.5M (41 min), where esnb "
               "went on to -18 at 3.0M (48 min) and -15 at 4.2M (67 min). RLlib's run to "
               "-15 (2.5 h or more here) is still to be made. The seeds take about 3 h each "
               "alone here, so they run over "
               "sessions: their run folders (checkpoints included) kept in docs/results/seeds, "
               "a stopped seed resumed and a finished one read back "
               "(esnb bench results --only impala-pong --runs docs/results/seeds)."),
    *(_minatar_impala(game, note) for game, note in (
        ("Breakout", "A uniformly random policy scores 0.4 here (100 games; MinAtar's "
         "random_play.py says 0.5). "),
        ("SpaceInvaders", "A uniformly random policy scores 4.5 here (100 games). "))),
    *(_minatar_apex(game) for game in ("Breakout", "SpaceInvaders")),
    _aes_small("aesrl", "AES-RL", "12550 ± 187",
               "Not the paper's task or scale: HalfCheetah at 1M steps would take ~3 hours of "
               "this machine per seed (extrapolated from esnb bench aes-time: 30,000 steps "
               "in 352 s). "
               "InvertedPendulum (at most 1000) shows the algorithm learning in minutes. "
               "r = f_b = 170: about 1/6 of the best return, the paper's rule of thumb for "
               "the range (its Table 5 gives values only for its own six tasks). At this "
               "budget the seeds spread widely (one solves the task, the others are early); "
               "esnb bench aes-rules (BENCHMARKS.md) compares the update rules at 8,000 steps "
               "on the 200-step version.",
               r=170.0, f_b_relative=170.0),
    _aes_small("cemrl", "CEM-RL", "10725 ± 397",
               "As AES-RL above: the paper's scale does not fit; the same small task."),
    Entry("eorl-bitflip7", "eorl-table", "laptop", "bitflip", {"episodes": 400},
          "EORL-05-05", settings={"algorithm": "EORL-05-05", "n_bits": 7, "subgoal": 0},
          paper=Reference("8.22", "BitFlip n = 7, no subgoal, mean of the last 100 episodes",
                          "Khadilkar 2023 (EORL), Table 1"),
          note="The paper's metric: mean return of the last 100 training episodes."),
    Entry("van-bitflip7", "eorl-table", "laptop", "bitflip", {"episodes": 400},
          "VAN (one DQN)", settings={"algorithm": "VAN", "n_bits": 7, "subgoal": 0},
          paper=Reference("8.11", "BitFlip n = 7, no subgoal, mean of the last 100 episodes",
                          "Khadilkar 2023 (EORL), Table 1"),
          note="EORL's baseline on the same cell."),
    *(_gridnav(algorithm, title, paper, note) for algorithm, title, paper, note in (
        ("EORL-05-05", "EORL-05-05", "9.70", "A cell where the paper's baselines fall well "
         "behind EORL (VAN 6.59 against 9.70 here; the largest gap of Table 3's 8 x 8 rows is "
         "the '2-' subgoal cell, VAN 3.69 against 9.78)."),
        ("CER", "CER (contrastive replay)", "7.81", "esnb's CER is built from its paper's "
         "abstract (docs/eorl.md): its thresholds and mixing are esnb's choices."),
        ("VAN", "VAN (one DQN)", "6.59", "EORL's baseline on the same cell."))),
)

#: sets of entries aggregated across their tasks (IQM, stratified bootstrap, profiles)
TASK_SETS: tuple[TaskSet, ...] = (
    TaskSet("eorl-tables", "EORL's tables: BitFlip n = 7 and GridNav 8 x 8",
            {"EORL-05-05": {"BitFlip 7": "eorl-bitflip7", "GridNav 8": "eorl-05-05-gridnav8"},
             "VAN (one DQN)": {"BitFlip 7": "van-bitflip7", "GridNav 8": "van-gridnav8"}},
            {"BitFlip 7": (-1.0, 8.22), "GridNav 8": (-1.0, 9.70)},
            "0 is an agent that never reaches the goal (every episode times out: -1), 1 the "
            "paper's EORL-05-05 on that cell (Khadilkar 2023, Table 1: 8.22; Table 3: 9.70); "
            "CER has only the GridNav cell, so it is not in the set"),
    TaskSet("minatar", "MinAtar: Breakout and Space Invaders",
            {"Ape-X DQN": {"Breakout": "apex-minatar-breakout",
                           "SpaceInvaders": "apex-minatar-spaceinvaders"},
             "IMPALA": {"Breakout": "impala-minatar-breakout",
                        "SpaceInvaders": "impala-minatar-spaceinvaders"}},
            {"Breakout": (0.4, None), "SpaceInvaders": (4.5, None)},
            "0 is a uniformly random policy (measured here, 100 games: Breakout 0.4, Space "
            "Invaders 4.5), 1 the better algorithm's mean final score on that game: MinAtar "
            "has no published table to scale by (its paper plots curves only), so the set "
            "compares the two algorithms, each game counting the same; the budgets differ "
            "(IMPALA 2M agent steps, Ape-X 30,000 updates, about 490,000 agent steps)"),
)

#: presets not on the page, and why
NOT_RUN: tuple[tuple[str, str], ...] = (
    ("OpenAI-ES, paper preset", "population 10,000 per generation: ~250x the laptop's work per "
     "step of theta"),
    ("Ape-X DQN, paper preset", "360 actors, 50,000 transitions before learning, a replay of "
     "2M: sized for a cluster (the network is the paper's Atari one only on pixels)"),
    ("Ape-X DPG, paper preset", "64 actors and 50,000 transitions before learning"),
    ("AES-RL / CEM-RL, paper preset", "the paper's scale (400-300 networks, 1M steps) takes "
     "hours per seed here; the rows above run the laptop's 64-64 networks"),
    ("EORL and its baselines, paper preset", "the same settings as the laptop's (the paper's "
     "networks and budgets fit): the rows above are both"),
)


def entry(key: str) -> Entry:
    """The entry named ``key`` (a clear error listing the others)."""
    for e in ENTRIES:
        if e.key == key:
            return e
    raise ValueError(f"no results entry {key!r}; there are: {', '.join(e.key for e in ENTRIES)}")

"""The cases of ``esnb bench run-path``: an ``esnb train`` command each, and how its figures are
read from the run's own history.

Every command runs with ``--workers W --final-eval 0 --no-progress --out <a temporary
folder>`` (flags that 841b4ad's CLI and later ones share) and the laptop preset; budgets are in
generations or learner steps. A rate is a difference of the history's own counters
(``env_steps``, ``learner_steps``) between two rows over the wall clock between them, each row
stamped when the runner made it (:data:`esnb.bench.run_path.trees.CHILD`), so the time the run
path spends between iterations counts too:

- **ES end to end** (``train es --env HalfCheetah-v5 --generations N``): env steps per second
  from the first row to the last (the generations after the first); start-up: seconds from the
  interpreter's launch to the first row (generation 1 included);
- **Ape-X DQN on CartPole** (``train apex --env CartPole-v1 --learner-steps N``): learner
  updates and actor env steps per second, from the first row where the learner has updated to
  the last;
- **IMPALA on CartPole** (``train impala --env CartPole-v1 --learner-steps N``): actor frames
  (``env_steps``) and learner steps per second, over the same window;
- **start-up alone** (``train es --env HalfCheetah-v5 --generations 1``): the whole command's
  wall time, launch to exit (the cluster's start and close, the checkpoint, the run folder);
- **IMPALA on Pong** (``train impala --env ALE/Pong-v5 --learner-steps N``, the laptop preset's
  Atari network and batches; only when asked, ``--cases impala-pong``: minutes a run): the
  same figures as on CartPole.

``--quick`` makes each command tiny (for the test): population 8 and 100-step episodes for ES,
a 200-transition replay warm-up for Ape-X, a few learner steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: the ES env of the end-to-end and start-up cases (the laptop preset otherwise)
ES_ENV = "HalfCheetah-v5"
#: the RL cases' env
RL_ENV = "CartPole-v1"
#: what --quick adds to the ES commands: a tiny generation
QUICK_ES = ("--population", "8", "--max-episode-steps", "100")


@dataclass(frozen=True)
class Budgets:
    """Each case's budget: ES generations, Ape-X and IMPALA learner steps."""

    generations: int = 5
    apex_learner_steps: int = 1000
    impala_learner_steps: int = 300
    impala_pong_learner_steps: int = 150


#: the full budgets, and --quick's
#: (--quick's Ape-X: a row can hold up to ~50 learner steps under load, and a rate needs two
#: rows after the learner's first update)
FULL, QUICK = Budgets(), Budgets(generations=2, apex_learner_steps=160, impala_learner_steps=40,
                               impala_pong_learner_steps=20)


@dataclass(frozen=True)
class Figure:
    """One figure of a case: its key, label, unit, whether higher is better, and how it is
    read from a run (:func:`esnb.bench.run_path.trees.run_once`'s dict)."""

    key: str
    label: str
    unit: str
    higher_is_better: bool
    read: Callable[[dict], float]


class TooFewRows(ValueError):
    """A run's history has too few rows for a rate: its budget is too small (one line)."""


def timeline(run: dict) -> list[tuple[dict, float]]:
    """The run's history rows with their wall-clock stamps, in order."""
    stamps = {int(i): t for i, t in run["stamps"]}
    return [(row, stamps[int(row["_iteration"])]) for row in run["history"]
            if int(row["_iteration"]) in stamps]


def window(run: dict, learning: bool = False) -> list[tuple[dict, float]]:
    """The rows a rate is read over: all of them, or (``learning``) from the first one where
    the learner has updated; at least two."""
    rows = timeline(run)
    if learning:
        rows = [(row, t) for row, t in rows if row.get("learner_steps", 0) > 0]
    if len(rows) < 2:
        raise TooFewRows(f"a run's history has {len(rows)} row(s) to read a rate over "
                         f"({'after a learner update' if learning else 'in all'})")
    return rows


def rate(column: str, learning: bool = False) -> Callable[[dict], float]:
    """``column``'s growth per wall second over :func:`window`."""
    def read(run: dict) -> float:
        rows = window(run, learning)
        (first, t0), (last, t1) = rows[0], rows[-1]
        return (last[column] - first[column]) / (t1 - t0)

    return read


def first_row(run: dict) -> float:
    """Seconds from the interpreter's launch to the first history row."""
    rows = timeline(run)
    if not rows:
        raise TooFewRows("a run made no history row")
    return rows[0][1] - run["launched"]


def whole_command(run: dict) -> float:
    """Seconds from the interpreter's launch to its exit."""
    return run["seconds"]


@dataclass(frozen=True)
class Case:
    """An ``esnb train`` command and the figures read from its run."""

    key: str
    title: str
    figures: tuple[Figure, ...]
    command: Callable[[Budgets, bool], list[str]]
    #: the flag of its budget (named when its run made too few rows to read a figure)
    budget_flag: str = "--generations"
    #: run when --cases is not given (Pong's runs take minutes each: only when asked)
    default: bool = True

    def args(self, budgets: Budgets, quick: bool, workers: int) -> list[str]:
        """The command's arguments after ``esnb`` (``--out`` is added per run)."""
        return [*self.command(budgets, quick), "--workers", str(workers), "--final-eval", "0",
                "--no-progress"]


def es(generations: Callable[[Budgets], int]) -> Callable[[Budgets, bool], list[str]]:
    """``train es`` on :data:`ES_ENV` for ``generations(budgets)`` generations."""
    return lambda b, quick: ["train", "es", "--env", ES_ENV, "--generations",
                             str(generations(b)), *(QUICK_ES if quick else ())]


def rl(algorithm: str, steps: Callable[[Budgets], int],
       quick_args: tuple[str, ...] = (), env: str = RL_ENV) -> Callable[[Budgets, bool], list[str]]:
    """``train <algorithm>`` on ``env`` for ``steps(budgets)`` learner steps."""
    return lambda b, quick: ["train", algorithm, "--env", env, "--learner-steps",
                             str(steps(b)), *(quick_args if quick else ())]


#: IMPALA's figures, on CartPole and on Pong alike
IMPALA_FIGURES = (
    Figure("actor_fps", "actor frames/s", "/s", True, rate("env_steps", learning=True)),
    Figure("learner_steps_per_s", "learner steps/s", "/s", True,
           rate("learner_steps", learning=True)))

CASES: dict[str, Case] = {case.key: case for case in (
    Case("es", "ES", (
        Figure("env_steps_per_s", "env steps/s after generation 1", "/s", True,
               rate("env_steps")),
        Figure("start_up", "launch to the first row", "s", False, first_row)),
         es(lambda b: b.generations)),
    Case("apex", "Ape-X DQN", (
        Figure("updates_per_s", "learner updates/s", "/s", True,
               rate("learner_steps", learning=True)),
        Figure("actor_steps_per_s", "actor env steps/s", "/s", True,
               rate("env_steps", learning=True))),
         rl("apex", lambda b: b.apex_learner_steps, ("--min-size", "200")),
         "--apex-learner-steps"),
    Case("impala", "IMPALA", IMPALA_FIGURES,
         rl("impala", lambda b: b.impala_learner_steps), "--impala-learner-steps"),
    Case("start-up", "start-up alone", (
        Figure("command", "ES 1 generation, whole command", "s", False, whole_command),),
         es(lambda b: 1)),
    Case("impala-pong", "IMPALA on Pong", IMPALA_FIGURES,
         rl("impala", lambda b: b.impala_pong_learner_steps, env="ALE/Pong-v5"),
         "--impala-pong-learner-steps", default=False),
)}

#: how the figures are read, for the report
HOW = ("rates: the history's counters (env_steps, learner_steps) between two rows over the wall "
       "clock between them (each row stamped as the runner made it), from the first row (ES) or "
       "the first row after a learner update (Ape-X, IMPALA) to the last; ES's start-up: the "
       "interpreter's launch to the first row; start-up alone: launch to exit")

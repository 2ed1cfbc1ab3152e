"""Tables of EORL runs: many independent runs as tasks of the executor, gathered into a
DataFrame.

A table of Khadilkar 2023 is algorithms x environment versions x seeds, each run a few seconds
to a minute of one process's work (:func:`esnb.runners.eorl.tasks.run_one`). :func:`run_table`
submits one task per run (longest runs first so the last ones do not straggle; inline: one
after another), shows a progress bar as they complete, and returns one row per run in the
order of the specs (:func:`esnb.runners.sweep.map_runs`). :func:`summarise` averages the seeds:
the paper's "mean reward over the last 100 episodes".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from esnb.runners.eorl.columns import COLUMNS
from esnb.runners.eorl.tasks import LAST, RunSpec, env_columns, run_one
from esnb.runners.sweep import map_runs

__all__ = ["LAST", "RunSpec", "env_columns", "run_one", "run_table", "specs_grid", "summarise"]


def run_table(specs: Iterable[RunSpec], client=None, progress: bool = True,
              desc: str = "runs", on_result=None) -> pd.DataFrame:
    """Run every spec (as tasks on a cluster if there is a client) and gather one row per run.

    Parameters
    ----------
    specs : iterable of RunSpec
    client : distributed.Client, executor or False, optional
        Default: the current default client, else run inline in this process.
    progress : bool
        Show a tqdm bar over runs.
    desc : str
        Label of the bar.
    on_result : callable, optional
        ``on_result(index, row)`` as each run finishes (e.g. to save long tables as they go).

    Returns
    -------
    pandas.DataFrame
        One row per spec, in the order given (see :func:`run_one` for the columns).

    Raises
    ------
    RuntimeError
        If a run fails: names the run; the runs not yet finished are cancelled.
    """
    specs = list(specs)
    if not specs:
        raise ValueError("run_table needs at least one RunSpec")
    for s in specs:
        if not isinstance(s, RunSpec):
            raise ValueError(f"run_table takes RunSpec objects, got {type(s).__name__}")
    order = sorted(range(len(specs)), key=lambda k: -specs[k].cost())
    rows = map_runs(run_one, specs, client, desc=desc, progress=progress, order=order,
                    describe=RunSpec.describe, on_result=on_result)
    return pd.DataFrame(rows)


def summarise(table: pd.DataFrame, by: Sequence[str] | None = None,
              value: str = "last100") -> pd.DataFrame:
    """Mean of ``value`` over seeds: one row per environment version, one column per
    algorithm (in the paper's column order)."""
    if by is None:
        by = [c for c in ("n_bits", "subgoal", "size", "subgoals", "stochasticity", "episodes")
              if c in table.columns]
    wide = table.pivot_table(index=list(by), columns="algorithm", values=value, aggfunc="mean")
    cols = [a for a in COLUMNS if a in wide.columns]
    return wide[cols]


def specs_grid(algorithms: Sequence[str], env: str, variants: Sequence[dict],
               seeds: Sequence[int], **common) -> list[RunSpec]:
    """Every algorithm x variant x seed. A variant is a dict with ``env_kwargs`` and
    optionally ``episodes``/``eps_decay``; ``common`` sets the others."""
    out = []
    for variant in variants:
        v = dict(variant)
        env_kwargs = v.pop("env_kwargs")
        for algorithm in algorithms:
            for seed in seeds:
                out.append(RunSpec(algorithm, env, tuple(env_kwargs.items()), seed=int(seed),
                                   **{**common, **v}))
    return out

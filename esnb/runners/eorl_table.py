"""Tables of EORL runs: many independent runs as Dask futures, gathered into a DataFrame.

A table of Khadilkar 2023 is algorithms x environment versions x seeds, each run a few seconds
to a minute of one process's work. :func:`run_table` submits one future per run (``pure=False``,
longest runs first so the last ones do not straggle), shows a progress bar as they complete,
and returns one row per run in the order of the specs. Without a cluster it runs them one after
another in this process. :func:`summarise` averages the seeds: the paper's "mean reward over
the last 100 episodes".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from esnb.runners.eorl import ALGORITHMS, make_runner
from esnb.runners.executor import resolve_client

LAST = 100  # the paper's tables: mean reward over the last 100 training episodes


@dataclass(frozen=True)
class RunSpec:
    """One run of a table.

    Attributes
    ----------
    algorithm : str
        A table column name (:data:`esnb.runners.eorl.ALGORITHMS`).
    env : str
        ``"bitflip"`` or ``"gridnav"``.
    env_kwargs : tuple of (key, value)
        Environment arguments as sorted pairs (hashable).
    episodes : int
        Training episodes.
    seed : int
    eps_decay : float, optional
        Default: the paper's decay for this environment and length.
    options : tuple of (key, value)
        Other runner arguments (``minibatch``, ``n``, ...).
    """

    algorithm: str
    env: str
    env_kwargs: tuple = ()
    episodes: int = 400
    seed: int = 0
    eps_decay: float | None = None
    options: tuple = field(default=())

    def __post_init__(self):
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {self.algorithm!r}; valid: "
                             f"{', '.join(ALGORITHMS)} (CER is not implemented)")
        object.__setattr__(self, "env_kwargs", tuple(sorted(dict(self.env_kwargs).items())))
        object.__setattr__(self, "options", tuple(sorted(dict(self.options).items())))

    def cost(self) -> float:
        """A rough relative cost (episodes x population x grid size), for ordering."""
        kw = dict(self.env_kwargs)
        size = kw.get("size", kw.get("n_bits", 6))
        members = 8 if self.algorithm.startswith(("EORL", "CEM")) else 1.5
        return self.episodes * members * size

    def describe(self) -> str:
        kw = ", ".join(f"{k}={v}" for k, v in self.env_kwargs)
        return f"{self.algorithm} on {self.env}({kw}) seed {self.seed}"


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Run one table entry in this process; returns its summary and its returns.

    Returns
    -------
    dict
        The spec's fields (environment arguments as their own keys), ``last100`` (mean return
        of the last 100 episodes), ``goal100`` (share of them that reached the goal), ``final``
        (mean of 10 greedy evaluation episodes of the best member), ``returns`` (float32 array
        of every episode), ``env_steps``, ``seconds`` and ``operators`` (EORL only).
    """
    t0 = time.perf_counter()
    runner = make_runner(spec.algorithm, spec.env, dict(spec.env_kwargs), spec.episodes,
                         spec.seed, eps_decay=spec.eps_decay, **dict(spec.options),
                         name=f"table-{spec.algorithm}-{spec.seed}")
    runner.step(spec.episodes)
    records = runner.records
    returns = np.array([r["return"] for r in records], dtype=np.float64)
    reached = np.array([r["terminated"] for r in records], dtype=bool)
    final = runner.evaluate(10)
    out = {
        "algorithm": spec.algorithm,
        "env": spec.env,
        **env_columns(runner.learner.core),
        "episodes": spec.episodes,
        "seed": spec.seed,
        "eps_decay": runner.learner.eps_decay,
        "last100": float(returns[-LAST:].mean()),
        "goal100": float(reached[-LAST:].mean()),
        "final": float(final.mean()),
        "returns": returns.astype(np.float32),
        "env_steps": runner.learner.env_steps,
        "operators": int(records[-1].get("operators", 0)),
        "seconds": time.perf_counter() - t0,
    }
    return out


def env_columns(core) -> dict[str, Any]:
    """The version of an EORL environment, defaults included (one column each)."""
    if hasattr(core, "n_bits"):
        return {"n_bits": core.n_bits, "subgoal": core.subgoal}
    return {"size": core.size, "subgoals": core.subgoals, "stochasticity": core.stochasticity}


def run_table(specs: Iterable[RunSpec], client=None, progress: bool = True,
              desc: str = "runs", on_result=None) -> pd.DataFrame:
    """Run every spec (as Dask futures if there is a client) and gather one row per run.

    Parameters
    ----------
    specs : iterable of RunSpec
    client : distributed.Client, optional
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
    from tqdm import tqdm

    specs = list(specs)
    if not specs:
        raise ValueError("run_table needs at least one RunSpec")
    for s in specs:
        if not isinstance(s, RunSpec):
            raise ValueError(f"run_table takes RunSpec objects, got {type(s).__name__}")
    client = resolve_client(client)
    results: list[dict | None] = [None] * len(specs)
    bar = tqdm(total=len(specs), desc=desc, unit=" runs", disable=not progress,
               dynamic_ncols=True)
    try:
        if client is None:
            for k, spec in enumerate(specs):
                try:
                    results[k] = run_one(spec)
                except Exception as exc:
                    raise RuntimeError(f"run {spec.describe()} failed: {exc}") from exc
                if on_result is not None:
                    on_result(k, results[k])
                bar.update(1)
        else:
            _run_on_cluster(client, specs, results, bar, on_result)
    finally:
        bar.close()
    return pd.DataFrame(results)


def _run_on_cluster(client, specs: Sequence[RunSpec], results: list, bar, on_result) -> None:
    from distributed import as_completed

    token = uuid.uuid4().hex[:8]
    order = sorted(range(len(specs)), key=lambda k: -specs[k].cost())
    futures = {}
    for k in order:
        f = client.submit(run_one, specs[k], key=f"eorl-run-{token}-{k}", pure=False)
        futures[f] = k
    try:
        pending = as_completed(list(futures), loop=client.loop)
        while not pending.is_empty():
            # poll rather than block: a blocked wait would not see Ctrl-C until a run ends
            done = pending.next_batch(block=False)
            if not done:
                time.sleep(0.2)
            for f in done:
                k = futures[f]
                if f.status == "error":
                    exc = f.exception()
                    raise RuntimeError(f"run {specs[k].describe()} failed: {exc}") from exc
                results[k] = f.result()
                f.release()
                if on_result is not None:
                    on_result(k, results[k])
                bar.update(1)
    finally:
        left = [f for f in futures if f.status == "pending"]
        if left:
            client.cancel(left)


def summarise(table: pd.DataFrame, by: Sequence[str] | None = None,
              value: str = "last100") -> pd.DataFrame:
    """Mean of ``value`` over seeds: one row per environment version, one column per
    algorithm (in the paper's column order)."""
    if by is None:
        by = [c for c in ("n_bits", "subgoal", "size", "subgoals", "stochasticity", "episodes")
              if c in table.columns]
    wide = table.pivot_table(index=list(by), columns="algorithm", values=value, aggfunc="mean")
    cols = [a for a in ALGORITHMS if a in wide.columns]
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

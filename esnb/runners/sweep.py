"""Many independent runs at once: each run is one task of the executor (a whole run inline
inside its worker), with a progress bar; results come back in the order of the items.

Used by benchmarks and paper tables (:func:`esnb.runners.eorl.table.run_table`): seeds and
variants of an experiment run side by side on a cluster, one after another inline. Tables over
seeds report means with Student-t confidence intervals (:func:`mean_ci`, :func:`seed_table`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from esnb.runners.executor import make_executor

#: seconds between polls for finished runs (a blocked wait would not see Ctrl-C)
POLL = 0.2


def map_runs(fn: Callable[..., Any], items: Sequence[Any], client=None, desc: str = "runs",
             progress: bool = True, order: Sequence[int] | None = None,
             describe: Callable[[Any], str] | None = None,
             on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
    """``[fn(item) for item in items]``, each call one task of ``client``'s executor.

    Parameters
    ----------
    fn : callable
        A whole run of one item (picklable, for a cluster).
    items : sequence
    client : distributed.Client, executor or False, optional
        Where the runs go: None uses the default Dask client if there is one, else this
        process (one run after another).
    desc : str
        Label of the progress bar.
    progress : bool
        Show a tqdm bar over runs.
    order : sequence of int, optional
        The order to submit the items in (longest first, so the last ones do not straggle);
        default: as given.
    describe : callable, optional
        ``describe(item)`` names a failed run (default: its index and repr).
    on_result : callable, optional
        ``on_result(index, result)`` as each run finishes (e.g. to save long tables as they go).

    Returns
    -------
    list
        The results in the order of ``items``.

    Raises
    ------
    RuntimeError
        If a run fails: names the run; the runs not yet finished are cancelled.
    """
    items = list(items)
    executor = make_executor(client)
    tag = uuid.uuid4().hex[:8]
    results: list[Any] = [None] * len(items)
    index: dict[str, int] = {}
    completions = executor.as_completed()
    bar = tqdm(total=len(items), desc=desc, unit=" runs", disable=not progress,
               dynamic_ncols=True)

    def receive(futures) -> None:
        for future in futures:
            k = index.pop(future.key)
            try:
                results[k] = future.result()
            except Exception as exc:
                what = describe(items[k]) if describe else f"{k} ({items[k]!r})"
                raise RuntimeError(f"run {what} failed: {exc}") from exc
            future.release()
            if on_result is not None:
                on_result(k, results[k])
            bar.update(1)

    pending = []
    try:
        for k in (range(len(items)) if order is None else order):
            future = executor.submit(fn, items[k], key=f"esnb-run-{tag}-{k}")
            index[future.key] = k
            pending.append(future)
            completions.add(future)
            receive(completions.next_batch(block=False))  # inline: the run just done
        while index:
            done = completions.next_batch(block=False)
            if not done:
                time.sleep(POLL)
            receive(done)
    finally:
        bar.close()
        executor.cancel([f for f in pending if f.key in index])
    return results


#: how :func:`mean_ci` computes an interval: ``"t"`` (Student-t), ``"bootstrap"`` (percentile)
CI_METHODS = ("t", "bootstrap")
#: the interval's name as the results page and tables print it
CI_NAMES = {"t": "Student-t", "bootstrap": "percentile bootstrap"}


def mean_ci(values, rng: np.random.Generator | None = None, confidence: float = 0.95,
            n_resamples: int = 9999, method: str = "t") -> tuple[float, float, float]:
    """The mean of ``values`` and its confidence interval.

    Parameters
    ----------
    values : array-like of float
        One number per seed (NaNs are left out).
    rng : numpy.random.Generator, optional
        Draws the resamples of ``method="bootstrap"``; pass a seeded one (the interval is then
        reproducible). The t interval draws nothing.
    confidence : float
        Coverage of the interval (0.95: a 95% interval).
    n_resamples : int
    method : {"t", "bootstrap"}
        ``"t"``: ``mean ± t(1 - (1 - confidence)/2, n - 1) s / sqrt(n)``, whose coverage is the
        asked one for any number of seeds when the seeds' scores are about normal;
        ``"bootstrap"``: the percentile bootstrap, which needs many seeds (over 5 seeds a "95%"
        percentile interval covers about 83% of the time, and less when seeds split into solved
        and failed: ``tests/test_seed_tables.py`` measures it).

    Returns
    -------
    mean, low, high : float
        ``low``/``high`` are NaN with fewer than two values (one seed has no spread), and
        equal to the mean when every value is the same.
    """
    if method not in CI_METHODS:
        raise ValueError(f"method must be one of {CI_METHODS}, got {method!r}")
    x = np.asarray(values, dtype=np.float64)
    x = x[~np.isnan(x)]
    if x.size == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(x.mean())
    if x.size < 2:
        return mean, float("nan"), float("nan")
    if np.all(x == x[0]):
        return mean, mean, mean
    if method == "t":
        from scipy.stats import t

        half = float(t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1)
                     / np.sqrt(x.size))
        return mean, mean - half, mean + half
    from scipy.stats import bootstrap

    if rng is None:
        raise ValueError("method='bootstrap' draws resamples: pass a seeded rng")
    ci = bootstrap((x,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                   method="percentile", rng=rng).confidence_interval
    return mean, float(ci.low), float(ci.high)


def seed_table(frame: pd.DataFrame, by, columns, rng: np.random.Generator | None = None,
               confidence: float = 0.95, sort: bool = True) -> pd.DataFrame:
    """Means over seeds with Student-t confidence intervals, one row per group.

    Parameters
    ----------
    frame : pandas.DataFrame
        One row per run.
    by : str or list of str
        The columns that name a variant (the seed is what varies within a group).
    columns : list of str
        The numbers to summarise.
    rng : numpy.random.Generator, optional
        Seeded; the groups draw from it in order (a bootstrap's resamples; the t interval
        draws nothing).
    confidence : float
    sort : bool
        Groups in sorted order (default), or in the order they first appear in ``frame``
        (a paper's column order).

    Returns
    -------
    pandas.DataFrame
        ``by``, ``seeds`` and for each column ``<column>`` (the mean), ``<column>_lo`` and
        ``<column>_hi`` (the interval).
    """
    by = [by] if isinstance(by, str) else list(by)
    rows = []
    for key, group in frame.groupby(by, sort=sort):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key), seeds=len(group))
        for column in columns:
            mean, low, high = mean_ci(group[column], rng, confidence)
            row.update({column: mean, f"{column}_lo": low, f"{column}_hi": high})
        rows.append(row)
    return pd.DataFrame(rows)


def format_ci(mean: float, low: float, high: float, digits: int = 1) -> str:
    """``mean [low, high]`` for a printed table, e.g. ``"412.0 [380.2, 441.3]"``.

    An interval of NaNs (one seed, see :func:`mean_ci`) is shown as ``"412.0 [1 seed]"``,
    a NaN mean as ``"n/a"``.
    """
    if mean is None or not np.isfinite(mean):
        return "n/a"
    if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
        return f"{mean:.{digits}f} [1 seed]"
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def ci_column(table: pd.DataFrame, column: str, digits: int = 1) -> pd.Series:
    """A :func:`seed_table` column as text, :func:`format_ci` per row (for printing)."""
    return pd.Series([format_ci(m, lo, hi, digits) for m, lo, hi in
                      zip(table[column], table[f"{column}_lo"], table[f"{column}_hi"])],
                     index=table.index, name=column)

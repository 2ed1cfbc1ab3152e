"""Many independent runs at once: each run is one task of the executor (a whole run inline
inside its worker), with a progress bar; results come back in the order of the items.

Used by benchmarks and paper tables (:func:`esnb.runners.eorl.table.run_table`): seeds and
variants of an experiment run side by side on a cluster, one after another inline.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

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

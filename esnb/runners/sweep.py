"""Many independent runs at once: each run is one Dask task (inline inside its worker).

Used by benchmarks and paper tables: seeds and variants of an experiment run side by side as
futures, with a progress bar, and come back in submission order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from distributed import as_completed
from tqdm import tqdm


def map_runs(fn: Callable[..., Any], items: Sequence[Any], client=None, desc: str = "runs",
             progress: bool = True) -> list[Any]:
    """``[fn(item) for item in items]``, as futures on ``client`` (inline without one).

    A failed run raises here, with the item it belongs to in the message.
    """
    if client is None:
        out = []
        for item in tqdm(items, desc=desc, disable=not progress):
            out.append(fn(item))
        return out
    futures = [client.submit(fn, item, pure=False) for item in items]
    index = {f.key: i for i, f in enumerate(futures)}
    results: list[Any] = [None] * len(items)
    bar = tqdm(total=len(items), desc=desc, disable=not progress)
    try:
        for fut in as_completed(futures):
            i = index[fut.key]
            try:
                results[i] = fut.result()
            except Exception as exc:
                raise RuntimeError(f"run {i} ({items[i]!r}) failed: {exc}") from exc
            bar.update(1)
    finally:
        bar.close()
        for f in futures:
            f.release()
    return results

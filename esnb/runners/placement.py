"""Where a torch learner goes on a cluster: a worker that declares the ``GPU`` resource when
its device asks for one and such a worker exists, else where it ran before.

A worker says it has a GPU by declaring :data:`esnb.cluster.GPU_RESOURCE` (``GPU``):
``make_client(gpu_workers=N)`` on a LocalCluster, ``--resources GPU=1`` on a batch job.
Dask knows labels, not hardware: the label is trusted, and the learner resolves its own device
where it is built (``auto`` becomes CUDA there when that worker's torch sees a GPU).
Today only the AES-RL/CEM-RL critic runs as a Dask actor; Ape-X's, IMPALA's and EORL's
learners run in the run's own process, whose device the ``device`` setting chooses directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def learner_resources(workers: Mapping[str, Mapping[str, Any]], device: str,
                      requested: Any = "auto") -> dict | None:
    """The ``resources=`` a learner actor asks the scheduler for.

    Parameters
    ----------
    workers : mapping
        ``executor.workers()``: ``{address: {"resources": {...}, ...}}``.
    device : str
        The learner's ``device`` setting. ``cpu`` never asks for a GPU worker; ``auto``,
        ``cuda`` and ``cuda:N`` do when one exists (``auto``: the GPU worker resolves it).
    requested : "auto", dict or None
        ``auto``: as above; a dict: exactly these resources (a setting's explicit placement,
        e.g. ``{"GPU": 1}`` with ``device="cpu"`` on a machine without one); None: never.

    Returns
    -------
    dict or None
        ``{"GPU": 1}`` (or ``requested``), or None: place it as before.
    """
    if requested is None:
        return None
    if requested != "auto":
        return dict(requested)
    if device == "cpu":
        return None
    from esnb.cluster.plugins import GPU_RESOURCE

    if any((w.get("resources") or {}).get(GPU_RESOURCE, 0) > 0 for w in workers.values()):
        return {GPU_RESOURCE: 1}
    return None

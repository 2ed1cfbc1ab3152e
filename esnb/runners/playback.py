"""A finished (or running) run's policy outside its run: ``esnb play`` and ``esnb export``.

A run is named by its folder (``runs/<name>``, holding ``checkpoint.npz``) or a checkpoint
file. :func:`load_run` rebuilds its runner in this process from the checkpoint (the algorithm
is read from the file); :func:`play` evaluates it as the run's final evaluation did: the run
folder's checkpoint is written before that evaluation (:func:`esnb.session.finish.finish`), so
its evaluation generator draws the same episode seeds, and ``play`` with the final
evaluation's episode count gives the same returns. :func:`export` writes its policy
(:mod:`esnb.nets.export`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from esnb.record import checkpoint_of, load_checkpoint


def runner_class(algorithm: str) -> type:
    """The runner class whose checkpoints say ``algorithm`` (``"ES"``, ``"CEMRL"``, ``"VAN"``).

    Each registered algorithm's runner, and the runners its module lists in ``RUNNERS`` (the
    EORL family's baselines share one ``esnb train`` entry). The configs name their runner's
    algorithm and import without torch, so only the runner asked for is imported (an ES run
    plays back without torch); a family member is looked for among every runner's
    ``RUNNERS``."""
    import importlib

    from esnb.runners.registry import algorithms

    registered = list(algorithms().values())
    for algo in registered:
        if getattr(algo.load_config(), "algorithm", None) == algorithm:
            cls = algo.load_runner()
            if cls.algorithm == algorithm:
                return cls
    known = {}
    for algo in registered:
        cls = algo.load_runner()
        family = getattr(importlib.import_module(cls.__module__), "RUNNERS", {})
        for c in (cls, *family.values()):
            known[c.algorithm] = c
    if algorithm not in known:
        raise ValueError(f"no esnb runner writes {algorithm!r} checkpoints; known: "
                         f"{', '.join(sorted(known))}")
    return known[algorithm]


def checkpoint_algorithm(path) -> str:
    """The algorithm a checkpoint holds, once the whole file is checked (format, digest)."""
    load_checkpoint(path)
    with np.load(path, allow_pickle=False) as z:
        return str(json.loads(z["__meta__"].tobytes().decode())["algorithm"])


def load_run(run, client=False):
    """The runner of a run folder or checkpoint file, rebuilt in this process (``client=False``)
    or on ``client``.

    Raises
    ------
    FileNotFoundError
        When there is no checkpoint there.
    CheckpointError
        For a damaged file or one that is not esnb's.
    """
    path = checkpoint_of(str(run))
    return runner_class(checkpoint_algorithm(path)).load(path, client=client)


def final_evaluation(run) -> dict[str, Any] | None:
    """The final evaluation a run folder's ``summary.json`` records (None: none there)."""
    folder = Path(run)
    summary = (folder if folder.is_dir() else folder.parent) / "summary.json"
    try:
        doc = json.loads(summary.read_text())
    except (OSError, ValueError):
        return None
    if doc.get("final_eval_mean") is None:
        return None
    return {"mean": doc["final_eval_mean"], "std": doc["final_eval_std"],
            "episodes": doc["final_eval_episodes"]}


def play(runner, episodes: int = 10) -> dict[str, Any]:
    """``episodes`` noise-free episodes of ``runner``'s policy (its own ``evaluate``, with the
    episode seeds its evaluation generator draws): returns, mean, standard deviation."""
    if int(episodes) != episodes or episodes < 1:
        raise ValueError(f"--episodes must be an integer >= 1, got {episodes!r}")
    returns = np.asarray(runner.evaluate(int(episodes)), dtype=np.float64)
    return {"returns": returns, "mean": float(returns.mean()), "std": float(returns.std()),
            "episodes": int(returns.size)}


def export(runner, fmt: str, out) -> Path:
    """Write ``runner``'s policy to ``out`` as ``fmt`` (``"onnx"`` or ``"torchscript"``)."""
    from esnb.nets.acting import ActingPolicy
    from esnb.nets.export import write

    policy = runner.acting_policy()
    if not isinstance(policy, ActingPolicy):  # a conv network's policy plays, not exported
        raise ValueError(policy.not_exported)
    return write(policy, out, fmt)

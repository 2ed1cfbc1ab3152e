"""What a run is checked for before anything starts: its name and folder, its cluster, its
environment, its record of control changes, its budget. Each check raises one
``ValueError`` line, and nothing has started when it does."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: a run name: letters, digits, ``._-``, not starting with a dot (it names a folder of runs/)
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def check_name(name: str) -> str:
    """``name`` if it can name a run folder, else one line."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"--name must be a plain name (letters, digits, '._-', no path), "
                         f"got {name!r}")
    return name


def check_free(folder: Path) -> Path:
    """``folder`` unless a live run holds it (two runs would write one folder): its lock
    decides (:mod:`esnb.session.folder`), not what a file in it says."""
    from esnb.session.folder import in_use, lock_holder

    pid = lock_holder(folder)
    if pid is not None:
        raise ValueError(in_use(folder, pid))
    return folder


def check_schedule(cls: type, config, controls: str | None) -> None:
    """``--controls``: the whole record of control changes, read against the run's controls
    before any cluster starts."""
    from esnb.runners.schedule import ControlSchedule

    if controls:
        try:
            ControlSchedule(controls, config.controls(), cls.iteration_column)
        except ValueError as exc:  # its lines start with the file: named with the flag
            raise ValueError(f"--controls {exc}") from None


def check_cluster(workers: int, address: str | None, serve: bool) -> None:
    """``--workers``, ``--address``, ``--serve`` and the cluster dask config chooses
    (``esnb.cluster.type``) before anything starts."""
    from esnb import config

    if workers < 0:
        raise ValueError(f"--workers must be >= 0 (0: this process), got {workers}")
    kind = str(config.get("cluster.type", "local")).lower()
    if serve:
        from esnb.remote.serve import check_servable

        check_servable(address, kind, workers)
    if address:
        from esnb.cluster import check_address

        check_address(address, "--address")
    elif kind == "local":
        config.check_local_workers(workers, "--workers")
    elif kind != "address" and workers > 0:
        import importlib.util

        if importlib.util.find_spec("dask_jobqueue") is None:
            raise ValueError(f"esnb.cluster.type {kind!r} needs dask-jobqueue: "
                             f"pip install 'esnb[jobqueue]'")


def check_env(config) -> None:
    """The run's environment exists and takes its keyword arguments: one step of it here,
    before any cluster starts (a wrong value fails there, not deep inside a worker). A pixel
    env (Atari, MinAtar) is refused unless the algorithm's network takes frames (Ape-X DQN,
    IMPALA), and then so are a ``torso`` that does not fit the observations and an env without
    a time limit of its own (MinAtar) without ``max_episode_steps``."""
    from esnb.envs.make import check_env_works, check_time_limit, env_spaces
    from esnb.envs.pixels import check_vector_obs
    from esnb.nets.conv import choose_torso

    if not getattr(type(config), "takes_frames", False):
        check_vector_obs(config.env, type(config).algorithm)
    if config.declarations()["env"][0].choices:  # esnb's own envs, made by their runner
        return
    kwargs = getattr(config, "env_kwargs", None) or {}
    cap = getattr(config, "max_episode_steps", None)
    if "torso" not in config.declarations():
        check_env_works(config.env, kwargs, cap)
        return
    # the network follows the observations: the env's spaces (made and stepped once) decide
    obs_space, _, limit = env_spaces(config.env, **kwargs)
    check_time_limit(config.env, limit, cap)
    choose_torso(config.torso, config.env, obs_space, type(config).algorithm.lower())


def check_budget(budget: Mapping[str, Any], flags: Mapping[str, str]) -> dict[str, float]:
    """The budget's totals, each a finite number >= 0 (named by its flag, ``flags``: counter
    -> flag), as ``esnb train``'s budget flags read them."""
    out = {}
    for key, value in budget.items():
        flag = "--" + flags.get(key, key.replace("_", "-"))
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(value, bool) or not math.isfinite(number) or number < 0:
            raise ValueError(f"{flag} must be a finite number >= 0, got {value!r}")
        out[key] = number
    return out


def remaining(progress: Mapping[str, float], given: Mapping[str, float],
              default: Mapping[str, float], saved: Mapping[str, float]) -> dict[str, float]:
    """The budget still to run from ``progress`` (a runner's counters): the given totals,
    else the saved run's, else the default."""
    totals = given or saved or default
    return {key: max(0.0, float(total) - float(progress.get(key, 0)))
            for key, total in totals.items()}

"""esnb's namespace in dask's configuration, with defaults shipped in ``esnb.yaml``.

Values come from ``esnb.yaml``, ``~/.config/dask/*.yaml`` or ``DASK_ESNB__...`` environment
variables; :func:`get` checks each against :data:`SCHEMA` when it is read, so a bad value is
refused with its key (``esnb.cluster.n-workers must be an integer >= 1 or null, got 'four'``)
instead of failing somewhere inside dask.
"""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Callable
from typing import Any

import dask.config
import yaml

_fn = os.path.join(os.path.dirname(__file__), "esnb.yaml")
with open(_fn) as f:
    _defaults = yaml.safe_load(f)

dask.config.update_defaults(_defaults)

#: values of ``esnb.cluster.type``
CLUSTER_TYPES = ("local", "address", "slurm", "pbs", "sge", "lsf")

#: ``host:port`` or ``:port`` (IPv6 hosts in brackets), a port in [0, 65535]
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]*):(\d{1,5})")


def _integer(low: int, nullable: bool = False) -> tuple[Callable[[Any], bool], str]:
    def ok(v):
        return (v is None and nullable) or (isinstance(v, numbers.Integral)
                                            and not isinstance(v, bool) and v >= low)
    return ok, f"an integer >= {low}" + (" or null" if nullable else "")


def host_port(text: Any) -> bool:
    """Whether ``text`` is ``host:port`` or ``:port`` with a port in [0, 65535]."""
    match = _HOST_PORT.fullmatch(text) if isinstance(text, str) else None
    return bool(match) and int(match.group(2)) <= 65535


def _text(nullable: bool = False) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: (v is None and nullable) or isinstance(v, str)), \
        "a string" + (" or null" if nullable else "")


def _one_of(*choices) -> tuple[Callable[[Any], bool], str]:
    # by type too: 1 == True, but 1 is not a valid "true or false or 'auto'"
    return (lambda v: any(type(v) is type(c) and v == c for c in choices)), \
        "one of " + ", ".join(map(repr, choices))


def _boolean() -> tuple[Callable[[Any], bool], str]:
    return (lambda v: isinstance(v, bool)), "true or false"


#: what each key of esnb's dask config accepts (keys with their own parser -- the worker
#: lifetime, TLS -- check themselves and name their key)
SCHEMA: dict[str, tuple[Callable[[Any], bool], str]] = {
    "cluster.type": ((lambda v: isinstance(v, str) and v.lower() in CLUSTER_TYPES),
                     "one of " + ", ".join(CLUSTER_TYPES)),
    "cluster.address": _text(nullable=True),
    "cluster.n-workers": _integer(1, nullable=True),
    "cluster.threads-per-worker": _integer(1),
    "cluster.processes": _boolean(),
    "cluster.host": _text(),
    "cluster.dashboard-address": ((lambda v: v is None or host_port(v)),
                                  "'host:port' or ':port' (a port in [0, 65535]) or null"),
    "cluster.max-local-workers": _integer(1, nullable=True),
    "cluster.worker-profile": _boolean(),
    "cluster.quiet": _boolean(),
    "cluster.kwargs": ((lambda v: isinstance(v, dict)), "a mapping of keyword arguments"),
    "cluster.adapt.minimum": _integer(0, nullable=True),
    "cluster.adapt.maximum": _integer(1, nullable=True),
    "cluster.actor-worker": _one_of(True, False, "auto"),
    "cluster.actor-walltime": ((lambda v: v is None or isinstance(v, (str, int))),
                               "a walltime (string or minutes) or null"),
    "cluster.message-log-length": _integer(0, nullable=True),
    "cluster.actor-worker-wait": ((lambda v: type(v) in (int, float) and 0 < v < float("inf")),
                                  "a number of seconds > 0"),
    "serve.dashboard": _boolean(),
    "mujoco.timer": _boolean(),
    "noise.size": _integer(1),
    "noise.seed": _integer(0),
    "noise.cache": ((lambda v: v is False or (isinstance(v, str) and v != "")),
                    "'auto', a directory or false"),
}


def get(key: str, default=None):
    """``dask.config.get("esnb." + key)``, checked against :data:`SCHEMA`."""
    value = dask.config.get(f"esnb.{key}", default=default)
    rule = SCHEMA.get(key)
    if rule is not None and not (value is None and default is None) and not rule[0](value):
        raise ValueError(f"esnb.{key} (dask config: esnb.yaml, ~/.config/dask/ or "
                         f"DASK_ESNB__...) must be {rule[1]}, got {value!r}")
    return value


#: keys whose values are free-form mappings (not descended into when looking for unknown keys)
_MAPPINGS = ("cluster.kwargs", "cluster.security")


def _keys(tree: Any, prefix: str = "") -> list[str]:
    if not isinstance(tree, dict) or prefix.rstrip(".") in _MAPPINGS:
        return [prefix.rstrip(".")]
    return [k for name, sub in tree.items()
            for k in _keys(sub, f"{prefix}{str(name).replace('_', '-')}.")]


def check() -> None:
    """Read every key of :data:`SCHEMA` once, and refuse keys esnb does not have: a bad value
    or a typo anywhere is one error now, before a command starts anything (not when a run
    first reads it, or never)."""
    import difflib

    known = set(_keys(_defaults["esnb"]))
    unknown = [k for k in _keys(dask.config.get("esnb", default={})) if k not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        raise ValueError(f"esnb.{unknown[0]} (dask config: esnb.yaml, ~/.config/dask/ or "
                         f"DASK_ESNB__...) is no setting of esnb"
                         + (f"; did you mean esnb.{close[0]}?" if close else ""))
    for key in SCHEMA:
        get(key)


def max_local_workers() -> int:
    """The most worker processes a LocalCluster may have here: ``esnb.cluster.max-local-workers``,
    else 16 per core and at least 32 (each process holds 60-400 MB; past that a typo such as
    ``--workers 10000`` would start thousands of processes)."""
    limit = get("cluster.max-local-workers")
    return int(limit) if limit is not None else max(32, 16 * (os.cpu_count() or 1))


def check_local_workers(n: int, what: str = "n_workers") -> int:
    """``n`` if a LocalCluster of ``n`` processes is allowed here, else one clear error."""
    limit = max_local_workers()
    if n > limit:
        raise ValueError(f"{what} {n}: a LocalCluster of {n} worker processes on this machine's "
                         f"{os.cpu_count()} cores is refused (at most {limit}: dask config "
                         f"esnb.cluster.max-local-workers); for a larger cluster start one and "
                         f"pass its scheduler's address")
    return n

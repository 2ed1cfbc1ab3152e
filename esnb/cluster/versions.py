"""The packages every host of a run must share, checked on each worker as it joins.

A run's workers may be other machines (a cloud or Kubernetes Dask cluster, batch jobs on other
nodes) with their own Python environments. The same esnb and numpy make ES's noise table and
its generators' draws the same bits everywhere (the table is checked by its digest too:
:class:`esnb.noise.NoiseTableMismatch`); the same gymnasium and MuJoCo make the same episodes;
the same torch runs a pixel actor's network as the learner does. A worker whose versions
differ from the driver's refuses the run in one line that names the package, both versions and
both hosts, instead of a run that silently mixes physics or draws: the workers present when a
run starts are asked then (:func:`check_workers`, the run stops with that line); one that joins
later (:class:`VersionsPlugin`) says it in its log and leaves the cluster before it takes a
task. (Dask checks its own packages itself and only warns.)

Versions are read with :mod:`importlib.metadata`, so no package is imported to ask (an ES
worker imports no torch).
"""

from __future__ import annotations

import logging
import platform
from importlib import metadata

from distributed import WorkerPlugin

log = logging.getLogger("esnb.cluster")

#: what every host must share with the driver
PACKAGES = ("esnb", "numpy", "gymnasium", "mujoco", "torch")


class VersionMismatch(ValueError):
    """A worker's packages differ from the driver's."""


def host_versions() -> dict[str, str | None]:
    """``{package: version or None}`` of :data:`PACKAGES` in this Python, and ``host``."""
    out: dict[str, str | None] = {"host": platform.node()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def check_versions(driver: dict[str, str | None]) -> None:
    """On a worker: raise :class:`VersionMismatch` if this host's packages differ from the
    ``driver``'s (:func:`host_versions` there). A package the driver lacks is not checked."""
    mine = host_versions()
    for name in PACKAGES:
        if driver.get(name) is not None and mine.get(name) != driver[name]:
            raise VersionMismatch(
                f"host {mine['host']} has {name} {mine.get(name) or 'missing'}, the driver on "
                f"{driver['host']} has {name} {driver[name]}: every host of a run needs the "
                f"same {', '.join(PACKAGES)} (install the driver's versions there)")


def check_workers(client, driver: dict[str, str | None]) -> None:
    """Raise :class:`VersionMismatch` (one line, the first worker that differs) if a present
    worker's packages differ from ``driver``'s."""
    for address, theirs in sorted(client.run(host_versions).items()):
        for name in PACKAGES:
            if driver.get(name) is not None and theirs.get(name) != driver[name]:
                raise VersionMismatch(
                    f"worker {address} on host {theirs.get('host')} has {name} "
                    f"{theirs.get(name) or 'missing'}, the driver on {driver['host']} has "
                    f"{name} {driver[name]}: every host of a run needs the same "
                    f"{', '.join(PACKAGES)} (install the driver's versions there)")


class VersionsPlugin(WorkerPlugin):
    """On every worker that joins: the driver's versions, or the worker leaves (with its
    nanny, which would otherwise start it again) and its log says why in one line."""

    idempotent = True

    def __init__(self, driver: dict[str, str | None]):
        self.driver = dict(driver)
        self.name = "esnb-versions-" + "-".join(str(self.driver.get(n)) for n in PACKAGES)

    def setup(self, worker):
        try:
            check_versions(self.driver)
        except VersionMismatch as exc:
            log.error("worker %s leaves the cluster: %s", worker.address, exc)
            worker.loop.add_callback(worker.close, nanny=True, reason="esnb-versions")

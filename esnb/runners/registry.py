"""The algorithms esnb trains, each declared once, beside its runner.

Every algorithm package (``esnb/runners/<algo>/__init__.py``) lists its :class:`Algorithm`
entries in ``ALGORITHMS``: the runner and config classes (as ``"module:Class"``, so that
listing them imports no torch), the budgets ``esnb train`` offers (whose keys are the runner's
``_progress()`` counters), the default budget and a one-paragraph description. ``esnb train``,
``esnb docs settings``, the names ``esnb`` exports and the tests iterate :func:`algorithms`;
adding an algorithm touches its own folder (and its maths folder), nothing here.

>>> sorted(algorithms())[:3]
['aesrl', 'apex', 'apex-dpg']
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class Budget(NamedTuple):
    """A budget flag of ``esnb train``: the runner's counter it limits, and its help."""

    key: str
    help: str


@dataclass(frozen=True)
class Algorithm:
    """One trainable algorithm.

    Attributes
    ----------
    name : str
        ``esnb train <name>``.
    runner, config : str
        ``"module:Class"`` of the runner and of its settings dataclass.
    budgets : mapping
        ``{flag: Budget(counter, help)}``, e.g. ``{"steps": Budget("env_steps", "env steps to
        run")}``; every counter is a key of the runner's ``_progress()`` (a test checks).
    default_budget : mapping
        ``{counter: amount}`` when no budget flag is given.
    description : str
        What ``esnb train --help`` says of it (its first sentence is the one-line help).
    flags : str, optional
        ``"module:Class"`` of a settings dataclass of command-line flags that are no setting of
        the runner (EORL's environment versions), turned into settings by ``adapt``.
    adapt : str, optional
        ``"module:function"`` taking ``(args, settings)`` and returning ``(runner class,
        settings)``.
    skip : tuple of str
        Settings offered through other flags (``adapt`` turns them into settings).
    """

    name: str
    runner: str
    config: str
    budgets: Mapping[str, Budget]
    default_budget: Mapping[str, float]
    description: str
    flags: str | None = None
    adapt: str | None = None
    skip: tuple[str, ...] = field(default=())

    def load_runner(self) -> type:
        return load(self.runner)

    def load_config(self) -> type:
        return load(self.config)

    @property
    def exports(self) -> dict[str, str]:
        """The names ``esnb`` exports for it: its runner and config classes, by module."""
        return {path.partition(":")[2]: path.partition(":")[0]
                for path in (self.runner, self.config)}


def load(path: str) -> Any:
    """``"module:name"`` -> the object."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@functools.cache
def algorithms() -> dict[str, Algorithm]:
    """Every algorithm declared by a package of :mod:`esnb.runners`, by name (sorted)."""
    import esnb.runners as runners

    found: dict[str, Algorithm] = {}
    for info in pkgutil.iter_modules(runners.__path__):
        # an algorithm's package has its settings module (the executor's package has none,
        # and importing it here would load far more than the registry needs)
        folder = os.path.join(getattr(info.module_finder, "path", ""), info.name)
        if not info.ispkg or not os.path.exists(os.path.join(folder, "config.py")):
            continue
        package = importlib.import_module(f"esnb.runners.{info.name}")
        for algo in getattr(package, "ALGORITHMS", ()):
            if algo.name in found:
                raise RuntimeError(f"two algorithms named {algo.name!r}")
            found[algo.name] = algo
    return dict(sorted(found.items()))

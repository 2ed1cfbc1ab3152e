"""``esnb train <algorithm>``: flags derived from the algorithm's config dataclass.

A :class:`Trainer` names the runner and its config by module path (so ``esnb --help`` imports
no torch), the budgets the command offers and the default one. Every setting of the config is
a flag with its default, choices and help (:func:`esnb.settings.add_arguments`); only the flags
given on the command line override the chosen preset.
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass, field
from typing import Any

from esnb import settings as settings_mod


def load(path: str) -> Any:
    """``"module:name"`` -> the object."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Trainer:
    """How ``esnb train <name>`` builds and runs one algorithm.

    Attributes
    ----------
    runner, config : str
        ``"module:Class"`` of the runner and of its settings dataclass.
    budgets : dict
        ``{flag: (budget key, help)}``: ``{"steps": ("env_steps", "env steps to run")}``.
    default_budget : dict
        The budget when no budget flag is given.
    description : str
        The subcommand's description (its first sentence is the one-line help).
    adapt : str, optional
        ``"module:function"`` taking ``(args, settings)`` and returning ``(runner class,
        settings)``: extra flags of one algorithm (EORL's environment arguments).
    skip : tuple of str
        Settings offered through other flags (``adapt`` turns them into settings).
    """

    runner: str
    config: str
    budgets: dict[str, tuple[str, str]]
    default_budget: dict[str, float]
    description: str
    adapt: str | None = None
    skip: tuple[str, ...] = ()
    extra: dict[str, dict] = field(default_factory=dict)

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        budget = p.add_argument_group(
            "budget", "the run's totals; the first one reached ends it (default: "
            + ", ".join(f"{v:g} {k.replace('_', ' ')}" for k, v in self.default_budget.items())
            + ")")
        for flag, (key, text) in self.budgets.items():
            default = (f"{self.default_budget[key]:g} if no budget flag is given"
                       if key in self.default_budget else "no limit")
            budget.add_argument("--" + flag, dest=f"budget_{key}", type=settings_mod.number(0),
                                default=None, metavar="N", help=f"{text} (default: {default})")
        for flag, kw in self.extra.items():
            p.add_argument("--" + flag, **kw)
        settings_mod.add_arguments(p, load(self.config), skip=self.skip)

    def budget_given(self, args: argparse.Namespace) -> dict[str, float]:
        """The budget flags given: the run's totals (empty: the default, or a resumed run's)."""
        return {key: getattr(args, f"budget_{key}") for key, _ in self.budgets.values()
                if getattr(args, f"budget_{key}", None) is not None}

    def settings(self, args: argparse.Namespace) -> tuple[type, dict[str, Any]]:
        """The runner class and the settings given on the command line."""
        values = settings_mod.given(args, load(self.config))
        runner = load(self.runner)
        if self.adapt:
            runner, values = load(self.adapt)(args, values)
        return runner, values

"""``esnb train <algorithm>``: flags derived from the algorithm's registry entry and config.

Each :class:`~esnb.runners.registry.Algorithm` (declared in its package, found by
:func:`~esnb.runners.registry.algorithms`) names the runner and config by module path (so
``esnb --help`` imports no torch), the budgets the command offers and the default one. Every
setting of the config is a flag with its default, choices and help
(:func:`esnb.settings.add_arguments`); only the flags given on the command line override the
chosen preset.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from esnb import settings as settings_mod
from esnb.runners.registry import Algorithm, load


def add_arguments(algo: Algorithm, p: argparse.ArgumentParser) -> None:
    """The budget flags, the algorithm's own flags and one flag per setting."""
    budget = p.add_argument_group(
        "budget", "the run's totals; the first one reached ends it (default: "
        + ", ".join(f"{v:g} {k.replace('_', ' ')}" for k, v in algo.default_budget.items())
        + ")")
    for flag, (key, text) in algo.budgets.items():
        default = (f"{algo.default_budget[key]:g} if no budget flag is given"
                   if key in algo.default_budget else "no limit")
        budget.add_argument("--" + flag, dest=f"budget_{key}", type=settings_mod.number(0),
                            default=None, metavar="N", help=f"{text} (default: {default})")
    if algo.flags:
        settings_mod.add_arguments(p, load(algo.flags))
    settings_mod.add_arguments(p, algo.load_config(), skip=algo.skip)


def budget_given(algo: Algorithm, args: argparse.Namespace) -> dict[str, float]:
    """The budget flags given: the run's totals (empty: the default, or a resumed run's)."""
    return {key: getattr(args, f"budget_{key}") for key, _ in algo.budgets.values()
            if getattr(args, f"budget_{key}", None) is not None}


def json_settings(text: str | None) -> dict[str, Any]:
    """``--settings``: one JSON object of settings (checked by the config with the rest)."""
    if not text:
        return {}
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--settings must be a JSON object of settings: {exc}") from None
    if not isinstance(values, dict):
        raise ValueError(f"--settings must be a JSON object of settings, got {text!r}")
    return values


def settings_and_flags(algo: Algorithm, args: argparse.Namespace) -> tuple[dict, dict]:
    """The settings given on the command line (``--settings``: a JSON object of settings,
    under the flags given) and the algorithm's own command flags given (EORL's)."""
    values = {**json_settings(getattr(args, "settings", None)),
              **settings_mod.given(args, algo.load_config())}
    flags = settings_mod.given(args, load(algo.flags)) if algo.flags else {}
    return values, flags

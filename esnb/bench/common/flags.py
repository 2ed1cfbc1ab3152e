"""A benchmark's flags that are settings of an algorithm come from the algorithm's config
(:func:`esnb.settings.add_arguments`): their defaults, bounds and help are written once, there.

A benchmark that deliberately runs with a value of its own (a MuJoCo env, a smaller population)
passes it to :func:`add_settings`: the flag defaults to it and its help shows it beside the
config's default. Every other setting flag is "not given" unless typed, so the config's default
applies; :func:`given_settings` collects what the runner is built with
(``Config.build(**given_settings(args, Config, FLAGS), **fixed)``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from esnb.settings import Settings, add_arguments, given, help_text, show


def add_settings(parser: argparse.ArgumentParser, cls: type[Settings], names: Iterable[str],
                 **bench: Any) -> None:
    """Flags for the settings ``names`` of ``cls``; ``bench``: the benchmark's own values of
    some of them (each flag's default, shown in its help with the config's)."""
    names = tuple(names)
    extra = set(bench) - set(names)
    if extra:
        raise ValueError(f"benchmark values {sorted(extra)} are not among the flags {names}")
    first = len(parser._actions)
    add_arguments(parser, cls, only=names)
    declared = cls.declarations()
    for action in parser._actions[first:]:
        if action.dest not in bench:
            continue
        meta, default = declared[action.dest]
        value = bench[action.dest]
        action.default = value
        note = f"{cls.display_name()}'s default: {show(default)}" if value != default else None
        action.help = help_text(action.dest, meta, value, note)


def given_settings(args: argparse.Namespace, cls: type[Settings],
                   names: Iterable[str]) -> dict[str, Any]:
    """The settings ``names`` of ``cls`` in ``args``: typed on the command line, or the
    benchmark's own values (other attributes of ``args`` that share a setting's name -- a
    benchmark's ``--hidden`` list of widths -- are left out)."""
    names = set(names)
    return {name: value for name, value in given(args, cls).items() if name in names}


def chosen(**values: Any) -> dict[str, Any]:
    """``values`` without the None ones: a benchmark function's setting left at None takes the
    config's default (for settings that are not nullable)."""
    return {name: value for name, value in values.items() if value is not None}


def add_json(parser: argparse.ArgumentParser, what: str = "figures") -> None:
    """``--json FILE``: also write the benchmark's ``what`` to a file."""
    parser.add_argument("--json", default=None,
                        help=f"also write the {what} to this file (default: not written)")

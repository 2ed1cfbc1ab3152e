"""Command-line flags from a config dataclass: one flag per setting with its default, the
paper's value, choices and help; only flags given on the command line override a preset.

Flags that are no setting (budgets, benchmarks' sizes, worker counts) take their values through
:func:`integer` and :func:`number`, so that ``-1``, ``nan`` or ``inf`` get the same one-line
answer a setting's flag gets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from esnb.settings.declare import Setting, Settings, allowed, show

_MISSING = object()


@dataclass(frozen=True)
class Flag:
    """How a setting's flag reads where its kind alone does not say: a run's options
    (:class:`esnb.session.options.RunOptions`), kept in the field's metadata (``"flag"``).

    A setting with a :class:`Flag` is checked as its flag is read (``argument --workers: must
    be an integer >= 0``), where an algorithm's setting is checked with the others, by name.

    Attributes
    ----------
    metavar : str
        The value's name in ``--help`` (``SECONDS``, ``RUN``).
    default : str
        The default in words, in the help's bracket (``runs/<name>``): for a default of None.
    const : Any
        The value of the flag given bare (``--tensorboard`` without DIR: ``""``).
    choices : tuple
        The values the command line offers, where the setting takes more (``--preset``).
    """

    metavar: str = ""
    default: str = ""
    const: Any = _MISSING
    choices: tuple = ()


def flagged(field: Any, flag: Flag) -> Any:
    """``field`` (a :func:`~esnb.settings.setting`) with ``flag`` beside its declaration."""
    default = {"default": field.default} if field.default is not dataclasses.MISSING \
        else {"default_factory": field.default_factory}
    return dataclasses.field(**default, metadata={**field.metadata, "flag": flag})


def _bounds(low: float | None, high: float | None, low_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"<= {high:g}")
    return " and ".join(parts)


def integer(low: int | None = 1, high: int | None = None) -> Callable[[str], int]:
    """argparse ``type=`` for a whole number in ``[low, high]`` (``1e6`` is accepted)."""
    what = "an integer" + (" " + _bounds(low, high, False) if low is not None or high else "")

    def parse(text: str) -> int:
        try:
            value = float(text)
            if not value.is_integer():
                raise ValueError
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return int(value)

    parse.__name__ = "integer"
    return parse


def number(low: float | None = 0.0, high: float | None = None,
           low_open: bool = False) -> Callable[[str], float]:
    """argparse ``type=`` for a finite number in ``[low, high]`` (``(low, high]`` with
    ``low_open``): NaN and infinity never reach a loop that would never end."""
    bounds = _bounds(low, high, low_open)
    what = "a finite number" + (" " + bounds if bounds else "")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or (low is not None and (
                value < low or (low_open and value == low))) or (
                high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _parser_for(name: str, meta: Setting) -> Callable[[str], Any]:
    """argparse ``type=``: text to a value (validated later, with the setting's name)."""

    def parse(text: str) -> Any:
        if meta.nullable and text.lower() == "none":
            return None
        if text in meta.special:
            return text
        try:
            if meta.kind == "float":
                return float(text)
            if meta.kind in ("int", "ints"):
                number = float(text)  # 1e6 is a valid step count
                if not number.is_integer():
                    raise ValueError
                return int(number)
            if meta.kind == "dict":
                return json.loads(text)
        except ValueError:
            words = " or ".join(repr(s) for s in meta.special)
            raise argparse.ArgumentTypeError(
                f"must be {allowed(meta)}, got {text!r}"
                + (f" ({words} accepted)" if words else "")) from None
        return text

    parse.__name__ = meta.kind
    return parse


def help_text(name: str, meta: Setting, default: Any, note: str | None = None,
              shown: str = "") -> str:
    """``--help`` text: the sentence, then default (``shown``: in words), paper value, live
    (and ``note``, e.g. a benchmark's flag saying the config's own default); then why the
    paper value differs (:data:`LEGEND` explains the bracket)."""
    parts = [f"default: {shown or show(default)}"]
    differs = meta.has_paper and meta.paper != default
    if differs:
        parts.append(f"paper: {show(meta.paper)}")
    if meta.live:
        parts.append("live")
    if note:
        parts.append(note)
    text = f"{meta.help.rstrip('.')} [{'; '.join(parts)}]"
    if differs and meta.why:
        text += f" -- laptop vs paper: {meta.why}"
    return text.replace("%", "%%")


#: what the bracket after each setting's help means (the epilog of ``esnb train <algo> --help``)
LEGEND = ("[default: X; paper: Y; live]: default is the laptop preset's value (2 cores); paper "
          "is the value --preset paper takes where the source paper's differs, followed by why "
          "the laptop value differs; live settings can be changed while the run learns (the "
          "notebook panel, runner.controls.set, or given beside --resume). Every setting with "
          "its bounds: esnb docs settings (docs/settings.md).")


def add_arguments(parser: argparse.ArgumentParser, cls: type[Settings],
                  skip: Iterable[str] = (), only: Iterable[str] | None = None,
                  title: str | None = None) -> None:
    """One flag per setting of ``cls`` (argparse's default is "not given", so presets apply).

    Booleans get ``--x/--no-x``; layer sizes take several integers; dicts take JSON. ``only``
    names the settings to offer (a benchmark's few), ``skip`` those to leave out; ``title``
    names their group in ``--help`` (default: the settings of ``cls``). A setting declared
    with a :class:`Flag` reads as it says.
    """
    group = parser.add_argument_group(title or f"{cls.display_name()} settings")
    flags = {f.name: f.metadata.get("flag") for f in dataclasses.fields(cls)}
    skip = set(skip)
    if only is not None:
        only = set(only)
        unknown = only - set(cls.names())
        if unknown:
            raise ValueError(f"no setting {sorted(unknown)} in {cls.__name__}")
    for name, (meta, default) in cls.declarations().items():
        if not meta.cli or name in skip or (only is not None and name not in only):
            continue
        flag = flags.get(name)
        kw: dict[str, Any] = dict(dest=name, default=argparse.SUPPRESS,
                                  help=help_text(name, meta, default,
                                                 shown=flag.default if flag else ""))
        if flag is not None and meta.kind != "bool":
            kw.update(_flag_reading(meta, flag))
        elif meta.kind == "bool":
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = _parser_for(name, meta)
            kw["metavar"] = name.upper()
            if meta.kind == "choice":
                shown = {show(c): c for c in (*meta.choices, *meta.special)}
                kw["choices"] = list(shown.values())
                kw["metavar"] = "{" + ",".join(shown) + "}"
                kw["type"] = lambda text, shown=shown: shown.get(text, text)
            elif meta.kind == "ints":
                kw["nargs"] = "+"
        group.add_argument(meta.flag or _flag(name), **kw)


def _flag_reading(meta: Setting, flag: Flag) -> dict[str, Any]:
    """argparse's keywords of a setting declared with a :class:`Flag`: a number is checked
    against its bounds as it is read."""
    kw: dict[str, Any] = {"metavar": flag.metavar or None}
    if meta.kind == "int":
        kw["type"] = integer(None if meta.low is None else int(meta.low),
                             None if meta.high is None else int(meta.high))
    elif meta.kind == "float":
        kw["type"] = number(meta.low, meta.high, meta.low_open)
    if flag.const is not _MISSING:
        kw.update(nargs="?", const=flag.const)
    if flag.choices or meta.choices:
        kw["choices"] = list(flag.choices or meta.choices)
    return kw


def given(args: argparse.Namespace, cls: type[Settings]) -> dict[str, Any]:
    """The settings given on the command line (those not given keep the preset's value)."""
    return {name: getattr(args, name) for name in cls.names() if hasattr(args, name)}



"""Documentation tables from a config dataclass (the settings page, runner docstrings)."""

from __future__ import annotations

from typing import Any

from esnb.settings.declare import Settings, allowed, show


def _cell(value: Any) -> str:
    return f"`{show(value)}`"


def markdown_table(cls: type[Settings]) -> str:
    """Every setting: name, default, paper value, live, what is allowed, help."""
    rows = ["| setting | default | paper | live | allowed | what it is |",
            "|---|---|---|---|---|---|"]
    for name, (meta, default) in cls.declarations().items():
        paper = _cell(meta.paper) if meta.has_paper and meta.paper != default else ""
        rows.append(f"| `{name}` | {_cell(default)} | {paper} | {'yes' if meta.live else ''} "
                    f"| {allowed(meta)} | {meta.help} |")
    return "\n".join(rows)


def preset_table(cls: type[Settings]) -> str:
    """The settings where ``paper`` differs from ``laptop``, and why."""
    rows = ["| setting | laptop | paper | why the laptop value differs |", "|---|---|---|---|"]
    for name, (meta, default) in cls.declarations().items():
        if meta.has_paper and meta.paper != default:
            rows.append(f"| `{name}` | {_cell(default)} | {_cell(meta.paper)} | {meta.why} |")
    return "\n".join(rows)


def docstring_section(cls: type[Settings]) -> str:
    """A numpydoc "Settings" section listing ``cls``'s settings (a runner's docstring)."""
    table = "\n".join("    " + line for line in markdown_table(cls).splitlines())
    return ("\n\n    Settings\n    --------\n    Keyword arguments, with ``preset=\"laptop\"`` "
            "(default) or ``\"paper\"``; ``live`` ones are controls.\n\n" + table + "\n")

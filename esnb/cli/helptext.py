"""``--help`` as a person reads it: docstrings shown as plain text, whole first sentences as
one-line summaries, every flag's default.

Descriptions come from docstrings written for Sphinx; :func:`plain` drops their markup
(``literal``, ``:class:`~x.Y```, ``**bold**``). :class:`Formatter` keeps a description's
paragraphs and lists, and appends ``[default: X]`` to a flag's help unless the help already
says its default; a flag whose default is None must say in words what happens then (a test
walks every command for it).
"""

from __future__ import annotations

import argparse
import re
import textwrap

_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
#: a default written by hand at the end of a help, ``(default: X)``: shown as ``[default: X]``,
#: the style of every other flag's default
_HAND_DEFAULT = re.compile(r"\(default: ((?:[^()]|\([^()]*\))*)\)\s*$")
_BOLD = re.compile(r"(?<!\w)\*\*(\S(?:[^*\n]*\S)?)\*\*(?!\w)")
_ABBREVIATIONS = ("al", "e.g", "i.e", "vs", "cf", "etc", "Fig", "Eq", "approx")


def plain(text: str | None) -> str:
    """Docstring markup as plain text: ``x`` and `x` -> x, :role:`~a.b.C` -> C, **x** -> x."""
    if not text:
        return ""
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1] if m.group(0).count("~")
                     else m.group(1), text)
    text = _BOLD.sub(r"\1", text.replace("``", ""))  # not 2**29: bold wraps words only
    return re.sub(r"(?<![\w`])`([^`\n]+)`(?!\w)", r"\1", text)


def first_sentence(text: str | None) -> str:
    """The first sentence of a docstring's first paragraph, whole (``et al. 2017`` does not end
    it), as plain text."""
    paragraph = plain(text).strip().split("\n\n")[0]
    paragraph = " ".join(paragraph.split())
    for m in re.finditer(r"\.(\s+|$)", paragraph):
        before = paragraph[:m.start()]
        word = before.rsplit(None, 1)[-1] if before.split() else ""
        if word.lstrip("(") in _ABBREVIATIONS or re.fullmatch(r"\(?[A-Z]", word):
            continue
        return paragraph[:m.start() + 1]
    return paragraph


class Formatter(argparse.HelpFormatter):
    """Plain-text descriptions with their paragraphs and lists; every flag's default."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for paragraph in plain(text).strip().split("\n\n"):
            lines = paragraph.strip("\n").splitlines()
            items: list[list[str]] = []
            for line in lines:  # list items keep their own line
                if re.match(r"\s*(?:[-*]|\d+\.)\s", line) or not items:
                    items.append([line.strip()])
                else:
                    items[-1].append(line.strip())
            for item in items:
                marker = re.match(r"(?:[-*]|\d+\.)\s+", item[0])
                hang = " " * (len(marker.group(0)) if marker else 0)
                out.append(textwrap.fill(" ".join(item), width, initial_indent=indent,
                                         subsequent_indent=indent + hang))
            out.append("")
        return "\n".join(out).rstrip("\n")

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = _HAND_DEFAULT.sub(r"[default: \1]", plain(action.help or ""))
        if not action.option_strings or "default" in text.lower() \
                or action.default is argparse.SUPPRESS or action.default is None:
            return text
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return f"{text} [default: {'on' if action.default else 'off'}]"
        return f"{text} [default: {shown(action.default).replace('%', '%%')}]"


def shown(value) -> str:
    """A default as typed on the command line: ``2,000,000``, ``64 64``, ``0.02``."""
    if isinstance(value, (list, tuple)):
        return " ".join(shown(v) for v in value)
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1000:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    return str(value)

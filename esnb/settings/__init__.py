"""One declaration per setting: the config dataclasses every runner is built from.

An algorithm's settings are one dataclass (CleanRL's ``Args`` is the model). Each field is
declared once with :func:`setting` -- default, bounds or choices, live or fixed, help, and the
source paper's value -- and everything else is derived from that declaration:

- the runner's constructor (``ES(env, sigma=0.05)``): unknown names, wrong types and values
  out of range are refused with the setting's name and what it allows;
- the live controls (:class:`esnb.controls.Controls`) of the fields marked ``live`` (and of
  fixed fields shown in the panel, ``control=True``);
- the CLI flags of ``esnb train <algo>`` with their default, choices and help;
- the configuration stored in checkpoints (:meth:`Settings.to_dict` / :meth:`from_dict`);
- the documentation tables (:func:`markdown_table`, :func:`preset_table`).

Presets: ``laptop`` is the declared defaults (tuned for a 2-core machine); ``paper`` replaces
every field that declares ``paper=`` with the source paper's value. ``why=`` says why the
laptop value differs, and the preset table in the docs shows both.

Examples
--------
>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Demo(Settings):
...     sigma: float = setting(0.02, low=0, low_open=True, live=True, help="noise std",
...                            paper=0.05, why="smaller steps suit short runs")
>>> Demo.build(preset="paper").sigma
0.05
>>> Demo.build(sigma=-1)
Traceback (most recent call last):
...
ValueError: sigma must be a number in (0, inf), got -1
"""

from esnb.settings.cli import add_arguments, given, help_text, integer, number
from esnb.settings.declare import (
    KINDS,
    PRESETS,
    Setting,
    Settings,
    allowed,
    check_names,
    derive,
    setting,
    show,
    validate,
)
from esnb.settings.docs import markdown_table, preset_table
from esnb.settings.env import EnvSettings, RLSettings

__all__ = ["KINDS", "PRESETS", "EnvSettings", "RLSettings", "Setting", "Settings",
           "add_arguments", "allowed", "check_names", "derive", "given", "help_text", "integer",
           "markdown_table", "number", "preset_table", "setting", "show", "validate"]

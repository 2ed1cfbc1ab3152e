"""One ipywidget per control, chosen from its schema entry.

=====================================  ============================================
control                                widget
=====================================  ============================================
float, ``log=True``                    ``FloatLogSlider``, 10x either side, in bounds
float, both bounds finite              ``FloatSlider`` over the bounds
float, otherwise                       ``FloatText``
int, both bounds finite, <= 200 apart  ``IntSlider`` over the bounds
int, otherwise                         ``IntText``
bool                                   ``Checkbox`` (a toggle)
choice                                 ``Dropdown`` of the choices
str                                    ``Text`` (applied on Enter / leaving the box)
=====================================  ============================================

Sliders take their range from the schema. Number boxes are deliberately *not* clamping
(``IntText``, not ``BoundedIntText``): a clamping box silently turns a typed 1 into 2, whereas
an unbounded box hands the value to ``Controls.set``, whose error names the allowed range and
the panel shows it. Every widget applies on release or Enter (``continuous_update=False``), so
dragging a slider logs one change, not fifty.
"""

from __future__ import annotations

import math
from typing import Any

import ipywidgets as widgets

from esnb.controls import Control

DESCRIPTION_WIDTH = "110px"
INT_SLIDER_SPAN = 200
#: a log slider spans this many decades either side of its value (within the bounds): 10x
#: down to 10x up over ~250 px moves the value ~2% a step, 25 px ~1.6x (sigma 0.02 -> 0.03);
#: values beyond it are set from code or the readout, and the slider widens to show them
LOG_DECADES = 1.0
#: a slider's value as a person sets it: 3 significant figures (a pixel is ~1% of a value)
SIGNIFICANT = 3
SLIDER_WIDTH = "440px"


def _nudge_in(control: Control, low: float, high: float) -> tuple[float, float]:
    """Slider ends inside open bounds (the bound itself is not a valid value)."""
    span = high - low
    if control.low_open:
        low = low + span * 1e-3
    if control.high_open:
        high = high - span * 1e-3
    return low, high


def _log_range(control: Control, value: float) -> tuple[float, float]:
    """Exponents (base 10) of a log slider's ends: ``LOG_DECADES`` around ``value``, cut at
    the schema's bounds (just inside an open one)."""
    ref = math.log10(value if value > 0 else 1.0)
    lo, hi = ref - LOG_DECADES, ref + LOG_DECADES
    if control.low is not None and control.low > 0:
        lo = max(lo, math.log10(control.low) + (0.01 if control.low_open else 0.0))
    if control.high is not None and control.high > 0:
        hi = min(hi, math.log10(control.high) - (0.01 if control.high_open else 0.0))
    return round(min(lo, ref), 3), round(max(hi, ref), 3)


def rounded(widget: widgets.ValueWidget, value: Any) -> Any:
    """A slider's float as a person means it: ``SIGNIFICANT`` figures (0.0933, not
    0.09332543007969896); other values unchanged."""
    if isinstance(widget, (widgets.FloatLogSlider, widgets.FloatSlider)) and value:
        return float(f"{float(value):.{SIGNIFICANT}g}")
    return value


def short(value: Any) -> str:
    """``value`` for a message: floats to ``SIGNIFICANT`` figures."""
    if isinstance(value, float):
        return f"{value:.{SIGNIFICANT}g}"
    return str(value)


def tooltip(control: Control) -> str:
    live = "" if control.live else " (fixed for this run)"
    return f"{control.help} — {control.allowed()}{live}".strip(" —")


def control_widget(control: Control, value: Any) -> widgets.ValueWidget:
    """The widget of ``control`` showing ``value``; disabled when the control is fixed."""
    common = dict(description=control.name, tooltip=tooltip(control),
                  disabled=not control.live, style={"description_width": DESCRIPTION_WIDTH},
                  layout=widgets.Layout(width=SLIDER_WIDTH))
    kind = control.kind
    finite = control.low is not None and control.high is not None
    if kind == "bool":
        return widgets.Checkbox(value=bool(value), indent=False, **common)
    if kind == "choice":
        return widgets.Dropdown(options=[(str(c), c) for c in control.choices], value=value,
                                **common)
    if kind == "str":
        return widgets.Text(value=str(value), continuous_update=False, **common)
    if kind == "float" and control.log and (value > 0):
        lo, hi = _log_range(control, float(value))
        return widgets.FloatLogSlider(value=float(value), base=10, min=lo, max=hi, step=0.005,
                                      readout_format=".3g", continuous_update=False, **common)
    if kind == "float" and finite:
        lo, hi = _nudge_in(control, float(control.low), float(control.high))
        lo, hi = min(lo, float(value)), max(hi, float(value))
        return widgets.FloatSlider(value=float(value), min=lo, max=hi, step=(hi - lo) / 1000,
                                   readout_format=".3g", continuous_update=False, **common)
    if kind == "float":
        return widgets.FloatText(value=float(value), continuous_update=False, **common)
    if finite and control.high - control.low <= INT_SLIDER_SPAN:
        lo = int(math.ceil(control.low)) + (1 if control.low_open else 0)
        hi = int(math.floor(control.high)) - (1 if control.high_open else 0)
        return widgets.IntSlider(value=int(value), min=min(lo, value), max=max(hi, value),
                                 continuous_update=False, **common)
    return widgets.IntText(value=int(value), continuous_update=False, **common)


def show_value(widget: widgets.ValueWidget, value: Any) -> None:
    """Put ``value`` in ``widget``, widening a slider first so it is not clamped."""
    if isinstance(widget, widgets.FloatLogSlider):
        if value > 0:
            exp = math.log10(value)
            if exp < widget.min:
                widget.min = math.floor(exp)
            if exp > widget.max:
                widget.max = math.ceil(exp)
    elif isinstance(widget, (widgets.FloatSlider, widgets.IntSlider)):
        if value < widget.min:
            widget.min = value
        if value > widget.max:
            widget.max = value
    if widget.value != value:
        widget.value = value

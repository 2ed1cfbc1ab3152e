"""Small line plots as SVG text: the results page's figures, readable on GitHub and in any
browser, the same bytes from the same data (the page is checked for staleness byte for byte,
so no plotting library whose output moves between versions).

A panel draws the mean over seeds as a line and the seeds' range (min to max) as a shaded band,
each seed's curve first resampled onto a common x grid by linear interpolation (only where
every seed has data: up to the smallest of their last x).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import numpy as np

WIDTH, HEIGHT = 360, 240
PAD_L, PAD_R, PAD_T, PAD_B = 58, 12, 26, 40
GRID = 100  # points of the common x grid


def band(curves: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x, mean, low, high)`` of curves given as ``(n, 2)`` arrays of ``(x, y)``."""
    curves = [c[np.argsort(c[:, 0], kind="stable")] for c in curves if len(c)]
    if not curves:
        empty = np.zeros(0)
        return empty, empty, empty, empty
    lo_x = max(c[0, 0] for c in curves)
    hi_x = min(c[-1, 0] for c in curves)
    x = np.linspace(lo_x, hi_x, GRID) if hi_x > lo_x else np.array([hi_x])
    ys = np.stack([np.interp(x, c[:, 0], c[:, 1]) for c in curves])
    return x, ys.mean(axis=0), ys.min(axis=0), ys.max(axis=0)


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** np.floor(np.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=raw)
    first = np.ceil(lo / step) * step
    return [float(t) for t in np.arange(first, hi + step * 1e-9, step)]


def _label(v: float) -> str:
    a = abs(v)
    if a < 1e-9 * max(1.0, a):
        return "0"  # not "-0"
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def panel(x: np.ndarray, mean: np.ndarray, low: np.ndarray, high: np.ndarray, title: str,
          x_label: str, y_label: str, offset: int = 0,
          reference: float | None = None) -> str:
    """One panel as an SVG group, ``offset`` pixels from the left."""
    return lines(x, [("", mean, low, high)], title, x_label, y_label, offset, reference)


#: colours of the series of one panel, in order
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def lines(x: np.ndarray, series: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray]],
          title: str, x_label: str, y_label: str, offset: int = 0,
          reference: float | None = None) -> str:
    """``(name, y, low, high)`` series over one ``x`` in one panel (an SVG group ``offset``
    pixels from the left): each a line with its band, named in a legend when it has a name
    (a performance profile: one series per algorithm)."""
    out = [f'<g transform="translate({offset},0)">',
           f'<text x="{WIDTH / 2:g}" y="16" text-anchor="middle" font-size="13">'
           f'{escape(title)}</text>']
    if x.size == 0:
        out.append('<text x="180" y="120" text-anchor="middle">no data</text></g>')
        return "\n".join(out)
    x0, x1 = float(x.min()), float(x.max())
    ys = [v for _, _, low, high in series for v in (low, high)]
    ys += [np.array([reference])] if reference is not None else []
    y0 = float(min(v.min() for v in ys))
    y1 = float(max(v.max() for v in ys))
    if y1 <= y0:
        y0, y1 = y0 - 1.0, y1 + 1.0
    y0, y1 = y0 - 0.04 * (y1 - y0), y1 + 0.04 * (y1 - y0)  # no line on the frame
    x1 = x1 if x1 > x0 else x0 + 1.0
    w, h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B

    def px(v):
        return PAD_L + (np.asarray(v) - x0) / (x1 - x0) * w

    def py(v):
        return PAD_T + h - (np.asarray(v) - y0) / (y1 - y0) * h

    out.append(f'<rect x="{PAD_L}" y="{PAD_T}" width="{w}" height="{h}" fill="none" '
               f'stroke="#999"/>')
    for t in _ticks(x0, x1):
        out.append(f'<text x="{px(t):.1f}" y="{PAD_T + h + 14}" text-anchor="middle" '
                   f'font-size="10">{_label(t)}</text>')
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{PAD_L}" x2="{PAD_L + w}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
                   f'stroke="#eee"/>')
        out.append(f'<text x="{PAD_L - 4}" y="{py(t) + 3:.1f}" text-anchor="end" '
                   f'font-size="10">{_label(t)}</text>')
    out.append(f'<text x="{PAD_L + w / 2:g}" y="{HEIGHT - 6}" text-anchor="middle" '
               f'font-size="11">{escape(x_label)}</text>')
    out.append(f'<text transform="translate(12,{PAD_T + h / 2:g}) rotate(-90)" '
               f'text-anchor="middle" font-size="11">{escape(y_label)}</text>')
    for k, (name, mean, low, high) in enumerate(series):
        colour = COLOURS[k % len(COLOURS)]
        poly = [f"{a:.1f},{b:.1f}" for a, b in zip(px(x), py(high))]
        poly += [f"{a:.1f},{b:.1f}" for a, b in zip(px(x[::-1]), py(low[::-1]))]
        out.append(f'<polygon points="{" ".join(poly)}" fill="{colour}" fill-opacity="0.2" '
                   f'stroke="none"/>')
        line = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px(x), py(mean)))
        out.append(f'<polyline points="{line}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"/>')
        if name:
            # bottom left: where a performance profile (falling to the right) leaves room
            out.append(f'<text x="{PAD_L + 6}" y="{PAD_T + h - 8 - 13 * (len(series) - 1 - k)}" '
                       f'font-size="11" fill="{colour}">{escape(name)}</text>')
    if reference is not None:
        out.append(f'<line x1="{PAD_L}" x2="{PAD_L + w}" y1="{py(reference):.1f}" '
                   f'y2="{py(reference):.1f}" stroke="#d62728" stroke-dasharray="4 3"/>')
    out.append("</g>")
    return "\n".join(out)


def figure(panels: Sequence[str], caption: str) -> str:
    """Panels side by side in one SVG document."""
    width = WIDTH * len(panels)
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT + 18}" '
        f'viewBox="0 0 {width} {HEIGHT + 18}" font-family="sans-serif">',
        '<rect width="100%" height="100%" fill="white"/>', *panels,
        f'<text x="8" y="{HEIGHT + 12}" font-size="10" fill="#555">{escape(caption)}</text>',
        "</svg>", ""])

"""What an agent sees: an observation of a pixel environment drawn as it enters the network.

An Atari observation (``ALE/<Game>-v5`` after DeepMind's preprocessing) is a uint8 stack of
grey 84x84 frames, oldest first: each is drawn in grey, side by side, so that the motion the
stack carries shows. A MinAtar observation is a 0/1 channel per kind of object on a 10x10 grid:
it is drawn as one picture, each channel in its own colour (the last channel on top where two
overlap), empty cells white. Rows are drawn top down, as the game shows them.
"""

from __future__ import annotations

import numpy as np
from bokeh.layouts import row
from bokeh.models import LinearColorMapper
from bokeh.palettes import Category10_10
from bokeh.plotting import figure


def _picture(height: int, width: int, title: str, size: int):
    f = figure(width=size, height=size, title=title, toolbar_location=None,
               x_range=(0, width), y_range=(0, height))
    f.axis.visible = False
    f.grid.visible = False
    return f


def agent_view(obs, title: str | None = None, size: int = 170):
    """A bokeh row of pictures of ``obs``.

    Parameters
    ----------
    obs : array of shape (C, H, W)
        An Atari frame stack (uint8 0..255, ``C`` frames, oldest first) or MinAtar channels
        (0/1, ``C`` kinds of object).
    title : str, optional
        Title of the first picture (default: which frame, or ``"channels"``).
    size : int
        Pixels of each picture's side.

    Raises
    ------
    ValueError
        ``obs`` is not channels-first frames (``(C, H, W)``).
    """
    obs = np.asarray(obs)
    if obs.ndim != 3 or min(obs.shape) < 1:
        raise ValueError(f"agent_view draws channels-first frames (C, H, W), got shape "
                         f"{obs.shape}")
    c, h, w = obs.shape
    if obs.max(initial=0) <= 1 and c <= len(Category10_10):  # MinAtar: one channel per object
        kinds = np.where(obs.any(0), (c - 1) - np.argmax(obs[::-1], axis=0), np.nan)
        f = _picture(h, w, title or "channels", size)
        f.image(image=[kinds[::-1]], x=0, y=0, dw=w, dh=h,
                color_mapper=LinearColorMapper(Category10_10[:max(c, 3)], low=0,
                                               high=max(c, 3) - 1, nan_color="white"))
        return row(f)
    pictures = []
    for i, frame in enumerate(obs):
        name = "frame t" if i == c - 1 else f"frame t-{c - 1 - i}"
        f = _picture(h, w, title if (title and i == 0) else name, size)
        f.image(image=[frame[::-1]], x=0, y=0, dw=w, dh=h,
                color_mapper=LinearColorMapper("Greys256", low=0, high=255))
        pictures.append(f)
    return row(*pictures)

"""``esnb.agent_view``: an observation of a pixel environment drawn as the network takes it."""

import numpy as np
import pytest

from esnb.agent_view import agent_view
from esnb.envs import make_env


def _image(fig):
    return fig.renderers[0].data_source.data["image"][0]


def test_an_atari_stack_is_its_frames_oldest_first():
    env = make_env("ALE/Pong-v5")
    try:
        obs, _ = env.reset(seed=0)
    finally:
        env.close()
    view = agent_view(obs)
    assert [f.title.text for f in view.children] == ["frame t-3", "frame t-2", "frame t-1",
                                                     "frame t"]
    for fig, frame in zip(view.children, obs):
        np.testing.assert_array_equal(_image(fig), frame[::-1])  # top row drawn on top
        mapper = fig.renderers[0].glyph.color_mapper
        assert (mapper.low, mapper.high) == (0, 255)  # grey levels as they are, not stretched


def test_minatar_channels_are_one_picture_with_a_colour_per_object():
    obs = np.zeros((4, 10, 10), np.uint8)
    obs[0, 9, 4] = 1              # paddle
    obs[1, 5, 2] = obs[2, 5, 2] = 1  # ball and trail on one cell: the later channel shows
    view = agent_view(obs, title="Breakout")
    (fig,) = view.children
    assert fig.title.text == "Breakout"
    kinds = _image(fig)[::-1]
    assert kinds[9, 4] == 0 and kinds[5, 2] == 2
    assert np.isnan(kinds).sum() == 98  # empty cells: white


def test_not_frames_is_one_line():
    with pytest.raises(ValueError, match=r"channels-first frames \(C, H, W\), got shape \(8,\)"):
        agent_view(np.zeros(8))

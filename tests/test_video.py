"""Episode videos: rendered in their own process while the run goes on, the episode the policy
plays (its return), shown inline and saved as mp4 and gif; ``--video-every`` and ``esnb play
--video`` write them; no rendering backend is one line naming what would give one.

MuJoCo renders headless through EGL here (the rendering process sets ``MUJOCO_GL=egl`` when
it is unset); CI installs Debian's libegl1 (.ci/run)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time

import imageio.v2 as imageio
import numpy as np
import pytest
from conftest import SMALL_NOISE

import esnb
from esnb.cli import main
from esnb.envs.rollout import FastEnv, run_episode
from esnb.ui import dashboard

ENV = "HalfCheetah-v5"
SIZE = (64, 48)  # (width, height); software OpenGL is slow whatever the size: short episodes


def wait_until(predicate, what: str, polls: int = 500):
    """The video's callback runs on another thread right after ``result()`` returns."""
    for _ in range(polls):
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"no {what}")


def gif_duration(path) -> float:
    """Seconds a GIF plays (Pillow merges identical frames into a longer one)."""
    from PIL import Image, ImageSequence

    with Image.open(path) as im:
        return sum(frame.info["duration"] for frame in ImageSequence.Iterator(im)) / 1000


def test_video_renders_beside_a_running_run_and_shows_its_episode(tmp_path):
    runner = esnb.ES(ENV, population=4, noise_size=SMALL_NOISE, max_episode_steps=30,
                     eval_interval=0, client=False)
    runner.start(generations=10**6)
    try:
        video = runner.video(max_steps=25, size=SIZE, wait=False)
        before = runner.iteration
        assert "rendering" in video._repr_html_()
        video.result()
        during = runner.iteration - before
    finally:
        runner.stop()
        runner.wait()
    assert during >= 1, "the run paused while the video rendered"

    assert video.shape == (26, SIZE[1], SIZE[0], 3)  # the reset's frame and one per step
    # the episode the policy plays from reset(seed=0): the rollouts' own return
    episode = run_episode(FastEnv(ENV, 25), video.policy.numpy(), seed=0)
    assert video.returns.tolist() == [episode.ret] and video.lengths.tolist() == [25]
    frames = video.frames()
    assert frames.shape == video.shape and frames.dtype == np.uint8 and frames.std() > 0

    html = video._repr_html_()
    assert html.startswith("<video") and "autoplay" in html
    assert base64.b64decode(html.split("base64,")[1].split('"')[0]) == video.mp4
    assert video.save(tmp_path / "e.mp4").read_bytes() == video.mp4
    assert gif_duration(video.save(tmp_path / "e.gif")) == pytest.approx(26 / video.fps)

    with pytest.raises(ValueError, match=r"ends in \.mp4 or \.gif, got '.*e\.avi'"):
        video.save(tmp_path / "e.avi")
    with pytest.raises(ValueError, match="episodes must be an integer >= 1"):
        runner.video(episodes=0)


def test_episodes_follow_each_other_with_their_seeds():
    runner = esnb.ES(ENV, population=4, noise_size=SMALL_NOISE, client=False)
    video = runner.video(episodes=2, seed=5, max_steps=6, size=SIZE)
    act = video.policy.numpy()
    assert video.returns.tolist() == [run_episode(FastEnv(ENV, 6), act, seed=s).ret
                                      for s in (5, 6)]
    assert video.shape[0] == 2 * 7


def test_a_runner_without_a_single_policy_says_what_it_holds():
    runner = esnb.EORL("bitflip", {"n_bits": 4}, client=False)
    with pytest.raises(ValueError, match="EORL has no policy esnb can export or render: it "
                                         "holds a population of Monte-Carlo Q-networks"):
        runner.video()
    board = dashboard(runner)
    try:
        assert board.record.disabled and "Monte-Carlo Q-networks" in board.record.tooltip
    finally:
        board.close()


def test_dashboard_button_shows_the_video_under_the_plot_while_the_run_goes_on():
    runner = esnb.ES(ENV, population=4, noise_size=SMALL_NOISE, max_episode_steps=30,
                     eval_interval=0, client=False)
    board = dashboard(runner, video={"max_steps": 10, "size": SIZE})
    try:
        assert board.children[-1] is board.video_view and board.video_view.value == ""
        runner.start(generations=10**6)
        board.record.click()  # returns at once: the policy is taken after the generation
        wait_until(lambda: board.video is not None, what="a video started")
        before = runner.iteration
        assert "rendering an episode" in board.video_status.value or board.video.done()
        board.video.result()
        during = runner.iteration - before
        wait_until(lambda: board.video_view.value.startswith("<video"), what="the video")
        assert f"generation {board.video.iteration:,}: return" in board.video_status.value
        assert board.video.iteration >= before - 1
        assert board.video_view.value == board.video._repr_html_()
    finally:
        runner.stop()
        runner.wait()
        board.close()
    assert during >= 1, "the run paused while the video rendered"


def test_train_video_every_and_play_video(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "es", "--env", ENV, "--generations", "4", "--workers", "0",
                 "--population", "4", "--noise-size", str(SMALL_NOISE), "--max-episode-steps",
                 "8", "--no-progress", "--final-eval", "1", "--out", str(out),
                 "--video-every", "2"]) == 0
    videos = sorted(p.name for p in (out / "videos").iterdir())
    assert videos == ["2.mp4", "4.mp4"]
    with imageio.get_reader(out / "videos" / "4.mp4", format="FFMPEG") as reader:
        assert len(list(reader.iter_data())) == 9  # 8 steps, the cap of the run's episodes
    capsys.readouterr()
    assert main(["play", str(out), "--video", str(tmp_path / "p.gif"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["video"]["frames"] == 9
    assert gif_duration(tmp_path / "p.gif") == pytest.approx(9 / 20)  # HalfCheetah: 20 fps


def test_no_rendering_backend_is_one_line(tmp_path):
    """MuJoCo's own default, GLFW, on a machine without a display: what a user without
    MUJOCO_GL gets; esnb's message names the variable."""
    out = tmp_path / "run"
    assert main(["train", "es", "--env", ENV, "--generations", "1", "--workers", "0",
                 "--population", "4", "--noise-size", str(SMALL_NOISE), "--max-episode-steps",
                 "5", "--no-progress", "--final-eval", "0", "--out", str(out)]) == 0
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(MUJOCO_GL="glfw", PYTHONPATH=os.pathsep.join(sys.path))
    for argv in (["play", str(out), "--episodes", "1", "--video", str(tmp_path / "v.mp4")],
                 ["train", "es", "--resume", str(out), "--generations", "2", "--workers", "0",
                  "--no-progress", "--video-every", "1"]):
        proc = subprocess.run([sys.executable, "-m", "esnb.cli", *argv], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith("esnb: error: cannot render HalfCheetah-v5 here")
        assert "MUJOCO_GL=egl" in lines[0]
    assert not (tmp_path / "v.mp4").exists()
    assert json.loads((out / "summary.json").read_text())["last"]["generation"] == 1


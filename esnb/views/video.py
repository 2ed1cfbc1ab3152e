"""Episodes of a policy as video: rendered in a process of their own, so a run never pauses.

:func:`render` sends an :class:`~esnb.nets.acting.ActingPolicy` (plain arrays) to one
rendering process (started on first use with ``spawn``, then kept): it makes the environment
with ``render_mode="rgb_array"``, runs the episodes from ``reset(seed=seed + k)`` with the
rollouts' own numpy forward, and encodes the frames as H.264 mp4 as they come (an episode of
1,000 480x480 frames never sits in memory). The training process only waits for the bytes.

MuJoCo renders headless through EGL (``MUJOCO_GL=egl``, the rendering process's default when
the variable is unset) or OSMesa (``MUJOCO_GL=osmesa``); without either, or without the
encoder (``imageio-ffmpeg``, ``pip install 'esnb[video]'``), :class:`RenderError` says which
in one line. A :class:`Video` shows itself in a notebook (an HTML5 ``<video>``) and saves as
``.mp4`` or ``.gif``.
"""

from __future__ import annotations

import base64
import os
import tempfile
import threading
import warnings
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import numpy as np

#: file suffixes :meth:`Video.save` writes
SUFFIXES = (".mp4", ".gif")
#: what the message of a missing backend names
BACKENDS = ("MUJOCO_GL=egl (needs libEGL, e.g. Debian's libegl1) or MUJOCO_GL=osmesa "
            "(needs libOSMesa and PyOpenGL)")


class RenderError(ValueError):
    """An episode that cannot be rendered or encoded here: the message says what is missing."""


def check_video_path(path) -> Path:
    """``path`` ends in a suffix :meth:`Video.save` writes, and the encoder is installed."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"a video file ends in {' or '.join(SUFFIXES)}, got {str(path)!r}")
    check_encoder()
    return path


def check_encoder() -> None:
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise RenderError("videos need the imageio-ffmpeg package (an ffmpeg binary): "
                          "pip install 'esnb[video]'") from None


# -- the rendering process ---------------------------------------------------------------------
_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None


def _headless_default() -> None:
    """In the rendering process, before MuJoCo or pygame is imported: EGL unless told
    otherwise (MuJoCo's own default, GLFW, needs a display); pygame (classic control) without
    a window or sound."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def _renderer() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            import multiprocessing

            # spawn: a fork of a process with threads (a run, Dask's) may hold their locks
            _pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=_headless_default)
        return _pool


def _forget(pool: ProcessPoolExecutor) -> None:
    global _pool
    with _lock:
        if _pool is pool:
            _pool = None
    pool.shutdown(wait=False, cancel_futures=True)


def render(policy, env_id: str, episodes: int = 1, seed: int = 0, max_steps: int | None = None,
           env_kwargs: dict | None = None, size: tuple[int, int] | None = None,
           wait: bool = True) -> Video:
    """Episodes of ``policy`` in ``env_id`` as a :class:`Video` (rendered in another process).

    Parameters
    ----------
    policy : ActingPolicy or FramePolicy
        What a runner's ``acting_policy()`` gives: an MLP policy
        (:class:`~esnb.nets.acting.ActingPolicy`) or IMPALA's network on frames
        (:class:`~esnb.rl.impala.acting.FramePolicy`); its ``numpy()`` acts.
    env_id : str
    episodes : int
        Episodes, one after the other in one video.
    seed : int
        Episode ``k`` starts from ``reset(seed=seed + k)``.
    max_steps : int, optional
        Cap of each episode (default: the environment's own).
    env_kwargs : dict, optional
        Passed to ``gymnasium.make``.
    size : (int, int), optional
        ``(width, height)`` of the frames (MuJoCo's envs; default: the environment's own,
        480x480). Software OpenGL (Mesa's llvmpipe) is slow, and hardly faster at small sizes:
        cap the episode (``max_steps``) where time matters.
    wait : bool
        Return once the video is ready (else at once: :meth:`Video.result` waits).
    """
    if int(episodes) != episodes or episodes < 1:
        raise ValueError(f"episodes must be an integer >= 1, got {episodes!r}")
    if max_steps is not None and int(max_steps) < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps!r}")
    check_encoder()
    env_kwargs = dict(env_kwargs or {})
    if size is not None:
        width, height = (int(x) for x in size)
        if width < 1 or height < 1:
            raise ValueError(f"size must be (width, height) >= 1, got {size!r}")
        env_kwargs.update(width=width, height=height)
    pool = _renderer()
    try:
        future = pool.submit(render_episodes, policy, env_id, int(episodes), int(seed),
                             None if max_steps is None else int(max_steps), env_kwargs)
    except BrokenProcessPool:  # the last one died (a GL driver's crash): a new one
        _forget(pool)
        return render(policy, env_id, episodes, seed, max_steps, env_kwargs, None, wait)
    video = Video(future, policy, env_id, pool)
    return video.result() if wait else video


class Video:
    """Rendered episodes: shown inline by a notebook, saved with :meth:`save`.

    Attributes
    ----------
    policy : ActingPolicy or FramePolicy
        What acted.
    env_id : str
    returns, lengths : ndarray
        Of each episode (once ready).
    fps : float
        Frames per second (the environment's ``render_fps``).
    iteration : int or None
        The run's iteration whose policy acted (set by :meth:`Runner.video`).
    """

    def __init__(self, future: Future, policy, env_id: str, pool=None):
        self.iteration: int | None = None
        self._future = future
        self._pool = pool
        self.policy = policy
        self.env_id = env_id

    def done(self) -> bool:
        return self._future.done()

    def add_done_callback(self, fn) -> None:
        """Call ``fn(video)`` once it is ready or failed (on another thread)."""
        self._future.add_done_callback(lambda _f: fn(self))

    def result(self, timeout: float | None = None) -> Video:
        """Wait until rendered; raises :class:`RenderError` if it could not be."""
        try:
            self._future.result(timeout)
        except BrokenProcessPool:
            if self._pool is not None:
                _forget(self._pool)
            raise RenderError(f"the rendering process of {self.env_id} ended before the video "
                              f"was ready: a script must start its work under `if __name__ == "
                              f"'__main__':` (the process imports it); else its OpenGL crashed: "
                              f"{BACKENDS}") from None
        return self

    @property
    def _doc(self) -> dict:
        return self.result()._future.result()

    @property
    def mp4(self) -> bytes:
        """The video, H.264 in an mp4 file."""
        return self._doc["mp4"]

    @property
    def returns(self) -> np.ndarray:
        return self._doc["returns"]

    @property
    def lengths(self) -> np.ndarray:
        return self._doc["lengths"]

    @property
    def fps(self) -> float:
        return self._doc["fps"]

    @property
    def shape(self) -> tuple[int, ...]:
        """``(frames, height, width, 3)``."""
        return tuple(self._doc["shape"])

    def frames(self) -> np.ndarray:
        """Every frame, decoded: ``uint8 [frames, height, width, 3]``."""
        import imageio.v2 as imageio

        with tempfile.NamedTemporaryFile(suffix=".mp4") as f:
            f.write(self.mp4)
            f.flush()
            with imageio.get_reader(f.name, format="FFMPEG") as reader:
                return np.stack(list(reader.iter_data()))  # its length is unknown: inf

    def save(self, path) -> Path:
        """Write the video as ``.mp4`` (the bytes as rendered) or ``.gif`` (re-encoded)."""
        path = check_video_path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix.lower() == ".mp4":
            path.write_bytes(self.mp4)
            return path
        import imageio.v2 as imageio

        imageio.mimsave(path, list(self.frames()), format="GIF", duration=1000 / self.fps,
                        loop=0)
        return path

    def _repr_html_(self) -> str:
        if not self.done():
            return f"<i>rendering an episode of {self.env_id}…</i>"
        try:
            data = base64.b64encode(self.mp4).decode()
        except RenderError as exc:
            return f"<b>no video</b>: {exc}"
        height, width = self.shape[1:3]
        return (f'<video controls autoplay loop muted playsinline width="{width}" '
                f'height="{height}" src="data:video/mp4;base64,{data}"></video>')

    def __repr__(self) -> str:
        if not self.done():
            return f"<Video of {self.env_id}: rendering>"
        try:
            return (f"<Video of {self.env_id}: {self.shape[0]} frames at {self.fps:g} fps, "
                    f"returns {np.round(self.returns, 2).tolist()}>")
        except RenderError as exc:
            return f"<Video of {self.env_id}: failed: {exc}>"


# -- in the rendering process -------------------------------------------------------------------
def render_episodes(policy, env_id: str, episodes: int, seed: int, max_steps: int | None,
                    env_kwargs: dict) -> dict:
    """Run and encode the episodes (the rendering process's task)."""
    import imageio.v2 as imageio

    env, first = _first_frame(env_id, max_steps, env_kwargs)
    fps = float(env.metadata.get("render_fps") or 30)
    act = policy.numpy()
    returns, lengths, frames = [], [], 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "video.mp4")
        # macro_block_size 1: any frame size, as rendered (H.264 pads internally)
        with imageio.get_writer(out, format="FFMPEG", fps=fps, codec="libx264",
                                pixelformat="yuv420p", macro_block_size=1,
                                ffmpeg_log_level="error") as writer:
            for k in range(episodes):
                obs, _ = env.reset(seed=seed + k)
                writer.append_data(env.render())
                frames += 1
                total, steps, done = 0.0, 0, False
                while not done:
                    obs, reward, terminated, truncated, _ = env.step(act(obs))
                    total += float(reward)
                    steps += 1
                    done = terminated or truncated
                    writer.append_data(env.render())
                    frames += 1
                returns.append(total)
                lengths.append(steps)
        data = Path(out).read_bytes()
    env.close()
    return {"mp4": data, "returns": np.array(returns), "lengths": np.array(lengths),
            "fps": fps, "shape": (frames, *first.shape)}


def probe(env_id: str, env_kwargs: dict | None = None) -> None:
    """Render one frame of ``env_id`` in the rendering process: a missing backend or encoder
    is a :class:`RenderError` now, before a run starts, not a missing video later."""
    check_encoder()
    _renderer().submit(_one_frame, env_id, dict(env_kwargs or {})).result()


def _one_frame(env_id: str, env_kwargs: dict) -> tuple[int, ...]:
    env, frame = _first_frame(env_id, None, env_kwargs)
    env.close()
    return frame.shape


def _first_frame(env_id: str, max_steps: int | None, env_kwargs: dict):
    """The environment in ``rgb_array`` mode and its first frame, or one line saying why
    not."""
    from esnb.envs.make import make_env

    try:
        with warnings.catch_warnings():  # GLFW warns before it fails: the error says it all
            warnings.simplefilter("ignore")
            env = make_env(env_id, max_episode_steps=max_steps, render_mode="rgb_array",
                           **env_kwargs)
            env.reset(seed=0)
            first = env.render()
    except Exception as exc:  # noqa: BLE001 - said in one line, with what would render
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise RenderError(f"cannot render {env_id} here with MUJOCO_GL="
                          f"{os.environ.get('MUJOCO_GL', '')} ({type(exc).__name__}: {why}); "
                          f"MuJoCo renders headless with {BACKENDS}; classic control needs "
                          f"pygame (esnb[video])") from None
    if not isinstance(first, np.ndarray) or first.ndim != 3:
        raise RenderError(f"{env_id} renders no rgb_array frames (got {type(first).__name__})")
    return env, first


# -- a run's videos -----------------------------------------------------------------------------
class VideoRecorder:
    """``videos/<iteration>.mp4`` in a run folder every ``every`` iterations (``esnb train
    --video-every``): the policy is taken on the run's thread after the iteration, rendered in
    the rendering process meanwhile; :meth:`close` waits for the last ones.

    Parameters
    ----------
    runner : Runner
        One with an :meth:`~esnb.runners.base.Runner.acting_policy`.
    folder : Path
        Where ``<iteration>.mp4`` go (created).
    every : int
        Iterations between videos.
    **video
        ``episodes``, ``seed``, ``max_steps``, ``size`` of :meth:`Runner.video`.
    """

    def __init__(self, runner, folder, every: int, **video):
        if int(every) != every or every < 1:
            raise ValueError(f"--video-every must be an integer >= 1, got {every!r}")
        self.runner = runner
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.every = int(every)
        self.video = video
        self.pending: list[Video] = []
        self.written: list[Path] = []
        self.failed: list[str] = []
        runner.add_observer(self)

    def __call__(self, row: dict) -> None:
        iteration = int(row[self.runner.iteration_column])
        if iteration % self.every:
            return
        video = self.runner.video(wait=False, **self.video)
        out = self.folder / f"{iteration}.mp4"
        video.add_done_callback(lambda v: self._write(v, out))
        self.pending.append(video)

    def _write(self, video: Video, out: Path) -> None:
        try:
            video.save(out)
            self.written.append(out)
        except Exception as exc:  # noqa: BLE001 - a video must never end a run
            self.failed.append(f"{out.name}: {exc}")

    def close(self) -> None:
        """Stop recording and wait for the videos in progress."""
        self.runner.remove_observer(self)
        for video in self.pending:
            try:
                video.result()
            except RenderError:
                pass  # said by _write
        self.pending.clear()

"""The run every esnb algorithm shares: settings, controls, history, observers, checkpoints,
on a background thread the kernel never waits on (:mod:`esnb.runners.lifecycle`).

``start()`` returns at once and iterations (generations, learner steps) run on a thread;
``pause()`` lets the current iteration finish and holds; ``resume()`` goes on; ``step(n)``
runs ``n`` iterations and returns; ``stop()`` ends after the current iteration; ``wait()``
joins and re-raises a failure. An iteration reads one snapshot of ``runner.controls``, and
every change of a control is logged with the iteration where it took effect.

Subclasses declare their settings as a config dataclass (``Config``, see
:mod:`esnb.settings`), implement ``_iteration(snapshot) -> dict`` (one history row) and their
checkpoint state; they never touch threads. A runner is a
:class:`~esnb.views.protocol.SteeredRun` (what the figure, the widgets and the trackers read);
it imports no view: :meth:`Runner.plot` and :meth:`Runner.video` call the view side's drawing
and renderer, named by :attr:`Runner.drawing` and :attr:`Runner.renderer`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from esnb.controls import ControlChange, ControlSnapshot
from esnb.runners.lifecycle import RunThread, log
from esnb.runners.registry import load
from esnb.runners.schedule import ControlSchedule
from esnb.settings import Settings
from esnb.settings.docs import docstring_section

if TYPE_CHECKING:
    import pandas as pd

    from esnb.runners.plotspec import PlotPanel


class Runner(RunThread):
    """Base class: settings, controls, history, observers, checkpoints, the views' calls.

    Attributes
    ----------
    controls : Controls
        Live and fixed hyperparameters.
    history : pandas.DataFrame
        One row per iteration (a copy).
    changes : pandas.DataFrame
        Every accepted control change with the iteration where it took effect and its
        ``origin`` (``local``, ``schedule``, or the kernel attached to the run that made it).
    state : str
        One of ``idle running paused stopped finished failed``.
    error : BaseException or None
        Why the run failed.
    """

    algorithm: ClassVar[str] = "runner"
    #: the name people read (bars, plots, messages): the config's ``title`` (Ape-X, IMPALA)
    title: ClassVar[str] = "runner"
    #: history column that counts iterations (generation, learner step, ...)
    iteration_column: ClassVar[str] = "generation"
    #: the settings dataclass (one declaration per setting)
    Config: ClassVar[type[Settings]]
    #: what the run learns, said when it has no single policy to export or render
    holds: ClassVar[str] = "no single MLP policy"
    #: the view side's drawing behind :meth:`plot` and renderer behind :meth:`video`, as
    #: ``"module:function"`` (loaded when called, as the registry loads a runner): a runner
    #: imports neither, nor bokeh; a subclass, or a test, may name others
    drawing: ClassVar[str] = "esnb.views.figures:plot"
    renderer: ClassVar[str] = "esnb.views.video:render"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        config = cls.__dict__.get("Config")
        if "title" not in cls.__dict__:
            cls.title = config.title if config is not None and config.title else cls.algorithm
        if config is not None and cls.__doc__ and "Settings\n    --------" not in cls.__doc__:
            cls.__doc__ = cls.__doc__.rstrip() + docstring_section(config)

    @classmethod
    def make_config(cls, env: str | None = None, preset: str = "laptop",
                    config: Settings | None = None, **settings: Any) -> Settings:
        """The run's settings: ``config`` (a ``cls.Config``) with ``settings`` applied, else
        ``preset`` with ``env`` and ``settings``; every value validated."""
        if env is not None:
            settings["env"] = env
        if config is None:
            return cls.Config.build(preset, **settings)
        if not isinstance(config, cls.Config):
            raise TypeError(f"config must be a {cls.Config.__name__}, got "
                            f"{type(config).__name__}")
        return config.replace(**settings) if settings else config

    def __init__(self, config: Settings, name: str | None = None):
        self.config = config
        self.controls = config.controls()
        if name is not None and not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r}")
        self.name = name or f"{self.algorithm.lower()}-{time.strftime('%Y%m%d-%H%M%S')}"
        self._records: list[dict[str, Any]] = []
        self._change_log: list[dict[str, Any]] = []
        self._applied_version = self.controls.version
        self._observers: list[Callable[[dict], None]] = []
        self._iter_lock = threading.RLock()  # one iteration (or save) at a time
        RunThread.__init__(self)
        self.iteration = 0
        self.wall_time = 0.0
        self._keeper = None
        self._saved_target: dict[str, float] = {}
        self._schedule: ControlSchedule | None = None  # a record of changes to replay
        #: where a fork came from (:mod:`esnb.runners.fork`): run, iteration, changes
        self.parent: dict[str, Any] | None = None

    # -- to implement ------------------------------------------------------------------------
    def _iteration(self, snapshot: ControlSnapshot) -> dict[str, Any]:
        """Run one iteration with these control values; return its history row."""
        raise NotImplementedError

    def _progress(self) -> dict[str, float]:
        """Counters that budgets refer to, e.g. ``{"generations": 12, "env_steps": 1e5}``."""
        return {self.iteration_column + "s": self.iteration}

    def _state_dict(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Algorithm state for a checkpoint: (JSON-able meta, arrays)."""
        raise NotImplementedError

    def _load_state_dict(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        raise NotImplementedError

    def _quiesce(self) -> None:
        """The run has ended (stopped or finished): stop what still produces data on the
        cluster (actor loops, evaluations in flight) before the last checkpoint, so that the
        checkpoint holds everything it produced. Default: nothing runs between iterations."""

    def config_dict(self) -> dict[str, Any]:
        """The settings that rebuild this runner (JSON-able), as checkpoints store them."""
        return self.config.to_dict()

    def close(self) -> None:
        """Stop the run and release what the runner holds on the cluster (actors, pinned
        tasks). Subclasses holding such things extend it; ``with runner:`` calls it."""
        self.stop()
        self.wait_ended()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the lifecycle (the thread: esnb.runners.lifecycle) ---------------------------------
    def start(self, paused: bool = False, controls_schedule=None, **budget: float) -> Runner:
        """Run on a background thread and return at once.

        Parameters
        ----------
        paused : bool
            Start held: nothing runs until ``step()`` or ``resume()`` (a "step one" button).
        controls_schedule : path, DataFrame or rows, optional
            A record of control changes (a run's ``changes``, its folder or ``changes.csv``)
            to apply at the same iterations (:mod:`esnb.runners.schedule`); checked whole
            before the run starts.
        **budget
            Stop after this many more units of a counter, e.g. ``generations=50`` or
            ``env_steps=2_000_000`` (the first one reached ends the run). None: until stop().
        """
        self._make_target(budget)  # a bad budget raises before the schedule is taken
        if controls_schedule is not None:
            self.schedule_controls(controls_schedule)
        return super().start(paused, **budget)

    def _run_ended(self) -> None:
        self._quiesce()
        if self._keeper is not None:  # stopped or finished: leave where it ended
            self._keeper.save(self)

    def schedule_controls(self, record) -> ControlSchedule:
        """Apply a record of control changes at the iterations that first used them (see
        :meth:`start`); a bad record raises and changes nothing."""
        self._schedule = ControlSchedule(record, self.controls, self.iteration_column)
        return self._schedule

    def _run_iteration(self) -> dict[str, Any]:
        with self._iter_lock:
            if self._schedule is not None and (due := self._schedule.due(self.iteration + 1)):
                self.controls.apply(due, origin="schedule")
            snapshot = self.controls.snapshot()
            changes = self.controls.changes_since(self._applied_version)
            t0 = time.perf_counter()
            row = self._iteration(snapshot)
            elapsed = time.perf_counter() - t0
            self.iteration += 1
            self.wall_time += elapsed
            self._log_changes(changes, snapshot.version)
            row = {self.iteration_column: self.iteration, "wall_time": self.wall_time,
                   "controls_version": snapshot.version, **row}
            self._records.append(row)
            observers = list(self._observers)
        for fn in observers:
            try:
                fn(row)
            except Exception:  # an observer must never end a run
                log.exception("observer %r failed", fn)
        if self._keeper is not None:
            self._keeper.after_iteration(self)
        return row

    def _log_changes(self, changes: list[ControlChange], version: int) -> None:
        for c in changes:
            if c.version > version:
                continue
            self._change_log.append({
                self.iteration_column: self.iteration, "wall_time": self.wall_time,
                "env_steps": self._progress().get("env_steps", np.nan),
                "name": c.name, "old": c.old, "new": c.new, "version": c.version,
                "origin": c.origin,
            })
        self._applied_version = version

    # -- observing ---------------------------------------------------------------------------
    def add_observer(self, fn: Callable[[dict], None]) -> Callable[[dict], None]:
        """Call ``fn(row)`` after every iteration (on the runner's thread; keep it quick)."""
        with self._iter_lock:
            self._observers.append(fn)
        return fn

    def remove_observer(self, fn: Callable[[dict], None]) -> None:
        with self._iter_lock:
            if fn in self._observers:
                self._observers.remove(fn)

    @property
    def history(self) -> pd.DataFrame:
        import pandas as pd  # here: ~0.3 s a run's start need not wait for (issue 26)

        return pd.DataFrame(list(self._records))

    @property
    def records(self) -> list[dict[str, Any]]:
        """History rows as dicts (a shallow copy; cheap to poll)."""
        return list(self._records)

    @property
    def changes(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(list(self._change_log), columns=self.change_columns)

    @property
    def change_columns(self) -> list[str]:
        """The columns of :attr:`changes` (and of the run folder's ``changes.csv``)."""
        return [self.iteration_column, "wall_time", "env_steps", "name", "old", "new",
                "version", "origin"]

    def panels(self) -> list[PlotPanel]:
        """The panels the run's plot draws: the return panels, then the runner's own
        ``plot_panels`` (:mod:`esnb.runners.plotspec`)."""
        from esnb.runners.plotspec import panels_for

        return panels_for(self)

    @property
    def dashboard_link(self) -> str | None:
        """The Dask dashboard of the runner's cluster (None inline, or without one)."""
        try:
            return getattr(getattr(self, "executor", None), "dashboard_link", None) or None
        except Exception:  # noqa: BLE001 - no dashboard (bokeh missing on the scheduler)
            return None

    def plot(self):
        """A figure of the history: the one the live view draws (bokeh); the same as
        ``esnb.ui.plot(runner)``. Runners describe their panels (:meth:`panels`); the view
        side's :attr:`drawing` (:func:`esnb.views.figures.plot`) draws them."""
        return load(self.drawing)(self)

    #: the last :meth:`evaluate_final`: mean, std, episodes and where the run was; plots mark it
    final_evaluation: dict[str, Any] | None = None

    def evaluate_final(self, episodes: int = 10) -> np.ndarray:
        """``self.evaluate(episodes)``, kept in :attr:`final_evaluation` for the plots."""
        returns = np.asarray(self.evaluate(episodes), dtype=np.float64)
        last = self._records[-1] if self._records else {}
        where = {k: last[k] for k in (self.iteration_column, "wall_time", "env_steps") if k in last}
        self.final_evaluation = {**where, "mean": float(returns.mean()),
                                 "std": float(returns.std()), "episodes": int(returns.size)}
        return returns

    # -- the policy outside the run ------------------------------------------------------------
    def acting_policy(self):
        """The current policy as data (:class:`~esnb.nets.acting.ActingPolicy`): what
        ``esnb export`` writes and :meth:`video` renders.

        Raises
        ------
        ValueError
            When the algorithm learns no single policy of that kind (says what it holds).
        """
        raise ValueError(f"{self.algorithm} has no policy esnb can export or render: it holds "
                         f"{self.holds}")

    def video(self, episodes: int = 1, seed: int = 0, max_steps: int | None = None,
              size: tuple[int, int] | None = None, wait: bool = True):
        """Episodes of the current policy, rendered in another process while the run goes on.

        Returns a :class:`~esnb.views.video.Video` (shown inline by a notebook, ``.save("x.mp4")``
        or ``.gif``); ``wait=False`` returns at once and the video fills in when ready
        (``.result()`` waits). Episode ``k`` starts from ``reset(seed=seed + k)``; ``max_steps``
        caps each one (default: the run's own episode length); ``size`` is ``(width,
        height)`` (default: the environment's). A checkpoint's policy:
        ``type(runner).load(path, client=False).video()``, or ``esnb play RUN --video``.
        """
        render = load(self.renderer)  # the view side's (esnb.views.video.render)
        with self._iter_lock:  # between iterations: parameters and statistics agree
            policy, iteration = self.acting_policy(), self.iteration
        cfg = self.config
        video = render(policy, cfg.env, episodes=episodes, seed=seed,
                       max_steps=max_steps or getattr(cfg, "max_episode_steps", None),
                       env_kwargs=getattr(cfg, "env_kwargs", None), size=size, wait=False)
        video.iteration = iteration
        return video.result() if wait else video

    # -- checkpoints -------------------------------------------------------------------------
    def save(self, path) -> Any:
        """Write a checkpoint; safe to call while running (it waits for the iteration)."""
        from esnb.runners.checkpoint import save_runner

        return save_runner(self, path)

    @classmethod
    def load(cls, path, client=None, **overrides) -> Runner:
        """Rebuild a runner from :meth:`save`'s file and continue from where it stopped.

        ``overrides`` replace settings that do not change the run's identity (and ``name``);
        the controls come back with the values they had. A damaged, foreign or inconsistent
        file raises :class:`~esnb.record.CheckpointError`.
        """
        from esnb.runners.checkpoint import load_runner

        return load_runner(cls, path, client, **overrides)

    def keep_checkpoints(self, path, every: float = 60.0, keep: int = 0) -> None:
        """Write a checkpoint to ``path`` every ``every`` seconds while the run goes (between
        iterations), and when it stops or finishes (``stop()`` included); with ``keep``, also
        keep one every ``keep`` iterations for :meth:`fork`."""
        from esnb.runners.checkpoint import CheckpointKeeper

        self._keeper = CheckpointKeeper(path, every, keep)

    def fork(self, at: int, name: str | None = None, **changes) -> Runner:
        """A new run from this run's kept checkpoint nearest before iteration ``at``, with
        ``changes`` to its live controls, on this run's executor; it records this run as its
        parent (see :mod:`esnb.runners.fork`, whose ``fork`` takes another ``client``)."""
        from esnb.runners.fork import fork

        if self._keeper is None:
            raise ValueError("this run keeps no checkpoints to fork from: "
                             "keep_checkpoints(path, keep=k) before it runs")
        return fork(self._keeper.path.parent, at, client=getattr(self, "executor", None),
                    name=name, **changes)

    @property
    def saved_target(self) -> dict[str, float]:
        """The budget (absolute counter values) the run was going to when it was saved."""
        return dict(self._saved_target)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name!r} state={self.state} "
                f"{self.iteration_column}={self.iteration}>")

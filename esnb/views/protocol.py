"""One view of a run: what the drawing, the widgets and the trackers read of it.

A local :class:`~esnb.runners.base.Runner` and an attached
:class:`~esnb.remote.attach.AttachedRun` (a run of another process, read over its scheduler)
both implement :class:`SteeredRun`, structurally: neither imports this module. The figure
(:func:`esnb.views.figures.plot`), the live plot, the control panel and the dashboard
(:mod:`esnb.ui`) are typed against these protocols, so whatever shows one shows the other.

The protocols are not ``runtime_checkable``: an ``isinstance`` check would read every
property, and an attached run's properties ask the run over the network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd

    from esnb.controls import Control
    from esnb.runners.plotspec import PlotPanel


class ControlsView(Protocol):
    """A run's controls as a view reads and sets them (:class:`esnb.controls.Controls`, or
    an attached run's, validated by the run itself)."""

    @property
    def schema(self) -> tuple[Control, ...]:
        """Every control's declaration (name, kind, bounds, live or fixed, help)."""
        ...

    @property
    def version(self) -> int:
        """Increases with every accepted change."""
        ...

    def as_dict(self) -> dict[str, Any]:
        """The values in force."""
        ...

    def set(self, **values: Any) -> int:
        """Change live controls (a bad value raises ``ValueError`` and changes nothing);
        returns the new version."""
        ...


class RunView(Protocol):
    """What a view reads of a run, local or attached.

    Attributes
    ----------
    name : str
        The run's name (its folder's, for a run of the command line).
    title : str
        The algorithm as people read it (``OpenAI-ES``, ``Ape-X``).
    algorithm : str
        The algorithm as checkpoints name it.
    iteration_column : str
        The history column that counts iterations (``generation``, ``learner_step``).
    controls : ControlsView
        Live and fixed hyperparameters.
    final_evaluation : dict or None
        The final evaluation (mean, std, episodes, where the run was), once there is one.
    """

    name: str
    title: str
    algorithm: str
    iteration_column: str
    controls: ControlsView
    final_evaluation: dict[str, Any] | None

    @property
    def history(self) -> pd.DataFrame:
        """One row per iteration."""
        ...

    @property
    def records(self) -> list[dict[str, Any]]:
        """The history's rows as dicts (cheap to poll: a view appends the new ones)."""
        ...

    @property
    def changes(self) -> pd.DataFrame:
        """Every accepted control change, with the iteration that first used it and its
        ``origin``."""
        ...

    @property
    def state(self) -> str:
        """``idle running paused stopped finished failed``; an attached run also
        ``ended`` (its process wrote its folder) and ``detached``."""
        ...

    @property
    def running(self) -> bool:
        """Whether the run's thread goes on."""
        ...

    @property
    def iteration(self) -> int:
        """Iterations done."""
        ...

    @property
    def wall_time(self) -> float:
        """Seconds spent in iterations."""
        ...

    @property
    def error(self) -> BaseException | None:
        """Why the run failed, while it is failed."""
        ...

    @property
    def dashboard_link(self) -> str | None:
        """The Dask dashboard of the run's cluster (None: the run is inline)."""
        ...

    def panels(self) -> list[PlotPanel]:
        """The plot panels of the run (the return panels, then its own)."""
        ...

    def plot(self) -> Any:
        """The figure of the history so far (bokeh)."""
        ...


class SteeredRun(RunView, Protocol):
    """A :class:`RunView` the control panel also steers: the lifecycle buttons and the
    "record episode" button."""

    def start(self, paused: bool = False, **budget: float) -> Any:
        """Run on a background thread (an attached run refuses: its process started it)."""
        ...

    def pause(self) -> None:
        """Hold after the current iteration."""
        ...

    def resume(self) -> None:
        """Go on after a pause."""
        ...

    def step(self, n: int = 1, block: bool = True) -> Any:
        """``n`` iterations of a paused run."""
        ...

    def stop(self) -> None:
        """End after the current iteration."""
        ...

    def wait(self, timeout: float | None = None) -> Any:
        """Block until the run has ended."""
        ...

    def acting_policy(self) -> Any:
        """The policy as data; ``ValueError`` (saying why) when there is none to render."""
        ...

    def video(self, episodes: int = 1, seed: int = 0, max_steps: int | None = None,
              size: tuple[int, int] | None = None, wait: bool = True) -> Any:
        """Episodes of the current policy, rendered in another process."""
        ...

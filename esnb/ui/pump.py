"""The one pump that moves a runner's progress into widgets: a daemon thread.

Why a thread and not the kernel's IOLoop (``kernel.io_loop`` / a periodic callback):

- the kernel's event loop does not turn while a cell runs, so a periodic callback would freeze
  the plot exactly while the user waits on the run (``runner.wait()``, ``time.sleep``, a long
  cell) and in ``nbclient``/``papermill`` executions, where cells run back to back;
- ipykernel sends every iopub message through ``IOPubThread`` (a thread-safe socket), so comm
  messages from any thread reach the frontend. Checked with ipykernel 7.4 / ipywidgets 8.1:
  widget updates made on a thread arrive while the kernel is idle *and* while a cell is busy;
- ``jupyter_bokeh.BokehModel`` sends one ``PATCH-DOC`` as several consecutive comm messages
  and only for document changes it did not receive from the browser, so the document must
  have exactly one writer: this thread. Widget callbacks (on the kernel's main thread) never
  touch a bokeh document; they call ``controls.set``/``runner.pause()`` and return.

Every registered view has a ``_pump(now)`` method; the thread calls them in turn about four
times a second and each view throttles itself further. The thread ends when the last view is
closed and starts again with the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

log = logging.getLogger("esnb.ui")


class View(Protocol):
    def _pump(self, now: float) -> None: ...


class Pump:
    """A daemon thread calling ``view._pump(now)`` for every registered view.

    Parameters
    ----------
    interval : float
        Seconds between rounds.
    """

    def __init__(self, interval: float = 0.25):
        self.interval = float(interval)
        self._views: list[View] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures: dict[int, str] = {}

    def add(self, view: View) -> None:
        with self._lock:
            if view not in self._views:
                self._views.append(view)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="esnb-ui-pump",
                                                daemon=True)
                self._thread.start()

    def remove(self, view: View) -> None:
        with self._lock:
            if view in self._views:
                self._views.remove(view)
            self._failures.pop(id(view), None)

    def wake(self) -> None:
        """Run the next round now instead of after the interval."""
        self._wake.set()

    def on_pump_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def __contains__(self, view: View) -> bool:
        with self._lock:
            return view in self._views

    def _run(self) -> None:
        while True:
            with self._lock:
                views = list(self._views)
                if not views:
                    self._thread = None
                    return
            for view in views:
                try:
                    view._pump(time.monotonic())
                except Exception as exc:  # one broken view must not stop the others
                    message = f"{type(exc).__name__}: {exc}"
                    if self._failures.get(id(view)) != message:  # log once, not 4x a second
                        self._failures[id(view)] = message
                        log.exception("updating %s failed", type(view).__name__)
            self._wake.wait(self.interval)
            self._wake.clear()


PUMP = Pump()

"""SIGINT and SIGTERM during a run of the command line (or of any caller on the main thread):
the first stops the run after its current iteration, which then writes its checkpoint and its
folder; the line printed says where it stopped and the command that resumes it (exit 130 /
143); a second Ctrl-C exits at once."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import Any


class Interrupts:
    """SIGINT and SIGTERM from the moment a command starts its cluster: the first stops the run
    after its current iteration (the runner then writes its checkpoint), or, before the run
    has started, keeps it from starting; a second SIGINT exits at once.

    The workers of esnb's own LocalCluster ignore both signals (:mod:`esnb.cluster.signals`):
    a terminal sends Ctrl-C to the whole process group, and they are the driver's to stop.
    Off the main thread (a run inside a task) nothing is caught.
    """

    def __init__(self, runner=None):
        self.runner = runner
        self.signum: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is not threading.main_thread():
            return self  # a run inside a task (a sweep's): its caller's signals, not its own
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def watch(self, runner) -> None:
        """From now on a signal stops ``runner``."""
        self.runner = runner
        if self.signum is not None:
            runner.stop()

    def _handle(self, signum, frame) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            sys.stderr.write("\nesnb: interrupted twice: exiting now\n")
            os._exit(130)
        if self.signum is None:
            self.signum = signum
            what = ("stopping after the current iteration and writing a checkpoint"
                    if self.runner is not None and self.runner.running
                    else "not starting the run")
            sys.stderr.write(f"\nesnb: {signal.Signals(signum).name}: {what} (Ctrl-C again "
                             f"to quit at once)\n")
            if self.runner is not None:
                self.runner.stop()

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum) if self.signum is not None else 0


def resume_command(argv0: str, command: str, folder: Path) -> str:
    """The command that resumes the run in ``folder``."""
    return f"{argv0} {command} --resume {shlex.quote(str(folder))}"


def stopped_line(runner, signum: int, command: str) -> str:
    """The one line printed on an interrupt: where the run stopped, how to resume it."""
    progress = runner._progress()
    where = f"{runner.iteration_column} {runner.iteration:,}"
    if "env_steps" in progress:
        where += f", {int(progress['env_steps']):,} env steps"
    return (f"esnb: {signal.Signals(signum).name}: {runner.title} run stopped at {where}; "
            f"checkpoint written; resume with: {command}")

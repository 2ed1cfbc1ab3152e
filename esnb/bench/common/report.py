"""What every benchmark prints around its figures: the machine's load when it started and
when it ended (the machine is shared: a figure taken under load says so), the time taken, and
the JSON file of its results (strict JSON: NaN and infinities are written as null); the word
a paper's claim gets in the notebooks' verdicts (:func:`verdict`)."""

from __future__ import annotations

import os
import time
from typing import Any

from esnb.record import write_json

#: a load average above this (on esnb's 2-core machine) is worth a note beside the figures
BUSY = 2.5


class Session:
    """One benchmark run: started now, at the machine's current load."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.load = os.getloadavg()[0]

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0

    def done(self, args, results: Any, rerun: str | None = None) -> int:
        """Print the time taken and the load, a note if it was busy, write ``--json``."""
        now = os.getloadavg()[0]
        print(f"  ({self.seconds:.0f} s; load average {self.load:.1f} -> {now:.1f})")
        if max(self.load, now) > BUSY:
            print(f"  note: measured under load (load average > {BUSY}); times depend on it"
                  + (f", re-run on a quiet machine: {rerun}" if rerun else ""))
        if getattr(args, "json", None):
            write_json(args.json, results)
        return 0


def verdict(ok: bool, agree: bool = True) -> str:
    """Whether esnb's runs bear a paper's claim out: "Agrees."/"Disagrees." (``agree``), or
    "yes"/"no"."""
    return ("Agrees." if ok else "Disagrees.") if agree else ("yes" if ok else "no")

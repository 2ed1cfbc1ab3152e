"""What every benchmark prints around its figures: the machine's load when it started and
when it ended (the machine is shared: a figure taken under load says so), the time taken, and
the JSON file of its results (strict JSON: NaN and infinities are written as null)."""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

#: a load average above this (on esnb's 2-core machine) is worth a note beside the figures
BUSY = 2.5


def strict(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    if hasattr(obj, "item") and getattr(obj, "shape", None) == ():  # numpy scalars
        return strict(obj.item())
    return obj


def write_json(path: str, obj: Any) -> None:
    """Write ``obj`` as strict JSON (readable by any parser: NaN becomes null)."""
    with open(path, "w") as f:
        json.dump(strict(obj), f, indent=2, allow_nan=False, default=str)


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

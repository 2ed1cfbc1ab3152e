"""The progress bar of a run: its budget's counter, the latest returns, the learner's updates,
the replay's fill and one named throughput figure."""

from __future__ import annotations

import sys
import time

from tqdm import tqdm

#: the bar: counters as whole numbers with separators (``1,200/2,000 learner steps``), no tqdm
#: rate (the one steps/s figure is in the postfix, named), the percentage kept
BAR_FORMAT = ("{percentage:3.0f}%|{bar}| {n:,.0f}/{total:,.0f}{unit} "
              "[{elapsed}<{remaining}{postfix}]")


def budget_note(runner, unit: str, total: float) -> str | None:
    """The line said before the bar when the budget is not counted in whole iterations: the
    run stops at the first whole one that reaches it, so it may pass it."""
    iteration = runner.iteration_column.replace("_", " ")
    if unit.rstrip("s") == runner.iteration_column:
        return None
    return (f"esnb: {runner.title} runs whole {iteration}s: it stops at the first one that "
            f"reaches {total:,.0f} {unit.replace('_', ' ')} (it may pass it)")


def count(v: float) -> str:
    """A counter for the postfix: ``980``, ``12.3k``, ``1.20M``."""
    return f"{v:,.0f}" if abs(v) < 10_000 else tqdm.format_sizeof(v)


class Progress:
    """A tqdm bar over the budget's counter, read from the runner's ``_progress()`` (the same
    counters the budget ends on), with the latest returns, the learner's updates and the
    replay's fill where the run has them, and one throughput figure: env steps per second of
    wall time since the first iteration (startup left out), named.

    A run that passes its budget (the last generation of an env-step budget) ends at 100%: the
    total grows to where it ended rather than the bar losing its percentage.

    With ``lines`` (a label, e.g. ``"impala-pong seed 1"``) there is no bar: one plain line
    each time the counter passes another ``every`` of the total (a whole part of it: 1/20,
    1/4 ...), and at its end, with the time left at the rate so far. That is for output read
    later or in a file (a bench's seeds of hours, a batch job's log), where a bar's carriage
    returns pile up.
    """

    def __init__(self, runner, unit: str, total: float | None, disable: bool = False,
                 file=None, lines: str | None = None, every: float = 0.05):
        self.runner, self.unit = runner, unit
        self.bar = tqdm(total=total, unit=" " + unit.replace("_", " "), dynamic_ncols=True,
                        disable=disable or lines is not None, smoothing=0.1, file=file,
                        bar_format=BAR_FORMAT if total else None)
        self.label, self.file = lines, file
        # lines at whole parts of the total (counted in integers: 0.25 // 0.05 is 4.0 in floats,
        # which said the 25% line twice)
        self.parts = max(1, round(1 / every))
        self.next_part = 0  # the part of the total at which the next line is said
        self.said: tuple[float, str] | None = None  # the counter and postfix of the last row
        self.told: float | None = None  # the counter of the last line said
        self.counted: tuple[float, float] | None = None  # (time, counter) of the first row
        self.last = 0.0
        self.first: tuple[float, float] | None = None  # (time, env steps) of the first row
        self.capacity = getattr(runner.config, "capacity", None)  # a replay's rows, if any
        runner.add_observer(self)

    def rate(self, row: dict) -> float | None:
        steps = row.get("env_steps")
        if steps is None or steps != steps:
            return None
        now = time.perf_counter()
        if self.first is None:
            self.first = (now, float(steps))
            return None
        seconds = now - self.first[0]
        return (float(steps) - self.first[1]) / seconds if seconds > 0 else None

    def postfix(self, row: dict) -> str:
        post = []
        for key, label in (("return_mean", "ret"), ("eval_return", "eval")):
            v = row.get(key)
            if v is not None and v == v:
                post.append(f"{label} {v:,.0f}" if abs(v) >= 100 else f"{label} {v:.3g}")
        updates = row.get("learner_steps")
        if updates is not None and self.unit != "learner_steps":
            post.append(f"{count(updates)} updates")
        fill = row.get("replay_size")
        if fill is not None:
            post.append(f"replay {count(fill)}" + (f"/{count(self.capacity)}"
                                                   if self.capacity else ""))
        rate = self.rate(row)
        if rate is not None:
            post.append(f"{tqdm.format_sizeof(rate)} env steps/s")
        return ", ".join(post)

    def __call__(self, row: dict) -> None:
        now = float(self.runner._progress().get(self.unit, 0))
        if self.label is not None:
            self._line(now, row)
            return
        if self.bar.total is not None and now >= self.bar.total:
            # the last row: 100% (the total grows to a passed budget rather than the bar losing
            # its percentage), drawn once, by close()
            self.bar.total = max(self.bar.total, now)
            self.bar.n = now
        else:
            self.bar.update(now - self.last)
        self.last = now
        self.bar.set_postfix_str(self.postfix(row), refresh=False)

    def _line(self, now: float, row: dict) -> None:
        clock = time.perf_counter()
        if self.counted is None:
            self.counted = (clock, now)
        self.said = (now, self.postfix(row))
        total = self.bar.total
        if total and now * self.parts >= self.next_part * total:
            self.next_part = int(now * self.parts // total) + 1
            self._say(now, clock)

    def _say(self, now: float, clock: float) -> None:
        total = self.bar.total
        unit = self.unit.replace("_", " ")
        head = (f"{min(now / total, 1):.0%} ({now:,.0f}/{total:,.0f} {unit})" if total
                else f"{now:,.0f} {unit}")
        parts = [head] + ([self.said[1]] if self.said and self.said[1] else [])
        t0, n0 = self.counted or (clock, now)
        if total and now < total and now > n0 and clock > t0:
            parts.append(f"{tqdm.format_interval((total - now) * (clock - t0) / (now - n0))} "
                         f"left")
        print(f"esnb: {self.label}: " + ", ".join(parts), file=self.file or sys.stderr,
              flush=True)
        self.told = now

    def close(self) -> None:
        if self.label is not None and self.said is not None and self.said[0] != self.told:
            self._say(self.said[0], time.perf_counter())  # where it stopped (a signal), once
        self.bar.close()

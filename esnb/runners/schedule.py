"""A recorded record of control changes, applied again at the same iterations.

Every run writes the control changes it made (``runner.changes``, a run folder's
``changes.csv``): the iteration that first used each change, the control, its new value. A
:class:`ControlSchedule` reads such a record and, given to ``runner.start(controls_schedule=)``
(or ``esnb train <algo> --controls changes.csv``), sets each change just before the iteration
that first used it, through ``runner.controls.set`` like a change from a widget: validated, and
recorded again. A steered ES run replayed from its record gives bitwise the same theta (ES
reads its controls once per generation, from one snapshot); an asynchronous run gets the same
changes at the same iterations, not the same numbers.

The whole record is checked when it is read, before anything runs: an unknown or fixed
control, a value out of its range or an iteration that is not a positive integer is one line
of error naming the row, and the run does not start.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from esnb.controls import Control, Controls


class ControlSchedule:
    """Control changes by iteration: ``{iteration: {name: value}}``.

    Parameters
    ----------
    rows : iterable of mapping, a pandas.DataFrame, or a path of a ``changes.csv``
        Each with the iteration (``iteration_column``, or ``iteration``), ``name`` and
        ``new``; values given as text (a CSV) are read by the control's kind.
    controls : Controls
        The runner's controls: every change is validated against them now.
    iteration_column : str
        The runner's iteration column (``generation``, ``learner_step``, ...).
    """

    def __init__(self, rows, controls: Controls, iteration_column: str = "iteration"):
        self.changes: dict[int, dict[str, Any]] = {}
        schema = {c.name: c for c in controls.schema}
        records, columns, source = _rows(rows, iteration_column)
        if columns is not None:
            lacking = [c for c in ("name", "new") if c not in columns]
            if iteration_column not in columns and "iteration" not in columns:
                lacking.insert(0, iteration_column)
            if lacking:
                shown = ", ".join(repr(c) for c in columns[:5]) or "none"
                raise ValueError(f"{source or 'the controls schedule'} lacks the column(s) "
                                 f"{', '.join(lacking)} (its columns: {shown}): a control "
                                 f"record has {iteration_column}, name, new, as a run "
                                 f"folder's changes.csv")
        for n, row in enumerate(records, start=1):
            where = f"{source or 'controls schedule'} row {n}"
            it = row.get(iteration_column, row.get("iteration"))
            try:
                iteration = int(it)
                if iteration != float(it) or iteration < 1:
                    raise ValueError
            except (TypeError, ValueError):
                raise ValueError(f"{where}: the iteration ({iteration_column}) must be an "
                                 f"integer >= 1, got {it!r}") from None
            name = row.get("name")
            control = schema.get(name)
            if control is None:
                raise ValueError(f"{where}: unknown control {name!r}; live controls: "
                                 f"{', '.join(c.name for c in controls.schema if c.live)}")
            if not control.live:
                raise ValueError(f"{where}: {name} is fixed for a run and cannot be scheduled")
            try:
                value = control.validate(_read(control, row.get("new")))
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
            self.changes.setdefault(iteration, {})[name] = value

    def due(self, iteration: int) -> dict[str, Any]:
        """The changes first used by ``iteration`` (empty if none)."""
        return dict(self.changes.get(iteration, {}))

    def __len__(self) -> int:
        return sum(len(v) for v in self.changes.values())

    def __repr__(self) -> str:
        return f"ControlSchedule({len(self)} changes at iterations {sorted(self.changes)})"


def _rows(rows, iteration_column: str = "iteration"
          ) -> tuple[list[Mapping[str, Any]], list[str] | None, str | None]:
    """The rows of ``rows``, their columns (None: rows without a table) and the file they
    were read from (None: given in memory)."""
    if isinstance(rows, str | Path):
        import pandas as pd

        path = Path(rows)
        if path.is_dir():
            path = path / "changes.csv"
        if not path.exists():
            raise ValueError(f"{path}: no such file (a control record: a run folder, or its "
                             f"changes.csv)")
        what = (f"a control record is a CSV with the columns {iteration_column}, name, new "
                f"(a run folder's changes.csv)")
        try:
            # values stay text: each is read by its control's kind, not guessed by pandas
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except pd.errors.EmptyDataError:
            raise ValueError(f"{path} is empty: {what}") from None
        except (UnicodeDecodeError, pd.errors.ParserError, OSError) as exc:
            why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ValueError(f"{path} is no CSV text ({why}): {what}") from None
        return frame.to_dict("records"), [str(c) for c in frame.columns], str(path)
    if hasattr(rows, "to_dict"):
        return rows.to_dict("records"), [str(c) for c in rows.columns], None
    return list(rows), None, None


def _read(control: Control, value: Any) -> Any:
    """A value of ``control`` from a record (text in a CSV; as it was in memory)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if control.kind == "bool":
        return {"True": True, "False": False}.get(text, text)
    if control.kind == "int":
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if math.isfinite(number) and number.is_integer() else number
    if control.kind == "float":
        try:
            return float(text)
        except ValueError:
            return text
    if control.kind == "choice":
        for choice in control.choices:  # a choice of numbers is written as text
            if str(choice) == text:
                return choice
    return text

"""A run folder's ``history.csv`` and ``changes.csv`` while the run goes (issue 36).

A long run (two hours of Atari) should be readable, plottable and comparable before it ends
and after a crash, without a tracker. :class:`CsvRows` appends the rows a run has made since
its last call to a CSV file: one short write per iteration, no pandas. When a row brings a
column the file has not got (an evaluation's first ``eval_return``), the file is written anew
with every column, so the file always reads as one table. The run's end writes both files
once more with pandas (:func:`esnb.record.write_run_folder`), as before.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _cell(value: Any) -> Any:
    """A value as pandas' ``to_csv`` writes it: missing and NaN empty, numpy scalars plain."""
    if value is None:
        return ""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return ""
    return value


class CsvRows:
    """Rows of dicts appended to the CSV file ``path`` as they come.

    Parameters
    ----------
    path : str or Path
        The file; written anew by the first :meth:`write` (a resumed run's history holds its
        earlier rows too).
    columns : sequence of str, optional
        Fixed columns (``changes.csv``'s); default: the rows' keys in order of first
        appearance, as ``pandas.DataFrame(rows)`` orders them.
    """

    def __init__(self, path, columns: Sequence[str] | None = None):
        self.path = Path(path)
        self.fixed = list(columns) if columns is not None else None
        self.columns: list[str] = []
        self.written = 0  # rows of the caller's list in the file
        self.fresh = True

    def write(self, rows: Sequence[dict[str, Any]]) -> None:
        """Bring the file up to ``rows`` (the run's whole list so far)."""
        new = rows[self.written:]
        if not new and not self.fresh:
            return
        columns = self.fixed if self.fixed is not None else self._columns(rows, new)
        if self.fresh or columns != self.columns:
            self._rewrite(rows, columns)
        else:
            with open(self.path, "a", newline="") as f:
                self._rows(csv.writer(f), new, columns)
        self.columns, self.written, self.fresh = columns, len(rows), False

    def _columns(self, rows, new) -> list[str]:
        if self.fresh:
            new = rows
        columns = list(self.columns)
        seen = set(columns)
        for row in new:
            for key in row:
                if key not in seen:
                    seen.add(key)
                    columns.append(key)
        return columns

    def _rewrite(self, rows, columns: list[str]) -> None:
        # a reader never sees half a file: written beside it, then moved over it
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        with open(tmp, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(columns)
            self._rows(out, rows, columns)
        os.replace(tmp, self.path)

    @staticmethod
    def _rows(out, rows, columns: list[str]) -> None:
        for row in rows:
            out.writerow([_cell(row.get(key)) for key in columns])

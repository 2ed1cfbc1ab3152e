"""Futures of the inline executor, with the interface of Dask's: :class:`Done` (a call that
has run), and :class:`Completions` (futures in the order they finished)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any


class Done:
    """A finished inline task with the interface of a Dask future."""

    def __init__(self, value: Any = None, error: BaseException | None = None, key: str = ""):
        self._value = value
        self._error = error
        self.key = key or f"inline-{uuid.uuid4().hex}"
        self.status = "error" if error is not None else "finished"

    @classmethod
    def of(cls, fn: Callable, *args, key: str = "", **kwargs) -> Done:
        """Run ``fn`` now; an exception is kept (and raised by :meth:`result`), as Dask does."""
        try:
            return cls(fn(*args, **kwargs), key=key)
        except Exception as exc:  # noqa: BLE001 - delivered through result()/exception()
            return cls(error=exc, key=key)

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> Any:
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._error

    def cancel(self) -> None:
        pass

    def release(self) -> None:
        pass


class Completions:
    """Futures in completion order: ``add(future)``, ``next_batch(block=False)``, ``count``."""

    def __init__(self):
        self._done: list = []

    def add(self, future) -> None:
        self._done.append(future)

    def next_batch(self, block: bool = False) -> list:
        out, self._done = self._done, []
        return out

    def count(self) -> int:
        return len(self._done)

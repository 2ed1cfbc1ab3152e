"""Channels: a named value a run sets and its tasks read (exploration, published parameters,
the replay's generation). :class:`Box` in this process, :class:`DaskChannel` (a Dask
``Variable``, importing distributed only when made) on a cluster; both are picklable arguments
of tasks."""

from __future__ import annotations

from typing import Any


class Box:
    """An inline channel: the latest value set, read by inline tasks."""

    def __init__(self, name: str):
        self.name = name
        self._value: Any = None
        self._set = False

    def set(self, value: Any) -> None:
        self._value, self._set = value, True

    def publish(self, value: Any) -> None:
        """Set a (possibly large) value for tasks to read (Dask: sent once, as a task)."""
        self.set(value)

    def get(self, timeout: float | None = None) -> Any:
        if not self._set:
            raise TimeoutError(f"channel {self.name!r} holds no value yet")
        return self._value

    def delete(self) -> None:
        self._value, self._set = None, False


class DaskChannel:
    """A named value on the scheduler (a Dask ``Variable``) that tasks read.

    ``set`` holds a small value; ``publish`` sends a large one once as a task result (through
    ``executor.put``) and points the variable at it (the previous one is released). Picklable: a
    task receives it as an argument and reads it with its worker's client.
    """

    def __init__(self, name: str, client=None, executor=None):
        from distributed import Variable

        self.name = name
        self._var = Variable(name, client=client)
        self._executor = executor
        self._published = None

    def __reduce__(self):
        return DaskChannel, (self.name,)

    def set(self, value: Any) -> None:
        self._var.set(value)

    def publish(self, value: Any) -> None:
        fut = self._executor.put(value, prefix=self.name)
        self._var.set(fut)
        old, self._published = self._published, fut
        if old is not None:
            old.release()

    def get(self, timeout: float | None = None) -> Any:
        from distributed import Future

        value = self._var.get(timeout=timeout)
        if isinstance(value, Future):
            value = value.result(timeout=timeout)
        return value

    def delete(self) -> None:
        if self._published is not None:
            self._published.release()
            self._published = None
        try:
            self._var.delete()
        except Exception:  # noqa: BLE001 - the scheduler may be gone already
            pass

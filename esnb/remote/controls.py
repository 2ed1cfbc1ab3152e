"""The controls of an attached run (:class:`AttachedControls`): the run's declarations and
values, read from the run; a change checked here only for whether it can travel, then
validated by the run's own controls and recorded with the kernel's origin."""

from __future__ import annotations

import json
from typing import Any

from esnb.controls import Control


class AttachedControls:
    """The run's controls seen from an attached kernel: ``set``, ``[name]``, ``as_dict()``,
    ``schema`` as :class:`esnb.controls.Controls` has them; values are read from the run."""

    def __init__(self, run: Any, schema: list[dict[str, Any]], values: dict[str, Any]):
        self._run = run
        self._last = dict(values)  # the values last read from the run
        self._schema = {d["name"]: Control(**{**d, "choices": tuple(d.get("choices", ()))})
                        for d in schema}

    @property
    def schema(self) -> tuple[Control, ...]:
        return tuple(self._schema.values())

    def __iter__(self):
        return iter(self._schema.values())

    def __contains__(self, name: str) -> bool:
        return name in self._schema

    def as_dict(self) -> dict[str, Any]:
        """The values in force; once the run has ended, the ones it ended with (its
        summary.json): a dashboard left open on an ended run still reads them."""
        reply = self._run._ask("controls")
        if reply is not None:
            self._last = dict(reply["values"])
            return dict(self._last)
        try:
            return dict(json.loads((self._run.folder / "summary.json").read_text())["controls"])
        except (OSError, ValueError, KeyError):  # ended without its folder: the last seen
            return dict(self._last)

    def __getitem__(self, name: str) -> Any:
        return self.as_dict()[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.as_dict().get(name, default)

    @property
    def version(self) -> int:
        """The run's controls version (the last one seen, once the run has ended)."""
        status = self._run._status()
        if status is None:
            return int(self._run._state[1].get("version", 0))
        return int(status["version"])

    def set(self, **values: Any) -> int:
        """Set live controls of the run: validated by the run (a bad value raises the
        ValueError a local ``set`` raises, and changes nothing); returns the new version."""
        plain = {k: (v.item() if hasattr(v, "item") else v) for k, v in values.items()}
        self._check_sendable(plain)
        version = int(self._run._call("set", values=plain, origin=self._run.origin)["version"])
        self._run._state = (-1e9, {})  # the next read asks again
        return version

    def _check_sendable(self, values: dict[str, Any]) -> None:
        """Each value can travel to the run (a plain number, string, bool, None or a list of
        them, an integer within 64 bits); one that cannot is refused here, named, with the
        message the run's own check gives it where the control is known."""
        for name, value in values.items():
            if _sendable(value):
                continue
            control = self._schema.get(name)
            if control is not None:
                control.validate(value)  # the run's own line: "sigma must be ..., got ..."
            from esnb.controls import shown

            raise ValueError(f"{name}: {shown(value)} cannot be sent to the run (plain "
                             f"numbers, strings, booleans, lists of them)")

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"AttachedControls({body})"


def _sendable(value: Any) -> bool:
    """Whether ``value`` travels as a control value (msgpack's plain kinds)."""
    if value is None or isinstance(value, bool | float | str):
        return True
    if isinstance(value, int):
        return -2**63 <= value < 2**64
    if isinstance(value, list | tuple):
        return all(_sendable(v) for v in value)
    return False

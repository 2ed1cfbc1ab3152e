"""Live hyperparameters: a schema, validation, and a thread-safe versioned store.

A runner owns one :class:`Controls`. Widgets, the CLI and user code call ``controls.set(...)``
from any thread; the runner takes one :meth:`Controls.snapshot` per generation or learner step,
so an update always sees one consistent set of values. A rejected value raises ``ValueError``
naming the control and what is allowed, and changes nothing: ``set`` validates every value
before it applies any.
"""

from __future__ import annotations

import difflib
import math
import numbers
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

KINDS = ("float", "int", "bool", "choice", "str")


def bound(x: float) -> str:
    """A bound as its declaration writes it: ``2**29``, ``1000``, ``100,000,000``, ``0.5``,
    ``1e-08``."""
    if float(x).is_integer() and abs(x) < 2**63:
        n = int(x)
        if n >= 1024 and n & (n - 1) == 0:
            return f"2**{n.bit_length() - 1}"
        return f"{n:,}" if abs(n) >= 10_000 else str(n)
    return f"{x:g}"


@dataclass(frozen=True, kw_only=True)
class ValueSpec:
    """What a value may be and how it is shown: the fields a :class:`Control` and a setting's
    declaration (:class:`esnb.settings.declare.Setting`) share, declared once here.

    Attributes
    ----------
    help : str
        One line shown next to the widget, in ``--help``, in error messages and in the docs.
    low, high : float, optional
        Bounds for numbers; ``None`` is unbounded on that side.
    low_open, high_open : bool
        Whether the bound itself is excluded (``sigma`` > 0 has ``low=0, low_open=True``).
    choices : tuple
        Allowed values of a ``choice`` kind.
    log : bool
        Hint for widgets: a log-scale slider suits it (learning rates, sigma).
    check : callable, optional
        Extra check ``check(value) -> error message or None`` (e.g. "must be even").
    live : bool
        Whether it may change while the runner runs; fixed ones are set at creation only.
    """

    help: str = ""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    log: bool = False
    check: Callable[[Any], str | None] | None = field(default=None, compare=False)
    live: bool = False

    def value_spec(self) -> dict[str, Any]:
        """The :class:`ValueSpec` fields' values (a setting's, for its control)."""
        return {f.name: getattr(self, f.name) for f in fields(ValueSpec)}


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for a one-line message: an integer of many digits by its size, any
    other long repr cut (a value given as ``10**400`` is not printed whole)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{'a negative' if value < 0 else 'an'} integer of about {digits} digits"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass(frozen=True)
class Control(ValueSpec):
    """One hyperparameter: a name, a kind and a default, with :class:`ValueSpec`'s fields
    (keywords; a control is ``live`` unless told otherwise).

    Attributes
    ----------
    name : str
        Keyword used in ``controls.set(name=value)``.
    kind : {"float", "int", "bool", "choice", "str"}
        Value type.
    default : Any
        Value when the runner is created without one.
    """

    name: str
    kind: str
    default: Any
    live: bool = field(default=True, kw_only=True)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"control kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"choice control {self.name!r} needs choices")

    def allowed(self) -> str:
        """Human-readable description of the allowed values."""
        if self.kind == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "bool":
            return "True or False"
        if self.kind == "str":
            return "a string"
        lo = "-inf" if self.low is None else bound(self.low)
        hi = "inf" if self.high is None else bound(self.high)
        left = "(" if self.low is None or self.low_open else "["
        right = ")" if self.high is None or self.high_open else "]"
        what = "an integer" if self.kind == "int" else "a number"
        return f"{what} in {left}{lo}, {hi}{right}"

    def validate(self, value: Any) -> Any:
        """Return ``value`` coerced to this control's type, or raise a clear ``ValueError``."""
        bad = ValueError(f"{self.name} must be {self.allowed()}, got {shown(value)}")
        if self.kind == "bool":
            if isinstance(value, bool) or type(value).__name__ == "bool_":
                return bool(value)
            raise bad
        if self.kind == "choice":
            if value in self.choices:
                return value
            raise bad
        if self.kind == "str":
            if isinstance(value, str):
                return self._checked(value)
            raise bad
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise bad
        if self.kind == "int":
            if isinstance(value, numbers.Integral):
                value = int(value)
            elif math.isfinite(float(value)) and float(value).is_integer():
                value = int(value)
            else:
                raise bad
        else:
            try:
                value = float(value)
            except OverflowError:  # an integer beyond any float (10**400)
                raise bad from None
            if not math.isfinite(value):
                raise bad
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise bad
        if self.high is not None and (
            value > self.high or (self.high_open and value == self.high)
        ):
            raise bad
        return self._checked(value)

    def _checked(self, value: Any) -> Any:
        """``value`` once :attr:`check` found nothing wrong with it."""
        if self.check is not None:
            message = self.check(value)
            if message:
                raise ValueError(f"{self.name} {message}, got {value!r}")
        return value


@dataclass(frozen=True)
class ControlChange:
    """One accepted change: the store's version after it, when it was made, and by whom
    (``origin``: ``"local"`` in this process, a kernel attached to the run, a replayed
    schedule)."""

    version: int
    name: str
    old: Any
    new: Any
    time: float
    origin: str = "local"


@dataclass(frozen=True)
class ControlSnapshot:
    """A consistent view of every value at one version."""

    version: int
    values: Mapping[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


class Controls:
    """Thread-safe, versioned store of a runner's hyperparameters.

    Parameters
    ----------
    schema : iterable of Control
        The controls, in display order.
    values : mapping, optional
        Initial values (fixed controls included); missing ones take their defaults.

    Examples
    --------
    >>> c = Controls([Control("sigma", "float", 0.02, low=0, low_open=True)])
    >>> c.set(sigma=0.05)
    1
    >>> c.set(sigma=-1)
    Traceback (most recent call last):
    ...
    ValueError: sigma must be a number in (0, inf), got -1
    """

    def __init__(self, schema: Iterable[Control], values: Mapping[str, Any] | None = None,
                 settings: Iterable[str] = ()):
        self._schema = {c.name: c for c in schema}
        #: the run's other settings (fixed, not controls): named as such when set
        self._settings = tuple(n for n in settings if n not in self._schema)
        values = dict(values or {})
        self._check_names(values)
        self._values = {
            name: c.validate(values.get(name, c.default)) for name, c in self._schema.items()
        }
        self._version = 0
        self._changes: list[ControlChange] = []
        self._lock = threading.Lock()
        self._subscribers: list[Callable[[list[ControlChange]], None]] = []

    # -- reading -----------------------------------------------------------------------------
    @property
    def schema(self) -> tuple[Control, ...]:
        return tuple(self._schema.values())

    @property
    def version(self) -> int:
        return self._version

    def __getitem__(self, name: str) -> Any:
        with self._lock:
            return self._values[name]

    def __contains__(self, name: str) -> bool:
        return name in self._schema

    def __iter__(self):
        return iter(self._schema.values())

    def get(self, name: str, default: Any = None) -> Any:
        with self._lock:
            return self._values.get(name, default)

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._values)

    def snapshot(self) -> ControlSnapshot:
        """All values at one version, safe to keep while others keep setting."""
        with self._lock:
            return ControlSnapshot(self._version, MappingProxyType(dict(self._values)))

    def changes_since(self, version: int) -> list[ControlChange]:
        """Changes accepted after ``version`` (oldest first)."""
        with self._lock:
            return [c for c in self._changes if c.version > version]

    @property
    def changes(self) -> list[ControlChange]:
        with self._lock:
            return list(self._changes)

    # -- writing -----------------------------------------------------------------------------
    def set(self, **values: Any) -> int:
        """Validate and apply ``values`` at once; return the new version (:meth:`apply`)."""
        return self.apply(values)

    def apply(self, values: Mapping[str, Any], origin: str = "local") -> int:
        """Validate and apply ``values`` at once, recording who asked (``origin``); return the
        new version.

        Raises
        ------
        ValueError
            For an unknown or fixed control, or a value out of range. Nothing changes then.
        """
        values = dict(values)
        self._check_names(values)
        for name in values:
            if not self._schema[name].live:
                raise ValueError(
                    f"{name} is fixed for this run (set it when creating the runner); "
                    f"live controls: {', '.join(c.name for c in self.schema if c.live)}"
                )
        checked = {name: self._schema[name].validate(v) for name, v in values.items()}
        with self._lock:
            changed = {n: v for n, v in checked.items() if self._values[n] != v}
            if not changed:
                return self._version
            self._version += 1
            now = time.time()
            new = [
                ControlChange(self._version, n, self._values[n], v, now, str(origin))
                for n, v in changed.items()
            ]
            self._values.update(changed)
            self._changes.extend(new)
            subscribers = list(self._subscribers)
        for fn in subscribers:
            fn(new)
        return self._version

    def subscribe(self, fn: Callable[[list[ControlChange]], None]) -> Callable[[], None]:
        """Call ``fn(changes)`` after every accepted ``set``; returns an unsubscribe function.

        ``fn`` runs on the thread that called ``set`` and must not block.
        """
        with self._lock:
            self._subscribers.append(fn)

        def unsubscribe():
            with self._lock:
                if fn in self._subscribers:
                    self._subscribers.remove(fn)

        return unsubscribe

    def restore(self, values: Mapping[str, Any], changes: Iterable[Mapping[str, Any]] = (),
                version: int = 0) -> None:
        """Load values, change log and version from a checkpoint (fixed controls included)."""
        self._check_names(values)
        checked = {n: self._schema[n].validate(v) for n, v in values.items()}
        with self._lock:
            self._values.update(checked)
            self._changes = [ControlChange(**c) for c in changes]
            self._version = int(version)

    def _check_names(self, values: Mapping[str, Any]) -> None:
        fixed = [n for n in values if n in self._settings]
        if fixed:
            raise ValueError(
                f"{', '.join(fixed)} {'is' if len(fixed) == 1 else 'are'} fixed for this run "
                f"(set when the runner is created); live controls: "
                f"{', '.join(c.name for c in self.schema if c.live)}")
        unknown = [n for n in values if n not in self._schema]
        if unknown:
            close = {m for n in unknown for m in difflib.get_close_matches(
                str(n), [*self._schema, *self._settings], n=3, cutoff=0.6)}
            raise ValueError(
                f"unknown control(s) {', '.join(map(repr, unknown))}"
                + (f" (did you mean {', '.join(sorted(close))}?)" if close else "")
                + f"; known: {', '.join(self._schema)}"
            )

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"Controls(v{self._version}: {body})"

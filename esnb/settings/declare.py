"""Declaring settings: :func:`setting` fields of a frozen :class:`Settings` dataclass,
validation of every value with the setting's name, presets, and the controls derived from the
live fields. See :mod:`esnb.settings` for the whole picture."""

from __future__ import annotations

import dataclasses
import difflib
import json
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from esnb.controls import Control, Controls, ValueSpec

PRESETS = ("laptop", "paper")
#: value kinds of a setting (the first five are those of a live :class:`Control`)
KINDS = ("float", "int", "bool", "choice", "str", "ints", "dict")
_MISSING = object()


@dataclass(frozen=True, kw_only=True)
class Setting(ValueSpec):
    """The declaration of one setting (kept in the dataclass field's metadata): a kind,
    :class:`~esnb.controls.ValueSpec`'s fields (which its control takes as they are; ``ints``:
    bounds of every element; ``live``: may change while the run goes), and what a setting has
    beyond a control.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`; ``ints`` is a tuple of integers (layer sizes), ``dict`` a mapping
        with string keys (extra ``gymnasium.make`` arguments).
    control : bool
        Shown among the controls even though fixed (env, seed).
    nullable : bool
        ``None`` is allowed (``none`` on the command line); the help says what it means.
    special : tuple of str
        Words accepted besides the kind's values (``iw_k="auto"``); the config's
        :meth:`Settings.prepare` turns them into values.
    paper : Any
        The source paper's value (``_MISSING``: the same as the default or not published).
    why : str
        Why the laptop default differs from the paper's value.
    cli : bool
        Offer a command-line flag.
    flag : str
        The flag's name when it is not the field's (``--name-with-dashes``).
    """

    kind: str
    control: bool = False
    nullable: bool = False
    special: tuple[str, ...] = ()
    paper: Any = _MISSING
    why: str = ""
    cli: bool = True
    flag: str = ""

    @property
    def has_paper(self) -> bool:
        return self.paper is not _MISSING


def setting(default: Any, *, help: str, kind: str | None = None, low: float | None = None,
            high: float | None = None, low_open: bool = False, high_open: bool = False,
            choices: Iterable = (), log: bool = False,
            check: Callable[[Any], str | None] | None = None, live: bool = False,
            control: bool = False, nullable: bool | None = None, special: Iterable[str] = (),
            paper: Any = _MISSING, why: str = "", cli: bool = True, flag: str = "") -> Any:
    """A dataclass field declaring one setting; see :class:`Setting` for the arguments.

    ``kind`` is inferred from ``choices`` or the default's type; give it when the default is
    None. A tuple or dict default is copied for each instance.
    """
    choices = tuple(choices)
    if kind is None:
        kind = _infer_kind(default, choices)
    if kind not in KINDS:
        raise ValueError(f"setting kind must be one of {KINDS}, got {kind!r}")
    if kind == "choice" and not choices:
        raise ValueError("a choice setting needs choices")
    meta = Setting(kind=kind, help=help, low=low, high=high, low_open=low_open,
                   high_open=high_open, choices=choices, log=log, check=check, live=live,
                   control=control, nullable=default is None if nullable is None else nullable,
                   special=tuple(special), paper=paper, why=why, cli=cli, flag=flag)
    if isinstance(default, dict):
        frozen = dict(default)
        return dataclasses.field(default_factory=lambda: dict(frozen), metadata={"esnb": meta})
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(default=default, metadata={"esnb": meta})


def _infer_kind(default: Any, choices: tuple) -> str:
    if choices:
        return "choice"
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, numbers.Integral):
        return "int"
    if isinstance(default, numbers.Real):
        return "float"
    if isinstance(default, str):
        return "str"
    if isinstance(default, (tuple, list)):
        return "ints"
    if isinstance(default, dict):
        return "dict"
    raise ValueError(f"cannot infer the kind of a setting whose default is {default!r}: "
                     f"give kind=")


def derive(parent: type, name: str, default: Any = _MISSING, **changes: Any) -> Any:
    """A field of a subclass re-declaring ``parent``'s setting ``name`` with another default
    (Ape-X DPG's exploration), keeping its help and bounds: written once per variant."""
    field = {f.name: f for f in dataclasses.fields(parent)}[name]
    meta = dataclasses.replace(field.metadata["esnb"], **changes)
    if default is _MISSING:
        default = field.default
    elif default == field.default and type(default) is type(field.default):
        raise ValueError(f"{parent.__name__}.{name} already defaults to {default!r}: derive it "
                         f"without restating the default")
    return dataclasses.field(default=default, metadata={"esnb": meta, "parent": parent})


def _control(name: str, meta: Setting, default: Any) -> Control:
    return Control(name, meta.kind, default, **meta.value_spec())


def validate(name: str, meta: Setting, value: Any) -> Any:
    """``value`` coerced to the setting's kind, or a ``ValueError`` naming the setting."""
    if value is None:
        if meta.nullable:
            return None
        raise ValueError(f"{name} must be {allowed(meta)}, got None")
    if isinstance(value, str) and value in meta.special:
        return value
    if meta.kind in ("float", "int", "bool", "choice", "str"):
        try:
            return _control(name, meta, value).validate(value)
        except ValueError as exc:
            if (meta.special or meta.nullable) and str(exc).startswith(f"{name} must be "):
                raise ValueError(f"{name} must be {allowed(meta)}, got {value!r}") from None
            raise
    if meta.kind == "ints":
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise ValueError(f"{name} must be {allowed(meta)}, got {value!r}")
        element = dataclasses.replace(meta, kind="int", nullable=False)
        try:
            return tuple(_control(name, element, v).validate(v) for v in value)
        except ValueError:
            raise ValueError(f"{name} must be {allowed(meta)}, got {value!r}") from None
    # dict: string keys, values that JSON can carry (they go into checkpoints)
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{name} must be {allowed(meta)}, got {value!r}")
    try:
        json.dumps(dict(value), allow_nan=False)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {allowed(meta)}, got {value!r}") from None
    return dict(value)


def allowed(meta: Setting) -> str:
    """What a setting accepts, in words."""
    if meta.kind == "ints":
        lo = "" if meta.low is None else f" >= {meta.low:g}"
        text = f"a sequence of integers{lo}"
    elif meta.kind == "dict":
        text = "a mapping with string keys and JSON values"
    else:
        text = _control("x", meta, None).allowed()
    extra = [repr(s) for s in meta.special] + (["None"] if meta.nullable else [])
    return text + (f", or {' or '.join(extra)}" if extra else "")


@dataclass(frozen=True)
class Settings:
    """Base of the config dataclasses (subclasses are ``@dataclass(frozen=True)``).

    Instances are validated when made: each field by its declaration, then the cross-field
    rules of :meth:`check`. Build one with :meth:`build` (presets, overrides, special words);
    the constructor takes final values only.
    """

    #: the algorithm's name in checkpoints and the CLI
    algorithm: ClassVar[str] = ""
    #: the name people read (``Ape-X``, ``IMPALA``); empty: :attr:`algorithm`
    title: ClassVar[str] = ""
    #: settings that no longer exist: dropped from old checkpoints' configs, refused elsewhere
    retired: ClassVar[tuple[str, ...]] = ()
    #: named presets besides ``laptop`` and ``paper``: the settings they change from laptop's
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    #: the ``paper`` preset's values that depend on the environment, by its name without the
    #: version (``"Humanoid"``) or by a family's prefix (``"ALE/"``: every Atari id):
    #: ``{env: ({setting: value}, source)}``
    paper_by_env: ClassVar[dict[str, tuple[dict[str, Any], str]]] = {}
    #: the same for the ``laptop`` preset: where a family of tasks needs other values than the
    #: declared defaults on 2 cores, with why (Atari's conv nets: a smaller learning rate)
    laptop_by_env: ClassVar[dict[str, tuple[dict[str, Any], str]]] = {}

    @classmethod
    def display_name(cls) -> str:
        """The name people read: :attr:`title`, else :attr:`algorithm`, else the class's."""
        return cls.title or cls.algorithm or cls.__name__

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            meta = f.metadata.get("esnb")
            if meta is not None:
                object.__setattr__(self, f.name, validate(f.name, meta, getattr(self, f.name)))
        self.check()

    # -- to override -------------------------------------------------------------------------
    @classmethod
    def prepare(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Turn convenience values (special words, derived defaults) into final values."""
        return values

    def check(self) -> None:
        """Cross-field rules; raise ``ValueError`` naming the settings involved."""

    # -- declarations ------------------------------------------------------------------------
    @classmethod
    def declarations(cls) -> dict[str, tuple[Setting, Any]]:
        """``{name: (Setting, default)}`` in declaration order."""
        out = {}
        for f in dataclasses.fields(cls):
            meta = f.metadata.get("esnb")
            if meta is None:
                continue
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            out[f.name] = (meta, default)
        return out

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(cls.declarations())

    # -- making ------------------------------------------------------------------------------
    @classmethod
    def preset_values(cls, preset: str = "laptop") -> dict[str, Any]:
        """The values a preset gives (every setting)."""
        known = (*PRESETS, *cls.presets)
        if preset not in known:
            raise ValueError(f"preset must be one of {', '.join(map(repr, known))}, got "
                             f"{preset!r}")
        values = {name: (meta.paper if preset == "paper" and meta.has_paper else default)
                  for name, (meta, default) in cls.declarations().items()}
        return {**values, **cls.presets.get(preset, {})}

    @classmethod
    def build(cls, preset: str = "laptop", **overrides: Any) -> Settings:
        """The settings of ``preset`` with ``overrides`` applied, validated.

        Raises
        ------
        ValueError
            An unknown setting (with the closest known names), or a value a setting refuses.
        """
        check_names(cls, overrides)
        values = cls.preset_values(preset)
        # the environment's own values of the preset, under what is given
        env = str(overrides.get("env", values.get("env", "")))
        values.update(cls.preset_for_env(preset, env)[0])
        values = {**values, **overrides}
        return cls(**cls.prepare(values))

    @classmethod
    def preset_for_env(cls, preset: str, env: str) -> tuple[dict[str, Any], str]:
        """The values ``preset`` gives ``env`` beyond its own (:attr:`paper_by_env`,
        :attr:`laptop_by_env`; none for other presets) and their source: its family's (a key
        ending in ``/`` that ``env`` starts with), then its own by name."""
        table = {"paper": cls.paper_by_env, "laptop": cls.laptop_by_env}.get(preset, {})
        values: dict[str, Any] = {}
        sources = []
        for key, (given, source) in table.items():
            if key.endswith("/") and env.startswith(key) or key == env.split("-v")[0]:
                values.update(given)
                sources.append(source)
        return values, "; ".join(sources)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (validated)."""
        check_names(type(self), changes)
        return type(self)(**type(self).prepare({**self.to_dict(), **changes}))

    # -- derived views -----------------------------------------------------------------------
    def controls(self) -> Controls:
        """The live controls (and fixed fields marked ``control``) with these values."""
        schema = [_control(name, meta, default)
                  for name, (meta, default) in self.declarations().items()
                  if (meta.live or meta.control)
                  # a fixed value the runner has yet to resolve (None) is not shown
                  and not (getattr(self, name) is None and not meta.live)]
        return Controls(schema, {c.name: getattr(self, c.name) for c in schema},
                        settings=self.names())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able values (tuples as lists), as stored in checkpoints."""
        out = {}
        for name in self.names():
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Settings:
        """Settings from :meth:`to_dict` (validated; unknown names are refused, retired ones
        dropped)."""
        values = {k: v for k, v in values.items() if k not in cls.retired}
        check_names(cls, values)
        defaults = cls.preset_values("laptop")
        return cls(**cls.prepare({**defaults, **dict(values)}))


def check_names(cls: type[Settings], values: Mapping[str, Any]) -> None:
    """Refuse names that are not settings of ``cls``, suggesting the closest ones."""
    known = cls.names()
    unknown = [n for n in values if n not in known]
    if not unknown:
        return
    hints = []
    for n in unknown:
        close = difflib.get_close_matches(n, known, n=2)
        hints.append(f"{n!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)"
                                 if close else ""))
    raise ValueError(f"unknown setting {', '.join(hints)} for {cls.display_name()}; "
                     f"settings: {', '.join(known)}")


def show(value: Any) -> str:
    """A value as the command line and the docs write it."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (tuple, list)):
        return " ".join(str(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)

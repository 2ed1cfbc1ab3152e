"""Package namespaces whose names load on first use (PEP 562), so importing a light part of
esnb (a config, a plot declaration, a worker task) never pulls torch, bokeh or distributed."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Mapping


def lazy_names(package: str, names: Mapping[str, str]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package`` resolving each name from its module.

    Usage, in a package's ``__init__``::

        __getattr__, __dir__ = lazy_names(__name__, {"ES": "esnb.runners.es"})
    """
    module_globals = importlib.import_module(package).__dict__

    def __getattr__(name: str):
        if name == "__all__":  # ``from package import *``: every lazy name (built now)
            return sorted(names)
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        module_globals[name] = value
        return value

    def __dir__():
        return sorted(set(module_globals) | set(names))

    return __getattr__, __dir__


class LazyMapping(Mapping):
    """``fixed`` names, and those ``build()`` gives, built when first needed: a package's lazy
    names that come from a registry (``esnb``'s runner and config classes) cost nothing until
    one is asked for.

    Parameters
    ----------
    build : callable
        ``build() -> {name: module}``, called once.
    fixed : mapping
        Names known without building.
    built : callable
        ``built(name)``: whether ``name`` may be one that ``build`` gives; a name it refuses
        (a submodule ``from package import x`` looks for first, say) is answered without
        building.

    Examples
    --------
    In a package's ``__init__``::

        _LAZY = LazyMapping(registry_names, fixed={"Runner": "pkg.base"},
                            built=lambda name: name[:1].isupper())
        __getattr__, __dir__ = lazy_names(__name__, _LAZY)
    """

    def __init__(self, build: Callable[[], Mapping[str, str]],
                 fixed: Mapping[str, str] | None = None,
                 built: Callable[[str], bool] = lambda name: True):
        self._build, self._fixed, self._built = build, dict(fixed or {}), built
        self._data: dict[str, str] | None = None

    def _names(self) -> dict[str, str]:
        if self._data is None:
            self._data = {**self._build(), **self._fixed}
        return self._data

    def __getitem__(self, key: str) -> str:
        if key in self._fixed:
            return self._fixed[key]
        if self._data is None and not self._built(key):
            raise KeyError(key)
        return self._names()[key]

    def __iter__(self):
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps ``name``'s loader so ``callback`` runs once it has loaded.

    It stays in ``sys.meta_path`` until the module is really executed (a bare
    ``importlib.util.find_spec(name)``, asking whether a package is installed, loads nothing).
    """

    def __init__(self, name: str, callback: Callable[[], None]):
        self.name, self.callbacks = name, [callback]
        self._finding = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self._finding:
            return None
        self._finding = True  # the finders after this one locate the module
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._finding = False
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenCall(spec.loader, self)
        return spec

    def loaded(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
            for callback in self.callbacks:
                callback()


class _ThenCall(importlib.abc.Loader):
    def __init__(self, loader, finder: _AfterImport):
        self.loader, self.finder = loader, finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.finder.loaded()

    def __getattr__(self, name: str):  # get_resource_reader, is_package, ...
        return getattr(self.loader, name)


def after_import(name: str, callback: Callable[[], None]) -> None:
    """Call ``callback()`` once the top-level module ``name`` is imported: now if it is, else
    right after whoever imports it first (without importing it here).

    ``import esnb`` registers esnb's gymnasium environments this way: ``gymnasium.make(
    "esnb/BitFlip-v0")`` works after ``import esnb`` in either order, and ``import esnb``
    does not pay for importing gymnasium (~70 ms) where nothing uses it.
    """
    if name in sys.modules:
        callback()
        return
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport) and finder.name == name:
            if callback not in finder.callbacks:  # the same hook registered twice runs once
                finder.callbacks.append(callback)
            return
    sys.meta_path.insert(0, _AfterImport(name, callback))

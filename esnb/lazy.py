"""Package namespaces whose names load on first use (PEP 562), so importing a light part of
esnb (a config, a plot declaration, a worker task) never pulls torch, bokeh or distributed."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_names(package: str, names: Mapping[str, str]) -> tuple[Callable, Callable]:
    """``(__getattr__, __dir__)`` for ``package`` resolving each name from its module.

    Usage, in a package's ``__init__``::

        __getattr__, __dir__ = lazy_names(__name__, {"ES": "esnb.runners.es"})
    """
    module_globals = importlib.import_module(package).__dict__

    def __getattr__(name: str):
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        module_globals[name] = value
        return value

    def __dir__():
        return sorted(set(module_globals) | set(names))

    return __getattr__, __dir__

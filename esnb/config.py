"""esnb's namespace in dask's configuration, with defaults shipped in ``esnb.yaml``."""

from __future__ import annotations

import os

import dask.config
import yaml

_fn = os.path.join(os.path.dirname(__file__), "esnb.yaml")
with open(_fn) as f:
    _defaults = yaml.safe_load(f)

dask.config.update_defaults(_defaults)


def get(key: str, default=None):
    """``dask.config.get("esnb." + key)``."""
    return dask.config.get(f"esnb.{key}", default=default)

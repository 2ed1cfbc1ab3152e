"""Runners: one per algorithm; they drive futures and own a run's lifecycle."""

from esnb.runners.base import Runner
from esnb.runners.es import ES

__all__ = ["ES", "Runner"]

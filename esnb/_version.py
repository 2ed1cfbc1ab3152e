"""esnb's version: one place, read by the package and by a noise table's origin record."""

__version__ = "0.1.0"

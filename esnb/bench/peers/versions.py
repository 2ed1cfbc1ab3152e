"""A peer library measured in an interpreter of its own (``--evotorch-python``,
``--rllib-python``): whether that interpreter can import it, said in one line if not."""

from __future__ import annotations

import subprocess


def peer_versions(python: str, code: str, flag: str, missing: str) -> str:
    """What ``code`` (imports, then a print of versions) prints in ``python``.

    Raises
    ------
    ValueError
        One line: ``python`` cannot be run (named with its ``flag``), or it cannot import the
        peer (``missing``, formatted with ``python``).
    """
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)
    except OSError as exc:
        raise ValueError(f"{flag} {python}: cannot run it ({exc.strerror})") from None
    if proc.returncode != 0:
        raise ValueError(missing.format(python=python))
    return proc.stdout.strip()

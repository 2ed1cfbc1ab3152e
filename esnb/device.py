"""Where a learner computes: the ``device`` setting's words, their check and their resolution.

``auto`` is CUDA when torch sees a CUDA device, else the CPU, decided where the learner is
built (on a Dask worker for the AES-RL/CEM-RL critic, in the run's process otherwise);
``cpu``, ``cuda`` and ``cuda:N`` are taken as written. :func:`device_problem` is the settings'
check: a malformed word names the accepted ones, and a CUDA device that this process's torch
cannot see is refused in one line saying what was found, before any cluster starts. torch is
imported only to answer a CUDA question, so the configs stay importable without it.

Learners keep everything that enters their networks on the device and hand back CPU float32
numpy (parameters for actors, state for checkpoints), so a checkpoint does not depend on the
device that wrote it.
"""

from __future__ import annotations

import re

import numpy as np

#: the words of the ``device`` setting (``cuda:N`` besides them)
DEVICES = ("auto", "cpu", "cuda")
_CUDA_N = re.compile(r"cuda:(\d+)")


def device_problem(value: str) -> str | None:
    """Why ``value`` cannot be a learner's device, as the settings' ``check`` says it (the
    message follows the setting's name, the value after it), or None when it can.

    Examples
    --------
    >>> device_problem("cpu") is None
    True
    >>> device_problem("gpu")
    "must be 'auto', 'cpu', 'cuda' or 'cuda:N' (N a CUDA device index)"
    """
    if not isinstance(value, str) or not (value in DEVICES or _CUDA_N.fullmatch(value)):
        return "must be 'auto', 'cpu', 'cuda' or 'cuda:N' (N a CUDA device index)"
    if not value.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return (f"{value!r} requested but torch {torch.__version__} sees no CUDA device "
                f"(torch.cuda.is_available() is False)")
    index, count = (int(value[5:]) if ":" in value else 0), torch.cuda.device_count()
    if index >= count:
        return (f"{value!r} requested but torch {torch.__version__} sees {count} CUDA "
                f"device{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1})")
    return None


def check_device(value: str) -> None:
    """Raise the one-line ``ValueError`` of :func:`device_problem` (what the settings raise)."""
    problem = device_problem(value)
    if problem is not None:
        raise ValueError(f"device {problem}, got {value!r}")


def resolve_device(value="auto"):
    """The ``torch.device`` of a ``device`` setting (``auto``: CUDA when available here; a
    ``torch.device`` is returned as it is).

    Raises
    ------
    ValueError
        As :func:`check_device` (a CUDA device this process cannot use).
    """
    import torch

    if isinstance(value, torch.device):
        return value
    if value == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    check_device(value)
    return torch.device(value)


def is_cuda(value: str) -> bool:
    """Whether a ``device`` setting means CUDA here (``auto`` on a machine with CUDA)."""
    return resolve_device(value).type == "cuda"


def to_device(array, device, dtype=np.float32):
    """A batch's numpy array as a tensor of ``dtype`` on ``device`` (no copy on the CPU when
    the array is already contiguous and of that type)."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(array, dtype=dtype)).to(device)

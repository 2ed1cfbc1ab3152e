"""MuJoCo's engine timer, off in esnb's processes.

MuJoCo times every stage of a step (``mjData.timer``: step, forward, collision, ...) through
the C callback ``mjcb_time``. Its Python bindings install a C timer there when they load, so
every ``mj_step`` calls ``clock_gettime`` about 26 times per substep: ~12% of HalfCheetah's
``mj_step`` (issue 37; ``esnb bench rollout`` prints the physics with the timer on and off).
``mujoco.set_mjcb_time(None)`` does not remove it (the bindings' setter manages Python
callbacks only; ``get_mjcb_time()`` answers None while the C timer is installed), so
:func:`timer_off` clears the C global itself. Nothing in esnb reads ``mjData.timer``: its
timing columns (``steps_per_s``, ``task_cpu``, ...) are Python clocks, and the physics is the
same bits either way (``tests/test_mujoco_timer.py``). A timer a user installed with
``mujoco.set_mjcb_time`` is left alone, and dask config ``esnb.mujoco.timer: true`` keeps
MuJoCo's (for a user who profiles with ``mjData.timer``).

:func:`esnb.envs.make.make_env` calls :func:`timer_off` when it makes a MuJoCo environment, so
ES's workers, AES-RL's, Ape-X's and IMPALA's actors and the driver's evaluations all step
without it.
"""

from __future__ import annotations

import ctypes
import glob
import logging
import os

log = logging.getLogger("esnb.envs")

_DONE = False


def _library():
    """The loaded MuJoCo shared library (ctypes), or None where it cannot be found."""
    import mujoco

    folder = os.path.dirname(mujoco.__file__)
    names = sorted(glob.glob(os.path.join(folder, "libmujoco.so*"))
                   + glob.glob(os.path.join(folder, "libmujoco*.dylib"))
                   + glob.glob(os.path.join(folder, "mujoco.dll")))
    for name in names:
        try:
            return ctypes.CDLL(name)  # the copy already loaded: dlopen returns its handle
        except OSError:
            continue
    return None


def _pointer():
    library = _library()
    if library is None:
        return None
    try:
        return ctypes.c_void_p.in_dll(library, "mjcb_time")
    except ValueError:  # a build without the symbol
        return None


def timer_installed() -> bool:
    """Whether MuJoCo's ``mjcb_time`` holds a timer (the bindings' or a user's)."""
    pointer = _pointer()
    return bool(pointer is not None and pointer.value)


def timer_off(force: bool = False) -> bool:
    """Clear MuJoCo's C timer in this process, once, unless dask config ``esnb.mujoco.timer``
    is true or a Python timer was set with ``mujoco.set_mjcb_time``. Returns whether the
    timer is off now. ``force``: check again (tests)."""
    global _DONE
    if _DONE and not force:
        return True
    import mujoco

    from esnb import config

    if config.get("mujoco.timer") or mujoco.get_mjcb_time() is not None:
        return False
    pointer = _pointer()
    if pointer is None:
        log.debug("MuJoCo's library not found: its timer stays on")
        return False
    pointer.value = None
    _DONE = True
    return True

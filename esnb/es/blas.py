"""One BLAS thread for the ES arithmetic whose bits must not depend on the machine.

A float32 matrix-vector product over a 1M-parameter policy's noise rows, or a float64 dot of
theta's change with itself, is split over threads by OpenBLAS once it is large enough, and the
split changes the rounding: measured, a 1M-parameter ES update on a 2-core driver differed from
the same update on a worker (one BLAS thread, as Dask's nanny starts workers), so theta depended
on the machine's core count. These few calls therefore run with one BLAS thread everywhere
(small ones never were split: their results are unchanged). Costs ~0.1 ms a call.
"""

from __future__ import annotations

from threadpoolctl import ThreadpoolController

_controller: ThreadpoolController | None = None


def one_thread():
    """A context manager: numpy's BLAS on one thread inside it (restored on exit)."""
    global _controller
    if _controller is None:  # inspecting the loaded libraries once is the slow part
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")

"""The reference workload printed beside every timing (benchmarks, ``reproduce``): the machine's GEMM rate.

The machines this library is measured on are often shared; a runtime means little without the machine's
speed at that time, measured in the same run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np


def reference_seconds() -> float:
    """Wall time in seconds of 5 x (1000 x 1000) @ (1000 x 1000) float64 numpy matmuls, with numpy's threads as
    configured in the calling process.

    The machine's speed at the time of a measurement: print it beside a runtime, measured in the same run
    (before and after), and compare runtimes across machines and loads as multiples of it. The matrix is
    the same on every call (seed 0); only the products are timed.

    Examples
    --------
    >>> from singlehead.runs import reference_seconds
    >>> reference_seconds() > 0
    True
    """
    return _five_products(np.random.default_rng(0).standard_normal((1000, 1000)))


def reference_seconds_float32() -> float:
    """Wall time of 5 x (1000 x 1000) @ (1000 x 1000) float32 torch matmuls, with torch's threads as configured.

    The simulations fit in float32 (mixed precision) through torch, and on a shared machine this rate can vary
    far more than the float64 one, with the fits' runtimes following it. ``reproduce`` states both beside its
    runtimes. torch is imported here,
    not at module level, so the theory-only paths do not import it.
    """
    import torch

    a = torch.from_numpy(np.random.default_rng(0).standard_normal((1000, 1000)).astype(np.float32))
    a @ a  # first call: thread pool and kernel selection, not part of the rate
    return _five_products(a)


def _five_products(a: Any) -> float:
    """Wall time of ``a @ a`` five times (a numpy array or a torch tensor)."""
    t = time.perf_counter()
    for _ in range(5):
        a @ a
    return time.perf_counter() - t

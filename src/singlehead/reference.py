"""The reference workload printed beside every timing (benchmarks, ``reproduce``): the machine's GEMM rate.

The machines this library is measured on are often shared; a runtime means little without the machine's
speed at that time, measured in the same run.
"""

from __future__ import annotations

import time

import numpy as np


def reference_seconds() -> float:
    """Wall time of 5 x (1000 x 1000) @ (1000 x 1000) float64 numpy matmuls (about 0.2 s on the 2-core
    development machine, with numpy's threads as configured in the calling process)."""
    a = np.random.default_rng(0).standard_normal((1000, 1000))
    t = time.perf_counter()
    for _ in range(5):
        a @ a
    return time.perf_counter() - t

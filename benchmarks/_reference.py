"""The reference workload every benchmark prints beside its timings (the machine's GEMM rate)."""

from __future__ import annotations

import time

import numpy as np


def reference_seconds() -> float:
    """Wall time of 5 x (1000 x 1000) @ (1000 x 1000) float64 matmuls (about 0.2 s on an idle core here)."""
    a = np.random.default_rng(0).standard_normal((1000, 1000))
    t = time.perf_counter()
    for _ in range(5):
        a @ a
    return time.perf_counter() - t

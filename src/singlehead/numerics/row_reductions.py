"""Reductions and the softmax over the last (row) axis of short rows, shared by the attention maps and the
row-structured prox (:mod:`singlehead.numerics.attention_maps`, :mod:`singlehead.numerics.prox_rows`)."""

from __future__ import annotations

import numpy as np

__all__ = ["sum_last", "max_last", "softmax_rows"]

# numpy's reductions over a short last axis run one slow inner loop per row; up to this length
# the sum / max over the last axis is unrolled into whole-array operations (3x faster at T = 2)
_UNROLL_MAX = 16


def _reduce_last(x: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """``ufunc.reduce(x, axis=-1)``, unrolled into whole-array operations for a short last axis."""
    n = x.shape[-1]
    if n > _UNROLL_MAX or n == 0:
        return ufunc.reduce(x, axis=-1)
    out = x[..., 0].copy()
    for t in range(1, n):
        ufunc(out, x[..., t], out=out)
    return out


def sum_last(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis (unrolled for short rows)."""
    return _reduce_last(x, np.add)


def max_last(x: np.ndarray) -> np.ndarray:
    """Maximum over the last axis (unrolled for short rows)."""
    return _reduce_last(x, np.maximum)


def softmax_rows(H: np.ndarray) -> np.ndarray:
    """Row-wise softmax over the last axis (numerically stabilised)."""
    E = np.exp(H - max_last(H)[..., None])
    E /= sum_last(E)[..., None]
    return E

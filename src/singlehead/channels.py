"""Output channels of the attention-indexed model (THEORY §1), for numpy and torch arrays.

A channel maps a batch of logit matrices ``h`` (shape ``(..., T, T)``) to outputs:

* ``seq2lab``: ``sigma(beta h)``, the row-wise softmax, shape ``(..., T, T)``;
* ``seq2seq``: ``sigma(beta h) X / sqrt(d)``, shape ``(..., T, d)`` (value = identity;
  the ``1/sqrt(d)`` makes its square loss equal the seq2lab one to leading order);
* ``linear``: ``h`` itself (no softmax, no temperature).

The per-sequence loss is the squared Frobenius norm ``||yhat - y||_F^2`` summed over
all entries of one sequence's output. These functions are the single definition
used by data generation, training and evaluation; the state-evolution proximal
step works on the ``seq2lab`` / ``linear`` maps of ``h`` only, because the theory of
``seq2seq`` coincides with that of ``seq2lab``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

Array = Any  # numpy.ndarray or torch.Tensor


def _softmax(z: Array) -> Array:
    if isinstance(z, torch.Tensor):
        return torch.softmax(z, dim=-1)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def attention_map(h: Array, channel: str, beta: float) -> Array:
    """The ``T x T`` part of the channel: ``softmax(beta h)`` row-wise, or ``h`` for ``linear``."""
    if channel == "linear":
        return h
    if channel in ("seq2lab", "seq2seq"):
        return _softmax(beta * h)
    raise ValueError(f"channel must be one of seq2lab, seq2seq, linear (got {channel!r})")


def channel_output(h: Array, channel: str, beta: float, X: Array | None = None) -> Array:
    """Full channel output for logits ``h`` (``(..., T, T)``) and tokens ``X`` (``(..., T, d)``).

    ``X`` is only needed for ``seq2seq``, whose output is ``softmax(beta h) X / sqrt(d)``.
    """
    a = attention_map(h, channel, beta)
    if channel == "seq2seq":
        if X is None:
            raise ValueError("X must be given for the seq2seq channel")
        return (a @ X) / math.sqrt(X.shape[-1])
    return a


def squared_error(yhat: Array, y: Array) -> Array:
    """Per-sequence squared Frobenius error ``||yhat - y||_F^2`` (sum over the last two axes)."""
    r = yhat - y
    return (r * r).sum(axis=(-2, -1)) if not isinstance(r, torch.Tensor) else (r * r).sum(dim=(-2, -1))

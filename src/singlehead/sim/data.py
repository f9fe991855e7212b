"""Sampling from the attention-indexed model (docs: Theory, :ref:`theory-logits`, arXiv 2506.01582, 2509.24914).

Tokens ``x_a ~ N(0, I_d)``; logits of a symmetric ``S``:
``h_ab(S) = (x_a^T S x_b - delta_ab Tr S) / sqrt(d)``; labels
``y = chan_beta0(h(S0) + xi)`` with symmetric Gaussian logit noise ``xi`` of
variance ``Delta`` on the diagonal and ``Delta/2`` off it. A teacher of ``H0`` heads
``S0_1 .. S0_H0`` (stacked ``(H0, d, d)``) labels with the mean over heads,
``y = mean_k chan_beta0(h(S0_k) + xi)``, one noise ``xi`` per sequence shared by the heads
(:meth:`~singlehead.model.channels.Channel.teacher_head_output`).

Reproducibility: everything is drawn on the CPU in float64 from explicitly seeded
``torch.Generator`` objects and only then moved to the requested device/dtype, so
a seed gives the same data on CPU and GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from singlehead.model.problem import Problem
from singlehead.numerics.rng import child_seeds, generator

__all__ = [
    "Sequences",
    "child_seeds",
    "generator",
    "head_logits",
    "logits",
    "sample_sequences",
    "sample_target",
    "sample_teacher",
]


def sample_target(target: Any, d: int, seed: int) -> torch.Tensor:
    """``target.sample(d, seed)``: ``S0`` (``d x d``, float64, CPU); see
    :meth:`singlehead.model.targets.MPTarget.sample`."""
    return target.sample(d, seed)


def sample_teacher(problem: Problem, seed: int) -> torch.Tensor:
    """The teacher of ``problem``: ``S0`` (``d x d``) for one teacher head, else the ``H0`` heads
    stacked ``(H0, d, d)`` (float64, CPU).

    Head ``k`` is ``sample_target(problem.target, d, s_k)`` with ``s_0 = seed`` (the first head is the
    single-head teacher of ``seed``) and ``s_1 .. s_{H0-1}`` the further streams of
    ``child_seeds(seed, H0)``.
    """
    H0 = problem.teacher_heads
    if H0 == 1:
        return sample_target(problem.target, problem.d, seed)
    seeds = [seed] + list(child_seeds(seed, H0)[1:])
    return torch.stack([sample_target(problem.target, problem.d, s) for s in seeds])


def head_logits(X: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """Logits of stacked heads ``S`` (``(H, d, d)``) for ``X`` (``(n, T, d)``): shape ``(n, H, T, T)``."""
    return torch.stack([logits(X, S[k]) for k in range(S.shape[0])], dim=1)


def logits(X: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """``h_ab = (x_a^T S x_b - delta_ab Tr S)/sqrt(d)`` for ``X`` of shape ``(n, T, d)``; returns ``(n, T, T)``."""
    d = X.shape[-1]
    h = (X @ S) @ X.transpose(-1, -2)
    eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
    return (h - torch.trace(S) * eye) / math.sqrt(d)


def sample_tokens(n: int, T: int, d: int, gen: torch.Generator) -> torch.Tensor:
    """``n`` sequences of ``T`` iid ``N(0, I_d)`` tokens, shape ``(n, T, d)``, float64 CPU."""
    return torch.randn(n, T, d, generator=gen, dtype=torch.float64)


def sample_logit_noise(n: int, T: int, noise: float, gen: torch.Generator) -> torch.Tensor:
    """Symmetric noise, variance ``noise`` on the diagonal and ``noise/2`` off it; shape ``(n, T, T)``."""
    G = torch.randn(n, T, T, generator=gen, dtype=torch.float64)
    return math.sqrt(noise / 2.0) * (G + G.transpose(-1, -2)) / math.sqrt(2.0)


@dataclass
class Sequences:
    """A labelled batch. ``y`` are the (noisy) training labels, ``y_clean`` the noiseless ones."""

    X: torch.Tensor
    y: torch.Tensor
    y_clean: torch.Tensor

    def to(self, device: torch.device | str, dtype: torch.dtype) -> Sequences:
        return Sequences(self.X.to(device, dtype), self.y.to(device, dtype), self.y_clean.to(device, dtype))

    def __len__(self) -> int:
        return self.X.shape[0]


def sample_sequences(problem: Problem, S0: torch.Tensor, n: int, seed: int, chunk: int = 8192) -> Sequences:
    """Draw ``n`` labelled sequences for ``problem`` with target ``S0`` (float64, CPU).

    ``S0``: one head (``d x d``) or ``H0`` heads stacked ``(H0, d, d)`` (:func:`sample_teacher`),
    labelled by the mean over heads. Tokens and noise are drawn chunk by chunk from one generator,
    so the result does not depend on ``chunk``.
    """
    gen = generator(seed)
    X = sample_tokens(n, problem.T, problem.d, gen)
    xi = sample_logit_noise(n, problem.T, problem.noise, gen)
    S0 = S0.to(torch.float64)
    ys, ycs = [], []
    for i in range(0, n, chunk):
        Xi = X[i : i + chunk]
        if S0.dim() == 3:  # several teacher heads: the noise of a sequence is shared by its heads
            h0 = head_logits(Xi, S0)
            ycs.append(problem.channel.teacher_head_output(h0, problem.beta0, Xi))
            ys.append(problem.channel.teacher_head_output(h0 + xi[i : i + chunk, None], problem.beta0, Xi))
            continue
        h0 = logits(Xi, S0)
        ycs.append(problem.channel.teacher_output(h0, problem.beta0, Xi))
        ys.append(problem.channel.teacher_output(h0 + xi[i : i + chunk], problem.beta0, Xi))
    return Sequences(X, torch.cat(ys), torch.cat(ycs))

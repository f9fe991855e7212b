"""Torch modules of the students: factorized tied attention and the unfactorized symmetric ``S`` (THEORY §1).

* :class:`FactorizedStudent`: ``W in R^{d x p}``, ``S = W W^T / sqrt(p d)``; penalty
  ``(lam/sqrt(kappa)) ||W||_F^2 = lam d Tr S`` (weight decay = nuclear norm on the PSD
  ``S`` with rank cap ``p``).
* :class:`DirectStudent`: symmetric ``S`` trained entry-wise, penalty ``lam d ||S||_F^2``.

Both expose ``logits(X)`` (``h_ab = (x_a^T S x_b - delta_ab Tr S)/sqrt(d)``),
``matrix()`` and ``regulariser(lam)``; the loss is assembled in :mod:`singlehead.training`.
The student objects of :mod:`singlehead.students` build them (``Student.init_module``).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class FactorizedStudent(nn.Module):
    """Tied single-head attention with query = key = ``W``: ``S = W W^T / sqrt(p d)``."""

    def __init__(self, W: torch.Tensor) -> None:
        super().__init__()
        self.d, self.p = W.shape
        self.W = nn.Parameter(W.clone())
        self._scale = 1.0 / math.sqrt(self.p * self.d)

    def matrix(self) -> torch.Tensor:
        return (self.W @ self.W.T) * self._scale

    def trace(self) -> torch.Tensor:
        return (self.W * self.W).sum() * self._scale

    def logits(self, X: torch.Tensor) -> torch.Tensor:
        # Compute through X W (n T p) rather than S: cost n T d p instead of n T d^2 + d^2 p.
        # One 2-D GEMM over all tokens is faster than a batched matmul of n small blocks.
        XW = (X.reshape(-1, self.d) @ self.W).reshape(*X.shape[:-1], self.p)
        h = (XW @ XW.transpose(-1, -2)) * self._scale
        eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        return (h - self.trace() * eye) / math.sqrt(self.d)

    def regulariser(self, lam: float) -> torch.Tensor:
        """``lam d Tr S`` (= ``(lam/sqrt(kappa)) ||W||_F^2``)."""
        return lam * self.d * self.trace()


class DirectStudent(nn.Module):
    """Unfactorized symmetric ``S = (A + A^T)/2`` trained entry-wise."""

    def __init__(self, S: torch.Tensor) -> None:
        super().__init__()
        self.d = S.shape[0]
        self.A = nn.Parameter(0.5 * (S + S.T).clone())

    def matrix(self) -> torch.Tensor:
        return 0.5 * (self.A + self.A.T)

    def logits(self, X: torch.Tensor) -> torch.Tensor:
        S = self.matrix()
        h = (X.reshape(-1, self.d) @ S).reshape(X.shape) @ X.transpose(-1, -2)
        eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        return (h - torch.trace(S) * eye) / math.sqrt(self.d)

    def regulariser(self, lam: float) -> torch.Tensor:
        """``lam d ||S||_F^2``."""
        S = self.matrix()
        return lam * self.d * (S * S).sum()


def init_factorized(d: int, p: int, gen: torch.Generator, dtype: torch.dtype, device: torch.device | str,
                    scale: float = 1.0) -> FactorizedStudent:
    """``W`` iid N(0, scale^2), drawn in float64 on the CPU from ``gen`` (so CPU and GPU start equal)."""
    W = torch.randn(d, p, generator=gen, dtype=torch.float64) * scale
    return FactorizedStudent(W.to(device, dtype))


def init_direct(d: int, gen: torch.Generator, dtype: torch.dtype, device: torch.device | str,
                scale: float = 1.0) -> DirectStudent:
    """``S`` a GOE matrix with semicircle on ``[-2 scale, 2 scale]``, drawn in float64 on the CPU from ``gen``."""
    G = torch.randn(d, d, generator=gen, dtype=torch.float64)
    S = (G + G.T) * (scale / math.sqrt(2 * d))
    return DirectStudent(S.to(device, dtype))

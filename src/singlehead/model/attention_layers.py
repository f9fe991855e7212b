"""Torch modules of the students: tied and untied attention, the unfactorized symmetric ``S`` (docs: Theory,
:ref:`theory-students`).

* :class:`FactorizedStudent`: ``W in R^{d x p}``, ``S = W W^T / sqrt(p d)``; penalty
  ``(lam/sqrt(kappa)) ||W||_F^2 = lam d Tr S`` (weight decay = nuclear norm on the PSD
  ``S`` with rank cap ``p``).
* :class:`UntiedStudent`: ``W_Q, W_K in R^{d x p}``, ``M = W_Q W_K^T / sqrt(p d)`` (not symmetric);
  penalty ``(lam/sqrt(kappa)) (||W_Q||_F^2 + ||W_K||_F^2)/2``, whose minimum over the
  factorisations of ``M`` is ``lam d ||M||_*`` (nuclear norm, rank cap ``p``);
* :class:`MultiHeadStudent`: ``H`` tied heads ``S_h = W_h W_h^T / sqrt(p d)`` (one parameter
  ``W`` of shape ``(H, d, p)``); penalty ``lam d sum_h Tr S_h``; the output is the mean over heads of
  the channel outputs (``logits(X)`` has a head axis, ``(..., H, T, T)``), ``matrix()`` the mean
  ``S_eff = (1/H) sum_h S_h``;
* :class:`DirectStudent`: symmetric ``S`` trained entry-wise, penalty ``lam d ||S||_F^2``;
* :class:`FixedMatrix`: a given matrix (no trainable use), to predict with an estimate ``M``.

All expose ``logits(X)`` (``h_ab = (x_a^T S x_b - delta_ab Tr S)/sqrt(d)``),
``matrix()`` and ``regulariser(lam)`` (for a non-symmetric ``M``: ``h_ab = (x_a^T M x_b -
delta_ab Tr M)/sqrt(d)``, so ``h_ab != h_ba``); the loss is assembled in :mod:`singlehead.sim.training`.
The student objects of :mod:`singlehead.model.students` build them (``Student.init_module``).
"""

from __future__ import annotations

import math
from typing import Any

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


class MultiHeadStudent(nn.Module):
    """``H`` tied heads ``S_h = W_h W_h^T / sqrt(p d)``, ``W_h = W[h]`` (one parameter ``W``, ``(H, d, p)``).

    ``logits(X)`` returns every head's logits, shape ``(..., H, T, T)``; predictions are the mean over
    heads of the channel outputs (:meth:`singlehead.model.channels.Channel.head_output`). ``matrix()``
    is the mean ``S_eff = (1/H) sum_h S_h`` (the linear channel's predictor: its output is ``h(S_eff)``),
    ``head_matrices()`` the ``(H, d, d)`` stack; ``regulariser(lam) = lam d sum_h Tr S_h``
    (``= lam d H Tr S_eff``).

    Examples
    --------
    >>> import torch
    >>> m = MultiHeadStudent(torch.randn(3, 8, 4, dtype=torch.float64))     # H = 3 heads, d = 8, p = 4
    >>> tuple(m.logits(torch.randn(5, 2, 8, dtype=torch.float64)).shape)   # (n, H, T, T)
    (5, 3, 2, 2)
    >>> bool(torch.allclose(m.matrix(), m.head_matrices().mean(0)))
    True
    """

    heads_axis = -3  # the head axis of ``logits(X)``

    def __init__(self, W: torch.Tensor) -> None:
        super().__init__()
        if W.dim() != 3:
            raise ValueError(f"W must have shape (H, d, p) (got {tuple(W.shape)})")
        self.heads, self.d, self.p = W.shape
        self.W = nn.Parameter(W.clone())
        self._scale = 1.0 / math.sqrt(self.p * self.d)

    def head_matrices(self) -> torch.Tensor:
        """``S_h`` for every head, shape ``(H, d, d)``."""
        return (self.W @ self.W.transpose(1, 2)) * self._scale

    def matrix(self) -> torch.Tensor:
        return self.head_matrices().mean(dim=0)

    def head_traces(self) -> torch.Tensor:
        """``Tr S_h`` per head, shape ``(H,)``."""
        return (self.W * self.W).sum(dim=(1, 2)) * self._scale

    def logits(self, X: torch.Tensor) -> torch.Tensor:
        H, d, p = self.W.shape
        Z = (X.reshape(-1, d) @ self.W.permute(1, 0, 2).reshape(d, H * p)).reshape(*X.shape[:-1], H, p)
        Z = Z.movedim(-2, -3)  # (..., H, T, p)
        h = (Z @ Z.transpose(-1, -2)) * self._scale
        eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        return (h - self.head_traces()[:, None, None] * eye) / math.sqrt(d)

    def regulariser(self, lam: float) -> torch.Tensor:
        """``lam d sum_h Tr S_h`` (``= (lam/sqrt(kappa)) sum_h ||W_h||_F^2``)."""
        return lam * self.d * self.head_traces().sum()


class UntiedStudent(nn.Module):
    """Untied single-head attention: ``M = W_Q W_K^T / sqrt(p d)``.

    One parameter ``W`` of shape ``(2, d, p)`` holds ``W_Q = W[0]`` and ``W_K = W[1]`` (the
    L-BFGS trainer optimises a single tensor).
    """

    def __init__(self, WQ: torch.Tensor, WK: torch.Tensor) -> None:
        super().__init__()
        if WQ.shape != WK.shape or WQ.dim() != 2:
            raise ValueError(
                f"WQ and WK must be d x p matrices of one shape (got {tuple(WQ.shape)}, {tuple(WK.shape)})"
            )
        self.d, self.p = WQ.shape
        self.W = nn.Parameter(torch.stack([WQ, WK]).clone())
        self._scale = 1.0 / math.sqrt(self.p * self.d)

    def matrix(self) -> torch.Tensor:
        return (self.W[0] @ self.W[1].T) * self._scale

    def trace(self) -> torch.Tensor:
        return (self.W[0] * self.W[1]).sum() * self._scale

    def logits(self, X: torch.Tensor) -> torch.Tensor:
        # through X W_Q and X W_K (n T p each) rather than M: cost 2 n T d p instead of n T d^2 + d^2 p
        X2 = X.reshape(-1, self.d)
        ZQ = (X2 @ self.W[0]).reshape(*X.shape[:-1], self.p)
        ZK = (X2 @ self.W[1]).reshape(*X.shape[:-1], self.p)
        h = (ZQ @ ZK.transpose(-1, -2)) * self._scale
        eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        return (h - self.trace() * eye) / math.sqrt(self.d)

    def regulariser(self, lam: float) -> torch.Tensor:
        """``(lam/sqrt(kappa)) (||W_Q||_F^2 + ||W_K||_F^2)/2`` with ``kappa = p/d`` (``>= lam d ||M||_*``,
        with equality at the balanced factorisations)."""
        return lam * math.sqrt(self.d / self.p) * 0.5 * (self.W * self.W).sum()


class FixedMatrix(nn.Module):
    """Predictions of a given matrix ``M`` (any, symmetric or not): ``logits(X)`` and ``matrix()`` only."""

    def __init__(self, M: torch.Tensor) -> None:
        super().__init__()
        self.d = M.shape[0]
        self.M = nn.Parameter(M.clone(), requires_grad=False)

    def matrix(self) -> torch.Tensor:
        return self.M

    def logits(self, X: torch.Tensor) -> torch.Tensor:
        h = (X.reshape(-1, self.d) @ self.M).reshape(X.shape) @ X.transpose(-1, -2)
        eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
        return (h - torch.trace(self.M) * eye) / math.sqrt(self.d)


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


def init_factorized(
    d: int, p: int, gen: torch.Generator, dtype: torch.dtype, device: torch.device | str, scale: float = 1.0
) -> FactorizedStudent:
    """``W`` iid N(0, scale^2), drawn in float64 on the CPU from ``gen`` (so CPU and GPU start equal)."""
    W = torch.randn(d, p, generator=gen, dtype=torch.float64) * scale
    return FactorizedStudent(W.to(device, dtype))


def init_multihead(
    heads: int, d: int, p: int, gen: torch.Generator, dtype: torch.dtype, device: torch.device | str, scale: float = 1.0
) -> MultiHeadStudent:
    """``W_1, ..., W_H`` iid N(0, scale^2), drawn one after another in float64 on the CPU from ``gen``
    (the first head's ``W`` is the single-head student's of the same generator).

    Examples
    --------
    >>> import torch
    >>> m = init_multihead(2, 6, 3, torch.Generator().manual_seed(0), torch.float64, "cpu")
    >>> tuple(m.W.shape), m.heads
    ((2, 6, 3), 2)
    """
    W = torch.stack([torch.randn(d, p, generator=gen, dtype=torch.float64) for _ in range(heads)]) * scale
    return MultiHeadStudent(W.to(device, dtype))


def init_direct(
    d: int, gen: torch.Generator, dtype: torch.dtype, device: torch.device | str, scale: float = 1.0
) -> DirectStudent:
    """``S`` a GOE matrix with semicircle on ``[-2 scale, 2 scale]``, drawn in float64 on the CPU from ``gen``."""
    G = torch.randn(d, d, generator=gen, dtype=torch.float64)
    S = (G + G.T) * (scale / math.sqrt(2 * d))
    return DirectStudent(S.to(device, dtype))


def init_untied(
    d: int, p: int, gen: torch.Generator, dtype: torch.dtype, device: torch.device | str, scale: float = 1.0
) -> UntiedStudent:
    """``W_Q`` then ``W_K`` iid N(0, scale^2), drawn in float64 on the CPU from ``gen`` (CPU and GPU start equal)."""
    WQ = torch.randn(d, p, generator=gen, dtype=torch.float64) * scale
    WK = torch.randn(d, p, generator=gen, dtype=torch.float64) * scale
    return UntiedStudent(WQ.to(device, dtype), WK.to(device, dtype))


def predict(student: nn.Module, channel: Any, beta: float, X: torch.Tensor) -> torch.Tensor:
    """The student's output for tokens ``X``: ``channel.output`` of its logits, or for a
    :class:`MultiHeadStudent` the mean over heads (``channel.head_output``).

    Examples
    --------
    >>> import torch
    >>> from singlehead.model.channels import get_channel
    >>> m = MultiHeadStudent(torch.zeros(2, 4, 2, dtype=torch.float64))           # S_h = 0: uniform rows
    >>> predict(m, get_channel("seq2lab"), 1.0, torch.randn(1, 2, 4, dtype=torch.float64)).tolist()
    [[[0.5, 0.5], [0.5, 0.5]]]
    """
    h = student.logits(X)
    if isinstance(student, MultiHeadStudent):
        return channel.head_output(h, beta, X)
    return channel.output(h, beta, X)

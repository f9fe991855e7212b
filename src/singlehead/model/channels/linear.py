"""The linear channel (no softmax): with ``T = 1`` the quadratic network."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from singlehead.model.channels.base import Array, Channel
from singlehead.numerics.attention_maps import mat_to_vec, untied_embedding
from singlehead.numerics.prox import prox_linear

__all__ = ["Linear"]


@dataclass(frozen=True)
class Linear(Channel):
    """``h`` itself: with ``T = 1`` the quadratic network ``(x^T S0 x - Tr S0)/sqrt(d) + noise``.

    No temperature (``beta`` must be 1); the fit loss is ``2 ||y - h||^2`` in field coordinates
    (Hessian ``4 I``), so the output side, the test errors and the replicon are in closed form.

    Examples
    --------
    >>> Linear().closed_form_test_errors(T=1, Q0=1.5, q=1.0, m=1.0, noise=0.0)["test_error"]
    1.0
    """

    name: ClassVar[str] = "linear"
    convex_prox: ClassVar[bool] = True
    needs_quadrature: ClassVar[bool] = False
    multihead_theory: ClassVar[str | None] = "reduction"

    def validate(self, T: int, beta: float, beta0: float) -> None:
        if beta != 1.0:
            raise ValueError(f"beta must be 1 for the linear channel (it has no softmax) (got {beta!r})")

    def attention(self, h: Array, beta: float) -> Array:
        return h

    def loss_and_logit_grad(self, h: Any, target: Any, M: Any, beta: float) -> tuple[Any, Any]:
        R = h - target
        return (R * R).sum(), 2.0 * R

    def logit_scale(self, beta: float, beta0: float) -> float:
        return 1.0

    def labels(self, y: np.ndarray, T: int, beta0: float) -> np.ndarray:
        return y

    def fit_loss(self, h, labels, beta, order=2):
        # ||M(y - h)||_F^2 = 2 ||y - h||^2
        N, K = h.shape
        r = labels - h
        val = 2.0 * np.einsum("nk,nk->n", r, r)
        return (
            val,
            None if order < 1 else -4.0 * r,
            None if order < 2 else np.broadcast_to(4.0 * np.eye(K), (N, K, K)),
        )

    def prox_starts(self, z, y, *, T, beta, beta0):
        return []

    def prox_labels(self, z, labels, Sigma, *, beta, starts=None):
        return prox_linear(z, labels, Sigma)

    def closed_form_output_side(self, alpha, T, Q0, q, m, Sigma, noise):
        b = self.closed_form_block(alpha, T * (T + 1) // 2, Q0, q, m, Sigma, noise)
        return b["qhat"], b["mhat"], b["Sigmahat"], b["train_error"]

    def closed_form_block(self, alpha, K, Q0, q, m, Sigma, noise):
        # fit loss 2 ||y - h||^2 on each of the K fields (noise: the teacher field's variance Delta/2)
        S4 = Sigma + 0.25
        E = Q0 - 2 * m + q + noise / 2.0
        return {
            "qhat": 2 * alpha * K * E / S4**2,
            "mhat": 2 * alpha * K / S4,
            "Sigmahat": 2 * alpha * K / S4,
            "train_error": K * E / (8 * S4**2),
            "test_error": 2 * K * (Q0 - 2 * m + q),
            "test_error_noisy": 2 * K * (Q0 + noise / 2.0 - 2 * m + q),
        }

    def block_fit_loss(self, h, labels, beta, order=2, *, blocks):
        if len(blocks) == 1:
            return self.fit_loss(h, labels, beta, order)
        # ||Y - P(h)||_F^2 with P^T P = 2 I (untied_embedding)
        N, K = h.shape
        T = labels.shape[-1]
        P2 = untied_embedding(T).reshape(T * T, K)
        r = labels.reshape(N, T * T) - h @ P2.T
        val = np.einsum("nk,nk->n", r, r)
        return (
            val,
            None if order < 1 else -2.0 * r @ P2,
            None if order < 2 else np.broadcast_to(4.0 * np.eye(K), (N, K, K)),
        )

    def closed_form_test_errors(self, T, Q0, q, m, noise):
        K = T * (T + 1) // 2
        return {
            "test_error": 2 * K * (Q0 - 2 * m + q),
            "test_error_noisy": 2 * K * (Q0 + noise / 2.0 - 2 * m + q),
            "test_error_se": 0.0,
            "test_error_noisy_se": 0.0,
        }

    def fit_hessian_constant(self) -> float:
        return 4.0

    def labels_from_attention(self, Y: np.ndarray) -> np.ndarray:
        return mat_to_vec(Y)

    def label_logits(self, labels: np.ndarray, beta: float) -> np.ndarray:
        return mat_to_vec(labels)

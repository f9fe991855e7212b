"""The softmax channels: :class:`Seq2Lab` (row-wise softmax) and :class:`Seq2Seq` (softmax times ``X/sqrt(d)``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from singlehead.model.channels.base import Array, Channel, stable_softmax
from singlehead.numerics.attention_maps import (
    mat_to_vec,
    shift_direction,
    softmax_fit_loss,
    softmax_rows,
    softmax_t2_prox_convex,
    softmax_t2_prox_convex_everywhere,
    softmax_t2_prox_forms,
    vec_to_mat,
)
from singlehead.numerics.prox import interpolating_start, prox_newton
from singlehead.numerics.prox_rows import (
    STRUCTURED_MIN_T,
    hessian_trace_rows,
    newton_rows,
    prox_convex_rows,
    tangent_solve_rows,
)
from singlehead.numerics.prox_t2 import newton_t2

__all__ = ["Seq2Lab", "Seq2Seq"]


@dataclass(frozen=True)
class Seq2Lab(Channel):
    """Row-wise softmax ``sigma(beta h)``: the label of a sequence is its attention matrix.

    The labels fix the logits up to one shift of every row, so ``c_T = K - 1`` field directions are
    informative (docs: Theory, :ref:`theory-thresholds`); the prox is non-convex and is started from ``z``, the
    interpolating
    point and their midpoint.

    Needs ``T >= 2`` (:attr:`~singlehead.model.channels.Channel.min_T`, inherited by :class:`Seq2Seq` and
    :class:`~singlehead.model.channels.Hardmax`): over a single token the softmax is 1 whatever the logits.

    Examples
    --------
    >>> import numpy as np
    >>> Seq2Lab().attention(np.zeros((1, 2, 2)), beta=1.0).tolist()
    [[[0.5, 0.5], [0.5, 0.5]]]
    """

    name: ClassVar[str] = "seq2lab"
    multihead_theory: ClassVar[str | None] = "heads"
    min_T: ClassVar[int] = 2

    def attention(self, h: Array, beta: float) -> Array:
        return stable_softmax(beta * h)

    def loss_and_logit_grad(self, h: Any, target: Any, M: Any, beta: float) -> tuple[Any, Any]:
        A = (beta * h).softmax(dim=-1)
        R = A - target
        dA = 2.0 * R
        return (R * R).sum(), beta * A * (dA - (dA * A).sum(dim=-1, keepdim=True))

    def informative_directions(self, T: int) -> int:
        # the labels fix the logits up to one global shift of every row (none left at T = 1)
        return T * (T + 1) // 2 - 1

    def labels(self, y: np.ndarray, T: int, beta0: float) -> np.ndarray:
        return softmax_rows(beta0 * vec_to_mat(y, T))

    def fit_loss(self, h, labels, beta, order=2):
        return softmax_fit_loss(h, labels, beta, order=order)

    def prox_labels(self, z, labels, Sigma, *, beta, starts=None):
        # T = 2: Newton in the plane of the two row differences (same minima, a 2 x 2 system per node);
        # T >= STRUCTURED_MIN_T: the Newton systems in row coordinates, diagonal plus rank 2T (numerics.prox_rows)
        T = labels.shape[-1]
        newton = newton_t2(beta) if T == 2 else newton_rows(beta) if T >= STRUCTURED_MIN_T else None
        return prox_newton(
            z, labels, Sigma, lambda h, lab, order: self.fit_loss(h, lab, beta, order), starts=starts, newton=newton
        )

    def prox_convex_at(self, h, labels, beta, Sigma):
        if labels.shape[-1] >= STRUCTURED_MIN_T:
            return prox_convex_rows(h, labels, beta, Sigma)  # D + rank 2T: the Woodbury capacitance's test
        if labels.shape[-1] != 2:
            return super().prox_convex_at(h, labels, beta, Sigma)
        return softmax_t2_prox_convex(h, labels, beta, Sigma)  # rank-two Hessian: a 2 x 2 test per node

    def prox_convex_everywhere(self, T, beta, Sigma):
        # T = 2: a bound on the rows' negative curvature (attention_maps.softmax_t2_prox_convex_everywhere);
        # no bound is derived for T >= 3
        return T == 2 and softmax_t2_prox_convex_everywhere(beta, Sigma)

    def prox_tangent_solve(self, h, labels, beta, Sigma, B):
        if labels.shape[-1] >= STRUCTURED_MIN_T:
            return tangent_solve_rows(h, labels, beta, Sigma, B)  # D + rank 2T: Woodbury, O(T^3) per node
        return super().prox_tangent_solve(h, labels, beta, Sigma, B)

    def prox_hessian_trace(self, h, labels, beta, Sigma):
        if labels.shape[-1] >= STRUCTURED_MIN_T:
            return hessian_trace_rows(h, labels, beta, Sigma)
        return super().prox_hessian_trace(h, labels, beta, Sigma)

    def prox_tangent_forms(self, h, labels, beta, Sigma, V):
        if labels.shape[-1] != 2:
            return super().prox_tangent_forms(h, labels, beta, Sigma, V)
        Q = softmax_t2_prox_forms(h, labels, beta, Sigma, V)  # rank-two Hessian: Woodbury quadratic forms
        return Q if Q is not None else super().prox_tangent_forms(h, labels, beta, Sigma, V)

    def block_label_equations(self, T, blocks):
        if len(blocks) == 1:
            return super().block_label_equations(T, blocks)
        # each row of labels fixes its logits up to a shift of the row: T(T-1) differences, which mix
        # h_ab and h_ba (generic even for a symmetric teacher: the rows are normalised separately)
        return T * (T - 1), T >= 2

    def block_fit_loss(self, h, labels, beta, order=2, *, blocks):
        if len(blocks) == 1:
            return self.fit_loss(h, labels, beta, order)
        return softmax_fit_loss(h, labels, beta, order=order, untied=True)

    def prox_starts(self, z, y, *, T, beta, beta0):
        # z, the interpolating point (the prox point as Sigma -> inf) and their midpoint
        hi = interpolating_start(z, y, beta0 / beta, T)
        return [z, hi, 0.5 * (z + hi)]

    def label_logits(self, labels: np.ndarray, beta: float) -> np.ndarray:
        # log A_ab = beta H_ab - c_a: undo the row normalisation (sum_a c_a = 0), symmetrise, and
        # drop the global shift that the labels do not determine; exact for realisable labels
        T = labels.shape[-1]
        L = np.log(np.maximum(labels, 1e-300)) / beta
        c = (L.transpose(0, 2, 1) - L).mean(axis=2)
        H = L + c[:, :, None]
        H = 0.5 * (H + H.transpose(0, 2, 1))
        w = mat_to_vec(H)
        u = shift_direction(T)
        return w - (w @ u)[:, None] * u

    def observed_projection(self, T: int) -> np.ndarray:
        u = shift_direction(T)
        return np.eye(T * (T + 1) // 2) - np.outer(u, u)


@dataclass(frozen=True)
class Seq2Seq(Seq2Lab):
    """``sigma(beta h) X / sqrt(d)`` (value = identity); its theory is :class:`Seq2Lab`'s.

    The ``1/sqrt(d)`` makes the square loss equal the seq2lab one to leading order; training uses
    the per-sequence Gram constants ``X X^T/d`` and ``y X^T/sqrt(d)``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.ones((1, 2, 4))
    >>> Seq2Seq().output(np.zeros((1, 2, 2)), 1.0, X).tolist()
    [[[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]]
    """

    name: ClassVar[str] = "seq2seq"

    def output(self, h: Array, beta: float, X: Array | None = None) -> Array:
        if X is None:
            raise ValueError("X must be given for the seq2seq channel")
        return (self.attention(h, beta) @ X) / math.sqrt(X.shape[-1])

    def attention_labels(self, y: np.ndarray, X: np.ndarray) -> np.ndarray:
        # y = A X/sqrt(d) with A's rows in the span of the T tokens: A = sqrt(d) y X^T (X X^T)^{-1}
        G = np.einsum("nad,nbd->nab", X, X)
        yX = np.einsum("nad,nbd->nab", y, X)
        return math.sqrt(X.shape[-1]) * np.linalg.solve(G, yX.transpose(0, 2, 1)).transpose(0, 2, 1)

    def training_constants(self, X: Any, y: Any) -> tuple[Any, Any, float]:
        # ||A X/sqrt d - y||^2 = <A M, A> - 2 <A, Y> + ||y||^2 with M = X X^T/d, Y = y X^T/sqrt d
        X, y = X.double(), y.double()
        d = X.shape[-1]
        return y @ X.transpose(-1, -2) / math.sqrt(d), X @ X.transpose(-1, -2) / d, float((y * y).sum())

    def loss_and_logit_grad(self, h: Any, target: Any, M: Any, beta: float) -> tuple[Any, Any]:
        A = (beta * h).softmax(dim=-1)
        AM = A @ M
        # float64 sums: the two terms nearly cancel against ||y||^2 (float32 would lose ~1e-5)
        f64 = A.new_empty(0).double().dtype
        loss = (AM * A).sum(dtype=f64) - 2.0 * (A * target).sum(dtype=f64)
        dA = 2.0 * (AM - target)
        return loss, beta * A * (dA - (dA * A).sum(dim=-1, keepdim=True))

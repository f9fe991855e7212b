"""Output step of GAMP: the channel prox (ERM) or posterior mean (Bayes) per sample, and the ERM objective."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..channels import channel_output, squared_error
from ..data import Sequences
from ..problem import Problem
from ..prox import (
    interpolating_start,
    mat_to_vec,
    prox_linear,
    prox_objective,
    prox_softmax,
    shift_direction,
    softmax_fit_loss,
)
from .operator import SensingOperator


def _label_logits(Y: np.ndarray, beta: float) -> np.ndarray:
    """``K``-vectors ``w`` with ``softmax_rows(beta M(w)) = Y`` (orthogonal to the shift ``u``).

    ``log Y_ab = beta H_ab - c_a``; the row constants are fixed (up to one global constant) by the
    symmetry of ``H`` (``c_a - c_b = L_ba - L_ab``, ``L = log(Y)/beta``), solved by least squares
    (``c_a = mean_b (L_ba - L_ab)``); exact for realisable labels.
    """
    T = Y.shape[-1]
    L = np.log(np.maximum(Y, 1e-300)) / beta
    c = (L.transpose(0, 2, 1) - L).mean(axis=2)  # c_a - c_b = L_ba - L_ab, sum_a c_a = 0
    H = L + c[:, :, None]
    H = 0.5 * (H + H.transpose(0, 2, 1))
    w = mat_to_vec(H)
    u = shift_direction(T)
    return w - (w @ u)[:, None] * u


def _attention_labels(problem: Problem, data: Sequences) -> np.ndarray:
    """``T x T`` labels of the output step: ``y`` itself, or for seq2seq ``sqrt(d) y X^T (X X^T)^{-1}``."""
    X = data.X.detach().cpu().numpy().astype(np.float64)
    y = data.y.detach().cpu().numpy().astype(np.float64)
    if problem.channel != "seq2seq":
        return y
    G = np.einsum("nad,nbd->nab", X, X)
    yX = np.einsum("nad,nbd->nab", y, X)
    return math.sqrt(problem.d) * np.linalg.solve(G, yX.transpose(0, 2, 1)).transpose(0, 2, 1)


@dataclass
class _OutputStep:
    g: np.ndarray  # (n, K)
    gamma: float  # sum_mu Tr(-dg/domega)
    fit: np.ndarray  # per-sample loss at the prox point (ERM) / nan
    h: np.ndarray  # prox point / posterior mean


class _ErmOutput:
    """``g = (prox(omega) - omega)/V`` and ``Gamma = sum_mu Tr[I - (I + V Hess)^{-1}]/V``."""

    def __init__(self, problem: Problem, Ylab: np.ndarray, hysteresis: float = 5e-2) -> None:
        self.problem, self.Y, self.hysteresis = problem, Ylab, float(hysteresis)
        self.T, self.K = problem.T, problem.n_pairs
        self.prev_h: np.ndarray | None = None
        if problem.channel == "linear":
            self.y = mat_to_vec(Ylab)
        else:
            self.w = _label_logits(Ylab, problem.beta)

    def loss(self, h: np.ndarray) -> np.ndarray:
        if self.problem.channel == "linear":
            return 2.0 * np.sum((h - self.y) ** 2, axis=1)
        return softmax_fit_loss(h, self.Y, self.problem.beta, order=0)[0]

    def __call__(self, omega: np.ndarray, V: float) -> _OutputStep:
        n, K = omega.shape
        if self.problem.channel == "linear":
            pr = prox_linear(omega, self.y, V)
            g = (pr.h - omega) / V
            gamma = n * K * (1.0 - 1.0 / (1.0 + 4.0 * V)) / V
            return _OutputStep(g, gamma, pr.fit, pr.h)
        hi = interpolating_start(omega, self.w, 1.0, self.T)
        if self.prev_h is None:
            pr = prox_softmax(omega, self.Y, V, self.problem.beta, starts=[omega, hi, 0.5 * (omega + hi)])
            h = pr.h
        else:
            # Hysteresis between the local minima of the (non-convex) prox objective: keep the
            # branch continued from the previous iteration unless another start is lower by more
            # than `hysteresis (1 + |f|)`; otherwise nodes with two nearly degenerate minima flip
            # every iteration and GAMP cycles. Any local minimum gives a stationary point of ERM.
            pr = prox_softmax(omega, self.Y, V, self.problem.beta, starts=[self.prev_h, omega, hi])
            fs = np.stack([prox_objective(b, omega, self.Y, V, self.problem.beta) for b in pr.branches])
            best = np.argmin(fs, axis=0)
            fbest = fs[best, np.arange(n)]
            keep = fs[0] <= fbest + self.hysteresis * (1.0 + np.abs(fbest))
            choice = np.where(keep, 0, best)
            h = np.stack(pr.branches)[choice, np.arange(n)]
        self.prev_h = h
        fit = softmax_fit_loss(h, self.Y, self.problem.beta, order=0)[0]
        _, _, Hs = softmax_fit_loss(h, self.Y, self.problem.beta, order=2)
        M = np.eye(K)[None] + V * Hs
        ev = np.linalg.eigvalsh(0.5 * (M + M.transpose(0, 2, 1)))
        ev = np.maximum(ev, 1e-12)  # a local minimum of the prox objective has M > 0
        gamma = float(np.sum(1.0 - 1.0 / ev)) / V
        return _OutputStep((h - omega) / V, gamma, fit, h)


class _BayesOutput:
    """Posterior mean of the logits given the labels and the message ``N(omega, V I_K)``.

    The labels reveal ``w = P(z0 + xi)`` (``P`` projects out the shift for softmax channels;
    identity for linear), ``xi ~ N(0, Delta/2 I_K)``. Hence ``E[h] = omega + P (w - omega) V/(V + Dh)``,
    ``g = P (w - omega)/(V + Dh)``, ``Tr(-dg/domega) = c_T/(V + Dh)``.
    """

    def __init__(self, problem: Problem, Ylab: np.ndarray) -> None:
        self.problem = problem
        self.Dh = problem.noise / 2.0
        K = problem.n_pairs
        if problem.channel == "linear":
            self.w = mat_to_vec(Ylab)
            self.P = np.eye(K)
        else:
            self.w = _label_logits(Ylab, problem.beta0)
            u = shift_direction(problem.T)
            self.P = np.eye(K) - np.outer(u, u)
        self.c = int(round(np.trace(self.P)))

    def __call__(self, omega: np.ndarray, V: float) -> _OutputStep:
        n = omega.shape[0]
        r = (self.w - omega) @ self.P
        g = r / (V + self.Dh)
        return _OutputStep(g, n * self.c / (V + self.Dh), np.full(n, np.nan), omega + V * g)


def erm_objective(problem: Problem, op: SensingOperator, Y: np.ndarray, S: np.ndarray,
                  H: np.ndarray | None = None) -> tuple[float, float]:
    """``(objective, train_error)`` per sample, as in :mod:`singlehead.convex`.

    ``objective = (1/n)[sum_mu ||chan_beta(h_mu(S)) - y_mu||_F^2 + lam d Tr S]`` (factorized) or
    ``+ lam d ||S||_F^2`` (direct); ``train_error`` is the first term alone. ``Y`` are the raw
    labels (``T x d`` for seq2seq). ``H``: ``op.logits(S)`` when the caller already has it.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.data import sample_sequences
    >>> problem = Problem(d=30, T=2, alpha=0.5, noise=0.5, lam=0.01)
    >>> S0 = problem.target.sample(problem.d, seed=0)
    >>> data = sample_sequences(problem, S0, problem.n, seed=1)
    >>> import numpy as np
    >>> from singlehead.amp import SensingOperator, erm_objective
    >>> objective, train_error = erm_objective(problem, SensingOperator(data.X), data.y.numpy(), S0.numpy())
    >>> objective >= train_error > 0.0                  # the penalty lam Tr S0 / d is added
    True
    """
    if H is None:
        H = op.logits(S)
    yhat = channel_output(H, problem.channel, problem.beta, op.X)
    tr = float(np.mean(squared_error(yhat, Y)))
    d, n = problem.d, op.n
    reg = problem.lam * d * (float(np.trace(S)) if problem.student == "factorized" else float(np.sum(S * S)))
    return tr + reg / n, tr

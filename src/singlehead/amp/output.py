"""Output step of GAMP: the channel prox (ERM) or posterior mean (Bayes) per sample, and the ERM objective."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from singlehead.amp.operator import SensingOperator
from singlehead.model.channels import squared_error
from singlehead.model.problem import Problem
from singlehead.numerics.prox import interpolating_start
from singlehead.sim.data import Sequences


def attention_labels(problem: Problem, data: Sequences) -> np.ndarray:
    """``T x T`` labels of the output step (the channel inverts its value map, e.g. seq2seq's ``X/sqrt(d)``)."""
    X = data.X.detach().cpu().numpy().astype(np.float64)
    y = data.y.detach().cpu().numpy().astype(np.float64)
    return problem.channel.attention_labels(y, X)


@dataclass
class _OutputStep:
    g: np.ndarray  # (n, K)
    gamma: float  # sum_mu Tr(-dg/domega)
    fit: np.ndarray  # per-sample loss at the prox point (ERM) / nan
    h: np.ndarray  # prox point / posterior mean


class ErmOutput:
    """``g = (prox(omega) - omega)/V`` and ``Gamma = sum_mu Tr[I - (I + V Hess)^{-1}]/V``."""

    def __init__(self, problem: Problem, Ylab: np.ndarray, hysteresis: float = 5e-2) -> None:
        self.problem, self.hysteresis = problem, float(hysteresis)
        self.ch = problem.channel
        self.T, self.K = problem.T, problem.n_pairs
        self.prev_h: np.ndarray | None = None
        self.Y = self.ch.labels_from_attention(Ylab)
        # logits that reproduce the labels: the interpolating start of the prox (None: unknown)
        self.w = None if self.ch.convex_prox else self.ch.label_logits(Ylab, problem.beta)

    def loss(self, h: np.ndarray) -> np.ndarray:
        return self.ch.fit_loss(h, self.Y, self.problem.beta, 0)[0]

    def _objective(self, h: np.ndarray, omega: np.ndarray, V: float) -> np.ndarray:
        d = h - omega
        return np.einsum("nk,nk->n", d, d) / (2.0 * V) + self.loss(h)

    def __call__(self, omega: np.ndarray, V: float) -> _OutputStep:
        n, K = omega.shape
        beta = self.problem.beta
        hc = self.ch.fit_hessian_constant()
        if self.ch.convex_prox:
            pr = self.ch.prox_labels(omega, self.Y, V, beta=beta)
            if hc is not None:
                gamma = n * K * (1.0 - 1.0 / (1.0 + hc * V)) / V
                return _OutputStep((pr.h - omega) / V, gamma, pr.fit, pr.h)
            h = pr.h
        else:
            extra = []
            if self.w is not None:
                hi = interpolating_start(omega, self.w, 1.0, self.T)
                extra = [hi] if self.prev_h is not None else [hi, 0.5 * (omega + hi)]
            if self.prev_h is None:
                h = self.ch.prox_labels(omega, self.Y, V, beta=beta, starts=[omega, *extra]).h
            else:
                # Hysteresis between the local minima of the (non-convex) prox objective: keep the
                # branch continued from the previous iteration unless another start is lower by more
                # than `hysteresis (1 + |f|)`; otherwise nodes with two nearly degenerate minima flip
                # every iteration and GAMP cycles. Any local minimum gives a stationary point of ERM.
                pr = self.ch.prox_labels(omega, self.Y, V, beta=beta, starts=[self.prev_h, omega, *extra])
                fs = np.stack([self._objective(b, omega, V) for b in pr.branches])
                best = np.argmin(fs, axis=0)
                fbest = fs[best, np.arange(n)]
                keep = fs[0] <= fbest + self.hysteresis * (1.0 + np.abs(fbest))
                choice = np.where(keep, 0, best)
                h = np.stack(pr.branches)[choice, np.arange(n)]
            self.prev_h = h
        fit, _, Hs = self.ch.fit_loss(h, self.Y, beta, 2)
        M = np.eye(K)[None] + V * Hs
        ev = np.linalg.eigvalsh(0.5 * (M + M.transpose(0, 2, 1)))
        ev = np.maximum(ev, 1e-12)  # a local minimum of the prox objective has M > 0
        gamma = float(np.sum(1.0 - 1.0 / ev)) / V
        return _OutputStep((h - omega) / V, gamma, fit, h)


class BayesOutput:
    """Posterior mean of the logits given the labels and the message ``N(omega, V I_K)``.

    Channels whose labels reveal ``w = P(z0 + xi)`` (``P`` projects out the shift for softmax
    channels; identity for linear), ``xi ~ N(0, Delta/2 I_K)``: ``E[h] = omega + P (w - omega) V/(V + Dh)``,
    ``g = P (w - omega)/(V + Dh)``, ``Tr(-dg/domega) = c_T/(V + Dh)``. Channels with their own Bayes
    output side (:attr:`~singlehead.model.channels.Channel.own_bayes_output`, e.g. hardmax):
    ``g = grad_omega log Z_out`` and its trace from
    :meth:`~singlehead.model.channels.Channel.bayes_output_denoiser`; ``E[h] = omega + V g``.
    """

    def __init__(self, problem: Problem, Ylab: np.ndarray) -> None:
        self.problem = problem
        self.Dh = problem.noise / 2.0
        self.own = bool(problem.channel.own_bayes_output)
        if self.own:
            self.Ylab = np.asarray(Ylab, dtype=float)
            return
        self.w = problem.channel.label_logits(Ylab, problem.beta0)
        if self.w is None:
            raise ValueError(
                f"Bayes AMP needs the logits behind the labels, which the {problem.channel} channel "
                "does not provide (Channel.label_logits)"
            )
        self.P = problem.channel.observed_projection(problem.T)
        self.c = int(round(np.trace(self.P)))

    def __call__(self, omega: np.ndarray, V: float) -> _OutputStep:
        n = omega.shape[0]
        if self.own:
            g, tr = self.problem.channel.bayes_output_denoiser(self.Ylab, omega, V, self.problem.noise)
            return _OutputStep(g, float(np.sum(tr)), np.full(n, np.nan), omega + V * g)
        r = (self.w - omega) @ self.P
        g = r / (V + self.Dh)
        return _OutputStep(g, n * self.c / (V + self.Dh), np.full(n, np.nan), omega + V * g)


def erm_objective(
    problem: Problem, op: SensingOperator, Y: np.ndarray, S: np.ndarray, H: np.ndarray | None = None
) -> tuple[float, float]:
    """``(objective, train_error)`` per sample, as in :func:`~singlehead.solve_reference`.

    ``objective = (1/n)[sum_mu ||chan_beta(h_mu(S)) - y_mu||_F^2 + lam d Tr S]`` (factorized) or
    ``+ lam d ||S||_F^2`` (direct); ``train_error`` is the first term alone. ``Y`` are the raw
    labels (``T x d`` for seq2seq). ``H``: ``op.logits(S)`` when the caller already has it.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.sim.data import sample_sequences
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
    yhat = problem.channel.output(H, problem.beta, op.X)
    tr = float(np.mean(squared_error(yhat, Y)))
    d, n = problem.d, op.n
    reg = problem.lam * d * float(problem.student.penalty_value(S))
    return tr + reg / n, tr

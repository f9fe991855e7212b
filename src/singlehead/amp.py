"""Approximate message passing (GAMP) for single-head tied attention (THEORY §2, §3, §8, §10).

Two algorithms on the equivalent matrix-sensing problem of arXiv 2509.24914 (Sec. 2):

* **ERM-GAMP** (:func:`amp`): generalised AMP (Rangan 2011, "Generalized approximate message
  passing for estimation with random linear mixing"; Bayati & Montanari 2011 for the state
  evolution) whose output step is the ``K``-dimensional proximal step of the channel
  (:func:`singlehead.prox.prox_channel` / :func:`~singlehead.prox.prox_softmax`) and whose
  matrix step is the proximal map of the regulariser, i.e. the spectral soft threshold
  ``eta ReLU(Y - eps)`` (nuclear norm, optional rank cap) or a linear shrinkage (Frobenius).
  Its fixed points are stationary points of the ERM objective (shown below) and its
  iterates follow the six-order-parameter state evolution of :mod:`singlehead.state_evolution`.
* **Bayes-GAMP** (:func:`amp` with ``bayes=True``): GAMP-RIE in the spirit of Maillard,
  Troiani, Martin, Krzakala & Zdeborová (arXiv 2408.03733) for the attention-indexed model of
  arXiv 2506.01582: the matrix denoiser is the rotation-invariant estimator (RIE, Bun, Allez,
  Bouchaud & Potters 2016) ``x -> x - 2 v H_{mu_v}(x)`` applied to the eigenvalues, and the
  output denoiser is the posterior mean of the channel. For softmax channels the labels fix the
  logits up to the global shift ``u`` (:func:`singlehead.prox.shift_direction`), so the posterior
  of the ``K`` logits given the labels and the Gaussian message is Gaussian, of rank ``c_T = K-1``
  (exactly; label noise handled too). Its iterates follow the Bayes state evolution (THEORY §8).

Sensing operator and normalisations
-----------------------------------
Sample ``mu`` has ``K = T(T+1)/2`` logits, stored as a ``K``-vector with the convention of
:mod:`singlehead.prox` (off-diagonal ``h_ab``, diagonal ``h_aa / sqrt 2``), so that every
component has variance ``q = Tr S^2/d``. Each is a Frobenius inner product
``v_{mu k} = <A_{mu k}, S>`` with

* ``A_{mu,(a,b)} = (x_a x_b^T + x_b x_a^T)/(2 sqrt d)`` for ``a < b``,
* ``A_{mu,(a,a)} = (x_a x_a^T - I)/sqrt(2 d)``,

``E ||A_{mu k}||_F^2 = (d+1)/2``. In the Frobenius-orthonormal coordinates ``theta`` of the
``N = d(d+1)/2``-dimensional space of symmetric matrices, every entry of the sensing matrix has
variance ``a = 1/d``. The adjoint is ``A^T g = sum_mu (X_mu^T B_mu X_mu - Tr(B_mu) I)/sqrt d``
with ``B_mu = M(g_mu)/2`` (``M`` = :func:`singlehead.prox.vec_to_mat`).

One GAMP iteration (scalar variances; ``t`` the iteration index)::

    omega^t  = A(S^t) - V^t g^{t-1}                           (n, K) Onsager-corrected logits
    h*       = prox_{V^t loss}(omega^t)                        K-dim prox of the channel
    g^t      = (h* - omega^t) / V^t
    Gamma^t  = sum_mu Tr[I - (I + V^t Hess loss(h*_mu))^{-1}] / V^t   (= -sum d g/d omega)
    tau^t    = d / Gamma^t                                     (= 1/(a Gamma))
    R^t      = S^t + tau^t A^T g^t
    S^{t+1}  = prox_{tau^t r}(R^t)                             r = lam d Tr S (+ PSD, rank cap)
                                                                 or lam d ||S||_F^2
    V^{t+1}  = tau^t div(R -> S)(R^t) / d                      (= ||A_k||^2 tau div / N)

``div`` is the exact finite-``d`` divergence of the spectral map ``R = U diag(nu) U^T ->
U diag(f) U^T`` over symmetric matrices, ``sum_i f'(nu_i) + sum_{i<j} (f_i - f_j)/(nu_i - nu_j)``
(THEORY §3 writes ``(1/d^2)[...]``, i.e. ``div/N`` to leading order).
``prox_{tau r}`` is ``ReLU(nu - lam d tau)`` on the eigenvalues (top ``p`` kept for the
factorized student with ``kappa < 1``), or ``R/(1 + 2 lam d tau)`` for the direct student.

**Fixed points are stationary points.** At a fixed point ``h* = omega + V g = A(S)`` and
``g = -grad loss(A(S))`` (prox optimality), while ``S = prox_{tau r}(S + tau A^T g)`` means
``A^T g in d r(S)``: together ``0 in A^T grad loss(A S) + d r(S)``, the stationarity condition
of ``sum_mu loss_mu + r(S)``, the (unnormalised) ERM objective of :mod:`singlehead.convex`.
Damping (convex combination of new and old ``S``, ``V``, ``g``) does not move the fixed points.

**Link with the state evolution (THEORY §3).** Matching the effective matrix problem
``R = eta (S0 + delta Z)``, ``Shat = eta ReLU(Y - eps)`` with the iteration above gives
``Sigma = V``, ``Sigmahat = 2/(d tau) = 2 alpha E Tr(-dg/domega)`` (per sample),
``qhat = 2 alpha E ||g||^2``, ``mhat`` by Stein's lemma, ``eta delta = sqrt(qhat)/Sigmahat`` (the
noise in ``R`` has ``theta``-variance ``tau^2 n E||g||^2 / d = 2 (eta delta)^2 / d``, i.e. GOE
``eta delta Z``) and threshold ``lam d tau = eta eps``: exactly the SE normalisation. Hence the
SE iterates are ``(q, m, Sigma)_{t+1} = prior_side(output_side((q, m, Sigma)_t))``
(:func:`se_iterates`), started at the empirical ``(q, m)`` of ``S^0`` and ``Sigma = V^0``.

Bayes variant: ``g = P (w - omega)/(V + Delta/2)`` with ``w`` the logits read off the labels,
``P`` the projector orthogonal to the shift (softmax) or the identity (linear);
``Gamma = n c_T/(V + Delta/2)``; the matrix step is the RIE at ``v = d tau/2``
(``R ~ S0 + sqrt(v) Z``); ``V`` as above. SE: ``V_{t+1} = mmse((V_t + Delta/2)/(2 c_T alpha))``
(:func:`bayes_se_iterates`, THEORY §8).

seq2seq: the labels ``y = P0 X/sqrt d`` determine the attention labels
``P0 = sqrt(d) y X^T (X X^T)^{-1}`` exactly, and ``||P X/sqrt d - y||^2 = ||P - P0||^2 + O(d^{-1/2})``;
AMP runs the seq2lab problem with labels ``P0`` (a stationary point of that objective, which
differs from the seq2seq ERM objective only at order ``d^{-1/2}``). Metrics use the true channel.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from . import __version__
from .channels import channel_output, squared_error
from .data import Sequences, child_seeds, sample_sequences, sample_target
from ._validate import check as _check
from ._validate import finite as _finite
from ._validate import is_int as _is_int
from .problem import Problem
from .prox import (interpolating_start, mat_to_vec, prox_linear, prox_objective, prox_softmax, shift_direction,
                   softmax_fit_loss, vec_to_mat)
from .results import Result
from .simulation import measure_estimate
from .spectra import divided_differences
from .spectra.prior_model import PriorModel, prior_from_eigenvalues

__all__ = [
    "SensingOperator",
    "AMPRun",
    "run_amp",
    "amp",
    "bayes_amp",
    "se_iterates",
    "bayes_se_iterates",
    "spectral_divergence",
    "erm_objective",
    "instance_prior",
    "AMPOptions",
]


# ----------------------------------------------------------------------------------------
# Sensing operator
# ----------------------------------------------------------------------------------------
class SensingOperator:
    """The linear map ``S -> (v_{mu k})`` (``n x K``) of the equivalent matrix-sensing problem.

    Parameters
    ----------
    X : (n, T, d) array
        Tokens.

    Notes
    -----
    ``forward(S)[mu] = mat_to_vec(h_mu(S))`` with ``h_ab(S) = (x_a^T S x_b - delta_ab Tr S)/sqrt d``
    (diagonal divided by ``sqrt 2``, :func:`singlehead.prox.mat_to_vec`);
    ``adjoint(g) = sum_mu (X_mu^T B_mu X_mu - Tr(B_mu) I)/sqrt d`` with ``B_mu = M(g_mu)/2``,
    so that ``<forward(S), g> = <S, adjoint(g)>_F`` for symmetric ``S``.
    """

    def __init__(self, X: np.ndarray | torch.Tensor) -> None:
        # The dense algebra runs in torch (float64, CPU): mixing torch's OpenMP pool with
        # OpenBLAS threads from numpy makes both spin against each other on few cores.
        self.Xt = torch.as_tensor(X, dtype=torch.float64).contiguous()
        self.n, self.T, self.d = self.Xt.shape
        self.K = self.T * (self.T + 1) // 2
        self.X = self.Xt.numpy()
        self._Xf = self.Xt.reshape(-1, self.d)

    def logits(self, S: np.ndarray) -> np.ndarray:
        """``(n, T, T)`` logit matrices ``h_mu(S)``."""
        St = torch.as_tensor(S, dtype=torch.float64)
        XS = (self._Xf @ St).reshape(self.n, self.T, self.d)
        H = (XS @ self.Xt.transpose(1, 2)).numpy()
        idx = np.arange(self.T)
        H[:, idx, idx] -= float(torch.trace(St))
        return H / math.sqrt(self.d)

    def forward(self, S: np.ndarray) -> np.ndarray:
        """``(n, K)`` logit vectors."""
        return mat_to_vec(self.logits(S))

    def adjoint(self, g: np.ndarray) -> np.ndarray:
        """``sum_{mu k} g_{mu k} A_{mu k}`` as a symmetric ``d x d`` matrix."""
        B = torch.as_tensor(0.5 * vec_to_mat(g, self.T))  # (n, T, T)
        BX = (B @ self.Xt).reshape(-1, self.d)
        out = (self._Xf.T @ BX).numpy()
        out = 0.5 * (out + out.T)
        out[np.diag_indices(self.d)] -= float(torch.diagonal(B, dim1=1, dim2=2).sum())
        return out / math.sqrt(self.d)


def _eigh(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric eigendecomposition (ascending), in torch for the thread-pool reason above."""
    nu, U = torch.linalg.eigh(torch.as_tensor(0.5 * (R + R.T), dtype=torch.float64))
    return nu.numpy(), U.numpy()


# ----------------------------------------------------------------------------------------
# Matrix step: spectral denoisers and their exact divergence
# ----------------------------------------------------------------------------------------
def spectral_divergence(nu: np.ndarray, f: np.ndarray, fp: np.ndarray) -> float:
    """Exact divergence of ``R = U diag(nu) U^T -> U diag(f) U^T`` over symmetric matrices.

    ``sum_i f'(nu_i) + sum_{i<j} (f_i - f_j)/(nu_i - nu_j)`` (derivative in the
    Frobenius-orthonormal coordinates of the ``d(d+1)/2``-dimensional space; ties use the mean of
    the two ``f'``; :func:`singlehead.spectra.divided_differences`). Divide by ``d(d+1)/2`` for the
    per-coordinate divergence of THEORY §3.
    """
    M = divided_differences(nu, f, fp)
    np.fill_diagonal(M, 0.0)
    return float(np.asarray(fp, dtype=float).sum() + 0.5 * M.sum())


@dataclass
class _Denoised:
    S: np.ndarray
    div: float  # exact divergence (sum over the N = d(d+1)/2 coordinates)
    eigenvalues: np.ndarray  # of S, ascending


def _soft_threshold(R: np.ndarray, thr: float, cap: int | None) -> _Denoised:
    """``argmin_S thr Tr S + ||S - R||_F^2/2`` over PSD ``S`` (rank ``<= cap``): ``ReLU(nu - thr)``."""
    nu, U = _eigh(R)
    f = np.maximum(nu - thr, 0.0)
    fp = (nu > thr).astype(float)
    if cap is not None and cap < nu.size:
        f[: nu.size - cap] = 0.0  # ascending: keep the top `cap`
        fp[: nu.size - cap] = 0.0
    S = (torch.as_tensor(U * f) @ torch.as_tensor(U).T).numpy()
    return _Denoised(0.5 * (S + S.T), spectral_divergence(nu, f, fp), f)


def _linear_shrink(R: np.ndarray, c: float) -> _Denoised:
    """``argmin_S c' ||S||^2 + ||S - R||^2/2`` = ``R/(1 + 2 c')``, written as ``R * c`` (``c = 1/(1+2c')``)."""
    d = R.shape[0]
    S = c * 0.5 * (R + R.T)
    return _Denoised(S, c * d * (d + 1) / 2.0, np.linalg.eigvalsh(S))


class _RIE:
    """Rotation-invariant posterior mean of ``S0`` from ``R = S0 + sqrt(v) Z`` (Z GOE, SC on [-2, 2]).

    ``xi(x) = x - 2 v H_v(x)``, ``H_v`` the Hilbert transform ``p.v. int mu_v(dy)/(x - y)`` of
    ``mu_v = mu_{S0} ⊞ SC(v)`` (Bun, Allez, Bouchaud & Potters 2016; arXiv 2408.03733, 2506.01582).
    ``xi'`` for the (order ``1/d``) diagonal part of the divergence is a central difference of ``H``.
    """

    def __init__(self, law: Any) -> None:
        self.law = law

    def __call__(self, R: np.ndarray, v: float) -> _Denoised:
        from .spectra import free_convolve_semicircle

        nu, U = _eigh(R)
        cl = free_convolve_semicircle(self.law, v)
        f = nu - 2.0 * v * cl.hilbert(nu)
        h = 1e-5 * max(1.0, math.sqrt(v))
        fp = 1.0 - 2.0 * v * (cl.hilbert(nu + h) - cl.hilbert(nu - h)) / (2 * h)
        S = (torch.as_tensor(U * f) @ torch.as_tensor(U).T).numpy()
        return _Denoised(0.5 * (S + S.T), spectral_divergence(nu, f, fp), f)


# ----------------------------------------------------------------------------------------
# Output step
# ----------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------
# Objective
# ----------------------------------------------------------------------------------------
def erm_objective(problem: Problem, op: SensingOperator, Y: np.ndarray, S: np.ndarray) -> tuple[float, float]:
    """``(objective, train_error)`` per sample, as in :mod:`singlehead.convex`.

    ``objective = (1/n)[sum_mu ||chan_beta(h_mu(S)) - y_mu||_F^2 + lam d Tr S]`` (factorized) or
    ``+ lam d ||S||_F^2`` (direct); ``train_error`` is the first term alone. ``Y`` are the raw
    labels (``T x d`` for seq2seq).
    """
    H = op.logits(S)
    yhat = channel_output(H, problem.channel, problem.beta, op.X)
    tr = float(np.mean(squared_error(yhat, Y)))
    d, n = problem.d, op.n
    reg = problem.lam * d * (float(np.trace(S)) if problem.student == "factorized" else float(np.sum(S * S)))
    return tr + reg / n, tr


# ----------------------------------------------------------------------------------------
# The iteration
# ----------------------------------------------------------------------------------------
@dataclass
class AMPRun:
    """Outcome of :func:`run_amp` on one data set.

    ``history`` maps ``q, m, Sigma, tau, objective, train_error, residual`` to per-iteration
    lists; entry ``t`` is measured at the iterate ``S^t`` (``t = 0`` the initialisation;
    ``Sigma = V^t``; ``tau`` is the ``tau`` computed from ``S^t``; ``residual`` the relative
    change ``max(||S^{t+1} - S^t||_F/||S^t||_F, |V^{t+1} - V^t|/V^t)`` leading to ``S^{t+1}``).
    """

    S: np.ndarray
    V: float
    tau: float
    iterations: int
    converged: bool
    history: dict[str, list] = field(default_factory=dict)
    eigenvalues: np.ndarray | None = None


def _init_matrix(problem: Problem, init: Any, init_scale: float) -> np.ndarray:
    d = problem.d
    if init is None or (isinstance(init, str) and init == "identity"):
        return init_scale * np.eye(d)
    if isinstance(init, str) and init == "zero":
        return np.zeros((d, d))
    S = np.asarray(init, dtype=float)
    if S.shape != (d, d):
        raise ValueError(f"init must be 'identity', 'zero' or a d x d matrix (got shape {S.shape})")
    return 0.5 * (S + S.T)


@dataclass(frozen=True)
class AMPOptions:
    """Settings of GAMP (frozen, validated on construction).

    Parameters
    ----------
    bayes : bool
        Bayes-GAMP (RIE matrix denoiser, posterior-mean output) instead of ERM-GAMP.
    max_iter : int
        Iteration budget (>= 1).
    damping : float in (0, 1], optional
        Weight of the new iterate: ``x <- (1 - damping) x + damping x_new`` for ``S``, ``V`` and
        ``g`` (1 = undamped GAMP, which is what the state evolution describes). Default 1 for
        ERM-GAMP and 0.5 for Bayes-GAMP (undamped GAMP-RIE is unstable on these structured
        sensing matrices: its noise level leaves the SE after a few iterations and diverges).
    adaptive : bool
        Stopping-rule safeguard: when the residual contracts by less than a factor
        ``0.95^5`` over 5 iterations (slow drift, oscillation, or a 2-cycle of nodes jumping
        between the two local minima of the non-convex softmax prox), multiply the damping by 0.6
        (floor 0.25; at most every 10 iterations). The SE describes the iterates up to the first
        such change, recorded in ``history["damping"]``.
    tol : float
        Stop when the relative change (``residual`` in the history) is below ``tol`` (>= 0).
    init : "identity", "zero" or (d, d) array
        ``S^0``; "identity" is ``init_scale * I``.
    init_scale : float, optional
        Default: ``0.5`` (ERM); for Bayes the prior mean ``Tr S0/d`` of the target law
        (``S^0 = E S0``).
    init_sigma : float, optional
        ``V^0``. Default 1 (ERM); for Bayes the prior variance ``Q0 - (Tr S0/d)^2``.
    n_test : int
        Fresh test sequences of :func:`amp` (>= 2).
    rank_tol : float
        Eigenvalues with ``|eig| <= rank_tol`` count as zero (>= 0).
    num_threads : int, optional
        Run torch's dense algebra with this many threads for the duration of the call (the
        previous setting is restored). ``1`` is much faster on a small, shared machine, where
        multithreaded LAPACK/OpenMP pools spin against each other. Default: leave it alone.
    """

    bayes: bool = False
    max_iter: int = 300
    damping: float | None = None
    adaptive: bool = True
    tol: float = 1e-8
    init: Any = "identity"
    init_scale: float | None = None
    init_sigma: float | None = None
    n_test: int = 10000
    rank_tol: float = 1e-3
    num_threads: int | None = None

    def __post_init__(self) -> None:
        _check(_is_int(self.max_iter) and self.max_iter >= 1, "max_iter", "an integer >= 1", self.max_iter)
        _check(self.damping is None or (_finite(self.damping) and 0 < self.damping <= 1), "damping",
               "in (0, 1] or None", self.damping)
        _check(_finite(self.tol) and self.tol >= 0, "tol", ">= 0", self.tol)
        _check(_is_int(self.n_test) and self.n_test >= 2, "n_test", "an integer >= 2", self.n_test)
        _check(_finite(self.rank_tol) and self.rank_tol >= 0, "rank_tol", ">= 0", self.rank_tol)
        _check(self.num_threads is None or (_is_int(self.num_threads) and self.num_threads >= 1), "num_threads",
               "an integer >= 1 or None", self.num_threads)
        _check(isinstance(self.init, np.ndarray) or self.init in ("identity", "zero"), "init",
               "'identity', 'zero' or a d x d matrix", self.init)

    def replace(self, **changes: Any) -> "AMPOptions":
        return dataclasses.replace(self, **changes)


def run_amp(
    problem: Problem,
    data: Sequences,
    *,
    S0: np.ndarray | torch.Tensor | None = None,
    options: AMPOptions | None = None,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> AMPRun:
    """Run ERM-GAMP (or Bayes-GAMP) on one labelled data set.

    Parameters
    ----------
    problem : Problem
        Channel, student, ``lam`` (ERM) or prior (Bayes).
    data : Sequences
        Training set (labels ``data.y``).
    S0 : array, optional
        Target, only used to record the overlap ``m = Tr S S0/d`` in the history.
    options : AMPOptions, optional
        Algorithm settings (``bayes``, damping, tolerance, initialisation, threads).
    callback : callable, optional
        ``callback(t, record)`` after each iteration.
    """
    o = options or AMPOptions()
    args = (problem, data, S0, o.bayes, o.max_iter, o.damping, o.adaptive, o.tol, o.init, o.init_scale,
            o.init_sigma, callback)
    if o.num_threads is None:
        return _run_amp(*args)
    old = torch.get_num_threads()
    torch.set_num_threads(int(o.num_threads))
    try:
        return _run_amp(*args)
    finally:
        torch.set_num_threads(old)


def _run_amp(problem, data, S0, bayes, max_iter, damping, adaptive, tol, init, init_scale, init_sigma,
             callback) -> AMPRun:
    if damping is None:
        damping = 0.5 if bayes else 1.0
    d, n = problem.d, len(data)
    X = data.X.detach().cpu().numpy().astype(np.float64)
    Yraw = data.y.detach().cpu().numpy().astype(np.float64)
    op = SensingOperator(X)
    Ylab = _attention_labels(problem, data)
    S0n = None if S0 is None else np.asarray(S0.numpy() if isinstance(S0, torch.Tensor) else S0, dtype=float)
    if bayes:
        law = problem.target.spectral_law(problem.d).engine
        mean0, Q0l = float(law.mean()), float(law.second_moment())
        if init_scale is None:
            init_scale = mean0
        if init_sigma is None:
            init_sigma = max(Q0l - mean0**2, 1e-6)
        out_step: Any = _BayesOutput(problem, Ylab)
        rie = _RIE(law)
    else:
        if init_scale is None:
            init_scale = 0.5
        if init_sigma is None:
            init_sigma = 1.0
        out_step = _ErmOutput(problem, Ylab)
    S = _init_matrix(problem, init, init_scale)
    V = float(init_sigma)
    g = np.zeros((n, problem.n_pairs))
    cap = problem.p if (problem.student == "factorized" and problem.p < d) else None
    hist: dict[str, list] = {k: [] for k in ("q", "m", "Sigma", "tau", "objective", "train_error", "residual",
                                             "damping")}
    last_change = 0
    converged = False
    tau = math.nan
    eig = None
    it = 0
    for it in range(1, int(max_iter) + 1):
        omega = op.forward(S) - V * g
        o = out_step(omega, V)
        g_new = o.g if (damping == 1 or it == 1) else (1 - damping) * g + damping * o.g
        # gamma from the undamped step (variances are damped through V)
        tau = d / max(o.gamma, 1e-300)
        R = S + tau * op.adjoint(g_new)
        if bayes:
            den = rie(R, d * tau / 2.0)
        elif problem.student == "direct":
            den = _linear_shrink(R, 1.0 / (1.0 + 2.0 * problem.lam * d * tau))
        else:
            den = _soft_threshold(R, problem.lam * d * tau, cap)
        V_new = tau * den.div / d
        S_new = den.S if damping == 1 else (1 - damping) * S + damping * den.S
        V_new = V_new if damping == 1 else (1 - damping) * V + damping * V_new
        # record at S^t
        obj, tr = erm_objective(problem, op, Yraw, S)
        nS = math.sqrt(float(np.sum(S * S)))
        res = max(math.sqrt(float(np.sum((S_new - S) ** 2))) / max(nS, 1e-12), abs(V_new - V) / max(V, 1e-300))
        rec = {"q": float(np.sum(S * S)) / d, "m": math.nan if S0n is None else float(np.sum(S * S0n)) / d,
               "Sigma": V, "tau": tau, "objective": obj, "train_error": tr, "residual": res, "damping": damping}
        for k, v in rec.items():
            hist[k].append(v)
        if callback is not None:
            callback(it, rec)
        S, V, g = S_new, V_new, g_new
        eig = den.eigenvalues
        if not (math.isfinite(res) and math.isfinite(V)) or V <= 0:
            break
        if res < tol:
            converged = True
            break
        r = hist["residual"]
        if adaptive and it - last_change >= 10 and len(r) > 5 and damping > 0.25 and r[-1] > 0.95**5 * r[-6]:
            damping, last_change = max(0.25, 0.6 * damping), it
    obj, tr = erm_objective(problem, op, Yraw, S)
    final = {"q": float(np.sum(S * S)) / d, "m": math.nan if S0n is None else float(np.sum(S * S0n)) / d,
             "Sigma": V, "tau": math.nan, "objective": obj, "train_error": tr, "residual": math.nan,
             "damping": damping}
    for k, v in final.items():
        hist[k].append(v)
    return AMPRun(S, V, tau, it, converged, hist, eig)


# ----------------------------------------------------------------------------------------
# Public entry point
# ----------------------------------------------------------------------------------------
def amp(
    problem: Problem,
    seed: int = 0,
    *,
    options: AMPOptions | None = None,
    return_matrices: bool = False,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> Result:
    """GAMP on one draw of the task, measured like :func:`singlehead.simulation.simulate`.

    Same seed streams as ``simulate`` (``child_seeds(seed, 4)`` = target, train, test, init), so
    AMP and ERM see the same target and training set for the same ``seed``. ``options`` as in
    :func:`run_amp` (``AMPOptions(bayes=True)`` for Bayes-GAMP; ``n_test`` fresh test sequences,
    ``rank_tol`` the zero threshold of eigenvalues).

    Returns
    -------
    Result
        ``source="amp"``; metrics with the definitions of :mod:`singlehead.results` (computed by
        :func:`singlehead.simulation.evaluate`); standard fields ``converged``, ``iterations``,
        ``runtime_s``, ``message``; extras ``history``, ``eigenvalues``, ``rank``,
        ``zero_fraction``, ``objective``, ``q``, ``m``, ``Q0``, ``Sigma``, ``tau``, ``bayes``,
        ``test_error_se``, ``seed``, ``version`` (``S``, ``S0`` with ``return_matrices``).
    """
    o = options or AMPOptions()
    n_test = o.n_test
    t0 = time.perf_counter()
    s_target, s_train, s_test, _ = child_seeds(seed, 4)
    S0 = sample_target(problem.target, problem.d, s_target)
    train = sample_sequences(problem, S0, problem.n, s_train)
    test = sample_sequences(problem, S0, int(n_test), s_test)
    run = run_amp(problem, train, S0=S0, options=o, callback=callback)
    S, S0_np = run.S, S0.numpy()
    metrics, common = measure_estimate(problem, S, S0_np, train, test, rank_tol=o.rank_tol)
    extras: dict[str, Any] = {
        **common,
        "history": run.history,
        "objective": run.history["objective"][-1], "Sigma": run.V, "tau": run.tau,
        "bayes": bool(o.bayes), "damping": run.history["damping"][-1],
        "seed": int(seed), "version": __version__, "n": problem.n, "n_test": int(n_test),
    }
    if return_matrices:
        extras["S"] = S
        extras["S0"] = S0_np
    finite_res = [r for r in run.history["residual"] if math.isfinite(r)]
    res = finite_res[-1] if finite_res else math.nan
    message = (f"converged: relative change {res:.1e} < tol {o.tol:.1e}" if run.converged
               else f"not converged after {run.iterations} iterations (relative change {res:.1e})")
    return Result("amp", problem.to_dict(), **metrics, converged=bool(run.converged), iterations=int(run.iterations),
                  runtime_s=time.perf_counter() - t0, message=message, extras=extras)


def bayes_amp(problem: Problem, seed: int = 0, *, options: AMPOptions | None = None, **kwargs: Any) -> Result:
    """Bayes-GAMP (GAMP-RIE): :func:`amp` with ``AMPOptions(bayes=True)``."""
    return amp(problem, seed, options=(options or AMPOptions()).replace(bayes=True), **kwargs)


# ----------------------------------------------------------------------------------------
# State-evolution iterates (composed from the SE engineer's public pieces)
# ----------------------------------------------------------------------------------------
def se_iterates(
    problem: Problem,
    q0: float,
    m0: float,
    Sigma0: float,
    n_iter: int,
    *,
    prior: Any = "auto",
    quad: Any = None,
) -> dict[str, np.ndarray]:
    """Undamped SE iterates ``x_{t+1} = prior_side(output_side(x_t))``, ``x = (q, m, Sigma)``.

    This is the trajectory undamped ERM-GAMP follows from ``S^0`` with overlaps ``(q0, m0)`` and
    ``V^0 = Sigma0`` (module docstring). Returns arrays ``q, m, Sigma`` of length ``n_iter + 1``
    and ``qhat, mhat, Sigmahat`` of length ``n_iter``.
    """
    from .state_evolution import OutputQuadrature, PriorModel, output_side, prior_model, prior_side

    pm = prior if isinstance(prior, PriorModel) else prior_model(problem, prior)
    if quad is None and problem.channel != "linear":
        quad = OutputQuadrature.sobol(2 * problem.n_pairs)
    xs = [(float(q0), float(m0), float(Sigma0))]
    hats = []
    warm = None
    for _ in range(int(n_iter)):
        q, m, Sig = xs[-1]
        out = output_side(q, m, Sig, problem=problem, Q0=pm.Q0, quad=quad, warm=warm)
        if out.branches is not None and problem.channel != "linear":
            warm = out.branches
        pr = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=problem, prior=pm)
        hats.append((out.qhat, out.mhat, out.Sigmahat))
        xs.append((pr.q, pr.m, pr.Sigma))
    a, h = np.array(xs), np.array(hats).reshape(-1, 3)
    return {"q": a[:, 0], "m": a[:, 1], "Sigma": a[:, 2], "qhat": h[:, 0], "mhat": h[:, 1], "Sigmahat": h[:, 2],
            "Q0": pm.Q0}


def bayes_se_iterates(problem: Problem, V0: float, n_iter: int, *, prior: Any = "auto") -> dict[str, np.ndarray]:
    """Bayes SE iterates ``V_{t+1} = mmse((V_t + Delta/2)/(2 c_T alpha))`` (THEORY §8; ``q = Q0 - V``).

    The MSE ``||S^t - S0||_F^2/d`` of Bayes-GAMP follows ``V_t`` (Nishimori: ``m = q``).
    """
    from .bayes import denoising_mmse
    from .state_evolution import PriorModel, prior_model
    from .thresholds import informative_directions

    pm = prior if isinstance(prior, PriorModel) else prior_model(problem, prior)
    a = 2 * informative_directions(problem) * problem.alpha
    Dh = problem.noise / 2
    Vs = [float(V0)]
    for _ in range(int(n_iter)):
        Vs.append(denoising_mmse(pm, (Vs[-1] + Dh) / a))
    V = np.array(Vs)
    return {"V": V, "q": pm.Q0 - V, "Q0": pm.Q0}


def instance_prior(S0: np.ndarray | torch.Tensor, *, draws: int = 4, seed: int = 0) -> PriorModel:
    """Finite-``d`` SE prior model built from the eigenvalues of one sampled target ``S0``.

    Comparing AMP on an instance with the SE iterates of *that* instance (same ``Q0`` and
    spectrum, :class:`singlehead.spectra.FiniteDSpectrum` with ``draws`` fixed GOE draws) removes
    the ``O(1/d)`` target-to-target fluctuation from the comparison.
    """
    S = S0.numpy() if isinstance(S0, torch.Tensor) else np.asarray(S0, dtype=float)
    return prior_from_eigenvalues(np.linalg.eigvalsh(S), draws=draws, seed=seed)

"""Output (channel) side of the multi-head state evolution: ``(Q, M, Sigma) -> (Qhat, Mhat, Sigmahat)``.

Per sequence, ``K = T(T+1)/2`` independent groups of fields, one per upper-triangular logit ``k``: the
teacher heads' ``u0_k`` (``H0``) and the student heads' ``z_k`` (``H``), jointly Gaussian with covariance
``C = [[Q0, M^T], [M, Q]]``; the teacher heads share the label noise, ``y_k = u0_k + xi_k 1``,
``xi_k ~ N(0, Delta/2)``. The labels are ``Y = (1/H0) sum_j chan_beta0(M(y_j))`` and the loss
``ell(h) = ||Y - (1/H) sum_h chan_beta(M(h_h))||_F^2`` (:mod:`.loss`). With the ``H x H`` prox parameter
``Sigma`` acting on the head index,

    h* = argmin_h  (1/2) sum_k (h_k - z_k)^T Sigma^{-1} (h_k - z_k) + ell(h),    f_k = Sigma^{-1} (h*_k - z_k),

and with ``(w0_k, w_k) = C^{-1} (u0_k, z_k)`` (``u0`` replaced by ``E[u0 | y, z]``: ``f`` depends on ``(y, z)``
only),

    Qhat     =  2 alpha E sum_k f_k f_k^T            (H x H)
    Mhat     =  2 alpha E sum_k f_k w0_k^T           (H x H0)
    Sigmahat = -2 alpha E sum_k f_k w_k^T            (H x H, symmetrised)

(derivation: ``docs/multihead_theory.rst``). With ``H = H0 = 1`` these are the single-head formulas of
:mod:`singlehead.state_evolution.output`, on the same nodes. The prox is solved in whitened coordinates
``h = L h'`` (``Sigma = L L^T``), where it is the isotropic prox of unit parameter, by the library's batched
safeguarded Newton (:func:`~singlehead.numerics.prox.prox_newton`) from several starts, node-wise lowest
objective.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.numerics.prox import prox_newton, shift_direction
from singlehead.state_evolution.multihead_se.loss import (
    head_attention,
    linear_t2_loss,
    multihead_fit_loss,
    row_difference_map,
)
from singlehead.state_evolution.quadrature import OutputQuadrature

__all__ = [
    "MultiHeadOutput",
    "multihead_output_side",
    "multihead_test_errors",
    "multihead_quadrature",
    "field_law",
    "collapsed_output_side",
]


@dataclass
class MultiHeadOutput:
    """Conjugates at ``(Q, M, Sigma)``: ``Qhat`` (``H x H``), ``Mhat`` (``H x H0``), ``Sigmahat`` (``H x H``),
    the train error per sequence (from the prox point), their quadrature standard errors (``err``, same
    shapes), the prox branches (warm starts of a next call) and whether every node's Newton converged."""

    Qhat: np.ndarray
    Mhat: np.ndarray
    Sigmahat: np.ndarray
    train_error: float
    err: dict[str, Any] = field(default_factory=dict)
    branches: list | None = None
    prox_converged: bool = True
    #: the prox points ``(N, H K)`` (original coordinates), the natural warm start of a next call
    h: np.ndarray | None = None
    #: the end point of the start from ``z`` (or from ``z_start``), ``(N, H K)``
    z_branch: np.ndarray | None = None


def multihead_quadrature(problem: Any, n_points: int = 2048, n_scrambles: int = 4, seed: int = 0) -> OutputQuadrature:
    """Scrambled-Sobol nodes in ``K (H0 + H)`` dimensions: the teacher heads' fields first (``K`` each), then the
    student heads'. With ``H = H0 = 1`` the single head's node layout."""
    K = problem.T * (problem.T + 1) // 2
    return OutputQuadrature.sobol(K * (problem.teacher_heads + problem.heads), n_points, n_scrambles, seed)


def field_law(
    Q: np.ndarray, M: np.ndarray, Q0: np.ndarray, noise: float, *, singular: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(L, E, Cinv)``: the Cholesky factor of the covariance of ``(y, z)`` (teacher fields with noise, then
    student fields), the matrix ``E`` with ``E[u0 | y, z] = E (y, z)``, and ``C^{-1}`` of the noiseless ``(u0, z)``.

    The covariance must be positive definite (else ``numpy.linalg.LinAlgError``), unless ``singular``: then a
    positive semi-definite covariance (student heads that are copies of each other, or ``Q = 0`` at the
    collapsed point ``S = 0``) is factored by its symmetric square root, and ``E``, ``Cinv`` use the
    pseudo-inverse, which is what the Gaussian law restricted to its support needs (the fields ``z`` of a
    zero ``Q`` are zero). A positive definite covariance gets the Cholesky factor either way.
    """
    H0 = Q0.shape[0]
    Cn = np.block([[Q0 + 0.5 * noise * np.ones((H0, H0)), M.T], [M, Q]])
    C = np.block([[Q0, M.T], [M, Q]])
    cov_u0 = np.concatenate([Q0, M], axis=0)
    try:
        L = np.linalg.cholesky(Cn)
        E = np.linalg.solve(Cn, cov_u0).T  # Cov(u0, (y, z)) Cn^{-1}
        return L, E, np.linalg.inv(C)
    except np.linalg.LinAlgError:
        if not singular:
            raise
    w, V = np.linalg.eigh(0.5 * (Cn + Cn.T))
    L = (V * np.sqrt(np.maximum(w, 0.0))) @ V.T
    return L, (np.linalg.pinv(Cn, hermitian=True) @ cov_u0).T, np.linalg.pinv(C, hermitian=True)


def _fields(
    quad: OutputQuadrature,
    Q: np.ndarray,
    M: np.ndarray,
    Q0: np.ndarray,
    noise: float,
    K: int,
    *,
    singular: bool = False,
):
    """``y (N, H0, K)``, ``z (N, H, K)`` and ``E[u0 | y, z] (N, H0, K)`` on the nodes (``singular``: see
    :func:`field_law`)."""
    H0, H = Q0.shape[0], Q.shape[0]
    L, E, _ = field_law(Q, M, Q0, noise, singular=singular)
    U = quad.flat.reshape(-1, H0 + H, K)
    V = np.einsum("ij,njk->nik", L, U)
    return V[:, :H0], V[:, H0:], np.einsum("ij,njk->nik", E, V)


def teacher_labels(problem: Any, y: np.ndarray) -> np.ndarray:
    """``Y = (1/H0) sum_j chan_beta0(M(y_j))`` for teacher fields ``y`` ``(N, H0, K)``."""
    T, ch = problem.T, problem.channel
    N, H0, K = y.shape
    return ch.labels(y.reshape(-1, K), T, problem.beta0).reshape(N, H0, T, T).mean(axis=1)


def _row_shift_closest(base: np.ndarray, z: np.ndarray, T: int) -> np.ndarray:
    """``base + t u`` closest to ``z`` (``u`` the softmax's invariant shift direction), per head: ``(N, H, K)``."""
    u = shift_direction(T)
    t = np.einsum("nhk,k->nh", z - base, u)
    return base + t[..., None] * u


def prox_starts(problem: Any, z: np.ndarray, y: np.ndarray, labels: np.ndarray) -> list[np.ndarray]:
    """Newton starts ``(N, H, K)``: ``z``; the specialised interpolating points (head ``h`` at the teacher logits
    ``(beta0/beta) y_j`` of a distinct teacher head, every assignment; ``j = h mod H0`` when ``H > H0``), each
    shifted to the point of its softmax-invariant line closest to ``z_h``; the unspecialised interpolating
    point (every head at the logits whose softmax is ``Y`` itself, :meth:`Channel.label_logits`); and the
    midpoints of ``z`` and each interpolating point."""
    T, ch = problem.T, problem.channel
    N, H, K = z.shape
    H0 = y.shape[1]
    ratio = ch.logit_scale(problem.beta, problem.beta0)
    interp = []
    if H <= H0:
        assign = list(itertools.permutations(range(H0), H))
    else:
        assign = [tuple((h + s) % H0 for h in range(H)) for s in range(H0)]
    for perm in assign[:6]:
        interp.append(_row_shift_closest(ratio * y[:, list(perm)], z, T))
    ll = ch.label_logits(labels, problem.beta)
    if ll is not None:
        interp.append(_row_shift_closest(np.repeat(ll[:, None, :], H, axis=1), z, T))
    return [z] + interp + [0.5 * (z + s) for s in interp]


def _whitened_loss(problem: Any, Lc: np.ndarray):
    """The fit loss in whitened coordinates ``h = (Lc x I_K) h'`` (at ``T = 2`` in closed form through the heads'
    row differences, :func:`~.loss.linear_t2_loss`)."""
    H = Lc.shape[0]
    K = problem.T * (problem.T + 1) // 2
    big = np.kron(Lc, np.eye(K))
    if problem.T == 2:
        return linear_t2_loss(row_difference_map(H) @ big, problem.beta, H)

    bigT = np.ascontiguousarray(big.T)

    def loss(hp: np.ndarray, labels: np.ndarray, order: int):
        val, g, hs = multihead_fit_loss(hp @ bigT, labels, problem.beta, H, order)
        # the Hessian's congruence big^T hs big as two batched matrix products (an einsum over three operands
        # would loop over all four indices per node)
        return val, None if g is None else g @ big, None if hs is None else bigT @ hs @ big

    return loss


def multihead_output_side(
    Q: np.ndarray,
    M: np.ndarray,
    Sigma: np.ndarray,
    *,
    problem: Any,
    Q0: np.ndarray,
    quad: OutputQuadrature | None = None,
    warm: list | None = None,
    union: bool = False,
    z_start: np.ndarray | None = None,
) -> MultiHeadOutput:
    """``(Q, M, Sigma) -> (Qhat, Mhat, Sigmahat)`` of the module docstring, plus the train error.

    Parameters
    ----------
    Q, M, Sigma : arrays ``(H, H)``, ``(H, H0)``, ``(H, H)``
        Student overlaps, student-teacher overlaps and the prox parameter (``Q`` and ``Sigma`` positive definite).
    problem : Problem
        Supplies ``alpha, T, channel, beta, beta0, noise`` (a softmax channel).
    Q0 : (H0, H0) array
        Teacher overlaps ``Tr(S0_j S0_j')/d``.
    quad : OutputQuadrature, optional
        Nodes in ``K (H0 + H)`` dimensions (default ``multihead_quadrature``).
    warm : list of (N, H K) arrays, optional
        Newton starts from a previous call (its ``branches``), followed by the start from ``z``; ``union``: with
        the other cold starts too (``prox_starts``).
    z_start : (N, H K) array, optional
        With ``warm`` and not ``union``: where the start from ``z`` begins instead of ``z`` itself (a previous
        call's ``z_branch``: the branch reached from ``z`` continued; default ``z``).
    """
    Q, M, Sigma, Q0 = (np.atleast_2d(np.asarray(a, float)) for a in (Q, M, Sigma, Q0))
    H, H0 = Q.shape[0], Q0.shape[0]
    if M.shape != (H, H0) or Sigma.shape != (H, H):
        raise ValueError(f"M must be (H, H0) = {(H, H0)} and Sigma (H, H) (got {M.shape}, {Sigma.shape})")
    T, alpha = problem.T, problem.alpha
    K = T * (T + 1) // 2
    quad = quad if quad is not None else multihead_quadrature(problem)
    y, z, u0 = _fields(quad, Q, M, Q0, problem.noise, K)
    labels = teacher_labels(problem, y)
    N = z.shape[0]
    Sigma = 0.5 * (Sigma + Sigma.T)
    Lc = np.linalg.cholesky(Sigma)
    big_inv = np.kron(np.linalg.inv(Lc), np.eye(K))
    zf = z.reshape(N, H * K)
    if warm is None or union:
        cold = [s.reshape(N, H * K) for s in prox_starts(problem, z, y, labels)]
        starts = cold if warm is None else list(warm) + cold
    else:
        starts = list(warm) + [zf if z_start is None else z_start]
    pr = prox_newton(zf @ big_inv.T, labels, 1.0, _whitened_loss(problem, Lc), starts=[s @ big_inv.T for s in starts])
    big = np.kron(Lc, np.eye(K))
    h = pr.h @ big.T
    g = (h - zf).reshape(N, H, K)
    f = np.einsum("ab,nbk->nak", np.linalg.inv(Sigma), g)
    _, _, Cinv = field_law(Q, M, Q0, problem.noise)
    w = np.einsum("ij,njk->nik", Cinv, np.concatenate([u0, z], axis=1))
    vals = np.concatenate(
        [
            np.einsum("nak,nbk->nab", f, f).reshape(N, -1),
            np.einsum("nak,njk->naj", f, w[:, :H0]).reshape(N, -1),
            np.einsum("nak,nbk->nab", f, w[:, H0:]).reshape(N, -1),
            pr.fit[:, None],
        ],
        axis=1,
    )
    mean, err = quad.mean_and_error(vals)
    c = 2.0 * alpha
    n1, n2 = H * H, H * H0
    Qh, Mh, Sh = (
        c * mean[:n1].reshape(H, H),
        c * mean[n1 : n1 + n2].reshape(H, H0),
        -c * mean[n1 + n2 : 2 * n1 + n2].reshape(H, H),
    )
    errs = {
        "Qhat": c * err[:n1].reshape(H, H),
        "Mhat": c * err[n1 : n1 + n2].reshape(H, H0),
        "Sigmahat": c * err[n1 + n2 : 2 * n1 + n2].reshape(H, H),
        "train_error": float(err[-1]),
    }
    every = [b @ big.T for b in pr.branches]
    iz = 0 if warm is None else len(warm)  # the start from z
    branches = every[: len(warm) if union and warm is not None else None]
    return MultiHeadOutput(
        0.5 * (Qh + Qh.T), Mh, 0.5 * (Sh + Sh.T), float(mean[-1]), errs, branches, bool(pr.converged), h, every[iz]
    )


def multihead_test_errors(
    Q: np.ndarray, M: np.ndarray, *, problem: Any, Q0: np.ndarray, quad: OutputQuadrature | None = None
) -> dict[str, float]:
    """``E ||(1/H0) sum_j chan_beta0(M(u0_j)) - (1/H) sum_h chan_beta(M(z_h))||_F^2`` per sequence against
    noiseless (``test_error``) and noisy (``test_error_noisy``, ``u0 + xi``) labels, with quadrature errors."""
    Q, M, Q0 = (np.atleast_2d(np.asarray(a, float)) for a in (Q, M, Q0))
    T = problem.T
    K = T * (T + 1) // 2
    quad = quad if quad is not None else multihead_quadrature(problem)
    H = Q.shape[0]
    # the test error is defined on the closure of the admissible overlaps: at the collapsed point (Q = M = 0)
    # and at heads that are copies the law of the fields is degenerate
    y0, z_clean, _ = _fields(quad, Q, M, Q0, 0.0, K, singular=True)
    yn, zn, _ = _fields(quad, Q, M, Q0, problem.noise, K, singular=True)
    e = []
    for y, z in ((y0, z_clean), (yn, zn)):
        Yt = teacher_labels(problem, y)
        A = head_attention(z.reshape(z.shape[0], H * K), T, problem.beta).mean(axis=1)
        e.append(np.sum((Yt - A) ** 2, axis=(1, 2)))
    mean, err = quad.mean_and_error(np.stack(e, axis=1))
    return {
        "test_error": float(mean[0]),
        "test_error_noisy": float(mean[1]),
        "test_error_se": float(err[0]),
        "test_error_noisy_se": float(err[1]),
    }


def collapsed_output_side(problem: Any, Q0: np.ndarray, quad: OutputQuadrature) -> MultiHeadOutput:
    """The conjugates of the collapsed point ``S_h = 0`` for every head (``Q = M = 0``, ``Sigma -> 0``).

    There the student fields vanish and the prox point tends to ``z = 0``, ``f -> -grad ell(0)``; with the
    Stein form of the ``Sigmahat`` weight (the ``w`` of a zero ``Q`` is singular) the limits are, with
    ``g_k = grad_{h_k} ell(0)`` (``H``) and ``y ~ N(0, Q0 + (Delta/2) 11^T)`` per logit,

        Qhat0     =  2 alpha E sum_k g_k g_k^T
        Mhat0     = -2 alpha E sum_k g_k ((Q0 + (Delta/2) 11^T)^{-1} y_k)^T
        Sigmahat0 =  2 alpha E sum_k Hess_{h_k h_k} ell(0)      (symmetrised)

    the single head's ``qhat0``, ``mhat0``, ``Sigmahat0`` (:func:`singlehead.state_evolution.collapse_point`)
    for ``H = H0 = 1``. The train error is ``E ell(0)``. On the nodes ``quad`` of the map (``K (H0 + H)``
    dimensions; the student part is unused).
    """
    H0 = Q0.shape[0]
    T, alpha = problem.T, problem.alpha
    K = T * (T + 1) // 2
    H = quad.flat.shape[1] // K - H0
    Qn = Q0 + 0.5 * problem.noise * np.ones((H0, H0))
    U = quad.flat.reshape(-1, H0 + H, K)
    y = np.einsum("ij,njk->nik", np.linalg.cholesky(Qn), U[:, :H0])
    labels = teacher_labels(problem, y)
    N = y.shape[0]
    val, grad, hess = multihead_fit_loss(np.zeros((N, H * K)), labels, problem.beta, H, 2)
    g = grad.reshape(N, H, K)
    w0 = np.einsum("ij,njk->nik", np.linalg.inv(Qn), y)
    hd = np.einsum("nakbk->nab", hess.reshape(N, H, K, H, K))
    vals = np.concatenate(
        [
            np.einsum("nak,nbk->nab", g, g).reshape(N, -1),
            -np.einsum("nak,njk->naj", g, w0).reshape(N, -1),
            hd.reshape(N, -1),
            val[:, None],
        ],
        axis=1,
    )
    mean, err = quad.mean_and_error(vals)
    c = 2.0 * alpha
    n1, n2 = H * H, H * H0
    Qh, Mh, Sh = (
        c * mean[:n1].reshape(H, H),
        c * mean[n1 : n1 + n2].reshape(H, H0),
        c * mean[n1 + n2 : 2 * n1 + n2].reshape(H, H),
    )
    errs = {
        "Qhat": c * err[:n1].reshape(H, H),
        "Mhat": c * err[n1 : n1 + n2].reshape(H, H0),
        "Sigmahat": c * err[n1 + n2 : 2 * n1 + n2].reshape(H, H),
        "train_error": float(err[-1]),
    }
    return MultiHeadOutput(0.5 * (Qh + Qh.T), Mh, 0.5 * (Sh + Sh.T), float(mean[-1]), errs)


def isotropic(n: int, diag: float, off: float) -> np.ndarray:
    """``(diag - off) I + off 11^T`` of size ``n``."""
    return (diag - off) * np.eye(n) + off * np.ones((n, n))

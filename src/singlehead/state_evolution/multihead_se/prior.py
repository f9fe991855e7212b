"""Prior (matrix) side of the multi-head state evolution: the head-coupled denoiser on sampled instances.

With the conjugates ``Qhat`` (``H x H``), ``Mhat`` (``H x H0``), ``Sigmahat`` (``H x H``), teacher heads
``S0_1..S0_H0`` and independent GOE matrices ``Z_1..Z_H`` (``D x D``, off-diagonal entries of variance
``1/D``, diagonal ``2/D``: semicircle on ``[-2, 2]``), the effective inputs are

    B_h = sum_j Mhat_hj S0_j + sum_l (Qhat^{1/2})_hl Z_l

and the estimator is

    (S_1..S_H) = argmin over PSD S_h of rank <= kappa D of
                 (1/2) sum_{hh'} Sigmahat_hh' <S_h, S_h'> - sum_h <S_h, B_h> + 2 lam sum_h Tr S_h ,

the single head's denoiser (``docs/theory.rst``, prior side: ``Sigmahat/2 ||S||^2 - <S, mhat S0 + sqrt(qhat) Z>
+ 2 lam Tr S``) with the heads coupled through the off-diagonal ``Sigmahat``. Then

    Q_hh' = <S_h, S_h'>/D,    M_hj = <S_h, S0_j>/D,    Sigma = G Qhat^{-1/2},   G_hl = <S_h, Z_l>/D

(the last by Stein's lemma: ``G = Sigma Qhat^{1/2}`` with ``Sigma_hh'`` the divergence of ``S_h`` in ``B_h'``,
normalised so that the identity map has divergence 1; a control variate removes the component of ``S_h``
along the teachers, whose ``<., Z_l>`` has mean zero). It is symmetrised.

The minimiser is computed by block-coordinate descent over the heads: with the others fixed, head ``h``'s
problem is the single-head one, ``S_h = P_r((B_h - sum_{h' != h} Sigmahat_hh' S_h')/Sigmahat_hh,
2 lam/Sigmahat_hh)`` with ``P_r(A, t)`` the eigenvalue soft threshold at ``t``, positive part, top ``r``
eigenvalues kept. Each step decreases the objective; it stops when no head moved by more than ``tol``
(relative Frobenius norm). Where ``Sigmahat`` is positive definite the problem is convex (for ``kappa >= 1``)
and this is its minimiser; where it is not (the heads' difference is weakly constrained by the data) the
objective is still bounded below on the PSD cone if the off-diagonal ``Sigmahat`` is non-negative, since
``<S_h, S_h'> >= 0``, and the descent ends at a local minimum, reached from the warm start.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from singlehead.numerics.thread_map import thread_map
from singlehead.state_evolution.untied.teachers import law_quantiles

__all__ = ["MultiHeadPriorSample", "MultiHeadPriorSide", "coupled_shrinkage", "multihead_prior_side", "sor_relaxation"]


def _goe(rng: np.random.Generator, shape: tuple[int, ...], D: int) -> np.ndarray:
    G = rng.standard_normal((*shape, D, D)) / math.sqrt(D)
    return (G + np.swapaxes(G, -1, -2)) / math.sqrt(2.0)


def _haar(rng: np.random.Generator, D: int) -> np.ndarray:
    Qm, Rm = np.linalg.qr(rng.standard_normal((D, D)))
    return Qm * np.sign(np.diag(Rm))


@dataclass(frozen=True)
class MultiHeadPriorSample:
    """Fixed draws of the prior side: teacher heads ``S0`` ``(R, H0, D, D)`` and noises ``Z`` ``(R, H, D, D)``.

    Every teacher head has the same spectrum ``s`` (the target's at ``D``, or the ``D`` mid-quantiles of its
    asymptotic law, rescaled so that ``sum s^2/D = Q0``); head 1 is ``diag(s)``, the others ``O_j diag(s) O_j^T``
    with independent Haar ``O_j`` (only the heads' relative rotations matter: the problem is invariant under one
    rotation of all its matrices). The draws differ by the rotations and the noises.
    """

    S0: np.ndarray
    Z: np.ndarray

    @classmethod
    def draw(
        cls, target: Any, Q0: float, heads: int, teacher_heads: int, D: int = 100, draws: int = 4, seed: int = 0
    ) -> MultiHeadPriorSample:
        """``draws`` instances at dimension ``D`` for ``heads`` student and ``teacher_heads`` teacher heads."""
        if D < 2 or draws < 1 or heads < 1 or teacher_heads < 1:
            raise ValueError(
                f"D must be >= 2 and draws, heads, teacher_heads >= 1 (got {D}, {draws}, {heads}, {teacher_heads})"
            )
        spec = target.spectrum(D)
        s = np.asarray(spec if spec is not None else law_quantiles(target.spectral_law(D).engine, D), float)
        s = s * math.sqrt(Q0 / max(float(np.mean(s**2)), 1e-300))
        rng = np.random.default_rng(seed)
        S0 = np.empty((draws, teacher_heads, D, D))
        for r in range(draws):
            S0[r, 0] = np.diag(s)
            for j in range(1, teacher_heads):
                O = _haar(rng, D)
                S0[r, j] = (O * s) @ O.T
        return cls(S0, _goe(rng, (draws, heads), D))

    @property
    def D(self) -> int:
        return self.S0.shape[-1]

    def teacher_overlaps(self) -> np.ndarray:
        """``Q0_jj' = <S0_j, S0_j'>/D``, averaged over draws (``H0 x H0``)."""
        return np.einsum("rjab,rkab->jk", self.S0, self.S0) / (self.D * self.S0.shape[0])


@dataclass
class MultiHeadPriorSide:
    """``Q, M, Sigma`` (draw means) of the coupled denoiser, with per-draw values and the solutions.

    ``per_draw``: ``{"Q": (R, H, H), "M": (R, H, H0), "Sigma": (R, H, H), "traces": (R, H)}``; ``traces``: ``Tr S_h/D``
    (draw mean, ``(H,)``); ``rank_fraction``: fraction of non-zero eigenvalues of ``S_eff = mean_h S_h``;
    ``objective``: the denoiser's objective per ``D`` (draw mean); ``solutions``: ``(R, H, D, D)`` (the next
    call's warm start); ``sweeps``: block-coordinate sweeps used; ``converged``: the tolerance was met.
    """

    Q: np.ndarray
    M: np.ndarray
    Sigma: np.ndarray
    per_draw: dict
    traces: np.ndarray
    rank_fraction: float
    objective: float
    solutions: np.ndarray
    sweeps: int
    converged: bool

    def draw_se(self, name: str) -> np.ndarray:
        """Standard error over draws of ``Q``, ``M``, ``Sigma`` or ``traces`` (``nan`` with one draw)."""
        v = self.per_draw[name]
        return v.std(axis=0, ddof=1) / math.sqrt(v.shape[0]) if v.shape[0] > 1 else np.full(v.shape[1:], np.nan)


def _shrink(A: np.ndarray, tau: np.ndarray | float, rank: int | None) -> np.ndarray:
    """Eigenvalue soft threshold at ``tau``, positive part, top ``rank`` eigenvalues kept (batched ``(..., D, D)``)."""
    A = 0.5 * (A + np.swapaxes(A, -1, -2))
    w, V = np.linalg.eigh(A)
    s = np.maximum(w - np.asarray(tau)[..., None], 0.0)
    if rank is not None and rank < s.shape[-1]:
        s[..., : s.shape[-1] - rank] = 0.0  # eigh sorts ascending
    return (V * s[..., None, :]) @ np.swapaxes(V, -1, -2)


def sor_relaxation(Sigmahat: np.ndarray) -> float:
    """The over-relaxation of :func:`coupled_shrinkage` for the coupling ``Sigmahat``: Young's optimal SOR factor
    ``2/(1 + sqrt(1 - mu^2))`` of the quadratic part, ``mu`` the spectral radius of the block-Jacobi iteration
    matrix ``I - diag(Sigmahat)^{-1} Sigmahat`` (exact for two heads, whose block matrix is consistently ordered),
    kept in ``[1, 1.9]``; ``1.5`` where ``mu >= 1`` (``Sigmahat`` not positive definite). For ``mu`` near 0
    (weakly coupled heads) it is near 1, for ``mu = 0.89`` (strongly coupled) ``1.37``."""
    Sh = np.asarray(Sigmahat, float)
    d = 1.0 / np.sqrt(np.diag(Sh))
    off = (Sh - np.diag(np.diag(Sh))) * d[:, None] * d[None, :]
    mu = float(np.max(np.abs(np.linalg.eigvalsh(0.5 * (off + off.T))))) if Sh.shape[0] > 1 else 0.0
    if not mu < 1.0:
        return 1.5
    return float(min(1.9, max(1.0, 2.0 / (1.0 + math.sqrt(1.0 - mu * mu)))))


def coupled_shrinkage(
    B: np.ndarray,
    Sigmahat: np.ndarray,
    tau: float,
    *,
    rank: int | None = None,
    warm: np.ndarray | None = None,
    tol: float = 1e-9,
    max_sweeps: int = 5000,
    relax: float | None = 1.5,
    threads: int = 1,
) -> tuple[np.ndarray, int, bool]:
    """Block-coordinate descent for ``argmin (1/2) sum Sigmahat_hh' <S_h, S_h'> - sum <S_h, B_h> + tau sum Tr S_h``.

    Parameters
    ----------
    B : (R, H, D, D) array
        Symmetric inputs, ``R`` independent instances.
    Sigmahat : (H, H) array
        Coupling, positive diagonal.
    tau : float
        Trace penalty (``2 lam``).
    rank : int, optional
        Rank cap per head.
    warm : (R, H, D, D) array, optional
        Start (default: every head alone, the others at zero).
    tol : float
        Stop when every head's update is below ``tol`` times its norm (Frobenius).
    relax : float, optional
        Step of each block's proximal-gradient update in units of ``1/Sigmahat_hh`` (1: the exact block minimiser;
        in ``(1, 2)``: over-relaxation, which speeds up strongly coupled heads); ``None``:
        ``sor_relaxation(Sigmahat)`` (Young's optimal SOR factor of the coupling). The default 1.5 is the state
        evolution's: where the denoiser is solved inexactly, far from the fixed point, the relaxation changes the
        path of the outer iteration, and with the SOR factor specialised solves ended on the unspecialised
        branch or did not converge for draws where 1.5 reaches the specialised fixed point.

    threads : int
        The ``R`` instances are swept in that many contiguous groups on as many threads, in step: every group
        ends each sweep before any starts the next, and all stop at the first sweep after which no head of any
        instance moved by more than ``tol``, as the serial loop does. The caller holds BLAS at one thread
        (:func:`~singlehead.numerics.thread_map.thread_map`).

    Returns
    -------
    S : (R, H, D, D) array, sweeps, converged
    """
    H = B.shape[1]
    Sh = np.asarray(Sigmahat, float)
    if Sh.shape != (H, H) or not np.all(np.diag(Sh) > 0):
        raise ValueError(f"Sigmahat must be ({H}, {H}) with a positive diagonal (got {Sh})")
    S = np.zeros_like(B) if warm is None else np.array(warm, float)
    relax = sor_relaxation(Sh) if relax is None else float(relax)
    groups = [slice(int(p[0]), int(p[-1]) + 1) for p in np.array_split(np.arange(B.shape[0]), threads) if p.size]
    if len(groups) == 1:
        for sweep in range(1, max_sweeps + 1):
            if _sweep(S, B, Sh, tau, relax, rank) <= tol:
                return S, sweep, True
        return S, max_sweeps, False
    worst = np.zeros(len(groups))
    barrier = threading.Barrier(len(groups))

    def run(k: int) -> tuple[int, bool] | BaseException:
        try:
            for sweep in range(1, max_sweeps + 1):
                worst[k] = _sweep(S[groups[k]], B[groups[k]], Sh, tau, relax, rank)  # views: S updated in place
                barrier.wait()
                done = float(worst.max()) <= tol
                barrier.wait()  # every group has read ``worst`` before the next sweep writes it
                if done:
                    return sweep, True
            return max_sweeps, False
        except threading.BrokenBarrierError as exc:  # another group failed: its error is the one raised
            return exc
        except BaseException as exc:
            barrier.abort()
            return exc

    out = thread_map(run, range(len(groups)), len(groups))
    errors = [e for e in out if isinstance(e, BaseException)]
    if errors:
        raise next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
    return S, out[0][0], out[0][1]


def _sweep(S: np.ndarray, B: np.ndarray, Sh: np.ndarray, tau: float, relax: float, rank: int | None) -> float:
    """One block-coordinate sweep over the heads of the instances ``S`` (updated in place); the largest relative
    step of a head."""
    worst = 0.0
    for h in range(B.shape[1]):
        grad = np.einsum("k,rkab->rab", Sh[h], S) - B[:, h]
        new = _shrink(S[:, h] - relax * grad / Sh[h, h], relax * tau / Sh[h, h], rank)
        step = np.sqrt(np.sum((new - S[:, h]) ** 2, axis=(-2, -1)))
        size = np.sqrt(np.sum(new**2, axis=(-2, -1)))
        worst = max(worst, float(np.max(step / np.maximum(size, 1e-300) * (size > 0))))
        S[:, h] = new
    return worst


def _sqrtm_psd(A: np.ndarray) -> np.ndarray:
    w, V = np.linalg.eigh(0.5 * (A + A.T))
    return (V * np.sqrt(np.maximum(w, 0.0))) @ V.T


def denoiser_input(Qhat: np.ndarray, Mhat: np.ndarray, sample: MultiHeadPriorSample) -> np.ndarray:
    """``B_h = sum_j Mhat_hj S0_j + sum_l (Qhat^{1/2})_hl Z_l`` on every draw, ``(R, H, D, D)``: the matrices the
    denoiser of head ``h`` is fitted to."""
    R = _sqrtm_psd(np.atleast_2d(np.asarray(Qhat, float)))
    return np.einsum("hj,rjab->rhab", np.atleast_2d(np.asarray(Mhat, float)), sample.S0) + np.einsum(
        "hl,rlab->rhab", R, sample.Z
    )


def zero_is_denoised(Qhat: np.ndarray, Mhat: np.ndarray, *, lam: float, sample: MultiHeadPriorSample) -> bool:
    """Whether the denoiser maps ``(Qhat, Mhat, Sigmahat)`` to ``S_h = 0`` for every head and draw (any
    ``Sigmahat`` with a positive diagonal).

    ``S = 0`` minimises the denoiser's convex objective (PSD ``S_h``, trace penalty ``2 lam tr S_h / D``) iff its
    gradient there, ``(2 lam I - B_h)/D``, lies in the dual cone of the PSD matrices, i.e. iff every eigenvalue of
    every ``B_h`` (:func:`denoiser_input`) is at most ``2 lam``: a closed-form test, without the block descent
    (whose sweeps are slow for strongly coupled heads). The rank cap does not change it (``0`` has rank 0).
    """
    B = denoiser_input(Qhat, Mhat, sample)
    return bool(np.max(np.linalg.eigvalsh(0.5 * (B + np.swapaxes(B, -1, -2)))) <= 2.0 * lam)


def multihead_prior_side(
    Qhat: np.ndarray,
    Mhat: np.ndarray,
    Sigmahat: np.ndarray,
    *,
    lam: float,
    kappa: float,
    sample: MultiHeadPriorSample,
    warm: np.ndarray | None = None,
    tol: float = 1e-9,
    max_sweeps: int = 5000,
    threads: int = 1,
) -> MultiHeadPriorSide:
    """``(Qhat, Mhat, Sigmahat) -> (Q, M, Sigma)`` of the module docstring, on the draws of ``sample``
    (``tol``, ``max_sweeps``, ``threads``: the block-coordinate descent's, :func:`coupled_shrinkage`)."""
    Qhat, Mhat, Sigmahat = (np.atleast_2d(np.asarray(a, float)) for a in (Qhat, Mhat, Sigmahat))
    D = sample.D
    B = denoiser_input(Qhat, Mhat, sample)
    rank = None if kappa >= 1 else max(1, int(round(kappa * D)))
    S, sweeps, ok = coupled_shrinkage(
        B, Sigmahat, 2.0 * lam, rank=rank, warm=warm, tol=tol, max_sweeps=max_sweeps, threads=threads
    )
    Q = np.einsum("rhab,rkab->rhk", S, S) / D
    M = np.einsum("rhab,rjab->rhj", S, sample.S0) / D
    Q0 = np.einsum("rjab,rkab->rjk", sample.S0, sample.S0) / D
    c = np.linalg.solve(Q0.mean(axis=0), M.mean(axis=0).T).T  # (H, H0): S_h's component along the teachers
    G = (np.einsum("rhab,rlab->rhl", S, sample.Z) - np.einsum("hj,rjab,rlab->rhl", c, sample.S0, sample.Z)) / D
    w, V = np.linalg.eigh(0.5 * (Qhat + Qhat.T))
    Rinv = (V / np.sqrt(np.maximum(w, 1e-300))) @ V.T
    Sig = np.einsum("rhl,lk->rhk", G, Rinv)
    Sig = 0.5 * (Sig + np.swapaxes(Sig, 1, 2))
    traces = np.einsum("rhaa->rh", S) / D
    obj = (
        0.5 * np.einsum("hk,rhk->r", Sigmahat, Q) - np.einsum("rhab,rhab->r", S, B) / D + 2.0 * lam * traces.sum(axis=1)
    )
    ev = np.linalg.eigvalsh(S.mean(axis=1))
    scale = np.maximum(np.abs(ev).max(axis=-1, keepdims=True), 1e-300)
    per = {"Q": Q, "M": M, "Sigma": Sig, "traces": traces}
    return MultiHeadPriorSide(
        Q.mean(axis=0),
        M.mean(axis=0),
        Sig.mean(axis=0),
        per,
        traces.mean(axis=0),
        float(np.mean(ev > 1e-10 * scale)),
        float(obj.mean()),
        S,
        sweeps,
        ok,
    )

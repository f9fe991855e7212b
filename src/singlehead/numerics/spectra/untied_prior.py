"""Prior (matrix) side of the untied state evolution: weighted nuclear-norm denoising, by sampling.

The effective denoising problem of an untied student (derivation: ``docs/untied_theory.rst``) is,
with the symmetric / antisymmetric split ``M = M_s + M_a`` of a ``D x D`` matrix,

    Mhat = argmin_M  sum_B [ (Sigmahat_B/2) ||M_B||_F^2 - <M_B, A_B> ] + 2 lam ||M||_*   (rank M <= kappa D)
    A_B  = mhat_B M0_B + sqrt(qhat_B) Z_B ,     B in {s, a},

``Z_s`` GOE (off-diagonal entries of variance ``1/D``, diagonal ``2/D``), ``Z_a`` antisymmetric
Gaussian (off-diagonal entries of variance ``1/D``), ``||.||_*`` the nuclear norm. Then

    q_B = ||Mhat_B||_F^2 / D,   m_B = <Mhat_B, M0_B> / D,   Sigma_B = <Mhat_B, Z_B> / (D sqrt(qhat_B))

(the last by Stein's lemma: the divergence of ``Mhat`` in the block ``B``, as the tied
``Sigma = (1/(2 delta Sigmahat)) dJ/ddelta``). With ``Sigmahat_s = Sigmahat_a`` the minimiser is
singular-value soft thresholding of ``(A_s + A_a)/Sigmahat`` and, for ``qhat_s = qhat_a`` as well,
its law is given by free probability (Ginibre noise). The state evolution of an ERM fit never
sits there for ``T >= 2``: the symmetric part is seen by ``T(T+1)/2`` fields per sequence and the
antisymmetric one by ``T(T-1)/2``, so ``Sigmahat_s != Sigmahat_a`` and the proximal map is no
longer a function of the singular values alone. It is computed here on ``draws`` sampled
``D x D`` instances (fixed draws: the map is deterministic), by semismooth Newton in the
singular bases of ``Mhat + tau G`` (accelerated proximal gradient with singular-value soft
thresholding where Newton stalls, and under a rank cap); the spread over draws is its sampling
error.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from singlehead.numerics.spectra.primitives import singular_value_threshold

__all__ = [
    "BlockPriorSide",
    "UntiedPriorSample",
    "UntiedPriorSide",
    "weighted_nuclear_prox",
    "untied_prior_side",
    "extrapolated_side",
    "ProxLinearisation",
    "draw_rows",
]


def _sym(M: np.ndarray) -> np.ndarray:
    return 0.5 * (M + np.swapaxes(M, -1, -2))


def _anti(M: np.ndarray) -> np.ndarray:
    return 0.5 * (M - np.swapaxes(M, -1, -2))


@dataclass
class BlockPriorSide:
    """The prior side on the blocks ``(s, a)``: ``(q_s, m_s, Sigma_s, q_a, m_a, Sigma_a)`` from the conjugates.

    ``values``: the six order parameters; ``rank_fraction``: fraction of non-zero singular values of
    the estimator; ``penalty``: the penalty ``lam pen(M)/d`` at this estimator. A sampled prior side
    also sets ``per_draw`` (``(R, 6)``, one row per instance: the solver then reports the draws'
    sampling error) and ``rank_per_draw``, ``solutions`` (its warm start for the next call) and ``singular_values``
    (``(R, D)``: the learned-spectrum law).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.model.students import BlockPriorSide
    >>> side = BlockPriorSide(np.array([1.0, 0.8, 0.5, 0.2, 0.1, 0.6]), rank_fraction=1.0)
    >>> side.sampled, side.draw_se.shape
    (False, (6,))
    """

    values: np.ndarray
    rank_fraction: float
    penalty: float = math.nan
    per_draw: np.ndarray | None = None
    solutions: Any = None
    singular_values: np.ndarray | None = None
    #: per-instance rank fractions (``(R,)``), for the draw errors of a sampled side
    rank_per_draw: np.ndarray | None = None
    #: an extrapolated side (``extrapolated_side``): the coarse instances' rows and rank fractions
    #: (``values = 2 mean(per_draw) - mean(coarse_per_draw)``)
    coarse_per_draw: np.ndarray | None = None
    coarse_rank_per_draw: np.ndarray | None = None

    @property
    def sampled(self) -> bool:
        """Whether the values are averages over sampled instances."""
        return self.per_draw is not None

    @property
    def draw_se(self) -> np.ndarray:
        """Standard error of ``values`` over draws at fixed conjugates (``nan`` with one draw or none per size);
        an extrapolated side combines its two sizes, ``sqrt(4 var_D/R_D + var_{D/2}/R_{D/2})``."""
        R = 0 if self.per_draw is None else self.per_draw.shape[0]
        if R < 2:
            return np.full(6, np.nan)
        if self.coarse_per_draw is None:
            return self.per_draw.std(axis=0, ddof=1) / math.sqrt(R)
        Rc = self.coarse_per_draw.shape[0]
        if Rc < 2:
            return np.full(6, np.nan)
        return np.sqrt(4 * self.per_draw.var(axis=0, ddof=1) / R + self.coarse_per_draw.var(axis=0, ddof=1) / Rc)


@dataclass(frozen=True)
class UntiedPriorSample:
    """Fixed draws of the prior side: teachers ``M0`` and noises ``Z_s``, ``Z_a``, each ``(R, D, D)``.

    A tied teacher enters by its eigenvalues (``M0 = diag(s)``): the noise laws and the weighted
    nuclear-norm prox are invariant under ``M -> O M O^T``, so the rotation of ``S0`` is irrelevant.
    """

    M0: np.ndarray
    Zs: np.ndarray
    Za: np.ndarray

    @classmethod
    def draw(cls, teacher: Any, D: int, draws: int, seed: int | Sequence[int]) -> UntiedPriorSample:
        """``draws`` instances at dimension ``D``; ``teacher(D, rng)`` returns one ``D x D`` teacher; ``seed``: an
        integer or a sequence of them (``numpy.random.default_rng``'s entropy: ``[s, 1]`` is a stream
        independent of ``s``'s)."""
        rng = np.random.default_rng(seed)
        M0 = np.stack([teacher(D, rng) for _ in range(draws)])
        G = rng.standard_normal((2, draws, D, D)) / math.sqrt(D)
        # GOE: off-diagonal variance 1/D, diagonal 2/D; antisymmetric: off-diagonal variance 1/D
        Zs = (G[0] + np.swapaxes(G[0], -1, -2)) / math.sqrt(2.0)
        Za = (G[1] - np.swapaxes(G[1], -1, -2)) / math.sqrt(2.0)
        return cls(M0, Zs, Za)

    def normalised(self, Q0s: float, Q0a: float) -> UntiedPriorSample:
        """The same draws with each teacher's symmetric / antisymmetric part rescaled to ``||M0_B||_F^2/D = Q0_B``
        (removes the teacher-to-teacher fluctuation of the norms, and makes the sample agree with
        the ``Q0_B`` of the output side)."""
        parts = []
        for part, Q0 in ((_sym(self.M0), Q0s), (_anti(self.M0), Q0a)):
            norm = np.sum(part**2, axis=(-2, -1), keepdims=True) / self.D
            parts.append(np.where(norm > 0, part * np.sqrt(Q0 / np.where(norm > 0, norm, 1.0)), 0.0))
        return UntiedPriorSample(parts[0] + parts[1], self.Zs, self.Za)

    @property
    def D(self) -> int:
        return self.M0.shape[-1]

    @property
    def draws(self) -> int:
        return self.M0.shape[0]

    def teacher_norms(self) -> tuple[float, float]:
        """``(||M0_s||_F^2/D, ||M0_a||_F^2/D)`` averaged over draws."""
        return (
            float(np.mean(np.sum(_sym(self.M0) ** 2, axis=(-2, -1)))) / self.D,
            float(np.mean(np.sum(_anti(self.M0) ** 2, axis=(-2, -1)))) / self.D,
        )


def _symmetric_soft_threshold(A: np.ndarray, tau: float, rank: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalue soft thresholding of symmetric ``A`` on both signs (the nuclear-norm prox of a symmetric matrix)."""
    w, V = np.linalg.eigh(A)
    s = np.sign(w) * np.maximum(np.abs(w) - tau, 0.0)
    if rank is not None and rank < s.shape[-1]:
        order = np.argsort(-np.abs(s), axis=-1)
        np.put_along_axis(s, order[..., rank:], 0.0, axis=-1)
    return (V * s[..., None, :]) @ np.swapaxes(V, -1, -2), np.sort(np.abs(s), axis=-1)[..., ::-1]


class ProxLinearisation:
    """The weighted nuclear-norm problem linearised at ``Y = Mhat + tau G`` (``G`` a subgradient of ``||.||_*`` at
    ``Mhat``).

    With the full SVD ``Y = U diag(sigma) V^T`` (batched over draws), the singular values above
    ``tau`` are active (``Mhat``'s are ``sigma - tau``). In the rotated coordinates ``x = U^T X V`` the
    operator ``P (W + C) P`` acts as ``cbar x + dbar Q x^T Q + C_sym sym(x) + C_anti anti(x)``, with
    ``W X = Sigmahat_s X_s + Sigmahat_a X_a``, ``cbar, dbar = (Sigmahat_s +- Sigmahat_a)/2``,
    ``Q = U^T V``, ``C`` the nuclear norm's curvature on each pair ``(i, j)`` (both active: 0 on the
    symmetric part, ``2 tau/(s_i + s_j)`` on the antisymmetric part; ``i`` active, ``j`` inactive:
    ``(tau -+ g_j)/s_i``) and ``P`` the projection off the inactive-inactive block (``mask``). It is
    the Jacobian of the estimator in its input (``K = P (W + C)^{-1} P``, see
    :mod:`singlehead.numerics.spectra.untied_prior_jacobian`) and the Newton system of
    :func:`weighted_nuclear_prox`.
    """

    def __init__(self, U: np.ndarray, sig: np.ndarray, V: np.ndarray, Ss: float, Sa: float, tau: float) -> None:
        # contiguous factors (a transposed operand takes numpy's batched matmul off its fast path)
        self.U, self.V = np.ascontiguousarray(U), np.ascontiguousarray(V)
        self.Ut = np.ascontiguousarray(np.swapaxes(U, -1, -2))
        self.Vt = np.ascontiguousarray(np.swapaxes(V, -1, -2))
        self.Q = self.Ut @ self.V
        act = sig > tau
        s = np.where(act, sig - tau, np.nan)
        g = np.where(act, np.nan, sig)
        ai, aj = act[:, :, None], act[:, None, :]
        si, sj, gi, gj = s[:, :, None], s[:, None, :], g[:, :, None], g[:, None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            c_sym = np.where(ai & aj, 0.0, np.where(ai, (tau - gj) / si, np.where(aj, (tau - gi) / sj, 0.0)))
            c_anti = np.where(
                ai & aj, 2 * tau / (si + sj), np.where(ai, (tau + gj) / si, np.where(aj, (tau + gi) / sj, 0.0))
            )
        self.mask = (ai | aj).astype(float)
        self.c_sym = np.nan_to_num(c_sym) * self.mask
        self.c_anti = np.nan_to_num(c_anti) * self.mask
        self.cbar, self.dbar = 0.5 * (Ss + Sa), 0.5 * (Ss - Sa)
        self.active = act
        # x -> c_sym sym(x) + c_anti anti(x) as a x + b x^T (and the preconditioner alike), the mask folded in
        self._a = self.mask * (self.cbar + 0.5 * (self.c_sym + self.c_anti))
        self._b = self.mask * (0.5 * (self.c_sym - self.c_anti))
        ps, pa = 1.0 / (self.cbar + self.c_sym), 1.0 / (self.cbar + self.c_anti)
        self._pa, self._pb = self.mask * (0.5 * (ps + pa)), self.mask * (0.5 * (ps - pa))
        self._q = self.dbar * self.mask

    def rotate(self, X: np.ndarray) -> np.ndarray:
        """``P (U^T X V)``."""
        return self.mask * (self.Ut @ X @ self.V)

    def unrotate(self, x: np.ndarray) -> np.ndarray:
        """``U x V^T``."""
        return self.U @ x @ self.Vt

    def apply(self, x: np.ndarray) -> np.ndarray:
        """``P (W + C) P x`` in the rotated coordinates."""
        xt = np.ascontiguousarray(np.swapaxes(x, -1, -2))
        out = self.Q @ xt @ self.Q
        out *= self._q
        out += self._a * x
        out += self._b * xt
        return out

    def precondition(self, r: np.ndarray) -> np.ndarray:
        """``P (cbar + C)^{-1} r``."""
        out = self._pa * r
        out += self._pb * np.swapaxes(r, -1, -2)
        return out

    def solve(self, b: np.ndarray, tol: float, max_iter: int, *, strict: bool = True) -> tuple[np.ndarray, int]:
        """Preconditioned conjugate gradients on every draw at once, to the relative residual ``tol``
        (``strict``: raise ``ArithmeticError`` when ``max_iter`` iterations do not reach it)."""
        x = np.zeros_like(b)
        r = b.copy()
        z = self.precondition(r)
        p = z.copy()
        rz = _batched_dot(r, z)
        bn = np.sqrt(_batched_dot(b, b))
        for it in range(1, max_iter + 1):
            Ap = self.apply(p)
            pAp = _batched_dot(p, Ap)
            step = np.where(pAp > 0, rz / np.where(pAp > 0, pAp, 1.0), 0.0)
            x += step[:, None, None] * p
            r -= step[:, None, None] * Ap
            if np.all(np.sqrt(_batched_dot(r, r)) <= tol * bn):
                return x, it
            z = self.precondition(r)
            rz_new = _batched_dot(r, z)
            p = z + (rz_new / np.where(rz > 0, rz, 1.0))[:, None, None] * p
            rz = rz_new
        if strict:
            raise ArithmeticError(
                f"the prior Jacobian's conjugate gradients did not reach {tol:g} in {max_iter} iterations"
            )
        return x, max_iter


def _batched_dot(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return np.einsum("rij,rij->r", X, Y)


#: Newton steps of the weighted nuclear-norm prox before it hands over to proximal gradient
_NEWTON_STEPS = 12
#: a Newton step that leaves some draw's residual above this fraction of the previous one hands over to proximal
#: gradient
_NEWTON_STALL = 0.9
#: the largest relative residual of the conjugate gradients inside one Newton step (inexact Newton: the outer
#: residual then falls by about this factor per step once the active set is settled; a step that can reach
#: the accuracy asked for solves to 0.1 of it)
_NEWTON_CG_TOL = 1e-3


def _svd(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(U, sigma, V^T)`` of square ``Y`` (batched) from the eigendecomposition of ``Y^T Y``, ``U = Y V/sigma``.

    Cheaper than a batched SVD. ``U diag((sigma - tau)_+) V^T = Y V diag((sigma - tau)_+/sigma) V^T``
    is as accurate as singular-value soft thresholding (:func:`singular_value_threshold`); the
    columns of ``U`` for singular values near 0 are not, which only slows a Newton step built on
    them (the residual that stops the iteration is computed from the thresholded matrix)."""
    w, V = np.linalg.eigh(np.ascontiguousarray(np.swapaxes(Y, -1, -2)) @ Y)
    w, V = w[..., ::-1], np.ascontiguousarray(V[..., :, ::-1])
    sig = np.sqrt(np.maximum(w, 0.0))
    U = (Y @ V) / np.where(sig > 0, sig, 1.0)[:, None, :]
    return U, sig, np.ascontiguousarray(np.swapaxes(V, -1, -2))


def _blocks_resolved(r: np.ndarray, M: np.ndarray, bound: float) -> bool:
    """Whether each block's residual is within ``bound`` times that block's size on every draw (a block
    orders of magnitude below the other, an antisymmetric part driven by a floored ``qhat_a``, is then
    resolved to the same relative accuracy as the whole)."""
    return all(
        np.all(np.sqrt(_batched_dot(part(r), part(r))) <= bound * np.sqrt(_batched_dot(part(M), part(M))))
        for part in (_sym, _anti)
    )


#: the Newton state ``(Y, U, sigma, V^T)`` behind each minimiser still alive, by ``id`` (with a weak reference
#: that removes the entry when the minimiser goes): a warm start from a returned minimiser resumes from its ``Y``
#: and the singular bases already computed there, which saves the first step's decomposition
_STATES: dict[int, tuple[Any, tuple[np.ndarray, ...]]] = {}


def _remember(M: np.ndarray, state: tuple[np.ndarray, ...]) -> None:
    key = id(M)
    _STATES[key] = (weakref.ref(M, lambda _, k=key: _STATES.pop(k, None)), state)


def _recall(M: np.ndarray | None) -> tuple[np.ndarray, ...] | None:
    entry = None if M is None else _STATES.get(id(M))
    return entry[1] if entry is not None and entry[0]() is M else None


def _newton_prox(
    A: np.ndarray,
    Ss: float,
    Sa: float,
    tau: float,
    M: np.ndarray,
    tol: float,
    state: tuple[np.ndarray, ...] | None = None,
) -> tuple[np.ndarray, np.ndarray, int, bool, tuple[np.ndarray, ...] | None]:
    """Semismooth Newton on ``Phi(Y) = (Y - svt(Y)) + W svt(Y) = A`` (``svt``: soft thresholding at ``tau``).

    ``Y = Mhat + tau G``; ``Phi``'s Jacobian is ``(W + C) K_svt`` with ``K_svt = (1 + C)^{-1}`` on the
    active pairs (:class:`ProxLinearisation`), so a step solves ``(W + C) dM = A - Phi(Y)`` by
    conjugate gradients and moves ``Y`` by ``(1 + C) dM`` (by the residual on the inactive block).
    Started from ``Y = M + A - W M``, or from ``state = (Y, U, sigma, V^T)`` (a previous solve's ``Y`` with
    its singular bases: any ``Y`` is a valid start, and its decomposition is not recomputed). Stopped when every draw's
    ``||A - Phi(Y)||`` is below
    ``tol min(Sigmahat) ||Mhat||`` (strong convexity: then ``||Mhat - M*|| <= tol ||Mhat||``), and each
    block's residual below ``tol min(Sigmahat)`` times that block's size (:func:`_blocks_resolved`).
    Returns ``(Mhat, singular values, steps, converged, state at Mhat)``; not converged when a step
    leaves some draw's residual above ``_NEWTON_STALL`` of the previous one or after ``_NEWTON_STEPS``
    steps (the best ``Mhat`` is returned).
    """
    mu = min(Ss, Sa)
    if state is not None and state[0].shape == A.shape:
        Y = state[0]
    else:
        state = None
        Y = M + A - (Ss * _sym(M) + Sa * _anti(M))
    best_M, best_s, prev = M, None, None
    for it in range(1, _NEWTON_STEPS + 1):
        U, sig, Vt = state[1:] if (it == 1 and state is not None) else _svd(Y)
        s = np.maximum(sig - tau, 0.0)
        M = (U * s[:, None, :]) @ Vt
        r = A - (Y - M + Ss * _sym(M) + Sa * _anti(M))
        rn = np.sqrt(_batched_dot(r, r))
        if prev is not None and np.any(rn > _NEWTON_STALL * prev):
            return best_M, best_s, it, False, None
        best_M, best_s, prev = M, s, rn
        target = tol * mu * np.sqrt(_batched_dot(M, M))
        if np.all(rn <= target) and _blocks_resolved(r, M, tol * mu):
            return M, s, it, True, (Y, U, sig, Vt)
        lin = ProxLinearisation(U, sig, np.swapaxes(Vt, -1, -2), Ss, Sa, tau)
        rr = lin.Ut @ r @ lin.V
        # near the minimiser a linear solve to 0.1 of the accuracy asked for saves the next step's SVD
        cg_tol = float(np.clip(0.1 * np.min(target / np.maximum(rn, 1e-300)), 1e-10, _NEWTON_CG_TOL))
        x = lin.solve(lin.mask * rr, cg_tol, 200, strict=False)[0]
        dy = lin.mask * ((1.0 + lin.c_sym) * _sym(x) + (1.0 + lin.c_anti) * _anti(x)) + (1.0 - lin.mask) * rr
        Y = Y + U @ dy @ Vt
    return best_M, best_s, _NEWTON_STEPS, False, None


def weighted_nuclear_prox(
    A_s: np.ndarray,
    A_a: np.ndarray,
    Sigmahat_s: float,
    Sigmahat_a: float,
    tau: float,
    *,
    rank: int | None = None,
    warm: np.ndarray | None = None,
    tol: float = 1e-11,
    max_iter: int = 5000,
) -> tuple[np.ndarray, np.ndarray, int]:
    """``argmin_M sum_B (Sigmahat_B/2)||M_B||^2 - <M_B, A_B> + tau ||M||_*`` over ``D x D`` matrices.

    Exact in one step when ``Sigmahat_s = Sigmahat_a`` (singular-value soft thresholding of
    ``(A_s + A_a)/Sigmahat``) or when the antisymmetric block is unobserved (``Sigmahat_a = 0``,
    ``A_a = 0``: then ``M_a = 0``, since ``||M||_* >= ||M_s||_*``, and ``M`` is the two-sided
    eigenvalue soft threshold of ``A_s/Sigmahat_s``). Otherwise, without a rank cap, semismooth
    Newton from ``warm`` (default: singular-value soft thresholding of ``A_s/Sigmahat_s + A_a/Sigmahat_a`` at
    ``tau/sqrt(Sigmahat_s Sigmahat_a)``; conjugate-gradient steps in the singular bases of ``Mhat + tau G``),
    stopped when the distance to the minimiser, bounded by the optimality residual over
    ``min Sigmahat``, is below ``tol ||Mhat||`` on every draw (a ``warm`` start that this function
    returned resumes from the Newton state it ended in); where a Newton step does not reduce the
    residual by a tenth, ``_BRIDGE_STEPS`` proximal-gradient steps and Newton again (``_NEWTON_ROUNDS``
    rounds in all), then, and with a rank cap, accelerated proximal gradient (constant momentum for
    the strongly convex case, step ``1/max Sigmahat``) from the best iterate, stopped when
    the relative step is below ``tol``. With ``rank`` the top ``rank`` singular values are kept (a
    heuristic projection: the capped problem is not convex).

    Returns
    -------
    M : (R, D, D) array, singular values (R, D), iterations (Newton steps plus proximal-gradient ones)
    """
    Ss, Sa = float(Sigmahat_s), float(Sigmahat_a)
    if not (Ss > 0 and Sa >= 0 and tau >= 0):
        raise ValueError(f"Sigmahat_s must be > 0, Sigmahat_a >= 0 and tau >= 0 (got {Ss}, {Sa}, {tau})")
    # the objective divided by max Sigmahat has the same minimiser and unit curvature: far from the fixed
    # point the conjugates reach 1e60 and more, where the Newton and proximal-gradient iterations on the
    # unscaled problem stalled for their thousands of steps (their stopping rules are scale-free)
    scale = max(Ss, Sa)
    A_s, A_a, Ss, Sa, tau = A_s / scale, A_a / scale, Ss / scale, Sa / scale, tau / scale
    A = A_s + A_a
    # a draw whose Frobenius norm exceeds sqrt(D) tau has a spectral norm above tau: no need to compute it
    if np.all(np.linalg.norm(A, axis=(-2, -1)) <= math.sqrt(A.shape[-1]) * tau) and np.all(
        np.linalg.norm(A, ord=2, axis=(-2, -1)) <= tau
    ):
        # 0 minimises iff A lies in tau times the nuclear norm's subdifferential at 0 (spectral norm <= tau)
        return np.zeros_like(A_s), np.zeros(A_s.shape[:-1]), 0
    if Sa == 0.0 and not np.any(A_a):
        M, s = _symmetric_soft_threshold(A_s / Ss, tau / Ss, rank)
        return M, s, 1
    if Sa == 0.0:
        raise ValueError("Sigmahat_a = 0 with a non-zero antisymmetric input has no minimiser")
    if abs(Ss - Sa) <= 1e-14 * max(Ss, Sa):
        M, s = singular_value_threshold((A_s + A_a) / Ss, tau / Ss, rank)
        return M, s, 1
    if warm is not None and np.shape(warm) != A.shape:
        warm = None  # a start for other instances
    if warm is None:
        # each block scaled by its own curvature, the threshold by their geometric mean: exact when the two are
        # equal, and a start from which Newton converges in a few steps where they differ
        warm = singular_value_threshold(A_s / Ss + A_a / Sa, tau / math.sqrt(Ss * Sa), rank)[0]
    M = warm
    done = 0
    if rank is None or rank >= A.shape[-1]:
        state = _recall(warm)
        for attempt in range(_NEWTON_ROUNDS):
            M_newton, s, steps, converged, state = _newton_prox(A, Ss, Sa, tau, M, tol, state)
            done += steps
            if converged:
                _remember(M_newton, state)
                return M_newton, s, done
            if s is not None:
                M = M_newton
            if attempt + 1 < _NEWTON_ROUNDS:
                # a stalled Newton step (a start outside its region of fast convergence): a few proximal-gradient
                # steps bring the iterate closer, then Newton again
                M, s, steps, converged = _proximal_gradient(A, Ss, Sa, tau, rank, M, tol, _BRIDGE_STEPS)
                done += steps
                if converged:
                    return M, s, done
    M, s, steps, _ = _proximal_gradient(A, Ss, Sa, tau, rank, M, tol, max_iter)
    return M, s, done + steps


#: Newton rounds of the weighted nuclear-norm prox (each after the first preceded by ``_BRIDGE_STEPS`` proximal-gradient
#: steps from the best iterate) before proximal gradient alone takes over
_NEWTON_ROUNDS = 3
_BRIDGE_STEPS = 4


def _proximal_gradient(
    A: np.ndarray, Ss: float, Sa: float, tau: float, rank: int | None, M: np.ndarray, tol: float, max_iter: int
) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Accelerated proximal gradient (constant momentum for the strongly convex case, step ``1/max Sigmahat``) from
    ``M``, for at most ``max_iter`` steps; converged when every draw's relative step is below ``tol``. Returns
    ``(M, singular values, steps, converged)``."""
    L, mu = max(Ss, Sa), min(Ss, Sa)
    beta = (math.sqrt(L) - math.sqrt(mu)) / (math.sqrt(L) + math.sqrt(mu))
    Y = M
    s = np.zeros(M.shape[:-1])
    for it in range(1, max_iter + 1):
        grad = Ss * _sym(Y) + Sa * _anti(Y) - A
        M_new, s = singular_value_threshold(Y - grad / L, tau / L, rank)
        step = np.sqrt(np.sum((M_new - M) ** 2, axis=(-2, -1)))
        size = np.sqrt(np.sum(M_new**2, axis=(-2, -1)))
        Y = M_new + beta * (M_new - M)
        M = M_new
        if np.all(step <= tol * (size + 1e-300)):
            return M, s, it, True
    return M, s, max_iter, False


@dataclass
class UntiedPriorSide(BlockPriorSide):
    """``(q_s, m_s, Sigma_s, q_a, m_a, Sigma_a)`` of the weighted nuclear-norm denoiser, with their draw spread.

    ``values``: the six averages over draws; ``per_draw``: ``(R, 6)``; ``rank_fraction``: mean
    fraction of non-zero singular values; ``solutions``: the draws' minimisers (warm starts of the
    next call); ``singular_values``: ``(R, D)`` singular values of ``Mhat`` (the learned spectrum);
    ``iterations``: of the proximal gradient.
    """

    iterations: int = 0


def draw_rows(M: np.ndarray, hats: np.ndarray, sample: UntiedPriorSample) -> np.ndarray:
    """The overlaps ``(q_s, m_s, Sigma_s, q_a, m_a, Sigma_a)`` of the estimators ``M`` (``(R, D, D)``) on each
    draw of ``sample`` at the conjugates ``hats``, ``(R, 6)`` (normalisations: the module docstring; ``Sigma_B``
    with the control variate along ``M0_B``, whose coefficient is the draws' mean ``m_B/Q0_B``)."""
    qs, qa = float(hats[0]), float(hats[3])
    D = sample.D
    M0s, M0a = _sym(sample.M0), _anti(sample.M0)
    Ms, Ma = _sym(M), _anti(M)

    def dot(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        return np.einsum("rij,rij->r", X, Y) / D

    def divergence(Mb: np.ndarray, M0b: np.ndarray, Z: np.ndarray, qhat: float, m: np.ndarray) -> np.ndarray:
        # Stein: E<Mhat_B, Z_B> = sqrt(qhat_B) D Sigma_B. Control variate: Mhat_B's component along
        # M0_B, (m_B/Q0_B) M0_B, has <., Z_B> of mean exactly 0 but fluctuations ~10x the signal at D = 100
        if qhat <= 0:
            return np.full(M.shape[0], np.nan)
        Q0b = dot(M0b, M0b)
        c = float(np.mean(m) / np.mean(Q0b)) if np.mean(Q0b) > 0 else 0.0
        return (dot(Mb, Z) - c * dot(M0b, Z)) / math.sqrt(qhat)

    m_s, m_a = dot(Ms, M0s), dot(Ma, M0a)
    return np.stack(
        [
            dot(Ms, Ms),
            m_s,
            divergence(Ms, M0s, sample.Zs, qs, m_s),
            dot(Ma, Ma),
            m_a,
            divergence(Ma, M0a, sample.Za, qa, m_a),
        ],
        axis=1,
    )


def untied_prior_side(
    hats: np.ndarray,
    *,
    lam: float,
    kappa: float,
    sample: UntiedPriorSample,
    warm: np.ndarray | None = None,
    tol: float = 1e-11,
) -> UntiedPriorSide:
    """``(qhat_s, mhat_s, Sigmahat_s, qhat_a, mhat_a, Sigmahat_a) -> (q_s, m_s, Sigma_s, q_a, m_a, Sigma_a)``.

    See the module docstring for the problem and the normalisations. ``Sigma_a`` is ``nan`` when
    the antisymmetric block is unobserved (``qhat_a = mhat_a = Sigmahat_a = 0``, ``T = 1``).
    """
    qs, ms, Ss, qa, ma, Sa = (float(x) for x in hats)
    D = sample.D
    M0s, M0a = _sym(sample.M0), _anti(sample.M0)
    A_s = ms * M0s + math.sqrt(max(qs, 0.0)) * sample.Zs
    A_a = ma * M0a + math.sqrt(max(qa, 0.0)) * sample.Za
    rank = None if kappa >= 1 else max(1, int(round(kappa * D)))
    M, s, iters = weighted_nuclear_prox(A_s, A_a, Ss, Sa, 2.0 * lam, rank=rank, warm=warm, tol=tol)
    per = draw_rows(M, hats, sample)
    return UntiedPriorSide(
        values=per.mean(axis=0),
        rank_fraction=float(np.mean(s > 0)),
        per_draw=per,
        solutions=M,
        singular_values=s,
        rank_per_draw=np.mean(s > 0, axis=-1),
        iterations=iters,
    )


#: overlaps that must stay positive (``q_s, Sigma_s, q_a, Sigma_a``): where the extrapolation would not, the
#: finer size's value is kept
_POSITIVE = (0, 2, 3, 5)


def extrapolated_side(fine: BlockPriorSide, coarse: BlockPriorSide) -> BlockPriorSide:
    """Richardson extrapolation in ``1/D`` of a sampled prior side from sizes ``D`` (``fine``) and ``D/2`` (``coarse``).

    A sampled side's values carry a finite-size bias ``c/D + O(1/D^2)`` (the Stein divergence of
    ``Sigma_B`` most: the GOE diagonal's variance ``2/D``); ``2 F_D - F_{D/2}`` removes its ``1/D``
    term. ``values``, ``rank_fraction`` (clipped to ``[0, 1]``) and ``penalty`` are extrapolated;
    ``q_B``, ``Sigma_B`` fall back to the fine value where the extrapolation is not positive (far
    from a fixed point). ``per_draw`` and ``singular_values`` stay the fine instances', the coarse
    rows go to ``coarse_per_draw``; ``solutions`` is the pair of warm starts.
    """
    values = 2 * np.asarray(fine.values, float) - np.asarray(coarse.values, float)
    for k in _POSITIVE:
        if not values[k] > 0 and fine.values[k] > 0:
            values[k] = fine.values[k]
    rank = float(min(1.0, max(0.0, 2 * fine.rank_fraction - coarse.rank_fraction)))
    return BlockPriorSide(
        values=values,
        rank_fraction=rank,
        penalty=2 * fine.penalty - coarse.penalty,
        per_draw=fine.per_draw,
        solutions=(fine.solutions, coarse.solutions),
        singular_values=fine.singular_values,
        rank_per_draw=fine.rank_per_draw,
        coarse_per_draw=coarse.per_draw,
        coarse_rank_per_draw=coarse.rank_per_draw,
    )

"""State evolution (SE) of the ERM minimiser of single-head tied attention.

Implements the six-order-parameter fixed point of arXiv 2509.24914 (Sec. 3, "Main results";
conventions of ``shared/THEORY.md`` §1 and §3), with the spectral ("nuclear route") prior
side of arXiv 2505.17958 and a deterministic, quadrature-based output side.

Order parameters (all per ``d``, ``Q0 = Tr S0^2/d``):

* ``q = Tr Shat^2/d``, ``m = Tr Shat S0/d``, ``Sigma`` (the prox parameter / response);
* conjugates ``qhat``, ``mhat``, ``Sigmahat``.

**Prior (matrix) side.** Effective denoising of ``Y = S0 + delta Z`` (``Z`` GOE, semicircle on
``[-2, 2]``) with ``delta = sqrt(qhat)/mhat``:

* factorized student (nuclear norm ``lam d Tr S``, rank cap ``p = kappa d``):
  ``Shat = eta f(Y)``, ``f(x) = (x - eps)_+ 1[x > c]``, ``eps = 2 lam/mhat``,
  ``eta = mhat/Sigmahat``, ``c = max(eps, quantile of mu_delta at 1 - kappa)``, and with
  ``J(delta, eps) = int f^2 dmu_delta``::

      q     = eta^2 J
      m     = eta [J - (delta/2) dJ/ddelta - (eps/2) dJ/deps]
      Sigma = dJ/ddelta / (2 delta Sigmahat)           (= D(eta f)/mhat, D the free divergence)

* direct student (Frobenius ``lam d ||S||_F^2``, which is ``2 lam ||S||^2`` in the effective
  problem, the same factor 2 as in ``eps = 2 lam/mhat``): ``Shat = eta' Y`` with
  ``eta' = mhat/(Sigmahat + 4 lam)``, so ``q = eta'^2 (Q0 + delta^2)``, ``m = eta' Q0``,
  ``Sigma = 1/(Sigmahat + 4 lam)``.

**Output (channel) side.** ``K = T(T+1)/2`` iid pairs ``(z0_k, z_k) ~ N(0, [[Q0, m], [m, q]])``,
teacher logits ``y = z0 + xi`` with ``xi_k ~ N(0, Delta/2)``, prox point ``h*`` of
:func:`singlehead.prox.prox_channel`, ``g = h* - z``::

    qhat     =  2 alpha E ||g||^2 / Sigma^2
    mhat     =  2 alpha E <g, q z0 - m z> / (Sigma (Q0 q - m^2))
    Sigmahat = -2 alpha E <g, Q0 z - m z0> / (Sigma (Q0 q - m^2))

The expectation is taken over the ``2K`` Gaussian directions of ``(y, z)`` (``z0`` enters
linearly and is replaced by ``E[z0 | y, z]``) with fixed scrambled-Sobol nodes
(common random numbers: the map is deterministic and smooth). Its error is estimated from
the spread over independent scrambles. The linear channel is done in closed form
(``mhat = Sigmahat = 2 alpha K/(Sigma + 1/4)``,
``qhat = 2 alpha K (Q0 - 2m + q + Delta/2)/(Sigma + 1/4)^2``).

**Metrics** (same definitions as :mod:`singlehead.results`): test error
``E ||chan_beta0(M(z0)) - chan_beta(M(z))||_F^2`` (``z0`` noiseless, or ``z0 + xi`` for the noisy
version), train error ``E ||chan_beta0(M(y)) - chan_beta(M(h*))||_F^2``, matrix error
``Q0 - 2m + q``, penalty ``lam eta int f dmu_delta`` (factorized: ``lam Tr S/d``) or ``lam q``
(direct), rank fraction ``mu_delta(f > 0)``.

**Complete rank collapse.** For large ``lam`` the factorized student's fixed point is ``S = 0``
(``q = m = Sigma = 0``: no eigenvalue of ``Y`` survives the threshold). There the output side is
its ``Sigma -> 0`` limit at zero student logits (``g = -Sigma grad ell(0)``; the conjugates
``qhat0, mhat0, Sigmahat0`` stay finite and do not depend on ``lam``), and ``S = 0`` is a fixed
point iff ``eps0 = 2 lam/mhat0`` is at or above the top edge of ``mu_delta0``,
``delta0 = sqrt(qhat0)/mhat0``, i.e. ``lam >= lam_c = mhat0 top(mu_delta0)/2``
(:func:`collapse_point`). The transition is continuous: below ``lam_c`` the non-trivial fixed
point has ``q -> 0``. :func:`theory` returns the collapsed solution (``extras["collapsed"]``)
when ``S = 0`` is a fixed point and the solver reaches it or finds no other one; its errors are
those of predicting with ``h = 0``.

seq2seq has the same theory as seq2lab (THEORY §1): the channel enters only through the
``T x T`` attention matrix.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import optimize, stats
from scipy.stats import qmc

from .problem import MPTarget, Problem
from .prox import attention, interpolating_start, prox_channel, softmax_fit_loss, softmax_rows, vec_to_mat
from .results import Result

__all__ = [
    "OutputQuadrature",
    "PriorModel",
    "prior_model",
    "OutputSide",
    "output_side",
    "PriorSide",
    "prior_side",
    "SEState",
    "collapse_point",
    "theory",
    "theory_curve",
]


# ----------------------------------------------------------------------------------------
# Quadrature nodes
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OutputQuadrature:
    """Fixed standard-normal nodes for the output-side expectations.

    ``nodes`` has shape ``(R, N, dim)``: ``R`` independent Owen-scrambled Sobol point sets of
    ``N = 2^m`` points mapped through the normal quantile. Estimates average over all
    ``R N`` nodes (equal weights); the standard error is ``std over scrambles / sqrt(R)``.
    """

    nodes: np.ndarray
    seed: int

    @classmethod
    def sobol(cls, dim: int, n_points: int = 2048, n_scrambles: int = 4, seed: int = 0) -> "OutputQuadrature":
        """``n_scrambles`` scrambled Sobol sets of ``n_points`` (rounded up to a power of 2) in ``dim`` dims."""
        mexp = max(1, int(math.ceil(math.log2(max(2, n_points)))))
        ss = np.random.SeedSequence(int(seed))
        sets = []
        for child in ss.spawn(int(n_scrambles)):
            u = qmc.Sobol(d=dim, scramble=True, seed=np.random.default_rng(child)).random_base2(mexp)
            u = np.clip(u, 1e-12, 1 - 1e-12)
            sets.append(stats.norm.ppf(u))
        return cls(np.stack(sets), int(seed))

    @property
    def n_scrambles(self) -> int:
        return self.nodes.shape[0]

    @property
    def flat(self) -> np.ndarray:
        return self.nodes.reshape(-1, self.nodes.shape[-1])

    def mean_and_error(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean over all nodes and standard error over scrambles of per-node ``values`` (``(R*N, ...)``)."""
        R = self.n_scrambles
        v = values.reshape(R, -1, *values.shape[1:]).mean(axis=1)
        mean = v.mean(axis=0)
        err = v.std(axis=0, ddof=1) / math.sqrt(R) if R > 1 else np.full_like(mean, np.nan)
        return mean, err


# ----------------------------------------------------------------------------------------
# Prior models (target spectra)
# ----------------------------------------------------------------------------------------
@dataclass
class PriorModel:
    """The target side of the SE: ``Q0`` and the soft-threshold integrals of ``mu_{S0} ⊞ SC(delta^2)``.

    ``mode`` is ``"asymptotic"`` (a free-probability law from :mod:`singlehead.spectra`) or
    ``"finite"`` (:class:`singlehead.spectra.FiniteDSpectrum`: the target eigenvalues at the
    problem's ``d`` plus a few fixed GOE draws).
    """

    mode: str
    Q0: float
    engine: Any
    description: dict[str, Any] = field(default_factory=dict)

    def threshold_integrals(self, delta: float, eps: float, rank_cap: float | None = None):
        if self.mode == "finite":
            return self.engine.threshold_integrals(delta, eps, rank_cap=rank_cap)
        from .spectra import soft_threshold_integrals

        return soft_threshold_integrals(self.engine, delta, eps, rank_cap=rank_cap)

    def rie_mmse_integral(self, v: float) -> float:
        """``int mu_v(x)^3 dx`` with ``mu_v = mu_{S0} ⊞ SC(v)`` (asymptotic mode only)."""
        from .spectra import rie_mmse_integral

        if self.mode == "finite":
            if hasattr(self.engine, "rie_mmse_integral"):
                return float(self.engine.rie_mmse_integral(v))
            from .spectra import DiscreteLaw

            return float(rie_mmse_integral(DiscreteLaw(self.description["eigenvalues"]), v))
        return float(rie_mmse_integral(self.engine, v))


def prior_model(problem: Problem, prior: str = "auto", *, draws: int = 4, seed: int = 0) -> PriorModel:
    """Map a problem's target to a :class:`PriorModel`.

    Parameters
    ----------
    prior : {"auto", "asymptotic", "finite"}
        ``"auto"``: MP targets use the asymptotic law ``MarchenkoPastur(kappa0)``
        (``Q0 = 1 + kappa0``); power-law and custom targets use the finite-``d`` mode with
        the eigenvalues of :func:`singlehead.targets.target_eigenvalues`.
        ``"asymptotic"`` for power-law/custom uses the discrete law of those eigenvalues;
        ``"finite"`` for an MP target uses the eigenvalues of one target drawn with ``seed``.
    draws, seed : int
        GOE draws and seed of the finite-``d`` mode.
    """
    from . import spectra
    from .targets import sample_target, target_eigenvalues

    if prior not in ("auto", "asymptotic", "finite"):
        raise ValueError(f"prior must be one of auto, asymptotic, finite (got {prior!r})")
    tgt = problem.target
    if isinstance(tgt, MPTarget):
        if prior in ("auto", "asymptotic"):
            law = spectra.MarchenkoPastur(tgt.kappa0)
            return PriorModel("asymptotic", float(law.second_moment()), law, {"law": "marchenko_pastur", "kappa0": tgt.kappa0})
        eig = np.linalg.eigvalsh(sample_target(tgt, problem.d, seed).numpy())
    else:
        eig = target_eigenvalues(tgt, problem.d)
        if prior == "asymptotic":
            law = spectra.DiscreteLaw(eig)
            return PriorModel("asymptotic", float(np.mean(eig**2)), law, {"law": "discrete", "eigenvalues": eig})
    fd = spectra.FiniteDSpectrum(eig, draws=draws, seed=seed)
    return PriorModel("finite", float(np.mean(eig**2)), fd, {"law": "finite_d", "d": problem.d, "draws": draws,
                                                             "seed": seed, "eigenvalues": eig})


# ----------------------------------------------------------------------------------------
# Output side
# ----------------------------------------------------------------------------------------
@dataclass
class OutputSide:
    """Conjugates and channel metrics at given ``(q, m, Sigma)``; ``*_err`` are quadrature standard errors."""

    qhat: float
    mhat: float
    Sigmahat: float
    train_error: float
    err: dict[str, float] = field(default_factory=dict)
    branches: list | None = None
    prox_converged: bool = True


def _gauss_pair(u1: np.ndarray, u2: np.ndarray, var0: float, cov: float, var1: float) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` with variances ``var0, var1`` and covariance ``cov`` from iid standard normals."""
    s0 = math.sqrt(var0)
    r = max(var1 - cov * cov / var0, 0.0)
    return s0 * u1, (cov / s0) * u1 + math.sqrt(r) * u2


def output_side(
    q: float,
    m: float,
    Sigma: float,
    *,
    problem: Problem,
    Q0: float,
    quad: OutputQuadrature | None = None,
    analytic_linear: bool = True,
    warm: Sequence[np.ndarray] | None = None,
    union: bool = False,
) -> OutputSide:
    """Output-side update ``(q, m, Sigma) -> (qhat, mhat, Sigmahat)`` plus the train error.

    Uses ``problem.alpha, T, channel, beta, beta0, noise``. ``Q0`` comes from the prior model.
    The linear channel is in closed form unless ``analytic_linear=False`` (then it goes
    through the same quadrature/prox code as softmax; used to test that code).
    ``warm`` are Newton starts (``(R N, K)`` arrays) from a previous call; by default (cold) the
    starts are ``z``, the interpolating point and their midpoint. ``OutputSide.branches`` holds
    the end points of each start, the warm starts of a next call (each branch is followed
    continuously, so that warm and cold maps agree away from basin boundaries). With
    ``union=True`` both the cold starts and ``warm`` are used (node-wise best objective).
    """
    alpha, T, K = problem.alpha, problem.T, problem.n_pairs
    Dh = problem.noise / 2.0
    if problem.channel == "linear" and analytic_linear:
        S4 = Sigma + 0.25
        E = Q0 - 2 * m + q + Dh
        return OutputSide(
            qhat=2 * alpha * K * E / S4**2,
            mhat=2 * alpha * K / S4,
            Sigmahat=2 * alpha * K / S4,
            train_error=K * E / (8 * S4**2),
            err={"qhat": 0.0, "mhat": 0.0, "Sigmahat": 0.0, "train_error": 0.0},
        )
    if quad is None:
        quad = OutputQuadrature.sobol(2 * K)
    if not (q > _Q_FLOOR * Q0 and Sigma > _SIGMA_FLOOR):
        return _output_side_degenerate(q, m, Sigma, problem=problem, Q0=Q0, quad=quad)
    X = quad.flat
    Vy = Q0 + Dh
    y, z = _gauss_pair(X[:, :K], X[:, K:], Vy, m, q)
    # E[z0 | y, z] = a y + b z  (z0 = y - xi, xi independent of z)
    C = np.array([[Vy, m], [m, q]])
    a, b = np.linalg.solve(C, np.array([Q0, m]))
    z0c = a * y + b * z
    starts = warm
    if (warm is None or union) and problem.channel != "linear":
        hi = interpolating_start(z, y, problem.beta0 / problem.beta, T)
        starts = [z, hi, 0.5 * (z + hi)] + (list(warm) if warm is not None else [])
    pr = prox_channel(z, y, Sigma, T=T, channel=problem.channel, beta=problem.beta, beta0=problem.beta0, starts=starts)
    g = pr.h - z
    det = max(Q0 * q - m * m, 1e-300)
    prox_ok = pr.converged
    gS = g
    if q < _Q_CV * Q0:
        # small q: the Sigmahat weight (Q0 z - m z0)/det ~ 1/sqrt(q) multiplies the O(1) part
        # of g that depends on y alone, a zero-mean term whose quadrature error blows up as
        # q -> 0. Control variate: subtract that part, the prox residual at z = 0 (its exact
        # contribution E<g(y, 0), Q0 z - m z0> is 0 by Stein's lemma).
        pr0 = prox_channel(np.zeros_like(y), y, Sigma, T=T, channel=problem.channel, beta=problem.beta,
                           beta0=problem.beta0)
        gS = g - pr0.h
        prox_ok = prox_ok and pr0.converged
    vals = np.stack(
        [
            np.einsum("nk,nk->n", g, g),
            np.einsum("nk,nk->n", g, q * z0c - m * z),
            np.einsum("nk,nk->n", gS, Q0 * z - m * z0c),
            pr.fit,
        ],
        axis=1,
    )
    mean, err = quad.mean_and_error(vals)
    fac = np.array([2 * alpha / Sigma**2, 2 * alpha / (Sigma * det), -2 * alpha / (Sigma * det), 1.0])
    mean, err = mean * fac, err * np.abs(fac)
    names = ("qhat", "mhat", "Sigmahat", "train_error")
    # warm starts for a next call: each branch followed continuously (union: the tracked ones)
    br = pr.branches[3:] if (union and warm is not None) else pr.branches
    return OutputSide(*map(float, mean), err=dict(zip(names, map(float, err))), branches=br,
                      prox_converged=prox_ok)


# below these, ``q`` is treated as 0 (z = 0: S = 0) and ``Sigma`` by its first-order limit
_Q_FLOOR = 1e-14
_SIGMA_FLOOR = 1e-10
# below this q/Q0 the Sigmahat estimator uses a control variate (see output_side)
_Q_CV = 1e-2


def _fit_derivatives(h: np.ndarray, y: np.ndarray, problem: Problem):
    """Fit loss ``ell(h; y) = ||chan_beta0(M(y)) - chan_beta(M(h))||_F^2`` with gradient and Hessian in ``h``."""
    N, K = h.shape
    if problem.channel == "linear":  # ||M(y - h)||^2 = 2 ||y - h||^2
        r = y - h
        return 2.0 * np.einsum("nk,nk->n", r, r), -4.0 * r, np.broadcast_to(4.0 * np.eye(K), (N, K, K))
    Y = softmax_rows(problem.beta0 * vec_to_mat(y, problem.T))
    return softmax_fit_loss(h, Y, problem.beta, order=2)


def _output_side_degenerate(
    q: float, m: float, Sigma: float, *, problem: Problem, Q0: float, quad: OutputQuadrature
) -> OutputSide:
    """Output side at the boundary ``q -> 0`` (student logits ``z = 0``) and/or ``Sigma -> 0``.

    With ``g = h* - z`` and Stein's lemma the conjugates are
    ``mhat = (2 alpha/Sigma) E[sum_k d g_k/d y_k]``, ``Sigmahat = -(2 alpha/Sigma) E[sum_k d g_k/d z_k]``
    (the ``(q z0 - m z)/det`` weights of :func:`output_side` are these derivatives in integrated
    form). From the prox equation ``h* = z - Sigma grad ell(h*)``,
    ``d h*/d z = (1 + Sigma H)^{-1}`` (``H`` the Hessian of ``ell`` at ``h*``), so

    * ``Sigma -> 0``: ``g = -Sigma grad ell(z) + O(Sigma^2)``, ``qhat -> 2 alpha E||grad ell(z)||^2``,
      ``mhat -> -2 alpha E<grad ell(z), q z0 - m z>/det`` and
      ``Sigmahat -> 2 alpha E tr H(z)`` (finite; the pathwise form of the Stein weight);
    * ``q = 0`` (then ``m = 0``, ``z = 0``, ``y ~ N(0, Q0 + Delta/2)`` alone):
      ``mhat = 2 alpha E<g, y>/(Sigma (Q0 + Delta/2))``,
      ``Sigmahat = 2 alpha E tr[H (1 + Sigma H)^{-1}]``; at ``Sigma = 0`` these are
      ``mhat0 = -2 alpha E<grad ell(0), y>/(Q0 + Delta/2)``, ``Sigmahat0 = 2 alpha E tr H(0)``,
      ``qhat0 = 2 alpha E||grad ell(0)||^2``: the conjugates of the collapsed point ``S = 0``.

    The train error is ``E ell(h*)`` (``E ell(z)`` at ``Sigma = 0``).
    """
    alpha, K = problem.alpha, problem.n_pairs
    Vy = Q0 + problem.noise / 2.0
    X = quad.flat
    zero_q = not q > _Q_FLOOR * Q0
    Sigma = max(float(Sigma), 0.0)
    if zero_q:
        y = math.sqrt(Vy) * X[:, :K]
        z = np.zeros_like(y)
    else:
        y, z = _gauss_pair(X[:, :K], X[:, K:], Vy, m, q)
        C = np.array([[Vy, m], [m, q]])
        a, b = np.linalg.solve(C, np.array([Q0, m]))
        z0c = a * y + b * z
        det = max(Q0 * q - m * m, 1e-300)
    prox_ok = True
    if Sigma > _SIGMA_FLOOR:  # only reached with q = 0
        pr = prox_channel(z, y, Sigma, T=problem.T, channel=problem.channel, beta=problem.beta, beta0=problem.beta0)
        prox_ok = pr.converged
        h = pr.h
        fit, _, H = _fit_derivatives(h, y, problem)
        gS = h / Sigma  # g / Sigma (z = 0)
        Hs = np.linalg.solve(np.eye(K) + Sigma * H, H)  # H (1 + Sigma H)^{-1} (they commute)
        cols = [np.einsum("nk,nk->n", gS, gS), np.einsum("nk,nk->n", gS, y) / Vy, np.einsum("nkk->n", Hs), fit]
    else:
        fit, grad, H = _fit_derivatives(z, y, problem)
        cols = [np.einsum("nk,nk->n", grad, grad)]
        if zero_q:
            cols.append(-np.einsum("nk,nk->n", grad, y) / Vy)
        else:
            cols.append(-np.einsum("nk,nk->n", grad, q * z0c - m * z) / det)
        cols.append(np.einsum("nkk->n", H))  # -E tr dg/dz / Sigma with g = -Sigma grad ell(z)
        cols.append(fit)
    mean, err = quad.mean_and_error(np.stack(cols, axis=1))
    fac = np.array([2 * alpha, 2 * alpha, 2 * alpha, 1.0])
    mean, err = mean * fac, err * fac
    names = ("qhat", "mhat", "Sigmahat", "train_error")
    return OutputSide(*map(float, mean), err=dict(zip(names, map(float, err))), branches=None, prox_converged=prox_ok)


def channel_test_errors(
    q: float, m: float, *, problem: Problem, Q0: float, quad: OutputQuadrature | None = None
) -> dict[str, float]:
    """Test errors ``E ||chan_beta0(M(z0)) - chan_beta(M(z))||_F^2`` (noiseless and noisy labels).

    ``(z0_k, z_k)`` iid with covariance ``[[Q0, m], [m, q]]`` (``Q0 + Delta/2`` for noisy labels).
    Returns a dict with ``test_error``, ``test_error_noisy`` and their quadrature errors.
    """
    T, K = problem.T, problem.n_pairs
    Dh = problem.noise / 2.0
    if problem.channel == "linear":
        return {"test_error": 2 * K * (Q0 - 2 * m + q), "test_error_noisy": 2 * K * (Q0 + Dh - 2 * m + q),
                "test_error_err": 0.0, "test_error_noisy_err": 0.0}
    if quad is None:
        quad = OutputQuadrature.sobol(2 * K)
    X = quad.flat
    out = {}
    for name, V0 in (("test_error", Q0), ("test_error_noisy", Q0 + Dh)):
        z0, z = _gauss_pair(X[:, :K], X[:, K:], V0, m, q)
        diff = attention(z0, T, problem.channel, problem.beta0) - attention(z, T, problem.channel, problem.beta)
        mean, err = quad.mean_and_error(np.einsum("nab,nab->n", diff, diff))
        out[name], out[name + "_err"] = float(mean), float(err)
    return out


# ----------------------------------------------------------------------------------------
# Prior side
# ----------------------------------------------------------------------------------------
@dataclass
class PriorSide:
    """``(q, m, Sigma)`` from the conjugates, with the learned-spectrum law parameters."""

    q: float
    m: float
    Sigma: float
    eta: float
    delta: float
    eps: float
    first_moment: float
    rank_fraction: float
    cap_binds: bool = False
    cutoff: float = math.nan


def prior_side(qhat: float, mhat: float, Sigmahat: float, *, problem: Problem, prior: PriorModel) -> PriorSide:
    """Prior-side update ``(qhat, mhat, Sigmahat) -> (q, m, Sigma)`` (see module docstring).

    ``first_moment`` is ``Tr Shat/d`` (``eta int f dmu_delta``; ``eta' Tr S0/d`` for direct
    students is not needed and reported as nan); ``rank_fraction`` the fraction of non-zero
    eigenvalues of ``Shat``.
    """
    lam = problem.lam
    delta = math.sqrt(max(qhat, 0.0)) / mhat
    if problem.student == "direct":
        etap = mhat / (Sigmahat + 4 * lam)
        return PriorSide(etap**2 * (prior.Q0 + delta**2), etap * prior.Q0, 1.0 / (Sigmahat + 4 * lam), etap, delta, 0.0,
                         math.nan, 1.0)
    eps = 2 * lam / mhat
    eta = mhat / Sigmahat
    cap = problem.kappa if problem.kappa < 1 else None
    ti = prior.threshold_integrals(delta, eps, rank_cap=cap)
    J, Jd, Je = float(ti.J), float(ti.dJ_ddelta), float(ti.dJ_deps)
    q = eta**2 * J
    m = eta * (J - 0.5 * delta * Jd - 0.5 * eps * Je)
    Sigma = Jd / (2 * delta * Sigmahat)
    return PriorSide(q, m, Sigma, eta, delta, eps, -0.5 * eta * Je, float(ti.rank_fraction),
                     bool(getattr(ti, "cap_binds", False)), float(getattr(ti, "cutoff", math.nan)))


# ----------------------------------------------------------------------------------------
# Fixed point
# ----------------------------------------------------------------------------------------
@dataclass
class SEState:
    """A point ``(q, m, Sigma)`` of the SE (usable as ``init`` / warm start)."""

    q: float
    m: float
    Sigma: float

    def as_array(self) -> np.ndarray:
        return np.array([self.q, self.m, self.Sigma])


class _SEMap:
    """The SE map ``(q, m, Sigma) -> (q', m', Sigma')`` for one problem, with prox warm starts.

    The prox is non-convex for large ``Sigma``; its global minimiser is searched node by node
    from several starts. ``mode``:

    * ``"warm"``: each start's branch restarts from its previous end point (cheap);
    * ``"cold"``: the starts ``z``, interpolating point, midpoint (history-free);
    * ``"union"``: both, node-wise best objective. Used for the reported point: it is the best
      available approximation of the global minimiser.
    """

    def __init__(self, problem: Problem, prior: PriorModel, quad: OutputQuadrature | None) -> None:
        self.problem, self.prior, self.quad = problem, prior, quad
        self.warm: list | None = None
        self.mode = "warm"
        self.n_calls = 0
        self.stop_on_collapse = False  # raise _DrivenToCollapse when the map lands on S = 0

    def __call__(self, x: np.ndarray, *, mode: str | None = None) -> tuple[np.ndarray, OutputSide, PriorSide]:
        q, m, Sigma = map(float, x)
        mode = mode or self.mode
        self.n_calls += 1
        out = output_side(q, m, Sigma, problem=self.problem, Q0=self.prior.Q0, quad=self.quad,
                          warm=None if mode == "cold" else self.warm, union=mode == "union")
        if out.branches is not None and self.problem.channel != "linear":
            self.warm = out.branches
        pr = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=self.problem, prior=self.prior)
        if self.stop_on_collapse and not pr.q > 0:
            raise _DrivenToCollapse
        return np.array([pr.q, pr.m, pr.Sigma]), out, pr


class _DrivenToCollapse(Exception):
    """The SE iteration reached complete rank collapse (``J = 0``: ``q = m = Sigma = 0``)."""


@dataclass
class _CollapsePoint:
    """The SE at ``S = 0`` (``q = m = Sigma = 0``): conjugates, prior side, collapse threshold."""

    out: OutputSide
    prior: PriorSide
    holds: bool  # S = 0 is a fixed point: eps0 = 2 lam/mhat0 at or above the top of mu_delta0
    lam_c: float  # the collapse point mhat0 * top(mu_delta0)/2 (inf for direct students)


def _top_edge(prior: PriorModel, delta: float) -> float:
    """Top of the support of ``mu_delta = mu_{S0} ⊞ SC(delta^2)`` (bulks and atoms/outliers)."""
    if prior.mode == "finite":
        return float(np.max(prior.engine.eigenvalues(delta)))
    from .spectra import free_convolve_semicircle

    cl = free_convolve_semicircle(prior.engine, float(delta) ** 2)
    tops = [hi for _, hi in cl.edges()] + [float(x) for x in cl.atoms()[0]]
    return float(max(tops)) if tops else math.nan


def collapse_point(problem: Problem, prior: PriorModel, quad: OutputQuadrature | None = None) -> _CollapsePoint:
    """Complete rank collapse test: is ``S = 0`` a fixed point of the SE?

    At ``q = m = 0`` the student logits vanish and the prox parameter ``Sigma`` of the collapsed
    point is 0, so the conjugates are the ``Sigma -> 0`` limits (see
    :func:`_output_side_degenerate`): ``qhat0 = 2 alpha E||grad ell(0)||^2``,
    ``mhat0 = -2 alpha E<grad ell(0), y>/(Q0 + Delta/2)``, ``Sigmahat0 = 2 alpha E tr Hess ell(0)``
    (linear channel: ``qhat0 = 32 alpha K (Q0 + Delta/2)``, ``mhat0 = Sigmahat0 = 8 alpha K``), with
    ``delta0 = sqrt(qhat0)/mhat0``. They do not depend on ``lam``. The prior side maps them back
    to ``q = m = Sigma = 0`` iff the threshold ``eps0 = 2 lam/mhat0`` is at or above the top edge of
    ``mu_delta0`` (no eigenvalue survives), i.e. iff ``lam >= lam_c = mhat0 top(mu_delta0)/2``.
    The direct (Frobenius) student shrinks linearly and never collapses (``lam_c = inf``).
    """
    if quad is None and problem.channel != "linear":
        quad = OutputQuadrature.sobol(2 * problem.n_pairs)
    out = output_side(0.0, 0.0, 0.0, problem=problem, Q0=prior.Q0, quad=quad)
    pr = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=problem, prior=prior)
    if problem.student == "direct":
        lam_c = math.inf
    else:
        lam_c = 0.5 * out.mhat * _top_edge(prior, pr.delta)
    return _CollapsePoint(out, pr, bool(problem.student != "direct" and not pr.q > 0), float(lam_c))


def _to_u(x: np.ndarray, Q0: float) -> np.ndarray:
    """Unconstrained coordinates: ``(log q, atanh(m/sqrt(Q0 q)), log Sigma)``."""
    q, m, S = map(float, x)
    if not q > 0:  # complete rank collapse (q = m = 0): the floor of the coordinates
        q, m = _U_FLOOR, 0.0
    if not S > 0:
        S = _U_FLOOR
    r = np.clip(m / math.sqrt(Q0 * q), -1 + 1e-15, 1 - 1e-15)
    return np.array([math.log(q), math.atanh(r), math.log(S)])


_U_FLOOR = 1e-300


def _from_u(u: np.ndarray, Q0: float) -> np.ndarray:
    q = math.exp(np.clip(u[0], -700, 700))
    return np.array([q, math.tanh(u[1]) * math.sqrt(Q0 * q), math.exp(np.clip(u[2], -700, 700))])


def _residual(x: np.ndarray, fx: np.ndarray, Q0: float) -> float:
    """``max(|dq|, |dm|)/Q0`` and ``|dSigma|/Sigma`` (relative change under one SE step)."""
    d = np.abs(fx - x)
    return float(max(d[0] / Q0, d[1] / Q0, d[2] / max(abs(x[2]), 1e-300)))


def _broyden(G, u0: np.ndarray, J0: np.ndarray | None, *, g0: np.ndarray | None = None, max_eval: int = 60,
             fd_step: float = 1e-5, store: list | None = None) -> np.ndarray:
    """Root of ``G`` (3-dim) by Broyden's method with a finite-difference initial Jacobian.

    ``J0`` (e.g. the Jacobian at the previous point of a sweep) skips the finite differences.
    Steps are backtracked on ``||G||``; on failure the Jacobian is recomputed. ``G`` raises to
    signal convergence. Returns the last Jacobian estimate (also kept in ``store[0]``, which
    survives that exception). ``g0 = G(u0)`` if already known.
    """
    u = np.asarray(u0, float)
    g = G(u) if g0 is None else np.asarray(g0, float)
    n_eval = 1
    store = store if store is not None else [None]

    def fd(u, g):
        nonlocal n_eval
        J = np.empty((3, 3))
        for k in range(3):
            e = np.zeros(3)
            e[k] = fd_step
            J[:, k] = (G(u + e) - g) / fd_step
            n_eval += 1
        return J

    J = np.array(J0, float) if J0 is not None else fd(u, g)
    store[0] = J
    fresh = J0 is None
    while n_eval < max_eval:
        try:
            step = -np.linalg.solve(J, g)
        except np.linalg.LinAlgError:
            step = -np.linalg.lstsq(J, g, rcond=None)[0]
        nrm = np.linalg.norm(step)
        if nrm > 2.0:  # trust region in log coordinates
            step *= 2.0 / nrm
        t, accepted = 1.0, False
        for _ in range(4):
            un = u + t * step
            gn = G(un)
            n_eval += 1
            if np.linalg.norm(gn) < (1 - 1e-4 * t) * np.linalg.norm(g):
                accepted = True
                break
            t *= 0.5
        if not accepted:
            if fresh:
                return J  # Jacobian is fresh and no progress: give up (fallback takes over)
            J, fresh = fd(u, g), True
            store[0] = J
            continue
        s_ = un - u
        J = J + np.outer((gn - g) - J @ s_, s_) / (s_ @ s_)
        store[0] = J
        u, g, fresh = un, gn, False
    return J


def _initial_guesses(problem: Problem, Q0: float) -> list[np.ndarray]:
    """Structured starting points ``(q, m, Sigma)``.

    A generic one ``(Q0/2, 0.4 Q0, 1)``, a well-learned one ``(Q0, 0.9 Q0, 0.1)``, and, for
    small ``lam``, one in the interpolation regime where ``eps = lam Sigma/(alpha c_T) = O(1)``
    (THEORY §4), i.e. ``Sigma ~ alpha c_T/lam``.
    """
    K = problem.n_pairs
    c = K if problem.channel == "linear" else max(K - 1, 1)
    out = [np.array([0.5 * Q0, 0.4 * Q0, 1.0]), np.array([Q0, 0.9 * Q0, 0.1])]
    if problem.lam > 0:
        S = problem.alpha * c / problem.lam
        if S > 3:
            out.append(np.array([Q0, 0.65 * Q0, S]))
    return out


def _default_init(problem: Problem, Q0: float) -> np.ndarray:
    return np.array([0.5 * Q0, 0.4 * Q0, 1.0])


def _solve(
    F: "_SEMap",
    x: np.ndarray,
    Q0: float,
    *,
    tol: float,
    switch: float,
    method: str,
    jacobian: np.ndarray | None,
    damping: float,
    max_iter: int,
) -> tuple[float, np.ndarray, np.ndarray | None, int]:
    """Fixed point of ``F``: damped pre-iteration, root solver, damped fallback (see :func:`theory`).

    Returns ``(residual, x, jacobian, evaluations)`` of the best point found.
    """
    iterations = 0
    best = (math.inf, x)
    # phase 1: damped iteration in the unconstrained coordinates until the residual is
    # moderate (brings a poor initial guess into the basin of the root solver)
    u = _to_u(x, Q0)
    dmp, prev = damping, math.inf
    last = None  # (x, F(x)) of the last evaluation
    if jacobian is not None and method == "broyden":
        switch = max(switch, 0.3)  # a Jacobian is known: hand over to Broyden early
    for _ in range(max_iter if method == "iterate" else 60):
        x = _from_u(u, Q0)
        fx = F(x)[0]
        last = (x, fx)
        iterations += 1
        r = _residual(x, fx, Q0)
        if r < best[0]:
            best = (r, x)
        if r < tol or (method != "iterate" and r < switch):
            break
        if r > prev:
            dmp = max(0.05, 0.6 * dmp)
        prev = r
        u = u + dmp * (_to_u(fx, Q0) - u)
    x = best[1]
    jac_out = None
    jac_store: list = [None]
    if best[0] >= tol and method in ("broyden", "hybr"):

        class _Done(Exception):
            pass

        def G(u: np.ndarray) -> np.ndarray:
            nonlocal best, iterations
            xx = _from_u(u, Q0)
            iterations += 1
            try:
                fx = F(xx)[0]
            except (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError):
                return np.full(3, 1e3)
            if not np.all(np.isfinite(fx)) or fx[0] <= 0 or fx[2] <= 0 or fx[1] ** 2 >= Q0 * fx[0]:
                return np.full(3, 1e3)
            r = _residual(xx, fx, Q0)
            if r < best[0]:
                best = (r, xx)
            if r < 0.1 * tol:
                raise _Done
            return _to_u(fx, Q0) - u

        try:
            if method == "hybr":
                optimize.root(G, _to_u(x, Q0), method="hybr", options={"xtol": tol * 1e-2, "maxfev": 100, "eps": 1e-9})
            else:
                ux = _to_u(x, Q0)
                g0 = _to_u(last[1], Q0) - ux if last is not None and np.array_equal(last[0], x) else None
                _broyden(G, ux, jacobian, g0=g0, max_eval=60, store=jac_store)
        except (_Done, ValueError, FloatingPointError, np.linalg.LinAlgError):
            pass
        jac_out = jac_store[0]
    x = best[1]
    if best[0] >= tol and method != "iterate":  # fallback: damped iteration, adaptive damping
        u, dmp, prev = _to_u(x, Q0), 0.5 * damping, math.inf
        for _ in range(max_iter):
            x = _from_u(u, Q0)
            fx = F(x)[0]
            iterations += 1
            r = _residual(x, fx, Q0)
            if r < best[0]:
                best = (r, x)
            if r < tol:
                break
            if r > prev:
                dmp = max(0.05, 0.7 * dmp)
            prev = r
            u = u + dmp * (_to_u(fx, Q0) - u)
        x = best[1]

    return best[0], best[1], jac_out, iterations


def theory(
    problem: Problem,
    *,
    prior: str | PriorModel = "auto",
    init: SEState | Sequence[float] | Result | None = None,
    tol: float = 1e-6,
    max_iter: int = 150,
    damping: float = 0.5,
    n_points: int = 2048,
    n_scrambles: int = 4,
    seed: int = 0,
    draws: int = 4,
    method: str = "broyden",
    switch: float = 3e-2,
    jacobian: np.ndarray | None = None,
    coarse: bool = True,
    continuation: bool = True,
    quad: OutputQuadrature | None = None,
) -> Result:
    """State-evolution prediction for ``problem`` (arXiv 2509.24914, Sec. 3; THEORY §3).

    Parameters
    ----------
    problem : Problem
        Channels ``seq2lab``/``seq2seq`` (same theory) or ``linear``; students ``factorized``
        (nuclear norm, rank cap ``kappa``) or ``direct`` (Frobenius). ``d`` only matters in the
        finite-``d`` prior mode.
    prior : {"auto", "asymptotic", "finite"} or PriorModel
        Target-side model, see :func:`prior_model`.
    init : SEState, (q, m, Sigma), Result or None
        Starting point (e.g. the previous point of a sweep); default ``(Q0/2, 0.4 Q0, 1)``.
        If a solve from ``init`` (or ``jacobian``) does not converge it is redone from the
        default start and the smaller residual is kept (``extras["warm_start_retried"]``).
    tol : float
        Target residual (relative change of ``(q, m, Sigma)`` under one SE step, see
        ``extras["residual"]``).
    max_iter : int
        Damped-iteration budget of the fallback.
    damping : float
        Fallback iteration ``x <- (1 - damping) x + damping F(x)``.
    n_points, n_scrambles, seed : int
        Output quadrature: ``n_scrambles`` scrambled Sobol sets of ``n_points`` nodes in
        ``2K`` dimensions with the given seed (fixed nodes: a deterministic map).
    draws : int
        GOE draws of the finite-``d`` prior mode.
    method : {"broyden", "hybr", "iterate"}
        ``"broyden"``/``"hybr"``: damped iteration on
        ``u = (log q, atanh(m/sqrt(Q0 q)), log Sigma)`` until the residual is below ``switch``,
        then a root finder on ``G(u) = u(F(x(u))) - u`` — Broyden's method with a
        finite-difference (or given) initial Jacobian, or MINPACK's hybrid method — with damped
        iteration as fallback; ``"iterate"``: damped iteration only (adaptive damping, at most
        ``max_iter`` steps).
    jacobian : (3, 3) array, optional
        Initial Jacobian of ``G`` for Broyden (sweeps pass the previous point's
        ``extras["se_jacobian"]``).
    switch : float
        Residual at which the damped pre-iteration hands over to the root solver.
    coarse : bool
        Without a warm start (``init`` and ``jacobian``), first solve on the node set thinned
        8x (to ``max(tol, 1e-4)``), then polish on the full set from there.
    continuation : bool
        If the solve fails and ``lam < 1e-2``, follow the fixed point from ``lam = 1e-2`` down to
        ``problem.lam`` (4 points per decade) and polish from there (small ``lam`` gives
        ``Sigma ~ 1/lam`` in the interpolation regime, far from any generic initial guess).
    quad : OutputQuadrature, optional
        Reuse a node set (sweeps).

    Returns
    -------
    Result
        ``source="theory"``; metrics as in :mod:`singlehead.results`; ``extras`` with
        ``q, m, Sigma, qhat, mhat, Sigmahat, eta, delta, eps, cutoff, cap_binds,
        first_moment, converged, residual, iterations, quadrature_error`` (dict of standard
        errors), ``prior_mode``, ``wall_time``, ``collapsed`` (complete rank collapse: the
        solution is ``S = 0``, ``q = m = Sigma = 0``, matrix error ``Q0``, rank fraction 0,
        penalty 0, test/train errors of predicting with ``h = 0``), ``collapse_lam`` (the ``lam``
        above which ``S = 0`` is a fixed point, see :func:`collapse_point`; ``inf`` for direct
        students) and ``collapse_fixed_point`` (whether it is one at this ``lam``).
    """
    t0 = time.perf_counter()
    pm = prior if isinstance(prior, PriorModel) else prior_model(problem, prior, draws=draws, seed=seed)
    K = problem.n_pairs
    if quad is None and problem.channel != "linear":
        quad = OutputQuadrature.sobol(2 * K, n_points, n_scrambles, seed)
    col = collapse_point(problem, pm, quad)
    if col.holds and problem.channel == "linear":
        # convex problem (nuclear norm; the rank cap does not bind at S = 0): S = 0 is the minimiser
        r = _collapsed_result(problem, pm, quad, col, t0, 0)
        r.extras["warm_start_retried"] = False
        return r

    def solve(init_: Any, jacobian_: np.ndarray | None) -> Result:
        F = _SEMap(problem, pm, quad)
        # with softmax (non-convex) the non-trivial solve is still tried; if it reaches S = 0
        # (or fails) the collapsed solution is returned
        F.stop_on_collapse = col.holds
        try:
            return _theory_solve(problem, pm, quad, F, col, t0, init=init_, tol=tol, max_iter=max_iter,
                                 damping=damping, method=method, switch=switch, jacobian=jacobian_, coarse=coarse,
                                 continuation=continuation)
        except _DrivenToCollapse:
            return _collapsed_result(problem, pm, quad, col, t0, F.n_calls)

    r = solve(init, jacobian)
    retried = (init is not None or jacobian is not None) and not r.extras["converged"]
    if retried:
        # A warm start (sweeps pass the previous fixed point and Jacobian) can lead the root
        # finder into a region it does not leave near a fast change of the fixed point (observed:
        # power-law target, d = 100, alpha ≈ 0.01, residual 0.67, while the default start
        # converges to 1e-10). Redo from the default start; keep the smaller residual.
        r2 = solve(None, None)
        if r2.extras["converged"] or r2.extras["residual"] < r.extras["residual"]:
            r = r2
    r.extras["warm_start_retried"] = retried
    return r


def _collapsed_result(problem: Problem, pm: PriorModel, quad: OutputQuadrature | None, col: _CollapsePoint,
                      t0: float, iterations: int) -> Result:
    """The SE solution ``S = 0`` (complete rank collapse): ``q = m = Sigma = 0``.

    Test errors are the channel's errors of predicting with ``h = 0`` (uniform softmax rows;
    zero for the linear channel) against noiseless and noisy labels; the train error is the
    noisy-label one (the labels of the training set are noisy and ``S = 0`` fits none of them).
    """
    Q0 = pm.Q0
    te = channel_test_errors(0.0, 0.0, problem=problem, Q0=Q0, quad=quad)
    out, pr = col.out, col.prior
    qerr = dict(out.err)
    qerr.update({"test_error": te["test_error_err"], "test_error_noisy": te["test_error_noisy_err"],
                 "train_error": te["test_error_noisy_err"]})
    extras = {
        "q": 0.0, "m": 0.0, "Sigma": 0.0, "Q0": Q0,
        "qhat": out.qhat, "mhat": out.mhat, "Sigmahat": out.Sigmahat,
        "eta": pr.eta, "delta": pr.delta, "eps": pr.eps, "cutoff": pr.cutoff, "cap_binds": False,
        "first_moment": 0.0, "converged": True, "residual": 0.0,
        "iterations": iterations, "quadrature_error": qerr, "prior_mode": pm.mode, "se_jacobian": None,
        "n_nodes": 0 if quad is None else int(quad.flat.shape[0]), "wall_time": time.perf_counter() - t0,
        "collapsed": True, "collapse_lam": col.lam_c, "collapse_fixed_point": True,
    }
    return Result(
        source="theory", config=problem.to_dict(), test_error=te["test_error"],
        test_error_noisy=te["test_error_noisy"], train_error=te["test_error_noisy"], penalty=0.0,
        matrix_error=Q0, rank_fraction=0.0, extras=extras,
    )


def _theory_solve(problem: Problem, pm: PriorModel, quad: OutputQuadrature | None, F: "_SEMap",
                  col: _CollapsePoint, t0: float, *, init, tol: float, max_iter: int, damping: float, method: str,
                  switch: float, jacobian: np.ndarray | None, coarse: bool, continuation: bool) -> Result:
    """The non-trivial fixed point (body of :func:`theory`)."""
    Q0 = pm.Q0
    if init is None:
        x = _default_init(problem, Q0)
    elif isinstance(init, Result):
        x = np.array([init.extras["q"], init.extras["m"], init.extras["Sigma"]], dtype=float)
    elif isinstance(init, SEState):
        x = init.as_array()
    else:
        x = np.asarray(init, dtype=float)
    if not (x[0] > 0 and x[2] > 0 and x[1] ** 2 < Q0 * x[0]):
        x = _default_init(problem, Q0)

    iterations = 0
    jac_out = jacobian
    if init is None or jacobian is None:
        # coarse stage: the same nodes thinned 8x (a Sobol prefix is itself balanced) bring a
        # poor initial guess close to the fixed point and provide a Jacobian, cheaply. Without
        # ``init`` several structured guesses are ranked by their one-step residual.
        thin = quad is not None and coarse and quad.nodes.shape[1] >= 64
        Fc = _SEMap(problem, pm, OutputQuadrature(quad.nodes[:, : quad.nodes.shape[1] // 8], quad.seed)) if thin else F
        Fc.stop_on_collapse = F.stop_on_collapse
        cands = [x] if init is not None else _initial_guesses(problem, Q0)
        if len(cands) > 1:
            res = []
            for c in cands:
                try:
                    res.append(_residual(c, Fc(c)[0], Q0))
                except (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError):
                    res.append(math.inf)
                iterations += 1
            cands = [cands[i] for i in np.argsort(res)]
        if thin or len(cands) > 1:
            for c in cands:
                rc, xc, jc, itc = _solve(Fc, c, Q0, tol=max(tol, 1e-4), switch=switch, method=method,
                                         jacobian=jacobian, damping=damping, max_iter=min(max_iter, 60))
                iterations += itc
                if rc < 1e-3:
                    x = xc
                    jac_out = jc if jc is not None else jac_out
                    break
    r, x, jac_new, itf = _solve(F, x, Q0, tol=tol, switch=switch, method=method, jacobian=jac_out, damping=damping,
                                max_iter=max_iter)
    iterations += itf
    jac_out = jac_new if jac_new is not None else jac_out
    if r >= tol and continuation and problem.lam < 1e-2:
        # continuation in lam: small lam makes Sigma ~ 1/lam; follow the branch down from
        # lam = 1e-2 (cheap node set), then polish on the full node set
        Fc_quad = quad if quad is None else OutputQuadrature(quad.nodes[:, : max(1, quad.nodes.shape[1] // 8)], quad.seed)
        lams = np.geomspace(1e-2, problem.lam, int(math.ceil(4 * math.log10(1e-2 / problem.lam))) + 1)
        xs, js, ok = _default_init(problem, Q0), None, True
        for lv in lams:
            Fl = _SEMap(problem.replace(lam=float(lv)), pm, Fc_quad)
            rl, xl, jl, itl = _solve(Fl, xs, Q0, tol=max(tol, 1e-4), switch=switch, method=method, jacobian=js,
                                     damping=damping, max_iter=200)
            iterations += itl
            if not rl < 1e-3:
                ok = False
                break
            xs, js = xl, (jl if jl is not None else js)
        if ok:
            r2, x2, j2, it2 = _solve(F, xs, Q0, tol=tol, switch=switch, method=method, jacobian=js, damping=damping,
                                     max_iter=max_iter)
            iterations += it2
            if r2 < r:
                r, x, jac_out = r2, x2, (j2 if j2 is not None else js)

    # final evaluation with cold starts + tracked branches; if that map (which may have found
    # better prox minimisers for a few nodes) disagrees, re-solve with it
    fx, out, pr = F(x, mode="union")
    residual = _residual(x, fx, Q0)
    if residual >= tol and problem.channel != "linear" and math.isfinite(residual):
        F.mode = "union"
        r3, x3, j3, it3 = _solve(F, x, Q0, tol=tol, switch=switch, method=method, jacobian=jac_out, damping=damping,
                                 max_iter=min(max_iter, 40))
        iterations += it3
        fx3, out3, pr3 = F(x3)
        r3 = _residual(x3, fx3, Q0)
        if r3 < residual:
            x, fx, out, pr, residual = x3, fx3, out3, pr3, r3
            jac_out = j3 if j3 is not None else jac_out
    converged = bool(residual < 10 * tol and out.prox_converged)
    if col.holds and not (converged and x[0] > _Q_FLOOR * Q0):
        raise _DrivenToCollapse  # S = 0 is a fixed point and no non-trivial one was found
    q, m, Sigma = map(float, x)
    te = channel_test_errors(q, m, problem=problem, Q0=Q0, quad=quad)
    pen = problem.lam * (q if problem.student == "direct" else pr.first_moment)
    qerr = dict(out.err)
    qerr.update({"test_error": te["test_error_err"], "test_error_noisy": te["test_error_noisy_err"]})
    extras = {
        "q": q, "m": m, "Sigma": Sigma, "Q0": Q0,
        "qhat": out.qhat, "mhat": out.mhat, "Sigmahat": out.Sigmahat,
        "eta": pr.eta, "delta": pr.delta, "eps": pr.eps, "cutoff": pr.cutoff, "cap_binds": pr.cap_binds,
        "first_moment": pr.first_moment,
        "converged": converged, "residual": residual,
        "iterations": iterations, "quadrature_error": qerr, "prior_mode": pm.mode,
        "se_jacobian": None if jac_out is None else np.asarray(jac_out).tolist(),
        "n_nodes": 0 if quad is None else int(quad.flat.shape[0]), "wall_time": time.perf_counter() - t0,
        "collapsed": False, "collapse_lam": col.lam_c, "collapse_fixed_point": col.holds,
    }
    return Result(
        source="theory", config=problem.to_dict(), test_error=te["test_error"],
        test_error_noisy=te["test_error_noisy"], train_error=out.train_error, penalty=pen,
        matrix_error=Q0 - 2 * m + q, rank_fraction=pr.rank_fraction, extras=extras,
    )


def theory_curve(
    problem: Problem,
    values: Iterable[float],
    *,
    param: str = "alpha",
    progress: bool = False,
    **kwargs: Any,
) -> list[Result]:
    """SE along a grid of ``param`` (``"alpha"`` or ``"lam"``, or any Problem field), warm-started.

    Each point starts from a secant extrapolation of the previous two fixed points (in the
    unconstrained coordinates; the previous point at the start) with the previous root-solver
    Jacobian, and all points share one quadrature node set and one prior model. Keyword
    arguments go to :func:`theory`.
    """
    values = list(values)
    K = problem.n_pairs
    if "quad" not in kwargs and problem.channel != "linear":
        kwargs["quad"] = OutputQuadrature.sobol(2 * K, kwargs.pop("n_points", 2048), kwargs.pop("n_scrambles", 4),
                                                kwargs.get("seed", 0))
    prior = kwargs.pop("prior", "auto")
    if not isinstance(prior, PriorModel) and param not in ("d", "target"):
        prior = prior_model(problem, prior, draws=kwargs.get("draws", 4), seed=kwargs.get("seed", 0))
    out: list[Result] = []
    init = kwargs.pop("init", None)
    jac = kwargs.pop("jacobian", None)
    hist: list[tuple[float, np.ndarray]] = []  # converged points (value, u) for the secant predictor
    it = values
    if progress:
        from tqdm import tqdm

        it = tqdm(values, desc=f"theory over {param}")
    Q0 = prior.Q0 if isinstance(prior, PriorModel) else None
    for v in it:
        p = problem.replace(**{param: v})
        if len(hist) >= 2 and Q0 is not None and isinstance(v, (int, float)):
            (v0, u0), (v1, u1) = hist[-2], hist[-1]
            if v1 != v0:
                w = np.clip((float(v) - v1) / (v1 - v0), -2.0, 2.0)
                init = _from_u(u1 + w * (u1 - u0), Q0)
        r = theory(p, prior=prior, init=init, jacobian=jac, **kwargs)
        out.append(r)
        if r.extras["converged"] and not r.extras.get("collapsed", False):
            x = np.array([r.extras["q"], r.extras["m"], r.extras["Sigma"]])
            init = x
            if Q0 is not None and isinstance(v, (int, float)):
                hist.append((float(v), _to_u(x, Q0)))
            if r.extras.get("se_jacobian") is not None:
                jac = np.array(r.extras["se_jacobian"])
        else:
            hist.clear()
    return out

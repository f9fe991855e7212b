"""Sample-complexity thresholds of the attention-indexed model (docs: Theory, :ref:`theory-thresholds`,
:ref:`theory-bayes`).

All thresholds are in ``alpha = n/d^2`` and use the **number of informative logit directions
per sequence**

* ``c_T = (T^2 + T - 2)/2 = K - 1`` for the softmax channels: the labels fix the ``K = T(T+1)/2``
  logits only up to one global shift (the only symmetric shift that leaves every row-wise
  softmax unchanged);
* ``c_T = K`` for the linear channel (``c_1 = 1``: the quadratic network).

Formulas (``lambda -> 0+``; arXiv 2509.24914 Cor. 3.2 and docs: Theory, :ref:`theory-thresholds`):

* **interpolation** (largest ``alpha`` with zero training error), factorized student:
  ``alpha_interp = dJ/ddelta(dbar, 0) / (4 c_T dbar)`` with ``dbar`` solving
  ``Q0 + Delta/2 = J(dbar, 0) - (dbar/2) dJ/ddelta(dbar, 0)``. It follows from the SE in the
  limit ``Sigma -> inf``, ``eps = lam Sigma/(alpha c_T)`` fixed, evaluated at ``eps = 0``.
  Noiseless labels are interpolated at every ``alpha`` (``inf`` is returned); the limit
  ``Delta -> 0+`` is ``lim_{delta -> 0} D(delta)/(2 c_T)`` (``D`` the free divergence of the
  ReLU), ``(kappa0^2 + 2 kappa0 (1-kappa0) + (1-kappa0)^2/2)/(2 c_T)`` for an MP target (0.21875
  at ``kappa0 = 0.5, T = 2``, just above ``alpha_perf``). Direct student: ``1/(2 c_T)``
  (``n c_T`` equations for ``d^2/2`` unknowns).
* **perfect recovery** (noiseless, smallest ``alpha`` with zero test error), factorized
  student, MP target: ``c_T alpha_perf = kappa0 - kappa0^2/2 + (1-kappa0)^2 G(u)/2
  + kappa0 (1-kappa0) u^2/2`` with ``G(u) = int_u^2 (x-u)^2 SC(dx)`` and ``u`` solving
  ``(1-kappa0) int_u^2 (x-u) SC(dx) = kappa0 u`` (docs: Theory, :ref:`theory-thresholds`; ``kappa0 = 0.5, T = 2`` gives
  0.211). Direct student: ``1/(2 c_T)``.
* **Bayes-optimal perfect recovery** (arXiv 2506.01582): ``(kappa0 - kappa0^2/2)/c_T``.

For ``kappa0 >= 1`` the MP target is full rank: both perfect-recovery thresholds are the parameter
count ``1/(2 c_T)`` (the formulas above at ``kappa0 = 1``).

The thresholds do not depend on ``beta``, ``beta0`` or ``lam`` (rescaling the target by
``beta0/beta`` leaves them invariant).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from scipy import integrate, optimize

from singlehead.model.problem import Problem
from singlehead.numerics.nuclear_recovery import blocked_nuclear_threshold, nuclear_statistical_dimension
from singlehead.numerics.spectra.finite_d import DEFAULT_DRAWS
from singlehead.state_evolution import prior_model

__all__ = [
    "informative_directions",
    "interpolation_threshold",
    "untied_interpolation_threshold",
    "untied_perfect_recovery_threshold",
    "nuclear_statistical_dimension",
    "perfect_recovery_threshold",
    "bayes_perfect_recovery_threshold",
    "semicircle_tail_moments",
]


def informative_directions(problem: Problem) -> int:
    """``c_T`` of the channel: ``K - 1 = (T^2 + T - 2)/2`` for softmax channels, ``K = T(T+1)/2`` for linear;
    ``>= 1`` for every problem (``Problem`` refuses ``T`` below the channel's ``min_T``)."""
    return problem.channel.informative_directions(problem.T)


def semicircle_tail_moments(u: float) -> tuple[float, float, float]:
    """``(int_u^2 SC, int_u^2 (x-u) SC, int_u^2 (x-u)^2 SC)`` for the semicircle on ``[-2, 2]``.

    Closed forms with ``u = 2 cos(theta)`` (``SC(dx) = sqrt(4 - x^2)/(2 pi) dx``).
    """
    u = float(np.clip(u, -2.0, 2.0))

    def mom(k: int) -> float:
        return integrate.quad(
            lambda x: (x - u) ** k * math.sqrt(max(4 - x * x, 0.0)) / (2 * math.pi), u, 2.0, epsabs=1e-14, epsrel=1e-13
        )[0]

    return mom(0), mom(1), mom(2)


def _mp_kappa0(problem: Problem) -> float:
    """The target's rank ratio (:attr:`~singlehead.model.targets.Target.rank_ratio`) for the tied closed forms."""
    k0 = problem.target.rank_ratio
    if k0 is None or not problem.target.symmetric:
        raise NotImplementedError(
            "closed-form perfect-recovery thresholds exist only for symmetric targets with a rank ratio (MP targets)"
        )
    return float(k0)


def perfect_recovery_threshold(problem: Problem) -> float:
    """Smallest ``alpha`` with zero test error of the noiseless ERM at ``lam -> 0+`` (docs: Theory,
    :ref:`theory-thresholds`).

    Factorized student, MP target ``kappa0``: the nuclear-norm formula of the module
    docstring. With a rank cap ``kappa < 1`` the returned value is the uncapped one, which is an
    **upper bound** (``S0`` is then feasible and minimises the relaxed problem; a warning is
    issued), and ``inf`` when ``kappa < kappa0`` (the student cannot represent ``S0``).
    Direct student: ``1/(2 c_T)``. A channel whose labels do not reveal the logits
    (``Channel.labels_reveal_logits`` false: hardmax's one-hot argmax labels are invariant under
    ``S0 -> c S0`` and are never fitted exactly by a softmax student) has no perfect recovery: ``inf``.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, perfect_recovery_threshold
    >>> round(perfect_recovery_threshold(Problem(T=2, target=MPTarget(kappa0=0.5))), 4)
    0.2111
    """
    problem.check_single_head("the thresholds")
    if not problem.channel.labels_reveal_logits:
        return math.inf
    if not problem.student.symmetric:
        return untied_perfect_recovery_threshold(problem)
    c = informative_directions(problem)
    fixed = problem.student.fixed_threshold(c)
    if fixed is not None:
        return fixed
    k0 = min(_mp_kappa0(problem), 1.0)  # the rank ratio of S0: full rank from kappa0 = 1 on
    if problem.kappa < k0:
        return math.inf
    if problem.kappa < 1:
        warnings.warn(
            "perfect_recovery_threshold: with a rank cap kappa < 1 the nuclear-norm value is an upper bound",
            stacklevel=2,
        )
    if k0 >= 1:
        # full rank: on positive definite matrices the nuclear norm is the (linear) trace, its descent cone a
        # half-space: every one of the d^2/2 parameters must be measured
        return 0.5 / c

    def eq(u: float) -> float:
        return (1 - k0) * semicircle_tail_moments(u)[1] - k0 * u

    u = optimize.brentq(eq, 0.0, 2.0, xtol=1e-14)
    G = semicircle_tail_moments(u)[2]
    return (k0 - k0 * k0 / 2 + (1 - k0) ** 2 * G / 2 + k0 * (1 - k0) * u * u / 2) / c


def bayes_perfect_recovery_threshold(problem: Problem) -> float:
    """Bayes-optimal perfect recovery ``(rho - rho^2/2)/c_T``, ``rho = min(kappa0, 1)`` the rank ratio of ``S0``
    (MP target, noiseless; a full-rank target, ``kappa0 >= 1``, needs all ``d^2/2`` parameters: ``1/(2 c_T)``).

    ``c_T = (T^2 + T - 2)/2`` (softmax channels; 1 for the linear channel with ``T = 1``). ERM's
    :func:`perfect_recovery_threshold` is never below it. ``inf`` for a channel whose labels do not
    reveal the logits (hardmax): the information its labels carry per sample stays bounded relative
    to the remaining error (the posterior variance falls like ``alpha^-2``, never to zero).

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, bayes_perfect_recovery_threshold
    >>> bayes_perfect_recovery_threshold(Problem(T=2, target=MPTarget(kappa0=0.5)))   # (0.5 - 0.125)/2
    0.1875
    """
    problem.check_single_head("the thresholds")
    if not problem.channel.labels_reveal_logits:
        return math.inf
    k0 = min(_mp_kappa0(problem), 1.0)
    return (k0 - k0 * k0 / 2) / informative_directions(problem)


def untied_interpolation_threshold(problem: Problem) -> float:
    """Interpolation threshold of the untied student at ``lam -> 0+``: a dimension count.

    The labels of a sequence fix ``e`` linear combinations of the student's logits
    (:meth:`~singlehead.model.channels.Channel.block_label_equations`: ``T(T-1)`` row differences for
    the softmax channels; for the linear channel only the ``K = T(T+1)/2`` symmetric ones are
    non-trivial, since the symmetric label noise leaves the antisymmetric equations homogeneous).
    The logits are linear in ``M``, with no sign constraint (unlike the tied student's PSD ``S``),
    so generic (noisy) labels are interpolated exactly while ``n e`` does not exceed the dimension
    of the reachable matrices: rank ``<= kappa d`` matrices (``d^2 kappa (2 - kappa)``) when the
    equations reach ``M_a``, symmetric ones (``d^2 kappa (1 - kappa/2)``) otherwise. Hence
    ``alpha_interp = kappa (2 - kappa)/e`` (e.g. ``1/2`` at ``T = 2``, seq2lab, ``kappa = 1``) or
    ``kappa (1 - kappa/2)/e``. Noiseless labels are interpolated at every ``alpha`` (``inf``).
    The test error of the minimum-norm interpolator peaks there (``docs/untied_theory.rst``).

    Examples
    --------
    >>> from singlehead import Problem, untied_interpolation_threshold
    >>> untied_interpolation_threshold(Problem(T=2, noise=0.5, student="untied"))   # 1/(T(T-1))
    0.5
    >>> round(untied_interpolation_threshold(Problem(T=2, noise=0.5, student="untied", kappa=0.5)), 4)
    0.375
    """
    problem.check_single_head("the thresholds")
    if problem.noise == 0:
        return math.inf
    e, antisymmetric = problem.channel.block_label_equations(problem.T, problem.student.field_blocks())
    k = problem.kappa
    return (k * (2 - k) if antisymmetric else k * (1 - k / 2)) / e


def _untied_measurement_families(problem: Problem) -> tuple[int, int, int]:
    """Label equations per sequence that count for noiseless recovery of a symmetric teacher: those that see
    ``M_s`` only, ``M_a`` only, and all of ``M`` isotropically.

    The equations of one sequence are ``<X^T C X, M>`` for ``C`` in a space ``Cspace`` of ``T x T``
    matrices; for Gaussian tokens their covariance is ``2 ||M_s||^2 <C_s, C'_s> + 2 ||M_a||^2 <C_a, C'_a>``.
    Softmax rows fix ``h`` up to a shift per row: ``Cspace = {C : C 1 = 0}``, which splits orthogonally
    into its symmetric matrices (``T(T-1)/2``), its antisymmetric ones (``(T-1)(T-2)/2``) and
    ``{1 w^T : w orthogonal to 1}`` (``T - 1``), whose symmetric and antisymmetric parts have equal norms:
    isotropic equations. The linear channel reveals ``h`` itself: ``K`` symmetric equations and
    ``T(T-1)/2`` antisymmetric ones, which are homogeneous for a symmetric teacher; then the symmetric
    part of any feasible ``M`` is feasible with no larger nuclear norm, and ``||S0 + M_a||_* > Tr S0``
    for ``M_a != 0``, so recovery is that of the symmetric problem: ``(K, 0, 0)``.
    """
    T = problem.T
    _, antisymmetric = problem.channel.block_label_equations(T, problem.student.field_blocks())
    if antisymmetric:  # row-normalised outputs (the softmax channels)
        return T * (T - 1) // 2, (T - 1) * (T - 2) // 2, T - 1
    return T * (T + 1) // 2, 0, 0


@functools.lru_cache(maxsize=64)
def _blocked_threshold(rho: float, families: tuple[int, int, int]) -> float:
    return blocked_nuclear_threshold(rho, *map(float, families))


def untied_perfect_recovery_threshold(problem: Problem) -> float:
    """Perfect-recovery threshold of the untied student (noiseless, ``lam -> 0+``), MP teachers.

    Noiseless, ``lam -> 0+``, the untied ERM is ``min ||M||_*`` subject to the label equations, which
    are linear in ``M`` and, for Gaussian tokens, Gaussian measurements in three families per sequence
    (``_untied_measurement_families``): for the softmax channels ``T(T-1)/2`` that see only the
    symmetric part ``M_s`` (GOE), ``(T-1)(T-2)/2`` that see only the antisymmetric part and ``T - 1``
    isotropic ones (at ``T = 2``: ``h_11 - h_12 + h_22 - h_21 = <u u^T - 2 I, M>/sqrt(d)`` and
    ``h_11 - h_12 - h_22 + h_21 = <v u^T, M>/sqrt(d)``, ``u = x_1 - x_2``, ``v = x_1 + x_2``); for the
    linear channel only its ``K`` symmetric ones count (its antisymmetric equations are homogeneous and
    the minimiser is symmetric). The threshold is the phase
    transition of minimum-nuclear-norm recovery of the symmetric PSD rank-``kappa0 d`` teacher from
    these families, :func:`singlehead.numerics.nuclear_recovery.blocked_nuclear_threshold` (Gordon's
    min-max with one Gaussian per family; its complement block evaluated on finite instances, with the
    accuracy contract stated there). With isotropic measurements only it would be
    ``nuclear_statistical_dimension(kappa0)/e`` (``e`` equations per sequence); the symmetric-only
    equations, which waste nothing on the antisymmetric part that a symmetric teacher does not have,
    bring it below that (0.423 against 0.4527 at ``T = 2``, seq2lab, ``kappa0 = 0.5``). Full-rank
    teachers (``kappa0 >= 1``): the parameter count of the families. For an untied (non-symmetric)
    teacher, whose descent cone is not the one computed here, the isotropic value
    ``nuclear_statistical_dimension(kappa0)/e`` is returned as an anchor. ``inf`` when the student's rank
    cap is below ``kappa0`` or the labels do not reveal the logits (hardmax). The first call for a
    given ``(kappa0, T, channel)`` evaluates it (that function states its cost); the value is cached.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, untied_perfect_recovery_threshold
    >>> round(untied_perfect_recovery_threshold(Problem(T=2, student="untied", target=MPTarget(2.0))), 4)
    0.5
    """
    problem.check_single_head("the thresholds")
    e, _ = problem.channel.block_label_equations(problem.T, problem.student.field_blocks())
    if not problem.channel.labels_reveal_logits:
        return math.inf
    k0 = problem.target.rank_ratio  # MPTarget and UntiedMPTarget: rank ratio kappa0
    if k0 is None:
        raise NotImplementedError("the untied perfect-recovery threshold needs an MP teacher (rank ratio kappa0)")
    rho = min(float(k0), 1.0)
    if problem.kappa < rho:
        return math.inf
    if not problem.target.symmetric:  # untied teacher: the isotropic anchor (not derived)
        return nuclear_statistical_dimension(rho) / e
    return _blocked_threshold(rho, _untied_measurement_families(problem))


def interpolation_threshold(
    problem: Problem, *, prior: str = "auto", draws: int = DEFAULT_DRAWS, seed: int = 0
) -> float:
    """Interpolation threshold ``alpha_interp`` at ``lam -> 0+`` (docs: Theory, :ref:`theory-thresholds`, arXiv
    2509.24914 Cor. 3.2).

    Factorized student: ``dJ/ddelta(dbar,0)/(4 c_T dbar)`` with ``dbar`` solving
    ``Q0 + Delta/2 = J(dbar,0) - (dbar/2) dJ/ddelta(dbar,0)`` (``J`` with the rank cap ``kappa``
    when ``kappa < 1``); ``inf`` for ``Delta = 0``. Direct student: ``1/(2 c_T)``.
    ``prior`` / ``draws`` / ``seed`` select the target model as in
    :func:`singlehead.state_evolution.prior_model`.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, interpolation_threshold
    >>> round(interpolation_threshold(Problem(T=2, noise=0.5, target=MPTarget(kappa0=0.5))), 3)
    0.153
    """
    problem.check_single_head("the thresholds")
    if not problem.student.symmetric:
        return untied_interpolation_threshold(problem)
    c = informative_directions(problem)
    fixed = problem.student.fixed_threshold(c)
    if fixed is not None:
        return fixed
    pm = prior_model(problem, prior, draws=draws, seed=seed)
    cap = problem.student.rank_cap(problem.kappa)
    target = pm.Q0 + problem.noise / 2

    def parts(dl: float) -> tuple[float, float]:
        ti = pm.threshold_integrals(dl, 0.0, rank_cap=cap)
        # J - (dl/2) dJ/ddelta is the overlap (Stein); the finite-d mode reports it pathwise
        overlap = ti.overlap if ti.overlap is not None else float(ti.J) - 0.5 * dl * float(ti.dJ_ddelta)
        return float(overlap), float(ti.dJ_ddelta)

    if problem.noise == 0:
        return math.inf  # noiseless labels are always interpolated (by S0 itself)
    # bracket the root of R(dbar) = J - dbar J'/2 - (Q0 + Delta/2), R(0+) = -Delta/2 < 0
    lo, hi = 1e-6 * math.sqrt(pm.Q0), math.sqrt(pm.Q0)
    while parts(hi)[0] < target:
        lo, hi = hi, 2 * hi
        if hi > 1e6:
            raise RuntimeError("interpolation_threshold: could not bracket dbar")
    dbar = optimize.brentq(lambda x: parts(x)[0] - target, lo, hi, xtol=1e-12, rtol=1e-12)
    return parts(dbar)[1] / (4 * c * dbar)

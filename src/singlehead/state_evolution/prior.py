"""Prior (matrix) side of the state evolution: ``(qhat, mhat, Sigmahat) -> (q, m, Sigma)``.

Effective denoising of ``Y = S0 + delta Z`` (``Z`` GOE) with ``delta = sqrt(qhat)/mhat``, threshold
``eps = 2 lam/mhat`` and scale ``eta = mhat/Sigmahat`` for the factorized student (nuclear norm,
rank cap), linear shrinkage for the direct one; the equations are in the docstring of
:mod:`singlehead.state_evolution` (arXiv 2509.24914, Sec. 3; arXiv 2505.17958; docs: Theory, :ref:`theory-prior-side`).
The
target enters through a :class:`PriorModel` (``Q0`` and the soft-threshold integrals of
``mu_{S0} ⊞ SC(delta^2)``), which ``problem.target.spectral_law`` builds. :func:`collapse_point`
decides whether ``S = 0`` (complete rank collapse) is a fixed point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from singlehead.model.problem import Problem
from singlehead.model.students import PriorSide
from singlehead.numerics.spectra.finite_d import DEFAULT_DRAWS
from singlehead.numerics.spectra.prior_model import PriorModel
from singlehead.state_evolution.options import SEOptions
from singlehead.state_evolution.output import OutputSide, output_side
from singlehead.state_evolution.quadrature import OutputQuadrature

__all__ = ["PriorModel", "prior_model", "PriorSide", "prior_side", "collapse_point", "CollapsePoint"]


PRIOR_MODES = ("auto", "asymptotic", "finite")


def prior_model(problem: Problem, prior: str = "auto", *, draws: int = DEFAULT_DRAWS, seed: int = 0) -> PriorModel:
    """The target's :class:`PriorModel` for the state evolution (``problem.target.spectral_law``).

    Parameters
    ----------
    prior : {"auto", "asymptotic", "finite"}
        ``"auto"`` (= ``"asymptotic"``): MP targets use ``MarchenkoPastur(kappa0)``
        (``Q0 = 1 + kappa0``); power-law and custom targets the discrete law of their ``d``
        eigenvalues (the deterministic equivalent at this ``d``). ``"finite"``: exact spectra of
        ``diag(s) + delta Z`` for ``draws`` fixed GOE draws (MP targets: the eigenvalues of one
        target drawn with ``seed``).

        The asymptotic law is the default for power-law targets too: on the quadratic-network
        setting (linear ``T = 1``) the finite prior and the asymptotic prior agree within the
        finite prior's draw spread at every width and are equally close to simulations
        (``benchmarks/bench_finite_prior.py`` compares them, ``extras["prior_draw_spread"]``
        reports the spread); the asymptotic law has no draw noise (with a few draws the finite
        prior's standard error is as large as the difference between the two, and grows at small
        ``d``), no jump in ``d``-sweeps, and a milder growth of the cost with ``d`` (the finite
        prior costs ``O(draws d^3)`` per SE step). The finite prior is the cross-check, and the
        faster of the two at moderate ``d`` or with a small rank cap.
    draws, seed : int
        GOE draws (default 3) and their seed, finite-``d`` mode only.

    Examples
    --------
    >>> from singlehead import MPTarget, PowerLawTarget, Problem
    >>> from singlehead.state_evolution import prior_model
    >>> prior = prior_model(Problem(target=MPTarget(kappa0=0.5)))
    >>> prior.mode, round(prior.Q0, 6)                  # Q0 = 1 + kappa0 in the large-d limit
    ('asymptotic', 1.5)
    >>> prior_model(Problem(d=200, target=PowerLawTarget(1.25)), "finite").mode
    'finite'
    """
    if prior not in PRIOR_MODES:
        raise ValueError(f"prior must be one of auto, asymptotic, finite (got {prior!r})")
    if prior == "auto":
        prior = "asymptotic"
    return problem.target.spectral_law(problem.d, prior, draws=draws, seed=seed)


def prior_side(qhat: float, mhat: float, Sigmahat: float, *, problem: Problem, prior: PriorModel) -> PriorSide:
    """Prior-side update ``(qhat, mhat, Sigmahat) -> (q, m, Sigma)`` (see module docstring).

    ``first_moment`` is ``Tr Shat/d`` (``eta int f dmu_delta``; ``eta' Tr S0/d`` for direct
    students is not needed and reported as nan); ``rank_fraction`` the fraction of non-zero
    eigenvalues of ``Shat``. In the finite-``d`` mode the overlap is the draw mean of the
    pathwise ``(1/d) Tr f(Y_r) S0`` (``ti.overlap``) instead of Stein's
    ``J - (delta/2) dJ/ddelta - (eps/2) dJ/deps`` (the two agree in expectation; the pathwise one
    cancels the spikes' first-order fluctuation in ``Q0 - 2m + q``, see
    :class:`~singlehead.numerics.spectra.FiniteDSpectrum`), and ``q_draws``/``m_draws``/``Sigma_draws`` hold each
    draw's ``q, m, Sigma`` (same conjugates, for ``draw_spread.prior_draw_spread``).

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.state_evolution import prior_model, prior_side
    >>> problem = Problem(T=2, lam=0.1)
    >>> side = prior_side(4.0, 2.0, 1.0, problem=problem, prior=prior_model(problem))
    >>> (side.delta, side.eps, side.eta), 0.0 < side.rank_fraction < 1.0
    ((1.0, 0.1, 2.0), True)
    """
    return problem.student.prior_side(qhat, mhat, Sigmahat, lam=problem.lam, kappa=problem.kappa, prior=prior)


@dataclass
class CollapsePoint:
    """The SE at ``S = 0`` (``q = m = Sigma = 0``): conjugates, prior side, collapse threshold."""

    out: OutputSide
    prior: PriorSide
    holds: bool  # S = 0 is a fixed point: eps0 = 2 lam/mhat0 at or above the top of mu_delta0
    lam_c: float  # the collapse point mhat0 * top(mu_delta0)/2 (inf for direct students)
    alpha: float = math.nan  # the problem's alpha (the conjugates are proportional to it)


def collapse_point(
    problem: Problem, prior: PriorModel, quad: OutputQuadrature | None = None, like: CollapsePoint | None = None
) -> CollapsePoint:
    """Complete rank collapse test: is ``S = 0`` a fixed point of the SE?

    At ``q = m = 0`` the student logits vanish and the prox parameter ``Sigma`` of the collapsed
    point is 0, so the conjugates are the ``Sigma -> 0`` limits (see
    ``_output_side_degenerate``): ``qhat0 = 2 alpha E||grad ell(0)||^2``,
    ``mhat0 = -2 alpha E<grad ell(0), y>/(Q0 + Delta/2)``, ``Sigmahat0 = 2 alpha E tr Hess ell(0)``
    (linear channel: ``qhat0 = 32 alpha K (Q0 + Delta/2)``, ``mhat0 = Sigmahat0 = 8 alpha K``), with
    ``delta0 = sqrt(qhat0)/mhat0``. They do not depend on ``lam``. The prior side maps them back
    to ``q = m = Sigma = 0`` iff the threshold ``eps0 = 2 lam/mhat0`` is at or above the top edge of
    ``mu_delta0`` (no eigenvalue survives), i.e. iff ``lam >= lam_c = mhat0 top(mu_delta0)/2``.
    The direct (Frobenius) student shrinks linearly and never collapses (``lam_c = inf``).
    ``like``: the collapse point of a problem that differs from ``problem`` only in ``alpha`` and ``lam``
    (a sweep's previous point, same ``prior`` and ``quad``); the conjugates, proportional to ``alpha``
    and free of ``lam``, are rescaled from it instead of integrated again.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.state_evolution import collapse_point, prior_model
    >>> problem = Problem(T=1, channel="linear", alpha=1.0, lam=0.01)
    >>> point = collapse_point(problem, prior_model(problem))
    >>> point.holds, point.lam_c > 0.01                 # lam below the collapse point: S = 0 is no fixed point
    (False, True)
    >>> collapse_point(problem.replace(lam=2 * point.lam_c), prior_model(problem)).holds
    True
    """
    if like is not None and like.alpha > 0:
        out = _rescaled(like.out, problem.alpha / like.alpha)
    else:
        if quad is None:
            quad = SEOptions().quadrature(problem)
        out = output_side(0.0, 0.0, 0.0, problem=problem, Q0=prior.Q0, quad=quad)
    pr = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=problem, prior=prior)
    st = problem.student
    lam_c = st.collapse_lam(out.mhat, prior.top_edge(pr.delta)) if st.thresholded else math.inf
    return CollapsePoint(out, pr, bool(st.thresholded and not pr.q > 0), float(lam_c), float(problem.alpha))


def _rescaled(out: OutputSide, factor: float) -> OutputSide:
    """The output side with its conjugates (and their errors) multiplied by ``factor`` (train error kept)."""
    err = {k: (v * factor if k != "train_error" else v) for k, v in out.err.items()}
    return replace(
        out,
        qhat=out.qhat * factor,
        mhat=out.mhat * factor,
        Sigmahat=out.Sigmahat * factor,
        err=err,
        scramble_hats=None if out.scramble_hats is None else out.scramble_hats * factor,
    )

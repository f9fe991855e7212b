"""Replica-symmetric stability of an ERM state-evolution fixed point (replicon / AT test).

The state evolution (SE) of :mod:`.driver` is the replica-symmetric (RS) description of the
ERM minimiser. For the linear channel with a nuclear-norm or Frobenius penalty the problem is
convex and RS is exact. The softmax square loss is not convex, and the RS description can
fail. This module measures two things at a fixed point:

**The smooth replicon** (de Almeida & Thouless, J. Phys. A 11, 983 (1978); in the GLM/ERM form
of Gerace et al., ICML 2020, and Aubin et al., NeurIPS 2020, App. C). A small perturbation of the
fixed point that is uncorrelated with the signal grows by the factor ``AT`` per AMP/SE
iteration:

    AT = [2 alpha E ||H (I + Sigma H)^{-1}||_F^2] * [(1/Sigmahat^2) P],
    P  = int int ((f(x) - f(y))/(x - y))^2 mu_delta(dx) mu_delta(dy),  f(x) = (x - eps)_+ .

* Output factor: ``h*`` is the prox point of the output side (:mod:`.output`), ``H`` the Hessian
  of the fit loss ``||Y - chan(M(h))||_F^2`` at ``h*`` in the ``K``-vector coordinates, so
  ``-H (I + Sigma H)^{-1}`` is the Jacobian of ``f_out = (h* - z)/Sigma`` with respect to ``z``.
  Its trace gives ``Sigmahat`` (``Sigmahat = 2 alpha E tr H (I + Sigma H)^{-1}`` where the prox is
  smooth); the replicon uses the squared Frobenius norm instead.
* Prior factor: the spectral estimator ``Shat = eta f(Y)`` has Jacobian ``(1/Sigmahat) Df``
  with respect to the effective field ``B = mhat Y``; by the Daleckii-Krein formula ``Df`` is
  diagonal in the eigenbasis of ``Y`` with eigenvalues ``f'(nu_i)`` and the divided differences
  ``(f(nu_i) - f(nu_j))/(nu_i - nu_j)``. The SE's ``Sigma = (1/Sigmahat) int int (f(x) -
  f(y))/(x - y)`` is their mean; the replicon uses the mean of their squares, ``P``. The
  direct (Frobenius) student has ``f(x) = x mhat/(Sigmahat + 4 lam)`` and the factor is
  ``Sigma^2``.

The normalisation is that of the SE (``Sigmahat`` and ``Sigma`` are the means of the first
powers): for the ridge problem (direct student, linear channel) ``AT = (Sigma Sigmahat)^2/(2
alpha K)``, which tends to 1 at ``2 alpha K = 1`` (as many observations as unknowns) as
``lam -> 0`` and is below 1 elsewhere, as it must be for a convex problem (a test). ``AT > 1``
means the RS fixed point is unstable. With a binding rank cap ``f`` jumps at the cut-off and
``P`` diverges (reported as ``inf``).

A student with a symmetric and an antisymmetric block of fields (untied) has one perturbation
variance per block: its replicon is the spectral radius of a 2 x 2 product of the same two factors
(:mod:`.block_stability`), which :func:`stability` returns for it.

**Prox jumps.** For large ``Sigma`` the prox of the softmax loss has several local minima and
the global one jumps between them as ``z`` moves (``singlehead.numerics.prox``). The SE's
``Sigmahat`` comes from Stein's lemma and counts the jumps; the pointwise trace above does
not. ``prox_jump_share = 1 - Sigmahat / Sigmahat_pointwise`` is the share of the jumps (the prox is
the gradient of a convex function, so the jumps point along ``z`` and the share is >= 0). A
jump puts a delta function into the Jacobian, whose square is not integrable: where the jump
weight is non-zero the formal replicon is infinite and the RS description is at best an
approximation whose quality is not known. The smooth replicon is a lower bound.

Measured on the interpolation-peak problems of the report (``T = 2``, seq2lab, MP(0.5) target,
``Delta = 0.5``, ``kappa = 1``): the smooth replicon stays below 1 (at most 0.99, at
``lam = 1e-5``, ``alpha = 0.29``); the jump weight is at most 0.5 % for ``alpha >= 0.5`` and
``alpha <= 0.13``, 2.3 % at ``lam = 1e-3, alpha = 0.3`` (SE and simulations agree to 4 %), 4.7 % at
``lam = 1e-5, alpha = 0.2`` (agreement once the simulations are extrapolated to d = inf) and 5.6 % at
``lam = 1e-5, alpha = 0.3``, where the SE's test error, 0.262, is above the ERM value extrapolated
to d = inf, 0.2347 [0.2314, 0.2379] (d = 60-300, 16 seeds per d, 1/d fit), and the SE on the
teacher's local prox branch (``SEOptions(prox_branch="teacher")``) gives 0.2399
(``studies/peak_investigation``, ``studies/peak_investigation/results/peak.md``). The SE points that need
hundreds of map evaluations are those with a jump weight of several percent or a binding rank
cap (``benchmarks/bench_se_random_grid.py`` prints the check for each).
"""

from __future__ import annotations

import math

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.numerics.spectra.convolution import free_convolve_semicircle
from singlehead.state_evolution.options import SEOptions
from singlehead.state_evolution.output import output_side
from singlehead.state_evolution.prior import prior_model
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.stability_record import Stability

__all__ = ["Stability", "tied_stability"]


def _prior_factor(problem: Problem, ex: dict) -> tuple[float, float]:
    """``(P/Sigmahat^2, Sigma)`` of the spectral (or linear) estimator at the fixed point ``ex``."""
    Sh = float(ex["Sigmahat"])
    linear = problem.student.linear_prior_factor(problem.lam, Sh)
    if linear is not None:
        return linear
    if ex.get("cap_binds"):
        return math.inf, float(ex["Sigma"])
    eps = float(ex["eps"])
    # a discrete target law too large for its free convolution raises ValueError there (the diagnosis records it)
    law = free_convolve_semicircle(prior_model(problem, "asymptotic").engine, float(ex["delta"]) ** 2)
    hi, lo = law.rule(eps, math.inf), law.rule(-math.inf, eps)
    above = float(hi.w.sum())
    # f = 0 below eps, f(x) = x - eps above: the divided difference is 1 above-above, 0
    # below-below and (x - eps)/(x - y) across (bounded by 1, smooth away from the corner)
    # the double sums over (above, below) pairs, in blocks of rows: a discrete law (a power-law target at large
    # d) has as many nodes as atoms, and the full matrix would need (atoms above) x (atoms below) floats
    rows = max(1, _PAIR_BLOCK // max(1, lo.x.size))
    s1 = s2 = 0.0
    for i in range(0, hi.x.size, rows):
        xh = hi.x[i : i + rows, None]
        across = (xh - eps) / (xh - lo.x[None, :])
        s1 += float(hi.w[i : i + rows] @ across @ lo.w)
        s2 += float(hi.w[i : i + rows] @ across**2 @ lo.w)
    P = above**2 + 2.0 * s2
    D = above**2 + 2.0 * s1
    return P / Sh**2, D / Sh


#: pairs of nodes per block in :func:`_prior_factor` (32 MiB of float64 per block)
_PAIR_BLOCK = 1 << 22


def tied_stability(
    problem: Problem, result: Result, *, options: SEOptions | None = None, quad: OutputQuadrature | None = None
) -> Stability:
    """:func:`stability` of the tied model's fixed point ``result`` (one block of fields)."""
    ex = result.extras
    for key in ("q", "m", "Sigma", "Sigmahat", "Q0"):
        if key not in ex:
            raise ValueError(f"result.extras lacks {key!r}: pass a state-evolution Result of theory()")
    if ex.get("collapsed"):
        return Stability(0.0, 0.0, 0.0, math.nan, float(ex["Sigmahat"]), 0.0, 0.0, 0.0)
    q, m, Sigma, Q0 = (float(ex[k]) for k in ("q", "m", "Sigma", "Q0"))
    alpha, K = problem.alpha, problem.n_pairs
    prior_f, sigma_prior = _prior_factor(problem, ex)
    hc = problem.channel.fit_hessian_constant()
    if hc is not None:  # H = hc I: closed form, no jumps
        c = hc / (1.0 + hc * Sigma)
        out_f = 2 * alpha * K * c * c
        sh = 2 * alpha * K * c
        return Stability(out_f * prior_f, out_f, prior_f, sh, sh, 0.0, 0.0, sigma_prior)
    if quad is None:
        quad = (options or SEOptions()).quadrature(problem)
    branch = (options or SEOptions()).prox_branch
    out = output_side(q, m, Sigma, problem=problem, Q0=Q0, quad=quad, jacobian=True, branch=branch)
    if out.scramble_jacobian is None:  # the degenerate limit q -> 0 or Sigma -> 0 (no prox on nodes)
        return Stability(math.nan, math.nan, prior_f, math.nan, out.Sigmahat, math.nan, math.nan, sigma_prior)
    per = 2 * alpha * out.scramble_jacobian  # per scramble: 2 alpha E||J||_F^2, 2 alpha E tr J
    out_f, sh_pw = (float(v) for v in per.mean(axis=0))
    jw = 1.0 - out.Sigmahat / sh_pw
    w = 1.0 - out.scramble_hats[:, 2] / per[:, 1]
    jw_se = float(w.std(ddof=1) / math.sqrt(w.size)) if w.size > 1 else math.nan
    return Stability(out_f * prior_f, out_f, prior_f, sh_pw, out.Sigmahat, float(jw), jw_se, sigma_prior)

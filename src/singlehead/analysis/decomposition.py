r"""Decomposition of the test error of the ERM minimiser into four non-negative parts (docs: Theory,
:ref:`theory-decomposition`).

Sources: arXiv 2509.24914 (§5–6: spectrum of the learned map; the error decomposition into
over-fitting, under-fitting, approximation and the mismatch "when the saturation value does not
correspond to a local minimum of the generalisation error"), arXiv 2509.24882 (over-/under-
fitting of spectral modes for power-law targets), arXiv 2505.17958 (spectral denoiser of the
nuclear-norm route). The definitions and the proofs below are ours.

Setting
-------
At the state-evolution fixed point the learned matrix is, in law (docs: Theory, :ref:`theory-prior-side`,
:ref:`theory-spectrum`),
``Shat = eta f(Y)`` with ``Y = S0 + delta Z`` (``Z`` GOE, semicircle on ``[-2, 2]``),
``f(x) = (x - eps) 1[x > c]`` (soft threshold ``eps``, cut-off ``c >= eps`` from the rank cap)
applied eigenvalue-wise. Let ``mu = mu_{S0} ⊞ SC(v)``, ``v = delta^2``, be the eigenvalue law
of ``Y``, ``H(x) = p.v. int mu(dy)/(x - y)`` its Hilbert transform and

    xi(x) = x - 2 v H(x)

the **signal along an eigenvector of Y**: for an eigenvector ``u`` of ``Y`` with eigenvalue
``x``, ``u^T S0 u -> xi(x)`` (Ledoit–Péché / Bun–Allez–Bouchaud–Potters overlap formula; at an
outlier of a spike ``s`` over a null bulk, ``xi = s (1 - v/s^2)`` = ``s`` times the squared
overlap). All norms are per ``d``: ``||A||^2 := Tr A^2 / d``. Then
``q = ||Shat||^2 = eta^2 int f^2 dmu`` and ``m = <Shat, S0> = eta int f xi dmu`` (the second
is the state-evolution formula ``m = eta [J - (delta/2) dJ/ddelta - (eps/2) dJ/deps]``:
``dJ/ddelta = 2 delta D``, ``D = 2 int f H dmu``, ``dJ/deps = -2 int f dmu`` and
``f (f + eps) = x f`` where ``f != 0``).

Scale and orthogonal part
-------------------------
Write ``Shat = rho S0 + R`` with ``<R, S0> = 0``: ``rho = m/Q0`` and the **orthogonal error**

    r = ||Shat - rho S0||^2 = q - m^2/Q0.

The reference matrix is ``rho0 S0`` (``rho0 = beta0/beta``: the student with ``rho0 S0``
reproduces the teacher's logits; ``rho0 = 1`` when ``beta = beta0`` and for the linear
channel); ``rho/rho0`` is reported as ``scale``. ``r`` does not depend on the reference
(rescaling ``S0`` does not change the orthogonal complement), so the scale never leaks into the
matrix parts. For every channel the student logits are ``z = rho z0 + sqrt(r) zeta``
(``zeta`` standard, independent of the teacher logits ``z0``) and the test error against
noiseless labels is the function ``TE(rho, r) = E ||A_beta0(z0) - A_beta(z)||_F^2`` (``A`` the
channel; docs: Theory, :ref:`theory-channels`), computed with :func:`singlehead.state_evolution.channel_test_errors` on
the state evolution's own quadrature nodes, so that ``TE(rho, r)`` *is* the full theory's test
error.

Four parts
----------
Split the support of ``mu`` above the cut-off into

* the **recovered signal** ``R``: components of ``mu`` created by the target's signal and
  separated from the noise bulk — an outlier of one isolated target eigenvalue ``s_i`` (point
  mass of a spiked law), a bulk of ``mu`` carrying exactly the mass ``w_i`` of one target atom
  (discrete laws), or a **separated upper bulk** (MP target with ``kappa0 < 1`` once
  ``mu`` splits into the bulk of the null space of ``S0``, mass ``1 - kappa0``, and the bulk of
  its range, mass ``kappa0``); mode energies ``e_i`` below;
* the **kept bulk** ``B``: the rest of ``{x > c}`` (noise directions, and the signal bulk of an
  MP target while it is not separated).

With ``a_R = int_R (eta f - rho xi)^2 dmu`` etc. the four parts (matrix-error units, all ``>= 0``):

* ``E_over = int_B (eta f - rho xi)^2 dmu`` — over-fitting: error on the kept bulk
  directions (fitted noise);
* ``E_approx = int_R (eta f - rho xi)^2 dmu + rho^2 sum_i (e_i - int_{R_i} xi^2 dmu)``
  (``E_approx_shrinkage`` + ``E_approx_misalignment``, plus ``E_approx_self``, below) —
  error along the recovered signal: shrinkage of the kept eigenvalues against the signal
  ``rho xi`` and target energy of the recovered modes not carried by their directions;
* ``E_under = rho^2 (Q0 - sum_i e_i - int_B xi^2 dmu)`` — under-fitting: target energy in
  directions that are not recovered (modes below the detection edge, killed by the threshold,
  bulk signal not captured by the kept bulk directions);
* ``E_mismatch = [TE(rho, r) - min_rho' TE(rho', r)] / c_r`` with
  ``c_r = [min_rho' TE(rho', r) - e0] / r`` — the excess of the test error at the saturated
  scale ``rho`` over the best scale at the same structure ``r`` (the paper's mismatch between
  the saturation value and a minimum of the generalisation error), in matrix-error units.
  ``e0 = TE(rho0, 0) = 0`` against noiseless labels (the noisy-label floor is ``e0_noisy``).

Mode energies: ``e_i = w_i s_i^2`` for a single-atom bulk (``w_i = 1/d``),
``w_i max(s_i^2, xi_i^2)`` for a spike outlier (its direction can also carry bulk signal), and
for a separated upper bulk ``e_R = Q0 - int_{mu outside R} xi^2 dmu`` (the target energy not
carried by the other components; its misalignment ``Q0 - int xi^2 dmu >= 0`` is the
off-diagonal energy of ``S0`` in the eigenbasis of ``Y``, since
``sum_k (u_k^T S0 u_k)^2 <= Tr S0^2``).

**Identity 1** (matrix part). ``E_over + E_under + E_approx = r``. *Proof.* Summing, the
``e_i`` cancel and the sum is ``int_{x>c} (eta f - rho xi)^2 dmu - rho^2 int_{x>c} xi^2 dmu +
rho^2 Q0 = q - 2 rho m + rho^2 Q0 = q - m^2/Q0`` (``f = 0`` on ``{x <= c}``). ∎

**Identity 2** (test error). ``test_error = e0 + c_r (E_over + E_under + E_approx + E_mismatch)``
exactly: by Identity 1 and the definitions,
``e0 + c_r r + c_r E_mismatch = min TE + (TE(rho, r) - min TE) = TE(rho, r)``. ∎
Numerically ``c_r`` is divided by the computed ``E_over + E_under + E_approx`` (which equals
the state-evolution ``q - m^2/Q0`` up to ``orthogonal_gap``, the quadrature error of the
prior-side integrals and the SE residual), so Identity 2 holds to rounding.

For the linear channel ``TE(rho, r) = 2K (Q0 (1 - rho)^2 + r)``, so ``c_r = 2K`` and
``E_mismatch = Q0 (1 - rho)^2`` (the matrix error ``Q0 - 2m + q`` is the sum of the four parts).
For softmax channels the best scale at fixed ``r`` is *larger* than ``rho0``
(a noisy student field is best read through a colder softmax), while ERM with label noise
saturates below it (``rho/rho0 ≈ 0.9``): at MP ``kappa0 = 0.5``, ``T = 2``, ``alpha = 1``,
``Delta = 0.5``, ``lam = 0.01``, ``TE = 0.0301``, ``min_rho' TE = 0.0244`` at
``rho' = 1.15``, so ``c_r E_mismatch = 0.0057`` (19% of the test error).

For laws with point masses (spike outliers, mass ``w``) the state-evolution divergence also
contains the diagonal terms ``sum_a w_a^2 f'(a)`` (``O(1/d^2)`` each); to keep Identity 1
exact against the state-evolution ``m`` they are added to ``E_approx``
(``E_approx_self = 2 rho eta v sum_kept w_a^2``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize

from singlehead.analysis.channel_side import (
    channel_sensitivities,
    channel_test_error,
    default_quadrature,
    se_test_error,
)
from singlehead.analysis.learned_spectrum import target_law
from singlehead.analysis.matrix_parts import matrix_error_parts
from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution import theory

__all__ = ["ErrorDecomposition", "decompose", "channel_sensitivities", "channel_test_error", "scale_profile"]


@dataclass
class ErrorDecomposition:
    """Result of :func:`decompose` (all matrix errors per ``d``; see the module docstring).

    Attributes
    ----------
    E_over, E_under, E_approx, E_mismatch : float
        The four non-negative parts (matrix-error units);
        ``test_error = e0 + c_r (E_over + E_under + E_approx + E_mismatch)``.
    E_approx_shrinkage, E_approx_misalignment, E_approx_self : float
        Parts of ``E_approx``.
    orthogonal_error : float
        ``E_over + E_under + E_approx`` (``= r``, Identity 1).
    r : float
        ``q - m^2/Q0`` of the state-evolution ``(m, q)``.
    orthogonal_gap : float
        ``orthogonal_error - r`` (prior-side quadrature error and SE residual; ``O(1/d)`` with
        ``model="spiked"``, a different law from the state evolution's).
    r_law, quadrature_gap : float
        ``q - m^2/Q0`` from the prior-side integrals of the decomposition's own law at
        ``(eta, delta, eps)``, and ``orthogonal_error - r_law`` (quadrature error of Identity 1).
    matrix_error : float
        ``Q0 - 2m + q`` of the state evolution (``= r + Q0 (1 - rho)^2``).
    e0, e0_noisy : float
        Test-error floors: ``TE(rho0, 0) = 0`` (noiseless labels) and
        ``E ||A(z0 + xi) - A(z0)||^2`` (noisy labels).
    c_r : float
        ``(min_rho' TE(rho', r) - e0) / orthogonal_error``: test error per unit of matrix error.
    rho, rho0, rho_best, scale : float
        ``m/Q0``, ``beta0/beta``, ``argmin_rho' TE(rho', r)`` and ``rho/rho0``.
    test_error : float
        Full state-evolution test error (``Result.test_error``).
    test_error_best_scale : float
        ``min_rho' TE(rho', r)``.
    test_error_recomputed, test_error_gap : float
        ``TE(rho, r)`` from this module and its difference with ``test_error`` (0 when the
        state evolution ran with the default quadrature).
    test_error_sum : float
        ``e0 + c_r (E_over + E_under + E_approx + E_mismatch)``.
    identity_gap : float
        ``test_error_sum - test_error`` (Identity 2; rounding only).
    recovered_modes : list of dict
        ``mode`` (1-based; 0 for a separated upper bulk), ``spike`` (``nan`` for a bulk),
        ``position`` (on the scale of ``Y``), ``signal`` (``int xi dmu / w``), ``overlap``
        (``signal / spike``), ``mass``.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.analysis import decompose
    >>> dec = decompose(Problem(T=2, alpha=1.0, noise=0.5, lam=0.01))
    >>> parts = dec.E_over + dec.E_under + dec.E_approx + dec.E_mismatch
    >>> abs(dec.e0 + dec.c_r * parts - dec.test_error) < 1e-6   # Identity 2
    True
    """

    E_over: float
    E_under: float
    E_approx: float
    E_mismatch: float
    E_approx_shrinkage: float
    E_approx_misalignment: float
    E_approx_self: float
    orthogonal_error: float
    r: float
    orthogonal_gap: float
    r_law: float
    quadrature_gap: float
    matrix_error: float
    e0: float
    e0_noisy: float
    c_r: float
    rho: float
    rho0: float
    rho_best: float
    scale: float
    test_error: float
    test_error_best_scale: float
    test_error_recomputed: float
    test_error_gap: float
    test_error_sum: float
    identity_gap: float
    Q0: float
    q: float
    m: float
    recovered_modes: list[dict[str, float]] = field(default_factory=list)

    def parts(self) -> dict[str, float]:
        """The four parts in test-error units (``c_r`` times each), plus ``e0``."""
        return {
            "e0": self.e0,
            "over": self.c_r * self.E_over,
            "under": self.c_r * self.E_under,
            "approx": self.c_r * self.E_approx,
            "mismatch": self.c_r * self.E_mismatch,
        }

    def to_dict(self) -> dict[str, Any]:
        out = {k: (float(v) if isinstance(v, (int, float, np.floating)) else v) for k, v in self.__dict__.items()}
        out["recovered_modes"] = [{k: float(v) for k, v in d.items()} for d in self.recovered_modes]
        out["n_recovered"] = len(self.recovered_modes)
        out["test_error_parts"] = self.parts()
        return out


# ------------------------------------------------------------------------------------ channel part
# ------------------------------------------------------------------------------------- matrix part
def scale_profile(
    problem: Problem, Q0: float, r: float, *, quad=None, rho_max: float | None = None, xatol: float = 1e-7
) -> dict[str, float]:
    """``min_rho' TE(rho', r)`` and its minimiser (the best scale at fixed orthogonal error ``r``).

    ``TE(rho', r)`` (module docstring) is evaluated with
    :func:`singlehead.state_evolution.channel_test_errors` on ``quad`` (default: the state
    evolution's default nodes). Linear channel: exact, ``rho_best = 1``,
    ``min = 2K r``. Softmax: a grid on ``[0, rho_max]`` (default ``4 rho0``) then bounded Brent
    around the best grid point.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.analysis import scale_profile
    >>> profile = scale_profile(Problem(T=2), 1.5, 0.2)
    >>> profile["test_error_best_scale"] > 0.0
    True
    """
    hc = problem.channel.fit_hessian_constant()
    if hc is not None:  # a linear channel: TE is quadratic in rho with its minimum at the logit scale
        return {
            "rho_best": problem.channel.logit_scale(problem.beta, problem.beta0),
            "test_error_best_scale": 0.5 * hc * problem.n_pairs * r,
        }
    quad = default_quadrature(problem) if quad is None else quad
    rho0 = problem.channel.logit_scale(problem.beta, problem.beta0)
    hi = 4.0 * rho0 if rho_max is None else float(rho_max)
    grid = np.linspace(0.0, hi, 33)
    vals = se_test_error(problem, Q0, grid, r, quad)
    k = int(np.argmin(vals))
    lo_b, hi_b = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    res = optimize.minimize_scalar(
        lambda x: float(se_test_error(problem, Q0, x, r, quad)[0]),
        bounds=(lo_b, hi_b),
        method="bounded",
        options={"xatol": xatol},
    )
    if res.fun <= vals[k]:
        return {"rho_best": float(res.x), "test_error_best_scale": float(res.fun)}
    return {"rho_best": float(grid[k]), "test_error_best_scale": float(vals[k])}


def decompose(
    problem: Problem,
    theory_result: Result | None = None,
    *,
    prior: str = "auto",
    model: str = "discrete",
    n_spikes: int | None = None,
    n_points: int = 1 << 15,
    seed: int = 0,
) -> ErrorDecomposition:
    """Four-part decomposition of the test error of the ERM minimiser (docs: Theory, :ref:`theory-decomposition`; module
    docstring).

    ``test_error = e0 + c_r (E_over + E_under + E_approx + E_mismatch)`` exactly (Identity 2),
    every part ``>= 0``; ``E_over + E_under + E_approx = r = q - m^2/Q0`` (Identity 1).

    Parameters
    ----------
    problem : Problem
        Factorized student (nuclear norm; the decomposition uses the soft-threshold law).
    theory_result : Result, optional
        State-evolution result (``extras`` with ``eta, delta, eps, q, m, Q0``); computed with
        :func:`singlehead.theory` (``prior``) when omitted. ``TE(rho', r)`` uses
        the state evolution's default output quadrature (the identity holds for any nodes;
        ``test_error_gap`` reports a mismatch of node sets).
    model, n_spikes :
        Target law used for the spectral integrals, see
        :func:`singlehead.analysis.target_law`. Default ``"discrete"``: the
        discrete law of the ``d`` target eigenvalues, the same law as the state evolution's
        ``prior="asymptotic"`` (recovered modes are then the single-atom bulks of ``mu``);
        ``"spiked"`` treats the top eigenvalues as spikes (``d -> inf`` picture; it
        redistributes the mass of absorbed sub-critical spikes over the bulk, so its energy
        accounting — and the sign of ``E_under`` — is only ``O(1/d)``-consistent at small ``d``).
    n_points, seed : int
        Scrambled-Sobol nodes of the noisy-label floor ``e0_noisy``.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.analysis import decompose
    >>> dec = decompose(Problem(T=2, alpha=1.0, noise=0.5, lam=0.01))
    >>> min(dec.E_over, dec.E_under, dec.E_approx, dec.E_mismatch) >= 0.0
    True
    >>> abs(dec.orthogonal_error - dec.r) < 1e-3        # Identity 1: the three parts sum to r
    True
    """
    if not problem.student.thresholded:
        raise ValueError(
            "student must be 'factorized' (a thresholded spectrum) for the error decomposition "
            f"(got {problem.student.name!r})"
        )
    if theory_result is None:
        theory_result = theory(problem, prior=prior)
    ex = theory_result.extras
    eta, delta, eps = float(ex["eta"]), float(ex["delta"]), float(ex["eps"])
    law = target_law(problem, model=model, delta=delta, n_spikes=n_spikes)
    cap = problem.student.rank_cap(problem.kappa)
    parts = matrix_error_parts(law, delta * delta, eta, eps, cap)
    Q0 = float(ex.get("Q0", parts["Q0"]))
    m, q = float(ex["m"]), float(ex["q"])
    rho, r = m / Q0, max(q - m * m / Q0, 0.0)
    E_approx = parts["E_approx_shrinkage"] + parts["E_approx_misalignment"] + parts["E_approx_self"]
    orth = parts["E_over"] + parts["E_under"] + E_approx
    rho0 = problem.channel.logit_scale(problem.beta, problem.beta0)
    quad = default_quadrature(problem)
    te = float(theory_result.test_error)
    te_re = float(se_test_error(problem, Q0, rho, r, quad)[0])
    prof = scale_profile(problem, Q0, r, quad=quad)
    te_min = min(prof["test_error_best_scale"], te)
    e0 = 0.0
    if orth > 0:
        c_r = (te_min - e0) / orth
    else:  # r = 0: no orthogonal error; use the linear response at the best scale
        c_r = channel_sensitivities(problem, Q0, rho=prof["rho_best"], n_points=n_points, seed=seed)["c_r_rho"]
    E_mis = (te - te_min) / c_r if c_r > 0 else 0.0
    e0n = channel_sensitivities(problem, Q0, n_points=n_points, seed=seed)["e0_noisy"] if problem.noise > 0 else 0.0
    total = e0 + c_r * (orth + E_mis)
    return ErrorDecomposition(
        E_over=parts["E_over"],
        E_under=parts["E_under"],
        E_approx=E_approx,
        E_mismatch=E_mis,
        E_approx_shrinkage=parts["E_approx_shrinkage"],
        E_approx_misalignment=parts["E_approx_misalignment"],
        E_approx_self=parts["E_approx_self"],
        orthogonal_error=orth,
        r=r,
        orthogonal_gap=orth - r,
        r_law=parts["q_law"] - parts["m_law"] ** 2 / parts["Q0"],
        quadrature_gap=orth - (parts["q_law"] - parts["m_law"] ** 2 / parts["Q0"]),
        matrix_error=Q0 - 2 * m + q,
        e0=e0,
        e0_noisy=e0n,
        c_r=c_r,
        rho=rho,
        rho0=rho0,
        rho_best=prof["rho_best"],
        scale=rho / rho0,
        test_error=te,
        test_error_best_scale=te_min,
        test_error_recomputed=te_re,
        test_error_gap=te_re - te,
        test_error_sum=total,
        identity_gap=total - te,
        Q0=Q0,
        q=q,
        m=m,
        recovered_modes=parts["recovered"],
    )

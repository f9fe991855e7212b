r"""Decomposition of the matrix and test errors of the ERM minimiser (THEORY §6).

Sources: arXiv 2509.24914 (§5–6: spectrum of the learned map, error decomposition), arXiv
2509.24882 (over-/under-fitting of spectral modes for power-law targets), arXiv 2505.17958
(spectral denoiser of the nuclear-norm route). The definitions and the proof below are ours.

Setting
-------
At the state-evolution fixed point the learned matrix is, in law (THEORY §3, §5),
``Shat = eta f(Y)`` with ``Y = S0 + delta Z`` (``Z`` GOE, semicircle on ``[-2, 2]``),
``f(x) = (x - eps) 1[x > c]`` (soft threshold ``eps``, cut-off ``c >= eps`` from the rank cap)
applied eigenvalue-wise. Let ``mu = mu_{S0} ⊞ SC(v)``, ``v = delta^2``, be the eigenvalue law
of ``Y``, ``H(x) = p.v. int mu(dy)/(x - y)`` its Hilbert transform and

    xi(x) = x - 2 v H(x)

the **signal along an eigenvector of Y**: for an eigenvector ``u`` of ``Y`` with eigenvalue
``x``, ``u^T S0 u -> xi(x)`` (Ledoit–Péché / Bun–Allez–Bouchaud–Potters overlap formula; at an
outlier of a spike ``s`` over a null bulk, ``xi = s (1 - v/s^2)`` = ``s`` times the squared
overlap). All norms are per ``d``: ``||A||^2 := Tr A^2 / d``.

Matrix error
------------
``q = ||Shat||^2 = eta^2 int f^2 dmu`` and ``m = <Shat, S0> = eta int f xi dmu``. The second
identity is the state-evolution formula ``m = eta [J - (delta/2) dJ/ddelta - (eps/2) dJ/deps]``:
with ``dJ/ddelta = 2 delta D``, ``D = int int (f(x)-f(y))/(x-y) dmu dmu = 2 int f H dmu`` (the
free divergence, symmetrised) and ``dJ/deps = -2 int f dmu``,
``J - v D + eps int f = int f (f + eps) dmu - 2 v int f H dmu = int f (x - 2 v H) dmu`` because
``f (f + eps) = x f`` wherever ``f != 0``. Split the support of ``mu`` above the cut-off into

* the **recovered modes** ``R``: components of the kept part of ``mu`` created by one isolated
  target eigenvalue ``s_i`` (an outlier point mass of a spiked law, or a bulk of ``mu``
  carrying exactly the mass ``w_i`` of one target atom), each with target energy ``w_i s_i^2``
  (``w_i = 1/d``; for a spike outlier next to a bulk, whose direction can also carry bulk
  signal, the mode energy is ``w_i max(s_i^2, xi_i^2)`` — any choice cancels in the sum);
* the **kept bulk** ``B``: the rest of ``{x > c}``.

Definitions (all ``>= 0``):

* ``E_over = int_B (eta f - xi)^2 dmu`` — error on the bulk directions the estimator keeps
  (fitted noise directions, plus the shrinkage error of the bulk signal for bulk targets);
* ``E_approx = sum_{i in R} [ int_{R_i} (eta f - xi)^2 dmu + (w_i s_i^2 - int_{R_i} xi^2 dmu) ]``
  — error along the recovered modes: **shrinkage** (``eta f`` vs. the signal ``xi``) plus
  **eigenvector misalignment** (target energy of the mode not carried by its outlier
  direction, ``w s^2 (1 - overlap^2)`` for a null bulk); reported separately as
  ``E_approx_shrinkage`` and ``E_approx_misalignment``;
* ``E_under = Q0 - sum_{i in R} w_i s_i^2 - int_B xi^2 dmu`` — target energy that is not
  recovered: modes below the detection edge (``s_i < delta``) or killed by the threshold,
  and the part of the bulk signal not captured by the kept bulk directions.

**Claim.** ``E_over + E_approx + E_under = Q0 - 2 m + q`` exactly.

*Proof.* Summing, the ``w_i s_i^2`` terms cancel and
``E_over + E_approx + E_under = int_{x>c} (eta f - xi)^2 dmu - int_{x>c} xi^2 dmu + Q0
= eta^2 int f^2 dmu - 2 eta int f xi dmu + Q0 = q - 2m + Q0``, using ``f = 0`` on
``{x <= c}``. ∎

For laws with point masses (spike outliers, mass ``w``) the state-evolution divergence also
contains the diagonal terms ``sum_a w_a^2 f'(a)`` (``O(1/d^2)`` each); to keep the identity
exact against the state-evolution ``m`` they are added to ``E_approx``
(``E_approx_self = 2 eta v sum_kept w_a^2``); the remaining gap is the quadrature error
(about ``1e-6`` relative for spiked laws, ``< 1e-12`` for the MP and discrete laws).

Numerically every term is a quadrature against ``mu`` (the rules of
:class:`singlehead.spectra.ConvolvedLaw`); ``quadrature_gap`` reports the difference between
the sum and ``Q0 - 2m + q`` computed from :func:`singlehead.spectra.soft_threshold_integrals`
(the state-evolution prior side) at the same ``(eta, delta, eps)``.

Test error
----------
For every channel the test error is an exact function of ``(Q0, m, q)`` (THEORY §3): with
``rho = m/Q0`` and ``r = q - m^2/Q0`` the student logits are ``z = rho z0 + sqrt(r) zeta``
(``zeta`` independent of ``z0``) and ``TE(rho, r) = E ||A_beta0(z0) - A_beta(z)||_F^2``
(``A`` the channel of THEORY §1). It vanishes at ``(rho0, 0)``, ``rho0 = beta0/beta`` (the
student reproduces the noiseless labels). The matrix error splits as
``Q0 - 2m + q = r + Q0 (1 - rho)^2`` (orthogonal part + part along ``S0``). Expanding to first
order in ``r`` and second order in ``rho - rho0`` (the first order vanishes at a minimum):

    TE ≈ e0 + c_r r + c_s Q0 (rho - rho0)^2,
    c_r = E ||J(rho0 z0) zeta||^2,   c_s = E ||J(rho0 z0) z0||^2 / Q0,

``J`` the Jacobian of ``A_beta`` (linear channel: ``c_r = c_s = 2K``, ``K = T(T+1)/2``, and
the expansion is exact). Define

* ``e0`` = the test error of the best estimator ``rho0 S0``: ``0`` against noiseless labels
  (the noisy-label floor ``E ||A(z0 + xi) - A(z0)||^2`` is reported as ``e0_noisy``);
* ``E_mismatch = Q0 (rho - rho0)^2 = (m - rho0 Q0)^2 / Q0`` — the scale mismatch: the error
  of the norm of ``Shat`` along ``S0`` (set by the saturated scale ``eta``) relative to the
  scale minimising the test error.

With ``beta = beta0`` (``rho0 = 1``), ``r = E_over + E_under + E_approx - E_mismatch`` and

    TE ≈ e0 + c_r [ c1 E_over + E_under + E_approx + c2 E_mismatch ],   c1 = 1,  c2 = c_s/c_r - 1

(``test_error_quadratic``). The weights are fixed by rotation invariance (only ``(m, q)``
matter): every matrix-error component counts with the channel's orthogonal sensitivity
``c_r``, and the softmax's different sensitivity to a rescaling of the logits (a temperature
change) enters through ``c2``. For softmax channels with label noise the learned scale stays
well below the target's (``rho ~ 0.9``: noisy labels are best fitted by a colder softmax), and
the quadratic expansion in ``rho - 1`` is then poor. The default form (``test_error_linear``)
is first order in the orthogonal error only and exact in the scale:

    TE ≈ TE(rho, 0) + c_r(rho) r,   c_r(rho) = E ||J(rho z0) zeta||^2,

i.e. the same THEORY §6 form with ``c_r -> c_r(rho)`` and the secant weight
``c2 = [TE(rho, 0)/c_r(rho) - Q0 (1 - rho)^2] / E_mismatch`` (``TE(rho, 0)``: test error of
the rescaled target ``rho S0``). :func:`decompose` returns both forms, the exact
``TE(rho, r)`` and the relative error of the default form against the full state-evolution
test error; it is accurate when the excess error is small and the orthogonal error dominates
(see the tests and ``validation``), and only qualitative at large error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats
from scipy.stats import qmc

from ..problem import Problem
from ..prox import attention
from ..results import Result
from ..spectra import DiscreteLaw, SpikedLaw, free_convolve_semicircle, soft_threshold_integrals
from .learned_spectrum import target_law

__all__ = ["ErrorDecomposition", "decompose", "channel_sensitivities", "channel_test_error"]


@dataclass
class ErrorDecomposition:
    """Result of :func:`decompose` (all errors per ``d``; see the module docstring).

    Attributes
    ----------
    E_over, E_under, E_approx, E_mismatch : float
        Matrix-error components and the scale mismatch.
    E_approx_shrinkage, E_approx_misalignment, E_approx_self : float
        Parts of ``E_approx``.
    matrix_error : float
        ``E_over + E_under + E_approx``.
    matrix_error_law : float
        ``Q0 - 2m + q`` from the state-evolution prior side at ``(eta, delta, eps)``.
    matrix_error_theory : float
        ``Result.matrix_error`` of the state-evolution run.
    quadrature_gap : float
        ``matrix_error - matrix_error_law``.
    e0, e0_noisy : float
        Test-error floors (noiseless / noisy labels).
    c_r, c1, c2 : float
        ``c_r(rho)`` and the weights of the THEORY §6 form (default, scale-exact form).
    c_r0, c_s, c2_quadratic : float
        Sensitivities at the optimal scale ``rho0`` and ``c2`` of the quadratic form.
    test_error_scale : float
        ``TE(rho, 0)``: test error of the rescaled target ``rho S0``.
    test_error_quadratic : float
        ``e0 + c_r0 (E_over + E_under + E_approx - Q0 (1-rho)^2) + c_s E_mismatch``.
    test_error : float
        Full state-evolution test error (``Result.test_error``).
    test_error_exact : float
        ``TE(rho, r)`` from this module's quadrature (consistency check of ``test_error``).
    test_error_linear : float
        ``e0 + c_r (c1 E_over + E_under + E_approx + c2 E_mismatch)`` ``= TE(rho, 0) + c_r(rho) r``.
    relative_error : float
        ``|test_error_linear - test_error| / test_error``.
    recovered_modes : list of dict
        ``mode`` (1-based), ``spike``, ``position`` (on the scale of ``Y``), ``signal``
        (``int xi dmu / w``), ``overlap`` (``signal / spike``), ``mass``.
    """

    E_over: float
    E_under: float
    E_approx: float
    E_mismatch: float
    E_approx_shrinkage: float
    E_approx_misalignment: float
    E_approx_self: float
    matrix_error: float
    matrix_error_law: float
    matrix_error_theory: float
    quadrature_gap: float
    e0: float
    e0_noisy: float
    c_r: float
    c_s: float
    c1: float
    c2: float
    rho: float
    rho0: float
    r: float
    c_r0: float
    c2_quadratic: float
    test_error_scale: float
    test_error_quadratic: float
    test_error: float
    test_error_exact: float
    test_error_linear: float
    relative_error: float
    Q0: float
    q: float
    m: float
    recovered_modes: list[dict[str, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = {k: (float(v) if isinstance(v, (int, float, np.floating)) else v) for k, v in self.__dict__.items()}
        out["recovered_modes"] = [{k: float(v) for k, v in d.items()} for d in self.recovered_modes]
        out["n_recovered"] = len(self.recovered_modes)
        return out


# ------------------------------------------------------------------------------------ channel part
def _nodes(K: int, n_points: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    mexp = max(4, int(math.ceil(math.log2(max(16, n_points)))))
    u = qmc.Sobol(d=2 * K, scramble=True, seed=np.random.default_rng(seed)).random_base2(mexp)
    g = stats.norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))
    return g[:, :K], g[:, K:]


def _linear_weights(T: int) -> np.ndarray:
    """Squared-Frobenius weight of each of the ``K`` logits in ``M(h)`` (diagonal ``sqrt 2``: 2; off: 2)."""
    return np.full(T * (T + 1) // 2, 2.0)


def channel_test_error(problem: Problem, Q0: float, m: float, q: float, *, noisy: bool = False,
                       n_points: int = 1 << 15, seed: int = 0) -> float:
    """``E ||A_beta0(z0 [+ xi]) - A_beta(z)||_F^2`` with ``(z0_k, z_k)`` of covariance ``[[Q0, m], [m, q]]``.

    ``K = T(T+1)/2`` iid pairs, symmetric ``T x T`` logit matrices with the diagonal multiplied by
    ``sqrt(2)`` (THEORY §3); ``xi_k ~ N(0, Delta/2)`` when ``noisy``. Scrambled-Sobol quadrature
    with a fixed seed.
    """
    T, K = problem.T, problem.n_pairs
    if problem.channel == "linear":  # exact: E ||z0 + xi - z||^2 summed over K entries, doubled (sqrt 2 diagonal)
        return 2.0 * K * (Q0 - 2 * m + q + (problem.noise / 2.0 if noisy else 0.0)) if T == 1 else \
            float(np.sum(_linear_weights(T))) * (Q0 - 2 * m + q + (problem.noise / 2.0 if noisy else 0.0))
    u0, u1 = _nodes(K, n_points, seed)
    rho, r = m / Q0, max(q - m * m / Q0, 0.0)
    z0 = math.sqrt(Q0) * u0
    z = rho * z0 + math.sqrt(r) * u1
    y = z0
    if noisy and problem.noise > 0:
        xi = math.sqrt(problem.noise / 2.0) * _nodes(K, n_points, seed + 1)[0]
        y = z0 + xi
    diff = attention(y, T, problem.channel, problem.beta0) - attention(z, T, problem.channel, problem.beta)
    return float(np.mean(np.einsum("nab,nab->n", diff, diff)))


def channel_sensitivities(problem: Problem, Q0: float, *, rho: float | None = None, n_points: int = 1 << 15,
                          seed: int = 0, h: float = 1e-5) -> dict[str, float]:
    """``c_r``, ``c_s``, ``rho0`` and the noisy-label floor ``e0_noisy`` of the channel (module docstring).

    ``c_r`` and ``c_s`` are taken at the optimal scale ``rho0``; with ``rho`` given,
    ``c_r_rho = E ||J(rho z0) zeta||^2`` is returned as well. ``J v`` is a central difference ``(A(x + h v) - A(x - h v)) / (2h)`` of the smooth channel
    map (truncation error ``O(h^2)``), averaged on fixed scrambled-Sobol nodes.
    """
    T, K = problem.T, problem.n_pairs
    rho0 = problem.beta0 / problem.beta if problem.channel != "linear" else 1.0
    if problem.channel == "linear":
        c = 2.0 * K
        e0n = 2.0 * K * problem.noise / 2.0
        return {"c_r": c, "c_s": c, "c_r_rho": c, "rho0": 1.0, "e0_noisy": e0n}
    u0, u1 = _nodes(K, n_points, seed)
    z0 = math.sqrt(Q0) * u0
    x = rho0 * z0

    def jv(x: np.ndarray, v: np.ndarray) -> np.ndarray:
        return (attention(x + h * v, T, problem.channel, problem.beta)
                - attention(x - h * v, T, problem.channel, problem.beta)) / (2 * h)

    a = jv(x, u1)
    b = jv(x, z0)
    c_r = float(np.mean(np.einsum("nab,nab->n", a, a)))
    c_s = float(np.mean(np.einsum("nab,nab->n", b, b))) / Q0
    c_r_rho = c_r
    if rho is not None:
        a = jv(rho * z0, u1)
        c_r_rho = float(np.mean(np.einsum("nab,nab->n", a, a)))
    e0n = 0.0
    if problem.noise > 0:
        xi = math.sqrt(problem.noise / 2.0) * _nodes(K, n_points, seed + 1)[0]
        dd = attention(z0 + xi, T, problem.channel, problem.beta0) - attention(z0, T, problem.channel, problem.beta0)
        e0n = float(np.mean(np.einsum("nab,nab->n", dd, dd)))
    return {"c_r": c_r, "c_s": c_s, "c_r_rho": c_r_rho, "rho0": rho0, "e0_noisy": e0n}


# ------------------------------------------------------------------------------------- matrix part
def _matrix_parts(law, v: float, eta: float, eps: float, cap: float | None) -> dict[str, Any]:
    cl = free_convolve_semicircle(law, v)
    ti = soft_threshold_integrals(cl, math.sqrt(v), eps, rank_cap=cap)
    c = float(ti.cutoff)
    pos, amass = cl.atoms()
    full = cl.rule()

    def H_full(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            Hc = (1.0 / (x[:, None] - full.x[None, :])) @ full.w if full.x.size else np.zeros_like(x)
        return Hc

    # --- continuous kept part, component by component (bulks from the top)
    bulks = sorted(cl.edges(), key=lambda e: -e[1])
    out_modes: list[dict[str, float]] = []
    E_over = E_appr_sh = E_appr_mis = 0.0
    xi2_B = 0.0
    sum_f2 = sum_fxi = 0.0
    rec_energy = 0.0
    # target atoms available for single-atom bulks
    if isinstance(law, DiscreteLaw):
        tpos, tmass = law.atoms()
        tpos, tmass = tpos[::-1], tmass[::-1]
        fac = 1.0
    else:  # MP bulk, or spiked law: recovered modes are the spike outliers only
        tpos = tmass = np.zeros(0)
        fac = 1.0
    j = 0
    classifying = tpos.size > 0
    mode_offset = len(law.spikes) if isinstance(law, SpikedLaw) else 0
    for lo, hi in bulks:
        if hi <= c:
            break
        r = cl.rule(max(lo, c), hi)
        rb = cl.rule(lo, hi)
        Mb = float(np.sum(rb.w))
        if r.x.size == 0:
            continue
        Hx = r.H + ((1.0 / (r.x[:, None] - pos[None, :])) @ amass if pos.size else 0.0)
        xi = r.x - 2.0 * v * Hx
        fx = r.x - eps
        sum_f2 += float(np.sum(r.w * fx * fx))
        sum_fxi += float(np.sum(r.w * fx * xi))
        single = False
        if classifying and j < tpos.size and abs(Mb - fac * tmass[j]) <= 1e-6 * max(Mb, 1e-300) + 1e-9:
            single = True
        if single:
            s, w = float(tpos[j]), float(fac * tmass[j])
            sh = float(np.sum(r.w * (eta * fx - xi) ** 2))
            sig = float(np.sum(rb.w * (rb.x - 2.0 * v * (rb.H + ((1.0 / (rb.x[:, None] - pos[None, :])) @ amass if pos.size else 0.0)))))
            mis = w * s * s - float(np.sum(r.w * xi * xi))
            E_appr_sh += sh
            E_appr_mis += mis
            rec_energy += w * s * s
            out_modes.append({"mode": float(mode_offset + j + 1), "spike": s, "position": 0.5 * (lo + hi),
                              "signal": sig / w, "overlap": sig / (w * s) if s > 0 else math.nan, "mass": w})
            j += 1
        else:
            classifying = False
            E_over += float(np.sum(r.w * (eta * fx - xi) ** 2))
            xi2_B += float(np.sum(r.w * xi * xi))
    # --- point masses (spike outliers)
    E_self = 0.0
    if pos.size:
        kept = pos > c
        outl = {round(o.position, 12): o for o in cl.outliers()}
        spikes = np.asarray(getattr(law, "spikes", ()), dtype=float)
        for a, w in zip(pos[kept], amass[kept]):
            others = pos != a
            Ha = float(np.sum(full.w / (a - full.x))) + float(np.sum(amass[others] / (a - pos[others])))
            xi = a - 2.0 * v * Ha
            fa = a - eps
            sum_f2 += w * fa * fa
            sum_fxi += w * fa * xi
            o = outl.get(round(float(a), 12))
            if o is None:  # an atom that is not a spike outlier (v = 0): count it in the bulk
                E_over += w * (eta * fa - xi) ** 2
                xi2_B += w * xi * xi
                continue
            s = float(o.spike)
            e_i = max(s * s, xi * xi)  # an outlier next to a bulk can also carry bulk signal (xi > s)
            E_appr_sh += w * (eta * fa - xi) ** 2
            E_appr_mis += w * (e_i - xi * xi)
            rec_energy += w * e_i
            E_self += 2.0 * eta * v * w * w
            mode = 1 + int(np.argmin(np.abs(spikes - s))) if spikes.size else 0
            out_modes.append({"mode": float(mode), "spike": s, "position": float(a), "signal": xi,
                              "overlap": xi / s, "mass": float(w)})
    Q0 = float(law.second_moment())
    E_under = Q0 - rec_energy - xi2_B
    q_law = eta * eta * float(ti.J)
    m_law = eta * (float(ti.J) - 0.5 * math.sqrt(v) * float(ti.dJ_ddelta) - 0.5 * eps * float(ti.dJ_deps))
    out_modes.sort(key=lambda d: d["mode"])
    return {"E_over": E_over, "E_under": E_under, "E_approx_shrinkage": E_appr_sh, "E_approx_misalignment": E_appr_mis,
            "E_approx_self": E_self, "Q0": Q0, "q_law": q_law, "m_law": m_law, "recovered": out_modes,
            "q_quad": eta * eta * sum_f2, "m_quad": eta * sum_fxi, "cutoff": c}


def decompose(problem: Problem, theory_result: Result | None = None, *, prior: str = "auto", model: str = "discrete",
              n_spikes: int | None = None, n_points: int = 1 << 15, seed: int = 0) -> ErrorDecomposition:
    """Error decomposition of the ERM minimiser of ``problem`` (THEORY §6; module docstring).

    Parameters
    ----------
    problem : Problem
        Factorized student (nuclear norm; the decomposition uses the soft-threshold law).
    theory_result : Result, optional
        State-evolution result (``extras`` with ``eta, delta, eps, q, m``); computed with
        :func:`singlehead.state_evolution.theory` (``prior``) when omitted.
    model, n_spikes :
        Target law used for the spectral integrals, see
        :func:`singlehead.analysis.learned_spectrum.target_law`. Default ``"discrete"``: the
        discrete law of the ``d`` target eigenvalues, the same law as the state evolution's
        ``prior="asymptotic"`` (recovered modes are then the single-atom bulks of ``mu``);
        ``"spiked"`` treats the top eigenvalues as spikes (``d -> inf`` picture, which
        differs from the discrete law by ``O(1)`` for power laws whose spikes carry
        ``w s^2 = O(1)``; it redistributes the mass of absorbed sub-critical spikes over the
        bulk, so its energy accounting — and the sign of ``E_under`` — is only approximate
        at small ``d``).
    n_points, seed : int
        Scrambled-Sobol nodes for the channel expectations.
    """
    if problem.student != "factorized":
        raise ValueError(f"student must be 'factorized' for the error decomposition (got {problem.student!r})")
    if theory_result is None:
        from ..state_evolution import theory

        theory_result = theory(problem, prior=prior)
    ex = theory_result.extras
    eta, delta, eps = float(ex["eta"]), float(ex["delta"]), float(ex["eps"])
    law = target_law(problem, model=model, delta=delta, n_spikes=n_spikes)
    cap = problem.kappa if problem.kappa < 1 else None
    parts = _matrix_parts(law, delta * delta, eta, eps, cap)
    Q0 = parts["Q0"]
    E_approx = parts["E_approx_shrinkage"] + parts["E_approx_misalignment"] + parts["E_approx_self"]
    me = parts["E_over"] + parts["E_under"] + E_approx
    me_law = Q0 - 2 * parts["m_law"] + parts["q_law"]
    q, m = parts["q_law"], parts["m_law"]
    rho = m / Q0
    r = q - m * m / Q0
    sens = channel_sensitivities(problem, Q0, rho=rho, n_points=n_points, seed=seed)
    c_r0, c_s, rho0, c_r = sens["c_r"], sens["c_s"], sens["rho0"], sens["c_r_rho"]
    E_mis = Q0 * (rho - rho0) ** 2
    E_par = Q0 * (1.0 - rho) ** 2
    e0 = 0.0
    te_quad = e0 + c_r0 * (me - E_par) + c_s * E_mis
    te_scale = channel_test_error(problem, Q0, rho * Q0, rho * rho * Q0, n_points=n_points, seed=seed)
    te_lin = e0 + c_r * (me - E_par) + te_scale
    c2 = (te_scale / c_r - E_par) / E_mis if E_mis > 0 else math.nan
    te_exact = channel_test_error(problem, Q0, m, q, n_points=n_points, seed=seed)
    te = float(theory_result.test_error)
    return ErrorDecomposition(
        E_over=parts["E_over"], E_under=parts["E_under"], E_approx=E_approx, E_mismatch=E_mis,
        E_approx_shrinkage=parts["E_approx_shrinkage"], E_approx_misalignment=parts["E_approx_misalignment"],
        E_approx_self=parts["E_approx_self"], matrix_error=me, matrix_error_law=me_law,
        matrix_error_theory=float(theory_result.matrix_error), quadrature_gap=me - me_law,
        e0=e0, e0_noisy=sens["e0_noisy"], c_r=c_r, c_s=c_s, c1=1.0, c2=c2, rho=rho, rho0=rho0, r=r,
        c_r0=c_r0, c2_quadratic=c_s / c_r0 - 1.0, test_error_scale=te_scale, test_error_quadratic=te_quad,
        test_error=te, test_error_exact=te_exact, test_error_linear=te_lin,
        relative_error=abs(te_lin - te) / te if te > 0 else math.nan, Q0=Q0, q=q, m=m,
        recovered_modes=parts["recovered"],
    )

"""Bayes-optimal baseline of the attention-indexed model (docs: Theory, :ref:`theory-bayes`).

Source: the Bayes-optimal analysis of the attention-indexed model, arXiv 2506.01582, with the
rotation-invariant denoising MMSE of Bun, Allez, Bouchaud & Potters (2016). Conventions as in
the docs (Theory, :ref:`theory-logits`, :ref:`theory-targets`; ``Q0 = Tr S0^2/d``; ``K = T(T+1)/2`` logits per sequence,
the diagonal
ones with doubled variance, see ``singlehead.numerics.prox``).

**Fixed point** (single overlap ``q = E Tr(<S> S0)/d``, Nishimori ``m = q``)::

    q    = Q0 - v + (4 pi^2/3) v^2 int mu_v(x)^3 dx ,   v = 1/qhat ,  mu_v = mu_{S0} ⊞ SC(v)
    qhat = 2 c_T alpha / (Q0 - q + Delta/2)

``MMSE = Q0 - q`` (matrix error of the posterior mean). ``c_T`` is the number of informative
logit directions (:func:`singlehead.thresholds.informative_directions`). For the noiseless
softmax channel this is the baseline of the docs (Theory, :ref:`theory-bayes`). **(derived here)** With label noise, the
softmax labels
reveal ``M(z0 + xi)`` up to the global shift, i.e. ``c_T`` Gaussian observations with noise
variance ``Delta/2`` each, hence ``Q0 - q + Delta/2`` in the denominator; the linear
channel observes all ``K`` components. The temperature ``beta0`` carries no information.

**General output channel (derived here).** In the ``K`` field coordinates (every component of
the teacher's logits of variance ``Q0``, label noise ``N(0, Delta/2)`` per component), with
``Z_out(y; omega, V) = int P(y|z) N(z; omega, V I_K) dz`` and ``g_out = grad_omega log Z_out``::

    qhat = 2 alpha E_{omega ~ N(0, q I_K)} sum_y Z_out ||g_out||^2 ,   V = Q0 - q

(``alpha`` times the output channel's Fisher information; the prior side is unchanged). For
labels revealing ``c_T`` directions of ``z + xi``, ``g_out = P(w - omega)/(V + Delta/2)`` and the
average is ``c_T/(V + Delta/2)``: the closed form above, which these channels keep. A channel
with :attr:`~singlehead.model.channels.Channel.own_bayes_output` supplies the average
(:meth:`~singlehead.model.channels.Channel.bayes_output_information`); for ``hardmax``
(one-hot row-argmax labels) ``Z_out`` is a Gaussian polytope probability (bivariate normal
orthant at ``T = 2``), see :mod:`singlehead.model.channels.hardmax`. The fixed point then solves
``V = mmse_den(1/qhat(V))``.

**Test error of the Bayes estimator (choice made here).** The Bayes-optimal predictor of a
fresh label is the posterior mean of the *output*, ``E[chan_beta0(M(z0)) | data, X]``. In the
high-dimensional limit the fresh logits are, given the data, ``z0 = omega + sqrt(Q0 - q) xi``
with ``omega ~ N(0, q)`` (the logits of the posterior-mean matrix) and ``xi ~ N(0, 1)``
independent, per component. So

* ``test_error`` = ``E_omega Var_xi[chan_beta0(M(omega + sqrt(Q0-q) xi))]`` (summed over the
  ``T x T`` entries): the Bayes-optimal test error against noiseless labels, a lower bound on
  the test error of *any* estimator, ERM included;
* ``test_error_noisy``: the same against noisy labels (variance ``Q0 - q + Delta/2``);
* ``extras["test_error_plugin"]``: error of plugging the posterior-mean matrix into the
  channel, ``E ||chan_beta0(M(z0)) - chan_beta0(M(omega))||^2`` with ``Cov(z0, omega) = q`` —
  the error of an estimator of ``S0``, not a bound on ERM.

Both use fixed scrambled Sobol nodes (nested: outer ``omega``, inner ``xi``); for the linear
channel both equal ``2 K (Q0 - q)`` exactly.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from scipy import optimize, stats
from scipy.stats import qmc

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.numerics.attention_maps import vec_to_mat
from singlehead.state_evolution import PriorModel, prior_model
from singlehead.thresholds import informative_directions

__all__ = ["denoising_mmse", "bayes_overlap", "bayes_test_errors", "bayes_optimal"]


def denoising_mmse(prior: PriorModel, v: float) -> float:
    """Rotation-invariant MMSE of ``S0`` from ``S0 + sqrt(v) Z`` per ``d``:
    ``v - (4 pi^2/3) v^2 int mu_v^3``."""
    if v <= 0:
        return 0.0
    return v - (4 * math.pi**2 / 3) * v * v * prior.rie_mmse_integral(v)


def bayes_overlap(problem: Problem, prior: PriorModel | None = None, *, prior_mode: str = "auto") -> dict[str, float]:
    """Solve the Bayes fixed point; returns ``q, qhat, mmse``.

    The MMSE ``V = Q0 - q`` solves ``V = mmse_den((V + Delta/2)/(2 c_T alpha))`` (channels with their own
    Bayes output side: ``V = mmse_den(1/qhat(V))``, ``qhat = 2 alpha`` times
    :meth:`~singlehead.model.channels.Channel.bayes_output_information`); the relevant
    (largest, reached from the uninformed start ``V = Q0``) root is bracketed by a downward
    geometric scan and refined by Brent's method. ``V = 0`` (perfect recovery) when no positive
    root exists (noiseless only).
    """
    ch = problem.channel
    if not (ch.labels_reveal_logits or ch.own_bayes_output):
        raise ValueError(
            f"channel must be one whose labels reveal the teacher's noisy logits, or one with its own Bayes output "
            f"side, for the Bayes-optimal baseline (Channel.labels_reveal_logits / Channel.own_bayes_output; got "
            f"{ch.name!r}, which has no Bayes estimator here)"
        )
    pm = prior if prior is not None else prior_model(problem, prior_mode)
    Q0 = pm.Q0
    c = informative_directions(problem)
    a = 2 * c * problem.alpha
    Dh = problem.noise / 2

    if ch.own_bayes_output:

        def qhat_of(V: float) -> float:
            return 2 * problem.alpha * ch.bayes_output_information(problem.T, Q0 - V, V, problem.noise)

        def G(V: float) -> float:
            qh = qhat_of(V)
            return denoising_mmse(pm, 1.0 / qh if qh > 0 else math.inf) - V
    else:

        def qhat_of(V: float) -> float:
            return a / (V + Dh) if V + Dh > 0 else math.inf

        def G(V: float) -> float:
            return denoising_mmse(pm, (V + Dh) / a) - V

    grid = Q0 * np.geomspace(1.0, 1e-9, 80)
    V = 0.0
    prev = grid[0]
    for Vg in grid:
        if G(Vg) >= 0:
            V = Vg if Vg == prev else optimize.brentq(G, Vg, prev, xtol=1e-14 * Q0, rtol=1e-12)
            break
        prev = Vg
    else:
        if Dh > 0:  # root below the scan: tiny V (huge alpha)
            V = optimize.brentq(G, 0.0, grid[-1], xtol=1e-16)
    q = Q0 - V
    qhat = qhat_of(V)
    return {"q": q, "qhat": qhat, "mmse": V, "Q0": Q0}


def _sobol_normal(dim: int, n: int, seed: int) -> np.ndarray:
    m = max(1, int(math.ceil(math.log2(max(2, n)))))
    u = qmc.Sobol(d=dim, scramble=True, seed=np.random.default_rng(seed)).random_base2(m)
    return stats.norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))


def bayes_test_errors(
    problem: Problem, q: float, Q0: float, *, n_outer: int = 2048, n_inner: int = 128, seed: int = 0
) -> dict[str, float]:
    """Bayes-optimal (posterior-mean prediction) and plug-in test errors at overlap ``q``.

    See the module docstring. ``n_outer`` scrambled Sobol nodes for ``omega`` (``K`` dims), a
    fixed set of ``n_inner`` nodes for ``xi`` (``K`` dims); the inner sample variance uses the
    ``n/(n-1)`` correction.
    """
    T, K = problem.T, problem.n_pairs
    V = max(Q0 - q, 0.0)
    Dh = problem.noise / 2
    ch, b0 = problem.channel, problem.beta0
    closed = ch.closed_form_test_errors(T, Q0, q, q, problem.noise)
    if closed is not None:  # the posterior mean is linear in the fields: plug-in and Bayes coincide
        return {
            "test_error": closed["test_error"],
            "test_error_noisy": closed["test_error_noisy"],
            "test_error_plugin": closed["test_error"],
        }
    ss = np.random.SeedSequence(seed)
    s1, s2, s3 = (int(s.generate_state(1)[0]) for s in ss.spawn(3))
    W = _sobol_normal(K, n_outer, s1) * math.sqrt(max(q, 0.0))
    Xi = _sobol_normal(K, n_inner, s2)
    out: dict[str, float] = {}
    ni = Xi.shape[0]
    for name, var in (("test_error", V), ("test_error_noisy", V + Dh)):
        tot = 0.0
        for chunk in np.array_split(np.arange(W.shape[0]), max(1, W.shape[0] * ni * T * T // 2_000_000)):
            Z = W[chunk, None, :] + math.sqrt(var) * Xi[None, :, :]
            A = ch.teacher_attention(vec_to_mat(Z.reshape(-1, K), T), b0).reshape(len(chunk), ni, T, T)
            tot += float(A.var(axis=1, ddof=1).sum())
        out[name] = tot / W.shape[0]
    # plug-in: (z0, omega) with Cov [[Q0, q], [q, q]]
    U = _sobol_normal(2 * K, n_outer * 4, s3)
    om = math.sqrt(max(q, 0.0)) * U[:, :K]
    z0 = om + math.sqrt(V) * U[:, K:]
    diff = ch.teacher_attention(vec_to_mat(z0, T), b0) - ch.teacher_attention(vec_to_mat(om, T), b0)
    out["test_error_plugin"] = float(np.einsum("nab,nab->n", diff, diff).mean())
    return out


def bayes_optimal(
    problem: Problem,
    *,
    prior: str | PriorModel = "auto",
    n_outer: int = 2048,
    n_inner: int = 128,
    node_seed: int = 0,
) -> Result:
    """Bayes-optimal curve point for ``problem`` (student fields are ignored).

    Returns a :class:`~singlehead.model.results.Result` with ``source="bayes"``: ``test_error``
    (posterior-mean prediction, noiseless labels), ``test_error_noisy``, ``matrix_error``
    ``= mmse = Q0 - q``; ``train_error``, ``penalty``, ``rank_fraction`` are nan. ``extras``:
    ``q, qhat, mmse, Q0, test_error_plugin, c_T``.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, bayes_optimal
    >>> result = bayes_optimal(Problem(T=2, alpha=0.1, noise=0.0, target=MPTarget(kappa0=0.5)))
    >>> result.source, round(result.test_error, 2)
    ('bayes', 0.12)
    """
    problem.check_single_head("the Bayes-optimal baseline")
    t0 = time.perf_counter()
    pm = prior if isinstance(prior, PriorModel) else prior_model(problem, prior)
    ov = bayes_overlap(problem, pm)
    te = bayes_test_errors(problem, ov["q"], ov["Q0"], n_outer=n_outer, n_inner=n_inner, seed=node_seed)
    extras: dict[str, Any] = {
        **ov,
        "test_error_plugin": te["test_error_plugin"],
        "c_T": informative_directions(problem),
    }
    return Result(
        source="bayes",
        problem=problem.to_dict(),
        test_error=te["test_error"],
        test_error_noisy=te["test_error_noisy"],
        matrix_error=ov["mmse"],
        converged=True,
        iterations=0,
        runtime_s=time.perf_counter() - t0,
        message="closed-form fixed point and quadrature",
        extras=extras,
    )

"""Channel side of the error decomposition: test error as a function of ``(m, q)`` and its sensitivities.

``TE(rho, r)`` is the test error of a student with ``m = rho Q0`` and ``q = rho^2 Q0 + r``
(``r`` the orthogonal error, see :mod:`singlehead.analysis.decomposition`). :func:`se_test_error` uses the
state evolution's own quadrature (so the decomposition's identity holds to rounding);
:func:`channel_test_error` and :func:`channel_sensitivities` use independent Sobol nodes (a
cross-check of that quadrature).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats
from scipy.stats import qmc

from singlehead.model.problem import Problem
from singlehead.numerics.attention_maps import vec_to_mat
from singlehead.state_evolution import SEOptions, channel_test_errors

__all__ = ["channel_test_error", "channel_sensitivities", "default_quadrature", "se_test_error"]


def _nodes(K: int, n_points: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    mexp = max(4, int(math.ceil(math.log2(max(16, n_points)))))
    u = qmc.Sobol(d=2 * K, scramble=True, seed=np.random.default_rng(seed)).random_base2(mexp)
    g = stats.norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))
    return g[:, :K], g[:, K:]


def channel_test_error(
    problem: Problem, Q0: float, m: float, q: float, *, noisy: bool = False, n_points: int = 1 << 15, seed: int = 0
) -> float:
    """``E ||A_beta0(z0 [+ xi]) - A_beta(z)||_F^2`` with ``(z0_k, z_k)`` of covariance ``[[Q0, m], [m, q]]``.

    ``K = T(T+1)/2`` iid pairs, symmetric ``T x T`` logit matrices with the diagonal multiplied by
    ``sqrt(2)`` (docs: Theory, :ref:`theory-output-side`); ``xi_k ~ N(0, Delta/2)`` when ``noisy``. Scrambled-Sobol
    quadrature
    with a fixed seed.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.analysis import channel_test_error
    >>> channel_test_error(Problem(T=2), 1.5, 1.5, 1.5)   # m = q = Q0: the student is the target
    0.0
    >>> channel_test_error(Problem(T=2), 1.5, 1.0, 1.5) > 0.0
    True
    """
    T, K = problem.T, problem.n_pairs
    ch = problem.channel
    closed = ch.closed_form_test_errors(T, Q0, q, m, problem.noise)
    if closed is not None:
        return float(closed["test_error_noisy" if noisy else "test_error"])
    u0, u1 = _nodes(K, n_points, seed)
    rho, r = m / Q0, max(q - m * m / Q0, 0.0)
    z0 = math.sqrt(Q0) * u0
    z = rho * z0 + math.sqrt(r) * u1
    y = z0
    if noisy and problem.noise > 0:
        xi = math.sqrt(problem.noise / 2.0) * _nodes(K, n_points, seed + 1)[0]
        y = z0 + xi
    diff = ch.teacher_attention(vec_to_mat(y, T), problem.beta0) - ch.attention(vec_to_mat(z, T), problem.beta)
    return float(np.mean(np.einsum("nab,nab->n", diff, diff)))


def channel_sensitivities(
    problem: Problem, Q0: float, *, rho: float | None = None, n_points: int = 1 << 15, seed: int = 0, h: float = 1e-5
) -> dict[str, float]:
    """``c_r``, ``c_s``, ``rho0`` and the noisy-label floor ``e0_noisy`` of the channel (module docstring).

    ``c_r`` and ``c_s`` are taken at the optimal scale ``rho0``; with ``rho`` given,
    ``c_r_rho = E ||J(rho z0) zeta||^2`` is returned as well. ``J v`` is a central difference
    ``(A(x + h v) - A(x - h v)) / (2h)`` of the smooth channel
    map (truncation error ``O(h^2)``), averaged on fixed scrambled-Sobol nodes.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.analysis import channel_sensitivities
    >>> sens = channel_sensitivities(Problem(T=2), Q0=1.5)
    >>> sens["c_r"] > 0.0, sens["rho0"]                 # beta = beta0: the best scale is 1
    (True, 1.0)
    """
    T, K = problem.T, problem.n_pairs
    ch = problem.channel
    rho0 = ch.logit_scale(problem.beta, problem.beta0)
    hc = ch.fit_hessian_constant()
    if hc is not None:  # a linear map: ||J v||^2 = (hc/2) ||v||^2 exactly
        c = 0.5 * hc * K
        return {"c_r": c, "c_s": c, "c_r_rho": c, "rho0": rho0, "e0_noisy": c * problem.noise / 2.0}
    u0, u1 = _nodes(K, n_points, seed)
    z0 = math.sqrt(Q0) * u0
    x = rho0 * z0

    def jv(x: np.ndarray, v: np.ndarray) -> np.ndarray:
        return (
            ch.attention(vec_to_mat(x + h * v, T), problem.beta) - ch.attention(vec_to_mat(x - h * v, T), problem.beta)
        ) / (2 * h)

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
        dd = ch.teacher_attention(vec_to_mat(z0 + xi, T), problem.beta0) - ch.teacher_attention(
            vec_to_mat(z0, T), problem.beta0
        )
        e0n = float(np.mean(np.einsum("nab,nab->n", dd, dd)))
    return {"c_r": c_r, "c_s": c_s, "c_r_rho": c_r_rho, "rho0": rho0, "e0_noisy": e0n}


def default_quadrature(problem: Problem):
    """The state evolution's default node set (``None`` for a closed-form channel)."""
    return SEOptions().quadrature(problem)


def se_test_error(problem: Problem, Q0: float, rho: np.ndarray | float, r: float, quad) -> np.ndarray:
    """``TE(rho, r)`` with the state evolution's test-error function (vectorised over ``rho``)."""
    rho = np.atleast_1d(np.asarray(rho, dtype=float))
    return np.array(
        [
            channel_test_errors(float(x * x * Q0 + r), float(x * Q0), problem=problem, Q0=Q0, quad=quad)["test_error"]
            for x in rho
        ]
    )

"""State evolution on a chosen branch of the output prox, and its replicon, for the peak investigation.

The library's SE (:func:`singlehead.theory`) takes, node by node, the *global* minimum of the
non-convex output proximal problem

    h* = argmin_h ||h - z||^2/(2 Sigma) + ||chan_beta0(M(y)) - chan_beta(M(h))||_F^2

over Newton runs from ``z``, the interpolating point and their midpoint. This module builds the
same SE map with *one* Newton start per node, i.e. the local minimum reached from

* ``"z"``: the student's own field ``z`` (the branch the cold prox follows first);
* ``"teacher"``: the teacher's logits ``(beta0/beta) y`` (noise included: the labels' own logits,
  which interpolate them exactly), the authors' choice for their state evolution;
* ``"global"``: the library's three starts (a check: it must reproduce ``output_side``'s cold map).

It uses only the SE's building blocks (``output_side`` with explicit Newton starts, ``prior_side``,
``channel_test_errors``); the Newton starts are built on the output quadrature's nodes with the
same Gaussian construction as :mod:`singlehead.state_evolution.output` (``y = sqrt(Vy) u1``,
``z = (m/sqrt(Vy)) u1 + sqrt(q - m^2/Vy) u2``, ``Vy = Q0 + Delta/2``; :func:`branch_output` checks it
against the library's cold map).

Fixed points are solved in the SE's unconstrained coordinates ``u = (log q, atanh(m/sqrt(Q0 q)),
log Sigma)`` by MINPACK's hybrid method, after a few damped steps, from a given start (the global
fixed point).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from singlehead import Problem, Result, SEOptions, stability
from singlehead.runs import Cache, cached
from singlehead.state_evolution import (
    OutputQuadrature,
    PriorModel,
    channel_test_errors,
    output_side,
    prior_model,
    prior_side,
)

__all__ = ["BRANCHES", "branch_output", "solve_branch", "replicon_terms", "per_seed_theory"]

BRANCHES = ("global", "z", "teacher")


def _nodes(q: float, m: float, Q0: float, problem: Problem, quad: OutputQuadrature) -> tuple[np.ndarray, np.ndarray]:
    """Teacher logits ``y`` (noise included) and student fields ``z`` on the quadrature nodes."""
    K = problem.n_pairs
    X = quad.flat
    Vy = Q0 + problem.noise / 2.0
    s0 = math.sqrt(Vy)
    y = s0 * X[:, :K]
    z = (m / s0) * X[:, :K] + math.sqrt(max(q - m * m / Vy, 0.0)) * X[:, K:]
    return y, z


def branch_output(
    x: np.ndarray, problem: Problem, Q0: float, quad: OutputQuadrature, branch: str, jacobian: bool = False
):
    """The output side at ``x = (q, m, Sigma)`` with the prox minimum of ``branch`` (see module docstring)."""
    if branch not in BRANCHES:
        raise ValueError(f"branch must be one of {BRANCHES} (got {branch!r})")
    q, m, Sigma = map(float, x)
    if branch == "global":
        return output_side(q, m, Sigma, problem=problem, Q0=Q0, quad=quad, jacobian=jacobian)
    y, z = _nodes(q, m, Q0, problem, quad)
    start = z if branch == "z" else (problem.beta0 / problem.beta) * y
    return output_side(q, m, Sigma, problem=problem, Q0=Q0, quad=quad, warm=[start], jacobian=jacobian)


def check_nodes(problem: Problem, x: np.ndarray, Q0: float, quad: OutputQuadrature) -> float:
    """Largest relative difference of ``(qhat, mhat, Sigmahat)`` between the library's cold map and the
    same three starts built here (0 up to round-off when the node construction matches)."""
    from singlehead.numerics.prox import interpolating_start

    q, m, Sigma = map(float, x)
    y, z = _nodes(q, m, Q0, problem, quad)
    hi = interpolating_start(z, y, problem.beta0 / problem.beta, problem.T)
    a = output_side(q, m, Sigma, problem=problem, Q0=Q0, quad=quad)
    b = output_side(q, m, Sigma, problem=problem, Q0=Q0, quad=quad, warm=[z, hi, 0.5 * (z + hi)])
    va, vb = np.array([a.qhat, a.mhat, a.Sigmahat]), np.array([b.qhat, b.mhat, b.Sigmahat])
    return float(np.max(np.abs(va - vb) / np.abs(va)))


def _to_u(x: np.ndarray, Q0: float) -> np.ndarray:
    q, m, S = map(float, x)
    return np.array(
        [math.log(q), math.atanh(float(np.clip(m / math.sqrt(Q0 * q), -1 + 1e-12, 1 - 1e-12))), math.log(S)]
    )


def _from_u(u: np.ndarray, Q0: float) -> np.ndarray:
    q = math.exp(float(np.clip(u[0], -700, 700)))
    return np.array([q, math.tanh(u[1]) * math.sqrt(Q0 * q), math.exp(float(np.clip(u[2], -700, 700)))])


def solve_branch(
    problem: Problem,
    x0: np.ndarray,
    branch: str,
    *,
    prior: PriorModel | None = None,
    quad: OutputQuadrature | None = None,
    tol: float = 1e-7,
    damped_steps: int = 8,
) -> dict[str, Any]:
    """Fixed point of the SE with the prox minimum of ``branch``, from ``x0 = (q, m, Sigma)``.

    Returns a dict with ``q, m, Sigma, qhat, mhat, Sigmahat``, ``test_error``, ``train_error`` (and their
    quadrature errors), ``residual`` (relative change of ``(q, m, Sigma)`` in one SE step; ``max(|dq|,
    |dm|)/Q0`` and ``|dSigma|/Sigma`` as the library), ``evaluations`` and ``converged`` (residual < 1e-4).
    """
    from scipy import optimize

    o = SEOptions()
    prior = prior or prior_model(problem, draws=o.draws, seed=o.node_seed)
    quad = quad or o.quadrature(problem)
    Q0 = prior.Q0
    n_eval = [0]
    best: list = [math.inf, np.asarray(x0, float)]

    def F(x: np.ndarray) -> np.ndarray:
        n_eval[0] += 1
        out = branch_output(x, problem, Q0, quad, branch)
        pr = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=problem, prior=prior)
        fx = np.array([pr.q, pr.m, pr.Sigma])
        r = max(abs(fx[0] - x[0]) / Q0, abs(fx[1] - x[1]) / Q0, abs(fx[2] - x[2]) / x[2])
        if r < best[0]:
            best[0], best[1] = r, np.array(x, float)
        return fx

    x = np.asarray(x0, float)
    for _ in range(damped_steps):  # bring the start into the root finder's basin
        fx = F(x)
        if not (np.all(np.isfinite(fx)) and fx[0] > 0 and fx[2] > 0 and fx[1] ** 2 < Q0 * fx[0]):
            break
        x = _from_u(0.5 * _to_u(x, Q0) + 0.5 * _to_u(fx, Q0), Q0)
        if best[0] < tol:
            break

    def G(u: np.ndarray) -> np.ndarray:
        fx = F(_from_u(u, Q0))
        if not (np.all(np.isfinite(fx)) and fx[0] > 0 and fx[2] > 0 and fx[1] ** 2 < Q0 * fx[0]):
            return np.full(3, 1e3)
        return _to_u(fx, Q0) - u

    if best[0] >= tol:
        optimize.root(G, _to_u(best[1], Q0), method="hybr", options={"xtol": tol, "maxfev": 80})
    return summarize(problem, best[1], branch, prior, quad) | {
        "residual": float(best[0]),
        "evaluations": n_eval[0],
        "converged": bool(best[0] < 1e-4),
    }


def summarize(
    problem: Problem, x: np.ndarray, branch: str, prior: PriorModel, quad: OutputQuadrature
) -> dict[str, Any]:
    """Order parameters, conjugates, errors and the replicon terms at ``x`` on ``branch``."""
    Q0 = prior.Q0
    out = branch_output(x, problem, Q0, quad, branch, jacobian=True)
    pr = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=problem, prior=prior)
    te = channel_test_errors(float(x[0]), float(x[1]), problem=problem, Q0=Q0, quad=quad)
    rt = replicon_terms(problem, out, pr, x, Q0)
    return {
        "branch": branch,
        "q": float(x[0]),
        "m": float(x[1]),
        "Sigma": float(x[2]),
        "qhat": out.qhat,
        "mhat": out.mhat,
        "Sigmahat": out.Sigmahat,
        "test_error": te["test_error"],
        "test_error_err": te["test_error_se"],
        "train_error": out.train_error,
        "train_error_err": out.err.get("train_error", math.nan),
        "matrix_error": Q0 - 2 * float(x[1]) + float(x[0]),
        **rt,
    }


def replicon_terms(problem: Problem, out, pr, x: np.ndarray, Q0: float) -> dict[str, float]:
    """Smooth replicon ``AT = [2 alpha E||H (I + Sigma H)^{-1}||_F^2] * [P / Sigmahat^2]`` and the jump share.

    ``P = int int ((f(x) - f(y))/(x - y))^2 mu_delta(dx) mu_delta(dy)`` with ``f(x) = (x - eps)_+``: the
    prior factor of :func:`singlehead.state_evolution.stability`, applied to a :class:`~singlehead.Result`
    holding the point ``x = (q, m, Sigma)`` (the prior factor depends on ``Sigmahat, eps, delta`` and the
    rank cap only; the check's own output factor, on the global branch, is not used); the output factor and
    ``jump_weight = 1 - Sigmahat / (2 alpha E tr H (I + Sigma H)^{-1})``
    from ``out``, the output side on the branch.
    """
    q, m, Sigma = map(float, x)
    point = Result(
        source="theory",
        problem=problem.to_dict(),
        extras={
            "q": q,
            "m": m,
            "Sigma": Sigma,
            "Q0": Q0,
            "Sigmahat": out.Sigmahat,
            "eps": pr.eps,
            "delta": pr.delta,
            "cap_binds": bool(getattr(pr, "cap_binds", False)),
        },
    )
    prior_f = stability(problem, point).prior_factor
    if out.scramble_jacobian is None:
        return {"replicon": math.nan, "output_factor": math.nan, "prior_factor": prior_f, "jump_weight": math.nan}
    per = 2 * problem.alpha * out.scramble_jacobian
    out_f, sh_pw = (float(v) for v in per.mean(axis=0))
    return {
        "replicon": out_f * prior_f,
        "output_factor": out_f,
        "prior_factor": prior_f,
        "jump_weight": 1.0 - out.Sigmahat / sh_pw,
    }


def per_seed_theory(cache: Cache, make, d: int, seed: int) -> dict:
    """SE test error of ``make(d)`` with the target replaced by the spectrum of data seed ``seed``'s own draw.

    Separates the finite-size effect of the target's spectrum (a rank ``kappa0 d`` target at small d) from the
    rest: the SE with a :class:`~singlehead.CustomTarget` holding the ``d`` eigenvalues that ``simulate`` drew.
    """
    from singlehead import CustomTarget, theory
    from singlehead.numerics.rng import child_seeds

    prob = make(d)

    def run() -> dict:
        S0 = prob.target.sample(d, child_seeds(seed, 4)[0]).numpy()
        eig = np.clip(np.linalg.eigvalsh(S0), 0.0, None)
        r = theory(prob.replace(target=CustomTarget(tuple(float(x) for x in eig))))
        return {"test_error": r.test_error, "train_error": r.train_error, "converged": bool(r.converged)}

    return cached(cache, {"stage": "seed-theory", "problem": prob.to_dict(), "data_seed": seed}, run)

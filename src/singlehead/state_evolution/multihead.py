"""The theory of multi-head tied attention where it is exact: the linear channel, as one effective head.

A student of ``H`` tied heads ``S_h = W_h W_h^T/sqrt(p d)`` predicts, on the linear channel, the mean of
the heads' logit matrices, ``mean_h h(S_h) = h(S_eff)`` with ``S_eff = (1/H) sum_h S_h``; its weight
decay is ``lam d sum_h Tr S_h = H lam d Tr S_eff``. The matrices ``S_eff`` reachable this way are the
PSD matrices of rank at most ``min(H p, d)``, and every decomposition of one ``S_eff`` into heads has the
same penalty, so ERM over the heads is ERM over ``S_eff`` of one factorized head with ``kappa -> min(1, H
kappa)`` and ``lam -> H lam``.

A teacher of ``H0`` heads labels with ``h(S0_eff) + xi``, ``S0_eff = (1/H0) sum_k S0_k``. For ``H0 = 1``
that is the single-head teacher. For ``H0`` independent Marchenko--Pastur heads
``S0_k = W0_k W0_k^T/sqrt(p0 d)``, ``S0_eff = c S0'`` with ``c = 1/sqrt(H0)`` and ``S0'`` the MP target of
rank ratio ``H0 kappa0`` (the columns of the ``W0_k`` side by side). Writing ``S_eff = c S'``, the
objective is ``c^2`` times the single-head objective of ``S'`` with target ``S0'``, regularisation
``H lam/c`` and noise ``Delta/c^2``. So the multi-head problem is the single-head problem

    kappa' = min(1, H kappa),  lam' = H sqrt(H0) lam,  noise' = H0 Delta,  target' = MP(H0 kappa0)
    (target' = the target, lam' = H lam, noise' = Delta when H0 = 1),

and its errors, penalty, objective and overlaps (``q, m, Q0``, matrix error) are ``c^2 = 1/H0`` times the
effective ones, the spectrum's scale (``first_moment``, ``delta``, ``eps``, ``cutoff``) ``c`` times.
Other teachers of several heads (the mean of independent power-law heads is not a power-law target) and
the softmax channels (whose output, a mean of softmaxes, is not a function of ``S_eff``) have no
reduction to one head: :func:`effective_single_head` refuses them (:func:`singlehead.theory` solves those
by the experimental multi-head state evolution, ``singlehead.state_evolution.multihead_se``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from singlehead.model.problem import Problem
from singlehead.model.results import Result

__all__ = ["effective_single_head", "multihead_result"]

# Result fields and extras that scale like S^2 (c^2) and like S (c) from the effective problem
_SCALE_C2 = ("test_error", "test_error_noisy", "train_error", "penalty", "matrix_error")
_EXTRAS_C2 = (
    "q",
    "m",
    "Q0",
    "objective",
    "test_error_se",
    "test_error_noisy_se",
    "train_error_se",
    "penalty_se",
    "matrix_error_se",
)
_EXTRAS_C = ("first_moment", "delta", "eps", "cutoff")
_QUADRATURE_C2 = ("train_error", "test_error", "test_error_noisy")


def effective_single_head(problem: Problem) -> tuple[Problem, float]:
    """The single-head problem whose theory is ``problem``'s, and the factor ``c^2`` of its errors.

    Returns ``(effective, c2)``: ``problem`` itself and 1 for a single-head problem; for the linear
    channel with ``H`` student heads and ``H0`` teacher heads, the problem of the module docstring and
    ``c2 = 1/H0``. Raises ``ValueError`` where no multi-head theory is available: a softmax (or other
    non-linear) channel with ``H > 1`` or ``H0 > 1``, or ``H0 > 1`` with a target other than
    :class:`~singlehead.MPTarget`.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem
    >>> p = Problem(channel="linear", T=1, kappa=0.25, lam=0.01, noise=0.1, target=MPTarget(kappa0=0.5),
    ...             heads=2, teacher_heads=4)
    >>> eff, c2 = effective_single_head(p)
    >>> eff.kappa, eff.lam, eff.noise, eff.target.kappa0, eff.heads, c2
    (0.5, 0.04, 0.4, 2.0, 1, 0.25)
    """
    if not problem.multihead:
        return problem, 1.0
    H, H0 = problem.heads, problem.teacher_heads
    if problem.channel.multihead_theory != "reduction":
        raise ValueError(
            f"channel: the {problem.channel.name!r} channel's output is not linear in the logits, so "
            f"{H} heads do not reduce to one (heads={H}, teacher_heads={H0}); the exact reduction covers "
            "channels with Channel.multihead_theory == 'reduction' (the 'linear' channel)"
        )
    target, c2 = problem.target, 1.0
    if H0 > 1:
        target = problem.target.mean_of_heads(H0)
        if target is None:
            raise ValueError(
                f"teacher_heads: the theory of {H0} teacher heads needs a target whose mean of "
                f"independent heads is again a target law (an MP target is); the mean of {H0} "
                f"independent {problem.target.name!r} heads has none here (got teacher_heads={H0})"
            )
        c2 = 1.0 / H0
    c = math.sqrt(c2)
    effective = problem.replace(
        heads=1,
        teacher_heads=1,
        kappa=min(1.0, H * problem.kappa),
        lam=H * problem.lam / c,
        noise=problem.noise / c2,
        target=target,
    )
    return effective, c2


def multihead_result(result: Result, problem: Problem, effective: Problem, c2: float) -> Result:
    """``result`` (the theory of ``effective``, from :func:`effective_single_head`) in ``problem``'s units.

    Errors, penalty, matrix error, ``q, m, Q0``, the objective and the metrics' quadrature errors are
    multiplied by ``c2``; ``first_moment, delta, eps, cutoff`` by ``sqrt(c2)``; ``collapse_lam`` is the
    problem's ``lam`` at the effective collapse (``collapse_lam' sqrt(c2)/H``). The other order parameters
    (``Sigma``, the conjugates, ``eta``, ...) are the effective problem's. Adds ``effective_problem`` (its
    ``to_dict``) and ``effective_scale`` (``c2``) to the extras; ``problem`` becomes ``problem.to_dict()``.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem, Result
    >>> p = Problem(channel="linear", T=1, target=MPTarget(kappa0=0.5), heads=2, teacher_heads=2)
    >>> eff, c2 = effective_single_head(p)
    >>> r = multihead_result(Result("theory", eff.to_dict(), test_error=0.2, extras={"q": 1.0}), p, eff, c2)
    >>> r.test_error, r.extras["q"], r.problem["heads"], round(r.extras["effective_problem"]["lam"], 6)
    (0.1, 0.5, 2, 0.028284)
    """
    c = math.sqrt(c2)
    extras: dict[str, Any] = dict(result.extras)
    for k in _EXTRAS_C2:
        if isinstance(extras.get(k), (int, float)) and not isinstance(extras[k], bool):
            extras[k] = c2 * extras[k]
    for k in _EXTRAS_C:
        if isinstance(extras.get(k), (int, float)) and not isinstance(extras[k], bool):
            extras[k] = c * extras[k]
    if isinstance(extras.get("collapse_lam"), (int, float)):
        extras["collapse_lam"] = extras["collapse_lam"] * c / problem.heads
    if isinstance(extras.get("quadrature_error"), dict):
        extras["quadrature_error"] = {
            k: (c2 * v if k in _QUADRATURE_C2 and isinstance(v, (int, float)) else v)
            for k, v in extras["quadrature_error"].items()
        }
    extras.update(effective_problem=effective.to_dict(), effective_scale=c2)
    scaled = {k: c2 * getattr(result, k) for k in _SCALE_C2}
    return dataclasses.replace(result, problem=problem.to_dict(), extras=extras, **scaled)

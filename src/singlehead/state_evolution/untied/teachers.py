"""Teachers of the untied state evolution's prior side: how a target is drawn at the prior's dimension ``D``."""

from __future__ import annotations

from typing import Any

import numpy as np

from singlehead.state_evolution.prior import prior_model

__all__ = ["teacher_sampler", "teacher_norms", "law_quantiles"]


def teacher_sampler(target: Any) -> tuple[Any, bool]:
    """``(draw(D, rng) -> D x D numpy teacher, symmetric)`` for a target of :mod:`singlehead.model.targets`.

    A symmetric teacher is ``diag(s)`` (the prior side is invariant under ``M -> O M O^T``), with
    ``s`` its deterministic spectrum at ``D`` or the ``D`` mid-quantiles of its asymptotic law
    (no teacher-to-teacher fluctuation: the draws then differ by the noise only). A non-symmetric
    teacher is drawn by its ``sample(D, seed)``.
    """
    symmetric = bool(getattr(target, "symmetric", True))

    def draw(D: int, rng: np.random.Generator) -> np.ndarray:
        if not symmetric:
            return np.asarray(target.sample(D, int(rng.integers(2**31))), dtype=float)
        spec = target.spectrum(D)
        return np.diag(spec if spec is not None else law_quantiles(target.spectral_law(D).engine, D))

    return draw, symmetric


def teacher_norms(problem: Any) -> tuple[float, float]:
    """``(Q0_s, Q0_a) = (||M0_s||_F^2/d, ||M0_a||_F^2/d)`` of the problem's target (its SE prior's ``Q0`` for a
    symmetric one)."""
    norms = getattr(problem.target, "block_norms", None)
    if norms is not None:
        return tuple(float(v) for v in norms())
    return float(prior_model(problem).Q0), 0.0


def law_quantiles(law: Any, D: int, grid: int = 20001) -> np.ndarray:
    """The ``D`` mid-quantiles ``F^{-1}((i - 1/2)/D)`` of a law with ``atom_mass`` at 0 and ``ac_density`` on
    ``ac_edges``.

    The continuous part is integrated in ``t``, ``x = lo + (hi - lo)(1 - cos(pi t))/2`` (midpoint rule on
    ``grid`` cells), whose Jacobian vanishes at both edges like their distance's square root, so that
    inverse-square-root edges (the Marchenko--Pastur law at ``kappa0 = 1``) integrate as accurately as
    square-root ones; the quantile is interpolated in ``t``.
    """
    lo, hi = law.ac_edges()
    t = np.linspace(0.0, 1.0, grid)
    tm = 0.5 * (t[1:] + t[:-1])
    xm = lo + (hi - lo) * 0.5 * (1.0 - np.cos(np.pi * tm))
    mass = law.ac_density(xm) * (hi - lo) * 0.5 * np.pi * np.sin(np.pi * tm) * np.diff(t)
    cdf = np.concatenate([[0.0], np.cumsum(mass)])
    atom = float(law.atom_mass)
    cdf = atom + (1.0 - atom) * cdf / cdf[-1]
    u = (np.arange(D) + 0.5) / D
    tq = np.interp(u, cdf, t)
    return np.where(u <= atom, 0.0, lo + (hi - lo) * 0.5 * (1.0 - np.cos(np.pi * tq)))

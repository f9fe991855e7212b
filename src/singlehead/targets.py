"""Target matrices ``S0`` of the attention-indexed model (THEORY §1).

``sample_target`` draws an ``S0`` on the CPU in float64 from an explicit seed;
``target_eigenvalues`` gives the deterministic spectra of power-law and custom targets.
All targets are PSD; ``Q0 = Tr S0^2 / d``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .data import generator
from .problem import CustomTarget, MPTarget, PowerLawTarget, Problem, Target


def power_law_eigenvalues(gamma: float, d: int, normalisation: str = "sqrt_d") -> np.ndarray:
    """``s_i = A i^(-gamma)``, ``i = 1..d``, with ``A = sqrt(d)`` (``"sqrt_d"``) or ``Q0 = 1`` (``"unit_q0"``)."""
    i = np.arange(1, d + 1, dtype=float)
    s = i ** (-gamma)
    if normalisation == "sqrt_d":
        return math.sqrt(d) * s
    if normalisation == "unit_q0":
        return s / math.sqrt(np.sum(s * s) / d)
    raise ValueError(f"normalisation must be 'sqrt_d' or 'unit_q0' (got {normalisation!r})")


def target_eigenvalues(target: Target, d: int) -> np.ndarray | None:
    """Deterministic spectrum (descending) for power-law/custom targets; ``None`` for random MP targets."""
    if isinstance(target, PowerLawTarget):
        return power_law_eigenvalues(target.gamma, d, target.normalisation)
    if isinstance(target, CustomTarget):
        return np.sort(np.asarray(target.eigenvalues, dtype=float))[::-1]
    return None


def haar_orthogonal(d: int, gen: torch.Generator) -> torch.Tensor:
    """Haar-distributed orthogonal ``d x d`` matrix (QR of a Gaussian with the sign fix)."""
    G = torch.randn(d, d, generator=gen, dtype=torch.float64)
    Q, R = torch.linalg.qr(G)
    return Q * torch.sign(torch.diagonal(R)).unsqueeze(0)


def sample_target(target: Target, d: int, seed: int) -> torch.Tensor:
    """Draw ``S0`` (``d x d``, float64, CPU) from the target specification.

    * MP: ``S0 = W0 W0^T / sqrt(p0 d)``, ``W0 in R^{d x p0}`` iid N(0,1), ``p0 = max(1, round(kappa0 d))``.
    * power-law / custom: ``S0 = O diag(s) O^T`` with ``O`` Haar.
    """
    gen = generator(seed)
    if isinstance(target, MPTarget):
        p0 = max(1, int(round(target.kappa0 * d)))
        W0 = torch.randn(d, p0, generator=gen, dtype=torch.float64)
        return W0 @ W0.T / math.sqrt(p0 * d)
    s = torch.as_tensor(target_eigenvalues(target, d).copy(), dtype=torch.float64)
    O = haar_orthogonal(d, gen)
    S0 = (O * s.unsqueeze(0)) @ O.T
    return 0.5 * (S0 + S0.T)


def problem_target(problem: Problem, seed: int) -> torch.Tensor:
    """``S0`` for ``problem`` (shorthand for :func:`sample_target`)."""
    return sample_target(problem.target, problem.d, seed)

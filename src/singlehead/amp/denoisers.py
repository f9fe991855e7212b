"""Matrix step of GAMP: spectral denoisers (soft threshold, linear shrinkage, RIE) and their exact divergence."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from singlehead.amp.operator import sym_eigh
from singlehead.numerics.spectra import divided_differences, free_convolve_semicircle


def spectral_divergence(nu: np.ndarray, f: np.ndarray, fp: np.ndarray) -> float:
    """Exact divergence of ``R = U diag(nu) U^T -> U diag(f) U^T`` over symmetric matrices.

    ``sum_i f'(nu_i) + sum_{i<j} (f_i - f_j)/(nu_i - nu_j)`` (derivative in the
    Frobenius-orthonormal coordinates of the ``d(d+1)/2``-dimensional space; ties use the mean of
    the two ``f'``; :func:`singlehead.numerics.spectra.divided_differences`). Divide by ``d(d+1)/2`` for the
    per-coordinate divergence of the prior side (docs: Theory, :ref:`theory-prior-side`).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.amp import spectral_divergence
    >>> nu = np.array([1.0, 2.0, 3.0])
    >>> spectral_divergence(nu, nu, np.ones(3))         # identity map: d(d+1)/2 free entries
    6.0
    """
    M = divided_differences(nu, f, fp)
    np.fill_diagonal(M, 0.0)
    return float(np.asarray(fp, dtype=float).sum() + 0.5 * M.sum())


@dataclass
class _Denoised:
    S: np.ndarray
    div: float  # exact divergence (sum over the N = d(d+1)/2 coordinates)
    eigenvalues: np.ndarray  # of S, ascending


def penalty_denoiser(R: np.ndarray, student: Any, t: float, cap: int | None) -> _Denoised:
    """``argmin_S t pen(S) + ||S - R||_F^2/2`` (rank ``<= cap``) for the student's spectral penalty:
    ``f(nu)`` eigenvalue-wise (``ReLU(nu - t)`` for the nuclear norm, ``nu/(1 + 2t)`` for Frobenius)."""
    nu, U = sym_eigh(R)
    f, fp = student.penalty_prox(nu, t)
    if cap is not None and cap < nu.size:
        f[: nu.size - cap] = 0.0  # ascending: keep the top `cap`
        fp[: nu.size - cap] = 0.0
    S = (torch.as_tensor(U * f) @ torch.as_tensor(U).T).numpy()
    return _Denoised(0.5 * (S + S.T), spectral_divergence(nu, f, fp), f)


class RIE:
    """Rotation-invariant posterior mean of ``S0`` from ``R = S0 + sqrt(v) Z`` (Z GOE, SC on [-2, 2]).

    ``xi(x) = x - 2 v H_v(x)``, ``H_v`` the Hilbert transform ``p.v. int mu_v(dy)/(x - y)`` of
    ``mu_v = mu_{S0} ⊞ SC(v)`` (Bun, Allez, Bouchaud & Potters 2016; arXiv 2408.03733, 2506.01582).
    ``xi'`` for the (order ``1/d``) diagonal part of the divergence is a central difference of ``H``.
    """

    def __init__(self, law: Any) -> None:
        self.law = law

    def __call__(self, R: np.ndarray, v: float) -> _Denoised:

        nu, U = sym_eigh(R)
        cl = free_convolve_semicircle(self.law, v)
        f = nu - 2.0 * v * cl.hilbert(nu)
        h = 1e-5 * max(1.0, math.sqrt(v))
        fp = 1.0 - 2.0 * v * (cl.hilbert(nu + h) - cl.hilbert(nu - h)) / (2 * h)
        S = (torch.as_tensor(U * f) @ torch.as_tensor(U).T).numpy()
        return _Denoised(0.5 * (S + S.T), spectral_divergence(nu, f, fp), f)

"""Spectra of the per-head query–key maps of a pretrained attention layer.

Conventions
-----------
Head ``h`` of a layer has ``A = A_h`` and ``B = B_h``, its ``d_head x d_model`` rows of
``W_Q`` and ``W_K`` (``nn.Linear`` layout, biases ignored). The attention logit of tokens
``x, x'`` is ``x^T M_h x'`` with the **query–key map**

    M_h = A^T B / sqrt(d_head)                        (d_model x d_model, rank <= d_head).

The theory (arXiv 2509.24914; docs: Theory, :ref:`theory-logits`, :ref:`theory-spectrum`) describes a *tied* map
``S = W W^T / sqrt(p d)``, which is PSD. The plain symmetric part ``(M + M^T)/2`` is not: it
always has ``d_head`` positive and ``d_head`` negative eigenvalues (generically). We use the
**tied (PSD) part**

    P_h = (A + B)^T (A + B) / (4 sqrt(d_head))         (PSD, rank <= d_head),

i.e. ``W = (A + B)^T / 2`` (``d_model x d_head``). The eigenvalues that are fitted by the
theory's law are those of the **d_model-normalised tied map**

    S_h = P_h / sqrt(d_model) = W W^T / sqrt(d_head d_model),

exactly the theory's ``S = W W^T/sqrt(p d)`` with ``p = d_head``, ``d = d_model``; so
``kappa = d_head/d_model`` is the rank cap. How far ``M`` is from being tied is reported as the
asymmetry ``||M - M^T||_F / ||M||_F`` (0 for a symmetric map, 2 for an antisymmetric one, about
sqrt 2 for a product of independent Gaussian factors).

Numerics: everything goes through the thin ``2 d_head`` core. With the QR factorisation
``[A; B]^T = Q R`` (``Q``: ``d_model x 2 d_head`` with orthonormal columns), ``A^T = Q R_A``,
``B^T = Q R_B`` and ``M = Q (R_A R_B^T) Q^T / sqrt(d_head)``, so the singular values and the
Frobenius norms of ``M`` and ``M - M^T`` are those of the ``2 d_head x 2 d_head`` core; the
tied eigenvalues are the squared singular values of ``(A + B)`` over ``4 sqrt(d_head)``.
Float64 throughout; no ``d_model x d_model`` eigendecomposition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["HeadSpectrum", "head_spectrum", "layer_spectra"]


@dataclass(frozen=True)
class HeadSpectrum:
    """Spectral summary of one head's query–key map.

    Attributes
    ----------
    singular_values : ndarray
        Singular values of ``M_h = A^T B/sqrt(d_head)``, descending (``min(2 d_head, d_model)``
        of them; at most ``d_head`` are non-zero).
    tied_eigenvalues : ndarray
        Eigenvalues of ``P_h = (A+B)^T(A+B)/(4 sqrt(d_head))``, descending, ``d_head`` of them
        (the other ``d_model - d_head`` are exactly zero).
    symmetric_eigenvalues : ndarray
        Non-trivial eigenvalues of ``(M_h + M_h^T)/2`` (``2 d_head`` of them), descending.
    asymmetry : float
        ``||M - M^T||_F / ||M||_F``.
    d_model, d_head : int
        Sizes.
    """

    singular_values: np.ndarray
    tied_eigenvalues: np.ndarray
    symmetric_eigenvalues: np.ndarray
    asymmetry: float
    d_model: int
    d_head: int

    def normalised_tied(self, rank_tol: float = 1e-10) -> np.ndarray:
        """All ``d_model`` eigenvalues of ``S_h = P_h/sqrt(d_model)`` (zeros included), descending.

        Tied eigenvalues below ``rank_tol * max`` are set to exactly zero.
        """
        ev = self.tied_eigenvalues / math.sqrt(self.d_model)
        ev = np.where(ev > rank_tol * max(float(ev.max(initial=0.0)), 1e-300), ev, 0.0)
        out = np.zeros(self.d_model)
        out[: ev.size] = ev
        return out

    def rank(self, rtol: float = 1e-6) -> int:
        """Numerical rank of ``M_h``: singular values above ``rtol * s_max``."""
        s = self.singular_values
        return int(np.sum(s > rtol * s[0])) if s.size and s[0] > 0 else 0

    def tied_rank(self, rtol: float = 1e-6) -> int:
        """Numerical rank of the tied map ``P_h`` (eigenvalues above ``rtol * max``)."""
        e = self.tied_eigenvalues
        return int(np.sum(e > rtol * e[0])) if e.size and e[0] > 0 else 0


def head_spectrum(A: np.ndarray, B: np.ndarray) -> HeadSpectrum:
    """Spectra of ``M = A^T B/sqrt(d_head)`` and of its tied part, through the thin QR core.

    Parameters
    ----------
    A, B : ndarray
        ``d_head x d_model`` query and key rows of one head (any float dtype; computed in float64).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.inspect import head_spectrum
    >>> A = np.random.default_rng(0).normal(size=(16, 64))      # d_head = 16 rows, d_model = 64
    >>> spectrum = head_spectrum(A, A)                          # tied head: M = A^T A / 4 is symmetric
    >>> spectrum.d_head, spectrum.d_model, round(spectrum.asymmetry, 12)
    (16, 64, 0.0)
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or A.shape != B.shape:
        raise ValueError(f"A and B must be d_head x d_model matrices of the same shape (got {A.shape}, {B.shape})")
    dh, dm = A.shape
    _, R = np.linalg.qr(np.concatenate([A, B], axis=0).T, mode="reduced")  # (2dh or dm) square-ish
    RA, RB = R[:, :dh], R[:, dh:]
    K = RA @ RB.T / math.sqrt(dh)  # core of M: M = Q K Q^T
    sv = np.linalg.svd(K, compute_uv=False)
    nM = float(np.linalg.norm(K))
    asym = float(np.linalg.norm(K - K.T) / nM) if nM > 0 else 0.0
    sym = np.linalg.eigvalsh(0.5 * (K + K.T))[::-1]
    tied = np.linalg.svd(A + B, compute_uv=False) ** 2 / (4.0 * math.sqrt(dh))
    return HeadSpectrum(
        singular_values=sv,
        tied_eigenvalues=np.sort(tied)[::-1],
        symmetric_eigenvalues=sym,
        asymmetry=asym,
        d_model=dm,
        d_head=dh,
    )


def layer_spectra(query: np.ndarray, key: np.ndarray, n_heads: int) -> list[HeadSpectrum]:
    """:func:`head_spectrum` for each of the ``n_heads`` heads of one layer (``[n_heads d_head, d_model]`` weights)."""
    q, k = np.asarray(query), np.asarray(key)
    if q.shape != k.shape or q.shape[0] % n_heads:
        raise ValueError(f"query/key shapes {q.shape}, {k.shape} do not split into {n_heads} heads")
    dh = q.shape[0] // n_heads
    return [head_spectrum(q[h * dh : (h + 1) * dh], k[h * dh : (h + 1) * dh]) for h in range(n_heads)]

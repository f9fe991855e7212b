"""Explicit random streams (torch, CPU): seeded generators, child seeds and Haar rotations.

Everything random in the simulations is drawn on the CPU in float64 from a ``torch.Generator``
seeded here and only then moved to a device, so a seed gives the same data on CPU and GPU.
This module is the bottom of the torch stack; theory-only code never imports it.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["generator", "child_seeds", "haar_orthogonal"]


def generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed``."""
    g = torch.Generator(device="cpu")
    g.manual_seed(int(seed))
    return g


def child_seeds(seed: int, n: int) -> list[int]:
    """``n`` independent 63-bit seeds derived from ``seed`` (numpy SeedSequence)."""
    ss = np.random.SeedSequence(int(seed))
    return [int(s.generate_state(2, dtype=np.uint32).astype(np.uint64).dot([1 << 31, 1])) for s in ss.spawn(n)]


def haar_orthogonal(d: int, gen: torch.Generator) -> torch.Tensor:
    """Haar-distributed orthogonal ``d x d`` matrix (QR of a Gaussian with the sign fix)."""
    G = torch.randn(d, d, generator=gen, dtype=torch.float64)
    Q, R = torch.linalg.qr(G)
    return Q * torch.sign(torch.diagonal(R)).unsqueeze(0)


def rotated_spectrum(s: np.ndarray, seed: int) -> torch.Tensor:
    """``O diag(s) O^T`` (float64, CPU, symmetrised), ``O`` Haar from a generator seeded with ``seed``."""
    st = torch.as_tensor(np.array(s, dtype=float), dtype=torch.float64)
    O = haar_orthogonal(len(st), generator(seed))
    S0 = (O * st.unsqueeze(0)) @ O.T
    return 0.5 * (S0 + S0.T)


def wishart(d: int, p0: int, seed: int) -> torch.Tensor:
    """``W0 W0^T / sqrt(p0 d)`` with ``W0 in R^{d x p0}`` iid N(0, 1) from a generator seeded with ``seed``."""
    W0 = torch.randn(d, p0, generator=generator(seed), dtype=torch.float64)
    return W0 @ W0.T / math.sqrt(p0 * d)


def untied_wishart(d: int, p0: int, seed: int) -> torch.Tensor:
    """``W0Q W0K^T / sqrt(p0 d)`` with ``W0Q`` then ``W0K`` in ``R^{d x p0}`` iid N(0, 1) from one generator
    seeded with ``seed`` (not symmetric)."""
    gen = generator(seed)
    WQ = torch.randn(d, p0, generator=gen, dtype=torch.float64)
    WK = torch.randn(d, p0, generator=gen, dtype=torch.float64)
    return WQ @ WK.T / math.sqrt(p0 * d)

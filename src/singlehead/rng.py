"""Explicit random streams (torch, CPU): seeded generators, child seeds and Haar rotations.

Everything random in the simulations is drawn on the CPU in float64 from a ``torch.Generator``
seeded here and only then moved to a device, so a seed gives the same data on CPU and GPU.
This module is the bottom of the torch stack; theory-only code never imports it.
"""

from __future__ import annotations

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

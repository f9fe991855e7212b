"""Sampling from the attention-indexed model (THEORY §1, arXiv 2506.01582, 2509.24914).

Tokens ``x_a ~ N(0, I_d)``; logits of a symmetric ``S``:
``h_ab(S) = (x_a^T S x_b - delta_ab Tr S) / sqrt(d)``; labels
``y = chan_beta0(h(S0) + xi)`` with symmetric Gaussian logit noise ``xi`` of
variance ``Delta`` on the diagonal and ``Delta/2`` off it.

Reproducibility: everything is drawn on the CPU in float64 from explicitly seeded
``torch.Generator`` objects and only then moved to the requested device/dtype, so
a seed gives the same data on CPU and GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .channels import channel_output
from .problem import Problem
from .targets import MPTarget, Target


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


def sample_target(target: Target, d: int, seed: int) -> torch.Tensor:
    """Draw ``S0`` (``d x d``, float64, CPU) from the target specification (THEORY §1).

    * MP: ``S0 = W0 W0^T / sqrt(p0 d)``, ``W0 in R^{d x p0}`` iid N(0,1), ``p0 = max(1, round(kappa0 d))``.
    * power-law / custom: ``S0 = O diag(s) O^T`` with ``O`` Haar and ``s = target.spectrum(d)``.
    """
    gen = generator(seed)
    if isinstance(target, MPTarget):
        p0 = max(1, int(round(target.kappa0 * d)))
        W0 = torch.randn(d, p0, generator=gen, dtype=torch.float64)
        return W0 @ W0.T / math.sqrt(p0 * d)
    s = torch.as_tensor(target.spectrum(d).copy(), dtype=torch.float64)
    O = haar_orthogonal(d, gen)
    S0 = (O * s.unsqueeze(0)) @ O.T
    return 0.5 * (S0 + S0.T)


def logits(X: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """``h_ab = (x_a^T S x_b - delta_ab Tr S)/sqrt(d)`` for ``X`` of shape ``(n, T, d)``; returns ``(n, T, T)``."""
    d = X.shape[-1]
    h = (X @ S) @ X.transpose(-1, -2)
    eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
    return (h - torch.trace(S) * eye) / math.sqrt(d)


def sample_tokens(n: int, T: int, d: int, gen: torch.Generator) -> torch.Tensor:
    """``n`` sequences of ``T`` iid ``N(0, I_d)`` tokens, shape ``(n, T, d)``, float64 CPU."""
    return torch.randn(n, T, d, generator=gen, dtype=torch.float64)


def sample_logit_noise(n: int, T: int, noise: float, gen: torch.Generator) -> torch.Tensor:
    """Symmetric noise, variance ``noise`` on the diagonal and ``noise/2`` off it; shape ``(n, T, T)``."""
    G = torch.randn(n, T, T, generator=gen, dtype=torch.float64)
    return math.sqrt(noise / 2.0) * (G + G.transpose(-1, -2)) / math.sqrt(2.0)


@dataclass
class Sequences:
    """A labelled batch. ``y`` are the (noisy) training labels, ``y_clean`` the noiseless ones."""

    X: torch.Tensor
    y: torch.Tensor
    y_clean: torch.Tensor

    def to(self, device: torch.device | str, dtype: torch.dtype) -> "Sequences":
        return Sequences(self.X.to(device, dtype), self.y.to(device, dtype), self.y_clean.to(device, dtype))

    def __len__(self) -> int:
        return self.X.shape[0]


def sample_sequences(problem: Problem, S0: torch.Tensor, n: int, seed: int, chunk: int = 8192) -> Sequences:
    """Draw ``n`` labelled sequences for ``problem`` with target ``S0`` (float64, CPU).

    Tokens and noise are drawn chunk by chunk from one generator, so the result does
    not depend on ``chunk``.
    """
    gen = generator(seed)
    X = sample_tokens(n, problem.T, problem.d, gen)
    xi = sample_logit_noise(n, problem.T, problem.noise, gen)
    S0 = S0.to(torch.float64)
    ys, ycs = [], []
    for i in range(0, n, chunk):
        Xi = X[i:i + chunk]
        h0 = logits(Xi, S0)
        ycs.append(channel_output(h0, problem.channel, problem.beta0, Xi))
        ys.append(channel_output(h0 + xi[i:i + chunk], problem.channel, problem.beta0, Xi))
    return Sequences(X, torch.cat(ys), torch.cat(ycs))

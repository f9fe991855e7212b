"""Output-side quadrature: fixed scrambled-Sobol standard-normal nodes and their error estimate.

The output-side expectations of the state evolution (:mod:`.output`) are averages over ``2K``
standard-normal directions, ``K = T(T+1)/2``. They use fixed nodes (common random numbers), so
the SE map is deterministic and smooth; the spread over independent scrambles estimates the
quadrature error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.stats import qmc

__all__ = ["OutputQuadrature"]

# Sobol points are clipped away from 0 and 1 before the normal quantile (|z| <= 7.03).
_UNIT_CLIP = 1e-12


@dataclass(frozen=True)
class OutputQuadrature:
    """Fixed standard-normal nodes for the output-side expectations.

    ``nodes`` has shape ``(R, N, dim)``: ``R`` independent Owen-scrambled Sobol point sets of
    ``N = 2^m`` points mapped through the normal quantile. Estimates average over all
    ``R N`` nodes (equal weights); the standard error is ``std over scrambles / sqrt(R)``.
    """

    nodes: np.ndarray
    seed: int

    @classmethod
    def sobol(cls, dim: int, n_points: int = 2048, n_scrambles: int = 4, seed: int = 0) -> "OutputQuadrature":
        """``n_scrambles`` scrambled Sobol sets of ``n_points`` (rounded up to a power of 2) in ``dim`` dims."""
        mexp = max(1, int(math.ceil(math.log2(max(2, n_points)))))
        ss = np.random.SeedSequence(int(seed))
        sets = []
        for child in ss.spawn(int(n_scrambles)):
            u = qmc.Sobol(d=dim, scramble=True, seed=np.random.default_rng(child)).random_base2(mexp)
            u = np.clip(u, _UNIT_CLIP, 1 - _UNIT_CLIP)
            sets.append(stats.norm.ppf(u))
        return cls(np.stack(sets), int(seed))

    @property
    def n_scrambles(self) -> int:
        return self.nodes.shape[0]

    @property
    def flat(self) -> np.ndarray:
        return self.nodes.reshape(-1, self.nodes.shape[-1])

    def mean_and_error(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean over all nodes and standard error over scrambles of per-node ``values`` (``(R*N, ...)``)."""
        R = self.n_scrambles
        v = values.reshape(R, -1, *values.shape[1:]).mean(axis=1)
        mean = v.mean(axis=0)
        err = v.std(axis=0, ddof=1) / math.sqrt(R) if R > 1 else np.full_like(mean, np.nan)
        return mean, err

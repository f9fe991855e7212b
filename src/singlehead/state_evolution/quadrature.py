"""Output-side quadrature: fixed scrambled-Sobol standard-normal nodes and their error estimate.

The output-side expectations of the state evolution (:mod:`.output`) are averages over ``2K``
standard-normal directions, ``K = T(T+1)/2``. They use fixed nodes (common random numbers), so
the SE map is deterministic and smooth; the spread over independent scrambles estimates the
quadrature error.

The nodes are a deterministic function of ``(dim, n_points, n_scrambles, seed)`` and of SciPy's
Sobol implementation. Generating them needs ``scipy.stats``, whose import alone costs ~1.3 s on
the 2-core reference machine, more than a whole SE point; so the nodes are kept as ``.npy``
files in a cache directory (``$SINGLEHEAD_CACHE_DIR``, default ``$XDG_CACHE_HOME/singlehead`` or
``~/.cache/singlehead``; set ``SINGLEHEAD_CACHE_DIR=off`` to disable). The file name carries every
input and the SciPy version, so a cached file is bit-identical to a fresh computation.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy  # the package alone is cheap; its version pins the Sobol implementation

from singlehead.numerics.cache_dir import library_cache_dir
from singlehead.numerics.limits import SOBOL_MAX_DIM, check_memory

__all__ = ["OutputQuadrature"]

# Sobol points are clipped away from 0 and 1 before the normal quantile (|z| <= 7.03).
_UNIT_CLIP = 1e-12


def _cache_file(dim: int, mexp: int, n_scrambles: int, seed: int) -> Path | None:
    """Where the node set is cached, or ``None`` when caching is off."""
    root = library_cache_dir("quadrature")
    if root is None:
        return None
    return root / f"sobol-normal-dim{dim}-m{mexp}-r{n_scrambles}-seed{seed}-scipy{scipy.__version__}.npy"


def _sobol_normal_nodes(dim: int, mexp: int, n_scrambles: int, seed: int) -> np.ndarray:
    """``(n_scrambles, 2^mexp, dim)`` Owen-scrambled Sobol points mapped through the normal quantile."""
    from scipy.stats import norm, qmc  # ~1.3 s import: only reached on a cache miss

    ss = np.random.SeedSequence(int(seed))
    sets = []
    for child in ss.spawn(int(n_scrambles)):
        u = qmc.Sobol(d=dim, scramble=True, seed=np.random.default_rng(child)).random_base2(mexp)
        u = np.clip(u, _UNIT_CLIP, 1 - _UNIT_CLIP)
        sets.append(norm.ppf(u))
    return np.stack(sets)


def _cached_nodes(dim: int, mexp: int, n_scrambles: int, seed: int) -> np.ndarray:
    """The node set, read from the cache directory when present (written there otherwise)."""
    path = _cache_file(dim, mexp, n_scrambles, seed)
    shape = (n_scrambles, 2**mexp, dim)
    if path is not None and path.is_file():
        try:
            nodes = np.load(path, allow_pickle=False)
            if nodes.shape == shape and nodes.dtype == np.float64:
                return nodes
        except (OSError, ValueError):
            pass  # unreadable or truncated: recompute and overwrite
    nodes = _sobol_normal_nodes(dim, mexp, n_scrambles, seed)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            with open(tmp, "wb") as fh:
                np.save(fh, nodes, allow_pickle=False)
            os.replace(tmp, path)  # atomic: concurrent writers leave one complete file
        except OSError:
            pass  # read-only or full disk: the nodes are simply not cached
    return nodes


@dataclass(frozen=True)
class OutputQuadrature:
    """Fixed standard-normal nodes for the output-side expectations.

    ``nodes`` has shape ``(R, N, dim)``: ``R`` independent Owen-scrambled Sobol point sets of
    ``N = 2^m`` points mapped through the normal quantile. Estimates average over all
    ``R N`` nodes (equal weights); the standard error is ``std over scrambles / sqrt(R)``.

    Examples
    --------
    >>> from singlehead.state_evolution import OutputQuadrature
    >>> quad = OutputQuadrature.sobol(dim=6, n_points=1024, n_scrambles=4, seed=0)
    >>> quad.n_scrambles, quad.flat.shape
    (4, (4096, 6))
    """

    nodes: np.ndarray
    seed: int

    @classmethod
    def sobol(cls, dim: int, n_points: int = 2048, n_scrambles: int = 4, seed: int = 0) -> OutputQuadrature:
        """``n_scrambles`` scrambled Sobol sets of ``n_points`` (rounded up to a power of 2) in ``dim`` dims."""
        if int(dim) > SOBOL_MAX_DIM:
            raise ValueError(
                f"dim must be <= {SOBOL_MAX_DIM}, the most dimensions SciPy's Sobol generator supports (got {dim})"
            )
        mexp = max(1, int(math.ceil(math.log2(max(2, n_points)))))
        check_memory(
            8.0 * n_scrambles * 2**mexp * dim,
            "n_points",
            f"{n_scrambles} x {2**mexp} quadrature nodes in {dim} dimensions",
        )
        return cls(_cached_nodes(int(dim), mexp, int(n_scrambles), int(seed)), int(seed))

    @property
    def n_scrambles(self) -> int:
        return self.nodes.shape[0]

    @property
    def flat(self) -> np.ndarray:
        return self.nodes.reshape(-1, self.nodes.shape[-1])

    def mean_and_error(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean over all nodes and standard error over scrambles of per-node ``values`` (``(R*N, ...)``)."""
        mean, err, _ = self.mean_error_and_scrambles(values)
        return mean, err

    def mean_error_and_scrambles(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`mean_and_error` and the per-scramble means ``(R, ...)`` (for errors of functions of them)."""
        R = self.n_scrambles
        v = values.reshape(R, -1, *values.shape[1:]).mean(axis=1)
        mean = v.mean(axis=0)
        err = v.std(axis=0, ddof=1) / math.sqrt(R) if R > 1 else np.full_like(mean, np.nan)
        return mean, err, v

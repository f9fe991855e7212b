"""The untied theory's learned singular-value law, sampled with common random numbers.

Law (conventions of :mod:`singlehead.inspect.untied`)::

    Mhat = eta * SVT_eps(Y),      Y = M0 + sigma_s Z_s + sigma_a Z_a,

``SVT_eps`` soft-thresholds the singular values by ``eps`` and keeps the top ``kappa d`` (rank
cap); ``Z_s`` GOE (off-diagonal variance ``1/d``, diagonal ``2/d``), ``Z_a`` antisymmetric
(off-diagonal variance ``1/d``); teachers ``"untied"`` ``M0 = W0Q W0K^T/sqrt(p0 d)`` and
``"tied"`` ``S0 = W0 W0^T/sqrt(p0 d)``, ``p0 = kappa0 d``, Gaussian factors.

Every law is sampled from the same Gaussian draws (``numpy.random.default_rng([seed, d, k])``
for the ``k``-th matrix), so a sampled law is a deterministic, piecewise smooth function of the
parameters and a fit over them compares laws without Monte-Carlo jitter between them.
"""

from __future__ import annotations

import math

import numpy as np

from singlehead.numerics.spectra import singular_value_threshold

__all__ = [
    "TEACHERS",
    "UntiedLawCache",
    "sample_singular_values",
    "sample_untied_map",
    "sample_untied_head",
    "model_asymmetry",
    "check_params",
    "check_sizes",
    "check_cap",
]

TEACHERS = ("untied", "tied")


def check_params(kappa0: float, sigma_s: float, sigma_a: float, teacher: str) -> None:
    """Validate a teacher's parameters: ``teacher`` in :data:`TEACHERS`, ``0 < kappa0 <= 1``, finite
    ``sigma_s, sigma_a >= 0``; ``ValueError`` naming the parameter otherwise."""
    if teacher not in TEACHERS:
        raise ValueError(f"teacher must be one of {TEACHERS} (got {teacher!r})")
    if not 0 < kappa0 <= 1:
        raise ValueError(f"kappa0 must be in (0, 1] (got {kappa0!r})")
    for name, s in (("sigma_s", sigma_s), ("sigma_a", sigma_a)):
        if not (math.isfinite(s) and s >= 0):
            raise ValueError(f"{name} must be a finite number >= 0 (got {s!r})")


def check_sizes(d_prior: int, n_samples: int) -> None:
    """Validate the sampling sizes: integers ``d_prior >= 4`` and ``n_samples >= 1`` (``ValueError`` otherwise)."""
    if int(d_prior) != d_prior or d_prior < 4:
        raise ValueError(f"d_prior must be an integer >= 4 (got {d_prior!r})")
    if int(n_samples) != n_samples or n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1 (got {n_samples!r})")


class UntiedLawCache:
    """Common random numbers and sampled laws, shared between fits (all heads of a model).

    The ``k``-th sample of size ``d`` uses ``numpy.random.default_rng([seed, d, k])`` for four
    ``d x d`` standard Gaussian matrices: the teacher's factors (their first ``p0`` columns) and
    the raw noises ``H, K`` with ``Z_s = (H + H^T)/sqrt(2d)``, ``Z_a = (K - K^T)/sqrt(2d)``. Pass one cache to
    several :func:`~singlehead.inspect.fit_untied` calls (``cache=``): the fits then compare laws on the same draws,
    and each sampled law is computed once (``evaluations`` counts them).

    Examples
    --------
    >>> from singlehead.inspect import UntiedLawCache
    >>> cache = UntiedLawCache(seed=0)
    >>> G1, G2, Zs, Za = cache.draws(4, 0)
    >>> bool((Zs == Zs.T).all() and (Za == -Za.T).all()), cache.draws(4, 0)[0] is G1
    (True, True)
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self._bank: dict[tuple[int, int], tuple[np.ndarray, ...]] = {}
        self._teach: dict[tuple, np.ndarray] = {}
        self._laws: dict[tuple, np.ndarray] = {}
        self.evaluations = 0

    def draws(self, d: int, k: int) -> tuple[np.ndarray, ...]:
        """``(G1, G2, Z_s, Z_a)`` of the ``k``-th sample of size ``d`` (created once, then cached)."""
        if (d, k) not in self._bank:
            rng = np.random.default_rng([self.seed, d, k])
            g1, g2, h, kk = (rng.standard_normal((d, d)) for _ in range(4))
            r = math.sqrt(2.0 * d)
            self._bank[(d, k)] = (g1, g2, (h + h.T) / r, (kk - kk.T) / r)
        return self._bank[(d, k)]

    def teacher(self, teacher: str, kappa0: float, d: int, k: int) -> np.ndarray:
        """The ``k``-th sampled teacher ``M0`` (``p0 = max(1, round(kappa0 d))``)."""
        p0 = max(1, int(round(kappa0 * d)))
        key = (teacher, p0, d, k)
        if key not in self._teach:
            g1, g2 = self.draws(d, k)[:2]
            a = g1[:, :p0]
            b = a if teacher == "tied" else g2[:, :p0]
            self._teach[key] = a @ b.T / math.sqrt(p0 * d)
        return self._teach[key]

    def law(self, teacher: str, kappa0: float, sigma_s: float, sigma_a: float, d: int, n_samples: int) -> np.ndarray:
        """Sorted pooled singular values of ``Y`` over the ``n_samples`` draws (``n_samples d`` values)."""
        p0 = max(1, int(round(kappa0 * d)))
        key = (teacher, p0, round(float(sigma_s), 12), round(float(sigma_a), 12), d, n_samples)
        if key not in self._laws:
            out = []
            for k in range(n_samples):
                zs, za = self.draws(d, k)[2:]
                y = self.teacher(teacher, kappa0, d, k) + sigma_s * zs + sigma_a * za
                out.append(np.linalg.svd(y, compute_uv=False))
            self._laws[key] = np.sort(np.concatenate(out))
            self.evaluations += 1
        return self._laws[key]


def sample_singular_values(
    kappa0: float,
    sigma_s: float,
    sigma_a: float,
    *,
    teacher: str = "untied",
    d_prior: int = 128,
    n_samples: int = 16,
    seed: int = 0,
    cache: UntiedLawCache | None = None,
) -> np.ndarray:
    """Sorted singular values of ``Y = M0 + sigma_s Z_s + sigma_a Z_a``, pooled over ``n_samples`` draws.

    Parameters
    ----------
    kappa0 : float
        Teacher rank ratio ``p0/d`` in ``(0, 1]``.
    sigma_s, sigma_a : float
        Symmetric (GOE) and antisymmetric noise levels, ``>= 0`` (module docstring).
    teacher : {"untied", "tied"}
        ``M0 = W0Q W0K^T/sqrt(p0 d)`` or ``S0 = W0 W0^T/sqrt(p0 d)``.
    d_prior, n_samples, seed : int
        Matrix size, number of matrices, seed of the common random numbers.

    Examples
    --------
    >>> from singlehead.inspect import sample_singular_values
    >>> s = sample_singular_values(0.5, 0.0, 0.0, d_prior=200, n_samples=2)
    >>> s.size, round(float((s**2).mean()), 1)          # ||M0||_F^2/d -> 1
    (400, 1.0)
    """
    check_params(kappa0, sigma_s, sigma_a, teacher)
    check_sizes(d_prior, n_samples)
    cache = cache if cache is not None else UntiedLawCache(seed)
    return cache.law(teacher, kappa0, sigma_s, sigma_a, int(d_prior), int(n_samples)).copy()


def sample_untied_map(
    d: int,
    kappa0: float,
    sigma_s: float,
    sigma_a: float,
    *,
    eps: float = 0.0,
    eta: float = 1.0,
    rank_cap: float | None = None,
    teacher: str = "untied",
    seed: int = 0,
) -> np.ndarray:
    """One draw of the learned map ``Mhat = eta SVT_eps(Y)`` (``d x d``; rank cap ``kappa = rank_cap``).

    Its own random numbers (``seed``), independent of those of ``UntiedLawCache`` of any seed
    below 7919: a synthetic "head" to fit.

    Examples
    --------
    >>> from singlehead.inspect import sample_untied_map
    >>> sample_untied_map(64, 0.5, 0.2, 0.2, eps=0.1, rank_cap=0.25).shape
    (64, 64)
    """
    check_params(kappa0, sigma_s, sigma_a, teacher)
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0 (got {eps!r})")
    if not (math.isfinite(eta) and eta > 0):
        raise ValueError(f"eta must be a finite number > 0 (got {eta!r})")
    check_cap(rank_cap)
    d = int(d)
    cache = UntiedLawCache(seed + 7919)
    zs, za = cache.draws(d, 0)[2:]
    r = d if rank_cap is None else max(1, int(round(rank_cap * d)))
    return eta * singular_value_threshold(cache.teacher(teacher, kappa0, d, 0) + sigma_s * zs + sigma_a * za, eps, r)[0]


def sample_untied_head(d: int, kappa0: float, sigma_s: float, sigma_a: float, **kw) -> np.ndarray:
    """The ``d`` singular values (descending) of :func:`sample_untied_map` (same arguments)."""
    return np.linalg.svd(sample_untied_map(d, kappa0, sigma_s, sigma_a, **kw), compute_uv=False)


def check_cap(rank_cap: float | None) -> None:
    """Validate a rank cap: ``None`` or in ``(0, 1]`` (``ValueError`` otherwise)."""
    if rank_cap is not None and not 0 < rank_cap <= 1:
        raise ValueError(f"rank_cap must be in (0, 1] (got {rank_cap!r})")


def model_asymmetry(
    cache: UntiedLawCache,
    teacher: str,
    kappa0: float,
    sigma: float,
    theta: float,
    eps: float,
    rank_cap: float | None,
    d: int,
    n_samples: int,
) -> float:
    """Mean ``||Mhat - Mhat^T||_F/||Mhat||_F`` of ``Mhat = SVT_eps(Y)`` (rank cap) over the sampled ``Y``.

    ``(sigma_s, sigma_a) = sigma (cos theta, sin theta)``; ``eta`` does not matter. ``nan`` when
    every ``Mhat`` vanishes.
    """
    out = []
    r = d if rank_cap is None else max(1, int(round(rank_cap * d)))
    for k in range(n_samples):
        zs, za = cache.draws(d, k)[2:]
        y = cache.teacher(teacher, kappa0, d, k) + sigma * (math.cos(theta) * zs + math.sin(theta) * za)
        m = singular_value_threshold(y, eps, r)[0]
        nm = float(np.linalg.norm(m))
        if nm > 0:
            out.append(float(np.linalg.norm(m - m.T)) / nm)
    return float(np.mean(out)) if out else math.nan

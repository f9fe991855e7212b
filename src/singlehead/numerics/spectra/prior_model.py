"""The target side of the state evolution as one object: a law ``mu_{S0}``, ``Q0`` and its transforms.

A :class:`PriorModel` is what :meth:`singlehead.model.targets.MPTarget.spectral_law` (and the other
targets' ``spectral_law``) returns, and what the state evolution, AMP's SE iterates, the Bayes
baseline and the analysis consume. ``mode`` is ``"asymptotic"`` (a free-probability law:
:class:`~.laws.MarchenkoPastur`, :class:`~.laws.DiscreteLaw`, :class:`~.laws.SpikedLaw`) or
``"finite"`` (:class:`~.finite_d.FiniteDSpectrum`: exact spectra of ``diag(s) + delta Z`` for fixed
GOE draws). ``Q0 = Tr S0^2/d``.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.numerics.spectra.convolution import free_convolve_semicircle
from singlehead.numerics.spectra.finite_d import DEFAULT_DRAWS, FiniteDSpectrum, check_draws
from singlehead.numerics.spectra.integrals import rie_mmse_integral, soft_threshold_integrals
from singlehead.numerics.spectra.laws import DiscreteLaw

__all__ = ["PriorModel", "prior_from_eigenvalues"]

# finite-d prior models kept for reuse (each holds draws d x d GOE matrices: 3.8 MB at d = 400, 3 draws)
_FINITE_MODELS_KEPT = 2
_FINITE_MODELS: OrderedDict[tuple, PriorModel] = OrderedDict()


@dataclass
class PriorModel:
    """The target side of the SE: ``Q0`` and the soft-threshold integrals of ``mu_{S0} ⊞ SC(delta^2)``.

    ``engine`` is the law (asymptotic mode) or the :class:`~singlehead.numerics.spectra.FiniteDSpectrum` (finite mode);
    ``description`` says which (JSON-friendly, reported with theory results).

    Examples
    --------
    >>> from singlehead import MPTarget, Problem
    >>> from singlehead.state_evolution import prior_model
    >>> prior = prior_model(Problem(target=MPTarget(kappa0=0.5)))
    >>> integrals = prior.threshold_integrals(delta=0.5, eps=0.2)
    >>> 0.0 < integrals.rank_fraction < 1.0 and integrals.J > 0.0
    True
    """

    mode: str
    Q0: float
    engine: Any
    description: dict[str, Any] = field(default_factory=dict)

    def threshold_integrals(self, delta: float, eps: float, rank_cap: float | None = None):
        """``J``, ``dJ/ddelta``, ``dJ/deps``, rank fraction of ``(x - eps)_+`` under ``mu_delta`` (docs: Theory,
        :ref:`theory-prior-side`).

        Finite mode: draw means over the fixed GOE draws, plus the pathwise ``overlap`` and the
        per-draw values (:meth:`~singlehead.numerics.spectra.FiniteDSpectrum.threshold_integrals`).
        """
        if self.mode == "finite":
            # also the pathwise overlap (1/d) Tr f(Y) S0 (``overlap``), which prior_side uses for m
            return self.engine.threshold_integrals(delta, eps, rank_cap=rank_cap, pathwise=False)
        return soft_threshold_integrals(self.engine, delta, eps, rank_cap=rank_cap)

    def rie_mmse_integral(self, v: float) -> float:
        """``int mu_v(x)^3 dx`` with ``mu_v = mu_{S0} ⊞ SC(v)`` (finite mode: of the discrete law of ``S0``)."""
        if self.mode == "finite":
            return float(rie_mmse_integral(DiscreteLaw(self.description["eigenvalues"]), v))
        return float(rie_mmse_integral(self.engine, v))

    def top_edge(self, delta: float) -> float:
        """Top of the support of ``mu_delta = mu_{S0} ⊞ SC(delta^2)`` (bulks and atoms/outliers)."""
        if self.mode == "finite":
            return float(np.max(self.engine.eigenvalues(delta)))
        cl = free_convolve_semicircle(self.engine, float(delta) ** 2)
        tops = [hi for _, hi in cl.edges()] + [float(x) for x in cl.atoms()[0]]
        return float(max(tops)) if tops else math.nan


def prior_from_eigenvalues(eigenvalues: np.ndarray, *, draws: int = DEFAULT_DRAWS, seed: int = 0) -> PriorModel:
    """Finite-``d`` prior model of a matrix with these eigenvalues (``draws`` fixed GOE draws, ``seed``).

    The order of ``eigenvalues`` is kept (it fixes which diagonal entry each GOE draw meets).
    The last ``_FINITE_MODELS_KEPT`` models are kept and returned again for the same
    ``(eigenvalues, draws, seed)``, so successive :func:`~singlehead.theory`
    calls on one target (e.g. a sweep over widths or ``lam`` done point by point) share the GOE
    draws and the cached eigendecompositions of :class:`~singlehead.numerics.spectra.FiniteDSpectrum` (the model is
    deterministic in its key, so sharing it changes results by rounding at most).

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead.numerics.spectra import prior_from_eigenvalues
    >>> prior = prior_from_eigenvalues(np.linspace(0.0, 2.0, 100), draws=2)
    >>> prior.mode, round(prior.Q0, 4)                  # Q0 = mean of the squared eigenvalues
    ('finite', 1.3401)
    """
    check_draws(draws)
    eig = np.array(eigenvalues, dtype=float).ravel()
    key = (hashlib.sha1(eig.tobytes()).hexdigest(), eig.size, int(draws), int(seed))
    hit = _FINITE_MODELS.get(key)
    if hit is not None:
        _FINITE_MODELS.move_to_end(key)
        return hit
    pm = PriorModel(
        "finite",
        float(np.mean(eig**2)),
        FiniteDSpectrum(eig, draws=draws, seed=seed),
        {"law": "finite_d", "d": eig.size, "draws": draws, "seed": seed, "eigenvalues": eig},
    )
    _FINITE_MODELS[key] = pm
    if len(_FINITE_MODELS) > _FINITE_MODELS_KEPT:
        _FINITE_MODELS.popitem(last=False)
    return pm

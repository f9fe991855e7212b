"""Predicted spectrum of the learned query–key matrix and its comparison with trained students.

Theory (arXiv 2509.24914, §5; docs: Theory, :ref:`theory-spectrum`). At the fixed point of the ERM state
evolution the trained matrix ``S = W W^T / sqrt(p d)`` has, in law, the spectrum of

    Shat = eta * ReLU(S0 + delta Z - eps I)      (top ``p = kappa d`` eigenvalues kept),

``Z`` a GOE matrix with semicircle on ``[-2, 2]``, ``delta = sqrt(qhat)/mhat`` the effective
noise, ``eps = 2 lam/mhat`` the threshold and ``eta = mhat/Sigmahat`` the scale. With
``mu_delta = mu_{S0} ⊞ SC(delta^2)`` and ``F`` its distribution function the eigenvalue law of
``S`` is

* an **atom at zero** of mass ``F(c)`` (low-rank collapse), ``c = max(eps, F^{-1}(1 - kappa))``
  the cut-off on the scale of ``Y = S0 + delta Z``;
* a **density** ``(1/eta) mu_delta(x/eta + eps)`` for ``x > eta (c - eps)`` (one bulk, or two
  when ``mu_delta`` splits, e.g. at large ``alpha`` for the MP target whose atom at zero
  becomes its own small bulk);
* **outliers**: an isolated target eigenvalue ``s`` (a spike of mass ``1/d``) with
  ``s > delta`` (null bulk) creates an eigenvalue of ``Y`` at ``s + delta^2/s`` with squared
  eigenvector overlap ``1 - delta^2/s^2`` (general bulk: ``s + v g(s)``, ``1 + v g'(s)``); it
  survives the threshold when ``s + delta^2/s > c`` and then sits at
  ``eta (s + delta^2/s - eps)``;
* the **rank** fraction ``1 - F(c)``.

Singular values of the weights ``W`` (``d x p``) are ``sigma = (p d)^{1/4} sqrt(lambda)`` for
each eigenvalue ``lambda`` of ``S`` (``p`` of them; ``max(p - rank, 0)`` are zero).

Public functions: :func:`target_law`, :func:`learned_spectrum` (-> :class:`LearnedSpectrum`),
:func:`compare_spectrum`, :func:`spectrum_table`, :func:`plot_spectrum_comparison`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.numerics.spectra import LearnedSpectrum as _LawSpectrum
from singlehead.numerics.spectra import SpikedLaw, free_convolve_semicircle, learned_spectrum_law
from singlehead.state_evolution import theory

__all__ = [
    "LearnedSpectrum",
    "target_law",
    "learned_spectrum",
]

TARGET_MODELS = ("auto", "discrete", "spiked")


def target_law(problem: Problem, *, model: str = "auto", delta: float | None = None, n_spikes: int | None = None):
    """Spectral law ``mu_{S0}`` of the problem's target, as used by the learned-spectrum law.

    A thin front to ``PowerLawTarget.spectral_law`` (the one place that
    maps a target to its law) with this analysis' default model ``"spiked"``.

    Parameters
    ----------
    problem : Problem
        Its ``target`` and ``d`` are used.
    model : {"auto", "discrete", "spiked"}
        MP targets always give :class:`~singlehead.numerics.spectra.MarchenkoPastur` (``kappa0``).
        Power-law and custom targets (``d`` eigenvalues ``s_i`` from
        ``PowerLawTarget.spectrum``):

        * ``"discrete"``: :class:`~singlehead.numerics.spectra.DiscreteLaw` of the ``d`` eigenvalues
          (deterministic equivalent at this ``d``; an isolated top eigenvalue becomes a tiny
          bulk of mass ``1/d`` around its outlier position);
        * ``"spiked"`` (``"auto"``): :class:`~singlehead.numerics.spectra.SpikedLaw` with the
          ``n_spikes`` largest eigenvalues as spikes of mass ``1/d`` over the discrete law of
          the others; this gives outlier positions and eigenvector overlaps.
    delta : float, optional
        Effective noise; with ``n_spikes=None`` the spikes are the ``s_i > delta / 2``
        (at least 1, at most ``d - 1``).
    n_spikes : int, optional
        Number of spikes.

    Examples
    --------
    >>> from singlehead import PowerLawTarget, Problem
    >>> from singlehead.analysis import target_law
    >>> type(target_law(Problem())).__name__, type(target_law(Problem(target=PowerLawTarget(1.25)))).__name__
    ('MarchenkoPastur', 'SpikedLaw')
    """
    if model not in TARGET_MODELS:
        raise ValueError(f"model must be one of {TARGET_MODELS} (got {model!r})")
    return problem.target.spectral_law(
        problem.d, "spiked" if model == "auto" else model, delta=delta, n_spikes=n_spikes
    ).engine


def _theory_params(problem: Problem, theory_result: Result | None, prior: str) -> Result:
    if theory_result is None:
        theory_result = theory(problem, prior=prior)
    for key in ("eta", "delta", "eps"):
        if key not in theory_result.extras:
            raise ValueError(f"theory_result must be a state-evolution Result with extras '{key}'")
    return theory_result


@dataclass(eq=False)
class LearnedSpectrum:
    """Predicted eigenvalue law of the trained ``S`` (and singular values of ``W``).

    Attributes
    ----------
    problem : Problem
        The problem.
    eta, delta, eps : float
        Scale, effective noise and threshold of the state-evolution fixed point.
    cutoff : float
        ``c`` on the scale of ``Y = S0 + delta Z``: eigenvalues ``<= c`` are set to zero.
    zero_atom : float
        Mass of the atom at zero (fraction of zero eigenvalues of ``S``).
    rank_fraction, rank : float, int
        ``1 - zero_atom`` and ``round(d * rank_fraction)``.
    bulks : list of (float, float)
        Intervals of the continuous part of the law of ``S`` (``x > 0``).
    outliers : list of dict
        Surviving outliers: ``mode`` (1-based index of the target eigenvalue), ``spike``
        (``s``), ``position_Y`` (``s + v g(s)``), ``position`` (eigenvalue of ``S``),
        ``overlap`` (squared overlap with the target eigenvector), ``mass`` (``1/d``).
    law : singlehead.numerics.spectra.LearnedSpectrum
        The underlying law object (grid, density, point masses).

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.analysis import learned_spectrum
    >>> pred = learned_spectrum(Problem(T=2, alpha=1.0, noise=0.5, lam=0.05))
    >>> 0.0 < pred.zero_atom < 1.0, round(pred.zero_atom + pred.rank_fraction, 12)
    (True, 1.0)
    """

    problem: Problem
    eta: float
    delta: float
    eps: float
    cutoff: float
    zero_atom: float
    rank_fraction: float
    rank: int
    bulks: list[tuple[float, float]]
    outliers: list[dict[str, float]]
    law: _LawSpectrum
    _convolved: Any = field(repr=False, default=None)

    # ------------------------------------------------------------------ law functions
    def cdf(self, x: np.ndarray | float) -> np.ndarray:
        """Distribution function ``P(lambda <= x)`` of the eigenvalues of ``S``.

        ``0`` for ``x < 0``; ``zero_atom`` on ``[0, eta (c - eps))``; ``F(x/eta + eps)``
        above (``F`` the distribution function of ``mu_delta``, point masses included).
        """
        x = np.asarray(x, dtype=float)
        xf = x.ravel()
        out = np.zeros_like(xf)
        y = xf / self.eta + self.eps
        pos = xf >= 0
        out[pos] = self.zero_atom
        above = pos & (y > self.cutoff)
        if np.any(above):
            out[above] = np.maximum(self.zero_atom, self._convolved.cdf(y[above]))
        return np.clip(out, 0.0, 1.0).reshape(x.shape)

    def singular_value_density(self) -> tuple[np.ndarray, np.ndarray]:
        """Density of the non-zero singular values of ``W``, per eigenvalue of ``S``.

        With ``sigma = (p d)^{1/4} sqrt(x)``: ``rho_W(sigma) = rho_S(x) 2 sigma / sqrt(p d)``,
        normalised like the eigenvalue density (total mass ``rank_fraction`` minus outliers).
        """
        p, d = self.problem.p, self.problem.d
        k = math.sqrt(p * d)
        x, rho = self.law.grid, self.law.density
        sig = np.sqrt(k * x)  # (p d)^{1/4} sqrt(x)
        return sig, rho * 2.0 * sig / k

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (grid and density included)."""
        return {
            "eta": self.eta,
            "delta": self.delta,
            "eps": self.eps,
            "cutoff": self.cutoff,
            "zero_atom": self.zero_atom,
            "rank_fraction": self.rank_fraction,
            "rank": self.rank,
            "n_bulks": len(self.bulks),
            "bulks": [[float(a), float(b)] for a, b in self.bulks],
            "outliers": [{k: float(v) for k, v in o.items()} for o in self.outliers],
            "point_masses": [[float(a), float(b)] for a, b in self.law.point_masses],
            "grid": [float(v) for v in self.law.grid],
            "density": [float(v) for v in self.law.density],
            "problem": self.problem.to_dict(),
        }


def learned_spectrum(
    problem: Problem,
    theory_result: Result | None = None,
    *,
    prior: str = "auto",
    model: str = "auto",
    n_spikes: int | None = None,
    grid_size: int = 512,
) -> LearnedSpectrum:
    """Predicted spectrum of the trained ``S`` for ``problem`` (docs: Theory, :ref:`theory-spectrum`; arXiv 2509.24914
    §5).

    Parameters
    ----------
    problem : Problem
        A factorized-student problem (the direct student has no threshold: ``Shat = eta' Y``,
        handled with ``eps = 0`` and no rank cap).
    theory_result : Result, optional
        A state-evolution result for ``problem`` (``extras`` with ``eta, delta, eps``); computed
        with :func:`singlehead.theory` (``prior``) when omitted.
    prior : str
        Prior mode passed to ``theory`` when it is run here.
    model, n_spikes :
        Target law, see :func:`target_law`.
    grid_size : int
        Points of the density grid.

    Examples
    --------
    >>> from singlehead import Problem, theory
    >>> from singlehead.analysis import learned_spectrum
    >>> problem = Problem(T=2, alpha=1.0, noise=0.5, lam=0.05)
    >>> pred = learned_spectrum(problem, theory(problem))
    >>> round(pred.zero_atom, 2), len(pred.bulks)       # 37 % of the eigenvalues of S are zero
    (0.37, 1)
    """
    r = _theory_params(problem, theory_result, prior)
    eta, delta, eps = float(r.extras["eta"]), float(r.extras["delta"]), float(r.extras["eps"])
    if not (eta > 0 and math.isfinite(delta)):
        raise ValueError(f"theory result has no valid scale eta > 0 (got eta={eta!r}, delta={delta!r})")
    law = target_law(problem, model=model, delta=delta, n_spikes=n_spikes)
    cap = problem.student.rank_cap(problem.kappa)
    v = delta * delta
    ls = learned_spectrum_law(law, v, threshold=eps, scale=eta, rank_cap=cap, grid_size=grid_size)
    cl = free_convolve_semicircle(law, v)
    outs = []
    if isinstance(law, SpikedLaw):
        for o in ls.outliers:
            mode = 1 + int(np.argmin(np.abs(np.asarray(law.spikes) - o["spike"])))
            outs.append(
                {
                    "mode": float(mode),
                    "spike": o["spike"],
                    "position_Y": o["position"] / eta + eps,
                    "position": o["position"],
                    "overlap": o["overlap"],
                    "mass": o["mass"],
                }
            )
    rank_frac = float(ls.rank_fraction)
    return LearnedSpectrum(
        problem=problem,
        eta=eta,
        delta=delta,
        eps=eps,
        cutoff=float(ls.cutoff),
        zero_atom=float(ls.atom_at_zero),
        rank_fraction=rank_frac,
        rank=int(round(rank_frac * problem.d)),
        bulks=[(float(a), float(b)) for a, b in ls.edges],
        outliers=outs,
        law=ls,
        _convolved=cl,
    )

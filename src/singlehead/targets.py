"""Targets ``S0`` of the attention-indexed model and their spectral laws (docs: Theory, :ref:`theory-targets`).

Each target class is the one place that turns a target into

* its spectral law ``mu_{S0}`` at a given ``d`` and model, :meth:`spectral_law`, returning a
  :class:`~singlehead.spectra.PriorModel` (the law, ``Q0 = Tr S0^2/d`` and the transforms the
  state evolution, AMP and the analysis need), and
* a sample of ``S0``, :meth:`sample` (torch and :mod:`singlehead.rng` are imported inside it:
  this module and everything theory-only stay free of torch).

Spectral-law models (``model=``):

* ``"asymptotic"``: the free-probability law. MP targets: ``MarchenkoPastur(kappa0)``
  (``Q0 = 1 + kappa0``); power-law and custom targets: the discrete law of their ``d``
  eigenvalues (deterministic equivalent at this ``d``).
* ``"discrete"``: the same as ``"asymptotic"`` (kept as the name the learned-spectrum analysis uses).
* ``"finite"``: :class:`~singlehead.spectra.FiniteDSpectrum`, the exact spectra of
  ``diag(s) + delta Z`` for ``draws`` fixed GOE draws (MP targets: the eigenvalues of one
  target drawn with ``seed``).
* ``"spiked"``: the ``n_spikes`` largest eigenvalues as spikes of mass ``1/d`` over the
  discrete law of the others (with ``n_spikes=None``: the ``s_i > delta/2``, at least 1 and at
  most ``d - 1``; with ``delta`` also ``None``: ``min(d - 1, 10)``); gives outlier positions.
* ``"spiked_null"``: the large-``d`` model of the scaling-law analysis: the ``s_i > spike_floor``
  (at most ``max_spikes``) as spikes of mass ``1/d`` over a null bulk; ``Q0`` still sums
  over all ``d`` modes.

For MP targets every model but ``"finite"`` is the MP law.

:class:`UntiedMPTarget` is the one non-symmetric target (an untied teacher ``M0``): its
:attr:`symmetric` is ``False``, it can be sampled, and its spectral law (a singular-value law,
for the untied state evolution) is not provided here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Union

import numpy as np

from ._validate import check as _check
from ._validate import finite as _finite
from .spectra import DiscreteLaw, MarchenkoPastur, SpikedLaw
from .spectra.prior_model import PriorModel, prior_from_eigenvalues

if TYPE_CHECKING:  # pragma: no cover
    import torch


def _torch_rng() -> Any:
    """The seeded torch samplers (imported on first use: the theory paths never load torch)."""
    from . import rng

    return rng


POWER_LAW_NORMALISATIONS = ("sqrt_d", "unit_q0")
# default GOE draws of the "finite" model (= spectra.finite_d.DEFAULT_DRAWS; spectra is imported lazily here)
FINITE_DRAWS = 3
LAW_MODELS = ("asymptotic", "discrete", "finite", "spiked", "spiked_null")


def power_law_eigenvalues(gamma: float, d: int, normalisation: str = "sqrt_d") -> np.ndarray:
    """``s_i = A i^(-gamma)``, ``i = 1..d``, with ``A = sqrt(d)`` (``"sqrt_d"``) or ``Q0 = 1`` (``"unit_q0"``)."""
    i = np.arange(1, d + 1, dtype=float)
    s = i ** (-gamma)
    if normalisation == "sqrt_d":
        return math.sqrt(d) * s
    if normalisation == "unit_q0":
        return s / math.sqrt(np.sum(s * s) / d)
    raise ValueError(f"normalisation must be 'sqrt_d' or 'unit_q0' (got {normalisation!r})")


class _Target:
    """Behaviour shared by all targets: sampling ``S0`` and the model-name check."""

    #: ``S0`` is symmetric (every target but the untied teacher).
    symmetric: ClassVar[bool] = True

    def spectrum(self, d: int) -> np.ndarray | None:
        """Deterministic spectrum of ``S0`` (descending), or ``None`` for a random (MP) target."""
        return None

    def sample(self, d: int, seed: int) -> "torch.Tensor":
        """Draw ``S0`` (``d x d``, float64, CPU torch tensor) from a ``torch.Generator`` seeded with ``seed``.

        Power-law / custom: ``S0 = O diag(s) O^T`` with ``O`` Haar and ``s = self.spectrum(d)``.
        (MP targets override this.)
        """
        return _torch_rng().rotated_spectrum(self.spectrum(d), seed)

    @staticmethod
    def _check_model(model: str) -> None:
        _check(model in LAW_MODELS, "model", f"one of {LAW_MODELS}", model)


class _SpectralTarget(_Target):
    """Targets with a deterministic spectrum ``s`` (power law, custom): ``S0 = O diag(s) O^T``, ``O`` Haar."""

    def spectral_law(self, d: int, model: str = "asymptotic", *, draws: int = FINITE_DRAWS, seed: int = 0,
                     n_spikes: int | None = None, delta: float | None = None, spike_floor: float = 0.0,
                     max_spikes: int | None = None) -> "PriorModel":
        """The law ``mu_{S0}`` at dimension ``d`` under ``model`` (module docstring), as a ``PriorModel``."""
        self._check_model(model)
        s = self.spectrum(d)
        Q0 = float(np.mean(s * s))
        if model in ("asymptotic", "discrete"):
            return PriorModel("asymptotic", Q0, DiscreteLaw(s), {"law": "discrete", "eigenvalues": s})
        if model == "finite":
            return prior_from_eigenvalues(s, draws=draws, seed=seed)
        if model == "spiked":
            if n_spikes is None:
                n_spikes = int(np.sum(s > 0.5 * float(delta))) if delta is not None else min(d - 1, 10)
            n_spikes = int(min(max(n_spikes, 1), d - 1))
            law = SpikedLaw(DiscreteLaw(s[n_spikes:]), tuple(s[:n_spikes]), 1.0 / d)
            return PriorModel("asymptotic", Q0, law, {"law": "spiked", "n_spikes": n_spikes, "d": d})
        k = int(np.sum(s > spike_floor))
        k = max(min(k, d - 1, max_spikes if max_spikes is not None else d - 1), 1)
        law = SpikedLaw(DiscreteLaw(np.array([0.0])), tuple(s[:k]), 1.0 / d)
        return PriorModel("asymptotic", Q0, law, {"law": "spiked", "n_spikes": k, "d": d})


@dataclass(frozen=True)
class MPTarget(_Target):
    """Marchenko--Pastur target ``S0 = W0 W0^T / sqrt(p0 d)``, ``W0`` iid N(0,1), ``p0 = kappa0 d``.

    Its spectrum is ``sqrt(kappa0)`` times Marchenko--Pastur of ratio ``1/kappa0``
    (mass ``1-kappa0`` at zero when ``kappa0 < 1``); ``Tr S0/d -> sqrt(kappa0)``,
    ``Q0 = Tr S0^2/d -> 1 + kappa0``.

    Examples
    --------
    >>> from singlehead import MPTarget
    >>> target = MPTarget(kappa0=0.5)
    >>> S0 = target.sample(400, seed=0)                 # d x d torch tensor, PSD, rank p0 = 200
    >>> int((S0.diagonal().sum() / 400 / 0.5**0.5).round())   # Tr S0 / d -> sqrt(kappa0)
    1
    >>> round(float(target.spectral_law(400).Q0), 3)    # Q0 = Tr S0^2 / d -> 1 + kappa0
    1.5
    """

    kappa0: float = 0.5
    kind: Literal["mp"] = "mp"

    def __post_init__(self) -> None:
        _check(_finite(self.kappa0) and 0 < self.kappa0 <= 1, "kappa0", "in (0, 1] for an MP target", self.kappa0)

    def spectral_law(self, d: int, model: str = "asymptotic", *, draws: int = FINITE_DRAWS, seed: int = 0,
                     **_: Any) -> "PriorModel":
        """``MarchenkoPastur(kappa0)`` for every model but ``"finite"`` (one drawn target's eigenvalues)."""
        self._check_model(model)
        if model == "finite":
            return prior_from_eigenvalues(np.linalg.eigvalsh(self.sample(d, seed).numpy()), draws=draws, seed=seed)
        law = MarchenkoPastur(self.kappa0)
        return PriorModel("asymptotic", float(law.second_moment()), law, {"law": "marchenko_pastur", "kappa0": self.kappa0})

    def sample(self, d: int, seed: int) -> "torch.Tensor":
        """``S0 = W0 W0^T / sqrt(p0 d)``, ``W0 in R^{d x p0}`` iid N(0,1), ``p0 = max(1, round(kappa0 d))``."""
        return _torch_rng().wishart(d, max(1, int(round(self.kappa0 * d))), seed)


@dataclass(frozen=True)
class PowerLawTarget(_SpectralTarget):
    """Power-law target ``S0 = O diag(s) O^T``, ``O`` Haar, ``s_i = A i^(-gamma)``, ``i = 1..d``.

    Normalisations (docs: Theory, :ref:`theory-targets`):

    * ``"sqrt_d"`` (default, arXiv 2509.24914): ``A = sqrt(d)``, so the top
      eigenvalues are O(sqrt d) spikes and ``Q0 = sum_i i^(-2 gamma)``;
    * ``"unit_q0"`` (scaling-law code of arXiv 2509.24882): ``A`` chosen so that
      ``Q0 = Tr S0^2 / d = 1`` exactly at this ``d``.

    Examples
    --------
    >>> import numpy as np
    >>> from singlehead import PowerLawTarget
    >>> s = PowerLawTarget(gamma=1.25).spectrum(100)    # s_i = sqrt(d) i^-gamma, descending
    >>> float(s[0]), round(float(s[1] / s[0]), 4)
    (10.0, 0.4204)
    >>> s = PowerLawTarget(gamma=1.25, normalisation="unit_q0").spectrum(100)
    >>> round(float(np.mean(s**2)), 6)                  # Q0 = Tr S0^2 / d = 1
    1.0
    """

    gamma: float = 1.25
    normalisation: str = "sqrt_d"
    kind: Literal["power_law"] = "power_law"

    def __post_init__(self) -> None:
        _check(_finite(self.gamma) and self.gamma > 0.5, "gamma", "> 0.5", self.gamma)
        _check(self.normalisation in POWER_LAW_NORMALISATIONS, "normalisation",
               f"one of {POWER_LAW_NORMALISATIONS}", self.normalisation)

    def spectrum(self, d: int) -> np.ndarray:
        return power_law_eigenvalues(self.gamma, d, self.normalisation)


@dataclass(frozen=True)
class CustomTarget(_SpectralTarget):
    """Target with a user-given spectrum: ``S0 = O diag(eigenvalues) O^T``, ``O`` Haar.

    ``eigenvalues`` must have length ``d`` and be non-negative (targets are PSD).

    The spectrum is used as given (no rescaling): ``Q0 = mean(eigenvalues^2)``. The problem's
    ``d`` must equal the number of eigenvalues.

    Examples
    --------
    >>> from singlehead import CustomTarget, Problem
    >>> target = CustomTarget(eigenvalues=(2.0, 1.0, 0.0, 0.0))
    >>> Problem(d=4, target=target).target.spectrum(4).tolist()
    [2.0, 1.0, 0.0, 0.0]
    """

    eigenvalues: tuple[float, ...] = ()
    kind: Literal["custom"] = "custom"

    def __post_init__(self) -> None:
        object.__setattr__(self, "eigenvalues", tuple(float(x) for x in self.eigenvalues))
        _check(len(self.eigenvalues) > 0, "eigenvalues", "a non-empty list", self.eigenvalues)
        _check(all(_finite(x) and x >= 0 for x in self.eigenvalues), "eigenvalues",
               "finite and >= 0 (the target is PSD)", "…")

    def spectrum(self, d: int) -> np.ndarray:
        return np.sort(np.asarray(self.eigenvalues, dtype=float))[::-1]


@dataclass(frozen=True)
class UntiedMPTarget(_Target):
    """Untied teacher ``M0 = W0Q W0K^T / sqrt(p0 d)``, ``W0Q, W0K in R^{d x p0}`` iid N(0,1), ``p0 = kappa0 d``.

    ``M0`` is not symmetric (rank ``p0``). ``||M0||_F^2/d -> 1`` for every ``kappa0`` and it splits
    equally between the symmetric part ``M0_s = (M0 + M0^T)/2`` and the antisymmetric part
    ``M0_a = (M0 - M0^T)/2``: ``||M0_s||_F^2/d -> 1/2``, ``||M0_a||_F^2/d -> 1/2``
    (``Tr M0^2/d = O(1/d)``), and ``Tr M0/d = O(1/sqrt(d p0))``.
    Labels take the logits ``h_ab(M0) = (x_a^T M0 x_b - delta_ab Tr M0)/sqrt(d)`` plus the usual
    symmetric noise. The spectral law (for the state evolution) is not provided here.

    Examples
    --------
    >>> from singlehead.targets import UntiedMPTarget
    >>> M0 = UntiedMPTarget(kappa0=0.5).sample(400, seed=0).numpy()
    >>> Ms, Ma = (M0 + M0.T) / 2, (M0 - M0.T) / 2
    >>> round(float((Ms**2).sum() / 400), 1), round(float((Ma**2).sum() / 400), 1)
    (0.5, 0.5)
    """

    kappa0: float = 0.5
    kind: Literal["untied_mp"] = "untied_mp"
    symmetric: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _check(_finite(self.kappa0) and 0 < self.kappa0 <= 1, "kappa0", "in (0, 1] for an untied MP target",
               self.kappa0)

    def block_norms(self) -> tuple[float, float]:
        """``(||M0_s||_F^2/d, ||M0_a||_F^2/d) -> (1/2, 1/2)``: the asymptotic split of ``||M0||_F^2/d = 1``."""
        return 0.5, 0.5

    def spectral_law(self, d: int, model: str = "asymptotic", **_: Any) -> "PriorModel":
        """Not provided: the untied teacher's law enters the untied state evolution only."""
        raise NotImplementedError("target: the spectral law of an UntiedMPTarget is not implemented "
                                  "(the tied state evolution needs a symmetric target)")

    def sample(self, d: int, seed: int) -> "torch.Tensor":
        """``M0 = W0Q W0K^T / sqrt(p0 d)`` (float64, CPU), ``W0Q`` then ``W0K`` iid N(0,1) from one
        generator seeded with ``seed``, ``p0 = max(1, round(kappa0 d))``."""
        return _torch_rng().untied_wishart(d, max(1, int(round(self.kappa0 * d))), seed)


Target = Union[MPTarget, PowerLawTarget, CustomTarget, UntiedMPTarget]

#: Target classes by their ``kind`` (the key of :meth:`Problem.to_dict`'s target and of the CLI's ``--target``).
TARGET_KINDS: dict[str, type] = {"mp": MPTarget, "power_law": PowerLawTarget, "custom": CustomTarget,
                                 "untied_mp": UntiedMPTarget}


def target_from_dict(spec: dict[str, Any]) -> Target:
    """Rebuild a target from ``dataclasses.asdict`` output (used for cached configs)."""
    kind = spec.get("kind")
    args = {k: v for k, v in spec.items() if k != "kind"}
    if kind not in TARGET_KINDS:
        raise ValueError(f"target kind must be one of {', '.join(TARGET_KINDS)} (got {kind!r})")
    return TARGET_KINDS[kind](**args)


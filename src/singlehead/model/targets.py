"""Targets ``S0`` of the attention-indexed model and their spectral laws (docs: Theory, :ref:`theory-targets`).

Each target class is the one place that turns a target into

* its spectral law ``mu_{S0}`` at a given ``d`` and model, :meth:`spectral_law`, returning a
  ``singlehead.numerics.spectra.PriorModel`` (the law, ``Q0 = Tr S0^2/d`` and the transforms the
  state evolution, AMP and the analysis need), and
* a sample of ``S0``, ``sample`` (torch and :mod:`singlehead.numerics.rng` are imported inside it:
  this module and everything theory-only stay free of torch).

Spectral-law models (``model=``):

* ``"asymptotic"``: the free-probability law. MP targets: ``MarchenkoPastur(kappa0)``
  (``Q0 = 1 + kappa0``); power-law and custom targets: the discrete law of their ``d``
  eigenvalues (deterministic equivalent at this ``d``).
* ``"discrete"``: the same as ``"asymptotic"`` (kept as the name the learned-spectrum analysis uses).
* ``"finite"``: :class:`~singlehead.numerics.spectra.FiniteDSpectrum`, the exact spectra of
  ``diag(s) + delta Z`` for ``draws`` fixed GOE draws (MP targets: the eigenvalues of one
  target drawn with ``seed``).
* ``"spiked"``: the ``n_spikes`` largest eigenvalues as spikes of mass ``1/d`` over the
  discrete law of the others (with ``n_spikes=None``: the ``s_i > delta/2``, at least 1 and at
  most ``d - 1``; with ``delta`` also ``None``: ``min(d - 1, 10)``); gives outlier positions.
* ``"spiked_null"``: the large-``d`` model of the scaling-law analysis: the ``s_i > spike_floor``
  (at most ``max_spikes``) as spikes of mass ``1/d`` over a null bulk; ``Q0`` still sums
  over all ``d`` modes.

For MP targets every model but ``"finite"`` is the MP law.

Targets are objects: subclasses of :class:`Target` registered with :func:`register_target`, like
channels and students. Everything else that depends on the target reads it from the object: its name and parameters
(the CLI's ``--target`` and target options, the explorer's controls, figure captions), its
plain-JSON form (:meth:`Target.to_dict`, part of ``Problem.to_dict`` and of every cache key)
and the closed-form threshold data (:attr:`Target.rank_ratio`). A new target is one class in one
file (see the how-to "Add a target").

:class:`UntiedMPTarget` is the one non-symmetric target (an untied teacher ``M0``): its
:attr:`symmetric` is ``False``, it can be sampled, and its spectral law (a singular-value law,
for the untied state evolution) is not provided here.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from singlehead.model.registry import Registry
from singlehead.model.validation import check as _check
from singlehead.model.validation import finite as _finite
from singlehead.numerics.spectra import DiscreteLaw, MarchenkoPastur, SpikedLaw
from singlehead.numerics.spectra.prior_model import PriorModel, prior_from_eigenvalues

if TYPE_CHECKING:  # pragma: no cover
    import torch


def _torch_rng() -> Any:
    """The seeded torch samplers (imported on first use: the theory paths never load torch)."""
    from singlehead.numerics import rng

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


@dataclass(frozen=True)
class TargetParam:
    """One parameter of a target class, as the CLI and the explorer offer it.

    ``name`` is the dataclass field and the option's name (``--kappa0``); ``kind`` how a text value
    is read: ``"float"`` (a number), ``"floats"`` (a comma list, stored as a tuple) or ``"choice"``
    (one of ``choices``). Values are validated by the target's constructor, not here. ``selects``:
    giving the option on the command line picks a target that takes it when ``--target`` is
    omitted (``False`` for modifiers such as the power law's ``normalisation``). ``label`` is the
    explorer's short label (default: ``name``).

    Examples
    --------
    >>> from singlehead import TargetParam
    >>> TargetParam("eigenvalues", kind="floats").parse("1, 0.5")
    (1.0, 0.5)
    >>> TargetParam("gamma").format(0.5)
    '0.5'
    """

    name: str
    kind: Literal["float", "floats", "choice"] = "float"
    help: str = ""
    choices: tuple[str, ...] = ()
    selects: bool = True
    label: str = ""

    def parse(self, text: Any) -> Any:
        """The value of ``text`` (a string or a value already parsed), or ``ValueError`` naming the parameter."""
        if not isinstance(text, str):
            return tuple(float(x) for x in text) if self.kind == "floats" else text
        try:
            if self.kind == "float":
                return float(text)
            if self.kind == "floats":
                return tuple(float(x) for x in text.split(",") if x.strip())
        except ValueError:
            what = "a number" if self.kind == "float" else "a comma list of numbers"
            raise ValueError(f"{self.name} must be {what} (got {text!r})") from None
        return text.strip()

    def format(self, value: Any) -> str:
        """The command-line text of ``value`` (``parse(format(v)) == v``)."""
        if self.kind == "floats":
            return ",".join(repr(float(x)) for x in value)
        return repr(value) if self.kind == "float" else str(value)


class Target(abc.ABC):
    """Base class of targets ``S0`` (``d x d``); subclasses are frozen dataclasses registered with
    :func:`register_target`.

    Contract of a subclass:

    * ``name`` (class attribute): the registered name, the ``kind`` of ``to_dict``, the CLI's
      ``--target`` value;
    * its dataclass fields are its parameters, validated in ``__post_init__`` (a bad value raises
      ``ValueError`` naming the field); ``params`` lists the ones the CLI and the explorer offer
      (:class:`TargetParam`; a field not listed keeps its default there);
    * ``sample`` draws ``S0`` (``d x d``, float64, CPU torch tensor) from ``seed`` alone;
      symmetric targets (``symmetric = True``) draw a symmetric ``S0``;
    * :meth:`spectral_law` returns the law ``mu_{S0}`` of the eigenvalues of ``S0`` at dimension
      ``d`` as a ``singlehead.numerics.spectra.PriorModel``. Normalisation: ``PriorModel.Q0`` is
      ``Tr S0^2/d`` (its limit, or its value at this ``d`` for a deterministic spectrum), and a
      sample of ``sample`` must have ``Tr S0^2/d -> Q0`` and an empirical spectral law
      converging to the law: the state evolution sees the target only through this law. Logits
      are ``h_ab(S0) = (x_a^T S0 x_b - delta_ab Tr S0)/sqrt(d)``, so ``S0`` is taken at the
      scale where ``Q0`` is of order one. Non-symmetric targets may raise
      ``NotImplementedError`` here (the tied state evolution needs a symmetric target);
    * :meth:`spectrum` gives the deterministic eigenvalues at ``d`` (descending), or ``None``
      when ``S0`` is random;
    * :meth:`validate` checks the target against the problem's ``d``.

    :class:`SpectralTarget` provides ``sample`` and :meth:`spectral_law` for a target with a
    deterministic spectrum (``S0 = O diag(s) O^T``, ``O`` Haar): such a subclass implements only
    :meth:`spectrum`.

    Examples
    --------
    >>> from singlehead.model.targets import PowerLawTarget, target_from_dict
    >>> t = PowerLawTarget(gamma=1.5)
    >>> t.name, t.to_dict()
    ('power_law', {'gamma': 1.5, 'normalisation': 'sqrt_d', 'kind': 'power_law'})
    >>> target_from_dict(t.to_dict()) == t, t.cli_args()
    (True, ['--target', 'power_law', '--gamma', '1.5', '--normalisation', 'sqrt_d'])
    """

    #: Registered name (the ``kind`` of ``to_dict``, the CLI's ``--target``).
    name: ClassVar[str] = ""
    #: Human-readable name (the explorer's menu; default: ``name``).
    label: ClassVar[str] = ""
    #: ``S0`` is symmetric (every target but the untied teacher).
    symmetric: ClassVar[bool] = True
    #: Parameters offered by the CLI and the explorer.
    params: ClassVar[tuple[TargetParam, ...]] = ()
    #: The law at the explorer's default model depends on ``d`` (the explorer then shows ``d``).
    law_depends_on_d: ClassVar[bool] = True
    #: Offered by the explorer (its parameters are all numbers or choices, it is symmetric).
    explorable: ClassVar[bool] = True
    #: The spectrum decays as a power law, so the excess error has a scaling law in ``n``
    #: (the explorer draws it).
    scaling_law: ClassVar[bool] = False

    @property
    def kind(self) -> str:
        """The registered name (the ``"kind"`` key of ``to_dict``)."""
        return self.name

    @property
    def rank_ratio(self) -> float | None:
        """Asymptotic ``rank S0/d`` for the closed-form nuclear-norm thresholds
        (:func:`singlehead.perfect_recovery_threshold`); ``None``: no closed form."""
        return None

    def validate(self, d: int) -> None:
        """Raise ``ValueError`` naming the parameter when this target cannot be built at dimension ``d``."""

    def mean_of_heads(self, heads: int) -> Target | None:
        """The target ``S0'`` with ``(1/heads) sum_k S0_k = S0'/sqrt(heads)`` for ``heads`` independent draws
        ``S0_k`` of this target, as a target of its own, or ``None`` where that mean has no target law here (the
        theory of several teacher heads on the linear channel needs one)."""
        return None

    def spectrum(self, d: int) -> np.ndarray | None:
        """Deterministic spectrum of ``S0`` (descending), or ``None`` for a random target."""
        return None

    @abc.abstractmethod
    def sample(self, d: int, seed: int) -> torch.Tensor:
        """Draw ``S0`` (``d x d``, float64, CPU torch tensor) from a generator seeded with ``seed``."""

    @abc.abstractmethod
    def spectral_law(self, d: int, model: str = "asymptotic", **options: Any) -> PriorModel:
        """The law ``mu_{S0}`` at dimension ``d`` under ``model`` (module docstring), as a ``PriorModel``."""

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: the dataclass fields (tuples as lists) and ``"kind": name``.

        This dict is part of ``Problem.to_dict`` and so of every cache key: a target that
        changes its fields changes the keys of its problems.
        """
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        out["kind"] = self.name
        return out

    @classmethod
    def from_params(cls, values: dict[str, Any]) -> Target:
        """The target from parameter values (text or parsed); unknown names raise ``ValueError``."""
        known = {p.name: p for p in cls.params}
        field_names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        bad = [k for k in values if k not in field_names]
        if bad:
            raise ValueError(
                f"target {cls.name!r} does not take {', '.join(bad)} (it takes: {', '.join(known) or 'no parameters'})"
            )
        return cls(**{k: known[k].parse(v) if k in known else v for k, v in values.items()})

    def param_values(self) -> dict[str, Any]:
        """The values of :attr:`params`, by name."""
        return {p.name: getattr(self, p.name) for p in self.params}

    def cli_args(self, options: Collection[str] | None = None) -> list[str]:
        """Command-line options that rebuild this target: ``--target NAME``, then ``--param value`` for
        each parameter in ``options`` (the parameters with an option of their own; ``None``: all) and
        ``--target-param param=value`` for the others."""
        out = ["--target", self.name]
        for p in self.params:
            text = p.format(getattr(self, p.name))
            out += (
                [f"--{p.name}", text]
                if options is None or p.name in options
                else ["--target-param", f"{p.name}={text}"]
            )
        return out

    def caption(self) -> dict[str, Any]:
        """What a figure states about the target (its caption's parameters)."""
        return {"target": self.name, **self.param_values()}


class SpectralTarget(Target):
    """A target with a deterministic spectrum ``s = spectrum(d)``: ``S0 = O diag(s) O^T``, ``O`` Haar.

    Subclasses implement :meth:`spectrum` (``d`` real eigenvalues, descending); sampling and every law model of the
    module docstring follow from it, with
    ``Q0 = mean(s^2)`` at this ``d``.

    Examples
    --------
    >>> from singlehead import PowerLawTarget, SpectralTarget
    >>> target = PowerLawTarget(gamma=1.0)
    >>> isinstance(target, SpectralTarget), target.spectrum(4).shape
    (True, (4,))
    >>> round(target.spectral_law(4).Q0, 6) == round(float((target.spectrum(4) ** 2).mean()), 6)
    True
    """

    @abc.abstractmethod
    def spectrum(self, d: int) -> np.ndarray:
        """The ``d`` eigenvalues of ``S0``, descending."""

    def sample(self, d: int, seed: int) -> torch.Tensor:
        """``S0 = O diag(s) O^T`` with ``O`` Haar (from ``seed``) and ``s = self.spectrum(d)``."""
        return _torch_rng().rotated_spectrum(self.spectrum(d), seed)

    def spectral_law(
        self,
        d: int,
        model: str = "asymptotic",
        *,
        draws: int = FINITE_DRAWS,
        seed: int = 0,
        n_spikes: int | None = None,
        delta: float | None = None,
        spike_floor: float = 0.0,
        max_spikes: int | None = None,
    ) -> PriorModel:
        """The law ``mu_{S0}`` at dimension ``d`` under ``model`` (module docstring), as a ``PriorModel``."""
        _check_model(model)
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


def _check_model(model: str) -> None:
    _check(model in LAW_MODELS, "model", f"one of {LAW_MODELS}", model)


_TARGETS: Registry[Target] = Registry("target", Target)


def register_target(cls: type[Target]) -> type[Target]:
    """Register a :class:`Target` subclass under its ``name`` (usable as a class decorator).

    Once registered, the name is accepted by :class:`~singlehead.model.problem.Problem` (``target="name"``
    builds the default instance), by ``Problem.from_dict``, by the CLI's ``--target`` (its
    parameters through ``--target-param NAME=VALUE``) and, for an :attr:`~Target.explorable`
    target, by the explorer.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> from typing import ClassVar
    >>> import numpy as np
    >>> from singlehead import Problem
    >>> from singlehead import SpectralTarget, TargetParam, register_target
    >>> @register_target
    ... @dataclass(frozen=True)
    ... class Flat(SpectralTarget):
    ...     level: float = 1.0
    ...     name: ClassVar[str] = "flat_example"
    ...     params: ClassVar[tuple] = (TargetParam("level"),)
    ...     def spectrum(self, d):
    ...         return np.full(d, self.level)
    >>> Problem(d=10, target="flat_example").to_dict()["target"]
    {'level': 1.0, 'kind': 'flat_example'}
    """
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"target must be a dataclass Target subclass (got {cls!r})")
    return _TARGETS.register(cls)


def target_names() -> tuple[str, ...]:
    """The registered target names, in registration order (the built-in ones first).

    Each name is accepted wherever a target is named: ``Problem(target=name)``, ``--target`` on the command
    line, :func:`get_target`.

    Examples
    --------
    >>> from singlehead import target_names
    >>> target_names()[:4]
    ('mp', 'power_law', 'custom', 'untied_mp')
    """
    return _TARGETS.names()


def target_class(name: str) -> type[Target]:
    """The class registered under ``name``; an unknown name raises ``ValueError`` listing the registered ones."""
    return _TARGETS.cls(name)


def get_target(spec: str | Target) -> Target:
    """A target object: a :class:`Target` passes through, a registered name gives its default instance.

    An unknown name raises ``ValueError`` listing the registered ones (:func:`target_names`).

    Examples
    --------
    >>> from singlehead import MPTarget, get_target
    >>> get_target("mp") == MPTarget()
    True
    >>> get_target(MPTarget(kappa0=0.5)).kappa0
    0.5
    """
    return _TARGETS.get(spec)


@dataclass(frozen=True)
class MPTarget(Target):
    """Marchenko--Pastur target ``S0 = W0 W0^T / sqrt(p0 d)``, ``W0`` iid N(0,1), ``p0 = kappa0 d``.

    Its spectrum is ``sqrt(kappa0)`` times Marchenko--Pastur of ratio ``1/kappa0``
    (mass ``1-kappa0`` at zero when ``kappa0 < 1``; full rank, no zero eigenvalue, from
    ``kappa0 = 1`` on: extensive-rank targets ``p0 > d`` are allowed); ``Tr S0/d -> sqrt(kappa0)``,
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
    >>> MPTarget(kappa0=2.0).spectral_law(400).engine.atom_mass   # p0 = 2 d: full rank
    0.0
    """

    kappa0: float = 0.5
    name: ClassVar[str] = "mp"
    label: ClassVar[str] = "Marchenko–Pastur"
    params: ClassVar[tuple[TargetParam, ...]] = (
        TargetParam(
            "kappa0",
            help="Rank ratio p0/d of the MP target, > 0 (above 1: full rank, no zero eigenvalue; default 0.5).",
            label="κ0",
        ),
    )
    law_depends_on_d: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _check(_finite(self.kappa0) and self.kappa0 > 0, "kappa0", "> 0 for an MP target", self.kappa0)

    @property
    def rank_ratio(self) -> float:
        """``kappa0 = p0/d``."""
        return float(self.kappa0)

    def mean_of_heads(self, heads: int) -> MPTarget:
        """The columns of the heads' ``W0_k`` side by side: the MP target of rank ratio ``heads kappa0``."""
        return MPTarget(kappa0=heads * self.kappa0)

    def caption(self) -> dict[str, Any]:
        return {"kappa0": self.kappa0}

    def spectral_law(
        self, d: int, model: str = "asymptotic", *, draws: int = FINITE_DRAWS, seed: int = 0, **_: Any
    ) -> PriorModel:
        """``MarchenkoPastur(kappa0)`` for every model but ``"finite"`` (one drawn target's eigenvalues)."""
        _check_model(model)
        if model == "finite":
            return prior_from_eigenvalues(np.linalg.eigvalsh(self.sample(d, seed).numpy()), draws=draws, seed=seed)
        law = MarchenkoPastur(self.kappa0)
        return PriorModel(
            "asymptotic", float(law.second_moment()), law, {"law": "marchenko_pastur", "kappa0": self.kappa0}
        )

    def sample(self, d: int, seed: int) -> torch.Tensor:
        """``S0 = W0 W0^T / sqrt(p0 d)``, ``W0 in R^{d x p0}`` iid N(0,1), ``p0 = max(1, round(kappa0 d))``."""
        return _torch_rng().wishart(d, max(1, int(round(self.kappa0 * d))), seed)


@dataclass(frozen=True)
class PowerLawTarget(SpectralTarget):
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
    name: ClassVar[str] = "power_law"
    label: ClassVar[str] = "power law"
    params: ClassVar[tuple[TargetParam, ...]] = (
        TargetParam("gamma", help="Power-law target exponent (> 0.5); selects a power-law target.", label="γ"),
        TargetParam(
            "normalisation",
            "choice",
            "Power-law normalisation: A = sqrt(d) or Q0 = 1 (default sqrt_d).",
            POWER_LAW_NORMALISATIONS,
            selects=False,
        ),
    )
    scaling_law: ClassVar[bool] = True

    def __post_init__(self) -> None:
        _check(_finite(self.gamma) and self.gamma > 0.5, "gamma", "> 0.5", self.gamma)
        _check(
            self.normalisation in POWER_LAW_NORMALISATIONS,
            "normalisation",
            f"one of {POWER_LAW_NORMALISATIONS}",
            self.normalisation,
        )

    def spectrum(self, d: int) -> np.ndarray:
        return power_law_eigenvalues(self.gamma, d, self.normalisation)

    def caption(self) -> dict[str, Any]:
        return {"gamma": self.gamma}


@dataclass(frozen=True)
class CustomTarget(SpectralTarget):
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
    name: ClassVar[str] = "custom"
    params: ClassVar[tuple[TargetParam, ...]] = (
        TargetParam("eigenvalues", "floats", "Custom target spectrum: comma list of d eigenvalues."),
    )
    explorable: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "eigenvalues", tuple(float(x) for x in self.eigenvalues))
        _check(len(self.eigenvalues) > 0, "eigenvalues", "a non-empty list", self.eigenvalues)
        _check(
            all(_finite(x) and x >= 0 for x in self.eigenvalues),
            "eigenvalues",
            "finite and >= 0 (the target is PSD)",
            "…",
        )

    def validate(self, d: int) -> None:
        _check(len(self.eigenvalues) == d, "eigenvalues", f"a list of length d = {d}", len(self.eigenvalues))

    def spectrum(self, d: int) -> np.ndarray:
        return np.sort(np.asarray(self.eigenvalues, dtype=float))[::-1]

    def caption(self) -> dict[str, Any]:
        return {"target": "custom"}


@dataclass(frozen=True)
class UntiedMPTarget(Target):
    """Untied teacher ``M0 = W0Q W0K^T / sqrt(p0 d)``, ``W0Q, W0K in R^{d x p0}`` iid N(0,1), ``p0 = kappa0 d``.

    ``M0`` is not symmetric (rank ``p0``). ``||M0||_F^2/d -> 1`` for every ``kappa0`` and it splits
    equally between the symmetric part ``M0_s = (M0 + M0^T)/2`` and the antisymmetric part
    ``M0_a = (M0 - M0^T)/2``: ``||M0_s||_F^2/d -> 1/2``, ``||M0_a||_F^2/d -> 1/2``
    (``Tr M0^2/d = O(1/d)``), and ``Tr M0/d = O(1/sqrt(d p0))``.
    Labels take the logits ``h_ab(M0) = (x_a^T M0 x_b - delta_ab Tr M0)/sqrt(d)`` plus the usual
    symmetric noise. The spectral law (for the state evolution) is not provided here.

    Examples
    --------
    >>> from singlehead.model.targets import UntiedMPTarget
    >>> M0 = UntiedMPTarget(kappa0=0.5).sample(400, seed=0).numpy()
    >>> Ms, Ma = (M0 + M0.T) / 2, (M0 - M0.T) / 2
    >>> round(float((Ms**2).sum() / 400), 1), round(float((Ma**2).sum() / 400), 1)
    (0.5, 0.5)
    """

    kappa0: float = 0.5
    name: ClassVar[str] = "untied_mp"
    symmetric: ClassVar[bool] = False
    params: ClassVar[tuple[TargetParam, ...]] = MPTarget.params
    law_depends_on_d: ClassVar[bool] = False
    explorable: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _check(
            _finite(self.kappa0) and 0 < self.kappa0 <= 1, "kappa0", "in (0, 1] for an untied MP target", self.kappa0
        )

    @property
    def rank_ratio(self) -> float:
        """``kappa0 = p0/d`` (the rank of ``M0``)."""
        return float(self.kappa0)

    def block_norms(self) -> tuple[float, float]:
        """``(||M0_s||_F^2/d, ||M0_a||_F^2/d) -> (1/2, 1/2)``: the asymptotic split of ``||M0||_F^2/d = 1``."""
        return 0.5, 0.5

    def spectral_law(self, d: int, model: str = "asymptotic", **_: Any) -> PriorModel:
        """Not provided: the untied teacher's law enters the untied state evolution only."""
        raise NotImplementedError(
            "target: the spectral law of an UntiedMPTarget is not implemented "
            "(the tied state evolution needs a symmetric target)"
        )

    def sample(self, d: int, seed: int) -> torch.Tensor:
        """``M0 = W0Q W0K^T / sqrt(p0 d)`` (float64, CPU), ``W0Q`` then ``W0K`` iid N(0,1) from one
        generator seeded with ``seed``, ``p0 = max(1, round(kappa0 d))``."""
        return _torch_rng().untied_wishart(d, max(1, int(round(self.kappa0 * d))), seed)


for _cls in (MPTarget, PowerLawTarget, CustomTarget, UntiedMPTarget):
    register_target(_cls)


def params_by_name(names: Iterable[str] | None = None) -> dict[str, TargetParam]:
    """The parameters of the registered targets ``names`` (default: every one), by parameter name.

    Where several targets declare a name, the first of ``names`` gives its :class:`TargetParam`
    (help text, type); the command line and the explorer build one option or control per name.
    """
    out: dict[str, TargetParam] = {}
    for name in target_names() if names is None else names:
        for prm in target_class(name).params:
            out.setdefault(prm.name, prm)
    return out


#: Parameter names of the built-in targets: the command line always has an option of its own for each
#: (a target registered later passes its other parameters through ``--target-param``).
BUILTIN_TARGET_PARAMS: frozenset[str] = frozenset(params_by_name(("mp", "power_law", "custom", "untied_mp")))


def target_from_dict(spec: dict[str, Any]) -> Target:
    """Rebuild a target from :meth:`Target.to_dict` output (cached configs, ``Problem.from_dict``).

    ``spec["kind"]`` is a registered name; an unknown one raises ``ValueError`` listing the registered names.

    Examples
    --------
    >>> from singlehead import MPTarget, target_from_dict
    >>> target = MPTarget(kappa0=0.5)
    >>> target_from_dict(target.to_dict()) == target
    True
    """
    kind = spec.get("kind")
    args = {k: v for k, v in spec.items() if k != "kind"}
    if kind not in target_names():
        raise ValueError(f"target kind must be one of {', '.join(target_names())} (got {kind!r})")
    return target_class(kind)(**args)

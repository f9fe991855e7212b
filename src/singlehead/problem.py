"""One frozen, validated parameter object shared by simulation, theory and AMP.

Conventions (normative, see ``shared/THEORY.md`` §1 and arXiv 2509.24914 §2):

* token dimension ``d``, tokens per sequence ``T``, samples ``n = round(alpha d^2)``;
* student width ``p = max(1, round(kappa d))`` for the factorized student;
* target rank ratio ``kappa0 = p0/d`` for the Marchenko--Pastur target;
* ``noise`` is the label-noise variance ``Delta`` added to the target logits
  (``Delta`` on the diagonal, ``Delta/2`` off it);
* ``lam`` is the library's regularisation ``lambda`` (the paper's "lambda tilde"):
  factorized loss ``sum_mu ||yhat - y||_F^2 + (lam/sqrt(kappa)) ||W||_F^2``
  = ``... + lam d Tr S``; direct loss ``... + lam d ||S||_F^2``.

Every field is validated on construction; an invalid value raises
:class:`ValueError` whose message names the parameter and its valid range.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal, Union

CHANNELS = ("seq2lab", "seq2seq", "linear")
STUDENTS = ("factorized", "direct")
POWER_LAW_NORMALISATIONS = ("sqrt_d", "unit_q0")


def _check(cond: bool, name: str, valid: str, value: Any) -> None:
    if not cond:
        raise ValueError(f"{name} must be {valid} (got {value!r})")


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class MPTarget:
    """Marchenko--Pastur target ``S0 = W0 W0^T / sqrt(p0 d)``, ``W0`` iid N(0,1), ``p0 = kappa0 d``.

    Its spectrum is ``sqrt(kappa0)`` times Marchenko--Pastur of ratio ``1/kappa0``
    (mass ``1-kappa0`` at zero when ``kappa0 < 1``); ``Tr S0/d -> sqrt(kappa0)``,
    ``Q0 = Tr S0^2/d -> 1 + kappa0``.
    """

    kappa0: float = 0.5
    kind: Literal["mp"] = "mp"

    def __post_init__(self) -> None:
        _check(_finite(self.kappa0) and 0 < self.kappa0 <= 1, "kappa0", "in (0, 1] for an MP target", self.kappa0)


@dataclass(frozen=True)
class PowerLawTarget:
    """Power-law target ``S0 = O diag(s) O^T``, ``O`` Haar, ``s_i = A i^(-gamma)``, ``i = 1..d``.

    Normalisations (THEORY §1):

    * ``"sqrt_d"`` (default, arXiv 2509.24914): ``A = sqrt(d)``, so the top
      eigenvalues are O(sqrt d) spikes and ``Q0 = sum_i i^(-2 gamma)``;
    * ``"unit_q0"`` (scaling-law code of arXiv 2509.24882): ``A`` chosen so that
      ``Q0 = Tr S0^2 / d = 1`` exactly at this ``d``.
    """

    gamma: float = 1.25
    normalisation: str = "sqrt_d"
    kind: Literal["power_law"] = "power_law"

    def __post_init__(self) -> None:
        _check(_finite(self.gamma) and self.gamma > 0.5, "gamma", "> 0.5", self.gamma)
        _check(self.normalisation in POWER_LAW_NORMALISATIONS, "normalisation",
               f"one of {POWER_LAW_NORMALISATIONS}", self.normalisation)


@dataclass(frozen=True)
class CustomTarget:
    """Target with a user-given spectrum: ``S0 = O diag(eigenvalues) O^T``, ``O`` Haar.

    ``eigenvalues`` must have length ``d`` and be non-negative (targets are PSD).
    """

    eigenvalues: tuple[float, ...] = ()
    kind: Literal["custom"] = "custom"

    def __post_init__(self) -> None:
        object.__setattr__(self, "eigenvalues", tuple(float(x) for x in self.eigenvalues))
        _check(len(self.eigenvalues) > 0, "eigenvalues", "a non-empty list", self.eigenvalues)
        _check(all(_finite(x) and x >= 0 for x in self.eigenvalues), "eigenvalues",
               "finite and >= 0 (the target is PSD)", "…")


Target = Union[MPTarget, PowerLawTarget, CustomTarget]


def target_from_dict(spec: dict[str, Any]) -> Target:
    """Rebuild a target from ``dataclasses.asdict`` output (used for cached configs)."""
    kind = spec.get("kind")
    args = {k: v for k, v in spec.items() if k != "kind"}
    if kind == "mp":
        return MPTarget(**args)
    if kind == "power_law":
        return PowerLawTarget(**args)
    if kind == "custom":
        return CustomTarget(**args)
    raise ValueError(f"target kind must be one of mp, power_law, custom (got {kind!r})")


@dataclass(frozen=True)
class Problem:
    """A complete task + student + regularisation specification.

    Parameters
    ----------
    d : int
        Token dimension, ``d >= 2``.
    T : int
        Tokens per sequence, ``T >= 1``.
    alpha : float
        Sample ratio ``n/d^2 > 0``.
    channel : {"seq2lab", "seq2seq", "linear"}
        Output channel (THEORY §1).
    beta, beta0 : float
        Inverse temperatures of the student and of the target softmax (> 0).
    noise : float
        Logit-noise variance ``Delta >= 0``.
    target : MPTarget | PowerLawTarget | CustomTarget
        Target ``S0`` specification.
    student : {"factorized", "direct"}
        Tied attention ``S = W W^T/sqrt(p d)`` (nuclear-norm penalty) or a
        symmetric ``S`` trained entry-wise (Frobenius penalty).
    kappa : float
        Width ratio ``p/d`` of the factorized student, in ``(0, 1]`` (p > d adds
        nothing: the rank of S is at most d).
    lam : float
        Regularisation ``lambda >= 0``.
    """

    d: int = 100
    T: int = 2
    alpha: float = 1.0
    channel: str = "seq2lab"
    beta: float = 1.0
    beta0: float = 1.0
    noise: float = 0.0
    target: Target = field(default_factory=MPTarget)
    student: str = "factorized"
    kappa: float = 1.0
    lam: float = 0.01

    def __post_init__(self) -> None:
        _check(isinstance(self.d, int) and not isinstance(self.d, bool) and self.d >= 2, "d", "an integer >= 2", self.d)
        _check(isinstance(self.T, int) and not isinstance(self.T, bool) and self.T >= 1, "T", "an integer >= 1", self.T)
        _check(_finite(self.alpha) and self.alpha > 0, "alpha", "> 0", self.alpha)
        _check(self.channel in CHANNELS, "channel", f"one of {CHANNELS}", self.channel)
        _check(_finite(self.beta) and self.beta > 0, "beta", "> 0", self.beta)
        _check(_finite(self.beta0) and self.beta0 > 0, "beta0", "> 0", self.beta0)
        _check(_finite(self.noise) and self.noise >= 0, "noise", ">= 0", self.noise)
        _check(isinstance(self.target, (MPTarget, PowerLawTarget, CustomTarget)), "target",
               "an MPTarget, PowerLawTarget or CustomTarget", self.target)
        _check(self.student in STUDENTS, "student", f"one of {STUDENTS}", self.student)
        _check(_finite(self.kappa) and 0 < self.kappa <= 1, "kappa", "in (0, 1]", self.kappa)
        _check(_finite(self.lam) and self.lam >= 0, "lam", ">= 0", self.lam)
        if isinstance(self.target, CustomTarget):
            _check(len(self.target.eigenvalues) == self.d, "eigenvalues",
                   f"a list of length d = {self.d}", len(self.target.eigenvalues))
        if self.channel == "linear" and self.beta != 1.0:
            # The linear channel has no temperature; refuse silently-ignored input.
            _check(False, "beta", "1 for the linear channel (it has no softmax)", self.beta)

    # ---- derived sizes -------------------------------------------------
    @property
    def n(self) -> int:
        """Number of training sequences ``round(alpha d^2)`` (at least 1)."""
        return max(1, int(round(self.alpha * self.d * self.d)))

    @property
    def p(self) -> int:
        """Student width ``max(1, round(kappa d))``."""
        return max(1, int(round(self.kappa * self.d)))

    @property
    def n_pairs(self) -> int:
        """Number of distinct logits per sequence ``K = T(T+1)/2``."""
        return self.T * (self.T + 1) // 2

    def replace(self, **changes: Any) -> "Problem":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form; ``Problem.from_dict(p.to_dict()) == p``."""
        out = dataclasses.asdict(self)
        if isinstance(self.target, CustomTarget):
            out["target"]["eigenvalues"] = list(self.target.eigenvalues)
        return out

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> "Problem":
        spec = dict(spec)
        if isinstance(spec.get("target"), dict):
            spec["target"] = target_from_dict(spec["target"])
        return cls(**spec)

    def key(self) -> str:
        """Stable hash of the full configuration (for caches and resumable runs)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

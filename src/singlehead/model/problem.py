"""One frozen, validated parameter object shared by simulation, theory and AMP.

Conventions (normative; docs: :ref:`theory`, sections 1-7, and arXiv 2509.24914 §2):

* token dimension ``d``, tokens per sequence ``T``, samples ``n = round(alpha d^2)`` (at least one for
  the routes that sample data: :meth:`Problem.check_training_set`);
* student width ``p = max(1, round(kappa d))`` for the factorized student;
* target rank ratio ``kappa0 = p0/d`` for the Marchenko--Pastur target;
* ``noise`` is the label-noise variance ``Delta`` added to the target logits
  (``Delta`` on the diagonal, ``Delta/2`` off it);
* ``lam`` is the library's regularisation ``lambda`` (the paper's "lambda tilde"):
  factorized loss ``sum_mu ||yhat - y||_F^2 + (lam/sqrt(kappa)) ||W||_F^2``
  = ``... + lam d Tr S``; direct loss ``... + lam d ||S||_F^2``;
* ``heads`` / ``teacher_heads`` (``H`` / ``H0``): tied attention heads of the student / the teacher;
  the output is the mean over heads of the channel outputs (docs: :ref:`concepts-multihead`).
  Both are left out of ``to_dict`` (so of every cache key) and of ``repr`` when both are 1.

Every field is validated on construction; an invalid value raises
:class:`ValueError` whose message names the parameter and its valid range.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from singlehead.model.channels import Channel, get_channel
from singlehead.model.results import stable_hash
from singlehead.model.students import Student, get_student
from singlehead.model.targets import (  # noqa: F401  (PowerLawTarget, CustomTarget, UntiedMPTarget: re-exported, older imports use them)
    CustomTarget,
    MPTarget,
    PowerLawTarget,
    Target,
    UntiedMPTarget,
    get_target,
    target_from_dict,
)
from singlehead.model.validation import check as _check
from singlehead.model.validation import finite as _finite
from singlehead.model.validation import is_int as _is_int

_HEAD_FIELDS = ("heads", "teacher_heads")


@dataclass(frozen=True)
class Problem:
    """A complete task + student + regularisation specification.

    Parameters
    ----------
    d : int
        Token dimension, ``d >= 2``.
    T : int
        Tokens per sequence, ``T >= channel.min_T``
        (:attr:`~singlehead.model.channels.Channel.min_T`): ``T >= 2`` for the softmax channels
        (``seq2lab``, ``seq2seq``, ``hardmax``: the softmax over a single token is 1 whatever the
        logits), ``T >= 1`` for ``linear``.
    alpha : float
        Sample ratio ``n/d^2 > 0``. The routes that sample a training set (:func:`singlehead.simulate`,
        :func:`singlehead.amp.amp`, ``singlehead simulate`` and ``singlehead amp``) need ``n =
        round(alpha d^2) >= 1``, i.e. ``alpha > 1/(2 d^2)``, and refuse a smaller ``alpha`` naming
        ``alpha`` and ``d`` (:meth:`check_training_set`); the theory routes (``theory``,
        ``bayes_optimal``, the thresholds), which take ``d -> inf`` at fixed ``alpha``, accept it.
    channel : str or Channel
        Output channel (docs: Theory, :ref:`theory-channels`): a registered name (``"seq2lab"``, ``"seq2seq"``,
        ``"linear"``, or one added with :func:`singlehead.model.channels.register_channel`) or a
        :class:`~singlehead.model.channels.Channel`; stored as the object.
    beta, beta0 : float
        Inverse temperatures of the student and of the target softmax (> 0).
    noise : float
        Logit-noise variance ``Delta >= 0``.
    target : str or Target
        Target ``S0``: a :class:`~singlehead.model.targets.Target` (``MPTarget``, ``PowerLawTarget``,
        ``CustomTarget``, ``UntiedMPTarget`` for a non-symmetric untied teacher ``M0``, or one
        added with :func:`singlehead.model.targets.register_target`) or a registered name (its default
        instance); stored as the object.
    student : str or Student
        ``"factorized"``: tied attention ``S = W W^T/sqrt(p d)`` (nuclear-norm penalty);
        ``"direct"``: a symmetric ``S`` trained entry-wise (Frobenius penalty); ``"untied"``: untied
        attention ``M = W_Q W_K^T/sqrt(p d)`` (nuclear-norm penalty ``lam d ||M||_*``); or a registered
        name / :class:`~singlehead.model.students.Student`; stored as the object.
    kappa : float
        Width ratio ``p/d`` of the factorized and untied students, in ``(0, 1]`` (p > d adds
        nothing: the rank of S is at most d).
    lam : float
        Regularisation ``lambda >= 0``.
    heads : int
        Student heads ``H >= 1``: tied heads ``S_h = W_h W_h^T/sqrt(p d)``, ``h = 1..H``, each of width
        ``p``, weight decay ``lam d sum_h Tr S_h``; the output is the mean over heads of the channel
        outputs of the heads' logits. ``H > 1`` needs the factorized student.
    teacher_heads : int
        Teacher heads ``H0 >= 1``, each ``S0_k`` drawn independently from ``target``; the labels are
        the mean over heads of the channel outputs of ``h(S0_k) + xi`` (one noise ``xi`` per sequence,
        shared by the heads). ``H0 > 1`` needs a symmetric target.

    Examples
    --------
    >>> from singlehead import MPTarget, Problem
    >>> problem = Problem(d=100, T=2, alpha=0.5, noise=0.5, lam=0.01, target=MPTarget(kappa0=0.5))
    >>> problem.n, problem.p, problem.n_pairs          # n = alpha d^2, p = kappa d, K = T(T+1)/2
    (5000, 100, 3)
    >>> problem.replace(alpha=2.0).n
    20000
    >>> Problem(alpha=-1.0)
    Traceback (most recent call last):
        ...
    ValueError: alpha must be > 0 (got -1.0)
    """

    d: int = 100
    T: int = 2
    alpha: float = 1.0
    channel: Channel = "seq2lab"  # type: ignore[assignment]  # a name is resolved in __post_init__
    beta: float = 1.0
    beta0: float = 1.0
    noise: float = 0.0
    target: Target = field(default_factory=MPTarget)
    student: Student = "factorized"  # type: ignore[assignment]
    kappa: float = 1.0
    lam: float = 0.01
    heads: int = 1
    teacher_heads: int = 1

    def __post_init__(self) -> None:
        _check(isinstance(self.d, int) and not isinstance(self.d, bool) and self.d >= 2, "d", "an integer >= 2", self.d)
        _check(isinstance(self.T, int) and not isinstance(self.T, bool) and self.T >= 1, "T", "an integer >= 1", self.T)
        _check(_finite(self.alpha) and self.alpha > 0, "alpha", "> 0", self.alpha)
        # names are resolved here, once: past this point the code holds channel / student objects
        object.__setattr__(self, "channel", get_channel(self.channel))
        object.__setattr__(self, "student", get_student(self.student))
        _check(
            self.T >= self.channel.min_T,
            "T",
            f"an integer >= {self.channel.min_T} for the "
            f"{self.channel.name!r} channel, whose output with fewer tokens does not depend on the logits",
            self.T,
        )
        _check(_finite(self.beta) and self.beta > 0, "beta", "> 0", self.beta)
        _check(_finite(self.beta0) and self.beta0 > 0, "beta0", "> 0", self.beta0)
        _check(_finite(self.noise) and self.noise >= 0, "noise", ">= 0", self.noise)
        if isinstance(self.target, str):
            object.__setattr__(self, "target", get_target(self.target))
        _check(
            isinstance(self.target, Target),
            "target",
            "a Target (MPTarget, PowerLawTarget, ...) or a registered target name",
            self.target,
        )
        _check(_finite(self.kappa) and 0 < self.kappa <= 1, "kappa", "in (0, 1]", self.kappa)
        _check(_finite(self.lam) and self.lam >= 0, "lam", ">= 0", self.lam)
        self.target.validate(self.d)
        self.channel.validate(self.T, self.beta, self.beta0)
        self.student.validate(self.kappa)
        _check(_is_int(self.heads) and self.heads >= 1, "heads", "an integer >= 1", self.heads)
        _check(
            _is_int(self.teacher_heads) and self.teacher_heads >= 1,
            "teacher_heads",
            "an integer >= 1",
            self.teacher_heads,
        )
        object.__setattr__(self, "heads", int(self.heads))
        object.__setattr__(self, "teacher_heads", int(self.teacher_heads))
        _check(
            self.heads == 1 or self.student.name == "factorized",
            "heads",
            f"1 for the {self.student.name!r} student (several heads need the factorized student)",
            self.heads,
        )
        _check(
            self.teacher_heads == 1 or self.target.symmetric,
            "teacher_heads",
            f"1 for the non-symmetric target {self.target.name!r} (several teacher heads need a symmetric target)",
            self.teacher_heads,
        )

    def __repr__(self) -> str:
        # the head counts are shown only when one of them is not 1 (the single-head repr is unchanged)
        shown = [f for f in dataclasses.fields(self) if f.name not in _HEAD_FIELDS or self.multihead]
        return f"{type(self).__name__}({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"

    @property
    def multihead(self) -> bool:
        """Whether the student or the teacher has more than one head."""
        return self.heads != 1 or self.teacher_heads != 1

    def check_single_head(self, route: str) -> None:
        """Raise ``ValueError`` naming ``heads`` when this problem has several heads and ``route`` (a name for
        the message) covers the single-head model only (AMP, the Bayes baseline, the thresholds, ...)."""
        _check(
            not self.multihead,
            "heads",
            f"1 for {route}, which covers the single-head model only "
            f"(got heads={self.heads}, teacher_heads={self.teacher_heads})",
            self.heads,
        )

    def check_training_set(self) -> None:
        """Raise ``ValueError`` naming ``alpha`` and ``d`` unless the training set has ``n = round(alpha d^2) >= 1``
        sequences, i.e. ``alpha > 1/(2 d^2)`` (``alpha = 1/d^2`` gives ``n = 1``).

        Every route that samples a training set calls it (through :attr:`n` at the latest); the theory
        routes, which take ``d -> inf`` at fixed ``alpha``, do not.

        Examples
        --------
        >>> Problem(d=20, alpha=1e-6).check_training_set()
        Traceback (most recent call last):
            ...
        ValueError: alpha must be > 1/(2 d^2) = 0.00125 at d=20, so that the training set has n = round(alpha d^2) >= 1
        sequences (alpha = 1/d^2 = 0.0025 gives n = 1) (got 1e-06)
        """
        d2 = self.d * self.d
        _check(
            round(self.alpha * d2) >= 1,
            "alpha",
            f"> 1/(2 d^2) = {0.5 / d2:.6g} at d={self.d}, so that the "
            f"training set has n = round(alpha d^2) >= 1 sequences (alpha = 1/d^2 = {1 / d2:.6g} gives n = 1)",
            self.alpha,
        )

    # ---- derived sizes -------------------------------------------------
    @property
    def n(self) -> int:
        """Number of training sequences ``round(alpha d^2)``; ``ValueError`` naming ``alpha`` and ``d`` when it is 0
        (:meth:`check_training_set`)."""
        self.check_training_set()
        return int(round(self.alpha * self.d * self.d))

    @property
    def p(self) -> int:
        """Student width ``max(1, round(kappa d))``."""
        return max(1, int(round(self.kappa * self.d)))

    @property
    def n_pairs(self) -> int:
        """Number of distinct logits per sequence ``K = T(T+1)/2``."""
        return self.T * (self.T + 1) // 2

    def replace(self, **changes: Any) -> Problem:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form; ``Problem.from_dict(p.to_dict()) == p``."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if not self.multihead:  # single-head dicts (and so cache keys) are the ones without head fields
            for name in _HEAD_FIELDS:
                del out[name]
        out["target"] = self.target.to_dict()
        out["channel"], out["student"] = self.channel.to_spec(), self.student.to_spec()
        return out

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> Problem:
        spec = dict(spec)
        if isinstance(spec.get("target"), dict):
            spec["target"] = target_from_dict(spec["target"])
        return cls(**spec)

    def key(self) -> str:
        """Stable hash of the full configuration (``singlehead.model.results.stable_hash``)."""
        return stable_hash(self.to_dict())

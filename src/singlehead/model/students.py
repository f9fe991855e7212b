"""Students as objects: how the learned query–key map is parametrised and penalised (docs: Theory,
:ref:`theory-students`, :ref:`theory-prior-side`).

* :class:`Factorized` (``"factorized"``): tied attention ``W in R^{d x p}``,
  ``S = W W^T / sqrt(p d)``; penalty ``(lam/sqrt(kappa)) ||W||_F^2 = lam d Tr S`` (weight decay
  is a nuclear norm on the PSD ``S``, with rank cap ``p = kappa d``);
* :class:`Direct` (``"direct"``): a symmetric ``S`` trained entry-wise, penalty ``lam d ||S||_F^2``;
* :class:`Untied` (``"untied"``): untied attention ``W_Q, W_K in R^{d x p}``,
  ``M = W_Q W_K^T / sqrt(p d)`` (not symmetric); penalty
  ``(lam/sqrt(kappa)) (||W_Q||_F^2 + ||W_K||_F^2)/2``, whose minimum over the factorisations of a
  fixed ``M`` is ``lam d ||M||_*`` (nuclear norm), so a PSD ``M`` with ``W_Q = W_K`` reproduces the
  tied objective exactly.

A student object owns what depends on the student:

* the trainer's parametrisation (:meth:`Student.init_module`, a torch module with
  ``logits(X)``, ``matrix()`` and ``regulariser(lam)``) and the penalty of a matrix;
* the eigenvalue-wise proximal map of the penalty (AMP's matrix step, the convex reference solver);
* the prior side of the state evolution, ``(qhat, mhat, Sigmahat) -> (q, m, Sigma)``, with its
  threshold, scale and rank cap, and whether complete rank collapse can happen;
* the law of the learned spectrum (threshold and rank cap).

New students subclass :class:`Student` and are registered with :func:`register_student`;
names are resolved once, by :func:`get_student`, where a problem is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from singlehead.model.registry import Registry
from singlehead.numerics.spectra.untied_prior import BlockPriorSide, untied_prior_side
from singlehead.numerics.spectra.untied_prior_jacobian import untied_prior_jacobian, untied_prior_tangent

__all__ = [
    "PriorSide",
    "BlockPriorSide",
    "FieldBlock",
    "Student",
    "Factorized",
    "Direct",
    "Untied",
    "register_student",
    "get_student",
    "student_names",
    "init_student",
]


def _torch_layers() -> Any:
    """The torch modules of the students (imported on first use: the theory paths never load torch)."""
    from singlehead.model import attention_layers

    return attention_layers


@dataclass
class PriorSide:
    """``(q, m, Sigma)`` from the conjugates, with the learned-spectrum law parameters.

    ``eta, delta, eps``: scale, effective noise ``sqrt(qhat)/mhat`` and threshold of the spectral
    estimator ``Shat = eta f(S0 + delta Z)``; ``first_moment`` is ``Tr Shat/d`` (nan where unused);
    ``rank_fraction`` the fraction of non-zero eigenvalues; ``cap_binds`` whether the rank cap
    removes eigenvalues above the threshold; ``cutoff`` the eigenvalue of ``Y`` below which
    ``Shat`` vanishes. ``*_draws``: per GOE draw of the finite-``d`` prior (else ``None``).

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.state_evolution import prior_model
    >>> p = Problem(lam=0.01)
    >>> side = p.student.prior_side(1.0, 1.0, 1.0, lam=p.lam, kappa=p.kappa, prior=prior_model(p))
    >>> round(side.eps, 6)  # the threshold 2 lam/mhat
    0.02
    """

    q: float
    m: float
    Sigma: float
    eta: float
    delta: float
    eps: float
    first_moment: float
    rank_fraction: float
    cap_binds: bool = False
    cutoff: float = math.nan
    q_draws: tuple[float, ...] | None = None
    m_draws: tuple[float, ...] | None = None
    Sigma_draws: tuple[float, ...] | None = None


@dataclass(frozen=True)
class FieldBlock:
    """One block of the state evolution's fields: the part ``B`` of the learned matrix it sees.

    ``name``: ``"s"`` (the symmetric part ``M_s = (M + M^T)/2``) or ``"a"`` (the antisymmetric part
    ``M_a = (M - M^T)/2``); ``size(T)``: fields per sequence, ``T(T+1)/2`` and ``T(T-1)/2``. The
    blocks are uncorrelated (``<M_s, M_a> = 0``), each with its own ``(q_B, m_B, Sigma_B)``.

    Examples
    --------
    >>> [(b.name, b.size(3)) for b in get_student("untied").field_blocks()]
    [('s', 6), ('a', 3)]
    >>> [b.name for b in get_student("factorized").field_blocks()]
    ['s']
    """

    name: str

    def size(self, T: int) -> int:
        """Fields per sequence of this block."""
        return T * (T + 1) // 2 if self.name == "s" else T * (T - 1) // 2


SYMMETRIC_BLOCK = FieldBlock("s")
ANTISYMMETRIC_BLOCK = FieldBlock("a")


@dataclass(frozen=True)
class Student:
    """Base class of students (see the module docstring for what a student owns).

    Subclasses set ``name`` and implement the trainer's module (:meth:`init_module`), the penalty
    ``pen(S)`` of the regulariser ``lam d pen(S)`` and its eigenvalue-wise prox, and the prior side
    of the state evolution; register a subclass with :func:`register_student`.

    Examples
    --------
    >>> from singlehead.model.students import get_student
    >>> st = get_student("factorized")
    >>> st.rank_cap(0.5), st.thresholded
    (0.5, True)
    """

    name: ClassVar[str] = ""
    #: The estimator is a threshold of the spectrum (an atom at zero, a rank cap, rank collapse).
    thresholded: ClassVar[bool] = False
    #: The learned matrix is symmetric (its spectrum: eigenvalues; otherwise singular values).
    symmetric: ClassVar[bool] = True
    #: Default Sobol nodes per scramble of the state evolution's output quadrature (``SEOptions.n_points=None``).
    quadrature_points: ClassVar[int] = 2048

    def __str__(self) -> str:
        return self.name

    def to_spec(self) -> str:
        """What ``Problem.to_dict`` stores: the registered name."""
        return self.name

    def validate(self, kappa: float) -> None:
        """Raise ``ValueError`` naming the parameter when ``kappa`` is invalid for this student."""

    # ---------------------------------------------------------------- trainer
    def width(self, d: int, p: int) -> int:
        """Columns of the trained parameter (for the cost of one gradient)."""
        return d

    def rank_cap(self, kappa: float) -> float | None:
        """Cap on ``rank S / d`` (``None``: no cap)."""
        return None

    def init_module(self, d: int, p: int, gen: Any, dtype: Any, device: Any, scale: float = 1.0) -> Any:
        """The torch module trained by :func:`singlehead.simulate`, drawn on the CPU from ``gen``."""
        raise NotImplementedError

    def penalty_value(self, S: Any) -> Any:
        """``pen(S)``, with the regulariser ``lam d pen(S)`` (numpy or torch ``S``)."""
        raise NotImplementedError

    def penalty(self, lam: float, S: np.ndarray) -> float:
        """The reported penalty ``lam pen(S)/d`` (the regulariser divided by ``d^2``)."""
        return lam * float(self.penalty_value(S)) / S.shape[0]

    def penalty_prox(self, nu: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Spectrum-wise ``argmin_S t pen(S) + ||S - R||_F^2/2`` at eigenvalues ``nu`` of ``R``
        (singular values for a student whose matrix is not ``symmetric`` (a class attribute)): ``(f(nu), f'(nu))``."""
        raise NotImplementedError

    # ---------------------------------------------------------------- state evolution: prior side
    def prior_side(
        self, qhat: float, mhat: float, Sigmahat: float, *, lam: float, kappa: float, prior: Any
    ) -> PriorSide:
        """``(qhat, mhat, Sigmahat) -> (q, m, Sigma)`` for the target law ``prior`` (a ``PriorModel``)."""
        raise NotImplementedError(f"student {self.name!r}: the prior side of the state evolution is not implemented")

    def prior_sigmahat_exponents(self) -> tuple[float, float, float] | None:
        """``(a_q, a_m, a_Sigma)`` when the prior side's ``q, m, Sigma`` are proportional to
        ``Sigmahat^a`` at fixed ``qhat, mhat`` (their ``Sigmahat``-derivatives are then exact:
        ``a x/Sigmahat``, and the SE's Jacobian needs no difference in ``Sigmahat``); ``None`` otherwise."""
        return None

    def se_penalty(self, lam: float, q: float, side: PriorSide) -> float:
        """The penalty ``lam pen(S)/d`` predicted at the fixed point ``q`` with prior side ``side``."""
        raise NotImplementedError

    def collapse_lam(self, mhat0: float, top_edge: float) -> float:
        """``lam`` above which ``S = 0`` is a fixed point (``inf``: never), from the collapsed
        point's ``mhat0`` and the top edge of ``mu_delta0``."""
        return math.inf

    def linear_prior_factor(self, lam: float, Sigmahat: float) -> tuple[float, float] | None:
        """``(P/Sigmahat^2, Sigma)`` of the replicon's prior factor when the estimator is linear, else ``None``."""
        return None

    def fixed_threshold(self, c_T: int) -> float | None:
        """Interpolation / perfect-recovery threshold when it is a parameter count (``None``: spectral)."""
        return None

    # ---------------------------------------------------------------- state evolution: field blocks
    def field_blocks(self) -> tuple[FieldBlock, ...]:
        """The blocks of fields the state evolution tracks: a symmetric student's logits see ``S`` through
        one symmetric block; a non-symmetric student's through a symmetric and an antisymmetric one."""
        return (SYMMETRIC_BLOCK,) if self.symmetric else (SYMMETRIC_BLOCK, ANTISYMMETRIC_BLOCK)

    def block_prior_side(
        self, hats: np.ndarray, *, lam: float, kappa: float, sample: Any, warm: Any = None, tol: float = 1e-11
    ) -> BlockPriorSide:
        """``(qhat_s, mhat_s, Sigmahat_s, qhat_a, mhat_a, Sigmahat_a) -> (q_s, m_s, Sigma_s, q_a, m_a, Sigma_a)``.

        The prior side of a student with a symmetric and an antisymmetric block: the estimator
        ``Mhat = argmin_M sum_B [(Sigmahat_B/2) ||M_B||_F^2 - <M_B, A_B>] + 2 lam pen(M)``,
        ``A_B = mhat_B M0_B + sqrt(qhat_B) Z_B`` (``Z_s`` GOE, ``Z_a`` antisymmetric Gaussian, both
        with off-diagonal variance ``1/D``), and ``q_B = ||Mhat_B||_F^2/D``, ``m_B = <Mhat_B, M0_B>/D``,
        ``Sigma_B = <Mhat_B, Z_B>/(D sqrt(qhat_B))``. ``sample``: fixed instances ``(M0, Z_s, Z_a)``
        (``UntiedPriorSample``, internal, with ``M0`` normalised to the
        teacher's ``Q0_B``), for a student that samples; ``warm``: the previous call's
        ``solutions``; ``tol``: the accuracy an iterative estimator is asked for.
        """
        raise NotImplementedError(
            f"student {self.name!r}: no prior side for symmetric and antisymmetric field blocks "
            "(Student.block_prior_side), which the state evolution of a non-symmetric student needs"
        )

    def block_prior_jacobian(
        self, hats: np.ndarray, *, lam: float, kappa: float, sample: Any, solutions: Any, probes: int = 2, seed: int = 0
    ) -> Any:
        """The block norms of the Jacobian of the prior side's estimator ``Mhat`` in its input ``A = A_s + A_a``
        at the conjugates ``hats`` (a ``PriorJacobian``, internal:
        ``||K_{b b'}||_F^2/(D^2/2)`` and ``tr K_{b b}/(D^2/2)`` per draw), for the replicon of a block fixed
        point. ``solutions``: :meth:`block_prior_side`'s estimators there (solved to a tight tolerance);
        ``probes``, ``seed``: the Hutchinson probes per draw and block and their seed."""
        raise NotImplementedError(
            f"student {self.name!r}: no Jacobian of the block prior side (Student.block_prior_jacobian), which the "
            "replicon of a non-symmetric student's fixed point needs"
        )

    def block_prior_tangent(
        self, hats: np.ndarray, *, lam: float, kappa: float, sample: Any, solutions: Any
    ) -> np.ndarray | None:
        """The derivative of :meth:`block_prior_side`'s per-draw overlaps in the conjugates at ``hats``,
        ``(R, 6, 6)`` (``[r, i, j] = d row_i/d hats_j``), from its ``solutions`` there (solved to a tight
        tolerance); ``None`` (the default) where the student has none there: the state evolution then
        differentiates the prior side by finite differences of :meth:`block_prior_side`."""
        return None

    def block_collapsed(self, hats: np.ndarray, *, lam: float, sample: Any) -> bool:
        """Whether ``M = 0`` is the prior side's estimator on every instance at the collapse conjugates
        ``hats`` (``qhat_s, mhat_s, -, qhat_a, mhat_a, -``); default ``False`` (no complete collapse)."""
        return False

    def tied_counterpart(self, qhat_s: float, lam: float) -> Student | None:
        """A symmetric student whose prior side is this one's when the antisymmetric block is absent
        (``T = 1``) and the teacher symmetric, at the conjugate ``qhat_s`` (``None``: none known)."""
        return None


@dataclass(frozen=True)
class Factorized(Student):
    """Tied attention ``S = W W^T/sqrt(p d)``: nuclear-norm penalty ``lam d Tr S``, rank cap ``p``.

    Weight decay ``(lam/sqrt(kappa)) ||W||_F^2`` equals ``lam d Tr S``; the estimator of the state
    evolution soft-thresholds the spectrum of ``Y = S0 + delta Z`` at ``eps = 2 lam/mhat`` and scales
    it by ``eta = mhat/Sigmahat`` (docs: Theory, :ref:`theory-prior-side`).

    Examples
    --------
    >>> import numpy as np
    >>> Factorized().penalty_prox(np.array([-1.0, 0.5, 2.0]), 1.0)[0].tolist()
    [0.0, 0.0, 1.0]
    """

    name: ClassVar[str] = "factorized"
    thresholded: ClassVar[bool] = True

    def width(self, d: int, p: int) -> int:
        return p

    def rank_cap(self, kappa: float) -> float | None:
        return kappa if kappa < 1 else None

    def init_module(self, d, p, gen, dtype, device, scale=1.0):
        return _torch_layers().init_factorized(d, p, gen, dtype, device, scale)

    def penalty_value(self, S):
        return S.trace()

    def penalty_prox(self, nu, t):
        return np.maximum(nu - t, 0.0), (nu > t).astype(float)

    def prior_side(self, qhat, mhat, Sigmahat, *, lam, kappa, prior):
        # Shat = eta ReLU(Y - eps), eta = mhat/Sigmahat, eps = 2 lam/mhat (docs page Theory, section '8.3 Prior side')
        delta = math.sqrt(max(qhat, 0.0)) / mhat
        eps = 2 * lam / mhat
        eta = mhat / Sigmahat
        ti = prior.threshold_integrals(delta, eps, rank_cap=self.rank_cap(kappa))
        J, Jd, Je = float(ti.J), float(ti.dJ_ddelta), float(ti.dJ_deps)
        q = eta**2 * J
        overlap = getattr(ti, "overlap", None)
        m = eta * (J - 0.5 * delta * Jd - 0.5 * eps * Je) if overlap is None else eta * float(overlap)
        Sigma = Jd / (2 * delta * Sigmahat)
        draws: tuple = (None, None, None)
        if getattr(ti, "J_draws", None) is not None and overlap is not None:
            draws = (
                tuple(eta**2 * float(x) for x in ti.J_draws),
                tuple(eta * float(x) for x in ti.overlap_draws),
                tuple(float(x) / Sigmahat for x in ti.divergence_draws),
            )
        return PriorSide(
            q,
            m,
            Sigma,
            eta,
            delta,
            eps,
            -0.5 * eta * Je,
            float(ti.rank_fraction),
            bool(getattr(ti, "cap_binds", False)),
            float(getattr(ti, "cutoff", math.nan)),
            *draws,
        )

    def prior_sigmahat_exponents(self):
        # Sigmahat enters only through eta = mhat/Sigmahat: q = eta^2 J, m = eta M, Sigma = J'/(2 delta Sigmahat)
        return (-2.0, -1.0, -1.0)

    def se_penalty(self, lam, q, side):
        return lam * side.first_moment

    def collapse_lam(self, mhat0, top_edge):
        return 0.5 * mhat0 * top_edge


@dataclass(frozen=True)
class Direct(Student):
    """Symmetric ``S`` trained entry-wise: Frobenius penalty ``lam d ||S||_F^2``, linear shrinkage.

    No threshold and no rank cap: the state evolution's estimator is ``eta' Y`` with
    ``eta' = mhat/(Sigmahat + 4 lam)``; the thresholds are parameter counts, ``1/(2 c_T)``.

    Examples
    --------
    >>> import numpy as np
    >>> Direct().penalty_prox(np.array([2.0]), 0.5)[0].tolist()  # nu/(1 + 2t)
    [1.0]
    """

    name: ClassVar[str] = "direct"

    def init_module(self, d, p, gen, dtype, device, scale=1.0):
        return _torch_layers().init_direct(d, gen, dtype, device, scale)

    def penalty_value(self, S):
        return (S * S).sum()

    def penalty_prox(self, nu, t):
        c = 1.0 / (1.0 + 2.0 * t)
        return c * nu, np.full_like(nu, c)

    def prior_side(self, qhat, mhat, Sigmahat, *, lam, kappa, prior):
        # Shat = eta' Y with eta' = mhat/(Sigmahat + 4 lam): no threshold, every eigenvalue kept
        delta = math.sqrt(max(qhat, 0.0)) / mhat
        etap = mhat / (Sigmahat + 4 * lam)
        return PriorSide(
            etap**2 * (prior.Q0 + delta**2),
            etap * prior.Q0,
            1.0 / (Sigmahat + 4 * lam),
            etap,
            delta,
            0.0,
            math.nan,
            1.0,
        )

    def se_penalty(self, lam, q, side):
        return lam * q

    def linear_prior_factor(self, lam, Sigmahat):
        s = 1.0 / (Sigmahat + 4 * lam)
        return s * s, s

    def fixed_threshold(self, c_T):
        # d(d+1)/2 free parameters against c_T n constraints
        return 1.0 / (2 * c_T)


@dataclass(frozen=True)
class Untied(Student):
    """Untied attention ``M = W_Q W_K^T/sqrt(p d)``: nuclear-norm penalty ``lam d ||M||_*``, rank cap ``p``.

    Weight decay ``(lam/sqrt(kappa)) (||W_Q||_F^2 + ||W_K||_F^2)/2`` is at least ``lam d ||M||_*``
    (``2 ||A||_F ||B||_F >= 2 ||A B^T||_*`` with ``A B^T = sqrt(p d) M``), with equality at the
    balanced factorisations ``W_Q = U sqrt(s) R, W_K = V sqrt(s) R`` of the SVD ``sqrt(p d) M = U s V^T``
    (``R`` orthogonal), which exist when ``rank M <= p``. The proximal map soft-thresholds the
    singular values. The state evolution's prior side (:meth:`block_prior_side`) is the weighted
    nuclear-norm denoiser on sampled instances
    (``untied_prior_side``, internal).

    Examples
    --------
    >>> import numpy as np
    >>> st = Untied()
    >>> st.symmetric, st.rank_cap(0.5)
    (False, 0.5)
    >>> round(float(st.penalty_value(np.array([[0.0, 2.0], [-1.0, 0.0]]))), 12)  # singular values 2 and 1
    3.0
    """

    name: ClassVar[str] = "untied"
    thresholded: ClassVar[bool] = True
    symmetric: ClassVar[bool] = False
    quadrature_points: ClassVar[int] = 4096  # T^2 fields in two blocks

    def width(self, d: int, p: int) -> int:
        return 2 * p  # two d x p factors

    def rank_cap(self, kappa: float) -> float | None:
        # as for the tied student: at kappa = 1 the cap (rank <= d) never binds
        return kappa if kappa < 1 else None

    def init_module(self, d, p, gen, dtype, device, scale=1.0):
        return _torch_layers().init_untied(d, p, gen, dtype, device, scale)

    def penalty_value(self, S):
        if isinstance(S, np.ndarray):
            return np.linalg.svd(S, compute_uv=False).sum()
        import torch

        return torch.linalg.svdvals(S).sum()

    def penalty_prox(self, nu, t):
        # nu are the singular values of R (>= 0): soft thresholding at t
        return np.maximum(nu - t, 0.0), (nu > t).astype(float)

    def block_prior_side(self, hats, *, lam, kappa, sample, warm=None, tol=1e-11):
        side = untied_prior_side(hats, lam=lam, kappa=kappa, sample=sample, warm=warm, tol=tol)
        # lam ||Mhat||_*/D on the instances
        side.penalty = float(lam * np.mean(np.sum(side.singular_values, axis=-1)) / side.singular_values.shape[-1])
        return side

    def block_prior_jacobian(self, hats, *, lam, kappa, sample, solutions, probes=2, seed=0):
        return untied_prior_jacobian(
            hats, lam=lam, kappa=kappa, sample=sample, solutions=solutions, probes=probes, seed=seed
        )

    def block_prior_tangent(self, hats, *, lam, kappa, sample, solutions):
        return untied_prior_tangent(hats, lam=lam, kappa=kappa, sample=sample, solutions=solutions)

    def block_collapsed(self, hats, *, lam, sample):
        # 0 is the nuclear-norm estimator iff the spectral norm of sum_B A_B is at most 2 lam
        M0t = np.swapaxes(sample.M0, -1, -2)
        A = (
            hats[1] * 0.5 * (sample.M0 + M0t)
            + hats[4] * 0.5 * (sample.M0 - M0t)
            + math.sqrt(hats[0]) * sample.Zs
            + math.sqrt(hats[3]) * sample.Za
        )
        return bool(np.all(np.linalg.norm(A, ord=2, axis=(-2, -1)) <= 2.0 * lam))

    def tied_counterpart(self, qhat_s, lam):
        # for a PSD teacher no eigenvalue of S0 + delta Z lies below -eps when qhat_s <= lam^2: the
        # two-sided eigenvalue threshold of the nuclear norm is then the tied one-sided one
        return Factorized() if qhat_s <= lam**2 else None


_REGISTRY: Registry[Student] = Registry("student", Student)


def register_student(cls: type[Student]) -> type[Student]:
    """Register a :class:`Student` subclass under ``cls.name`` (usable as a class decorator).

    Registered names are accepted by :class:`~singlehead.model.problem.Problem`, the CLI and the
    JSON/CSV readers. Re-registering a name replaces the earlier class.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> from typing import ClassVar
    >>> @register_student
    ... @dataclass(frozen=True)
    ... class Ridge(Direct):
    ...     name: ClassVar[str] = "ridge_example"
    >>> "ridge_example" in student_names()
    True
    """
    return _REGISTRY.register(cls)


def student_names() -> tuple[str, ...]:
    """Names of the registered students, in registration order (the built-in ones first).

    Examples
    --------
    >>> student_names()[:2]
    ('factorized', 'direct')
    """
    return _REGISTRY.names()


def get_student(spec: str | Student) -> Student:
    """The student object for a registered name (a :class:`Student` passes through).

    An unknown name raises ``ValueError`` naming the parameter and the registered names.

    Examples
    --------
    >>> get_student("direct")
    Direct()
    """
    return _REGISTRY.get(spec)


def init_student(student: str | Student, d: int, p: int, gen: Any, dtype: Any, device: Any, scale: float = 1.0) -> Any:
    """Paper protocol initialisation of ``student``'s torch module: ``W`` iid N(0,1) (factorized);
    ``S`` a GOE matrix with semicircle on [-2, 2] (direct). Drawn on the CPU from ``gen`` so CPU and
    GPU start equal. ``scale`` multiplies the initial ``W`` (``S`` scales as ``scale^2``) or ``S``;
    a small scale starts training near the saddle at ``S = 0``.

    Examples
    --------
    >>> import torch
    >>> m = init_student("factorized", 4, 2, torch.Generator().manual_seed(0), torch.float64, "cpu")
    >>> tuple(m.W.shape)
    (4, 2)
    """
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be > 0 (got {scale!r})")
    return get_student(student).init_module(d, p, gen, dtype, device, scale)


for _cls in (Factorized, Direct, Untied):
    register_student(_cls)

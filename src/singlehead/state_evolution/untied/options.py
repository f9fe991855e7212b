"""Settings and result of the untied state evolution (:func:`.solver.untied_theory`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.state_evolution.options import SEOptions

__all__ = ["UntiedSEOptions", "UntiedTheory"]


@dataclass(frozen=True)
class UntiedSEOptions:
    """Numerical settings of the untied state evolution.

    Attributes
    ----------
    D, draws, seed :
        The prior side is averaged over ``draws`` sampled ``D x D`` instances drawn with ``seed``
        (``D`` chosen by the convergence study in ``docs/untied_theory.rst``); ``seed`` also
        scrambles the quadrature nodes.
    n_points, n_scrambles :
        Output-side quadrature: scrambled Sobol nodes in ``2 T^2`` dimensions.
    tol, max_iter :
        Stop when the relative change of the six overlaps is below ``tol``; at most ``max_iter``
        iterations per solve.
    max_evals :
        Map evaluations of one solve, continuation in ``lam`` included (``None``: no bound beyond ``max_iter``).
    continuation, continuation_from :
        Without a start and below ``lam = continuation_from``, follow the fixed point down from
        ``continuation_from`` in decades.
    anderson :
        History length of Anderson acceleration (0: damped iteration only).
    damping :
        Weight of the new iterate in the damped fallback step.
    draw_errors :
        Also solve the fixed point leaving each draw out, for the jackknife sampling error (see :func:`untied_theory`).
    exact_symmetric :
        With ``T = 1`` (no antisymmetric fields) and a PSD teacher, use the exact free-probability
        prior of the tied student whenever it is exact for the untied one (``qhat <= lam^2``: no
        eigenvalue of ``S0 + delta Z`` below ``-eps``, so the nuclear-norm prox is the tied one).
    """

    D: int = 100
    draws: int = 4
    seed: int = 0
    n_points: int = 4096
    n_scrambles: int = 4
    tol: float = 1e-6
    max_iter: int = 300
    anderson: int = 4
    damping: float = 0.5
    exact_symmetric: bool = True
    draw_errors: bool = True
    max_evals: int | None = None
    continuation: bool = True
    continuation_from: float = 1e-2

    def __post_init__(self) -> None:
        for name, lo in (("D", 4), ("draws", 1), ("n_points", 16), ("n_scrambles", 2), ("max_iter", 1)):
            if int(getattr(self, name)) < lo:
                raise ValueError(f"UntiedSEOptions.{name} must be >= {lo} (got {getattr(self, name)!r})")
        if not (0 < self.damping <= 1):
            raise ValueError(f"UntiedSEOptions.damping must be in (0, 1] (got {self.damping!r})")

    @classmethod
    def from_options(cls, options: SEOptions, student: Any) -> "UntiedSEOptions":
        """The settings :class:`~singlehead.state_evolution.SEOptions` give the solver of a non-symmetric student.

        Applied: ``tol``, ``max_iter`` (per solve), ``max_evals`` (per fixed point, continuation
        included), ``damping``, ``n_points`` (``None``: the student's default), ``n_scrambles``,
        ``node_seed`` (quadrature nodes and prior instances), ``sample_dim``, ``sample_draws``,
        ``draw_errors``, ``continuation``, ``continuation_from``, and ``method``: ``"broyden"``
        is Anderson acceleration (a multisecant quasi-Newton method), ``"iterate"`` the damped
        iteration alone. An option this solver has no counterpart for raises ``ValueError``
        naming it unless it holds its default value (or the value that describes this solver:
        ``coarse=False``, ``exact_jacobian=False``, ``prox_screen=None``).
        """
        defaults = SEOptions().flat()
        for name, value in options.flat().items():
            if name in _APPLIED or value == defaults[name] or _MATCHES.get(name, _NO) == value:
                continue
            raise ValueError(f"options.{name} does not apply to the {student.name} student: its state evolution is "
                             f"an Anderson-accelerated iteration with a sampled prior side, which has no "
                             f"{name} (got {value!r}; leave it at {defaults[name]!r})")
        if options.method not in ("broyden", "iterate"):
            raise ValueError(f"options.method does not apply to the {student.name} student: its state evolution "
                             f"supports 'broyden' (Anderson acceleration) or 'iterate' (got {options.method!r})")
        if options.n_scrambles < 2:
            raise ValueError(f"options.n_scrambles must be >= 2 for the {student.name} student (its output side's "
                             f"error bars come from the spread over scrambles; got {options.n_scrambles!r})")
        return cls(D=options.sample_dim, draws=options.sample_draws, seed=options.node_seed,
                   n_points=options.points_for(student), n_scrambles=options.n_scrambles, tol=options.tol,
                   max_iter=options.max_iter, anderson=4 if options.method == "broyden" else 0,
                   damping=options.damping, draw_errors=options.draw_errors, max_evals=options.max_evals,
                   continuation=options.continuation, continuation_from=options.continuation_from)


_APPLIED = frozenset({"tol", "max_iter", "max_evals", "damping", "n_points", "n_scrambles", "node_seed",
                      "sample_dim", "sample_draws", "draw_errors", "continuation", "continuation_from", "method"})
_NO = object()
#: options whose non-default value says what the untied solver does anyway
_MATCHES = {"coarse": False, "exact_jacobian": False, "prox_screen": None}


@dataclass
class UntiedTheory:
    """Prediction of the state evolution for an untied student (see :func:`untied_theory`).

    ``overlaps``: ``q_s = ||M_s||_F^2/d``, ``m_s = <M_s, M0_s>/d``, ``Sigma_s`` and the same for
    the antisymmetric part; ``hats``: their conjugates. ``matrix_error = ||M - M0||_F^2/d``;
    ``asymmetry = ||M - M^T||_F/||M||_F = 2 sqrt(q_a/(q_s + q_a))``; ``rank_fraction``: fraction
    of non-zero singular values; ``singular_values``: those of the prior side's instances
    (``(draws, D)``, the learned-spectrum law); ``se``: standard errors (output quadrature and
    prior draws, added in quadrature); ``penalty``: the student's ``lam pen(M)/d``;
    ``evaluations``: map evaluations of the solve (continuation included).
    """

    overlaps: dict[str, float]
    hats: dict[str, float]
    test_error: float
    test_error_noisy: float
    train_error: float
    matrix_error: float
    asymmetry: float
    rank_fraction: float
    converged: bool
    iterations: int
    residual: float
    se: dict[str, float] = field(default_factory=dict)
    singular_values: np.ndarray | None = None
    prior: str = "sampled"
    seconds: float = math.nan
    penalty: float = math.nan
    evaluations: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Scalars only (for CSV/JSON)."""
        out: dict[str, Any] = {**self.overlaps, **self.hats}
        out.update(test_error=self.test_error, test_error_noisy=self.test_error_noisy, train_error=self.train_error,
                   matrix_error=self.matrix_error, asymmetry=self.asymmetry, rank_fraction=self.rank_fraction,
                   converged=self.converged, iterations=self.iterations, residual=self.residual, prior=self.prior,
                   seconds=self.seconds)
        out.update({f"{k}_se": v for k, v in self.se.items()})
        return out

"""The record of a replica-symmetry check (:class:`Stability`), shared by the one-block check
(:mod:`singlehead.state_evolution.stability`) and the two-block one
(:mod:`singlehead.state_evolution.block_stability`), which both return it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Stability"]


@dataclass(frozen=True)
class Stability:
    """RS-stability diagnostics of one SE fixed point (see the module docstring).

    Attributes
    ----------
    replicon : float
        Smooth replicon ``AT = output_factor * prior_factor`` (RS unstable if > 1; ``inf`` with a
        binding rank cap; a lower bound where ``prox_jump_share > 0``).
    output_factor, prior_factor : float
        ``2 alpha E ||H (I + Sigma H)^{-1}||_F^2`` and ``P/Sigmahat^2`` (or ``Sigma^2``).
    sigmahat_pointwise, sigmahat_stein : float
        ``2 alpha E tr H (I + Sigma H)^{-1}`` and the SE's Stein estimate on the same nodes.
    prox_jump_share, prox_jump_share_se : float
        ``1 - sigmahat_stein / sigmahat_pointwise`` and its quadrature standard error.
    sigma_prior : float
        ``(1/Sigmahat) int int (f(x) - f(y))/(x - y)``: equals the SE's ``Sigma`` at a fixed
        point (a check of the prior factor's quadrature).

    Examples
    --------
    >>> from singlehead import Problem, theory
    >>> from singlehead.state_evolution import stability
    >>> problem = Problem(T=2, alpha=1.0, noise=0.5, lam=0.01)
    >>> check = stability(problem, theory(problem))
    >>> check.replicon < 1.0                            # replica-symmetric solution is stable
    True
    """

    replicon: float
    output_factor: float
    prior_factor: float
    sigmahat_pointwise: float
    sigmahat_stein: float
    prox_jump_share: float
    prox_jump_share_se: float
    sigma_prior: float

    def describe(self) -> str:
        """One line for tables: the replicon and the jump weight."""
        return (
            f"RS check: smooth replicon {self.replicon:.2f} (unstable if > 1), "
            f"prox-jump share of Sigmahat {100 * self.prox_jump_share:.1f} +- {100 * self.prox_jump_share_se:.1f} %"
        )

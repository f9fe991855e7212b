"""Replica-symmetric stability of a block (non-symmetric student) fixed point: the replicon as a 2 x 2 map.

The tied check (:mod:`.replicon`) multiplies an output factor and a prior factor. A student with a
symmetric and an antisymmetric block of fields (:mod:`.block_map`) carries two perturbation
variances, one per block, and one step of the SE/AMP iteration maps them linearly:

    eps' = P O eps,   AT = spectral radius of O P   (the same as that of P O).

* Output factor matrix ``O``: ``O_{b b'} = 2 alpha E sum_{k in b, k' in b'} J_{k k'}^2`` with
  ``J = H (I + Sigma H)^{-1}``, ``Sigma = diag(Sigma_B)`` per field and ``H`` the fit loss's Hessian
  at the prox point (:func:`~.untied.output.block_jacobian_averages`): ``-J`` is the Jacobian of
  ``f_out = Sigma^{-1}(h* - z)`` in ``z``, and ``O_{b b'}`` collects its entries from block-``b'``
  inputs to block-``b`` outputs. The factor ``2 alpha`` is ``n`` over the dimension ``d^2/2`` of each
  block, as in the SE's ``Sigmahat_B = 2 alpha E tr_B J`` (pointwise).
* Prior factor matrix ``P``: ``P_{b b'} = ||K_{b b'}||_F^2/(D^2/2)`` for the Jacobian ``K`` of the
  sampled prior side's estimator in its input ``A = A_s + A_a``
  (:mod:`singlehead.numerics.spectra.untied_prior_jacobian`: exact linearisation of the weighted
  nuclear-norm problem, Hutchinson probes), averaged over the SE's draws; its block traces
  ``tr K_BB/(D^2/2)`` estimate the SE's ``Sigma_B`` (a check, ``sigma_prior_blocks``).

Both blocks have dimension ``d^2/2`` to leading order, so the normalisations are those of the tied
factors: with one block (``T = 1``, an unobserved antisymmetric block) ``AT = O_ss P_ss`` is the tied
``output_factor * prior_factor`` for the untied student's two-sided eigenvalue threshold, which
is the tied estimator when no eigenvalue of the effective field lies below ``-2 lam``. The
sampled ``P_ss`` counts the ``D`` diagonal directions of the symmetric block (``(sum_ij
DD_ij^2 + sum_i DD_ii^2)/D^2``, the normalisation of the SE's sampled ``Sigma_s``) where the tied
factor's double integral has ``sum_ij DD_ij^2/D^2``: an ``O(1/(D a))`` difference for a
rank fraction ``a``.

**Prox jumps** per block, as in the tied check: ``1 - Sigmahat_B/Sigmahat_B^pointwise`` with the
SE's Stein ``Sigmahat_B`` and the pointwise ``2 alpha E tr_B J`` on the same nodes.

The replicon's standard error combines the jackknife over the prior's draws (which includes the
probes' noise) and over the output quadrature's scrambles. A binding rank cap makes the prior
factor infinite (the formal replicon of the rank-constrained problem), as for the tied student.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.state_evolution.block_map import HATS, OVERLAPS, BlockPoint
from singlehead.state_evolution.options import SEOptions
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.stability_record import Stability
from singlehead.state_evolution.untied.output import block_sizes, untied_output_side

__all__ = ["BlockStability", "block_stability"]

#: Hutchinson probes per draw and input block (each one's relative error is ~ 2/D, below the draw spread)
_PROBES = 2


@dataclass(frozen=True)
class BlockStability(Stability):
    """RS-stability diagnostics of a block fixed point (see the module docstring).

    The fields of ``Stability`` are: ``replicon`` the
    spectral radius of ``O P``; ``output_factor``, ``prior_factor`` the symmetric block's own
    ``O_ss``, ``P_ss``; ``prox_jump_share`` (with its s.e., ``sigmahat_pointwise`` and
    ``sigmahat_stein``) that of the block with the larger share; ``sigma_prior`` the symmetric
    block's. Per block (order ``(s, a)``; ``nan`` for an absent antisymmetric block):

    Attributes
    ----------
    output_matrix, prior_matrix : tuple of tuples
        ``O`` and ``P`` (row: output block, column: input block).
    prior_matrix_se : tuple of tuples
        Standard errors of ``P`` over the draws.
    replicon_se : float
        Standard error of ``replicon`` (jackknife over draws and scrambles, in quadrature).
    prox_jump_shares, prox_jump_shares_se : tuple of float
        ``1 - Sigmahat_B/Sigmahat_B^pointwise`` and their quadrature standard errors.
    sigmahat_pointwise_blocks, sigmahat_stein_blocks, sigma_prior_blocks : tuple of float
        ``2 alpha E tr_B J``, the SE's ``Sigmahat_B`` on the same nodes, ``tr K_BB/(D^2/2)``.
    """

    output_matrix: tuple[tuple[float, float], tuple[float, float]]
    prior_matrix: tuple[tuple[float, float], tuple[float, float]]
    prior_matrix_se: tuple[tuple[float, float], tuple[float, float]]
    replicon_se: float
    prox_jump_shares: tuple[float, float]
    prox_jump_shares_se: tuple[float, float]
    sigmahat_pointwise_blocks: tuple[float, float]
    sigmahat_stein_blocks: tuple[float, float]
    sigma_prior_blocks: tuple[float, float]

    def describe(self) -> str:
        """One line for tables: the replicon and each block's jump share."""
        rep = "inf" if math.isinf(self.replicon) else f"{self.replicon:.2f} +- {self.replicon_se:.2f}"
        jumps = ", ".join(
            f"{b} {100 * v:.1f} +- {100 * e:.1f} %"
            for b, v, e in zip("sa", self.prox_jump_shares, self.prox_jump_shares_se)
            if math.isfinite(v)
        )
        return f"RS check (two blocks): smooth replicon {rep} (unstable if > 1), prox-jump share of Sigmahat {jumps}"


def _radius(O: np.ndarray, P: np.ndarray, blocks: int) -> float:
    """Spectral radius of ``O P`` on the first ``blocks`` blocks (non-negative entries: the Perron root)."""
    A = O[:blocks, :blocks] @ P[:blocks, :blocks]
    if not np.all(np.isfinite(A)):
        return math.inf if np.any(np.isinf(A)) else math.nan
    return float(np.max(np.abs(np.linalg.eigvals(A))))


def _jackknife(values: np.ndarray) -> float:
    """Jackknife standard error of leave-one-out values ``values``."""
    n = values.size
    if n < 2 or not np.all(np.isfinite(values)):
        return math.nan
    return float(math.sqrt((n - 1) / n * np.sum((values - values.mean()) ** 2)))


def _tup(A: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    return ((float(A[0, 0]), float(A[0, 1])), (float(A[1, 0]), float(A[1, 1])))


def block_stability(
    problem: Problem,
    result: Result,
    *,
    options: SEOptions | None = None,
    quad: OutputQuadrature | None = None,
    probes: int = _PROBES,
) -> BlockStability:
    """RS-stability diagnostics of the block fixed point ``result`` of ``problem`` (a non-symmetric student).

    Parameters
    ----------
    problem : Problem
        The problem ``result`` solves (a student with field blocks ``(s, a)``, e.g. ``"untied"``).
    result : Result
        A :func:`~singlehead.theory` result of that student (its ``extras`` hold the six overlaps and
        their conjugates). A collapsed fixed point (``M = 0``) is stable: replicon 0.
    options : SEOptions, optional
        The options the point was solved with: the prior's draws (``sample_dim``, ``sample_draws``,
        ``node_seed``) and the output quadrature come from them (default ``SEOptions()``).
    quad : OutputQuadrature, optional
        The output side's nodes (default ``options.quadrature(problem)``).
    probes : int
        Hutchinson probes per draw and input block of the prior factor.

    Returns
    -------
    BlockStability
    """
    o = options or SEOptions()
    ex = result.extras
    for key in OVERLAPS + HATS:
        if key not in ex:
            raise ValueError(
                f"result.extras lacks {key!r}: pass a state-evolution Result of theory() for the "
                f"{problem.student.name} student"
            )
    nan2 = (math.nan, math.nan)
    zero = ((0.0, 0.0), (0.0, 0.0))
    if ex.get("collapsed"):
        return BlockStability(
            0.0,
            0.0,
            0.0,
            math.nan,
            math.nan,
            0.0,
            0.0,
            0.0,
            zero,
            zero,
            zero,
            0.0,
            (0.0, 0.0),
            (0.0, 0.0),
            nan2,
            (float(ex["Sigmahat_s"]), float(ex["Sigmahat_a"])),
            (0.0, 0.0),
        )
    x6 = np.array([float(ex[k]) for k in OVERLAPS])
    hats = np.array([float(ex[k]) for k in HATS])
    alpha = problem.alpha
    K, Ka = block_sizes(problem.T)
    nb = 2 if Ka else 1
    point = BlockPoint.build(problem, o)

    # ---- prior factor matrix, per draw
    h = point.prior_conjugates(hats)
    student = problem.student
    side = student.block_prior_side(h, lam=problem.lam, kappa=problem.kappa, sample=point.sample)
    jac = student.block_prior_jacobian(
        h,
        lam=problem.lam,
        kappa=problem.kappa,
        sample=point.sample,
        solutions=side.solutions,
        probes=probes,
        seed=o.node_seed,
    )
    Pd = jac.frobenius  # (R, 2, 2)
    P = Pd.mean(axis=0)
    R = Pd.shape[0]
    P_se = Pd.std(axis=0, ddof=1) / math.sqrt(R) if R > 1 else np.full((2, 2), np.nan)
    sig_prior = tuple(float(v) for v in jac.trace.mean(axis=0))

    # ---- output factor matrix and the jump shares
    closed = problem.channel.closed_form_block(alpha, K, point.Q0s, x6[0], x6[1], x6[2], problem.noise)
    if (
        closed is not None
    ):  # H constant per block: O diagonal, Sigmahat_B = 2 alpha K_B c_B, O_BB = Sigmahat_B^2/(2 alpha K_B)
        sh = [float(closed["Sigmahat"])]
        if Ka:
            sh.append(
                float(problem.channel.closed_form_block(alpha, Ka, point.Q0a, x6[3], x6[4], x6[5], 0.0)["Sigmahat"])
            )
        O = np.zeros((2, 2))
        for b, (s, k) in enumerate(zip(sh, (K, Ka))):
            O[b, b] = s * s / (2 * alpha * k)
        Os = O[None]
        sh_pw = sh_stein = tuple(sh + [math.nan] * (2 - len(sh)))
        shares, shares_se = (0.0, 0.0 if Ka else math.nan), (0.0, 0.0 if Ka else math.nan)
    else:
        if quad is None:
            quad = o.quadrature(problem)
        out = untied_output_side(x6, problem=problem, Q0s=point.Q0s, Q0a=point.Q0a, quad=quad, jacobian=True)
        per = out.scramble_jacobian  # (scrambles, 6)
        Os = per[:, :4].reshape(-1, 2, 2)
        O = Os.mean(axis=0)
        pw, st = per[:, 4:6].mean(axis=0), out.hats[[2, 5]]
        sh_pw, sh_stein = tuple(map(float, pw)), tuple(map(float, st))
        sl, se = [], []
        for b in range(2):
            if b >= nb or not pw[b] > 0:
                sl.append(math.nan)
                se.append(math.nan)
                continue
            sl.append(float(1.0 - st[b] / pw[b]))
            w = 1.0 - out.scramble_hats[:, 2 + 3 * b] / per[:, 4 + b]
            se.append(float(w.std(ddof=1) / math.sqrt(w.size)) if w.size > 1 else math.nan)
        shares, shares_se = tuple(sl), tuple(se)

    AT = _radius(O, P, nb)
    # jackknife: over the draws (prior) and over the scrambles (output), in quadrature
    at_draws = (
        np.array([_radius(O, np.delete(Pd, r, axis=0).mean(axis=0), nb) for r in range(R)]) if R > 1 else np.zeros(0)
    )
    at_scr = (
        np.array([_radius(np.delete(Os, r, axis=0).mean(axis=0), P, nb) for r in range(Os.shape[0])])
        if Os.shape[0] > 1
        else np.zeros(0)
    )
    se_d = _jackknife(at_draws) if at_draws.size else 0.0
    se_s = _jackknife(at_scr) if at_scr.size else 0.0
    at_se = math.hypot(se_d, se_s) if math.isfinite(AT) else math.nan
    if jac.cap_binds:
        AT, at_se = math.inf, math.nan
    fin = [b for b in range(nb) if math.isfinite(shares[b])]
    k = max(fin, key=lambda b: shares[b]) if fin else 0
    return BlockStability(
        AT,
        float(O[0, 0]),
        float(P[0, 0]),
        sh_pw[k],
        sh_stein[k],
        float(shares[k]),
        float(shares_se[k]),
        sig_prior[0],
        _tup(O),
        _tup(P),
        _tup(P_se),
        float(at_se),
        tuple(map(float, shares)),
        tuple(map(float, shares_se)),
        sh_pw,
        sh_stein,
        sig_prior,
    )

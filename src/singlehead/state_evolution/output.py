"""Output (channel) side of the state evolution: ``(q, m, Sigma) -> (qhat, mhat, Sigmahat)``.

``K = T(T+1)/2`` iid pairs ``(z0_k, z_k) ~ N(0, [[Q0, m], [m, q]])``, teacher logits
``y = z0 + xi`` with ``xi_k ~ N(0, Delta/2)``, prox point ``h*`` of
:meth:`Channel.prox <singlehead.model.channels.Channel.prox>` of ``problem.channel``, ``g = h* - z`` (arXiv 2509.24914,
Sec. 3; docs: Theory, :ref:`theory-output-side`)::

    qhat     =  2 alpha E ||g||^2 / Sigma^2
    mhat     =  2 alpha E <g, q z0 - m z> / (Sigma (Q0 q - m^2))
    Sigmahat = -2 alpha E <g, Q0 z - m z0> / (Sigma (Q0 q - m^2))

The expectation is over the ``2K`` Gaussian directions of ``(y, z)`` (``z0`` enters linearly
and is replaced by ``E[z0 | y, z]``) on the fixed nodes of :class:`.OutputQuadrature`, unless the
channel has a closed form (the linear one: ``mhat = Sigmahat = 2 alpha K/(Sigma + 1/4)``,
``qhat = 2 alpha K (Q0 - 2m + q + Delta/2)/(Sigma + 1/4)^2``). The boundary ``q -> 0`` /
``Sigma -> 0`` (complete rank collapse) is its own limit, ``_output_side_degenerate``.
Test errors ``E ||chan_beta0(M(z0)) - chan_beta(M(z))||_F^2`` per sequence:
:func:`channel_test_errors`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from singlehead.model.problem import Problem
from singlehead.numerics.attention_maps import vec_to_mat
from singlehead.state_evolution.prox_screen import same_minimum, screened_prox, screening_nodes
from singlehead.state_evolution.quadrature import OutputQuadrature

__all__ = ["OutputSide", "output_side", "channel_test_errors"]

# below these, ``q`` is treated as 0 (z = 0: S = 0) and ``Sigma`` by its first-order limit
Q_FLOOR = 1e-14
_SIGMA_FLOOR = 1e-10
# below this q/Q0 the Sigmahat estimator uses a control variate (see output_side)
_Q_CV = 1e-2


@dataclass
class OutputSide:
    """Conjugates and channel metrics at given ``(q, m, Sigma)``; ``err`` holds their quadrature standard errors.

    ``qhat, mhat, Sigmahat`` follow the output side (docs: Theory, :ref:`theory-output-side`; ``*_err`` their quadrature
    standard errors);
    ``train_error`` is per sequence, from the proximal point.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.state_evolution import output_side
    >>> out = output_side(0.5, 0.4, 0.75, problem=Problem(T=1, channel="linear", alpha=0.5), Q0=1.5)
    >>> round(out.mhat, 12), round(out.Sigmahat, 12)   # linear T = 1: 2 alpha / (Sigma + 1/4)
    (1.0, 1.0)
    """

    qhat: float
    mhat: float
    Sigmahat: float
    train_error: float
    err: dict[str, float] = field(default_factory=dict)
    branches: list | None = None
    prox_converged: bool = True
    #: ``(qhat, mhat, Sigmahat)`` per quadrature scramble, ``(R, 3)`` (``None``: analytic, no error).
    #: Their errors are correlated (same nodes), so errors of functions of them are taken over these.
    scramble_hats: np.ndarray | None = None
    #: With ``jacobian=True``: per scramble, the node means of ``||J||_F^2`` and ``tr J`` with
    #: ``J = H (I + Sigma H)^{-1}`` (``H`` the fit loss's Hessian at ``h*``), ``(R, 2)``; see
    #: :func:`~singlehead.state_evolution.stability`.
    scramble_jacobian: np.ndarray | None = None
    #: With ``tangent=True``: a function returning ``d(qhat, mhat, Sigmahat)/d(q, m, Sigma)``, ``(3, 3)``,
    #: the derivative of this node average with every node's prox branch held (computed when called;
    #: it may return ``None``). ``None``: not available, see :func:`output_side`.
    tangent: Callable[[], np.ndarray | None] | None = field(default=None, repr=False)
    #: At small ``q`` (the ``Sigmahat`` control variate, see ``_sigmahat_residual``): the end points of
    #: the Newton starts of its prox at ``z = 0``, the warm starts (``warm_cv``) of a next call.
    branches_cv: list | None = None


def gauss_pair(u1: np.ndarray, u2: np.ndarray, var0: float, cov: float, var1: float) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` with variances ``var0, var1`` and covariance ``cov`` from iid standard normals.

    ``var0 <= 0`` (a block the teacher does not have, e.g. the antisymmetric fields of a tied
    teacher for an untied student): ``a = 0`` and ``b = sqrt(var1) u2``.
    """
    if var0 <= 0.0:
        return np.zeros_like(u1), math.sqrt(max(var1, 0.0)) * u2
    s0 = math.sqrt(var0)
    r = max(var1 - cov * cov / var0, 0.0)
    return s0 * u1, (cov / s0) * u1 + math.sqrt(r) * u2


def output_side(
    q: float,
    m: float,
    Sigma: float,
    *,
    problem: Problem,
    Q0: float,
    quad: OutputQuadrature | None = None,
    analytic_linear: bool = True,
    warm: Sequence[np.ndarray] | None = None,
    union: bool = False,
    jacobian: bool = False,
    branch: str = "global",
    screen: int | None = None,
    tangent: bool = False,
    warm_cv: Sequence[np.ndarray] | None = None,
    labels: np.ndarray | None = None,
) -> OutputSide:
    """Output-side update ``(q, m, Sigma) -> (qhat, mhat, Sigmahat)`` plus the train error.

    ``Q0`` comes from the prior model. A channel with a closed form (linear) uses it unless
    ``analytic_linear=False`` (the quadrature/prox code, to test that code).
    ``warm``: Newton starts (``(R N, K)`` arrays) from a previous call (default: the channel's cold
    starts); ``OutputSide.branches`` holds each start's end point, the warm starts of a next call
    (each branch followed continuously). ``union=True``: cold and ``warm`` starts together.
    With ``jacobian=True`` (softmax channels, non-degenerate point) the prox's pointwise Jacobian
    averages are returned too (``OutputSide.scramble_jacobian``, for :func:`~singlehead.state_evolution.stability`).
    ``branch`` (``SEOptions.prox_branch``): ``"teacher"`` / ``"z"`` use the local minimum reached
    from ``(beta0/beta) y`` / ``z`` alone (``warm`` and ``union`` are then ignored).
    ``screen`` (``SEOptions.prox_screen``): run the extra prox starts only on the first
    ``1/screen`` of each scramble's nodes and where the prox is not convex on the way to them,
    unless they find another minimum on those first nodes (``prox_screen.screened_prox``);
    ``None``: every start on every node.
    ``tangent=True`` also returns ``OutputSide.tangent``, a function computing the exact derivative
    of the node average (``_output_tangent``) on demand; only at non-degenerate points (elsewhere,
    and for closed-form channels, it is ``None``).
    ``warm_cv``: at small ``q``, the starts of the control variate's prox at ``z = 0`` (the
    ``OutputSide.branches_cv`` of a previous call), used like ``warm`` (with ``union``: together with
    the cold starts).
    ``labels``: the channel's labels of the teacher fields on ``quad``'s nodes (``node_labels``); they
    depend on neither ``q``, ``m`` nor ``Sigma``, so a caller evaluating many points (the SE map) passes
    them instead of having them recomputed at every call.

    Examples
    --------
    Linear channel, ``T = 1``: the closed form ``mhat = Sigmahat = 2 alpha/(Sigma + 1/4)`` and
    ``qhat = 2 alpha (Q0 - 2m + q + Delta/2)/(Sigma + 1/4)^2``.

    >>> from singlehead import Problem
    >>> from singlehead.state_evolution import output_side
    >>> problem = Problem(T=1, channel="linear", alpha=0.5, noise=0.2)
    >>> out = output_side(0.5, 0.4, 0.75, problem=problem, Q0=1.5)
    >>> round(out.mhat, 12), round(out.qhat, 12)       # 1/(1) and (1.5 - 0.8 + 0.5 + 0.1)/1
    (1.0, 1.3)
    """
    alpha, T, K = problem.alpha, problem.T, problem.n_pairs
    ch = problem.channel
    Dh = problem.noise / 2.0
    closed = ch.closed_form_output_side(alpha, T, Q0, q, m, Sigma, problem.noise) if analytic_linear else None
    if closed is not None:
        return OutputSide(*closed, err={"qhat": 0.0, "mhat": 0.0, "Sigmahat": 0.0, "train_error": 0.0})
    if quad is None:
        quad = OutputQuadrature.sobol(2 * K)
    if not (q > Q_FLOOR * Q0 and Sigma > _SIGMA_FLOOR):
        return _output_side_degenerate(q, m, Sigma, problem=problem, Q0=Q0, quad=quad)
    y, z, z0c = _fields(quad, q, m, Q0 + Dh, Q0)
    lab = ch.labels(y, T, problem.beta0) if labels is None else labels
    pr, br = _tracked_prox(problem, z, y, Sigma, lab, warm, union, branch, quad, screen)
    g = pr.h - z
    det = max(Q0 * q - m * m, 1e-300)
    gS, h0, br_cv, prox_ok = _sigmahat_residual(g, y, q, Sigma, problem, Q0, branch, warm_cv, union, lab)
    prox_ok = prox_ok and pr.converged
    vals = np.stack(
        [
            np.einsum("nk,nk->n", g, g),
            np.einsum("nk,nk->n", g, q * z0c - m * z),
            np.einsum("nk,nk->n", gS, Q0 * z - m * z0c),
            pr.fit,
        ],
        axis=1,
    )
    mean, err, per = quad.mean_error_and_scrambles(vals)
    fac = np.array([2 * alpha / Sigma**2, 2 * alpha / (Sigma * det), -2 * alpha / (Sigma * det), 1.0])
    mean, err = mean * fac, err * np.abs(fac)
    names = ("qhat", "mhat", "Sigmahat", "train_error")
    jac = _jacobian_averages(pr.h, y, Sigma, problem, quad) if jacobian else None
    tan = None
    if tangent:
        h, hats = pr.h, mean[:3].copy()

        def tan() -> np.ndarray | None:
            return _output_tangent(quad, problem, (q, m, Sigma), Q0, h, lab, z, z0c, hats, h0)

    return OutputSide(
        *map(float, mean),
        err=dict(zip(names, map(float, err))),
        branches=br,
        prox_converged=prox_ok,
        scramble_hats=(per * fac)[:, :3],
        scramble_jacobian=jac,
        tangent=tan,
        branches_cv=br_cv,
    )


def _output_tangent(
    quad: OutputQuadrature,
    problem: Problem,
    x: tuple[float, float, float],
    Q0: float,
    h: np.ndarray,
    labels: np.ndarray,
    z: np.ndarray,
    z0c: np.ndarray,
    hats: np.ndarray,
    h0: np.ndarray | None = None,
) -> np.ndarray | None:
    """``d(qhat, mhat, Sigmahat)/d(q, m, Sigma)`` of the node average, every node's prox branch held.

    On the fixed nodes ``y = sqrt(Vy) u1`` and ``z = (m/sqrt(Vy)) u1 + sqrt(q - m^2/Vy) u2`` move
    with ``(q, m)``, and so does ``E[z0 | y, z] = a y + b z`` through ``(a, b) = C^{-1} (Q0, m)``,
    ``C = [[Vy, m], [m, q]]``. The prox point moves by the implicit function theorem on
    ``(h - z)/Sigma + grad ell(h) = 0``: ``dh = (I + Sigma H)^{-1} (dz + g dSigma/Sigma)``, ``H`` the fit
    loss's Hessian at ``h``. The averages ``E||g||^2``, ``E<g, q z0 - m z>``, ``E<g, Q0 z - m z0>`` are
    differentiated by the product rule, then the prefactors of :func:`output_side`. This is the
    derivative of the discretised map wherever no node switches minimum (the global prox's jumps are
    not differentiated: on the fixed nodes they are rare and move the average by less than its
    quadrature error). ``None`` where ``I + Sigma H`` is singular at some node.

    ``h0``: the control variate's prox point at ``z = 0`` (small ``q``, ``_sigmahat_residual``), so
    that ``Sigmahat`` averages ``<g - h0, Q0 z - m z0>``. ``h0`` depends on ``Sigma`` alone:
    ``dh0 = (I + Sigma H0)^{-1} h0 dSigma/Sigma`` (the same implicit function theorem at ``z = 0``).
    """
    q, m, Sigma = x
    alpha, K = problem.alpha, problem.n_pairs
    ch = problem.channel
    X = quad.flat
    u1, u2 = X[:, :K], X[:, K:]
    Vy = Q0 + problem.noise / 2.0
    s0, sr = math.sqrt(Vy), math.sqrt(max(q - m * m / Vy, 1e-300))
    c = m / s0
    C = np.array([[Vy, m], [m, q]])
    a, b = np.linalg.solve(C, np.array([Q0, m]))
    dab = np.linalg.solve(C, np.array([[0.0, -b], [-b, 1.0 - a]]))  # columns: d(a, b)/dq, d(a, b)/dm
    g = h - z
    # every field is a combination of u1 and u2 with scalar coefficients (z, E[z0|y,z], their
    # derivatives), and dh of A u1, A u2, A g with A = (I + Sigma H)^{-1}: the derivatives need only
    # the node means of the products of [g, u1, u2] with [u1, u2, A u1, A u2, A g]
    V = np.stack([g, u1, u2], axis=1)
    Q = ch.prox_tangent_forms(h, labels, problem.beta, Sigma, V)
    if Q is None:
        return None
    plain = np.tensordot(V, V[:, 1:], axes=([0, 2], [0, 2])) / h.shape[0]  # mean <[g, u1, u2]_i, [u1, u2]_j>
    P = np.concatenate([plain, Q[:, [1, 2, 0]]], axis=1)  # P[i, j] = mean <left_i, right_j>
    # the control variate: mean <h0, u_j> and mean <u_j, A0 h0> (A0 = (I + Sigma H0)^{-1}), j = 1, 2
    cv_plain, cv_dS = np.zeros(2), np.zeros(2)
    if h0 is not None:
        V0 = np.stack([h0, u1, u2], axis=1)
        Q0f = ch.prox_tangent_forms(h0, labels, problem.beta, Sigma, V0)
        if Q0f is None:
            return None
        cv_plain = np.tensordot(h0, V0[:, 1:], axes=([0, 1], [0, 2])) / h.shape[0]
        cv_dS = Q0f[1:, 0] / Sigma
    e = np.array([a * s0 + b * c, b * sr])  # E[z0|y,z] = e1 u1 + e2 u2; z = c u1 + sr u2
    zc = np.array([c, sr])
    pk = np.array([[0.0, 1.0 / s0, 0.0], [0.5 / sr, -m / (Vy * sr), 0.0]])  # dz/dx_k = pk[0, k] u1 + pk[1, k] u2
    rk = np.array([dab[0] * s0 + dab[1] * c, dab[1] * sr])  # the d(a, b) part of dz0/dx_k (k = q, m)
    rk = np.concatenate([rk, np.zeros((2, 1))], axis=1) + b * pk
    wm, wS = q * e - m * zc, Q0 * zc - m * e
    dS = np.empty((3, 3))
    for k in range(3):
        # <g, dh_k>, <u_j, dh_k>: dh_k = pk[0, k] A u1 + pk[1, k] A u2 (+ A g/Sigma for k = Sigma)
        dh = pk[0, k] * P[:, 2] + pk[1, k] * P[:, 3] + (P[:, 4] / Sigma if k == 2 else 0.0)
        dg = dh - pk[0, k] * P[:, 0] - pk[1, k] * P[:, 1]  # <left_i, dg_k>
        dwm = q * rk[:, k] - m * pk[:, k] + (e if k == 0 else 0.0) - (zc if k == 1 else 0.0)
        dwS = Q0 * pk[:, k] - m * rk[:, k] - (e if k == 1 else 0.0)
        dgS = dg[1:] - (cv_dS if k == 2 else 0.0)  # <u_j, d(g - h0)_k>
        dS[:, k] = [2.0 * dg[0], wm @ dg[1:] + dwm @ P[0, :2], wS @ dgS + dwS @ (P[0, :2] - cv_plain)]
    det = max(Q0 * q - m * m, 1e-300)
    ddet = np.array([Q0, -2.0 * m, 0.0])
    dlogS = np.array([0.0, 0.0, 1.0 / Sigma])
    fac = np.array([2 * alpha / Sigma**2, 2 * alpha / (Sigma * det), -2 * alpha / (Sigma * det)])
    out = fac[:, None] * dS
    out[0] -= 2.0 * hats[0] * dlogS
    out[1:] -= hats[1:, None] * (dlogS + ddet / det)[None, :]
    return out


def _tracked_prox(
    problem: Problem,
    z: np.ndarray,
    y: np.ndarray,
    Sigma: float,
    labels: np.ndarray,
    warm: Sequence[np.ndarray] | None,
    union: bool,
    branch: str,
    quad: OutputQuadrature | None = None,
    screen: int | None = None,
) -> tuple:
    """The prox at ``z`` with its branches tracked: ``(ProxResult, branches for a next call)``.

    Starts: ``warm`` alone, or with ``union`` (or without ``warm``) the channel's cold starts too; a local
    ``branch`` (``"teacher"``/``"z"``) its one start. Where the channel certifies the prox convex at every node at
    this ``Sigma`` (``Channel.prox_convex_everywhere``) there is one minimum: ``warm`` alone, else one cold start,
    and ``union`` adds nothing. With ``screen`` the extra starts are screened
    (``prox_screen.screened_prox``). The branches to track are each start's end point
    (``union``: the tracked ones, with the node-wise best end point added, :func:`_track_best`).
    """
    ch = problem.channel
    kw = {"T": problem.T, "beta": problem.beta, "beta0": problem.beta0}
    if branch != "global" and not ch.convex_prox:
        warm, union = None, False
        cold = [_branch_start(branch, z, y, problem)]
    elif not ch.convex_prox and ch.prox_convex_everywhere(problem.T, problem.beta, Sigma):
        # one minimum at every node at this Sigma: the tracked branches (else one cold start) find it, and
        # the cold starts of a union could only find it again
        union = False
        cold = [] if warm is not None else ch.prox_starts(z, y, **kw)[:1]
    else:
        cold = [] if (warm is not None and not union) or ch.convex_prox else ch.prox_starts(z, y, **kw)
    n_starts = len(cold) + (len(warm) if cold and warm is not None else 0)
    mask = screening_nodes(quad, screen) if n_starts > 1 and quad is not None else None
    if mask is not None:
        pr, n_lead = screened_prox(problem, z, y, Sigma, cold, warm, mask, labels=labels)
        br = pr.branches[:n_lead] if (union and warm is not None) else pr.branches
    else:
        starts = warm if not cold else cold + (list(warm) if warm is not None else [])
        pr = ch.prox(z, y, Sigma, starts=starts, labels=labels, **kw)
        br = pr.branches[len(cold) :] if (union and warm is not None) else pr.branches
    if union and warm is not None:
        br = _track_best(list(br), pr.h, len(cold) + 1)
    return pr, br


def _track_best(tracked: list[np.ndarray], best: np.ndarray, limit: int) -> list[np.ndarray]:
    """The tracked branches after an evaluation with every start, with its node-wise best end point added
    where no tracked branch ended at it (:func:`~.prox_screen.same_minimum`; a minimum only a cold start found is then
    followed from here on, so the next evaluations need not find it again from scratch). At most
    ``limit`` branches: a new best replaces the one added before."""
    if same_minimum(best, tracked).all():
        return tracked
    return (tracked[: limit - 1] if len(tracked) >= limit else tracked) + [best]


def node_labels(problem: Problem, quad: OutputQuadrature, Q0: float) -> np.ndarray:
    """The channel's labels of the teacher fields ``y`` on ``quad``'s nodes, as :func:`output_side` computes them.

    ``y`` (noise included, variance ``Q0 + Delta/2``) does not depend on ``(q, m, Sigma)``, so neither do these.
    """
    y = _fields(quad, 0.5 * Q0, 0.0, Q0 + problem.noise / 2.0, Q0)[0]
    return problem.channel.labels(y, problem.T, problem.beta0)


def _fields(
    quad: OutputQuadrature, q: float, m: float, Vy: float, Q0: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Teacher fields ``y`` (noise included), student fields ``z`` and ``E[z0 | y, z]`` on the nodes."""
    X = quad.flat
    K = X.shape[1] // 2
    y, z = gauss_pair(X[:, :K], X[:, K:], Vy, m, q)
    # E[z0 | y, z] = a y + b z  (z0 = y - xi, xi independent of z)
    a, b = np.linalg.solve(np.array([[Vy, m], [m, q]]), np.array([Q0, m]))
    return y, z, a * y + b * z


def _branch_start(branch: str, z: np.ndarray, y: np.ndarray, problem: Problem) -> np.ndarray:
    """The one Newton start of a local prox branch: the teacher's logits at the student's temperature, or ``z``."""
    return problem.channel.logit_scale(problem.beta, problem.beta0) * y if branch == "teacher" else z


def _sigmahat_residual(
    g: np.ndarray,
    y: np.ndarray,
    q: float,
    Sigma: float,
    problem: Problem,
    Q0: float,
    branch: str = "global",
    warm: Sequence[np.ndarray] | None = None,
    union: bool = False,
    labels: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, list | None, bool]:
    """The residual entering ``Sigmahat``, with a control variate at small ``q``: ``(g - h0, h0, branches, ok)``.

    At small q the Sigmahat weight (Q0 z - m z0)/det ~ 1/sqrt(q) multiplies the O(1) part of g that
    depends on y alone, a zero-mean term whose quadrature error blows up as q -> 0. The control
    variate subtracts that part, the prox point ``h0`` at z = 0 (its exact contribution
    E<h0(y), Q0 z - m z0> is 0 by Stein's lemma). ``h0`` depends on ``Sigma`` alone (``y`` is fixed on
    the nodes), so its prox is tracked like the main one: from the ``warm`` branches alone, or with
    ``union`` from them and the cold starts (node-wise lowest objective); ``branches`` are the end
    points to track. Without the control variate: ``(g, None, None, True)``.
    """
    if not q < _Q_CV * Q0:
        return g, None, None, True
    ch = problem.channel
    if labels is None:
        labels = ch.labels(y, problem.T, problem.beta0)
    pr0, br = _tracked_prox(problem, np.zeros_like(y), y, Sigma, labels, warm, union, branch)
    return g - pr0.h, pr0.h, (None if branch != "global" or ch.convex_prox else list(br)), pr0.converged


def _jacobian_averages(
    h: np.ndarray, y: np.ndarray, Sigma: float, problem: Problem, quad: OutputQuadrature
) -> np.ndarray:
    """Per scramble, the node means of ``||J||_F^2`` and ``tr J``, ``J = H (I + Sigma H)^{-1}``
    (:func:`~singlehead.state_evolution.stability`).

    ``dh*/dz = (I + Sigma H)^{-1}``, so ``d(g/Sigma)/dz = -H (I + Sigma H)^{-1}``, and
    ``(I + Sigma H)^{-1} H`` has the same trace and Frobenius norm.
    """
    K = h.shape[1]
    _, _, H = _fit_derivatives(h, y, problem)
    J = np.linalg.solve(np.eye(K)[None] + Sigma * H, H)
    return quad.mean_error_and_scrambles(np.stack([np.einsum("nij,nij->n", J, J), np.einsum("nii->n", J)], axis=1))[2]


def _fit_derivatives(h: np.ndarray, y: np.ndarray, problem: Problem, order: int = 2):
    """Fit loss ``ell(h; y) = ||chan_beta0(M(y)) - chan_beta(M(h))||_F^2`` with gradient and Hessian in ``h``
    (up to ``order``)."""
    ch = problem.channel
    return ch.fit_loss(h, ch.labels(y, problem.T, problem.beta0), problem.beta, order=order)


def _hessian_trace(h: np.ndarray, y: np.ndarray, Sigma: float, problem: Problem) -> np.ndarray:
    """``tr[H (I + Sigma H)^{-1}]`` per node (``Channel.prox_hessian_trace``); a singular system raises
    ``LinAlgError``."""
    ch = problem.channel
    tr = ch.prox_hessian_trace(h, ch.labels(y, problem.T, problem.beta0), problem.beta, Sigma)
    if tr is None:
        raise np.linalg.LinAlgError("I + Sigma H is singular at some node")
    return tr


def _output_side_degenerate(
    q: float, m: float, Sigma: float, *, problem: Problem, Q0: float, quad: OutputQuadrature
) -> OutputSide:
    """Output side at the boundary ``q -> 0`` (student logits ``z = 0``) and/or ``Sigma -> 0``.

    With ``g = h* - z`` and Stein's lemma the conjugates are
    ``mhat = (2 alpha/Sigma) E[sum_k d g_k/d y_k]``, ``Sigmahat = -(2 alpha/Sigma) E[sum_k d g_k/d z_k]``
    (the ``(q z0 - m z)/det`` weights of :func:`output_side` are these derivatives in integrated
    form). From the prox equation ``h* = z - Sigma grad ell(h*)``,
    ``d h*/d z = (1 + Sigma H)^{-1}`` (``H`` the Hessian of ``ell`` at ``h*``), so

    * ``Sigma -> 0``: ``g = -Sigma grad ell(z) + O(Sigma^2)``, ``qhat -> 2 alpha E||grad ell(z)||^2``,
      ``mhat -> -2 alpha E<grad ell(z), q z0 - m z>/det`` and
      ``Sigmahat -> 2 alpha E tr H(z)`` (finite; the pathwise form of the Stein weight);
    * ``q = 0`` (then ``m = 0``, ``z = 0``, ``y ~ N(0, Q0 + Delta/2)`` alone):
      ``mhat = 2 alpha E<g, y>/(Sigma (Q0 + Delta/2))``,
      ``Sigmahat = 2 alpha E tr[H (1 + Sigma H)^{-1}]``; at ``Sigma = 0`` these are
      ``mhat0 = -2 alpha E<grad ell(0), y>/(Q0 + Delta/2)``, ``Sigmahat0 = 2 alpha E tr H(0)``,
      ``qhat0 = 2 alpha E||grad ell(0)||^2``: the conjugates of the collapsed point ``S = 0``.

    The train error is ``E ell(h*)`` (``E ell(z)`` at ``Sigma = 0``).
    """
    alpha, K = problem.alpha, problem.n_pairs
    Vy = Q0 + problem.noise / 2.0
    X = quad.flat
    zero_q = not q > Q_FLOOR * Q0
    Sigma = max(float(Sigma), 0.0)
    if zero_q:
        y = math.sqrt(Vy) * X[:, :K]
        z = np.zeros_like(y)
    else:
        y, z, z0c = _fields(quad, q, m, Vy, Q0)
        det = max(Q0 * q - m * m, 1e-300)
    prox_ok = True
    if Sigma > _SIGMA_FLOOR:  # only reached with q = 0
        pr = problem.channel.prox(z, y, Sigma, T=problem.T, beta=problem.beta, beta0=problem.beta0)
        prox_ok = pr.converged
        h = pr.h
        fit = _fit_derivatives(h, y, problem, order=0)[0]
        gS = h / Sigma  # g / Sigma (z = 0)
        trHs = _hessian_trace(h, y, Sigma, problem)  # tr H (1 + Sigma H)^{-1}
        cols = [np.einsum("nk,nk->n", gS, gS), np.einsum("nk,nk->n", gS, y) / Vy, trHs, fit]
    else:
        fit, grad, _ = _fit_derivatives(z, y, problem, order=1)
        cols = [np.einsum("nk,nk->n", grad, grad)]
        if zero_q:
            cols.append(-np.einsum("nk,nk->n", grad, y) / Vy)
        else:
            cols.append(-np.einsum("nk,nk->n", grad, q * z0c - m * z) / det)
        cols.append(_hessian_trace(z, y, 0.0, problem))  # -E tr dg/dz / Sigma with g = -Sigma grad ell(z)
        cols.append(fit)
    mean, err, per = quad.mean_error_and_scrambles(np.stack(cols, axis=1))
    fac = np.array([2 * alpha, 2 * alpha, 2 * alpha, 1.0])
    mean, err = mean * fac, err * fac
    names = ("qhat", "mhat", "Sigmahat", "train_error")
    return OutputSide(
        *map(float, mean),
        err=dict(zip(names, map(float, err))),
        branches=None,
        prox_converged=prox_ok,
        scramble_hats=(per * fac)[:, :3],
    )


def channel_test_errors(
    q: float, m: float, *, problem: Problem, Q0: float, quad: OutputQuadrature | None = None
) -> dict[str, float]:
    """Test errors ``E ||chan_beta0(M(z0)) - chan_beta(M(z))||_F^2`` (noiseless and noisy labels).

    ``(z0_k, z_k)`` iid with covariance ``[[Q0, m], [m, q]]`` (``Q0 + Delta/2`` for noisy labels).
    Returns a dict with ``test_error``, ``test_error_noisy`` and their quadrature errors.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.state_evolution import channel_test_errors
    >>> errors = channel_test_errors(1.5, 1.5, problem=Problem(T=2, noise=0.5), Q0=1.5)   # S = S0
    >>> round(errors["test_error"], 6)                  # a perfect student has zero test error
    0.0
    """
    T, K = problem.T, problem.n_pairs
    ch = problem.channel
    Dh = problem.noise / 2.0
    closed = ch.closed_form_test_errors(T, Q0, q, m, problem.noise)
    if closed is not None:
        return closed
    if quad is None:
        quad = OutputQuadrature.sobol(2 * K)
    X = quad.flat
    out = {}
    for name, V0 in (("test_error", Q0), ("test_error_noisy", Q0 + Dh)):
        z0, z = gauss_pair(X[:, :K], X[:, K:], V0, m, q)
        diff = ch.teacher_attention(vec_to_mat(z0, T), problem.beta0) - ch.attention(vec_to_mat(z, T), problem.beta)
        mean, err = quad.mean_and_error(np.einsum("nab,nab->n", diff, diff))
        out[name], out[name + "_se"] = float(mean), float(err)
    return out

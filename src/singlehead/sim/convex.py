"""Reference solver of the equivalent S-problem (docs: Theory, :ref:`theory-erm`): accelerated proximal gradient.

Solves, over symmetric ``S`` (per sample, the same scale as :mod:`singlehead.sim.training`):

    min_S  F(S) = (1/n) sum_mu ||chan_beta(h_mu(S)) - y_mu||_F^2 + (1/n) R(S)

* nuclear route (factorized student): ``R = lam d Tr S`` on PSD ``S`` with optional
  ``rank S <= p``; the proximal map soft-thresholds the eigenvalues at ``t lam d/n``,
  clips them at zero and keeps the top ``p`` (docs: Theory, :ref:`theory-erm`; arXiv 2505.17958 for the
  nuclear-norm equivalence ``min ||W||_F^2 s.t. W W^T/sqrt(pd) = S`` = ``sqrt(pd) Tr S``);
* Frobenius route (direct student): ``R = lam d ||S||_F^2``; the proximal map is the
  linear shrinkage ``V / (1 + 2 t lam d / n)``;
* untied route (a student whose matrix is not symmetric, :attr:`Student.symmetric` false):
  over general ``M``, ``R = lam d ||M||_*``; the proximal map soft-thresholds the singular
  values at ``t lam d/n`` (and keeps the top ``p`` under a rank cap). Weight decay on
  ``(W_Q, W_K)`` equals this ``R`` at the balanced factorisations (:class:`~singlehead.model.students.Untied`),
  so without a binding rank cap the minimum over ``M`` is the minimum of the untied ERM.

For the linear channel with ``p >= d`` the problem (tied or untied) is convex and this returns the global
minimum. With softmax it is non-convex and the result is a reference stationary point.
Gradients of the smooth part come from autograd (one definition of the channel).
FISTA with backtracking on the Lipschitz constant and function-value adaptive restart
(O'Donoghue & Candès 2015).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from singlehead.model.channels import Channel, squared_error
from singlehead.model.problem import Problem
from singlehead.model.students import Student
from singlehead.sim.data import Sequences, logits


@dataclass
class ReferenceSolution:
    """Minimiser ``S`` (float64 CPU), objective ``F(S)`` (per sample), iterations, convergence flag."""

    S: torch.Tensor
    objective: float
    iterations: int
    converged: bool


def _smooth(S: torch.Tensor, data: Sequences, channel: Channel, beta: float, grad: bool, symmetric: bool = True):
    S = S.detach().requires_grad_(grad)
    loss = squared_error(channel.output(logits(data.X, S), beta, data.X), data.y).sum() / len(data)
    if not grad:
        return float(loss.detach()), None
    (g,) = torch.autograd.grad(loss, S)
    # over symmetric S the gradient is the symmetric part; over general M the full one
    return float(loss.detach()), 0.5 * (g + g.T) if symmetric else g


def _regulariser(S: torch.Tensor, student: Student, lam: float, d: int, n: int) -> float:
    return lam * d * float(student.penalty_value(S)) / n


def _prox(
    V: torch.Tensor, t: float, student: Student, lam: float, d: int, n: int, rank_cap: int | None
) -> torch.Tensor:
    if not student.symmetric:
        # unitarily invariant penalty of a general matrix: its prox acts on the singular values
        U, sv, Vh = torch.linalg.svd(V)
        f, _ = student.penalty_prox(sv.numpy(), t * lam * d / n)
        f = torch.as_tensor(np.array(f, dtype=np.float64))
        if rank_cap is not None and rank_cap < len(f):
            f[rank_cap:] = 0.0  # svd sorts descending: keep the top rank_cap
        return (U * f) @ Vh
    # the penalty is spectral: its prox acts on the eigenvalues of the symmetrised V
    ev, U = torch.linalg.eigh(0.5 * (V + V.T))
    f, _ = student.penalty_prox(ev.numpy(), t * lam * d / n)
    f = torch.as_tensor(np.array(f, dtype=np.float64))
    if rank_cap is not None and rank_cap < len(f):
        f[: len(f) - rank_cap] = 0.0  # eigh sorts ascending: keep the top rank_cap
    return (U * f) @ U.T


def solve_reference(
    problem: Problem, data: Sequences, *, S_init: torch.Tensor | None = None, max_iter: int = 20000, tol: float = 1e-12
) -> ReferenceSolution:
    """Minimise the S-problem of ``problem`` on ``data`` (float64, CPU).

    Over symmetric ``S`` for the tied students, over general ``M`` for the untied one. The rank
    cap is ``problem.p`` for the students with a rank cap (factorized, untied) when ``kappa < 1``. Stops when the
    relative
    objective change between iterates falls below ``tol`` for 10 consecutive iterations.

    Examples
    --------
    >>> from singlehead import Problem, solve_reference
    >>> from singlehead.sim.data import sample_sequences
    >>> problem = Problem(d=20, T=1, channel="linear", alpha=2.0, lam=0.1)
    >>> S0 = problem.target.sample(problem.d, seed=0)
    >>> data = sample_sequences(problem, S0, problem.n, seed=1)
    >>> solution = solve_reference(problem, data)  # doctest: +SKIP
    """
    problem.check_single_head("the reference solver")
    data = data.to("cpu", torch.float64)
    d, n = problem.d, len(data)
    ch, beta, lam, st = problem.channel, problem.beta, problem.lam, problem.student
    cap = problem.p if st.rank_cap(problem.kappa) is not None else None
    S = torch.zeros(d, d, dtype=torch.float64) if S_init is None else S_init.to(torch.float64).clone()
    sym = st.symmetric
    F = lambda M: _smooth(M, data, ch, beta, False)[0] + _regulariser(M, st, lam, d, n)  # noqa: E731
    Y, theta = S.clone(), 1.0
    L = 1.0
    obj = F(S)
    quiet = 0
    it = 0
    for it in range(1, max_iter + 1):
        fY, gY = _smooth(Y, data, ch, beta, True, sym)
        while True:
            t = 1.0 / L
            S_new = _prox(Y - t * gY, t, st, lam, d, n, cap)
            D = S_new - Y
            f_new = _smooth(S_new, data, ch, beta, False)[0]
            if f_new <= fY + float((gY * D).sum()) + 0.5 * L * float((D * D).sum()) + 1e-15 * abs(fY):
                break
            L *= 2.0
        obj_new = f_new + _regulariser(S_new, st, lam, d, n)
        if obj_new > obj:  # adaptive restart: drop the momentum
            theta = 1.0
            Y = S.clone()
            if obj_new - obj <= tol * abs(obj):
                quiet += 1
            continue
        theta_new = 0.5 * (1 + (1 + 4 * theta * theta) ** 0.5)
        Y = S_new + ((theta - 1) / theta_new) * (S_new - S)
        rel = abs(obj - obj_new) / max(abs(obj_new), 1e-300)
        S, obj, theta = S_new, obj_new, theta_new
        L *= 0.95  # let the step grow back after a backtrack
        quiet = quiet + 1 if rel < tol else 0
        if quiet >= 10:
            return ReferenceSolution(S, obj, it, True)
    return ReferenceSolution(S, obj, it, False)

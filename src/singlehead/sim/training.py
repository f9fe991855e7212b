"""Empirical risk minimisation of the students by full-batch Adam or L-BFGS (torch).

The objective ``L/n`` and its gradient (closed form, chunked, streamed when the data exceed the
device) are :class:`~singlehead.sim.objective.Objective`'s, whose docstring states the formulas and
their cost; :func:`fit_adam` and :func:`fit_lbfgs` minimise it. A float32 fit continued in float64
by L-BFGS (``polish_dtype``) ends at the float64 objective.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

# kept private: torch's strong-Wolfe line search (the one its L-BFGS uses) has no public name, and the
# full-batch L-BFGS below drives it itself
from torch.optim.lbfgs import _strong_wolfe

from singlehead.sim.data import Sequences
from singlehead.sim.objective import (
    CHUNK_BYTES,
    Objective,
    objective_and_grad,
    reference_objective_and_grad,
    step_flops,
)

__all__ = [
    "FitInfo",
    "LbfgsMemory",
    "fit_adam",
    "fit_lbfgs",
    "Objective",
    "step_flops",
    "objective_and_grad",
    "reference_objective_and_grad",
    "CHUNK_BYTES",
]


@dataclass
class FitInfo:
    """What the optimiser did: steps taken, whether its stopping rule fired, final objective.

    ``history`` holds the objective after each evaluation (floats); ``polish_steps`` the
    float64 L-BFGS iterations after a float32 fit (0 without a polish).
    """

    optimizer: str
    steps: int
    converged: bool
    objective: float
    history: list[float] = field(default_factory=list)
    polish_steps: int = 0


def fit_adam(
    student: nn.Module,
    data: Sequences | Objective,
    channel: str = "",
    beta: float = 1.0,
    lam: float = 0.0,
    *,
    lr: float = 0.1,
    tol: float = 1e-7,
    window: int = 50,
    max_steps: int = 20000,
    decay: float = 0.1,
    min_lr: float = 1e-4,
    batch_size: int | None = None,
    callback: Callable[[int, float], None] | None = None,
    callback_every: int = 1,
) -> FitInfo:
    """Full-batch Adam, paper protocol (arXiv 2509.24914 App.: N(0,1) init, lr 0.1).

    Stopping rule: every ``window`` steps the relative objective change per step,
    ``|L_t - L_{t-window}| / (window |L_t|)``, is compared with ``tol``. When it falls
    below, the learning rate is divided by ``1/decay`` (constant-lr Adam hovers at a
    distance ~lr from the minimum); the fit stops when that happens at ``lr < min_lr``
    or after ``max_steps`` steps. ``data`` may be a prebuilt :class:`Objective` (then
    ``channel``, ``beta``, ``lam`` and ``batch_size`` are ignored). The objective is read
    back to the host only every ``window`` steps and at the steps where ``callback(step,
    objective)`` is called (every ``callback_every`` steps; the objective passed is the one
    at the parameters before that step's update).
    """
    obj = data if isinstance(data, Objective) else Objective(data, channel, beta, lam, batch_size=batch_size)
    opt = torch.optim.Adam(student.parameters(), lr=lr)
    values: list[torch.Tensor] = []
    last = math.inf
    converged = False
    step = 0
    for step in range(1, max_steps + 1):
        val = obj(student)
        opt.step()
        values.append(val)
        if callback is not None and step % callback_every == 0:
            callback(step, float(val))
        if step % window == 0:
            v = float(val)
            rel = abs(last - v) / (window * max(abs(v), 1e-300))
            last = v
            if rel < tol:
                g = opt.param_groups[0]
                if g["lr"] * decay < min_lr:
                    converged = True
                    break
                g["lr"] *= decay
    final = float(obj(student, backward=False))
    history = torch.stack(values).double().cpu().tolist() if values else []
    return FitInfo("adam", step, converged, final, history)


class LbfgsMemory:
    """The L-BFGS curvature pairs ``(s_i, y_i)`` (at most ``history_size``, the oldest dropped first) and the
    direction ``-H g`` of their inverse-Hessian estimate (Nocedal's two-loop recursion).

    The pairs live in two ring buffers ``(history_size, N)`` with the matrix ``SY[i, j] = s_i . y_j`` kept
    up to date (one new row and column per pair: ``O(m N)``), so a direction costs four matrix-vector
    products and two ``m x m`` triangular solves: the first loop's coefficients
    ``a_i = rho_i (s_i . q0 - sum_{j > i} a_j s_i . y_j)`` solve an upper-triangular system, the second
    loop's ``b_i = rho_i (y_i . r0 + sum_{j < i} (a_j - b_j) y_i . s_j)`` a lower-triangular one (``i, j``
    in age order, oldest first). The same arithmetic as the loops, without their ``4 m`` small operations
    and without re-stacking and re-multiplying the pairs every step (``O(m^2 N)``).
    """

    def __init__(self, history_size: int) -> None:
        if history_size < 1:
            raise ValueError(f"history_size must be an integer >= 1 (got {history_size})")
        self.m = int(history_size)
        self.S: torch.Tensor | None = None  # (m, N) ring buffers, allocated with the first pair
        self.Y: torch.Tensor | None = None
        self.SY: torch.Tensor | None = None
        self.rho: torch.Tensor | None = None
        self.count = 0  # pairs held
        self.next = 0  # the ring slot the next pair goes to
        self.h_diag = 1.0

    def reset(self) -> None:
        """Forget every pair (the next direction is the scaled-free gradient step)."""
        self.count, self.next, self.h_diag = 0, 0, 1.0

    def to(self, dtype: torch.dtype) -> None:
        """Hold the pairs in ``dtype`` (``SY`` recomputed in it)."""
        if self.S is None:
            return
        self.S, self.Y, self.rho = self.S.to(dtype), self.Y.to(dtype), self.rho.to(dtype)
        self.SY = self.S @ self.Y.T

    def _order(self) -> torch.Tensor:
        """Ring slots of the held pairs, oldest first."""
        first = (self.next - self.count) % self.m
        return (torch.arange(self.count) + first) % self.m

    def remember(self, step: torch.Tensor, y: torch.Tensor) -> None:
        """Store the pair ``(step, y)`` when ``y . step > 1e-10`` (curvature condition)."""
        ys = float(torch.dot(y, step))
        if ys <= 1e-10:
            return
        if self.S is None or self.S.shape[1] != step.numel() or self.S.dtype != step.dtype:
            self.S = step.new_zeros((self.m, step.numel()))
            self.Y = step.new_zeros((self.m, step.numel()))
            self.SY = step.new_zeros((self.m, self.m))
            self.rho = step.new_zeros(self.m)
            self.count, self.next = 0, 0
        k = self.next
        self.S[k], self.Y[k], self.rho[k] = step, y, 1.0 / ys
        self.SY[k, :] = self.Y @ step  # s_k . y_j (stale slots are never read)
        self.SY[:, k] = self.S @ y  # s_i . y_k
        self.next = (k + 1) % self.m
        self.count = min(self.count + 1, self.m)
        self.h_diag = ys / float(torch.dot(y, y))

    def direction(self, g: torch.Tensor) -> torch.Tensor:
        """``-H g`` for the current inverse-Hessian estimate (``-h_diag g`` without pairs)."""
        if self.count == 0:
            return -g * self.h_diag
        idx = self._order()
        full = self.count == self.m and self.next == 0  # the ring is in age order already
        S, Y = (self.S, self.Y) if full else (self.S[idx], self.Y[idx])
        SY = self.SY if full else self.SY[idx][:, idx]
        rho = self.rho if full else self.rho[idx]
        m = S.shape[0]
        eye = torch.eye(m, dtype=g.dtype, device=g.device)
        q0 = -g
        a = torch.linalg.solve_triangular(
            eye + rho[:, None] * torch.triu(SY, diagonal=1), (rho * (S @ q0))[:, None], upper=True
        )[:, 0]
        r0 = (q0 - Y.T @ a) * self.h_diag
        W = torch.tril(SY.T, diagonal=-1)
        b = torch.linalg.solve_triangular(eye + rho[:, None] * W, (rho * (Y @ r0 + W @ a))[:, None], upper=False)[:, 0]
        return r0 + S.T @ (a - b)


def fit_lbfgs(
    student: nn.Module,
    data: Sequences | Objective,
    channel: str = "",
    beta: float = 1.0,
    lam: float = 0.0,
    *,
    max_steps: int = 5000,
    tol_grad: float = 1e-10,
    rtol: float = 1e-9,
    patience: int = 2,
    history_size: int = 50,
    batch_size: int | None = None,
    polish_dtype: torch.dtype | None = None,
    polish_rtol: float = 1e-9,
    callback: Callable[[int, float], None] | None = None,
    callback_every: int = 1,
) -> FitInfo:
    """Full-batch L-BFGS with a strong-Wolfe line search (torch's ``_strong_wolfe``).

    Stopping rule: converged when ``max |grad| <= tol_grad``, or when ``patience``
    successive iterations each lower the objective by at most ``rtol |L|`` (relative),
    before ``max_steps`` iterations. ``data`` may be a prebuilt :class:`Objective`.

    With ``polish_dtype`` (float64 after a float32 fit) the fit continues in that dtype with
    the curvature pairs gathered so far (a fresh L-BFGS restarts with a tiny gradient step)
    until the rule fires with ``polish_rtol``; the student is left in ``polish_dtype``.
    ``callback(iteration, objective)`` is called after every ``callback_every``-th iteration
    (iterations counted across the polish); ``history`` holds every evaluation.

    With ``rtol = 1e-9`` the objective ends within ~1e-7 (relative) of the value reached after
    hundreds more iterations (the loss is read in float64: an absolute tolerance on a float32 copy,
    as in ``torch.optim.LBFGS``, fires ~5e-7 above the minimum at d = 100, alpha = 1, T = 2).
    """
    obj = data if isinstance(data, Objective) else Objective(data, channel, beta, lam, batch_size=batch_size)
    params = list(student.parameters())
    if len(params) != 1:
        raise ValueError(f"student must have exactly one parameter tensor (got {len(params)})")
    param = params[0]
    history: list[float] = []

    def evaluate(x: torch.Tensor) -> tuple[float, torch.Tensor]:
        param.data.copy_(x.view_as(param))
        v = float(obj(student))  # the line search needs the value on the host
        history.append(v)
        return v, param.grad.reshape(-1).clone()

    def line_fn(x: torch.Tensor, t: float, d: torch.Tensor) -> tuple[float, torch.Tensor]:
        return evaluate(x + t * d)

    def run(x: torch.Tensor, mem: LbfgsMemory, budget: int, tol: float, done: int) -> tuple[torch.Tensor, int, bool]:
        f, g = evaluate(x)
        calm = 0
        for it in range(1, budget + 1):
            if float(g.abs().max()) <= tol_grad:
                return x, it - 1, True
            d = mem.direction(g)
            gtd = float(torch.dot(g, d))
            if gtd > -1e-300:  # not a descent direction (round-off): restart from the gradient
                mem.reset()
                d, gtd = -g, -float(torch.dot(g, g))
            t = min(1.0, 1.0 / float(g.abs().sum())) if not mem.count else 1.0
            f_new, g_new, t, _ = _strong_wolfe(line_fn, x, t, d, f, g, gtd)
            step = t * d
            mem.remember(step, g_new - g)
            # The rule only counts once a few curvature pairs exist (the first steps are short).
            small = abs(f - f_new) <= tol * abs(f_new) and mem.count >= 3
            calm = calm + 1 if small else 0
            x, f, g = x + step, f_new, g_new
            if callback is not None and (done + it) % callback_every == 0:
                param.data.copy_(x.view_as(param))
                callback(done + it, f)
            if calm >= patience:
                return x, it, True
        return x, budget, False

    mem = LbfgsMemory(history_size)
    with torch.no_grad():
        x = param.detach().reshape(-1).clone()
        x, steps, converged = run(x, mem, max_steps, rtol, 0)
        param.data.copy_(x.view_as(param))
        polish_steps = 0
        if polish_dtype is not None and param.dtype != polish_dtype:
            # continue in polish_dtype with the curvature pairs gathered so far
            student.to(polish_dtype)
            param = next(iter(student.parameters()))
            mem.to(polish_dtype)
            x, polish_steps, converged = run(x.to(polish_dtype), mem, max(1, max_steps - steps), polish_rtol, steps)
            param.data.copy_(x.view_as(param))
        final = float(obj(student, backward=False))
    return FitInfo("lbfgs", steps + polish_steps, converged, final, history, polish_steps)

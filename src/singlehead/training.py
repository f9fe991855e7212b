"""Empirical risk minimisation of the students by full-batch Adam or L-BFGS (torch).

Objective (THEORY §1), reported per sample:

    L(S)/n = (1/n) [ sum_mu ||chan_beta(h_mu(S)) - y_mu||_F^2 + R(S) ],

with ``R = lam d Tr S`` (factorized) or ``lam d ||S||_F^2`` (direct). Dividing by ``n``
only rescales the objective; it keeps gradients O(1) for the optimisers' tolerances.

Data larger than memory on the device are streamed: the full-batch gradient is
accumulated over chunks of ``batch_size`` sequences moved to the device one at a time
(the optimiser still sees the exact full-batch objective).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from .channels import channel_output, squared_error
from .data import Sequences


@dataclass
class FitInfo:
    """What the optimiser did: steps taken, whether its stopping rule fired, final objective."""

    optimizer: str
    steps: int
    converged: bool
    objective: float
    history: list[float] = field(default_factory=list)


def _chunks(data: Sequences, batch_size: int | None):
    n = len(data)
    bs = n if batch_size is None else max(1, int(batch_size))
    for i in range(0, n, bs):
        yield data.X[i:i + bs], data.y[i:i + bs]


def objective_and_grad(student: nn.Module, data: Sequences, channel: str, beta: float, lam: float,
                       batch_size: int | None = None, backward: bool = True) -> float:
    """Per-sample objective ``L/n``; if ``backward``, accumulates its gradient into ``.grad``.

    Chunks not already on the student's device are moved there one at a time.
    """
    param = next(student.parameters())
    n = len(data)
    total = 0.0
    for X, y in _chunks(data, batch_size):
        X = X.to(param.device, param.dtype, non_blocking=True)
        y = y.to(param.device, param.dtype, non_blocking=True)
        loss = squared_error(channel_output(student.logits(X), channel, beta, X), y).sum() / n
        if backward:
            loss.backward()
        total += float(loss.detach())
    reg = student.regulariser(lam) / n
    if backward:
        reg.backward()
    return total + float(reg.detach())


def fit_adam(student: nn.Module, data: Sequences, channel: str, beta: float, lam: float, *,
             lr: float = 0.1, tol: float = 1e-7, window: int = 50, max_steps: int = 20000,
             decay: float = 0.1, min_lr: float = 1e-4, batch_size: int | None = None,
             callback: Callable[[int, float], None] | None = None) -> FitInfo:
    """Full-batch Adam, paper protocol (arXiv 2509.24914 App.: N(0,1) init, lr 0.1).

    Stopping rule: every ``window`` steps the relative objective change per step,
    ``|L_t - L_{t-window}| / (window |L_t|)``, is compared with ``tol``. When it falls
    below, the learning rate is divided by ``1/decay`` (constant-lr Adam hovers at a
    distance ~lr from the minimum); the fit stops when that happens at ``lr < min_lr``
    or after ``max_steps`` steps.
    """
    opt = torch.optim.Adam(student.parameters(), lr=lr)
    history: list[float] = []
    last = math.inf
    converged = False
    step = 0
    for step in range(1, max_steps + 1):
        opt.zero_grad(set_to_none=True)
        val = objective_and_grad(student, data, channel, beta, lam, batch_size)
        opt.step()
        history.append(val)
        if callback is not None:
            callback(step, val)
        if step % window == 0:
            rel = abs(last - val) / (window * max(abs(val), 1e-300))
            last = val
            if rel < tol:
                g = opt.param_groups[0]
                if g["lr"] * decay < min_lr:
                    converged = True
                    break
                g["lr"] *= decay
    final = objective_and_grad(student, data, channel, beta, lam, batch_size, backward=False)
    return FitInfo("adam", step, converged, final, history)


def fit_lbfgs(student: nn.Module, data: Sequences, channel: str, beta: float, lam: float, *,
              max_steps: int = 5000, tol_grad: float = 1e-10, tol_change: float = 1e-15,
              history_size: int = 50, batch_size: int | None = None,
              callback: Callable[[int, float], None] | None = None) -> FitInfo:
    """Full-batch L-BFGS with strong-Wolfe line search (``torch.optim.LBFGS``).

    Converged when torch's first-order (max |grad| < ``tol_grad``) or objective-change
    (< ``tol_change``) criterion fires before ``max_steps`` iterations.
    """
    opt = torch.optim.LBFGS(student.parameters(), lr=1.0, max_iter=max_steps, max_eval=int(max_steps * 1.25),
                            tolerance_grad=tol_grad, tolerance_change=tol_change,
                            history_size=history_size, line_search_fn="strong_wolfe")
    history: list[float] = []

    def closure() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        val = objective_and_grad(student, data, channel, beta, lam, batch_size)
        history.append(val)
        if callback is not None:
            callback(len(history), val)
        return torch.tensor(val)

    opt.step(closure)
    state = opt.state[next(iter(student.parameters()))]
    steps = int(state.get("n_iter", len(history)))
    final = objective_and_grad(student, data, channel, beta, lam, batch_size, backward=False)
    return FitInfo("lbfgs", steps, steps < max_steps, final, history)

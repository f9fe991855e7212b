"""``simulate(problem, seed)``: draw a task, train a student by ERM, measure the THEORY §1 metrics.

The returned :class:`~singlehead.results.Result` has the same metric fields as
``theory(problem)``, so theory and simulation line up field by field.

Seeds: one integer ``seed`` per run is split (numpy ``SeedSequence``) into independent
streams for the target ``S0``, the training set, the test set and the initialisation.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch

from . import __version__
from .channels import channel_output, squared_error
from .data import Sequences, child_seeds, generator, sample_sequences
from .problem import Problem
from .results import Result
from .students import DirectStudent, init_student
from .data import sample_target
from .training import FitInfo, fit_adam, fit_lbfgs

OPTIMIZERS = ("lbfgs", "adam")


def resolve_device(device: str | torch.device) -> torch.device:
    """Validate a device string; raises ``ValueError`` naming the valid choices."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]' (got {device!r})") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available here; valid: cpu")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]' (got {device!r})")
    return dev


def default_dtype(device: torch.device) -> torch.dtype:
    """float64 on CPU (reference precision), float32 on GPU (speed)."""
    return torch.float64 if device.type == "cpu" else torch.float32


@torch.no_grad()
def evaluate(student: torch.nn.Module, data: Sequences, channel: str, beta: float,
             batch_size: int = 8192) -> tuple[float, float, float, float]:
    """Mean and standard error of ``||yhat - y||_F^2`` per sequence, against noiseless and noisy labels.

    Returns ``(err_clean, se_clean, err_noisy, se_noisy)``.
    """
    param = next(student.parameters())
    clean, noisy = [], []
    for i in range(0, len(data), batch_size):
        X = data.X[i:i + batch_size].to(param.device, param.dtype)
        yhat = channel_output(student.logits(X), channel, beta, X)
        clean.append(squared_error(yhat, data.y_clean[i:i + batch_size].to(param.device, param.dtype)).double().cpu())
        noisy.append(squared_error(yhat, data.y[i:i + batch_size].to(param.device, param.dtype)).double().cpu())
    c, z = torch.cat(clean).numpy(), torch.cat(noisy).numpy()
    n = len(c)
    return float(c.mean()), float(c.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan, \
        float(z.mean()), float(z.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan


def spectrum_summary(S: np.ndarray, rank_tol: float) -> dict[str, Any]:
    """Eigenvalues of ``S`` (descending), rank ``#{|eig| > rank_tol}`` and zero fraction."""
    eig = np.linalg.eigvalsh(S)[::-1]
    rank = int(np.sum(np.abs(eig) > rank_tol))
    return {"eigenvalues": eig, "rank": rank, "zero_fraction": 1.0 - rank / len(eig)}


def measure_estimate(problem: Problem, S: np.ndarray, S0: np.ndarray, train: Sequences, test: Sequences, *,
                     rank_tol: float = 1e-3, student: torch.nn.Module | None = None
                     ) -> tuple[dict[str, float], dict[str, Any]]:
    """The THEORY §1 metrics of an estimate ``S`` of ``S0``, shared by every route on instances.

    Returns ``(metrics, extras)``: ``metrics`` are the :class:`Result` metric fields
    (test errors on ``test``, train error against the noisy labels of ``train``, penalty,
    matrix error ``||S - S0||_F^2/d``, rank fraction); ``extras`` the spectrum summary,
    ``q = Tr S^2/d``, ``m = Tr S S0/d``, ``Q0 = Tr S0^2/d`` and the standard errors of the
    test errors. ``student`` (the trained module) is used for the predictions when given,
    else ``S`` itself as a direct student.
    """
    if student is None:
        student = DirectStudent(torch.as_tensor(S, dtype=torch.float64))
    # The training loss is against the noisy labels: the third number evaluate() returns.
    _, _, train_err, _ = evaluate(student, train, problem.channel, problem.beta)
    te, te_se, ten, ten_se = evaluate(student, test, problem.channel, problem.beta)
    d = problem.d
    q = float(np.sum(S * S) / d)
    m = float(np.sum(S * S0) / d)
    Q0 = float(np.sum(S0 * S0) / d)
    spec = spectrum_summary(S, rank_tol)
    penalty = problem.lam * (float(np.trace(S)) / d if problem.student == "factorized" else q)
    metrics = {"test_error": te, "test_error_noisy": ten, "train_error": train_err, "penalty": penalty,
               "matrix_error": float(np.sum((S - S0) ** 2) / d), "rank_fraction": spec["rank"] / d}
    extras = {**spec, "q": q, "m": m, "Q0": Q0, "test_error_se": te_se, "test_error_noisy_se": ten_se}
    return metrics, extras


def simulate(problem: Problem, seed: int = 0, *, optimizer: str = "lbfgs", device: str | torch.device = "cpu",
             dtype: torch.dtype | None = None, n_test: int = 10000, max_steps: int | None = None,
             tol: float | None = None, batch_size: int | None = None, rank_tol: float = 1e-3,
             return_matrices: bool = False, callback=None) -> Result:
    """Train one student on one draw of the task and measure it.

    Parameters
    ----------
    problem : Problem
        Task, student and regularisation.
    seed : int
        Master seed (target, training set, test set and initialisation are derived from it).
    optimizer : {"lbfgs", "adam"}
        L-BFGS (default; faster) or the paper's full-batch Adam protocol (lr 0.1).
    device : str
        ``"cpu"`` or ``"cuda[:N]"``. Data are drawn on the CPU, so results agree across devices
        up to floating-point precision.
    dtype : torch.dtype, optional
        float64 on CPU and float32 on GPU by default.
    n_test : int
        Fresh test sequences for the test errors (standard errors are reported too).
    rank_tol : float
        Eigenvalues of ``S`` with ``|eig| <= rank_tol`` count as zero (eigenvalues of S are O(1)).

    Returns
    -------
    Result
        ``source="simulation"``; extras: ``eigenvalues``, ``rank``, ``zero_fraction``,
        ``objective`` (``L/n``), ``q``, ``m``, ``Q0`` (``Tr S^2/d``, ``Tr S S0/d``, ``Tr S0^2/d``),
        standard errors of the test errors, ``optimizer``, ``seed``, ``version``, ``device``,
        ``dtype``; standard fields ``converged``, ``iterations`` (optimiser steps), ``runtime_s``,
        ``message``.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS} (got {optimizer!r})")
    if int(n_test) < 2:
        raise ValueError(f"n_test must be an integer >= 2 (got {n_test!r})")
    dev = resolve_device(device)
    dtype = dtype or default_dtype(dev)
    t0 = time.perf_counter()
    s_target, s_train, s_test, s_init = child_seeds(seed, 4)
    S0 = sample_target(problem.target, problem.d, s_target)
    train = sample_sequences(problem, S0, problem.n, s_train)
    test = sample_sequences(problem, S0, int(n_test), s_test)
    if batch_size is None:
        train = train.to(dev, dtype)
    student = init_student(problem.student, problem.d, problem.p, generator(s_init), dtype, dev)

    kw: dict[str, Any] = {"batch_size": batch_size, "callback": callback}
    if max_steps is not None:
        kw["max_steps"] = int(max_steps)
    if optimizer == "adam":
        if tol is not None:
            kw["tol"] = tol
        info: FitInfo = fit_adam(student, train, problem.channel, problem.beta, problem.lam, **kw)
    else:
        if tol is not None:
            kw["tol_grad"] = tol
        info = fit_lbfgs(student, train, problem.channel, problem.beta, problem.lam, **kw)

    with torch.no_grad():
        S_np = student.matrix().detach().to("cpu", torch.float64).numpy()
    S0_np = S0.numpy()
    metrics, common = measure_estimate(problem, S_np, S0_np, train, test, rank_tol=rank_tol, student=student)
    extras: dict[str, Any] = {
        **common, "objective": info.objective,
        "optimizer": info.optimizer,
        "seed": int(seed), "version": __version__, "device": str(dev), "dtype": str(dtype).replace("torch.", ""),
        "n": problem.n, "n_test": int(n_test),
    }
    if return_matrices:
        extras["S"] = S_np
        extras["S0"] = S0_np
    message = (f"{info.optimizer}: stopping rule fired after {info.steps} steps" if info.converged
               else f"{info.optimizer}: step budget exhausted ({info.steps} steps) before the stopping rule fired")
    return Result("simulation", problem.to_dict(), **metrics, converged=bool(info.converged), iterations=int(info.steps),
                  runtime_s=time.perf_counter() - t0, message=message, extras=extras)

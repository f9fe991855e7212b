"""ERM fits for the interpolation-peak investigation: one data set, several initialisations.

:func:`singlehead.simulate` derives the target, the data and the initialisation from one seed. To
compare independent minimisers *on the same data* (the optimizer's landscape, and the overlap
between solutions that replica symmetry predicts to coincide at d = inf) this module splits them:
the data come from ``data_seed`` exactly as in ``simulate(problem, data_seed)``, and initialisation
``k`` uses ``simulate``'s own init stream for ``k = 0`` (so ``k = 0`` reproduces ``simulate``) and an
independent child stream for ``k >= 1``.

Precision: float32 fit, then a float64 L-BFGS polish (``TrainOptions(precision="mixed")``, the CPU
default of the library); Adam (the paper's protocol, lr 0.1) is polished the same way, so both
optimizers are compared on the same float64 objective.

The study caches each fit's record in the library's result cache
(:func:`singlehead.runs.cached`), so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from singlehead import Problem

__all__ = ["fit_instance", "pair_distances"]


def _init_seed(s_init: int, k: int) -> int:
    from singlehead.numerics.rng import child_seeds

    return s_init if k == 0 else child_seeds(s_init, k)[k - 1]


def pair_distances(mats: list[np.ndarray], d: int) -> list[float]:
    """``||S_i - S_j||_F^2 / d`` for every pair ``i < j`` (the matrix error's normalisation)."""
    return [float(np.sum((mats[i] - mats[j]) ** 2) / d) for i in range(len(mats)) for j in range(i + 1, len(mats))]


def fit_instance(
    problem: Problem,
    data_seed: int,
    inits: list[int],
    optimizer: str = "lbfgs",
    n_test: int = 10000,
    adam_max_steps: int = 20000,
) -> dict[str, Any]:
    """Fit ``problem`` on the data of ``data_seed`` from each initialisation in ``inits``.

    Parameters
    ----------
    problem : Problem
        Task, student and regularisation.
    data_seed : int
        The data (target, training and test sets) of ``simulate(problem, data_seed)``.
    inits : list of int
        Initialisation indices (0: ``simulate``'s own initialisation).
    optimizer : {"lbfgs", "adam"}
        The float32 phase's optimiser; both end with the float64 L-BFGS polish.
    n_test : int
        Test sequences (>= 2).
    adam_max_steps : int
        Step cap of Adam's float32 phase (>= 1).

    Returns
    -------
    dict
        ``fits``: one record per init (test/train error, float64 objective ``L/n``, matrix error,
        ``q``, ``m``, steps, runtime); ``distances``: ``||S_i - S_j||_F^2/d`` over the pairs of inits
        in ``itertools.combinations`` order.
    """
    import torch

    from singlehead.model.students import init_student
    from singlehead.numerics.rng import child_seeds, generator
    from singlehead.sim.data import sample_sequences
    from singlehead.sim.simulation import measure_estimate
    from singlehead.sim.training import Objective, fit_adam, fit_lbfgs

    if optimizer not in ("lbfgs", "adam"):
        raise ValueError(f"optimizer must be 'lbfgs' or 'adam' (got {optimizer!r})")
    if not inits:
        raise ValueError("inits must name at least one initialisation index (got an empty list)")
    s_target, s_train, s_test, s_init = child_seeds(data_seed, 4)
    S0 = problem.target.sample(problem.d, s_target)
    train = sample_sequences(problem, S0, problem.n, s_train).to("cpu", torch.float64)
    test = sample_sequences(problem, S0, n_test, s_test)
    objective = Objective(train, problem.channel, problem.beta, problem.lam)
    fits, mats = [], []
    for k in inits:
        t0 = time.perf_counter()
        student = init_student(
            problem.student, problem.d, problem.p, generator(_init_seed(s_init, k)), torch.float32, "cpu"
        )
        if optimizer == "adam":
            info = fit_adam(student, objective, lr=0.1, tol=1e-7, max_steps=adam_max_steps)
            first_steps = info.steps
            student.to(torch.float64)
            info = fit_lbfgs(student, objective, rtol=3e-8)
        else:
            info = fit_lbfgs(student, objective, polish_dtype=torch.float64, polish_rtol=3e-8, rtol=1e-7)
            first_steps = info.steps - info.polish_steps
        with torch.no_grad():
            S = student.matrix().detach().to("cpu", torch.float64).numpy()
        metrics, ex = measure_estimate(problem, S, S0.numpy(), train, test, student=student)
        fits.append(
            {
                "init": int(k),
                "test_error": metrics["test_error"],
                "train_error": metrics["train_error"],
                "objective": float(info.objective),
                "matrix_error": metrics["matrix_error"],
                "q": ex["q"],
                "m": ex["m"],
                "Q0": ex["Q0"],
                "test_error_se": ex["test_error_se"],
                "steps": int(first_steps),
                "polish_steps": int(info.steps if optimizer == "adam" else info.polish_steps),
                "converged": bool(info.converged),
                "runtime_s": time.perf_counter() - t0,
            }
        )
        mats.append(S)
    return {"fits": fits, "distances": pair_distances(mats, problem.d) if len(mats) > 1 else []}

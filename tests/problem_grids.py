"""Random grids of valid problems for robustness tests and benchmarks (a test fixture, not library API).

``benchmarks/bench_se_random_grid.py`` imports this file by path; the draws are deterministic in
``seed`` and must not change (the convergence-rate test and the benchmark's history use them).
"""

from __future__ import annotations

import math

import numpy as np

from singlehead import MPTarget, Problem

# the order of the draws: changing these tuples changes every grid
CHANNELS = ("seq2lab", "seq2seq", "linear")
STUDENTS = ("factorized", "direct")


def random_problems(n: int, seed: int = 0) -> list[Problem]:
    """``n`` random valid problems spanning the state evolution's domain (robustness grids).

    Channel (``seq2lab``, ``seq2seq``, ``linear``) x ``T`` in {1, 2, 3} (softmax channels need
    ``T >= 2``) x student (factorized with rank cap ``kappa`` in {1, 0.5, 0.2}, or direct) x
    ``beta0/beta`` in {1, 2, 1/2} x ``lam`` log-uniform in ``[1e-5, 5]`` x ``alpha`` log-uniform
    in ``[3e-3, 20]`` x label noise ``Delta`` in {0, 0.1, 0.5, 1}, Marchenko--Pastur targets
    ``kappa0`` in {0.25, 0.5, 1}. Deterministic in ``seed`` (used by the SE convergence-rate test
    and ``benchmarks/bench_se_random_grid.py``).
    """

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(int(n)):
        channel = str(rng.choice(CHANNELS))
        T = int(rng.choice([1, 2, 3])) if channel == "linear" else int(rng.choice([2, 3]))
        student = str(rng.choice(STUDENTS))
        kappa = float(rng.choice([1.0, 0.5, 0.2])) if student == "factorized" else 1.0
        ratio = float(rng.choice([1.0, 2.0, 0.5]))
        beta0, beta = (1.0, 1.0) if channel == "linear" else (1.0, 1.0 / ratio)
        out.append(Problem(
            T=T, channel=channel, student=student, kappa=kappa, beta=beta, beta0=beta0,
            lam=float(10 ** rng.uniform(-5, math.log10(5))), alpha=float(10 ** rng.uniform(math.log10(3e-3), math.log10(20))),
            noise=float(rng.choice([0.0, 0.1, 0.5, 1.0])), target=MPTarget(float(rng.choice([0.25, 0.5, 1.0]))),
        ))
    return out

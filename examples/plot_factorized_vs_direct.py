"""
Factorized against direct students
==================================

The tied attention layer learns ``S = W W^T / sqrt(p d)``: its weight decay
``(lam / sqrt(kappa)) ||W||_F^2`` is the nuclear-norm penalty ``lam d Tr S`` on a PSD matrix,
which zeroes small eigenvalues (low-rank collapse). The direct student trains a symmetric
``S`` entry-wise with a Frobenius penalty ``lam d ||S||_F^2``, a linear shrinkage that keeps
every direction. Same task, same ``lam``: the state-evolution curves (lines) and simulations
at ``d = 40`` (points, 3 seeds) of the two students. Matrix error is ``||S - S0||_F^2 / d``.
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead import MPTarget, Problem, TrainOptions, simulate, theory_curve

base = Problem(d=40, T=2, noise=0.5, lam=0.05, target=MPTarget(kappa0=0.25))
alphas = np.geomspace(0.1, 3.0, 12)
alphas_sim = [0.25, 1.0, 2.0]

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
for student, colour in [("factorized", "C0"), ("direct", "C3")]:
    problem = base.replace(student=student)
    curve = theory_curve(problem, alphas)
    left.plot(alphas, [r.test_error for r in curve], color=colour, label=f"{student} (theory)")
    right.plot(alphas, [r.rank_fraction for r in curve], color=colour, label=f"{student} (theory)")
    sims = [
        [simulate(problem.replace(alpha=a), seed=s, options=TrainOptions(optimizer="lbfgs")) for s in range(3)]
        for a in alphas_sim
    ]
    left.errorbar(
        alphas_sim,
        [np.mean([r.test_error for r in runs]) for runs in sims],
        yerr=[np.std([r.test_error for r in runs], ddof=1) / np.sqrt(3) for runs in sims],
        fmt="o",
        color=colour,
        ms=4,
    )
    right.plot(alphas_sim, [np.mean([r.rank_fraction for r in runs]) for runs in sims], "o", color=colour, ms=4)
left.set(xscale="log", yscale="log", xlabel="alpha", ylabel="test error", title="kappa0 = 0.25, lam = 0.05")
right.set(xscale="log", xlabel="alpha", ylabel="rank / d", title="rank of the learned S")
left.legend()
fig.tight_layout()

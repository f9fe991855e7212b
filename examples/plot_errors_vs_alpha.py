"""
Test error against the sample ratio
===================================

The state evolution predicts the test error of the trained tied-attention layer as a
function of ``alpha = n/d^2``. Here it is drawn as lines for three regularisations and held
against ERM simulations (points: mean over seeds, bars: standard error of that mean) at a
small ``d = 30``, trained with L-BFGS.

Test error is ``E ||yhat - y||_F^2`` per sequence on fresh data, against noiseless labels.
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead import MPTarget, Problem, TrainOptions, simulate, theory_curve

base = Problem(d=30, T=2, noise=0.5, target=MPTarget(kappa0=0.5))
alphas_theory = np.geomspace(0.1, 3.0, 14)
alphas_sim = [0.25, 0.5, 1.0, 2.0]
seeds = range(3)

fig, ax = plt.subplots(figsize=(6, 4))
for lam, colour in [(1e-3, "C0"), (1e-2, "C1"), (1e-1, "C2")]:
    problem = base.replace(lam=lam)
    curve = theory_curve(problem, alphas_theory)  # warm-started along alpha
    ax.plot(alphas_theory, [r.test_error for r in curve], color=colour, label=f"theory, lam = {lam:g}")
    means, errs = [], []
    for alpha in alphas_sim:
        runs = [
            simulate(problem.replace(alpha=alpha), seed=s, options=TrainOptions(optimizer="lbfgs")).test_error
            for s in seeds
        ]
        means.append(np.mean(runs))
        errs.append(np.std(runs, ddof=1) / np.sqrt(len(runs)))
    ax.errorbar(alphas_sim, means, yerr=errs, fmt="o", color=colour, ms=4)

ax.set(
    xscale="log",
    yscale="log",
    xlabel="alpha = n / d^2",
    ylabel="test error",
    title="seq2lab, T = 2, Delta = 0.5, kappa0 = 0.5; points: d = 30",
)
ax.legend()
fig.tight_layout()

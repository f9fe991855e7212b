"""
Bayes-optimal error against ERM
===============================

The Bayes-optimal estimator is the best any method can do on the attention-indexed model; ERM
with the tied attention layer can never beat it. Noiseless labels, MP target with
``kappa0 = 0.5``, ``T = 2``: the Bayes-optimal test error and the state-evolution test error of
ERM at small regularisation, with the two perfect-recovery thresholds (Bayes-optimal
``(kappa0 - kappa0^2/2)/c_T`` and ERM's ``alpha_perfect``).
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead import (
    MPTarget,
    Problem,
    bayes_optimal,
    bayes_perfect_recovery_threshold,
    perfect_recovery_threshold,
    theory_curve,
)

problem = Problem(T=2, noise=0.0, lam=1e-4, target=MPTarget(kappa0=0.5))
a_bayes = bayes_perfect_recovery_threshold(problem)
a_erm = perfect_recovery_threshold(problem)
alphas = np.linspace(0.02, 0.3, 15)
bayes = [bayes_optimal(problem.replace(alpha=float(a))).test_error if a < a_bayes else 0.0 for a in alphas]
erm = [r.test_error for r in theory_curve(problem, alphas)]

fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(alphas, erm, "o-", ms=3, label="ERM, tied attention (SE, lam = 1e-4)")
ax.plot(alphas, bayes, "s-", ms=3, label="Bayes-optimal")
ax.axvline(a_bayes, color="C1", ls=":", label=f"Bayes perfect recovery {a_bayes:.3f}")
ax.axvline(a_erm, color="C0", ls=":", label=f"ERM alpha_perfect {a_erm:.3f}")
ax.set(xlabel="alpha", ylabel="test error", title="noiseless, T = 2, kappa0 = 0.5")
ax.legend(fontsize=8)
fig.tight_layout()
worst = max(b - e for b, e in zip(bayes, erm))
print(f"largest (Bayes - ERM) over the grid: {worst:.2e} (must not be positive beyond quadrature error)")

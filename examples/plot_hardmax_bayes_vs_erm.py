"""
Hardmax labels: Bayes-optimal error against ERM
===============================================

The hardmax channel labels each row by the one-hot argmax of the teacher's logits; the student
is a softmax fitted by the square loss. The labels carry inequalities, not the logits, so the
Bayes-optimal estimator never recovers the target exactly at finite ``alpha`` (unlike the
softmax channel, whose noiseless labels reveal the logits). Noiseless labels, full-rank MP
target ``kappa0 = 2``, ``T = 2``: the Bayes-optimal test error (state evolution with the
orthant-probability output channel) and the state-evolution test error of ERM at ``lam = 0.01``.
The Bayes-optimal error is the lower one at every ``alpha``.
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead import MPTarget, Problem, bayes_optimal, theory_curve

problem = Problem(T=2, channel="hardmax", noise=0.0, lam=0.01, target=MPTarget(kappa0=2.0))
alphas = np.linspace(0.1, 2.0, 8)
bayes = [bayes_optimal(problem.replace(alpha=float(a)), n_outer=1024, n_inner=64).test_error for a in alphas]
erm = [r.test_error for r in theory_curve(problem, alphas)]

fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(alphas, erm, "o-", ms=3, label="ERM, tied attention (SE, lam = 0.01)")
ax.plot(alphas, bayes, "s-", ms=3, label="Bayes-optimal")
ax.set(xlabel="alpha", ylabel="test error", title="hardmax labels, noiseless, T = 2, kappa0 = 2")
ax.legend(fontsize=8)
fig.tight_layout()
worst = max(b - e for b, e in zip(bayes, erm))
print(f"largest (Bayes - ERM) over the grid: {worst:.2e} (must be negative)")

"""
Finite-size extrapolation to d = infinity
=========================================

The state evolution is exact as ``d -> infinity`` at fixed ``alpha``; simulations run at finite
``d``. The gap between them shrinks like ``1/d``: fitting ``gap(d) = a + b/d`` by weighted least
squares (weights from the seed scatter) and reading off the intercept ``a`` with its 95 %
confidence interval tests the theory at ``d = infinity``. The intercept should be compatible
with zero.
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead import MPTarget, Problem, TrainOptions, simulate, theory
from singlehead.analysis import finite_size_gaps

problem = Problem(T=2, alpha=1.0, noise=0.5, lam=0.05, target=MPTarget(kappa0=0.5))
prediction = theory(problem).test_error
sizes = [20, 30, 40, 60]
per_d = {
    d: [simulate(problem.replace(d=d), seed=s, options=TrainOptions(optimizer="lbfgs")).test_error for s in range(5)]
    for d in sizes
}
gaps = finite_size_gaps(per_d, prediction)
ext = gaps.extrapolation

fig, ax = plt.subplots(figsize=(6, 4))
ax.errorbar(1 / gaps.d, gaps.gap, yerr=gaps.se, fmt="o", label="simulation - theory (5 seeds)")
x = np.linspace(0, 1 / min(sizes), 50)
ax.plot(x, ext.intercept + ext.slopes[0] * x, "k--", label="weighted fit a + b/d")
ax.errorbar(
    [0],
    [ext.intercept],
    yerr=[[ext.intercept - ext.ci[0]], [ext.ci[1] - ext.intercept]],
    fmt="s",
    color="C3",
    label=f"d = inf: {ext.intercept:.4f} [{ext.ci[0]:.4f}, {ext.ci[1]:.4f}]",
)
ax.axhline(0, color="grey", lw=0.5)
ax.set(xlabel="1 / d", ylabel="test-error gap", title=f"alpha = 1, lam = 0.05; theory {prediction:.4f}")
ax.legend(fontsize=8)
fig.tight_layout()
print(f"intercept {ext.intercept:.5f} +- {ext.stderr:.5f}, chi2/dof {ext.chi2_per_dof:.2f}")

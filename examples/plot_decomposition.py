"""
Where the test error comes from
===============================

The state evolution's test error splits exactly into four non-negative parts, in units of
matrix error: ``test_error = e0 + c_r (E_over + E_under + E_approx + E_mismatch)``.
``E_over`` is the error in fitted noise directions (the learned bulk), ``E_under`` the target
directions that were not recovered, ``E_approx`` the error along the recovered directions
(shrinkage and eigenvector misalignment), ``E_mismatch`` the excess of the learned scale over
the best scale. The stacked areas below show the four parts against ``alpha``; the black line
is the full test error, which the areas must reproduce.
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead import MPTarget, Problem, theory_curve
from singlehead.analysis import decompose

problem = Problem(T=2, noise=0.5, lam=0.01, target=MPTarget(kappa0=0.5))
alphas = np.geomspace(0.1, 4.0, 10)
parts = {"E_over": [], "E_under": [], "E_approx": [], "E_mismatch": []}
floors, totals = [], []
for alpha, result in zip(alphas, theory_curve(problem, alphas)):
    dec = decompose(problem.replace(alpha=float(alpha)), result)
    for name in parts:
        parts[name].append(dec.c_r * getattr(dec, name))
    floors.append(dec.e0)
    totals.append(dec.test_error)

fig, ax = plt.subplots(figsize=(6, 4))
ax.stackplot(alphas, floors, *parts.values(), labels=["e0", *(f"c_r {k}" for k in parts)], alpha=0.8)
ax.plot(alphas, totals, "k", lw=2, label="test error (SE)")
ax.set(xscale="log", xlabel="alpha", ylabel="test error", title="seq2lab, T = 2, Delta = 0.5, lam = 0.01")
ax.legend(fontsize=8)
fig.tight_layout()
gap = max(abs(f + sum(p[i] for p in parts.values()) - t) for i, (f, t) in enumerate(zip(floors, totals)))
print(f"largest |sum of parts - test error| over the curve: {gap:.2e}")

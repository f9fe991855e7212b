"""
Interpolation and perfect-recovery thresholds
=============================================

Two sample ratios organise the ``lam -> 0+`` curves:

* ``alpha_interp``, the largest ``alpha`` at which the trained layer still fits the training
  set exactly (zero training error at ``lam -> 0+``); the test error rises sharply past it (the
  interpolation peak, which the state evolution places a little above ``alpha_interp`` at small
  but finite ``lam``);
* ``alpha_perfect``, the smallest ``alpha`` at which the noiseless ERM recovers the target
  exactly, to be compared with the Bayes-optimal ``(kappa0 - kappa0^2/2)/c_T``,
  ``c_T = (T^2 + T - 2)/2``.

Left: at ``lam = 1e-4`` the state-evolution training error (log scale) is of order ``lam`` below
``alpha_interp`` and grows by orders of magnitude past it, while the test error (right axis) peaks.
Right: the recovery thresholds against the target's rank ratio ``kappa0``.
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead import (
    MPTarget,
    Problem,
    bayes_perfect_recovery_threshold,
    interpolation_threshold,
    perfect_recovery_threshold,
    theory_curve,
)

problem = Problem(T=2, noise=0.5, lam=1e-4, target=MPTarget(kappa0=0.5))
a_interp = interpolation_threshold(problem)
alphas = np.linspace(0.05, 0.45, 13)
curve = theory_curve(problem, alphas)

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
left.semilogy(alphas, [r.train_error for r in curve], "o-", ms=3, label="train error (SE, lam = 1e-4)")
left.axvline(a_interp, color="k", ls="--", label=f"alpha_interp = {a_interp:.3f}")
left.set(xlabel="alpha", ylabel="train error", title="T = 2, Delta = 0.5, kappa0 = 0.5")
left.legend(loc="lower right")
twin = left.twinx()
twin.plot(alphas, [r.test_error for r in curve], "s-", ms=3, color="C1")
twin.set_ylabel("test error (squares)", color="C1")

kappa0s = np.linspace(0.1, 0.9, 9)
erm = [perfect_recovery_threshold(Problem(T=2, lam=0.0, target=MPTarget(k))) for k in kappa0s]
bayes = [bayes_perfect_recovery_threshold(Problem(T=2, lam=0.0, target=MPTarget(k))) for k in kappa0s]
right.plot(kappa0s, erm, "o-", label="ERM alpha_perfect")
right.plot(kappa0s, bayes, "s--", label="Bayes-optimal")
right.set(xlabel="kappa0 = p0 / d", ylabel="alpha", title="noiseless, T = 2")
right.legend()
fig.tight_layout()
print(f"alpha_interp = {a_interp:.4f}; alpha_perfect(kappa0 = 0.5) = {erm[4]:.4f}")

"""
Learned spectrum against trained students
=========================================

At the state-evolution fixed point the trained ``S = W W^T / sqrt(p d)`` has, in law, the
spectrum of ``eta ReLU(S0 + delta Z - eps)``: an atom at zero (low-rank collapse; its mass is
the fraction of zero eigenvalues), a bulk, and outliers for isolated target eigenvalues. Here
the predicted density is compared with the eigenvalues of students trained on four draws of
the task at ``d = 80``; the Kolmogorov--Smirnov distance measures the agreement of the two
distribution functions.
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead import MPTarget, Problem, TrainOptions, simulate, theory
from singlehead.analysis import compare_spectrum, learned_spectrum

problem = Problem(d=80, T=2, alpha=1.0, noise=0.5, lam=0.05, target=MPTarget(kappa0=0.5))
prediction = learned_spectrum(problem, theory(problem))
eigenvalues = np.concatenate(
    [simulate(problem, seed=s, options=TrainOptions(optimizer="lbfgs")).extras["eigenvalues"] for s in range(4)]
)
report = compare_spectrum(problem, eigenvalues, prediction=prediction)

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
nonzero = eigenvalues[eigenvalues > 1e-3]
left.hist(nonzero, bins=30, density=True, alpha=0.5, label="trained students (non-zero eigenvalues)")
# The histogram shows only the non-zero part, so the predicted density is rescaled to it.
law = prediction.law
left.plot(law.grid, law.density / prediction.rank_fraction, "k", label="theory: bulk density")
left.set(
    xlabel="eigenvalue of S",
    ylabel="density",
    title=f"zero atom: theory {report['zero_atom_theory']:.3f}, simulation {report['zero_atom_sim']:.3f}",
)
left.legend(fontsize=8)

x = np.linspace(0, eigenvalues.max() * 1.05, 400)
right.step(
    np.sort(eigenvalues),
    np.arange(1, eigenvalues.size + 1) / eigenvalues.size,
    where="post",
    label="empirical CDF (4 seeds)",
)
right.plot(x, prediction.cdf(x), "k--", label="predicted CDF")
right.set(xlabel="eigenvalue of S", ylabel="CDF", title=f"KS distance {report['ks']:.3f}")
right.legend()
fig.tight_layout()
print({k: round(float(v), 4) for k, v in report.items()})

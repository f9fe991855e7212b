"""
Power-law targets: sequential recovery and a scaling law
========================================================

With a power-law target ``s_i = A i^-gamma`` the modes of the target are recovered one by
one as ``n`` grows: mode ``i`` becomes an outlier of the learned spectrum once ``s_i`` exceeds
the effective noise ``delta ~ d / sqrt(n)``, so mode ``i`` switches on near
``n_i ~ d i^(2 gamma)``. Each switch is a small "emergence" step in the error.

Left: the number ``K`` of recovered modes along ``n`` (state evolution, linear channel,
``T = 1``, ``d = 1000``). Right: with the regularisation tuned as ``lam = 10 sqrt(alpha)``, the
error follows the threshold-limited law ``(n/d)^-(1 - 1/(2 gamma))``; the exponent fitted to the
state-evolution curve (with its 95 % confidence interval) is compared with that prediction.
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead.analysis import power_law_curve, scaling_curve

gamma, d = 1.25, 1000
ns = np.geomspace(1.25 * d, 2000 * d, 16)
curve = power_law_curve(gamma, d, ns, lam=1e-3, noise=0.1, prior="spiked", tol=1e-7)

d_s = 100_000
ns_s = np.geomspace(100 * d_s, 10_000 * d_s, 5)
scaling = scaling_curve(gamma, d_s, ns_s, lam=lambda a: 10.0 * np.sqrt(a), noise=4.0, prior="spiked", tol=1e-7)
fit = scaling["fit"]
predicted = 1 - 1 / (2 * gamma)

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
left.step(curve.n / d, curve.K, where="post", label="K recovered modes (theory)")
i = np.arange(1, int(curve.K.max()) + 2)
i = i[i ** (2 * gamma) <= curve.n.max() / d]
left.plot(i ** (2 * gamma), i, ":", color="grey", label="slope of n_i / d ~ i^(2 gamma)")
left.set(xscale="log", yscale="log", xlabel="n / d", ylabel="K", title=f"sequential recovery, gamma = {gamma}, d = {d}")
left.legend()

sc = scaling["curve"]
right.loglog(sc.n / d_s, sc.excess_error, "o-", label="theory (lam = 10 sqrt(alpha), Delta = 4)")
right.loglog(
    sc.n / d_s,
    fit.prefactor * sc.n.to_numpy() ** (-fit.exponent),
    "k--",
    label=f"fit: exponent {fit.exponent:.3f} [{fit.ci_low:.3f}, {fit.ci_high:.3f}]",
)
right.set(xlabel="n / d", ylabel="test error", title=f"predicted exponent 1 - 1/(2 gamma) = {predicted:.3f}")
right.legend(fontsize=8)
fig.tight_layout()
print(f"fitted exponent {fit.exponent:.4f} +- {fit.stderr:.4f}, predicted {predicted:.4f}")

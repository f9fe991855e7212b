"""
Phase diagram over alpha and the weight decay
=============================================

The state evolution on a grid of the sample ratio ``alpha = n/d^2`` and the weight decay ``lam``
(noisy labels, ``Delta = 0.5``, MP target ``kappa0 = 0.5``, ``T = 2``): the test error as a heat
map, the regions (interpolating, collapsed, ...) as contours, and the library's closed forms on
top: the interpolation threshold ``alpha_interp`` (at ``lam -> 0+``) and the collapse point
``collapse_lam(alpha)`` above which the trained attention is ``S = 0``. Each row of the grid is one
warm-started sweep along ``alpha``; the replica-symmetry check is left out to keep the example quick.
"""

import matplotlib.pyplot as plt
import numpy as np

from singlehead import MPTarget, Problem, phase_diagram

problem = Problem(T=2, noise=0.5, target=MPTarget(kappa0=0.5))
diagram = phase_diagram(
    problem, x=("alpha", np.geomspace(0.05, 3.0, 10)), y=("lam", np.geomspace(1e-4, 10.0, 8)), stability=False
)

frame = diagram.to_frame()
print(frame["region"].value_counts().to_string())
print(f"alpha_interp = {diagram.curves['alpha_interp'].values[0]:.4f}")

fig, ax = plt.subplots(figsize=(6.4, 4.8))
diagram.plot(ax=ax)
ax.set_title("test error, regions and thresholds (seq2lab, T = 2)")
fig.tight_layout()
plt.show()

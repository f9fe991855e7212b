"""Speed of the prior side of the tied state evolution for Marchenko-Pastur targets (a script, not a test).

The calls are those the SE makes: the ``(qhat, mhat, Sigmahat)`` of every ``prior_side`` call of 24
cold ``theory()`` points of ``Problem(T=2, alpha=a, noise=0.5, lam=0.01, target=MPTarget(0.5))``,
``a`` in ``geomspace(0.05, 4, 24)``, replayed without a rank cap and with ``kappa = 0.5`` and ``0.1``
(binding). "before" runs the reference routes (:func:`singlehead.numerics.spectra._mp_reference.reference_routes`:
eigenvalue cubics, ``Polynomial`` quartic, density at the mid-points between edges, Newton cut-off
from mid-bulk; the rest of this change, which is bit-identical, stays on, so the code before the
change was slower still), "after" the default ones;
each time is the best of ``--repeat`` passes over the calls, in ms per call, beside the reference
workload measured in the same run. The largest relative difference of the nine ``PriorSide`` fields
between the two routes is printed too.

Run: ``OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/bench_prior_side.py``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from singlehead import MPTarget, Problem, theory
from singlehead.model.students import Factorized
from singlehead.numerics.spectra._mp_reference import reference_routes
from singlehead.runs import reference_seconds
from singlehead.state_evolution import prior_model

FIELDS = ("q", "m", "Sigma", "eta", "delta", "eps", "cutoff", "rank_fraction", "first_moment")


def se_calls(points: int = 24) -> list[tuple[float, float, float]]:
    """The conjugates ``(qhat, mhat, Sigmahat)`` of every prior-side call of the workload's cold points."""
    calls: list[tuple[float, float, float]] = []
    original = Factorized.prior_side

    def record(self, qhat, mhat, Sigmahat, **kw):
        calls.append((qhat, mhat, Sigmahat))
        return original(self, qhat, mhat, Sigmahat, **kw)

    Factorized.prior_side = record
    try:
        for a in np.geomspace(0.05, 4.0, points):
            theory(Problem(T=2, alpha=float(a), noise=0.5, lam=0.01, target=MPTarget(0.5)))
    finally:
        Factorized.prior_side = original
    return calls


def replay(calls, kappa: float, prior, repeat: int) -> tuple[float, np.ndarray]:
    """Best time per call (s) over ``repeat`` passes, and the fields of every call."""
    student, best, out = Factorized(), np.inf, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = [student.prior_side(q, m, S, lam=0.01, kappa=kappa, prior=prior) for q, m, S in calls]
        best = min(best, (time.perf_counter() - t) / len(calls))
    return best, np.array([[float(getattr(s, f)) for f in FIELDS] for s in out])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    calls = se_calls()
    prior = prior_model(Problem(target=MPTarget(0.5)))
    ref_s = reference_seconds()
    print(f"{len(calls)} prior_side calls; reference workload {ref_s:.3f} s")
    print(f"{'case':<22} {'before ms':>10} {'after ms':>9} {'speed-up':>9} {'max rel diff':>13}")
    for kappa in (1.0, 0.5, 0.1):
        with reference_routes():
            t0, v0 = replay(calls, kappa, prior, args.repeat)
        t1, v1 = replay(calls, kappa, prior, args.repeat)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(v0 == v1, 0.0, np.abs(v1 - v0) / np.abs(v0))
        print(
            f"{'kappa = ' + format(kappa, 'g'):<22} {1e3 * t0:>10.3f} {1e3 * t1:>9.3f}"
            f" {t0 / t1:>8.2f}x {rel.max():>13.2e}"
        )
    print(f"reference workload (same run, again): {reference_seconds():.3f} s")


if __name__ == "__main__":
    main()

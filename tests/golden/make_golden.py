"""Write the golden file that pins the library's numbers across refactors.

Run from the repository root: ``python tests/golden/make_golden.py [OUT]`` (default
``tests/golden/golden.json``). ``tests/test_golden.py`` recomputes every entry and compares it
within the tolerance its route allows (see that module). Each theory entry also records the final
residual of its fixed point, from which the test derives that entry's tolerance. The cases span
the channels, the students, ``T``, rank caps, the MP and power-law targets, the simulation route
(float64, small ``d``), AMP, the Bayes baseline, the thresholds and the learned-spectrum law.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from singlehead import MPTarget, PowerLawTarget, Problem

THEORY_CASES: list[dict[str, Any]] = [
    dict(channel="seq2lab", T=2, alpha=0.5, lam=0.01, noise=0.5),
    dict(channel="seq2lab", T=2, alpha=2.0, lam=0.1, noise=0.0),
    dict(channel="seq2lab", T=3, alpha=1.0, lam=0.01, noise=0.1),
    dict(channel="seq2lab", T=2, alpha=1.0, lam=0.01, noise=0.5, kappa=0.5),
    dict(channel="seq2lab", T=2, alpha=1.0, lam=1e-3, noise=0.5, kappa=0.3),
    dict(channel="seq2lab", T=2, alpha=0.5, lam=0.01, noise=0.5, beta=0.5, beta0=1.0),
    dict(channel="seq2lab", T=2, alpha=0.3, lam=1e-3, noise=0.5),
    dict(channel="seq2lab", T=2, alpha=1.0, lam=0.01, noise=0.5, student="direct"),
    dict(channel="seq2lab", T=3, alpha=0.5, lam=0.1, noise=0.0, student="direct"),
    dict(channel="seq2seq", T=2, alpha=0.5, lam=0.01, noise=0.5),
    dict(channel="seq2seq", T=2, alpha=1.5, lam=0.01, noise=0.1, kappa=0.5),
    dict(channel="seq2seq", T=2, alpha=1.0, lam=0.05, noise=0.5, student="direct"),
    dict(channel="linear", T=1, alpha=0.5, lam=0.01, noise=0.1),
    dict(channel="linear", T=1, alpha=2.0, lam=0.1, noise=0.0),
    dict(channel="linear", T=2, alpha=1.0, lam=0.01, noise=0.5),
    dict(channel="linear", T=3, alpha=0.7, lam=0.01, noise=0.5, kappa=0.5),
    dict(channel="linear", T=1, alpha=1.0, lam=0.01, noise=0.1, student="direct"),
    dict(channel="linear", T=2, alpha=0.4, lam=0.1, noise=0.5, student="direct"),
    dict(channel="linear", T=1, alpha=1.0, lam=5.0, noise=0.1),
    dict(channel="seq2lab", T=2, alpha=1.0, lam=3.0, noise=0.5),
    dict(channel="linear", T=1, alpha=1.0, lam=0.05, noise=0.1, target=PowerLawTarget(1.0, "unit_q0")),
    dict(channel="seq2lab", T=2, alpha=1.0, lam=0.01, noise=0.1, target=MPTarget(0.25)),
    dict(channel="linear", T=1, alpha=0.3, lam=1e-4, noise=0.0, target=MPTarget(0.25)),
    dict(channel="seq2lab", T=2, alpha=3.0, lam=0.01, noise=0.5, kappa=0.5, target=MPTarget(1.0)),
]

SIM_CASES: list[dict[str, Any]] = [
    dict(d=16, channel="seq2lab", T=2, alpha=1.0, lam=0.01, noise=0.5),
    dict(d=16, channel="seq2seq", T=2, alpha=1.0, lam=0.01, noise=0.5, kappa=0.5),
    dict(d=16, channel="linear", T=1, alpha=1.0, lam=0.01, noise=0.1),
    dict(d=16, channel="seq2lab", T=3, alpha=0.5, lam=0.05, noise=0.1, student="direct"),
    dict(d=16, channel="linear", T=2, alpha=0.8, lam=0.01, noise=0.5, student="direct"),
]

SPECTRUM_CASES = [0, 3, 4, 13, 22]  # indices into THEORY_CASES (factorized students)
AMP_CASES = [
    dict(d=30, channel="linear", T=1, alpha=1.0, lam=0.05, noise=0.1),
    dict(d=30, channel="seq2lab", T=2, alpha=1.0, lam=0.05, noise=0.1),
]
THRESHOLD_CASES = [
    dict(channel="seq2lab", T=2, noise=0.5),
    dict(channel="linear", T=1, noise=0.1),
    dict(channel="seq2lab", T=3, noise=0.0, target=MPTarget(0.25)),
]
BAYES_CASES = [dict(channel="seq2lab", T=2, alpha=0.1, noise=0.0), dict(channel="linear", T=1, alpha=0.5, noise=0.1)]


def _numbers(d: dict[str, Any]) -> dict[str, float]:
    """The finite-or-nan float fields of a flat record (bools as 0/1)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, bool):
            out[k] = float(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
        elif v is None:
            out[k] = math.nan
    return out


THEORY_KEYS = (
    "test_error",
    "test_error_noisy",
    "train_error",
    "penalty",
    "matrix_error",
    "rank_fraction",
    "converged",
    "q",
    "m",
    "Sigma",
    "qhat",
    "mhat",
    "Sigmahat",
    "eta",
    "delta",
    "eps",
)
SIM_KEYS = (
    "test_error",
    "test_error_noisy",
    "train_error",
    "penalty",
    "matrix_error",
    "rank_fraction",
    "objective",
    "q",
    "m",
    "Q0",
)


def trapezoid_edge_error(x: np.ndarray, rho: np.ndarray, bulks: list[tuple[float, float]]) -> float:
    """Bound on the trapezoid rule's error in the mass and mean of a density that jumps at bulk edges.

    A bulk cut off by the rank cap or the threshold has a density that jumps at its edge, and the
    value at a grid node on the edge is either side of the jump depending on last-bit rounding.
    The trapezoid rule's error from one such edge is at most ``h |rho_inside| / 2`` (``h`` the grid
    interval at the edge, ``rho_inside`` the density at the first node inside the bulk), times
    ``max(1, |x|)`` so that it bounds the mean's error too.
    """
    err = 0.0
    for lo, hi in bulks:
        for edge, step in ((lo, 1), (hi, -1)):
            k = int(np.argmin(np.abs(x - edge)))
            inside = min(max(k + step, 0), len(x) - 1)
            err += 0.5 * abs(x[inside] - x[k]) * abs(rho[inside]) * max(1.0, abs(edge))
    return float(err)


def compute() -> dict[str, Any]:
    from singlehead import bayes_optimal, interpolation_threshold, perfect_recovery_threshold, simulate, theory
    from singlehead.amp import amp
    from singlehead.analysis import learned_spectrum
    from singlehead.sim.simulation import TrainOptions

    out: dict[str, Any] = {"theory": [], "simulation": [], "spectrum": [], "amp": [], "thresholds": [], "bayes": []}
    theory_results = []
    for case in THEORY_CASES:
        p = Problem(**case)
        r = theory(p)
        theory_results.append(r)
        rec = _numbers({**r.to_dict()})
        out["theory"].append(
            {
                "problem": p.to_dict(),
                "residual": float(r.extras["residual"]),
                "values": {k: rec.get(k, math.nan) for k in THEORY_KEYS},
            }
        )
    for case in SIM_CASES:
        p = Problem(**case)
        r = simulate(p, seed=7, options=TrainOptions(precision="float64", n_test=2000))
        rec = _numbers(r.to_dict())
        ev = np.sort(np.asarray(r.extras["eigenvalues"], dtype=float))
        vals = {k: rec.get(k, math.nan) for k in SIM_KEYS}
        vals.update({"eig_max": float(ev[-1]), "eig_min": float(ev[0]), "eig_sum": float(ev.sum())})
        out["simulation"].append({"problem": p.to_dict(), "seed": 7, "values": vals})
    for i in SPECTRUM_CASES:
        p = Problem(**THEORY_CASES[i])
        ls = learned_spectrum(p, theory_results[i])
        x, rho = ls.law.grid, ls.law.density
        vals = {
            "zero_atom": ls.zero_atom,
            "cutoff": ls.cutoff,
            "n_bulks": float(len(ls.bulks)),
            "edge_lo": ls.bulks[0][0] if ls.bulks else math.nan,
            "edge_hi": ls.bulks[-1][1] if ls.bulks else math.nan,
            "mass": float(np.trapezoid(rho, x)),
            "mean": float(np.trapezoid(x * rho, x)),
            "cdf_mid": float(ls.cdf(0.5 * (x[0] + x[-1]))),
        }
        out["spectrum"].append(
            {"problem": p.to_dict(), "trapezoid_error": trapezoid_edge_error(x, rho, ls.bulks), "values": vals}
        )
    for case in AMP_CASES:
        p = Problem(**case)
        r = amp(p, seed=3)
        rec = _numbers(r.to_dict())
        out["amp"].append(
            {
                "problem": p.to_dict(),
                "seed": 3,
                "values": {k: rec.get(k, math.nan) for k in ("test_error", "train_error", "matrix_error", "q", "m")},
            }
        )
    for case in THRESHOLD_CASES:
        p = Problem(**case)
        out["thresholds"].append(
            {
                "problem": p.to_dict(),
                "values": {
                    "alpha_interp": interpolation_threshold(p),
                    "alpha_perf": perfect_recovery_threshold(p.replace(noise=0.0)),
                },
            }
        )
    for case in BAYES_CASES:
        p = Problem(**case)
        r = bayes_optimal(p)
        rec = _numbers(r.to_dict())
        out["bayes"].append(
            {"problem": p.to_dict(), "values": {k: rec.get(k, math.nan) for k in ("test_error", "matrix_error", "q")}}
        )
    return out


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("golden.json")
    path.write_text(json.dumps(compute(), indent=1, sort_keys=True, default=float))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""The library's numbers are pinned by a golden file (``tests/golden/golden.json``).

Every theory point (24, across channels, students, ``T``, rank caps and targets), seeded
simulation (5), AMP run (2), threshold (3), Bayes point (2) and learned-spectrum law (5) is
recomputed and compared to the stored value. A change of a formula, a default or a solver path
shows up here; regenerate the file with ``python tests/golden/make_golden.py`` only when the change
is intended and explained.

Tolerances, by route:

* **Exact values** (seeded simulations and AMP runs in float64, closed-form thresholds, the
  Bayes baseline): ``1e-9`` relative (``1e-12`` absolute for values that are zero), a margin of
  about ``1e6`` ulps for the reordered sums of another BLAS kernel.
* **Iterative fixed points** (the state evolution's theory points and the learned-spectrum laws
  computed from them): the solver stops once one SE step changes ``(q, m, Sigma)`` by less than
  its residual ``r`` (relative; the stopping rule of ``SEOptions.tol``). Rounding that differs
  between machines (OpenBLAS picks its kernels by CPU) can end the iteration at another iterate,
  each within that rule of the fixed point, so a value is only determined to about ``r`` times the
  conditioning of the map near the point. Entries are compared at ``rtol = max(1e-9, 10 r)``, with
  ``r`` the stored point's own final residual (the factor 10 allows for the conditioning of the
  reported quantities). The ``converged`` flag is compared exactly, so a point that stops
  converging fails whatever its residual.
* **Integrals of a learned-spectrum density** (``mass``, ``mean``, ``cdf_mid``) are trapezoid sums
  on the law's grid. Where the density jumps at a bulk edge (a binding rank cap, a threshold), the
  node on the edge takes either side of the jump depending on rounding; each computation is then
  within the trapezoid rule's edge error ``E`` (stored per entry, see
  ``make_golden.trapezoid_edge_error``) of the integral, so two of them agree to ``2 E``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "golden"
sys.path.insert(0, str(HERE))
import make_golden  # noqa: E402

EXACT_RTOL, ATOL = 1e-9, 1e-12
RESIDUAL_FACTOR = 10.0


@pytest.fixture(scope="module")
def fresh():
    return make_golden.compute()


@pytest.fixture(scope="module")
def stored():
    return json.loads((HERE / "golden.json").read_text())


def fixed_point_rtol(residual: float) -> float:
    """Relative tolerance of a value read off a fixed point whose final residual is ``residual``."""
    return max(EXACT_RTOL, RESIDUAL_FACTOR * residual)


def _tolerances(stored: dict, section: str) -> list[float]:
    n = len(stored[section])
    if section == "theory":
        return [fixed_point_rtol(e["residual"]) for e in stored["theory"]]
    if section == "spectrum":
        return [fixed_point_rtol(stored["theory"][i]["residual"]) for i in make_golden.SPECTRUM_CASES]
    return [EXACT_RTOL] * n


INTEGRALS = ("mass", "mean", "cdf_mid")


def _mismatches(fresh_entries: list, stored_entries: list, rtols: list[float], section: str) -> list[str]:
    bad = []
    for i, (a, b) in enumerate(zip(fresh_entries, stored_entries)):
        quad_atol = 2.0 * b.get("trapezoid_error", 0.0)
        assert a["problem"] == b["problem"], f"{section}[{i}]: the case's problem changed"
        for k, want in b["values"].items():
            got = a["values"][k]
            want = math.nan if want is None else want
            if math.isnan(want) and math.isnan(got):
                continue
            rtol = 0.0 if k == "converged" else rtols[i]
            atol = ATOL + (quad_atol if k in INTEGRALS else 0.0)
            if not math.isclose(got, want, rel_tol=rtol, abs_tol=atol):
                bad.append(f"{section}[{i}].{k}: {got!r} != {want!r} (rtol {rtol:.1e})")
    return bad


@pytest.mark.parametrize("section", ["theory", "simulation", "spectrum", "amp", "thresholds", "bayes"])
def test_matches_golden(fresh, stored, section):
    assert len(fresh[section]) == len(stored[section])
    bad = _mismatches(fresh[section], stored[section], _tolerances(stored, section), section)
    assert not bad, "\n".join(bad)


def test_tolerance_can_fail(stored):
    """The comparison rejects a theory value moved by more than its stated tolerance."""
    entry = stored["theory"][0]
    moved = json.loads(json.dumps(entry))
    moved["values"]["test_error"] *= 1 + 2 * fixed_point_rtol(entry["residual"])
    assert _mismatches([moved], [entry], [fixed_point_rtol(entry["residual"])], "theory")
    assert not _mismatches([entry], [entry], [fixed_point_rtol(entry["residual"])], "theory")


def test_stored_residuals_are_those_of_the_solver():
    """Every stored theory point carries the residual its tolerance is derived from."""
    stored = json.loads((HERE / "golden.json").read_text())
    for i, e in enumerate(stored["theory"]):
        r = e["residual"]
        assert math.isfinite(r) and r >= 0, f"theory[{i}]: residual {r!r}"
        if e["values"]["converged"] == 1.0:
            # a converged point met the stopping rule: residual below 10 tol (tol = 1e-6 by default)
            assert r < 1e-5, f"theory[{i}]: converged with residual {r!r}"

"""The multi-head state-evolution numbers against ``tests/golden/multihead_golden.json``.

The file is written by ``tests/golden/make_multihead_golden.py``: softmax problems with several
heads, each solved in a named ansatz (the experimental multi-head state evolution), and the linear
channel's exact single-head reduction. Both are deterministic (fixed quadrature nodes, prior
instances drawn with a fixed seed), so a fresh run reproduces the stored fixed point up to how
exactly the solver locates it.

Tolerances, from the solvers' stopping rules:

* softmax values: the iteration stops once one step changes every overlap by less than
  ``tol = 1e-4`` relative. For a map contracting at rate ``rho`` the distance to the fixed point is
  at most ``step/(1 - rho)``; allowing ``rho <= 0.9`` gives ``10 tol`` relative on the overlaps, and
  the errors, being smooth functions of them, are held to the same (absolute ``10 tol Q0`` for
  entries near 0, such as an unspecialised point's vanishing off-diagonal terms).
* softmax error bars (``*_se``): a jackknife of ``sample_draws`` re-solves, each stopped by the same
  rule, so each leave-one-out point moves by ``10 tol`` relative and the spread between them, the
  error bar, is known to ``10 tol`` of the value it belongs to.
* linear values: the single-head solver's rule (``rtol = max(1e-9, 10 r)`` with ``r`` the stored
  point's own final residual, as ``tests/test_golden.py``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from singlehead import Problem

GOLDEN = Path(__file__).resolve().parent / "golden" / "multihead_golden.json"
sys.path.insert(0, str(GOLDEN.parent))
from make_multihead_golden import CASES, record  # noqa: E402

SOFTMAX_TOL = 1e-4  # the multi-head state evolution's default tol, with which the file was written
SOFTMAX_RTOL = 10 * SOFTMAX_TOL
#: counters, timings and the solver's own path: not part of the prediction
SKIP = {
    "iterations",
    "evaluations",
    "residual",
    "runtime_s",
    "evaluations_all_attempts",
    "coarse_evaluations",
    "prior_sweeps",
    "residual_floor",
    "draw_error_evaluations",
}

STORED = json.loads(GOLDEN.read_text())


def test_golden_file_matches_its_cases():
    assert set(STORED["problems"]) == set(CASES)
    for name, (p, ansatz) in CASES.items():
        assert Problem.from_dict(STORED["problems"][name]["problem"]) == p
        assert STORED["problems"][name]["ansatz"] == ansatz


def _tolerance(name: str, key: str, want: float, ref: dict) -> float:
    q0 = abs(ref.get("Q0") or 1.0)
    if name.startswith("linear"):
        return max(1e-9, 10 * abs(ref["residual"])) * abs(want) + 1e-12
    if key.endswith("_se"):
        base = ref.get(key[:-3].removesuffix("_draws").removesuffix("_quadrature"))
        scale = abs(base) if isinstance(base, float) else abs(want)
        return SOFTMAX_RTOL * (scale + abs(want)) + 1e-12
    return SOFTMAX_RTOL * abs(want) + SOFTMAX_RTOL * q0 * 1e-2


@pytest.mark.parametrize("name", sorted(CASES))
def test_multihead_matches_golden(name):
    ref = STORED["results"][name]
    fresh = record(*CASES[name])
    assert fresh["converged"] is True and ref["converged"] is True
    for key in ("ansatz", "prior", "method"):
        assert fresh.get(key) == ref.get(key), key
    bad = []
    for key, want in ref.items():
        if key in SKIP or isinstance(want, (str, bool)) or want is None:
            continue
        got = fresh.get(key)
        if got is None:
            bad.append(f"{key}: missing")
            continue
        if isinstance(want, list):
            w, g = np.asarray(want, float), np.asarray(got, float)
            tol = SOFTMAX_RTOL * np.abs(w) + SOFTMAX_RTOL * abs(ref.get("Q0") or 1.0) * 1e-1
            if g.shape != w.shape or not np.all(np.abs(g - w) <= tol):
                bad.append(f"{key}: {g.tolist()} vs {w.tolist()}")
            continue
        tol = _tolerance(name, key, want, ref)
        if not (math.isfinite(got) and abs(got - want) <= tol):
            bad.append(f"{key}: {got!r} vs {want!r} (tol {tol:.2e})")
    assert not bad, f"{name}: " + "; ".join(bad)

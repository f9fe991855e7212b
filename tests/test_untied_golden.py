"""The untied student's state-evolution numbers against ``tests/golden/untied_golden.json``.

The file is written by ``tests/golden/make_untied_golden.py`` (``theory(problem)`` for four untied
problems with the default options). The untied theory is deterministic: its prior side averages
over instances drawn with a fixed seed and its output side uses fixed quadrature nodes, so a fresh
run reproduces the stored fixed point up to how exactly the solver locates it.

Tolerances, from the solver's stopping rule:

* values (overlaps, conjugates, errors, rank fraction): the solve stops when one step of the map
  changes every overlap by less than ``tol = 1e-6`` relative (absolute ``1e-3 Q0 tol`` for overlaps
  near 0). For a map contracting at rate ``rho`` the distance to the fixed point is at most
  ``step/(1 - rho)``; allowing ``rho <= 0.99`` gives ``100 tol`` relative, ``1e-7 Q0`` absolute
  (``Q0 = Q0_s + Q0_a``, order 1 here). Every stored value also carries an error bar (``*_se``, the
  output quadrature's and the prior draws' standard errors), which is 10 to 10^4 times wider: a
  value within this tolerance is a fortiori within its stated error.
* error bars: the draw part is the linear response of the fixed point to each instance, from the
  map's Jacobian at the fixed point (which moves by ``100 tol`` relative): forward differences of the
  output side (relative step ``1e-3``) composed with the prior side's tangent (conjugate gradients to
  ``1e-4`` relative), ``1e-3`` of the bar; the bars are at most a few per cent of their values here,
  so ``4e-3 |value|`` bounds both; quadrature-only error bars to ``100 tol`` relative. The degrees of
  freedom of the bars (``draws_dof``, a ratio of their variances) to ``4e-3`` relative likewise.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from singlehead import Problem

GOLDEN = Path(__file__).resolve().parent / "golden" / "untied_golden.json"
sys.path.insert(0, str(GOLDEN.parent))
from make_untied_golden import PROBLEMS, record  # noqa: E402

TOL = 1e-6  # the default SEOptions / untied tolerance the golden values were solved with
VALUE_RTOL, VALUE_ATOL = 100 * TOL, 100 * TOL * 1e-3
DRAW_SE_RTOL = 4e-3  # relative to the value the error bar belongs to
#: counters and the solver's own path: not part of the prediction
SKIP = {"iterations", "evaluations", "residual", "runtime_s", "evaluations_all_attempts"}

STORED = json.loads(GOLDEN.read_text())


def test_golden_file_matches_its_problems():
    # the script's problems and the stored file describe the same tasks
    assert set(STORED["problems"]) == set(PROBLEMS)
    for name, p in PROBLEMS.items():
        assert Problem.from_dict(STORED["problems"][name]) == p


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_untied_matches_golden(name):
    ref = STORED["results"][name]
    fresh = record(PROBLEMS[name])
    assert fresh["converged"] is True and ref["converged"] is True
    assert fresh["prior"] == ref["prior"]
    bad = []
    for key, want in ref.items():
        if key in SKIP or isinstance(want, (str, bool)) or want is None:
            continue
        got = fresh.get(key)
        if got is None:
            bad.append(f"{key}: missing")
            continue
        if key == "draws_dof":
            tol = DRAW_SE_RTOL * abs(want)
        elif key.endswith("_se"):
            base = key[:-3].removesuffix("_draws").removesuffix("_quadrature")
            scale = abs(ref.get(base, 0.0) or 0.0) if isinstance(ref.get(base), float) else 0.0
            tol = DRAW_SE_RTOL * scale + VALUE_RTOL * abs(want) + VALUE_ATOL
        else:
            tol = VALUE_RTOL * abs(want) + VALUE_ATOL
        if not (math.isfinite(got) and abs(got - want) <= tol):
            bad.append(f"{key}: {got!r} vs {want!r} (tol {tol:.2e})")
    assert not bad, f"{name}: " + "; ".join(bad)

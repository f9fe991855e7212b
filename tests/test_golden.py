"""The library's numbers are pinned by a golden file (``tests/golden/golden.json``).

Every theory point (24, across channels, students, ``T``, rank caps and targets), seeded
simulation (5), AMP run (2), threshold (3), Bayes point (2) and learned-spectrum law (5) is
recomputed and compared to 1e-9 relative (1e-12 absolute for values that are zero). A change
of a formula, a default or a solver path shows up here; regenerate the file with
``python tests/golden/make_golden.py`` only when the change is intended and explained.
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

RTOL, ATOL = 1e-9, 1e-12


@pytest.fixture(scope="module")
def fresh():
    return make_golden.compute()


@pytest.fixture(scope="module")
def stored():
    return json.loads((HERE / "golden.json").read_text())


@pytest.mark.parametrize("section", ["theory", "simulation", "spectrum", "amp", "thresholds", "bayes"])
def test_matches_golden(fresh, stored, section):
    assert len(fresh[section]) == len(stored[section])
    bad = []
    for i, (a, b) in enumerate(zip(fresh[section], stored[section])):
        assert a["problem"] == b["problem"], f"{section}[{i}]: the case's problem changed"
        for k, want in b["values"].items():
            got = a["values"][k]
            want = math.nan if want is None else want
            if math.isnan(want) and math.isnan(got):
                continue
            if not math.isclose(got, want, rel_tol=RTOL, abs_tol=ATOL):
                bad.append(f"{section}[{i}].{k}: {got!r} != {want!r}")
    assert not bad, "\n".join(bad)

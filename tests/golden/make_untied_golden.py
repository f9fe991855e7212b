"""Capture the untied student's state-evolution numbers (``tests/golden/untied_golden.json``).

``python tests/golden/make_untied_golden.py`` recomputes ``theory(problem)`` for the problems of
:data:`PROBLEMS` (each a few seconds) and writes every scalar the result reports (the standard
fields and ``extras``, with their ``*_se`` error bars). ``tests/test_untied_golden.py`` compares
fresh values to this file.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from singlehead import Problem, theory
from singlehead.model.targets import MPTarget, UntiedMPTarget

HERE = Path(__file__).resolve().parent
OUT = HERE / "untied_golden.json"

#: name -> Problem; all with the untied student
PROBLEMS: dict[str, Problem] = {
    # a tied teacher at large lam: the untied fixed point equals the tied one
    "linear_T2_lam6": Problem(
        d=100, T=2, channel="linear", alpha=1.0, noise=0.5, lam=6.0, student="untied", target=MPTarget(kappa0=0.5)
    ),
    "seq2lab_T2_alpha0.5": Problem(d=100, T=2, channel="seq2lab", alpha=0.5, noise=0.5, lam=1e-2, student="untied"),
    "seq2lab_T2_alpha1": Problem(d=100, T=2, channel="seq2lab", alpha=1.0, noise=0.5, lam=1e-2, student="untied"),
    "linear_T2_untied_teacher": Problem(
        d=100, T=2, channel="linear", alpha=1.0, noise=0.5, lam=0.1, student="untied", target=UntiedMPTarget(kappa0=0.5)
    ),
}

_STANDARD = (
    "test_error",
    "test_error_noisy",
    "train_error",
    "penalty",
    "matrix_error",
    "rank_fraction",
    "converged",
    "iterations",
)


def _scalar(v: Any) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        v = float(v)
        return v if math.isfinite(v) else repr(v)
    return None


def record(problem: Problem) -> dict[str, Any]:
    """Every scalar field of ``theory(problem)`` (lists and dicts in ``extras`` are left out)."""
    r = theory(problem)
    rec = {k: _scalar(getattr(r, k)) for k in _STANDARD}
    for k, v in sorted(r.extras.items()):
        s = _scalar(v)
        if s is not None or v is None:
            rec[k] = s
    return rec


def main() -> None:
    data = {
        "problems": {name: p.to_dict() for name, p in PROBLEMS.items()},
        "results": {name: record(p) for name, p in PROBLEMS.items()},
    }
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()

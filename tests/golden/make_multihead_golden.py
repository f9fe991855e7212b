"""Capture the multi-head state-evolution numbers (``tests/golden/multihead_golden.json``).

``python tests/golden/make_multihead_golden.py`` recomputes ``theory(problem, options=...)`` for the
problems of :data:`CASES` and writes every scalar the result reports, with the per-head overlap
matrices. Each softmax case names its ansatz explicitly, so the record pins one fixed point of the
map whatever the default choice among them; the linear cases use the default options.
``tests/test_multihead_golden.py`` compares fresh values to this file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from singlehead import MPTarget, Problem, theory
from singlehead.state_evolution import SEOptions

HERE = Path(__file__).resolve().parent
OUT = HERE / "multihead_golden.json"

_BASE = dict(T=2, alpha=1.0, noise=0.5, lam=0.01, target=MPTarget(kappa0=0.5))

#: name -> (problem, ansatz or None for the options' default)
CASES: dict[str, tuple[Problem, str | None]] = {
    "seq2lab_H2_H02_unspecialised": (Problem(**_BASE, heads=2, teacher_heads=2), "unspecialised"),
    "seq2lab_H2_H02_alpha2.5_general": (Problem(**{**_BASE, "alpha": 2.5}, heads=2, teacher_heads=2), "general"),
    "seq2lab_H2_H02_alpha2.5_unspecialised": (
        Problem(**{**_BASE, "alpha": 2.5}, heads=2, teacher_heads=2),
        "unspecialised",
    ),
    "seq2lab_H2_H03_general": (Problem(**{**_BASE, "lam": 0.1}, heads=2, teacher_heads=3), "general"),
    "seq2lab_H2_H01_general": (Problem(**{**_BASE, "alpha": 0.5}, heads=2, teacher_heads=1), "general"),
    "linear_H2_H02": (Problem(**{**_BASE, "channel": "linear"}, heads=2, teacher_heads=2), None),
    "linear_H3_H01": (Problem(**{**_BASE, "channel": "linear", "kappa": 0.25}, heads=3, teacher_heads=1), None),
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
#: per-head matrices recorded as nested lists
_MATRICES = ("head_Q", "head_M", "head_Sigma", "head_Q0")


def _scalar(v: Any) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float, np.floating, np.integer)):
        v = float(v)
        return v if math.isfinite(v) else repr(v)
    return None


def solve(problem: Problem, ansatz: str | None):
    """The theory result of one case (softmax channels with the ansatz given explicitly)."""
    if problem.channel.name == "linear" or ansatz is None:
        return theory(problem)
    return theory(problem, options=SEOptions(ansatz=ansatz))


def record(problem: Problem, ansatz: str | None) -> dict[str, Any]:
    """Every scalar field of the case's result, and its per-head matrices."""
    r = solve(problem, ansatz)
    rec = {k: _scalar(getattr(r, k)) for k in _STANDARD}
    for k, v in sorted(r.extras.items()):
        if k in _MATRICES:
            rec[k] = np.asarray(v, float).tolist()
            continue
        s = _scalar(v)
        if s is not None or v is None:
            rec[k] = s
    return rec


def main() -> None:
    data = {
        "problems": {name: {"problem": p.to_dict(), "ansatz": a} for name, (p, a) in CASES.items()},
        "results": {name: record(p, a) for name, (p, a) in CASES.items()},
    }
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

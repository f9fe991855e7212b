"""Unconverged SE points on fresh random grids of valid problems, and what they are.

``random_problems(n, seed)`` (:func:`singlehead.runs.random_problems`, with seeds the test suite does
not use) is solved by :func:`singlehead.theory`
with one thread. For each unconverged point the fixed point is followed by continuation in ``lam`` from
``1e-2`` (where the SE converges) down to the point's ``lam`` (:func:`theory_curve` over ``lam``), with the
RS check (:func:`stability`: smooth replicon, prox-jump share, binding rank cap) along the path:

* the continuation converges at the point's ``lam``: "converged by continuation" (the solver's miss);
* it does not, and the last converged point of the path fails the RS check (replicon > 1, a binding rank
  cap, or a prox-jump share above 3 standard errors): "no stable RS fixed point" with that diagnostic;
* otherwise: "unresolved".
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from singlehead import Problem
from singlehead.runs import Cache, cached, random_problems

__all__ = ["solve_grid_point", "classify", "run_grid", "grid_section"]


def solve_grid_point(p: Problem) -> dict[str, Any]:
    """``theory(p)``: converged flag, residual, test error, wall time."""
    from singlehead import theory

    t0 = time.perf_counter()
    r = theory(p)
    return {
        "converged": bool(r.converged),
        "residual": float(r.extras.get("residual", math.nan)),
        "test_error": float(r.test_error),
        "runtime_s": time.perf_counter() - t0,
    }


def _rs_check(p: Problem, r) -> dict[str, Any]:
    from singlehead import stability

    try:
        st = stability(p, r)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError) as exc:
        return {"replicon": math.nan, "jump_weight": math.nan, "jump_weight_err": math.nan, "error": str(exc)}
    return {
        "replicon": float(st.replicon),
        "jump_weight": float(st.prox_jump_share),
        "jump_weight_err": float(st.prox_jump_share_se),
        "cap_binds": bool(r.extras.get("cap_binds", False)),
    }


def classify(p: Problem, points: int = 9) -> dict[str, Any]:
    """Continuation in ``lam`` from 1e-2 to ``p.lam`` with the RS check along it (see the module docstring)."""
    from singlehead import theory_curve

    lam0 = max(1e-2, 10 * p.lam)
    lams = [float(x) for x in np.geomspace(lam0, p.lam, points)]
    res = theory_curve(p.replace(lam=lams[0]), lams, param="lam")
    path = []
    for lam, r in zip(lams, res):
        row = {
            "lam": lam,
            "converged": bool(r.converged),
            "residual": float(r.extras.get("residual", math.nan)),
            "test_error": float(r.test_error),
        }
        if r.converged:
            row |= _rs_check(p.replace(lam=lam), r)
        path.append(row)
    if path[-1]["converged"]:
        verdict = f"converged by continuation (test error {path[-1]['test_error']:.4f})"
    else:
        conv = [row for row in path if row["converged"]]
        last = conv[-1] if conv else None
        if last is None:
            verdict = "unresolved: no converged point on the continuation path"
        elif (
            last.get("cap_binds")
            or last["replicon"] > 1
            or (last["jump_weight"] > 3 * max(last["jump_weight_err"], 1e-12))
        ):
            verdict = (
                f"no stable RS fixed point: at lam = {last['lam']:.2g} (last converged) replicon "
                f"{last['replicon']:.2f}, cap binds {bool(last.get('cap_binds'))}, jump share "
                f"{100 * last['jump_weight']:.1f} ± {100 * last['jump_weight_err']:.1f} %"
            )
        else:
            verdict = (
                f"unresolved: last converged lam = {last['lam']:.2g} passes the RS check (replicon "
                f"{last['replicon']:.2f}, jump share {100 * last['jump_weight']:.1f} %)"
            )
    return {"path": path, "verdict": verdict}


def run_grid(cache: Cache, seeds: tuple[int, ...], n: int, cached_only: bool = False) -> list[dict]:
    """SE on each grid problem; continuation + RS check on the unconverged ones. Returns the unconverged rows."""
    rows = []
    for seed in seeds:
        for i, p in enumerate(random_problems(n, seed)):
            key = {"stage": "grid", "seed": seed, "i": i, "problem": p.to_dict()}
            rec = cached(cache, key, None if cached_only else lambda: solve_grid_point(p))
            if rec is None:
                continue
            row = {"seed": seed, "i": i, "problem": p, **rec}
            if not rec["converged"]:
                ckey = {"stage": "grid-classify", "problem": p.to_dict()}
                row["class"] = cached(cache, ckey, None if cached_only else lambda: classify(p))
                if not cached_only:
                    print(
                        f"grid {seed}/{i}: unconverged (residual {rec['residual']:.1e}): {row['class']['verdict']}",
                        flush=True,
                    )
            rows.append(row)
    return rows


def grid_section(cache: Cache, seeds: tuple[int, ...], n: int) -> list[str]:
    """Markdown: the unconverged rate and each unconverged point's verdict (from the cache)."""
    rows = run_grid(cache, seeds, n, cached_only=True)
    if not rows:
        return []
    bad = [r for r in rows if not r["converged"]]
    lines = [
        f"## Unconverged SE on fresh random grids (seeds {', '.join(map(str, seeds))}, "
        f"`random_problems({n}, seed)`, one thread)",
        "",
        f"{len(bad)} of {len(rows)} unconverged ({100 * len(bad) / len(rows):.1f} %); median SE time "
        f"{np.median([r['runtime_s'] for r in rows]):.2f} s.",
        "",
        "| seed/i | problem | residual | verdict |",
        "|---|---|---|---|",
    ]
    for r in bad:
        p = r["problem"]
        desc = (
            f"{p.channel} T={p.T} {p.student} kappa={p.kappa:g} alpha={p.alpha:.3g} lam={p.lam:.2g} "
            f"noise={p.noise:g} beta={p.beta:g} beta0={p.beta0:g}"
        )
        verdict = r["class"]["verdict"] if r.get("class") else "(not classified)"
        lines.append(f"| {r['seed']}/{r['i']} | {desc} | {r['residual']:.1e} | {verdict} |")
    return lines + [""]

"""Convergence of the untied state evolution in the prior sample size ``D`` (issue 27, item 2).

The prior side of the untied SE (weighted nuclear-norm denoising, no closed form when
``Sigmahat_s != Sigmahat_a``) is averaged over sampled ``D x D`` instances. This script solves
three seq2lab ``T = 2`` points at ``D = 50, 100, 200`` (16, 8, 4 draws: the same ``D x draws``
budget), with the per-draw standard error, fits ``value(D) = v_inf + b/D`` by weighted least
squares, and writes ``validation/results/untied_prior_convergence.md``: the bias at each ``D``
(``b/D``) beside the sampling error tells which ``D`` the library's default may use.

Usage: ``python validation/untied_prior_convergence.py`` (about 10 minutes on 2 cores, 1 thread).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from singlehead import Problem
from singlehead.state_evolution.untied import UntiedSEOptions, untied_theory

POINTS = [dict(alpha=1.0, lam=1e-2), dict(alpha=0.3, lam=1e-2), dict(alpha=2.0, lam=1e-1)]
SIZES = [(50, 16), (100, 8), (200, 4)]
METRICS = ("test_error", "train_error", "asymmetry")
OUT = Path(__file__).parent / "results"


def main() -> None:
    OUT.mkdir(exist_ok=True)
    rows = []
    cache = OUT / "untied_prior_convergence.json"
    done = json.loads(cache.read_text()) if cache.exists() else []
    for pt in POINTS:
        p = Problem(d=100, T=2, channel="seq2lab", noise=0.5, student="untied", **pt)
        for D, draws in SIZES:
            key = f"{pt}-{D}"
            hit = [r for r in done if r["key"] == key]
            if hit:
                rows.append(hit[0])
                continue
            t = time.perf_counter()
            u = untied_theory(p, options=UntiedSEOptions(D=D, draws=draws))
            row = dict(key=key, **pt, D=D, draws=draws, seconds=time.perf_counter() - t, converged=u.converged,
                       **{m: getattr(u, m) for m in METRICS}, **{f"{m}_se": u.se.get(m, np.nan) for m in METRICS})
            rows.append(row)
            done.append(row)
            cache.write_text(json.dumps(done, indent=1))  # nothing lost when interrupted
            print(row, flush=True)
    lines = ["# Untied SE: convergence in the prior sample size D", "",
             "seq2lab, T = 2, noise 0.5, MP teacher kappa0 = 0.5, kappa = 1. Per D: value +- draw s.e.; "
             "fit v(D) = v_inf + b/D (weighted least squares); bias(D) = b/D.", "",
             "| alpha | lam | metric | D=50 | D=100 | D=200 | v_inf | bias at D=100 | bias at D=200 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for pt in POINTS:
        sel = [r for r in rows if r["alpha"] == pt["alpha"] and r["lam"] == pt["lam"]]
        for m in METRICS:
            D = np.array([r["D"] for r in sel], float)
            v = np.array([r[m] for r in sel])
            se = np.maximum(np.array([r[f"{m}_se"] for r in sel]), 1e-12)
            A = np.stack([np.ones_like(D), 1 / D], axis=1) / se[:, None]
            (vinf, b), *_ = np.linalg.lstsq(A, v / se, rcond=None)
            cells = " | ".join(f"{x:.5f} +- {s:.5f}" for x, s in zip(v, se))
            lines.append(f"| {pt['alpha']} | {pt['lam']} | {m} | {cells} | {vinf:.5f} | {b / 100:+.5f} | {b / 200:+.5f} |")
    secs = {D: np.mean([r["seconds"] for r in rows if r["D"] == D]) for D, _ in SIZES}
    lines += ["", "Mean seconds per point (with per-draw error bars): "
              + ", ".join(f"D={D}: {s:.1f}" for D, s in secs.items())]
    (OUT / "untied_prior_convergence.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())

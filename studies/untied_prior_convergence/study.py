"""Convergence of the untied state evolution in the prior sample size ``D`` (README.md).

The prior side of the untied SE (weighted nuclear-norm denoising, no closed form when
``Sigmahat_s != Sigmahat_a``) is averaged over sampled ``D x D`` instances. This study solves
three seq2lab ``T = 2`` points at ``D = 50, 100, 200`` (16, 8, 4 draws: the same ``D x draws``
budget), with the per-draw standard error, fits ``value(D) = v_inf + b/D`` by weighted least
squares, and writes ``results/untied_prior_convergence.md`` (and the rows as ``.json``): the bias
at each ``D`` (``b/D``) beside the sampling error tells which ``D`` the library's default may use.
Each solved point is cached in the result cache. ``--quick``: one point at ``D = 20, 30, 40``
with 2 draws, written to the cache directory.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from singlehead import Problem, SEOptions, theory
from singlehead.runs import Cache, cached
from studies import study_parser

HERE = Path(__file__).resolve().parent

POINTS = [dict(alpha=1.0, lam=1e-2), dict(alpha=0.3, lam=1e-2), dict(alpha=2.0, lam=1e-1)]
SIZES = [(50, 16), (100, 8), (200, 4)]
METRICS = ("test_error", "train_error", "asymmetry")
RESULTS = HERE / "results"


def main(quick: bool = False, *, cache: str | Path | None = None) -> int:
    """Solve every (point, D), write the table and the rows into ``results/`` (the cache directory with
    ``quick``); 0."""
    points, sizes = (POINTS[:1], [(20, 2), (30, 2), (40, 2)]) if quick else (POINTS, SIZES)
    root = Path(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    store = Cache(root)
    out = root if quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for pt in points:
        p = Problem(d=100, T=2, channel="seq2lab", noise=0.5, student="untied", **pt)
        for D, draws in sizes:

            def solve() -> dict:
                t = time.perf_counter()
                # the raw instances' convergence in D: without the 1/D extrapolation
                u = theory(p, options=SEOptions(sample_dim=D, sample_draws=draws, sample_extrapolate=False))
                value = {m: u.extras[m] if m == "asymmetry" else getattr(u, m) for m in METRICS}
                row = dict(
                    key=f"{pt}-{D}",
                    **pt,
                    D=D,
                    draws=draws,
                    seconds=time.perf_counter() - t,
                    converged=u.converged,
                    **value,
                    **{f"{m}_se": u.extras.get(f"{m}_se", np.nan) for m in METRICS},
                )
                print(row, flush=True)
                return row

            rows.append(
                cached(store, {"stage": "untied-prior-D", "problem": p.to_dict(), "D": D, "draws": draws}, solve)
            )
    lines = [
        "# Untied SE: convergence in the prior sample size D",
        "",
        "seq2lab, T = 2, noise 0.5, MP teacher kappa0 = 0.5, kappa = 1. Per D: value +- draw s.e.; "
        "fit v(D) = v_inf + b/D (weighted least squares); bias(D) = b/D.",
        "",
        "| alpha | lam | metric | "
        + " | ".join(f"D={D}" for D, _ in sizes)
        + " | v_inf | bias at D=100 | bias at D=200 |",
        "|---|---|---|" + "---|" * len(sizes) + "---|---|---|",
    ]
    for pt in points:
        sel = [r for r in rows if r["alpha"] == pt["alpha"] and r["lam"] == pt["lam"]]
        for m in METRICS:
            D = np.array([r["D"] for r in sel], float)
            v = np.array([r[m] for r in sel])
            se = np.maximum(np.array([r[f"{m}_se"] for r in sel]), 1e-12)
            A = np.stack([np.ones_like(D), 1 / D], axis=1) / se[:, None]
            (vinf, b), *_ = np.linalg.lstsq(A, v / se, rcond=None)
            cells = " | ".join(f"{x:.5f} +- {s:.5f}" for x, s in zip(v, se))
            lines.append(
                f"| {pt['alpha']} | {pt['lam']} | {m} | {cells} | {vinf:.5f} | {b / 100:+.5f} | {b / 200:+.5f} |"
            )
    secs = {D: np.mean([r["seconds"] for r in rows if r["D"] == D]) for D, _ in sizes}
    lines += [
        "",
        "Mean seconds per point (with per-draw error bars): " + ", ".join(f"D={D}: {s:.1f}" for D, s in secs.items()),
    ]
    (out / "untied_prior_convergence.json").write_text(json.dumps(rows, indent=1))
    (out / "untied_prior_convergence.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="one point at D = 20, 30, 40 with 2 draws; writes no results")
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/untied_prior_convergence)")
    a = ap.parse_args(argv)
    return main(a.quick, cache=a.cache)


if __name__ == "__main__":
    raise SystemExit(cli())

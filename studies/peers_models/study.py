"""The peers' models against ERM: extensive-rank MP targets (kappa0 > 1) and the hardmax channel (README.md).

Eight points per feature, each judged like a report figure (``singlehead.report.verdict.judge``:
declared tolerance, difference test and equivalence test at 5 %, Holm over the feature's points).

* extensive rank: seq2lab, factorized student, MP target kappa0 in {1.5, 2}, T in {2, 3},
  alpha in {0.5, 2}, noise 0.5, lam 0.01;
* hardmax: factorized student, MP target kappa0 = 0.5, T in {2, 3}, alpha in {0.5, 2},
  lam in {0.01, 0.05}, noise 0.5.

Theory: ``singlehead.theory`` (converged). ERM: ``singlehead.simulate`` at two sizes ``d1 < d2``
with ``seeds`` seeds each (n_test 4000); the seed means are extrapolated linearly in ``1/d`` to
``d = inf`` (``y_inf = w y_d2 - (w - 1) y_d1``, ``w = d2/(d2 - d1)``) with the standard error
propagated from the seeds' spread (normal law). A point whose state evolution does not converge (its
diagnosis is shown) is outside both Holm families and inconclusive. Tolerance: 3 % of the theory, floor 0.005 (the
finite-size correction left after a two-size extrapolation). ``--quick``: d = 20/40, 2 seeds, the
first two points of each feature; nothing written to results/.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from singlehead import MPTarget, Problem, theory
from singlehead.report.verdict import judge, tally
from singlehead.runs import Cache, Job, run_jobs
from studies import echo_into, study_parser, write_table

HERE = Path(__file__).resolve().parent
TOL_REL, TOL_ABS = 0.03, 0.005


def points() -> dict[str, list[Problem]]:
    """The eight problems of each feature (``d`` set later)."""
    rank = [Problem(T=T, alpha=a, channel="seq2lab", noise=0.5, lam=0.01, target=MPTarget(k0))
            for k0 in (1.5, 2.0) for T in (2, 3) for a in (0.5, 2.0)]
    hard = [Problem(T=T, alpha=a, channel="hardmax", noise=0.5, lam=lam, target=MPTarget(0.5))
            for T in (2, 3) for a in (0.5, 2.0) for lam in (0.01, 0.05)]
    return {"extensive rank (kappa0 > 1)": rank, "hardmax channel": hard}


def main(quick: bool = False, *, sizes: tuple[int, int] = (40, 80), seeds: int = 4, jobs: int = 1,
         cache: str | Path | None = None) -> int:
    """Run both features and print their tables (written to ``results/table.md`` unless ``quick``)."""
    if quick:
        sizes, seeds = (20, 40), 2
    store = Cache(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    lines: list[str] = []
    say = echo_into(lines)
    d1, d2 = sizes
    w = d2 / (d2 - d1)
    say(f"ERM (d = {d1}, {d2}; {seeds} seeds; extrapolated in 1/d) against the state evolution; tolerance "
        f"max({100 * TOL_REL:g} % of the theory, {TOL_ABS}); verdicts by difference and equivalence tests, Holm per "
        "feature")
    for feature, probs in points().items():
        probs = probs[:2] if quick else probs
        say("")
        say(f"## {feature}")
        say("")
        say("| T | alpha | lam | kappa0 | channel | theory | SE status | ERM d=inf | s.e. | gap/theory | verdict |")
        say("|---" * 11 + "|")
        jobs_ = [Job("simulation", p.replace(d=d), s, (("n_test", 4000),)) for p in probs for d in sizes
                 for s in range(seeds)]
        recs = run_jobs(jobs_, store, n_jobs=jobs, desc=feature)
        err = np.array([r["test_error"] for r in recs]).reshape(len(probs), 2, seeds)
        rows = []
        for p, e in zip(probs, err):
            th = theory(p.replace(d=d2))
            means, ses = e.mean(axis=1), e.std(axis=1, ddof=1) / math.sqrt(seeds)
            y_inf = w * means[1] - (w - 1) * means[0]
            se = math.hypot(w * ses[1], (w - 1) * ses[0])
            rows.append(dict(T=p.T, alpha=p.alpha, lam=p.lam, kappa0=p.target.kappa0, channel=p.channel.name,
                             theory=th.test_error, sim=y_inf, se=se, gap=abs(y_inf - th.test_error),
                             theory_converged=th.converged, tol_rel=TOL_REL, tol_abs=TOL_ABS,
                             status="converged" if th.converged else f"unconverged: {th.diagnosis}"))
        judged = judge(pd.DataFrame(rows))
        for r in judged.itertuples():
            say(f"| {r.T} | {r.alpha:g} | {r.lam:g} | {r.kappa0:g} | {r.channel} | {r.theory:.4f} | {r.status} | {r.sim:.4f} | "
                f"{r.se:.4f} | {100 * r.gap / abs(r.theory):.1f} % | {r.verdict} |")
        t = tally(judged)
        say("")
        say(f"{feature}: {t['agrees']} agree, {t['deviates']} deviate, {t['explained']} deviate (explained), "
            f"{t['inconclusive']} inconclusive of {t['n']}")
    if not quick:
        write_table(HERE, lines)
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 20/40, 2 seeds, 2 points per feature; writes no results")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=1, help="parallel worker processes")
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/peers_models)")
    a = ap.parse_args(argv)
    return main(a.quick, seeds=a.seeds, jobs=a.jobs, cache=a.cache)


if __name__ == "__main__":
    raise SystemExit(cli())

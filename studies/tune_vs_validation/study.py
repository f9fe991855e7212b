"""The theory's best weight decay against the one a validation set picks in ERM (README.md).

T = 2, MP target kappa0 = 0.5, noise 0.5, seq2lab, factorized student (kappa = 1), alpha in
{0.5, 1, 2}. Theory: ``singlehead.tune`` (lam* and its predicted test error). ERM: d = 100, 3
seeds, L-BFGS, on the grid lam* x 10^(k/3), k = -3..3; each run's test error on its fresh
10 000-sequence test set plays the validation error. Picked lam: the grid minimum refined by a
parabola in log10 lam through it and its two neighbours (``singlehead.analysis.validation_pick``),
per seed and for the mean over seeds. Reported: lam*, the picked lams, their ratio to lam*, and the theory's error at
the picked lam
(its excess over err* says how much the difference matters). ``--quick``: d = 40, 2 seeds,
alpha in {1}.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from singlehead import MPTarget, Problem, theory, tune
from singlehead.analysis import validation_pick
from singlehead.runs import Cache, Job, run_jobs
from studies import echo_into, study_parser, write_table

HERE = Path(__file__).resolve().parent
OFFSETS = np.arange(-3, 4) / 3.0  # log10(lam / lam*) of the ERM grid


def pick(logs: np.ndarray, errs: np.ndarray) -> float:
    """log10 of the lam the validation curve ``errs`` on the grid ``10^logs`` picks (``validation_pick``)."""
    return math.log10(validation_pick(10.0**logs, errs))


def main(
    quick: bool = False,
    *,
    d: int = 100,
    seeds: int = 3,
    alphas: tuple[float, ...] = (0.5, 1.0, 2.0),
    T: int = 2,
    kappa0: float = 0.5,
    noise: float = 0.5,
    channel: str = "seq2lab",
    jobs: int = 1,
    cache: str | Path | None = None,
) -> int:
    """Run the comparison and print the table (written to ``results/table.md`` unless ``quick``)."""
    if quick:
        d, seeds, alphas = 40, 2, (1.0,)
    store = Cache(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    lines: list[str] = []
    say = echo_into(lines)
    say(
        f"Theory lam* vs validation-picked lam in ERM: T={T} channel={channel} kappa0={kappa0} Delta={noise} "
        f"factorized kappa=1, d={d}, {seeds} seeds, ERM grid lam* x 10^(k/3), k=-3..3"
    )
    say("")
    say(
        "| alpha | lam* (theory) | err* (theory) | lam (mean val. curve) | ratio | theory err there | "
        "lam per seed (val.) | ratios per seed | sim err at lam* ± se |"
    )
    say("|---" * 9 + "|")
    for a in alphas:
        base = Problem(d=d, T=T, alpha=a, channel=channel, noise=noise, target=MPTarget(kappa0))
        best = tune(base)
        lam_star = best.lam
        logs = math.log10(lam_star) + OFFSETS
        problems = [base.replace(lam=float(10.0**x)) for x in logs]
        recs = run_jobs(
            [Job("simulation", p, s, (("n_test", 10000),)) for p in problems for s in range(seeds)],
            store,
            n_jobs=jobs,
            desc=f"ERM alpha={a:g}",
        )
        err = np.array([r["test_error"] for r in recs]).reshape(len(logs), seeds)  # (lam, seed)
        per_seed = [pick(logs, err[:, s]) for s in range(seeds)]
        mean_pick = pick(logs, err.mean(axis=1))
        lam_mean = 10.0**mean_pick
        th_there = theory(base.replace(lam=lam_mean)).test_error
        at_star = err[3]
        se = float(at_star.std(ddof=1) / math.sqrt(seeds)) if seeds > 1 else math.nan
        say(
            f"| {a:g} | {lam_star:.4g} | {best.test_error:.5f} | {lam_mean:.4g} | {lam_mean / lam_star:.2f} | "
            f"{th_there:.5f} | {', '.join(f'{10**x:.3g}' for x in per_seed)} | "
            f"{', '.join(f'{10**x / lam_star:.2f}' for x in per_seed)} | {at_star.mean():.5f} ± {se:.5f} |"
        )
    if not quick:
        write_table(HERE, lines)
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 40, 2 seeds, alpha = 1; writes no results")
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--alphas", default="0.5,1,2")
    ap.add_argument("--jobs", type=int, default=1, help="parallel worker processes")
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/tune_vs_validation)")
    a = ap.parse_args(argv)
    return main(
        a.quick, d=a.d, seeds=a.seeds, alphas=tuple(float(x) for x in a.alphas.split(",")), jobs=a.jobs, cache=a.cache
    )


if __name__ == "__main__":
    raise SystemExit(cli())

"""State evolution against ERM simulations: test and matrix errors, three students (README.md).

T = 2, MP target kappa0 = 0.5, Delta = 0.5, lam = 0.01, beta = beta0 = 1, seq2lab, alpha in
{0.1, 0.25, 0.5, 1, 2}, d = 100, 8 seeds, for the factorized student with kappa = 1 and 0.75 and
the direct student. A row passes when ``|simulation mean - theory| <= 2 standard errors + rel_tol
* |theory|`` (rel_tol = 3 %) for the test error and for the matrix error. ``--quick``: d = 40,
3 seeds, alpha in {0.25, 1}, the kappa = 1 student.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from singlehead import MPTarget, Problem
from singlehead.report.compare import agreement, records_to_frame
from singlehead.runs import Cache, Job, run_jobs
from studies import study_parser, write_table

METRICS = ("test_error", "matrix_error")
STUDENTS = {
    "kappa=1": dict(student="factorized", kappa=1.0),
    "kappa=0.75": dict(student="factorized", kappa=0.75),
    "direct": dict(student="direct", kappa=1.0),
}


def compare(
    problems: list[Problem], seeds: int, rel_tol: float, optimizer: str, cache: Cache, n_jobs: int
) -> list[dict]:
    """Theory and mean/standard error over ``seeds`` simulations, per problem (cached, parallel).

    The pass rule is the fixed-level tolerance ``within`` of :func:`singlehead.report.compare.agreement`
    (2 s.e. + ``rel_tol``); the report judges the same rows' p-values by Holm per figure instead.
    """
    settings = (("n_test", 10000), ("optimizer", optimizer))
    sim_jobs = [Job("simulation", p, s, settings) for p in problems for s in range(seeds)]
    sims = run_jobs(sim_jobs, cache, n_jobs=n_jobs, desc="simulations")
    ths = run_jobs([Job("theory", p) for p in problems], cache, n_jobs=n_jobs, desc="theory")
    by = ["cfg_alpha"]
    agr = agreement(records_to_frame(sims), records_to_frame(ths), by, list(METRICS), rel=rel_tol)
    rows = []
    for i, (p, th) in enumerate(zip(problems, ths)):
        runs = sims[i * seeds : (i + 1) * seeds]
        row = {"theory": th, "ok": True, "runtime": sum(r["runtime_s"] for r in runs)}
        for k in METRICS:
            a = agr[(agr.cfg_alpha == p.alpha) & (agr.quantity == k)].iloc[0]
            row[k] = (a.theory, a.simulation, a.se, bool(a.within))
            row["ok"] &= bool(a.within)
        row["train"] = (th["train_error"], float(np.mean([r["train_error"] for r in runs])))
        row["rank"] = (th["rank_fraction"], float(np.mean([r["rank_fraction"] for r in runs])))
        rows.append(row)
    return rows


HERE = Path(__file__).resolve().parent


def main(
    quick: bool = False,
    *,
    d: int = 100,
    seeds: int = 8,
    alphas: tuple[float, ...] = (0.1, 0.25, 0.5, 1, 2),
    students: tuple[str, ...] = tuple(STUDENTS),
    T: int = 2,
    kappa0: float = 0.5,
    noise: float = 0.5,
    lam: float = 0.01,
    channel: str = "seq2lab",
    rel_tol: float = 0.03,
    optimizer: str = "lbfgs",
    jobs: int = 2,
    cache: str | Path | None = None,
) -> int:
    """Run the comparison, print the table (written to ``results/table.md`` unless ``quick``); 0 if every row
    passes."""
    if quick:
        d, seeds, alphas, students = 40, 3, (0.25, 1.0), ("kappa=1",)
    bad = [s for s in students if s not in STUDENTS]
    if bad:
        raise ValueError(f"students must be among {list(STUDENTS)} (got {bad})")
    store = Cache(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    lines = [
        f"SE vs simulation: T={T} channel={channel} kappa0={kappa0} Delta={noise} "
        f"lam={lam} d={d} seeds={seeds} (pass: |sim - th| <= 2 se + {rel_tol:.0%})",
        "",
    ]
    lines += [
        "| student | alpha | test th | test sim | ± se | matrix th | matrix sim | ± se | train th | train sim | "
        "rank th | rank sim | pass |",
        "|---" * 13 + "|",
    ]
    print("\n".join(lines), flush=True)
    all_ok = True
    for name in students:
        problems = [
            Problem(d=d, T=T, alpha=a, channel=channel, noise=noise, lam=lam, target=MPTarget(kappa0), **STUDENTS[name])
            for a in alphas
        ]
        for a, row in zip(alphas, compare(problems, seeds, rel_tol, optimizer, store, jobs)):
            te, me = row["test_error"], row["matrix_error"]
            all_ok &= row["ok"]
            lines.append(
                f"| {name} | {a:.3g} | {te[0]:.4f} | {te[1]:.4f} | {te[2]:.4f} | {me[0]:.4f} | {me[1]:.4f} | "
                f"{me[2]:.4f} | {row['train'][0]:.4f} | {row['train'][1]:.4f} | {row['rank'][0]:.3f} | "
                f"{row['rank'][1]:.3f} | {'yes' if row['ok'] else 'NO'} |"
            )
            print(lines[-1], flush=True)
    lines += ["", "ALL PASS" if all_ok else "SOME ROWS FAIL"]
    print(lines[-1])
    if not quick:
        write_table(HERE, lines)
    return 0 if all_ok else 1


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("--quick", action="store_true", help="d = 40, 3 seeds, two alphas, one student; writes no results")
    ap.add_argument("--d", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--alphas", default="0.1,0.25,0.5,1,2")
    ap.add_argument("--students", default=",".join(STUDENTS), help=f"subset of {list(STUDENTS)}")
    ap.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/se_vs_simulation)")
    a = ap.parse_args(argv)
    return main(
        a.quick,
        d=a.d,
        seeds=a.seeds,
        alphas=tuple(float(x) for x in a.alphas.split(",")),
        students=tuple(a.students.split(",")),
        jobs=a.jobs,
        cache=a.cache,
    )


if __name__ == "__main__":
    raise SystemExit(cli())

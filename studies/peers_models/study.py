"""The peers' models against ERM: extensive-rank MP targets (kappa0 > 1) and the hardmax channel (README.md).

Three features, each judged like a report figure (``singlehead.report.verdict.judge``: declared
tolerance, difference test and equivalence test at 5 %, Holm over the feature's rows).

* extensive rank: seq2lab, factorized student, MP target kappa0 in {1.5, 2}, T in {2, 3},
  alpha in {0.5, 2}, noise 0.5, lam 0.01; ERM at d = 40 and 80, 4 seeds each, 4000 test sequences;
* hardmax: factorized student, MP target kappa0 = 0.5, T in {2, 3}, alpha in {0.5, 2},
  lam in {0.01, 0.05}, noise 0.5; ERM at d = 40 (16 seeds, 50000 test sequences), 80 (4 seeds,
  4000) and 100 (4 seeds, 50000);
* hardmax Bayes: Bayes-GAMP on instances (``AMPOptions(bayes=True)``) at d = 100, T = 2,
  alpha in {0.5, 1}, the hardmax target above, 4 seeds, against the Bayes state evolution of each
  instance's own spectrum (``bayes_overlap(problem, instance_prior(S0))``).

ERM against the state evolution (``singlehead.theory``, cached as a ``theory`` job): per size, the
seed mean of the test error and its standard error ``sqrt((c^2/d^2 + v)/k)`` (``v`` the mean
squared test-set error of one run, ``k`` seeds, ``c^2/d^2`` the training-set part of the seed
variance with ``c`` pooled over the sizes: ``singlehead.analysis.finite_size_gaps(pool=True)``),
the gap to the theory fitted as ``a + b/d`` by weighted least squares (covariance scaled by
``chi2/dof`` when it exceeds 1) and the intercept ``a`` judged with the normal law. Tolerance
``max(3 % of the theory, 0.005)`` (terms beyond
``a + b/d`` and the SE quadrature). Each row carries the replica-symmetry diagnostic of
``singlehead.figures.rs_diagnostic`` computed at its SE point (``state_evolution.stability`` at a
converged point; the replicon and prox-jump share the diagnosis computed at the best point of an
unconverged one): a deviating row where it fails is *deviates, explained*. A point whose SE has no
stable replica-symmetric fixed point (diagnosis ``rs_unstable``) is judged at the SE's best point,
in both Holm families, and can at best be *deviates, explained* (an *agrees* there is reported
*inconclusive*); any other unconverged point is outside both families and inconclusive.

Bayes rows: the per-seed difference ``AMP - SE(instance)`` of the matrix error, its mean over the
seeds and Student's t with ``k - 1`` degrees of freedom; tolerance ``max(5 % of the SE, 0.005)``
(GAMP's own finite-``d`` corrections at d = 100 and its stopping rule; the instance SE removes the
target's fluctuation).

``--quick``: small sizes, 2 seeds, the first two points of each feature; nothing written to results/.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from singlehead import MPTarget, Problem, Result, stability
from singlehead.amp import instance_prior
from singlehead.analysis import finite_size_gaps
from singlehead.bayes import bayes_overlap
from singlehead.figures.rs_diagnostic import RSPoint
from singlehead.numerics.rng import child_seeds
from singlehead.report.verdict import AGREES, INCONCLUSIVE, judge, tally
from singlehead.runs import Cache, Job, cached, run_jobs
from studies import echo_into, study_parser, write_table

HERE = Path(__file__).resolve().parent
TOL_REL, TOL_ABS = 0.03, 0.005
BAYES_TOL_REL, BAYES_TOL_ABS = 0.05, 0.005
BAYES_D, BAYES_SEEDS, BAYES_ALPHAS = 100, 4, (0.5, 1.0)
#: Bayes-GAMP settings (those of the library's instance test)
AMP_SETTINGS = (("bayes", True), ("max_iter", 200), ("n_test", 500), ("num_threads", 1), ("tol", 1e-6))
RANK, HARD, BAYES = "extensive rank (kappa0 > 1)", "hardmax channel", "hardmax Bayes: GAMP vs state evolution"


@dataclass(frozen=True)
class Size:
    """One simulated size of a feature: ``d``, the number of ``seeds`` and of test sequences ``n_test``."""

    d: int
    seeds: int
    n_test: int


#: the sizes of each ERM feature (the hardmax plan: README, Method)
SIZES = {
    RANK: (Size(40, 4, 4000), Size(80, 4, 4000)),
    HARD: (Size(40, 16, 50000), Size(80, 4, 4000), Size(100, 4, 50000)),
}
#: the d of the theory jobs' problems (the SE uses the target's asymptotic law at these d: it only names the job)
THEORY_D = {RANK: 80, HARD: 120}
QUICK_SIZES = {
    RANK: (Size(20, 2, 1000), Size(40, 2, 1000)),
    HARD: (Size(20, 2, 4000), Size(30, 2, 1000), Size(40, 2, 4000)),
}


def points() -> dict[str, list[Problem]]:
    """The eight problems of each ERM feature (``d`` set later)."""
    rank = [
        Problem(T=T, alpha=a, channel="seq2lab", noise=0.5, lam=0.01, target=MPTarget(k0))
        for k0 in (1.5, 2.0)
        for T in (2, 3)
        for a in (0.5, 2.0)
    ]
    hard = [
        Problem(T=T, alpha=a, channel="hardmax", noise=0.5, lam=lam, target=MPTarget(0.5))
        for T in (2, 3)
        for a in (0.5, 2.0)
        for lam in (0.01, 0.05)
    ]
    return {RANK: rank, HARD: hard}


def sim_jobs(probs: list[Problem], sizes: tuple[Size, ...]) -> list[Job]:
    """The ERM fits of a feature, seed-major within each size (an interrupted run has every point's first seeds)."""
    return [
        Job("simulation", p.replace(d=z.d), s, (("n_test", z.n_test),))
        for z in sizes
        for s in range(z.seeds)
        for p in probs
    ]


def rs_point(problem: Problem, rec: dict[str, Any], store: Cache) -> RSPoint | None:
    """The replica-symmetry diagnostic at the SE point of ``rec`` (cached), or None where it cannot be computed."""
    if rec.get("converged"):

        def compute() -> dict[str, Any]:
            res = Result.from_dict({k: v for k, v in rec.items() if k not in ("key", "route", "seed")})
            try:
                st = stability(problem, res)
            except (ValueError, ArithmeticError) as exc:
                return {"error": f"{type(exc).__name__}: {exc}"}
            return {"replicon": st.replicon, "jump": st.prox_jump_share, "jump_err": st.prox_jump_share_se}

        out = cached(store, {"stage": "rs_diagnostic", "theory_key": rec["key"]}, compute)
    else:
        dd = rec.get("diagnosis_details") or {}
        out = {
            "replicon": dd.get("replicon"),
            "jump": dd.get("prox_jump_share"),
            "jump_err": dd.get("prox_jump_share_se"),
        }
    vals = [out.get(k) for k in ("replicon", "jump", "jump_err")]
    if out.get("error") or vals[0] is None or vals[1] is None:
        return None
    return RSPoint(*(math.nan if v is None else float(v) for v in vals))


def erm_rows(probs: list[Problem], sizes: tuple[Size, ...], store: Cache, jobs: int, feature: str) -> pd.DataFrame:
    """One row per problem: theory, RS diagnostic, seed means per size, the ``a + b/d`` fit of the gap."""
    d_top = THEORY_D.get(feature, max(z.d for z in sizes))
    th_recs = run_jobs(
        [Job("theory", p.replace(d=d_top)) for p in probs], store, n_jobs=jobs, desc=f"{feature}: theory"
    )
    js = sim_jobs(probs, sizes)
    recs = dict(zip((j.key for j in js), run_jobs(js, store, n_jobs=jobs, desc=feature)))
    rows = []
    for p, th in zip(probs, th_recs):
        per_d = {
            z.d: [recs[Job("simulation", p.replace(d=z.d), s, (("n_test", z.n_test),)).key] for s in range(z.seeds)]
            for z in sizes
        }
        err = {d: [r["test_error"] for r in rs] for d, rs in per_d.items()}
        mc = {d: [r["test_error_se"] for r in rs] for d, rs in per_d.items()}
        theory_value = float(th["test_error"])
        fs = finite_size_gaps(err, theory_value, mc_se=mc, pool=True)
        ext = fs.extrapolation
        rs_unstable = not th["converged"] and th.get("diagnosis") == "rs_unstable"
        rs = rs_point(p.replace(d=d_top), th, store)
        status = "converged" if th["converged"] else f"unconverged: {th.get('diagnosis')}"
        rows.append(
            dict(
                T=p.T,
                alpha=p.alpha,
                lam=p.lam,
                kappa0=p.target.kappa0,
                channel=p.channel.name,
                theory=theory_value,
                status=status,
                rs_best_point=rs_unstable,
                **{f"erm_d{d}": float(np.mean(v)) for d, v in err.items()},
                **{f"se_d{int(d)}": float(s) for d, s in zip(fs.d, fs.se)},
                slope=ext.slopes[0],
                slope_se=ext.slopes_stderr[0],
                fit_p=ext.p_value,
                inflated=ext.inflated,
                sim=theory_value + ext.intercept,
                se=ext.stderr,
                gap=abs(ext.intercept),
                theory_converged=bool(th["converged"]) or rs_unstable,
                tol_rel=TOL_REL,
                tol_abs=TOL_ABS,
                diagnostic=rs.describe() if rs else "not computed",
                diagnostic_fails=bool(rs and rs.fails),
            )
        )
    return pd.DataFrame(rows)


def judge_erm(rows: pd.DataFrame) -> pd.DataFrame:
    """The report's verdicts; a row at an ``rs_unstable`` SE point cannot agree (see the module docstring)."""
    out = judge(rows)
    out.loc[out.rs_best_point & (out.verdict == AGREES), "verdict"] = INCONCLUSIVE
    return out


def instance_se(problem: Problem, seed: int, store: Cache) -> dict[str, Any]:
    """Bayes SE of the target drawn for ``seed`` (the draw of ``simulate`` and ``amp``), cached."""

    def compute() -> dict[str, Any]:
        S0 = problem.target.sample(problem.d, child_seeds(seed, 4)[0]).numpy()
        out = bayes_overlap(problem, instance_prior(S0))
        return {"mmse": float(out["mmse"]), "Q0": float(np.sum(S0 * S0) / problem.d)}

    return cached(store, {"stage": "bayes_se_instance", "problem": problem.to_dict(), "seed": seed}, compute)


def bayes_rows(alphas: tuple[float, ...], d: int, seeds: int, store: Cache, jobs: int) -> pd.DataFrame:
    """One row per alpha: Bayes-GAMP's matrix error against the instance Bayes SE, paired by seed."""
    probs = [Problem(d=d, T=2, alpha=a, channel="hardmax", noise=0.5, lam=0.01, target=MPTarget(0.5)) for a in alphas]
    js = [Job("amp", p, s, AMP_SETTINGS) for s in range(seeds) for p in probs]
    recs = dict(zip((j.key for j in js), run_jobs(js, store, n_jobs=jobs, desc=BAYES)))
    rows = []
    for p in probs:
        amp_recs = [recs[Job("amp", p, s, AMP_SETTINGS).key] for s in range(seeds)]
        se_recs = [instance_se(p, s, store) for s in range(seeds)]
        for r, s in zip(amp_recs, se_recs):
            if not math.isclose(float(r["Q0"]), s["Q0"], rel_tol=1e-9):
                raise RuntimeError(f"the instance SE's target is not the AMP run's (Q0 {s['Q0']} vs {r['Q0']})")
        amp_me = np.array([r["matrix_error"] for r in amp_recs])
        se_me = np.array([s["mmse"] for s in se_recs])
        diff = amp_me - se_me
        rows.append(
            dict(
                T=p.T,
                alpha=p.alpha,
                d=d,
                seeds=seeds,
                theory=float(se_me.mean()),
                bayes_asymptotic=float(bayes_overlap(p, prior_mode="asymptotic")["mmse"]),
                sim=float(amp_me.mean()),
                amp_converged=int(sum(bool(r["converged"]) for r in amp_recs)),
                diff_sd=float(diff.std(ddof=1)),
                se=float(diff.std(ddof=1) / math.sqrt(seeds)),
                dof=seeds - 1,
                gap=float(abs(diff.mean())),
                signed=float(diff.mean()),
                theory_converged=True,
                tol_rel=BAYES_TOL_REL,
                tol_abs=BAYES_TOL_ABS,
            )
        )
    return judge(pd.DataFrame(rows))


def _counts(feature: str, judged: pd.DataFrame) -> str:
    t = tally(judged)
    return (
        f"{feature}: {t['agrees']} agree, {t['deviates']} deviate, {t['explained']} deviate (explained), "
        f"{t['inconclusive']} inconclusive of {t['n']}"
    )


def main(
    quick: bool = False, *, jobs: int = 1, cache: str | Path | None = None, hardmax_seeds: tuple[int, ...] | None = None
) -> int:
    """Run the three features and print their tables (written to ``results/`` unless ``quick``).

    ``hardmax_seeds``: seeds at each hardmax size (default those of :data:`SIZES`); more seeds continue the seed
    sequence, so the runs already cached are reused.
    """
    sizes = dict(QUICK_SIZES if quick else SIZES)
    if hardmax_seeds is not None:
        if len(hardmax_seeds) != len(sizes[HARD]) or min(hardmax_seeds) < 2:
            raise ValueError(
                f"hardmax_seeds must give one count >= 2 per hardmax size ({len(sizes[HARD])}), got {hardmax_seeds!r}"
            )
        sizes[HARD] = tuple(Size(z.d, int(k), z.n_test) for z, k in zip(sizes[HARD], hardmax_seeds))
    store = Cache(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    lines: list[str] = []
    say = echo_into(lines)
    say(
        "ERM against the state evolution: seed means per size, the gap fitted as a + b/d (weighted least squares) "
        f"and judged at d = inf; tolerance max({100 * TOL_REL:g} % of the theory, {TOL_ABS}); verdicts by the "
        "difference and equivalence tests, Holm per feature. Bayes-GAMP against the instance Bayes SE: tolerance "
        f"max({100 * BAYES_TOL_REL:g} % of the SE, {BAYES_TOL_ABS})."
    )
    judged_all = []
    for feature, probs in points().items():
        probs = probs[:2] if quick else probs
        zs = sizes[feature]
        ds = [z.d for z in zs]
        say("")
        say(f"## {feature}")
        say("")
        say("Sizes: " + "; ".join(f"d = {z.d}: {z.seeds} seeds, {z.n_test} test sequences" for z in zs) + ".")
        say("")
        judged = judge_erm(erm_rows(probs, zs, store, jobs, feature))
        head = (
            ["T", "alpha", "lam", "kappa0", "theory", "SE status", "RS diagnostic"]
            + [f"ERM d={d}" for d in ds]
            + ["slope b", "fit p", "ERM d=inf", "s.e.", "gap/theory", "verdict"]
        )
        say("| " + " | ".join(head) + " |")
        say("|---" * len(head) + "|")
        for r in judged.itertuples():
            fit_p = "-" if not math.isfinite(r.fit_p) else f"{r.fit_p:.2f}"
            say(
                f"| {r.T} | {r.alpha:g} | {r.lam:g} | {r.kappa0:g} | {r.theory:.4f} | {r.status} | {r.diagnostic} | "
                + " | ".join(f"{getattr(r, f'erm_d{d}'):.4f}" for d in ds)
                + f" | {r.slope:.2f} ± {r.slope_se:.2f} | {fit_p} | {r.sim:.4f} | {r.se:.4f} | "
                f"{100 * r.gap / abs(r.theory):.1f} % | {r.verdict} |"
            )
        say("")
        say(_counts(feature, judged))
        judged_all.append(judged.assign(feature=feature))
    alphas = BAYES_ALPHAS[:1] if quick else BAYES_ALPHAS
    d, seeds = (30, 2) if quick else (BAYES_D, BAYES_SEEDS)
    say("")
    say(f"## {BAYES}")
    say("")
    say(
        f"d = {d}, T = 2, {seeds} seeds, hardmax, MP(0.5) target, noise 0.5: Bayes-GAMP's matrix error against the "
        "Bayes SE of each instance's own spectrum (paired by seed); the asymptotic Bayes SE for reference."
    )
    say("")
    bj = bayes_rows(alphas, d, seeds, store, jobs)
    say(
        "| alpha | SE (instances) | SE (d = inf) | GAMP | GAMP converged | GAMP - SE | s.d. of the difference | s.e. "
        "| gap/SE | verdict |"
    )
    say("|---" * 10 + "|")
    for r in bj.itertuples():
        say(
            f"| {r.alpha:g} | {r.theory:.4f} | {r.bayes_asymptotic:.4f} | {r.sim:.4f} | {r.amp_converged}/{r.seeds} | "
            f"{r.signed:+.4f} | {r.diff_sd:.4f} | {r.se:.4f} | {100 * r.gap / r.theory:.1f} % | {r.verdict} |"
        )
    say("")
    say(_counts(BAYES, bj))
    judged_all.append(bj.assign(feature=BAYES))
    if not quick:
        write_table(HERE, lines)
        pd.concat(judged_all, ignore_index=True).to_csv(HERE / "results" / "rows.csv", index=False, float_format="%.6g")
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument(
        "--quick", action="store_true", help="small sizes, 2 seeds, 2 points per feature; writes no results"
    )
    ap.add_argument("--jobs", type=int, default=1, help="parallel worker processes")
    default = ",".join(str(z.seeds) for z in SIZES[HARD])
    ap.add_argument(
        "--hardmax-seeds",
        default=None,
        help=f"seeds per hardmax size, comma-separated (default {default}); cached seeds are reused",
    )
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/peers_models)")
    a = ap.parse_args(argv)
    seeds = None if a.hardmax_seeds is None else tuple(int(k) for k in a.hardmax_seeds.split(","))
    return main(a.quick, jobs=a.jobs, cache=a.cache, hardmax_seeds=seeds)


if __name__ == "__main__":
    raise SystemExit(cli())

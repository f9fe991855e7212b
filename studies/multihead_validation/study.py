"""Multi-head attention: the state evolution against ERM (README.md).

Three parts, each cached point by point in the result cache (an interrupted run resumes):

* ``linear`` -- twelve points of the linear channel, where the multi-head theory is exact (one effective head,
  :func:`singlehead.theory`): ``H = 2, 3`` student heads, ``H0 = 1, 2, 3`` teacher heads, ``T = 2, 3``,
  ``lam`` from ``1e-3`` to 1, ``alpha`` below and above the effective problem's interpolation threshold. ERM by
  L-BFGS (float64, 2 starts, the lowest objective kept) at ``d = 30`` (5 seeds) and ``d = 50`` (3 seeds); the
  test error extrapolated to ``d = inf`` by ``v = v_inf + b/d`` (least squares over every seed).
* ``softmax`` -- seq2lab points judged against the experimental multi-head state evolution
  (``multihead_se``): ``H = H0 = 2`` on both sides of the specialisation transition, ``H = 2, H0 = 1`` and
  ``H = 2, H0 = 3``. With ``H = H0`` both ansaetze are solved and ERM is compared with the fixed point of lower
  predicted objective. ERM: 3 starts, ``d = 30`` (3 seeds) and ``d = 45`` (2 seeds). Checks: the extrapolated
  test error, and the matched per-head overlaps at ``d = 45`` (the mean over matched student/teacher pairs of
  ``head_M`` minus the mean over the other pairs, in units of ``Q0``'s diagonal-minus-off-diagonal gap).
* ``transitions`` -- ``H = H0 = 3``, seq2lab, ``T = 2``, ``lam = 0.01``, ``alpha = 7, 5, 3.5``: the
  unspecialised fixed point, the permutation-symmetric specialised one and the general ansatz from a specialised
  start with the heads' symmetry broken, each branch followed down in ``alpha`` from its ``alpha = 7`` point,
  with each head's specialisation (its matched overlap minus its mean unmatched overlap); ``transitions-erm``:
  ERM at ``d = 30`` (2 seeds, 3 starts) at ``alpha = 3.5``, 5 and 7; ``transitions-strong``: the SE at ``alpha = 7``
  started from ERM's mean matched heads, and that specialised branch followed down to ``alpha = 2.5``.

``stability`` -- ``H = H0 = 3``: the unspecialised point's specialisation eigenvalue at ``STABILITY_ALPHAS`` and,
with ``transitions-strong``'s branch, both transition points by the report figure's rule.

Further seeds of the linear points above the interpolation threshold: ``linear-more`` (15 at ``d = 30``, 5 at
``d = 50``), added to the first ones.

Judgement: the report's rule (:func:`singlehead.report.verdict.judge`): each check declares its tolerance,
difference test and equivalence test (TOST), Holm over the family; the linear checks and the softmax checks are
two families. Outputs: ``results/<part>.json`` (rows), ``results/tables.md``.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from singlehead import MPTarget, Problem, SEOptions, TrainOptions, interpolation_threshold, simulate, theory
from singlehead.analysis import FiniteSizeGaps, finite_size_gaps
from singlehead.figures.multihead import transition_text, transitions
from singlehead.report.verdict import judge, tally, tally_text
from singlehead.runs import Cache, cached, reference_seconds
from singlehead.state_evolution import effective_single_head
from singlehead.state_evolution.multihead_se import (
    MultiHeadSEMap,
    default_start,
    multihead_options,
    multihead_point,
    specialisation_eigenvalue,
)
from studies import study_parser

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
KAPPA0, NOISE = 0.5, 0.5

# (H, H0, T, lam, alpha)
LINEAR = [
    (2, 1, 2, 1e-2, 0.05),
    (2, 1, 2, 1e-2, 1.0),
    (2, 3, 2, 1e-3, 0.05),
    (2, 3, 2, 1e-3, 0.5),
    (2, 3, 2, 1.0, 2.0),
    (3, 2, 2, 1e-2, 0.3),
    (3, 1, 2, 0.1, 1.5),
    (3, 3, 2, 1e-2, 1.0),
    (3, 2, 3, 1e-2, 0.03),
    (3, 2, 3, 1e-2, 0.5),
    (2, 3, 3, 1.0, 1.0),
    (2, 1, 3, 1e-3, 0.2),
]
LINEAR_SIZES = {30: 5, 50: 3}
#: below the interpolation threshold a task has few sequences (n = alpha d^2/2): larger d, as cheap
LINEAR_SIZES_SMALL_ALPHA = {50: 5, 100: 3}
#: linear channel: the theory is exact at d = inf; the tolerance covers the 1/d extrapolation's neglected
#: O(1/d^2) terms at d >= 30
LINEAR_TOL = dict(tol_rel=0.05, tol_abs=1e-3, tol_reason="exact theory; 1/d extrapolation from d = 30, 50")

# (H, H0, T, lam, alpha)
SOFTMAX = [(2, 2, 2, 1e-2, 0.5), (2, 2, 2, 1e-2, 2.5), (2, 1, 2, 1e-2, 1.0), (2, 3, 2, 1e-1, 1.0)]
SOFTMAX_SIZES = {30: 3, 45: 2}
#: softmax channels: the experimental SE's sampled prior (D = 100: up to 2.5 % on the test error), its
#: quadrature (~1 %) and the extrapolation
SOFTMAX_TOL = dict(tol_rel=0.08, tol_abs=1e-3, tol_reason="experimental SE: D = 100 prior bias, quadrature, 1/d")
#: the matched-overlap gap (in units of Q0's gap): draw error of the SE's head_M and the finite-d matching bias
GAP_TOL = dict(tol_rel=0.0, tol_abs=0.1, tol_reason="SE draws; matching bias of ERM heads at d = 45")

TRANSITION_ALPHAS = (7.0, 5.0, 3.5)
TRANSITION_ERM_ALPHAS = (3.5, 5.0, 7.0)
TRANSITION_SIZES = {30: 2}
#: the strongly specialised branch (from ERM's heads at the largest alpha) followed down to these
STRONG_DOWN_ALPHAS = (5.0, 3.5, 2.5)
#: further seeds of the linear points above the interpolation threshold (``d: seeds``), after the first ones
LINEAR_MORE = {30: 15, 50: 5}
#: ``linear-wide``: the points above the interpolation threshold at two sizes far apart. With a task-to-task
#: scatter of about ``c v/d`` (``c`` about 2-3 on these points), the intercept of ``v_inf + b/d`` through ``d1 < d2``
#: has standard error
#: ``c v sqrt(1/n1 + 1/n2)/(d2 - d1)``: 80 between the sizes instead of 20, the small size cheap enough for many seeds
LINEAR_WIDE = {20: 48, 100: 6}
LINEAR_WIDE_TOL = dict(
    tol_rel=0.05, tol_abs=1e-3, tol_reason="exact theory; weighted 1/d extrapolation from d = 20, 30, 50, 100"
)


def problem_for(channel: str, H: int, H0: int, T: int, lam: float, alpha: float, d: int = 100) -> Problem:
    return Problem(
        d=d,
        T=T,
        channel=channel,
        alpha=alpha,
        noise=NOISE,
        lam=lam,
        target=MPTarget(kappa0=KAPPA0),
        heads=H,
        teacher_heads=H0,
    )


def head_gaps(M: np.ndarray, Q0: np.ndarray) -> list[float]:
    """Each matched student head's specialisation: ``M[h, h] - mean_{j != h} M[h, j]`` over the gap of ``Q0``
    (``mean diag - mean off-diag``); rows beyond ``H0`` (unpaired heads) and ``H0 = 1`` give ``nan``."""
    M, Q0 = np.asarray(M, float), np.asarray(Q0, float)
    H, H0 = M.shape
    if H0 < 2:
        return [math.nan] * H
    g0 = float(np.mean(np.diag(Q0)) - (Q0.sum() - np.trace(Q0)) / (H0 * (H0 - 1)))
    return [float((M[h, h] - (M[h].sum() - M[h, h]) / (H0 - 1)) / g0) if h < H0 else math.nan for h in range(H)]


def pair_gap(M: np.ndarray, Q0: np.ndarray) -> float:
    """Mean overlap of the matched pairs minus the mean of the other entries of ``M``, over ``Q0``'s gap
    (``nan`` with one teacher head)."""
    M, Q0 = np.asarray(M, float), np.asarray(Q0, float)
    H, H0 = M.shape
    if H0 < 2:
        return math.nan
    k = min(H, H0)
    mask = np.zeros_like(M, bool)
    mask[np.arange(k), np.arange(k)] = True
    g0 = float(np.mean(np.diag(Q0)) - (Q0.sum() - np.trace(Q0)) / (H0 * (H0 - 1)))
    return float((M[mask].mean() - M[~mask].mean()) / g0)


def erm(
    channel: str, pt: tuple, sizes: dict[int, int], starts: int, first_seed: dict[int, int] | None = None
) -> list[dict]:
    out = []
    for d, seeds in sizes.items():
        s0 = (first_seed or {}).get(d, 0)
        for s in range(s0, s0 + seeds):
            t0 = time.perf_counter()
            r = simulate(
                problem_for(channel, *pt, d=d),
                seed=s,
                options=TrainOptions(optimizer="lbfgs", precision="float64", n_starts=starts),
            )
            M, Q0 = np.asarray(r.extras["head_M"]), np.asarray(r.extras["head_Q0"])
            out.append(
                dict(
                    d=d,
                    seed=s,
                    test=r.test_error,
                    train=r.train_error,
                    converged=bool(r.converged),
                    objective=r.train_error + r.penalty / r.problem["alpha"] if r.penalty is not None else None,
                    head_M=M.tolist(),
                    head_Q=np.asarray(r.extras["head_Q"]).tolist(),
                    head_Q0=Q0.tolist(),
                    pair_gap=pair_gap(M, Q0),
                    head_gaps=head_gaps(M, Q0),
                    seconds=time.perf_counter() - t0,
                )
            )
    return out


def extrapolate(sims: list[dict], key: str = "test") -> tuple[float, float, int]:
    """``v_inf`` of ``v = v_inf + b/d`` by least squares over every seed, its standard error and dof."""
    d = np.array([s["d"] for s in sims], float)
    v = np.array([s[key] for s in sims], float)
    A = np.stack([np.ones_like(d), 1.0 / d], axis=1)
    coef, *_ = np.linalg.lstsq(A, v, rcond=None)
    dof = len(v) - A.shape[1]
    sigma2 = float(np.sum((v - A @ coef) ** 2) / dof)
    cov = sigma2 * np.linalg.inv(A.T @ A)
    return float(coef[0]), float(math.sqrt(cov[0, 0])), dof


def se_summary(r) -> dict:
    e = r.extras
    out = dict(
        test=r.test_error,
        test_se=float(e.get("test_error_se", 0.0)),
        train=r.train_error,
        converged=bool(r.converged),
        residual=float(e.get("residual", math.nan)),
        seconds=r.runtime_s,
        objective=float(e["objective"]),
        objective_se=float(e.get("objective_se", math.nan)),
        ansatz=e.get("ansatz"),
        head_M=np.asarray(e["head_M"]).tolist(),
        head_Q=np.asarray(e["head_Q"]).tolist(),
        head_Q0=np.asarray(e["head_Q0"]).tolist(),
    )
    out["pair_gap"] = pair_gap(e["head_M"], e["head_Q0"])
    out["head_gaps"] = head_gaps(e["head_M"], e["head_Q0"])
    return out


# ---- linear -------------------------------------------------------------------------------------------------


def linear_sizes(alpha: float) -> dict[int, int]:
    return LINEAR_SIZES_SMALL_ALPHA if alpha < 0.1 else LINEAR_SIZES


def run_linear(pt: tuple) -> dict:
    H, H0, T, lam, alpha = pt
    t0 = time.perf_counter()
    th = theory(problem_for("linear", *pt))
    eff, _ = effective_single_head(problem_for("linear", *pt))
    row = dict(
        H=H,
        H0=H0,
        T=T,
        lam=lam,
        alpha=alpha,
        theory=th.test_error,
        theory_train=th.train_error,
        theory_converged=bool(th.converged),
        alpha_interp=float(interpolation_threshold(eff)),
    )
    row["sims"] = erm("linear", pt, linear_sizes(alpha), starts=2)
    row["seconds"] = time.perf_counter() - t0
    return row


def linear_checks(rows: list[dict]) -> pd.DataFrame:
    recs = []
    for r in rows:
        v, se, dof = extrapolate(r["sims"])
        recs.append(
            dict(
                H=r["H"],
                H0=r["H0"],
                T=r["T"],
                lam=r["lam"],
                alpha=r["alpha"],
                check="test error, d = inf",
                theory=r["theory"],
                sim=v,
                gap=abs(v - r["theory"]),
                se=se,
                dof=dof,
                theory_converged=r["theory_converged"],
                **LINEAR_TOL,
            )
        )
    return judge(pd.DataFrame(recs))


def pooled_fit(sims: list[dict], key: str, theory_value: float) -> FiniteSizeGaps:
    """The report's finite-size fit of ``key`` over every seed of ``sims`` (entries without it left out): ``a + b/d``
    weighted by the pooled variance model ``c^2/d^2`` (:func:`singlehead.analysis.finite_size.finite_size_gaps`,
    ``pool=True``: the per-seed scatter is ``O(1/d)``, and a size's own variance from 6 seeds would steer the fit),
    the standard error inflated by the fit's ``chi2/dof`` where above 1."""
    per_d: dict[int, list[float]] = {}
    for x in sims:
        if x.get(key) is not None:
            per_d.setdefault(int(x["d"]), []).append(float(x[key]))
    return finite_size_gaps(per_d, theory_value, pool=True)


def earlier_sims(part: str) -> dict:
    """The seeds per point of the ``linear`` (with ``linear-more``) or ``softmax`` part, from ``results/<part>.json``
    (empty where it is absent)."""
    path = RESULTS / f"{part}.json"
    if not path.exists():
        return {}
    return {(x["H"], x["H0"], x["T"], x["lam"], x["alpha"]): x["sims"] for x in json.loads(path.read_text())}


def _wide_fit(channel: str, pt: tuple, d: int, seed: int, starts: int) -> dict:
    return erm(channel, pt, {d: 1}, starts=starts, first_seed={d: seed})[0]


def _wide_theory(pt: tuple) -> dict:
    r = theory(problem_for("linear", *pt))
    return {
        "theory": float(r.test_error),
        "converged": bool(r.converged),
        "alpha_interp": float(interpolation_threshold(effective_single_head(problem_for("linear", *pt))[0])),
    }


def wide_fits(
    store: Cache, channel: str, pts: list[tuple], sizes: dict[int, int], starts: int, workers: int, run: bool
) -> dict[tuple, list[dict]]:
    """The fits of a ``-wide`` part: every (point, d, seed) fit cached on its own (an interrupted run resumes), the
    missing ones (with ``run``) on ``workers`` processes (one BLAS thread each); per complete point its fits."""
    from joblib import Parallel, delayed, parallel_config

    from singlehead.runs.threads import configure, joblib_config

    def spec(pt: tuple, d: int, seed: int) -> dict:
        stage = "mh-linear-wide-fit" if channel == "linear" else f"mh-{channel}-wide-fit"
        return {"stage": stage, "point": list(pt), "d": d, "seed": seed, "starts": starts}

    tasks = [(pt, d, s) for pt in pts for d, n in sizes.items() for s in range(n)]
    todo = [t for t in tasks if cached(store, spec(*t)) is None]
    if run and todo:
        configure(workers=workers)
        print(f"{channel}-wide: {len(todo)} fits on {workers} workers", flush=True)
        with parallel_config(**joblib_config(workers)):
            done = Parallel(return_as="generator")(delayed(_wide_fit)(channel, *t, starts) for t in todo)
            for i, (t, rec) in enumerate(zip(todo, done)):
                cached(store, spec(*t), lambda rec=rec: rec)
                print(f"  {i + 1}/{len(todo)} {t}: test {rec['test']:.4f}, {rec['seconds']:.0f} s", flush=True)
    out = {}
    for pt in pts:
        sims = [cached(store, spec(pt, d, s)) for d, n in sizes.items() for s in range(n)]
        if all(x is not None for x in sims):
            out[pt] = sims
    return out


def run_linear_wide(store: Cache, pts: list[tuple], sizes: dict[int, int], workers: int, run: bool) -> list[dict]:
    """The ``linear-wide`` part: :func:`wide_fits` (2 starts) and per point the theory and its fits."""
    fits = wide_fits(store, "linear", pts, sizes, 2, workers, run)
    rows = []
    for pt, sims in fits.items():
        th = cached(
            store,
            {"stage": "mh-linear-wide-theory", "point": list(pt), "with": "converged"},
            lambda pt=pt: _wide_theory(pt),
        )
        H, H0, T, lam, alpha = pt
        rows.append(
            dict(
                H=H,
                H0=H0,
                T=T,
                lam=lam,
                alpha=alpha,
                theory=th["theory"],
                theory_converged=th["converged"],
                alpha_interp=th["alpha_interp"],
                sims=sims,
            )
        )
    return rows


def linear_wide_checks(rows: list[dict], earlier: dict) -> tuple[pd.DataFrame, list[FiniteSizeGaps]]:
    """The test error at ``d = inf`` (:func:`pooled_fit` over the wide seeds and ``earlier``'s of the same point)
    against the exact theory; and the fits."""
    recs, gaps = [], []
    for r in rows:
        g = pooled_fit(
            r["sims"] + earlier.get((r["H"], r["H0"], r["T"], r["lam"], r["alpha"]), []), "test", r["theory"]
        )
        e = g.extrapolation
        gaps.append(g)
        recs.append(
            dict(
                H=r["H"],
                H0=r["H0"],
                T=r["T"],
                lam=r["lam"],
                alpha=r["alpha"],
                check="test error, d = inf",
                theory=r["theory"],
                sim=r["theory"] + e.intercept,
                gap=abs(e.intercept),
                se=e.stderr,
                fit_p=e.p_value,
                chi2_dof=e.chi2_per_dof,
                theory_converged=r["theory_converged"],
                **LINEAR_WIDE_TOL,
            )
        )
    return judge(pd.DataFrame(recs)), gaps


def linear_wide_text(rows: list[dict], sizes: dict[int, int], ref: float) -> str:
    """``results/linear_wide.md``: the table and the tally."""
    if not rows:
        return "No linear-wide point is complete in the cache.\n"
    chk, gaps = linear_wide_checks(rows, earlier_sims("linear"))
    d1, d2 = sorted(sizes)
    lines = [
        "# Linear channel, two sizes far apart (exact theory)",
        "",
        f"The linear points above the interpolation threshold; ERM by L-BFGS float64, 2 starts, d = {d1} "
        f"({sizes[d1]} seeds) and d = {d2} ({sizes[d2]} seeds), with the linear part's seeds at d = 30 and 50; "
        "d = inf by v = v_inf + b/d, the report's finite-size fit (weights from the pooled per-seed variance "
        "c^2/d^2, standard error inflated by chi2/dof where above 1; the fit's p-value is its goodness of fit). "
        f"Tolerance max(0.05 |theory|, 0.001). Verdicts by the report's rule, Holm over these {len(rows)} rows. "
        f"Reference workload (five 1000^3 float64 products): {ref:.2f} s.",
        "",
        f"| H | H0 | T | lam | alpha | theory | d = {d1} | d = {d2} | c = d sd per d (increasing) | d = inf | "
        "rel. s.e. | fit p | gap/s.e. | p_equiv (Holm) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, g, (_, c) in zip(rows, gaps, chk.iterrows()):
        cs = ", ".join(f"{d * sd:.2f}" for d, sd in zip(g.d, g.sd))
        lines.append(
            f"| {r['H']} | {r['H0']} | {r['T']} | {r['lam']:g} | {r['alpha']:g} | {r['theory']:.4f} | "
            f"{cell(r['sims'], d1)} | {cell(r['sims'], d2)} | {cs} | {c['sim']:.4f} +- {c['se']:.4f} | "
            f"{c['se'] / abs(c['theory']):.1%} | {c['fit_p']:.2f} | {c['gap'] / c['se']:.2f} | "
            f"{c['p_equiv_holm']:.3g} | {c['verdict']} |"
        )
    lines += ["", "Linear, wide: " + tally_text(tally(chk)), ""]
    return "\n".join(lines)


# ---- softmax ------------------------------------------------------------------------------------------------

#: ``softmax-wide``: the softmax points at ``d = 20`` and ``60`` (3 starts), the fits' cost growing as
#: ``d^4 alpha`` (about 1 s and 26 s per fit at ``alpha = 0.5``)
SOFTMAX_WIDE = {20: 48, 60: 8}
SOFTMAX_WIDE_TOL = dict(
    tol_rel=0.08, tol_abs=1e-3, tol_reason="experimental SE: D = 100 prior bias, quadrature; weighted 1/d extrapolation"
)


def softmax_se(pt: tuple) -> dict:
    """The experimental SE of a softmax point: with ``H = H0`` both symmetric ansaetze and the lower predicted
    objective among the converged ones, otherwise the general ansatz."""
    H, H0 = pt[0], pt[1]
    p = problem_for("seq2lab", *pt)
    ansaetze = ("unspecialised", "specialised") if H == H0 else ("general",)
    branches = {a: se_summary(multihead_point(p, SEOptions(ansatz=a))) for a in ansaetze}
    best = min(branches, key=lambda a: branches[a]["objective"] if branches[a]["converged"] else math.inf)
    return dict(branches=branches, best=best)


def softmax_wide_rows(store: Cache, pts: list[tuple], sizes: dict[int, int], workers: int, run: bool) -> list[dict]:
    """The ``softmax-wide`` part: :func:`wide_fits` (3 starts), the SE per point (cached) and the ``softmax``
    part's seeds of the same point (``results/softmax.json``, ``d = 30`` and ``45``)."""
    fits = wide_fits(store, "seq2lab", pts, sizes, 3, workers, run)
    earlier = earlier_sims("softmax")
    rows = []
    for pt, sims in fits.items():
        se = cached(store, {"stage": "mh-softmax-wide-se", "point": list(pt)}, lambda pt=pt: softmax_se(pt))
        H, H0, T, lam, alpha = pt
        rows.append(dict(H=H, H0=H0, T=T, lam=lam, alpha=alpha, **se, sims=sims, earlier=earlier.get(pt, [])))
    return rows


def softmax_wide_checks(rows: list[dict]) -> tuple[pd.DataFrame, list[tuple[FiniteSizeGaps, tuple]]]:
    """The test error at ``d = inf`` (the report's pooled fit over every seed) against the SE's fixed point of
    lower objective, the SE's own error (draws and nodes) joined in quadrature; and the fits."""
    recs, gaps = [], []
    for r in rows:
        th = r["branches"][r["best"]]
        g = pooled_fit(r["sims"] + r["earlier"], "test", th["test"])
        e = g.extrapolation
        gaps.append((g, objective_gap(r)))
        recs.append(
            dict(
                H=r["H"],
                H0=r["H0"],
                T=r["T"],
                lam=r["lam"],
                alpha=r["alpha"],
                branch=r["best"],
                check="test error, d = inf",
                theory=th["test"],
                theory_se=th["test_se"],
                sim=th["test"] + e.intercept,
                fit_se=e.stderr,
                gap=abs(e.intercept),
                se=math.hypot(e.stderr, th["test_se"]),
                fit_p=e.p_value,
                theory_converged=th["converged"],
                **SOFTMAX_WIDE_TOL,
            )
        )
    return judge(pd.DataFrame(recs)), gaps


def objective_gap(r: dict) -> tuple[float, float, float]:
    """The diagnostic of a softmax-wide point: ERM's training objective ``L/n`` (lowest of its starts) extrapolated to
    ``d = inf`` as the test error, against the SE's predicted objective at its fixed point; ``(ERM, its s.e., SE)``.
    ERM above the SE means that the fits do not reach the minimum the SE predicts (or that the SE's minimum is
    not ERM's)."""
    th = r["branches"][r["best"]]
    e = pooled_fit(r["sims"] + r["earlier"], "objective", th["objective"]).extrapolation
    return th["objective"] + e.intercept, e.stderr, th["objective"]


def softmax_wide_text(rows: list[dict], sizes: dict[int, int], ref: float) -> str:
    """``results/softmax_wide.md``: the table and the tally."""
    if not rows:
        return "No softmax-wide point is complete in the cache.\n"
    chk, gaps = softmax_wide_checks(rows)
    d1, d2 = sorted(sizes)
    lines = [
        "# Softmax channel (seq2lab, T = 2), sizes far apart (experimental multi-head SE)",
        "",
        f"ERM by L-BFGS float64, 3 starts, d = {d1} ({sizes[d1]} seeds) and d = {d2} ({sizes[d2]} seeds), with "
        "the softmax part's seeds at d = 30 and 45; d = inf by the report's pooled finite-size fit (as "
        "linear_wide.md). The SE at its defaults (D = 100 x 4 draws, 4 x 1024 nodes); with H = H0 the fixed "
        "point of lower predicted objective; its own standard error (grouped jackknife over draws and nodes) "
        "joined in quadrature. Tolerance max(0.08 |theory|, 0.001). Holm over these "
        f"{len(rows)} rows. Reference workload (five 1000^3 float64 products): {ref:.2f} s.",
        "",
        f"| H | H0 | lam | alpha | SE branch | SE test error | d = {d1} | d = {d2} | c = d sd per d (increasing) "
        "| ERM d = inf (fit s.e.) | s.e. with the SE's | fit p | gap/s.e. | p_equiv (Holm) | verdict "
        "| objective L/n: ERM d = inf vs SE |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, (g, (ov, ose, oth)), (_, c) in zip(rows, gaps, chk.iterrows()):
        cs = ", ".join(f"{d * sd:.3f}" for d, sd in zip(g.d, g.sd))
        lines.append(
            f"| {r['H']} | {r['H0']} | {r['lam']:g} | {r['alpha']:g} | {r['best']} | "
            f"{c['theory']:.4f} +- {c['theory_se']:.4f} | {cell(r['sims'], d1)} | {cell(r['sims'], d2)} | "
            f"{cs} | {c['sim']:.4f} +- {c['fit_se']:.4f} | {c['se']:.4f} ({c['se'] / abs(c['theory']):.1%}) "
            f"| {c['fit_p']:.2f} | {c['gap'] / c['se']:.2f} | {c['p_equiv_holm']:.3g} | {c['verdict']} "
            f"| {ov:.5f} +- {ose:.5f} vs {oth:.5f} ({(ov - oth) / ose:+.1f} s.e.) |"
        )
    lines += [
        "",
        "Softmax, wide: " + tally_text(tally(chk)),
        "",
        "Diagnostic (same runs): ERM's training objective at d = inf against the SE's predicted objective "
        "(the SE's own objective error is a few 1e-4). Where ERM's sits above the SE's, the fits end above the "
        "minimum the SE describes, and their test error need not be the SE's.",
        "",
    ]
    return "\n".join(lines)


def run_softmax(pt: tuple) -> dict:
    H, H0, T, lam, alpha = pt
    t0 = time.perf_counter()
    row = dict(H=H, H0=H0, T=T, lam=lam, alpha=alpha, **softmax_se(pt))
    row["sims"] = erm("seq2lab", pt, SOFTMAX_SIZES, starts=3)
    row["seconds"] = time.perf_counter() - t0
    return row


def softmax_checks(rows: list[dict]) -> pd.DataFrame:
    recs = []
    for r in rows:
        th = r["branches"][r["best"]]
        v, se, dof = extrapolate(r["sims"])
        base = dict(
            H=r["H"],
            H0=r["H0"],
            T=r["T"],
            lam=r["lam"],
            alpha=r["alpha"],
            branch=r["best"],
            theory_converged=th["converged"],
        )
        recs.append(
            dict(
                base,
                check="test error, d = inf",
                theory=th["test"],
                sim=v,
                gap=abs(v - th["test"]),
                se=math.hypot(se, th["test_se"]),
                dof=dof,
                **SOFTMAX_TOL,
            )
        )
        if r["H0"] > 1:
            dmax = max(s["d"] for s in r["sims"])
            g = np.array([s["pair_gap"] for s in r["sims"] if s["d"] == dmax])
            recs.append(
                dict(
                    base,
                    check=f"matched-pair overlap gap, d = {dmax}",
                    theory=th["pair_gap"],
                    sim=float(g.mean()),
                    gap=abs(float(g.mean()) - th["pair_gap"]),
                    se=float(g.std(ddof=1) / math.sqrt(g.size)),
                    dof=g.size - 1,
                    **GAP_TOL,
                )
            )
    return judge(pd.DataFrame(recs))


# ---- transitions (H = H0 = 3) -------------------------------------------------------------------------------


def run_transition_se(alpha: float, ansatz: str, init: dict | None) -> dict:
    p = problem_for("seq2lab", 3, 3, 2, 1e-2, alpha)
    start = None if init is None else tuple(np.asarray(init[k], float) for k in ("head_Q", "head_M", "head_Sigma"))
    o = multihead_options(SEOptions(ansatz=ansatz), start=start)
    r = multihead_point(p, o)
    out = se_summary(r)
    out["head_Sigma"] = np.asarray(r.extras["head_Sigma"]).tolist()
    out["alpha"] = alpha
    return out


def general_start(alpha: float) -> dict:
    """A specialised start for the general ansatz: ``M = 0.6 Q0``-like with the heads' own overlaps."""
    p = problem_for("seq2lab", 3, 3, 2, 1e-2, alpha)
    Q0 = MultiHeadSEMap(p, SEOptions(ansatz="specialised")).Q0
    Q, M, S = default_start(p, Q0, "specialised")
    M = M + 0.05 * np.diag([1.0, 0.0, -1.0]) * float(np.mean(np.diag(Q0)))  # break the heads' symmetry
    return dict(head_Q=Q.tolist(), head_M=M.tolist(), head_Sigma=S.tolist())


# ---- tables -------------------------------------------------------------------------------------------------


def f3(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.3f}"


def fmt_m(v: float, s: float) -> str:
    return f"{v:.4f} +- {s:.4f}"


def cell(sims: list[dict], d: int, key: str = "test") -> str:
    v = np.array([np.nan if s[key] is None else s[key] for s in sims if s["d"] == d], float)
    return fmt_m(v.mean(), v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else (f"{v[0]:.4f}" if v.size else "-")


def sized(sims: list[dict], i: int, key: str = "test") -> str:
    d = sorted({s["d"] for s in sims})[i]
    return f"d = {d}: {cell(sims, d, key)}"


def write_tables(out: Path, lin: list[dict], soft: list[dict], trans: dict | None, ref: float) -> str:
    lines = [
        "# Multi-head attention: state evolution against ERM",
        "",
        f"MP teachers kappa0 = {KAPPA0}, noise {NOISE}, factorized students kappa = 1; ERM by L-BFGS float64, "
        "several starts per task (the lowest objective kept). Verdicts by the report's rule (difference test "
        "and TOST at 5 %, Holm over each family). Reference workload (five 1000^3 float64 products) on the "
        f"shared machine: {ref:.2f} s.",
        "",
    ]
    if lin:
        j = linear_checks(lin)
        lines += [
            "## Linear channel (exact theory)",
            "",
            f"ERM: 2 starts, d = 30 (5 + {LINEAR_MORE[30]} seeds), 50 (3 + {LINEAR_MORE[50]} seeds; "
            "the further seeds where cached); "
            "below alpha = 0.1 (few sequences per task) d = 50 (5), "
            f"100 (3); d = inf by v = v_inf + b/d. Tolerance "
            f"max({LINEAR_TOL['tol_rel']} |theory|, {LINEAR_TOL['tol_abs']}).",
            "",
            "| H | H0 | T | lam | alpha (interp.) | theory | smaller d | larger d | d = inf | "
            "gap/s.e. | p_equiv (Holm) | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for (_, c), r in zip(j.iterrows(), lin):
            lines.append(
                f"| {r['H']} | {r['H0']} | {r['T']} | {r['lam']:g} | {r['alpha']} ({r['alpha_interp']:.3f}) | "
                f"{r['theory']:.4f} | {sized(r['sims'], 0)} | {sized(r['sims'], -1)} | {fmt_m(c['sim'], c['se'])} | "
                f"{c['gap_se']:.2f} | {c['p_equiv_holm']:.3g} | {c['verdict']} |"
            )
        lines += ["", "Linear: " + tally_text(tally(j)), ""]
    if soft:
        j = softmax_checks(soft)
        lines += [
            "## Softmax channel, seq2lab, T = 2 (experimental multi-head SE)",
            "",
            "SE: D = 100, 4 draws, 4 x 1024 nodes; with H = H0 both ansaetze, ERM compared with the lower "
            "predicted objective. ERM: 3 starts, d = 30 (3 seeds), 45 (2 seeds). Tolerances: test error "
            f"max({SOFTMAX_TOL['tol_rel']} |theory|, {SOFTMAX_TOL['tol_abs']}); matched-pair overlap gap "
            f"{GAP_TOL['tol_abs']} (units of Q0's gap).",
            "",
            "| H | H0 | lam | alpha | SE branch | check | theory | d = 30 | d = 45 | judged value | "
            "gap/s.e. | p_equiv (Holm) | p_diff (Holm) | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        by = {(r["H"], r["H0"], r["lam"], r["alpha"]): r for r in soft}
        for _, c in j.iterrows():
            r = by[(c["H"], c["H0"], c["lam"], c["alpha"])]
            key = "test" if c["check"].startswith("test") else "pair_gap"
            lines.append(
                f"| {c['H']} | {c['H0']} | {c['lam']:g} | {c['alpha']} | {c['branch']} | {c['check']} | "
                f"{c['theory']:.4f} | {cell(r['sims'], 30, key)} | {cell(r['sims'], 45, key)} | "
                f"{fmt_m(c['sim'], c['se'])} | {c['gap_se']:.2f} | {c['p_equiv_holm']:.3g} | "
                f"{c['p_diff_holm']:.3g} | {c['verdict']} |"
            )
        lines += [
            "",
            "Softmax: " + tally_text(tally(j)),
            "",
            "SE branches (test error, predicted objective L/n, matched-pair gap, converged):",
            "",
        ]
        for r in soft:
            for a, b in r["branches"].items():
                lines.append(
                    f"- H = {r['H']}, H0 = {r['H0']}, alpha = {r['alpha']}: {a}: test {b['test']:.4f}, "
                    f"objective {b['objective']:.5f} +- {b['objective_se']:.5f}, gap {f3(b['pair_gap'])}, "
                    f"converged {b['converged']}, {b['seconds']:.0f} s"
                )
            objs = [s["objective"] for s in r["sims"] if s["objective"] is not None and s["d"] == 45]
            lines.append(
                f"  ERM d = 45: objective {np.mean(objs):.5f}, matched M per seed "
                + "; ".join(str(np.round(s["head_M"], 3).tolist()) for s in r["sims"] if s["d"] == 45)
            )
        lines.append("")
    if trans:
        lines += [
            "## Specialisation along alpha, H = H0 = 3, seq2lab, T = 2, lam = 0.01",
            "",
            "Per-head specialisation: matched overlap minus the head's mean unmatched overlap, over Q0's gap "
            "(0: unspecialised, 1: the head equals its teacher). SE branches: unspecialised, "
            "permutation-symmetric specialised (from M = 0.6 Q0), general ansatz from a specialised start with "
            "the heads' symmetry broken (M = 0.6 Q0 + 0.05 diag(1, 0, -1) Q0_diag); each branch followed down "
            "in alpha from its alpha = 7 point (each point started from its neighbour). "
            "ERM: 3 starts, d = 30 (2 seeds).",
            "",
            "| alpha | SE unspec.: test, objective | SE specialised: heads, test, objective | "
            "SE general: heads, test, objective | ERM d = 30: heads (per seed), test |",
            "|---|---|---|---|---|",
        ]
        for a in sorted(trans["se"]):
            s = trans["se"][a]

            def b(x: dict | None) -> str:
                if x is None:
                    return "-"
                hg = ", ".join(f3(g) for g in sorted(x["head_gaps"], reverse=True))
                return f"[{hg}], {x['test']:.4f}, {x['objective']:.5f}{'' if x['converged'] else ' (not converged)'}"

            u = s.get("unspecialised")
            sims = trans["erm"].get(a, [])

            def e(d: int) -> str:
                xs = [x for x in sims if x["d"] == d]
                return "; ".join(
                    "[" + ", ".join(f3(g) for g in sorted(x["head_gaps"], reverse=True)) + "]" for x in xs
                ) + (f", {np.mean([x['test'] for x in xs]):.4f}" if xs else "-")

            lines.append(
                f"| {a} | {u['test']:.4f}, {u['objective']:.5f} | {b(s.get('specialised'))} | "
                f"{b(s.get('general'))} | {e(30)} |"
                if u
                else f"| {a} | - | - | - | {e(30)} |"
            )
        for ans, x in trans.get("strong", {}).items():
            hg = ", ".join(f3(g) for g in sorted(x["head_gaps"], reverse=True))
            lines.append(
                f"- SE {ans} ansatz at alpha = {x['alpha']} started from ERM's mean matched heads (d = 30): "
                f"heads [{hg}], test {x['test']:.4f}, objective {x['objective']:.5f}, converged "
                f"{x['converged']}, {x['seconds']:.0f} s"
            )
        for a2, x in trans.get("strong_down", {}).items():
            hg = ", ".join(f3(g) for g in sorted(x["head_gaps"], reverse=True))
            lines.append(
                f"- that specialised branch followed down, alpha = {a2}: heads [{hg}], test {x['test']:.4f}, "
                f"objective {x['objective']:.5f}, converged {x['converged']}, {x['seconds']:.0f} s"
            )
        lines.append("")
    text = "\n".join(lines) + "\n"
    (out / "tables.md").write_text(text)
    return text


# ---- stability: the two transition points of H = H0 = 3 -----------------------------------------------------

#: alphas of the unspecialised point's specialisation eigenvalue (``eps = 0.02``, the report figure's step)
STABILITY_ALPHAS = (2.5, 3.5, 5.0, 7.0)


def run_stability(alpha: float) -> dict:
    """The unspecialised fixed point of ``H = H0 = 3`` and its specialisation eigenvalue (draw errors off: the
    objective's error is the quadrature's and the penalty's)."""
    e = specialisation_eigenvalue(problem_for("seq2lab", 3, 3, 2, 1e-2, alpha), SEOptions(draw_errors=False), eps=0.02)
    r = e["result"]
    return dict(
        alpha=alpha,
        **{"lambda": e["lambda"]},
        gap_at_fixed_point=e["gap_at_fixed_point"],
        gap_in=list(e["gap_in"]),
        test=r.test_error,
        objective=float(r.extras["objective"]),
        objective_se=float(r.extras["objective_se"]),
        converged=bool(r.converged),
        seconds=r.runtime_s,
    )


def stability_text(stab: dict[float, dict], trans: dict) -> str:
    """The two transition points of ``H = H0 = 3`` by the report figure's rule (``figures.multihead.transitions``):
    the eigenvalue's crossing of 1 on ``STABILITY_ALPHAS``, and the objective crossing of the strongly specialised
    branch (``transitions-strong``: the SE from ERM's heads at alpha = 7, followed down) with the unspecialised
    point."""
    down = {
        **{float(k): v for k, v in trans.get("strong_down", {}).items()},
        float(TRANSITION_ERM_ALPHAS[-1]): trans.get("strong", {}).get("specialised"),
    }
    grid = sorted(set(stab) | {a for a, v in down.items() if v is not None and a in stab})
    unspec = {a: stab[a] for a in grid}
    spec = {
        a: {
            "objective": v["objective"],
            "objective_se": v["objective_se"],
            "converged": v["converged"],
            "specialisation": float(np.mean(v["head_gaps"])),
        }
        for a, v in down.items()
        if v is not None and a in stab
    }
    tr = transitions(grid, unspec, spec)
    lines = [
        "## Transition points, H = H0 = 3 (report figure's rule)",
        "",
        "| alpha | unspecialised: test, objective | specialisation eigenvalue (eps = 0.02) | map's gap at the fixed "
        "point / gap put in | strong branch: mean head index, objective |",
        "|---|---|---|---|---|",
    ]
    for a in grid:
        u, v = stab[a], spec.get(a)
        lines.append(
            f"| {a:g} | {u['test']:.4f}, {u['objective']:.5f} +- {u['objective_se']:.5f} | "
            f"{u['lambda']:.3f} | {u['gap_at_fixed_point'] / u['gap_in'][0]:.1f} | "
            + (
                f"{v['specialisation']:.2f}, {v['objective']:.5f} +- {v['objective_se']:.5f}"
                f"{'' if v['converged'] else ' (not converged)'}"
                if v
                else "-"
            )
            + " |"
        )
    for key, name in (("crossing", "objective crossing"), ("stability", "loss of stability (eigenvalue 1)")):
        lines.append(f"- {name}: {transition_text(tr[key])}")
    return "\n".join(lines) + "\n"


# ---- main ---------------------------------------------------------------------------------------------------


def main(
    quick: bool = False, parts: list[str] | None = None, *, cache: str | Path | None = None, workers: int = 1
) -> int:
    """Run the named ``parts`` (default: only the tables of what is cached) and write ``results/`` (the cache
    directory with ``quick``); 0."""
    parts = list(parts or ["tables"])
    root = Path(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    store = Cache(root)
    out = root if quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    ref = reference_seconds()
    print(f"reference workload: {ref:.2f} s", flush=True)
    global LINEAR_SIZES, LINEAR_SIZES_SMALL_ALPHA, SOFTMAX_SIZES, TRANSITION_SIZES
    if quick:
        LINEAR_SIZES, SOFTMAX_SIZES, TRANSITION_SIZES = {20: 3, 30: 2}, {20: 2, 25: 2}, {20: 1}
        LINEAR_SIZES_SMALL_ALPHA = LINEAR_SIZES
    lin_pts = LINEAR[:2] if quick else LINEAR
    soft_pts = SOFTMAX[2:3] if quick else SOFTMAX
    only_cached = "tables" in parts

    def get(spec: dict, fn, run: bool):
        return cached(store, spec, fn if run else None)  # a lookup only when not run

    lin, soft, trans = [], [], None
    if "linear" in parts or "linear-more" in parts or only_cached:
        for pt in lin_pts:
            spec = {"stage": "mh-linear", "point": list(pt), "sizes": linear_sizes(pt[-1])}
            r = get(spec, lambda: run_linear(pt), not only_cached)
            if r is not None and pt[-1] >= 0.1 and not quick:
                more = {"stage": "mh-linear-more", "point": list(pt), "sizes": LINEAR_MORE}
                extra = get(
                    more,
                    lambda: {"sims": erm("linear", pt, LINEAR_MORE, starts=2, first_seed=LINEAR_SIZES)},
                    "linear-more" in parts,
                )
                if extra is not None:
                    r = dict(r, sims=r["sims"] + extra["sims"])
            if r is not None:
                lin.append(r)
                print(
                    f"linear {pt}: theory {r['theory']:.4f}, d=inf {extrapolate(r['sims'])[0]:.4f}, "
                    f"{r['seconds']:.0f} s",
                    flush=True,
                )
    if "linear-wide" in parts:
        wide_sizes = {10: 3, 20: 2} if quick else LINEAR_WIDE
        wide_pts = [pt for pt in lin_pts if pt[-1] >= 0.1][: 1 if quick else None]
        wide = run_linear_wide(store, wide_pts, wide_sizes, workers, True)
        (out / "linear_wide.json").write_text(json.dumps(wide))
        text = linear_wide_text(wide, wide_sizes, ref)
        (out / "linear_wide.md").write_text(text)
        print(text)
    if "softmax-wide" in parts:
        sizes_w = {10: 3, 14: 2} if quick else SOFTMAX_WIDE
        wide_s = softmax_wide_rows(store, soft_pts, sizes_w, workers, True)
        (out / "softmax_wide.json").write_text(json.dumps(wide_s))
        text = softmax_wide_text(wide_s, sizes_w, ref)
        (out / "softmax_wide.md").write_text(text)
        print(text)
    if "softmax" in parts or only_cached:
        for pt in soft_pts:
            spec = {"stage": "mh-softmax", "point": list(pt), "sizes": SOFTMAX_SIZES}
            r = get(spec, lambda: run_softmax(pt), not only_cached)
            if r is not None:
                soft.append(r)
                print(
                    f"softmax {pt}: best {r['best']} {r['branches'][r['best']]['test']:.4f}, "
                    f"d=inf {extrapolate(r['sims'])[0]:.4f}, {r['seconds']:.0f} s",
                    flush=True,
                )
    if "transitions" in parts or "transitions-erm" in parts or "transitions-strong" in parts or only_cached:
        trans = {"se": {}, "erm": {}}
        prev: dict = {"unspecialised": None, "specialised": None, "general": None}
        for a in TRANSITION_ALPHAS[:1] if quick else TRANSITION_ALPHAS:
            trans["se"][a] = {}
            for ans in ("unspecialised", "specialised", "general"):
                # the first point from the ansatz's own start, the next ones from their neighbour's fixed point
                init = prev[ans] if prev[ans] is not None else (general_start(a) if ans == "general" else None)
                spec = {
                    "stage": "mh-trans-se",
                    "alpha": a,
                    "ansatz": ans,
                    "init": None
                    if init is None
                    else {
                        k: np.round(np.asarray(init[k], float), 8).tolist() for k in ("head_Q", "head_M", "head_Sigma")
                    },
                }
                r = get(spec, lambda: run_transition_se(a, ans, init), "transitions" in parts and not only_cached)
                if r is not None:
                    trans["se"][a][ans] = prev[ans] = r
                    print(
                        f"trans SE alpha={a} {ans}: heads {np.round(r['head_gaps'], 3)}, test {r['test']:.4f}, "
                        f"obj {r['objective']:.5f}, conv {r['converged']}, {r['seconds']:.0f} s",
                        flush=True,
                    )
        for a in TRANSITION_ERM_ALPHAS[:1] if quick else TRANSITION_ERM_ALPHAS:
            spec = {"stage": "mh-trans-erm", "alpha": a, "sizes": TRANSITION_SIZES}
            r = get(
                spec,
                lambda: {"sims": erm("seq2lab", (3, 3, 2, 1e-2, a), TRANSITION_SIZES, starts=3)},
                "transitions-erm" in parts,
            )
            if r is not None:
                r = trans["erm"][a] = r["sims"]
                print(
                    f"trans ERM alpha={a}: "
                    + "; ".join(f"d={x['d']} {np.round(x['head_gaps'], 2)} {x['test']:.4f}" for x in r),
                    flush=True,
                )
    if trans and ("transitions-strong" in parts or only_cached) and TRANSITION_ERM_ALPHAS[-1] in trans["erm"]:
        # the SE from ERM's strongly specialised heads: the mean over seeds of the matched head_Q, head_M
        a = TRANSITION_ERM_ALPHAS[-1]
        sims = trans["erm"][a]
        start = dict(
            head_Q=np.mean([x["head_Q"] for x in sims], axis=0).tolist(),
            head_M=np.mean([x["head_M"] for x in sims], axis=0).tolist(),
            head_Sigma=trans["se"][a]["general"]["head_Sigma"],
        )
        trans["strong"] = {}
        for ans in ("specialised", "general"):
            spec = {
                "stage": "mh-trans-se-strong",
                "alpha": a,
                "ansatz": ans,
                "init": {k: np.round(np.asarray(start[k], float), 8).tolist() for k in start},
            }
            r = get(spec, lambda: run_transition_se(a, ans, start), "transitions-strong" in parts)
            if r is not None:
                trans["strong"][ans] = r
                print(
                    f"trans SE from ERM's heads, alpha={a} {ans}: heads {np.round(r['head_gaps'], 3)}, "
                    f"test {r['test']:.4f}, obj {r['objective']:.5f}, conv {r['converged']}, {r['seconds']:.0f} s",
                    flush=True,
                )
        # the strongly specialised branch followed down in alpha (specialised ansatz, each from its neighbour)
        prev_r = trans["strong"].get("specialised")
        trans["strong_down"] = {}
        for a2 in STRONG_DOWN_ALPHAS:
            if prev_r is None:
                break
            init = {k: prev_r[k] for k in ("head_Q", "head_M", "head_Sigma")}
            spec = {
                "stage": "mh-trans-se-strong",
                "alpha": a2,
                "ansatz": "specialised",
                "init": {k: np.round(np.asarray(init[k], float), 8).tolist() for k in init},
            }
            r = get(spec, lambda: run_transition_se(a2, "specialised", init), "transitions-strong" in parts)
            if r is None:
                break
            trans["strong_down"][a2] = prev_r = r
            print(
                f"trans SE strong branch, alpha={a2}: heads {np.round(r['head_gaps'], 3)}, test {r['test']:.4f}, "
                f"obj {r['objective']:.5f}, conv {r['converged']}, {r['seconds']:.0f} s",
                flush=True,
            )
    if "stability" in parts:
        stab = {}
        for a in STABILITY_ALPHAS[-1:] if quick else STABILITY_ALPHAS:
            r = get({"stage": "mh-stability", "alpha": a}, lambda: run_stability(a), True)
            stab[a] = r
            print(
                f"stability alpha={a}: lambda {r['lambda']:.3f}, objective {r['objective']:.5f}, {r['seconds']:.0f} s",
                flush=True,
            )
        saved = json.loads((RESULTS / "transitions.json").read_text())  # the strong branch of transitions-strong
        text = stability_text(stab, saved)
        (out / "stability.json").write_text(json.dumps({str(k): v for k, v in stab.items()}))
        (out / "stability.md").write_text(text)
        print(text)
    for name, rows in (("linear", lin), ("softmax", soft)):
        if rows:
            (out / f"{name}.json").write_text(json.dumps(rows))
    if trans:
        (out / "transitions.json").write_text(
            json.dumps(
                {
                    "se": {str(k): v for k, v in trans["se"].items()},
                    "erm": {str(k): v for k, v in trans["erm"].items()},
                    "strong": trans.get("strong", {}),
                    "strong_down": {str(k): v for k, v in trans.get("strong_down", {}).items()},
                }
            )
        )
    if lin or soft or trans or only_cached:
        print(write_tables(out, lin, soft, trans, ref))
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument(
        "parts",
        nargs="*",
        default=["tables"],
        help="linear, linear-more (further seeds), linear-wide (d = 20 and 100), softmax-wide (d = 20 and "
        "60), softmax, transitions (the SE), transitions-erm, "
        "transitions-strong, stability (H = H0 = 3: the eigenvalue and both transition points), "
        "tables (only what is cached)",
    )
    ap.add_argument("--quick", action="store_true", help="small sizes and one point per part; writes no results")
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/multihead_validation)")
    ap.add_argument(
        "--workers", type=int, default=1, help="processes for the fits of linear-wide and softmax-wide (default 1)"
    )
    a = ap.parse_args(argv)
    if a.workers < 1:
        ap.error(f"--workers must be an integer >= 1 (got {a.workers})")
    return main(a.quick, a.parts, cache=a.cache, workers=a.workers)


if __name__ == "__main__":
    raise SystemExit(cli())

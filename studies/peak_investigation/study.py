"""Why ERM and the replica-symmetric SE part at the lam = 1e-5 interpolation peak (README.md).

Run ``python -m studies peak_investigation STAGE [--cache DIR]`` with one thread per process
(``OMP_NUM_THREADS=1 MKL_NUM_THREADS=1``), STAGE one of:

* ``erm``: the finite-size ladder at alpha = 0.3, with two inits on the first data sets;
* ``optim``: Adam vs L-BFGS at d = 100;
* ``overlap``: pairs of minimisers at d = 40-80;
* ``path``: ERM at alpha = 0.25;
* ``se``: the SE on each prox branch along alpha, the replicon, and the linear-channel check;
* ``direct``: the direct student (SE, ERM, and the SE with each seed's own target spectrum);
* ``grid``: unconverged SE on fresh random grids, with continuation in lam;
* ``report``: the tables, written to ``results/peak.md`` (the default stage);
* ``figure``: the documentation's figure ``docs/findings/peak_finite_size.png``.

Every fit and SE point is cached in the result cache (default ``runs/studies/peak_investigation``), so a
killed run resumes. ``report`` reads the cache; only a missing SE point is computed. The reading of the
numbers is in ``results/peak_findings.md``. ``--quick``: the SE on the three prox branches at alpha = 0.2
and 0.3 (d = 100), printed, nothing written to ``results/``.

The point: seq2lab, T = 2, MP(0.5) target, kappa = 1 (factorized student), label noise Delta = 0.5,
lam = 1e-5, alpha = 0.3 (alpha = 0.2 the control). The candidates tested:

1. finite size: L-BFGS (float32 then float64 polish) at growing d, extrapolated with
   ``a + b d^-c`` for c = 1, 1/2, 2/3 (chi^2/dof, residuals, the d = inf interval);
2. the optimizer: Adam vs L-BFGS from 8 initialisations on each of a few data sets at d = 100;
3. the prox branch: the SE with the output prox's global minimum (the library's) against the
   SE with the local minimum reached by Newton from ``z`` or from the teacher's logits;
4. RS stability: the smooth replicon and the prox-jump share (:func:`singlehead.state_evolution.stability`);
5. the overlap ``||S_1 - S_2||_F^2/d`` between minimisers from two initialisations on the same data.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from singlehead import MPTarget, Problem, stability, theory, theory_curve
from singlehead.runs import Cache, cached
from studies import study_parser
from studies.peak_investigation import tables as rep
from studies.peak_investigation.branches import per_seed_theory, solve_branch
from studies.peak_investigation.erm import fit_instance
from studies.peak_investigation.grid import grid_section, run_grid

HERE = Path(__file__).resolve().parent
STAGES = ("erm", "optim", "overlap", "path", "se", "direct", "grid", "report", "figure")

BASE = dict(T=2, beta=1.0, beta0=1.0, target=MPTarget(0.5), channel="seq2lab", kappa=1.0, noise=0.5, lam=1e-5)
ALPHA = 0.3
#: finite-size ladder at alpha = 0.3: d -> data seeds (each fitted from init 0); the first
#: ``OVERLAP_SEEDS`` data seeds are also fitted from init 1 for the overlap. Run in this order
#: (small d first: the largest sizes cost the most and can be cut).
SIZES = {60: 16, 80: 16, 100: 16, 200: 16, 140: 8, 300: 16}
OVERLAP_SEEDS = 2
#: optimizer study at d = 100: data seeds x initialisations, both optimizers
OPTIM_D, OPTIM_DATA, OPTIM_INITS = 100, (0, 1), 8
#: overlap study: at each d, data seeds x initialisations (all pairs of inits on each data set)
OVERLAP_DS, OVERLAP_DATA, OVERLAP_INITS = (40, 60, 80), 4, 4
#: ERM off the peak point, to hold the prox branches against ERM where they part most (alpha = 0.25)
PATH_ALPHAS, PATH_SIZES = (0.25,), {100: 8}
#: fresh random grids of valid problems (seeds the tests do not use) for the unconverged-SE corner
GRID_SEEDS, GRID_N = (2026, 2027), 100
#: the SE path in alpha (global branch, a warm-started chain) and the points solved on each local branch
SE_ALPHAS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
BRANCH_ALPHAS = (0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
LINEAR_ALPHAS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)
#: the direct (Frobenius) student of the factorized-vs-direct figure (MP(0.05) target,
#: Delta = 0.05) at its smallest lam, alpha = 0.1-0.2
DIRECT_BASE = dict(
    T=2, beta=1.0, beta0=1.0, target=MPTarget(0.05), channel="seq2lab", student="direct", noise=0.05, lam=1e-3
)
DIRECT_SIZES = {40: 8, 60: 8, 100: 8}
DIRECT_ALPHAS = (0.1, 0.2)
DIRECT_SE_ALPHAS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3)


def problem(d: int, alpha: float = ALPHA, **kw) -> Problem:
    return Problem(d=d, alpha=alpha, **{**BASE, **kw})


def direct_problem(d: int, alpha: float) -> Problem:
    return Problem(d=d, alpha=alpha, **DIRECT_BASE)


def run_erm(
    cache: Cache, sizes: dict[int, int], make, tag: str, only: list[int] | None = None, cached_only: bool = False
) -> dict[int, list[dict]]:
    """L-BFGS fits of ``make(d)`` per size (data seeds ``range(sizes[d])``, the first ``OVERLAP_SEEDS``
    also from init 1), small sizes first so that the largest can be cut; returns the records by d."""
    out: dict[int, list[dict]] = {}
    for d, k in sizes.items():
        if only is not None and d not in only:
            continue
        for s in range(k):
            inits = [0, 1] if s < OVERLAP_SEEDS else [0]
            prob = make(d)
            # the alpha = 0.3 ladder keeps the stage name "erm" of its first runs (the cache key)
            key = {
                "stage": "erm" if tag == "peak" else f"erm-{tag}",
                "problem": prob.to_dict(),
                "data_seed": s,
                "inits": inits,
                "opt": "lbfgs",
            }
            if cached_only:
                rec = cached(cache, key)
                if rec is not None:
                    out.setdefault(d, []).append(rec)
                continue
            t0 = time.perf_counter()
            rec = cached(cache, key, lambda: fit_instance(prob, s, inits))
            out.setdefault(d, []).append(rec)
            if time.perf_counter() - t0 > 1:
                f = rec["fits"][0]
                print(
                    f"erm-{tag} d={d} seed={s} inits={inits}: test {f['test_error']:.4f} train {f['train_error']:.5f} "
                    f"dist {rec['distances']} ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    return out


def run_overlap(cache: Cache, cached_only: bool = False) -> dict[int, list[dict]]:
    """L-BFGS from ``OVERLAP_INITS`` initialisations on each of ``OVERLAP_DATA`` data sets per d."""
    out: dict[int, list[dict]] = {}
    inits = list(range(OVERLAP_INITS))
    for d in OVERLAP_DS:
        for s in range(OVERLAP_DATA):
            key = {"stage": "overlap", "problem": problem(d).to_dict(), "data_seed": s, "inits": inits, "opt": "lbfgs"}
            rec = cached(cache, key, None if cached_only else lambda: fit_instance(problem(d), s, inits))
            if rec is not None:
                out.setdefault(d, []).append(rec)
    return out


def run_optim(cache: Cache, cached_only: bool = False) -> dict[tuple[str, int], dict]:
    out = {}
    inits = list(range(OPTIM_INITS))
    for s in OPTIM_DATA:
        for opt in ("lbfgs", "adam"):
            key = {"stage": "optim", "problem": problem(OPTIM_D).to_dict(), "data_seed": s, "inits": inits, "opt": opt}
            if cached_only:
                if (rec := cached(cache, key)) is not None:
                    out[(opt, s)] = rec
                continue
            t0 = time.perf_counter()
            out[(opt, s)] = cached(cache, key, lambda: fit_instance(problem(OPTIM_D), s, inits, optimizer=opt))
            print(
                f"optim {opt} seed={s}: objectives "
                f"{[round(f['objective'], 6) for f in out[(opt, s)]['fits']]} ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    return out


def _result_row(r, st=None) -> dict:
    ex = r.extras
    row = {
        "q": ex["q"],
        "m": ex["m"],
        "Sigma": ex["Sigma"],
        "test_error": r.test_error,
        "train_error": r.train_error,
        "converged": bool(r.converged),
        "residual": ex["residual"],
    }
    if st is not None:
        row |= {
            "replicon": st.replicon,
            "jump_weight": st.prox_jump_share,
            "jump_weight_err": st.prox_jump_share_se,
            "output_factor": st.output_factor,
            "prior_factor": st.prior_factor,
        }
    return row


def run_se_path(
    cache: Cache, base: Problem, alphas: tuple[float, ...], branch_alphas: tuple[float, ...], tag: str
) -> dict:
    """Global-branch SE chain over ``alphas`` (with the RS check) and the local-branch fixed points."""

    def chain() -> dict:
        res = theory_curve(base.replace(alpha=alphas[0]), list(alphas))
        return {str(a): _result_row(r, stability(base.replace(alpha=a), r)) for a, r in zip(alphas, res)}

    glob = cached(cache, {"stage": f"se-{tag}", "problem": base.to_dict(), "alphas": list(alphas)}, chain)
    out = {"global": glob, "z": {}, "teacher": {}}
    for a in branch_alphas:
        g = glob[str(a)]
        for b in ("z", "teacher"):
            key = {"stage": f"branch-{tag}", "problem": base.replace(alpha=a).to_dict(), "branch": b}
            t0 = time.perf_counter()
            out[b][str(a)] = cached(
                cache, key, lambda: solve_branch(base.replace(alpha=a), np.array([g["q"], g["m"], g["Sigma"]]), b)
            )
            r = out[b][str(a)]
            if time.perf_counter() - t0 > 1:
                print(
                    f"{tag} alpha={a} {b:<7}: test {r['test_error']:.4f} train {r['train_error']:.5f} "
                    f"replicon {r['replicon']:.2f} jumps {100 * r['jump_weight']:.1f} % residual {r['residual']:.1e} "
                    f"({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    return out


def linear_replicon(cache: Cache) -> dict:
    """The replicon where RS is exact (linear channel, convex: kappa = 1) and where the rank cap binds."""

    def run() -> dict:
        rows = []
        for lam in (1e-5, 1e-3):
            for kappa in (1.0, 0.3):
                for a in LINEAR_ALPHAS:
                    p = problem(100, a, channel="linear", lam=lam, kappa=kappa)
                    r = theory(p)
                    st = stability(p, r)
                    rows.append(
                        {
                            "lam": lam,
                            "kappa": kappa,
                            "alpha": a,
                            "replicon": st.replicon,
                            "converged": bool(r.converged),
                            "cap_binds": bool(r.extras.get("cap_binds")),
                        }
                    )
        return {"rows": rows}

    return cached(cache, {"stage": "linear-replicon", "alphas": list(LINEAR_ALPHAS)}, run)


REPLICON_FORMULA = """The replicon (de Almeida–Thouless) factor of an SE fixed point, in the normalisation of the SE
(`singlehead.state_evolution.stability`):

    AT = [2 alpha E ||H (I + Sigma H)^{-1}||_F^2] * [P / Sigmahat^2],
    P  = ∫∫ ((f(x) - f(y)) / (x - y))^2 mu_delta(dx) mu_delta(dy),   f(x) = (x - eps)_+ ,

with `H` the Hessian of the fit loss `||Y - chan(M(h))||_F^2` at the prox point `h*` (K-vector coordinates),
`mu_delta = mu_S0 ⊞ SC(delta^2)`, `delta = sqrt(qhat)/mhat`, `eps = 2 lam/mhat`. RS is locally stable iff AT < 1.
The SE's own `Sigmahat = 2 alpha E tr H (I + Sigma H)^{-1}` (pointwise) and `Sigma = (1/Sigmahat) ∫∫ (f(x) -
f(y))/(x - y)` are the first powers of the same two Jacobians; the replicon takes their squares. Where the prox's
minimiser jumps between branches as `z` moves, Stein's `Sigmahat` counts the jumps and the pointwise trace does
not: the jump share `1 - Sigmahat_Stein / Sigmahat_pointwise` is reported beside AT \
(a jump is a delta function in the Jacobian, so
AT is then only a lower bound of the formal replicon)."""


def _finite_size_section(cache: Cache, se: dict) -> list[str]:
    erm = run_erm(cache, SIZES, problem, "peak", cached_only=True)
    a = str(ALPHA)
    rows = []
    for name in ("test_error", "train_error", "q", "m"):
        rows += rep.extrapolation_rows(erm, name, {f"SE {b}": se[b][a][name] for b in ("global", "teacher", "z")})
    return [
        "## 1. Finite size (alpha = 0.3, L-BFGS float32 + float64 polish, init 0 of each data seed)",
        "",
        *rep.size_table(erm),
        "",
        "Extrapolation `a + b d^-c` (weighted least squares on the seed means; covariance inflated by chi²/dof "
        "when > 1; 95 % interval; residuals in standard errors, one per d in increasing order; `free c` "
        "minimises chi² over c in [0.2, 3]; at an end of that range the exponent is not determined by the data). "
        "`q = Tr S²/d`, `m = Tr S S0/d`: the test error is a function of "
        "(q, m) alone.",
        "",
        "| quantity | model | d = ∞ (95 % CI) | chi²/dof | residuals | SE values inside? |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "SE at alpha = 0.3: "
        + "; ".join(
            f"{b}: test {se[b][a]['test_error']:.4f}, train {se[b][a]['train_error']:.5f}"
            f", q {se[b][a]['q']:.3f}, m {se[b][a]['m']:.3f}"
            for b in ("global", "teacher", "z")
        ),
        "",
    ]


def _overlap_section(cache: Cache) -> list[str]:
    erm = run_erm(cache, SIZES, problem, "peak", cached_only=True)
    ov = run_overlap(cache, cached_only=True)
    optim = run_optim(cache, cached_only=True)
    return [
        "## 5. Overlap of independent minimisers on the same data",
        "",
        "RS predicts that two minimisers of the same data coincide at d = ∞ (`‖S1−S2‖²/d → 0`). Pairs of "
        f"initialisations: {OVERLAP_INITS} inits on each of {OVERLAP_DATA} data sets at d = "
        f"{', '.join(map(str, OVERLAP_DS))} (all pairs), and inits 0, 1 on the first {OVERLAP_SEEDS} data sets "
        "of the finite-size ladder (the d = 100 optimizer study below has 28 pairs per data set).",
        "",
        "Overlap study:",
        "",
        *rep.overlap_table(ov, all_pairs=True),
        "",
        f"Optimizer study (L-BFGS, {OPTIM_INITS} inits):",
        "",
        *rep.overlap_table({OPTIM_D: [r for (o, _), r in optim.items() if o == "lbfgs"]}, all_pairs=True),
        "",
        "Finite-size ladder:",
        "",
        *rep.overlap_table(erm),
        "",
    ]


def report(cache: Cache, out: Path) -> None:
    """Print the tables and write the markdown summary ``out`` from the cache (SE points are solved if missing)."""
    se = run_se_path(cache, problem(100), SE_ALPHAS, BRANCH_ALPHAS, "peak")
    lines = [
        "# The interpolation peak at lam = 1e-5",
        "",
        "Generated by `python -m studies peak_investigation report` from the cached runs (stages `erm`, `optim`, "
        "`se`, `direct`). Point: seq2lab, T = 2, MP(0.5) target, kappa = 1, Delta = 0.5, lam = 1e-5.",
        "",
    ]
    lines += _finite_size_section(cache, se) + _overlap_section(cache)
    optim = run_optim(cache, cached_only=True)
    lines += [
        f"## 2. Optimizer: {OPTIM_INITS} initialisations per data set, d = {OPTIM_D}, alpha = {ALPHA}",
        "",
        "Both end with the float64 L-BFGS polish; objective `L/n` in float64.",
        "",
        *rep.optim_table(optim),
        "",
        *[f"- {x}" for x in rep.optim_cross(optim)],
        "",
    ]
    lines += [
        "## 3. The prox branch: SE with the global vs a local minimum of the output prox",
        "",
        "`global`: the library's SE (a warm chain from alpha = 0.1; min over Newton runs from z, the "
        "interpolating point and their midpoint); `teacher`: Newton from the teacher's logits (beta0/beta) y; "
        "`z`: Newton from the student's field z. Residual: relative change of (q, m, Sigma) in one SE step.",
        "",
        *rep.branch_table(se, SE_ALPHAS),
        "",
    ]
    for a in PATH_ALPHAS:
        erm = run_erm(cache, PATH_SIZES, lambda d: problem(d, a), f"path{a}", cached_only=True)
        if erm:
            lines += [
                f"ERM at alpha = {a} (finite d only; the SE values of the table above for comparison):",
                "",
                *rep.size_table(erm),
                "",
            ]
    lin = linear_replicon(cache)["rows"]
    lines += [
        "## 4. RS stability (replicon)",
        "",
        REPLICON_FORMULA,
        "",
        "Linear channel (RS exact for kappa = 1, the problem being convex in S; kappa = 0.3: the rank cap binds "
        "and f jumps at the cut-off, AT = inf):",
        "",
        "| lam | kappa | " + " | ".join(f"alpha {a}" for a in LINEAR_ALPHAS) + " |",
        "|---|---|" + "---|" * len(LINEAR_ALPHAS),
    ]
    for lam in (1e-5, 1e-3):
        for kap in (1.0, 0.3):
            vals = [r["replicon"] for r in lin if r["lam"] == lam and r["kappa"] == kap]
            lines.append(f"| {lam:g} | {kap:g} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    lines += [""]
    lines += _direct_section(cache) + grid_section(cache, GRID_SEEDS, GRID_N)
    text = "\n".join(lines) + "\n"
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


def _direct_section(cache: Cache) -> list[str]:
    se = run_se_path(cache, direct_problem(100, 0.1), DIRECT_SE_ALPHAS, DIRECT_ALPHAS + (0.15,), "direct")
    se_peak = run_se_path(
        cache, problem(100, 0.1, student="direct"), DIRECT_SE_ALPHAS, DIRECT_ALPHAS + (0.15,), "direct-peak"
    )
    lines = [
        "## The direct student (MP(0.05) target, Delta = 0.05, lam = 1e-3)",
        "",
        *rep.branch_table(se, DIRECT_SE_ALPHAS),
        "",
        "The direct student on the peak problem (MP(0.5), Delta = 0.5, lam = 1e-5), SE only:",
        "",
        *rep.branch_table(se_peak, DIRECT_SE_ALPHAS),
        "",
    ]
    for a in DIRECT_ALPHAS:
        erm = run_erm(cache, DIRECT_SIZES, lambda d: direct_problem(d, a), f"direct{a}", cached_only=True)
        if not erm:
            continue
        th = {f"SE {b}": se[b][str(a)]["test_error"] for b in ("global", "teacher", "z") if str(a) in se[b]}
        gaps, gap_vals = [], {}
        for d in sorted(erm):
            g = [
                rec["fits"][0]["test_error"]
                - per_seed_theory(cache, lambda dd: direct_problem(dd, a), d, i)["test_error"]
                for i, rec in enumerate(erm[d])
            ]
            ths = [
                per_seed_theory(cache, lambda dd: direct_problem(dd, a), d, i)["test_error"] for i in range(len(erm[d]))
            ]
            gm, gs = rep.mean_se(g)
            tm, ts = rep.mean_se(ths)
            gaps.append(f"| {d} | {len(g)} | {tm:.4f} ± {ts:.4f} | {gm:+.4f} ± {gs:.4f} |")
            gap_vals[d] = g
        lines += [
            f"### alpha = {a}",
            "",
            *rep.size_table(erm),
            "",
            "SE with each seed's own target spectrum (CustomTarget of the drawn S0's eigenvalues) and the "
            "paired gap ERM − SE(seed):",
            "",
            "| d | seeds | SE(seed) test error | ERM − SE(seed) |",
            "|---|---|---|---|",
            *gaps,
            "",
            "| quantity | model | d = ∞ (95 % CI) | chi²/dof | residuals | 0 inside? |",
            "|---|---|---|---|---|---|",
            *rep.extrapolation_rows_values(gap_vals, "ERM − SE(seed)", {"0": 0.0}),
            "",
            "| quantity | model | d = ∞ (95 % CI) | chi²/dof | residuals | SE values inside? |",
            "|---|---|---|---|---|---|",
            *rep.extrapolation_rows(erm, "test_error", th),
            "",
            *rep.overlap_table(erm),
            "",
        ]
    return lines


def main(
    quick: bool = False, *, stage: str = "report", cache: str | Path | None = None, sizes: list[int] | None = None
) -> int:
    """Run ``stage`` (see the module docstring); with ``quick``, the SE on the three prox branches at
    alpha = 0.2 and 0.3 instead, printed. 0."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES} (got {stage!r})")
    if os.environ.get("OMP_NUM_THREADS") != "1":
        print("note: set OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 (the stages are sized for one thread per process)")
    store = Cache(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    if quick:
        alphas = (0.2, 0.3)
        se = run_se_path(store, problem(100, alphas[0]), alphas, alphas[1:], "peak-quick")
        print("\n".join(rep.branch_table(se, alphas)))
        return 0
    if stage == "erm":
        run_erm(store, SIZES, problem, "peak", sizes)
    elif stage == "optim":
        run_optim(store)
    elif stage == "path":
        for a in PATH_ALPHAS:
            run_erm(store, PATH_SIZES, lambda d: problem(d, a), f"path{a}")
    elif stage == "overlap":
        run_overlap(store)
    elif stage == "se":
        linear_replicon(store)
        run_se_path(store, problem(100), SE_ALPHAS, BRANCH_ALPHAS, "peak")
    elif stage == "figure":
        se = run_se_path(store, problem(100), SE_ALPHAS, BRANCH_ALPHAS, "peak")
        rep.finding_figure(
            run_erm(store, SIZES, problem, "peak", cached_only=True),
            {b: se[b][str(ALPHA)]["test_error"] for b in ("global", "teacher")},
            HERE.parents[1] / "docs" / "findings" / "peak_finite_size.png",
        )
    elif stage == "direct":
        run_se_path(store, direct_problem(100, 0.1), DIRECT_SE_ALPHAS, DIRECT_ALPHAS + (0.15,), "direct")
        run_se_path(
            store, problem(100, 0.1, student="direct"), DIRECT_SE_ALPHAS, DIRECT_ALPHAS + (0.15,), "direct-peak"
        )
        for a in DIRECT_ALPHAS:
            run_erm(store, DIRECT_SIZES, lambda d: direct_problem(d, a), f"direct{a}")
            for d, k in DIRECT_SIZES.items():
                for s in range(k):
                    per_seed_theory(store, lambda dd: direct_problem(dd, a), d, s)
    elif stage == "grid":
        run_grid(store, GRID_SEEDS, GRID_N)
    elif stage == "report":
        report(store, HERE / "results" / "peak.md")
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("stage", nargs="?", default="report", choices=STAGES)
    ap.add_argument("--quick", action="store_true", help="the SE on the prox branches at alpha = 0.2, 0.3 only")
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/peak_investigation)")
    ap.add_argument("--sizes", type=int, nargs="*", default=None, help="erm: only these d")
    a = ap.parse_args(argv)
    return main(a.quick, stage=a.stage, cache=a.cache, sizes=a.sizes)


if __name__ == "__main__":
    raise SystemExit(cli())

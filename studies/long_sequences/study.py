"""Long sequences (T = 16 ... 64): quadrature error, theory against ERM, and what length does (README.md).

Run ``python -m studies long_sequences [STAGE ...] [--quick]`` with one thread (``OMP_NUM_THREADS=1``), STAGE
among (default: all, in this order):

* ``quadrature``: the state evolution at ``T = 16, 32, 64`` on three node scrambles (``node_seed`` 0, 1, 2)
  and on 4 times the default nodes per scramble, at three points (seq2lab, MP(0.5) target, factorized
  student): noiseless at ``alpha = 0.5``, ``lam = 0.01`` (the benchmark's point), and ``Delta = 0.5`` at
  ``alpha = 2 alpha_interp(T)`` with ``lam = 0.01`` and with ``lam = LAM_SCALED/c_T``. Compares the movement of the test
  error with the quadrature standard
  error the result reports (``extras["quadrature_error"]["test_error"]``); ``results/quadrature.md``.
* ``validate``: ERM against the state evolution at ``T = 16, 32``, channels seq2lab and seq2seq,
  ``alpha = alpha_interp(T)/2`` and ``2 alpha_interp(T)`` (``Delta = 0.5``, ``lam = LAM_SCALED/c_T``), ERM at
  ``--sizes`` (default ``d = 100, 200``) with ``--seeds`` seeds each (default 32), extrapolated to ``d = inf``
  by a weighted fit ``a + b/d`` of the seed means; the state evolution on 4 times the default nodes, its
  reported quadrature s.e. added to the extrapolation's in quadrature. Each channel's four points judged as
  the report judges a figure (``singlehead.report.verdict.judge``: tolerance ``max(3 % of the theory,
  0.005)`` for the finite size beyond ``a + b/d``, difference test and equivalence test at 5 %, Holm per
  channel); an inconclusive row states the seeds that would decide it. ``results/table.md`` and
  ``results/validate.json``.
* ``length``: the state evolution at ``T = 2, 4, 8, 16, 32, 64`` (``Delta = 0.5``, ``lam = LAM_SCALED/c_T``)
  along ``alpha/alpha_interp(T)`` in ``RATIOS``, at the fixed ``alpha = FIXED_ALPHA``, at ``2 alpha_interp``
  with the fixed ``lam = LAM_FIXED``, with both thresholds of
  :mod:`singlehead.thresholds` and the learned spectrum's rank fraction; ``results/length.md`` and
  ``results/length.json``.
* ``figure``: the documentation's figure ``docs/findings/long_sequences.png`` from the two JSON files.

Every theory point and ERM fit is cached (default ``runs/studies/long_sequences``). ``--quick``: ``T = 16``
only, ``d = 40/60``, 2 seeds, one channel, the quadrature at ``T = 16``; printed, nothing written.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from singlehead import MPTarget, Problem, SEOptions, interpolation_threshold, perfect_recovery_threshold
from singlehead.analysis import finite_size_gaps
from singlehead.report.verdict import judge, tally, tally_text
from singlehead.runs import Cache, Job, run_jobs
from singlehead.thresholds import informative_directions
from studies import echo_into, study_parser

HERE = Path(__file__).resolve().parent
FIGURE = HERE.parents[1] / "docs" / "findings" / "long_sequences.png"
STAGES = ("quadrature", "validate", "length", "figure")

TOL_REL, TOL_ABS = 0.03, 0.005
NOISE = 0.5
#: lam c_T of the scaled problems (lam = 0.05 at T = 2): the collapse point lam_c falls like 1/c_T at fixed
#: alpha c_T, so a fixed lam collapses long sequences (see results/quadrature.md and results/length.md)
LAM_SCALED = 0.1
#: the fixed lam of the comparison rows
LAM_FIXED = 0.01
#: sequence lengths of the length scan, of the quadrature check and of the validation
LENGTHS, QUAD_LENGTHS, VALID_LENGTHS = (2, 4, 8, 16, 32, 64), (16, 32, 64), (16, 32)
#: alpha / alpha_interp(T) along the length scan (the validation's points are 0.5 and 2)
RATIOS = (0.25, 0.5, 1.0, 2.0, 4.0)
VALID_RATIOS = (0.5, 2.0)
#: the length scan's fixed sample ratio
FIXED_ALPHA = 0.05
CHANNELS = ("seq2lab", "seq2seq")
N_TEST = 2000


def c_T(T: int) -> int:
    """Informative logit directions per sequence of the softmax channels, ``(T^2 + T - 2)/2``."""
    return informative_directions(Problem(T=T))


def base(T: int, **kw: Any) -> Problem:
    """The study's problem at ``T``: MP(0.5) target, factorized student (kappa = 1), Delta = 0.5,
    ``lam = LAM_SCALED/c_T`` (unless given)."""
    values = dict(T=T, noise=NOISE, lam=LAM_SCALED / c_T(T), target=MPTarget(0.5), channel="seq2lab")
    values.update(kw)
    return Problem(**values)


def alpha_interp(T: int) -> float:
    """``alpha_interp`` of the study's problem at ``T`` (the same for both softmax channels)."""
    return interpolation_threshold(base(T))


def _rel(x: float, ref: float) -> float:
    return abs(x - ref) / abs(ref)


# ------------------------------------------------------------------------------------------ quadrature
def quadrature_points() -> tuple[tuple[str, Any], ...]:
    """The quadrature stage's points: (label, problem at ``T``)."""
    return (
        ("noiseless, alpha = 0.5, lam = 0.01", lambda T: base(T, noise=0.0, alpha=0.5, lam=LAM_FIXED)),
        (
            "Delta = 0.5, alpha = 2 alpha_interp, lam = 0.01",
            lambda T: base(T, alpha=2 * alpha_interp(T), lam=LAM_FIXED),
        ),
        (
            f"Delta = 0.5, alpha = 2 alpha_interp, lam = {LAM_SCALED:g}/c_T",
            lambda T: base(T, alpha=2 * alpha_interp(T)),
        ),
    )


def quadrature(store: Cache, lengths: tuple[int, ...]) -> list[str]:
    """The quadrature stage's table (markdown lines)."""
    lines: list[str] = []
    say = echo_into(lines)
    say("# Quadrature error of the state evolution at long sequences")
    say("")
    say(
        "Test error on the default node set (`node_seed = 0`; 4 scrambles of the default nodes per scramble), "
        "its relative movement on two other scrambles (`node_seed = 1, 2`) and on 4x the nodes per scramble, "
        "against the quadrature standard error the result reports (`extras['quadrature_error']['test_error']`, "
        "relative to the test error). `z`: the largest movement over the combined reported s.e. of the two "
        "results compared (`|te_k - te_0| / sqrt(se_0^2 + se_k^2)`). `fixed point`: `q` of each solve "
        "(default, seeds 1, 2, 4x), which shows when the solves found different fixed points."
    )
    say("")
    say(
        "| point | T | nodes/scramble | test error | reported s.e. (rel) | node_seed 1, 2 (rel) | 4x nodes (rel) "
        "| z | q: default; seeds 1, 2; 4x | converged | seconds (default, 4x) |"
    )
    say("|---" * 11 + "|")
    for label, make in quadrature_points():
        for T in lengths:
            p = make(T)
            pts = SEOptions().points(p)
            settings = [(("node_seed", k),) for k in (0, 1, 2)] + [(("n_points", 4 * pts),)]
            recs = run_jobs([Job("theory", p, None, k) for k in settings], store, desc=f"quadrature T={T}")
            te = [r["test_error"] for r in recs]
            se = [r["quadrature_error"]["test_error"] for r in recs]
            z = max(abs(t - te[0]) / math.hypot(se[0], e) for t, e in zip(te[1:], se[1:]))
            conv = ["yes" if r["converged"] else f"no ({r.get('diagnosis')})" for r in recs]
            say(
                f"| {label} | {T} | {pts} | {te[0]:.6g} | {se[0] / te[0]:.1e} | "
                f"{_rel(te[1], te[0]):.1e}, {_rel(te[2], te[0]):.1e} | {_rel(te[3], te[0]):.1e} | {z:.1f} | "
                f"{recs[0]['q']:.4g}; {recs[1]['q']:.4g}, {recs[2]['q']:.4g}; {recs[3]['q']:.4g} | "
                f"{', '.join(sorted(set(conv)))} | {recs[0]['runtime_s']:.0f}, {recs[3]['runtime_s']:.0f} |"
            )
    return lines


# ------------------------------------------------------------------------------------------ validation
def validation_problems(lengths: tuple[int, ...], channels: tuple[str, ...]) -> list[Problem]:
    """The validation's points (``d`` set later), channel-major."""
    return [base(T, channel=c, alpha=r * alpha_interp(T)) for c in channels for T in lengths for r in VALID_RATIOS]


def theory_4x(store: Cache, lengths: tuple[int, ...]) -> dict[tuple[int, float], dict[str, Any]]:
    """The validation's state evolution per ``(T, alpha/alpha_interp)``: seq2lab (the equations of seq2seq are the
    same), on 4 times the default nodes per scramble (``SEOptions.points``), whose reported quadrature s.e.
    enters the error bar."""
    probs = [base(T, alpha=r * alpha_interp(T)) for T in lengths for r in VALID_RATIOS]
    jobs = [Job("theory", p, None, (("n_points", 4 * SEOptions().points(p)),)) for p in probs]
    recs = run_jobs(jobs, store, desc="theory (4x nodes)")
    return {(p.T, r): rec for p, r, rec in zip(probs, [r for _ in lengths for r in VALID_RATIOS], recs)}


def validate(
    store: Cache, sizes: tuple[int, ...], seeds: tuple[int, ...], lengths: tuple[int, ...], channels: tuple[str, ...]
) -> tuple[list[str], list[dict[str, Any]]]:
    """The validation table (markdown lines) and its rows (for the figure): ``seeds[i]`` fits at ``sizes[i]``."""
    lines: list[str] = []
    say = echo_into(lines)
    dd = ", ".join(map(str, sizes))
    say("# Long sequences: ERM against the state evolution")
    say("")
    say(
        f"ERM (L-BFGS, d = {dd}; {', '.join(map(str, seeds))} seeds, {N_TEST} test sequences per fit) "
        "extrapolated to d = inf by a weighted fit a + b/d of the seed means (per-size s.e. from the seeds' spread) "
        f"against the state evolution on 4x the default nodes; MP(0.5) target, factorized student, Delta = {NOISE}, "
        f"lam = {LAM_SCALED:g}/c_T. s.e.: the extrapolation's and the SE's reported quadrature s.e. in quadrature. "
        f"Tolerance max({100 * TOL_REL:g} % of the theory, {TOL_ABS}): finite size beyond a + b/d. Verdicts by "
        "difference and equivalence tests at 5 %, Holm per channel (`singlehead.report.verdict.judge`). "
        "`seeds to decide`: the seeds at which the equivalence test of the row alone would pass at 5 % "
        "(Holm's first step, level 5 %/m with m rows per channel) if its gap stayed the same, "
        "as a multiple of the seeds at every size (the "
        "extrapolation's s.e. falling like 1/sqrt(seeds), the quadrature s.e. fixed)."
    )
    th = theory_4x(store, lengths)
    out: list[dict[str, Any]] = []
    for channel in channels:
        probs = validation_problems(lengths, (channel,))
        jobs = [
            Job("simulation", p.replace(d=d), s, (("n_test", N_TEST),))
            for p in probs
            for d, k in zip(sizes, seeds)
            for s in range(k)
        ]
        recs = iter(run_jobs(jobs, store, desc=f"ERM {channel}"))
        rows = []
        for p in probs:
            per_d = {d: [next(recs)["test_error"] for _ in range(k)] for d, k in zip(sizes, seeds)}
            t = th[(p.T, round(p.alpha / alpha_interp(p.T), 9))]
            te, qse = t["test_error"], t["quadrature_error"]["test_error"]
            g = finite_size_gaps(per_d, te)
            e = g.extrapolation
            se = math.hypot(e.stderr, qse)
            rows.append(
                dict(
                    channel=channel,
                    T=p.T,
                    ratio=p.alpha / alpha_interp(p.T),
                    alpha=p.alpha,
                    n=[p.replace(d=d).n for d in sizes],
                    theory=te,
                    quad_se=qse,
                    sim_d=[te + x for x in g.gap],
                    sim=te + e.intercept,
                    se=se,
                    gap=abs(e.intercept),
                    chi2_p=e.p_value,
                    theory_converged=bool(t["converged"]),
                    tol_rel=TOL_REL,
                    tol_abs=TOL_ABS,
                )
            )
        judged = judge(pd.DataFrame(rows))
        say("")
        say(f"## {channel}")
        say("")
        say(
            f"| T | alpha/alpha_interp | alpha | n (d = {dd}) | theory (quad. s.e.) | "
            + " | ".join(f"ERM d={d}" for d in sizes)
            + " | ERM d=inf | s.e. | gap/theory | p_diff (Holm) "
            "| p_equiv (Holm) | verdict | seeds to decide |"
        )
        say("|---" * (12 + len(sizes)) + "|")
        z1 = float(norm.isf(0.05 / len(judged)))
        needs = []
        for r in judged.itertuples():
            tol = max(TOL_REL * abs(r.theory), TOL_ABS)
            room = (tol - r.gap) / z1  # the s.e. at which the row alone passes
            if r.verdict != "inconclusive":
                need = "—"
            elif r.gap >= tol:
                need = "none: the gap exceeds the tolerance"
            elif room <= r.quad_se:
                need = "none: the quadrature s.e. alone is too large"
            else:
                need = f"x{(r.se**2 - r.quad_se**2) / (room**2 - r.quad_se**2):.1f}"
            needs.append(need)
            say(
                f"| {r.T} | {r.ratio:g} | {r.alpha:.4g} | {', '.join(map(str, r.n))} | "
                f"{r.theory:.4f} ({r.quad_se:.4f}) | "
                + " | ".join(f"{x:.4f}" for x in r.sim_d)
                + f" | {r.sim:.4f} | {r.se:.4f} | {100 * r.gap / abs(r.theory):.1f} % | "
                f"{r.p_diff_holm:.3f} | {r.p_equiv_holm:.3f} | {r.verdict} | {need} |"
            )
        say("")
        say(f"{channel}: {tally_text(tally(judged))}")
        judged["seeds_to_decide"] = needs
        out += judged[
            [
                "channel",
                "T",
                "ratio",
                "alpha",
                "n",
                "theory",
                "quad_se",
                "sim_d",
                "sim",
                "se",
                "gap",
                "p_diff_holm",
                "p_equiv_holm",
                "verdict",
                "seeds_to_decide",
            ]
        ].to_dict("records")
    return lines, out


# ------------------------------------------------------------------------------------------ length
def length_scan(store: Cache, lengths: tuple[int, ...]) -> tuple[list[str], dict[str, Any]]:
    """The length scan's table (markdown lines) and its data (for the figure)."""
    lines: list[str] = []
    say = echo_into(lines)
    data: dict[str, Any] = {
        "ratios": list(RATIOS),
        "fixed_alpha": FIXED_ALPHA,
        "lam_scaled": LAM_SCALED,
        "lam_fixed": LAM_FIXED,
        "T": {},
    }
    say("# What length does: the state evolution at T = " + ", ".join(map(str, lengths)))
    say("")
    say(
        f"seq2lab (the theory of seq2seq is the same), MP(0.5) target, factorized student, Delta = {NOISE}, "
        f"lam = {LAM_SCALED:g}/c_T unless said otherwise. c_T = (T^2 + T - 2)/2 informative logit directions per "
        "sequence; alpha_perf is the noiseless perfect-recovery threshold; lam_c is the complete-collapse point "
        "(S = 0 is a fixed point for lam >= lam_c) at alpha = 2 alpha_interp."
    )
    say("")
    say(
        "| T | c_T | alpha_interp | c_T alpha_interp | alpha_perf | c_T alpha_perf | lam_c at 2 alpha_interp | "
        "c_T lam_c |"
    )
    say("|---" * 8 + "|")
    thresholds = {}
    for T in lengths:
        c = c_T(T)
        ai, ap = alpha_interp(T), perfect_recovery_threshold(base(T, noise=0.0))
        thresholds[T] = (c, ai, ap)
        data["T"][str(T)] = {"c_T": c, "alpha_interp": ai, "alpha_perf": ap}
    for T in lengths:
        c, ai, ap = thresholds[T]
        ai = alpha_interp(T)
        alphas = sorted([r * ai for r in RATIOS] + [FIXED_ALPHA])
        recs = run_jobs([Job("theory", base(T, alpha=a)) for a in alphas], store, desc=f"length T={T}")
        # lam = LAM_FIXED at 2 alpha_interp: the quadrature stage's default-node solve (same cache record)
        fixed_lam = run_jobs(
            [Job("theory", base(T, alpha=2 * ai, lam=LAM_FIXED), None, (("node_seed", 0),))],
            store,
            desc=f"fixed lam T={T}",
        )[0]
        by = {round(r["problem"]["alpha"] / ai, 9): r for r in recs}
        fixed = next(r for r in recs if r["problem"]["alpha"] == FIXED_ALPHA)
        curve = [by[round(r, 9)] for r in RATIOS]
        lam_c = by[round(2.0, 9)]["collapse_lam"]
        entry = data["T"][str(T)]
        entry.update(
            test_error=[r["test_error"] for r in curve],
            rank_fraction=[r["rank_fraction"] for r in curve],
            converged=[bool(r["converged"]) for r in curve],
            fixed_test_error=fixed["test_error"],
            fixed_rank_fraction=fixed["rank_fraction"],
            fixed_converged=bool(fixed["converged"]),
            seconds=[r["runtime_s"] for r in curve],
            lam_c=lam_c,
            fixed_lam_test_error=fixed_lam["test_error"],
            fixed_lam_rank_fraction=fixed_lam["rank_fraction"],
            fixed_lam_converged=bool(fixed_lam["converged"]),
        )
        say(f"| {T} | {c} | {ai:.4g} | {c * ai:.6f} | {ap:.4g} | {c * ap:.6f} | {lam_c:.3g} | {c * lam_c:.3g} |")
    say("")
    say(
        "Test error / rank fraction (fraction of non-zero eigenvalues of the learned S; its zero atom is 1 minus it) "
        f"along r = alpha/alpha_interp(T), at the fixed alpha = {FIXED_ALPHA:g}, and at r = 2 with the fixed "
        f"lam = {LAM_FIXED:g} instead of {LAM_SCALED:g}/c_T:"
    )
    say("")
    say(
        "| T | "
        + " | ".join(f"r = {r:g}" for r in RATIOS)
        + f" | alpha = {FIXED_ALPHA:g} | r = 2, lam = {LAM_FIXED:g} |"
    )
    say("|---" * (len(RATIOS) + 3) + "|")
    for T in lengths:
        e = data["T"][str(T)]
        vals = list(zip(e["test_error"], e["rank_fraction"], e["converged"]))
        vals += [
            (e["fixed_test_error"], e["fixed_rank_fraction"], e["fixed_converged"]),
            (e["fixed_lam_test_error"], e["fixed_lam_rank_fraction"], e["fixed_lam_converged"]),
        ]
        say(
            f"| {T} | "
            + " | ".join(f"{t:.4g} / {k:.3f}" + ("" if ok else " (unconverged)") for t, k, ok in vals)
            + " |"
        )
    say("")
    say(
        f"Collapse check: test error at fixed r (lam = {LAM_SCALED:g}/c_T) divided by its value at T = "
        f"{lengths[-1]} (1: the curves collapse when alpha and lam are measured in units of 1/c_T):"
    )
    say("")
    say("| T | " + " | ".join(f"r = {r:g}" for r in RATIOS) + " |")
    say("|---" * (len(RATIOS) + 1) + "|")
    last = data["T"][str(lengths[-1])]["test_error"]
    for T in lengths:
        te = data["T"][str(T)]["test_error"]
        say(f"| {T} | " + " | ".join(f"{a / b:.4f}" for a, b in zip(te, last)) + " |")
    return lines, data


# ------------------------------------------------------------------------------------------ figure
def figure(length: dict[str, Any], valid: list[dict[str, Any]], path: Path) -> None:
    """Three panels: test error along alpha/alpha_interp per T (theory lines, ERM at d = inf), test error and
    thresholds against T, rank fraction along alpha/alpha_interp; written to ``path`` (PNG)."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    Ts = sorted(int(t) for t in length["T"])
    cmap = colormaps["viridis"]
    color = {T: cmap(i / max(len(Ts) - 1, 1)) for i, T in enumerate(Ts)}
    from matplotlib.ticker import NullFormatter

    fig = Figure(figsize=(15, 4.4), layout="constrained")
    ax1, ax2, ax3 = fig.subplots(1, 3, gridspec_kw={"wspace": 0.08})
    r = np.asarray(length["ratios"])
    for T in Ts:
        e = length["T"][str(T)]
        ax1.plot(r, e["test_error"], "-", color=color[T], label=f"T = {T}")
        ax3.plot(r, e["rank_fraction"], "-", color=color[T], label=f"T = {T}")
    marker = {"seq2lab": "o", "seq2seq": "s"}
    for v in valid:
        ax1.errorbar(
            v["ratio"] * (1.04 if v["channel"] == "seq2seq" else 0.96),
            v["sim"],
            yerr=2 * v["se"],
            fmt=marker[v["channel"]],
            mfc="none",
            color=color[v["T"]],
            capsize=2,
            ms=5,
        )
    for ch, m in marker.items():
        ax1.plot([], [], m, mfc="none", color="k", label=f"ERM {ch}, d = ∞ (±2 s.e.)")
    ax1.axvline(1.0, color="0.6", lw=0.8, ls=":")
    ax1.set(
        xscale="log",
        xlabel="alpha / alpha_interp(T)   (alpha_interp = 0.307 / c_T)",
        ylabel="test error",
        title="test error (state evolution: lines)",
    )
    ax1.legend(fontsize=7)
    ax2.plot(
        Ts,
        [length["T"][str(T)]["fixed_test_error"] for T in Ts],
        "o-",
        color="k",
        label=f"test error at alpha = {length['fixed_alpha']:g}",
    )
    ax2.set(xscale="log", yscale="log", xlabel="T", ylabel="test error")
    ax2.set_xticks(Ts, [str(T) for T in Ts])
    tw = ax2.twinx()
    c = np.array([length["T"][str(T)]["c_T"] for T in Ts], float)
    tw.plot(Ts, [length["T"][str(T)]["alpha_interp"] for T in Ts], "^--", color="tab:red", label="alpha_interp")
    tw.plot(
        Ts, [length["T"][str(T)]["alpha_perf"] for T in Ts], "v--", color="tab:blue", label="alpha_perf (noiseless)"
    )
    tw.plot(Ts, 0.307 / c, ":", color="0.5", label="0.307 / c_T")
    tw.axhline(length["fixed_alpha"], color="k", lw=0.6, ls="-.")
    tw.set(yscale="log", ylabel="threshold alpha")
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = tw.get_legend_handles_labels()
    ax2.legend(h1 + h2, l1 + l2, fontsize=7, loc="lower left")
    ax2.set_title("fixed alpha against T, and the thresholds")
    for T in Ts:
        ax3.plot(2.0, length["T"][str(T)]["fixed_lam_rank_fraction"], "x", color=color[T], ms=7)
    ax3.plot([], [], "x", color="k", label=f"r = 2 with the fixed lam = {length['lam_fixed']:g}")
    ax3.axvline(1.0, color="0.6", lw=0.8, ls=":")
    ax3.set(
        xscale="log",
        xlabel="alpha / alpha_interp(T)",
        ylabel="rank fraction of S (1 - zero atom)",
        title="learned spectrum",
    )
    ax3.legend(fontsize=7)
    for ax in (ax1, ax3):
        ax.set_xticks(list(r), [f"{x:g}" for x in r])
    for ax in (ax1, ax2, ax3):
        ax.xaxis.set_minor_formatter(NullFormatter())
    fig.suptitle(
        f"seq2lab/seq2seq, MP(0.5) target, Delta = {NOISE}, lam = {LAM_SCALED:g}/c_T, factorized student", fontsize=9
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")


# ------------------------------------------------------------------------------------------ command line
def main(
    quick: bool = False,
    *,
    stages: tuple[str, ...] = STAGES,
    seeds: tuple[int, ...] = (32, 32),
    sizes: tuple[int, ...] = (100, 200),
    cache: str | Path | None = None,
) -> int:
    """Run ``stages`` (results written to ``results/`` and the figure to the docs unless ``quick``)."""
    store = Cache(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    res = HERE / "results"
    if not quick:
        res.mkdir(exist_ok=True)
    else:
        sizes, seeds = (40, 60), (2, 2)
    if "quadrature" in stages:
        lines = quadrature(store, (16,) if quick else QUAD_LENGTHS)
        if not quick:
            (res / "quadrature.md").write_text("\n".join(lines) + "\n")
    if "validate" in stages:
        lines, rows = validate(
            store, sizes, seeds, (16,) if quick else VALID_LENGTHS, CHANNELS[:1] if quick else CHANNELS
        )
        if not quick:
            (res / "table.md").write_text("\n".join(lines) + "\n")
            (res / "validate.json").write_text(json.dumps(rows, indent=1) + "\n")
    if "length" in stages:
        lines, data = length_scan(store, (2, 16) if quick else LENGTHS)
        if not quick:
            (res / "length.md").write_text("\n".join(lines) + "\n")
            (res / "length.json").write_text(json.dumps(data, indent=1) + "\n")
    if "figure" in stages and not quick:
        figure(json.loads((res / "length.json").read_text()), json.loads((res / "validate.json").read_text()), FIGURE)
        print(f"wrote {FIGURE}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("stages", nargs="*", default=[], metavar="STAGE", help=f"among {', '.join(STAGES)} (default: all)")
    ap.add_argument("--quick", action="store_true", help="T = 16 only, d = 40/60, 2 seeds; writes no results")
    ap.add_argument("--sizes", default="100,200", help="the validation's d, comma-separated (default 100,200)")
    ap.add_argument(
        "--seeds", default="32", help="the validation's seeds per size: one count, or one per size (default 32)"
    )
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/long_sequences)")
    a = ap.parse_args(argv)
    bad = [s for s in a.stages if s not in STAGES]
    if bad:
        ap.error(f"STAGE must be among {', '.join(STAGES)} (got {', '.join(bad)})")
    try:
        sizes = tuple(int(x) for x in a.sizes.split(","))
        seeds = tuple(int(x) for x in a.seeds.split(","))
    except ValueError:
        ap.error(f"--sizes and --seeds must be comma-separated integers (got {a.sizes!r}, {a.seeds!r})")
    seeds = seeds * len(sizes) if len(seeds) == 1 else seeds
    if len(sizes) < 2 or len(seeds) != len(sizes) or min(sizes) < 1 or min(seeds) < 2:
        ap.error(
            f"--sizes must hold at least 2 sizes >= 1 and --seeds one count >= 2 or one per size "
            f"(got {a.sizes!r}, {a.seeds!r})"
        )
    return main(a.quick, stages=tuple(a.stages) or STAGES, seeds=seeds, sizes=sizes, cache=a.cache)


if __name__ == "__main__":
    raise SystemExit(cli())

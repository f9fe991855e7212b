"""Weight decay from the theory against a validation set: the figure ``tuned_lam``.

The state evolution tunes the weight decay by itself: :func:`~singlehead.tune` returns ``lam*``,
the ``lam`` of lowest predicted test error, and that error ``err*``. A practitioner training by
ERM at finite ``d`` picks ``lam`` with a validation set instead. The figure compares the two on
the MP base problem (:data:`~singlehead.figures.figspec.BASE`, factorized student, ``kappa = 1``)
at each alpha of :class:`TunedLamSpec`:

- theory: ``lam*``, ``err*`` and the test-error curve over ``lam* 10^x``, ``|x| <= theory_span``
  (:func:`~singlehead.theory_curve`, one node set);
- ERM: L-BFGS students on the grid ``lam* 10^(k lam_step)``, ``|k| <= lam_steps``, the same seeds
  at every ``lam`` (the curve of one seed shares its training data); a run's error on its own
  test set (drawn independently of its training data) is its validation error;
- each seed's validation curve picks a ``lam`` (:func:`~singlehead.analysis.validation_pick`: grid
  minimum refined by a parabola in ``log10 lam``) and that seed is trained again there.

Agreement rows, per alpha, each with its declared tolerance:

(a) the ERM test error at ``lam*`` against ``err*`` (3 % of it, floor 0.005: finite size and
    quadrature, as in errors vs alpha);
(b) the mean over seeds of ``log10`` of the picked ``lam`` (its standard error over seeds)
    against ``log10 lam*``, with the absolute tolerance ``h`` in ``log10 lam`` read off the theory
    curve (:func:`~singlehead.analysis.valley_halfwidth`): every ``lam`` within a factor ``10^h``
    of ``lam*`` has a predicted error within ``band`` (1 %) of ``err*``, so a pick inside it is the
    theory's choice for every practical purpose. A relative tolerance has no meaning on a log
    scale (``tol_rel = 0``);
(c) the ERM test error at the validated ``lam`` (mean over seeds) against ``err*``, tolerance as (a).

The validation error of (b) and the test error of (c) come from the same test set of a seed; the
pick moves ``lam`` within a grid step, where the errors of one seed's data differ by less than
their common test-set noise, so (c) is only slightly optimistic.
"""

from __future__ import annotations

import functools
import math
import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from singlehead.analysis.tuning import tune, validation_pick, valley_halfwidth
from singlehead.figures.figspec import (
    BASE,
    Context,
    FigureDef,
    FigureRun,
    new_figure,
    params_text,
    problem_params,
    register,
    stopping_rule,
)
from singlehead.figures.spec import FigureSpec
from singlehead.model.problem import Problem
from singlehead.report.compare import DEFAULT_ALLOWANCE, DEFAULT_TOL_ABS, records_to_frame, tol_columns
from singlehead.report.verdict import MAX_TOL_REL
from singlehead.runs import Job
from singlehead.state_evolution import theory_curve

__all__ = ["TunedLamSpec", "tuned_theory", "tuned_lam_grid", "tuned_lam_run", "tuned_lam_plot", "tuned_lam_caption"]


@dataclass(frozen=True)
class TunedLamSpec(FigureSpec):
    """Sizes of the tuned-lam figure: at each alpha of ``alphas``, L-BFGS students (``seeds`` at ``d``,
    ``n_test`` test sequences) on the grid ``lam* 10^(k lam_step)``, ``|k| <= lam_steps`` (``lam_step`` in
    decades), and the theory curve on ``theory_points`` values of ``log10(lam/lam*)`` evenly spaced in
    ``[-theory_span, theory_span]`` (``lam*`` added). ``band``: the relative rise of the predicted error
    that bounds the valley (the tolerance of the picked ``lam``). ``lam_range``: where
    :func:`~singlehead.tune` searches. ``fit_rtol`` (``None``: the
    :class:`~singlehead.sim.simulation.TrainOptions` defaults) is the L-BFGS stopping rule, both the
    float32 phase's and the float64 polish's relative objective change."""

    d: int = 100
    seeds: int = field(default=3, metadata={"min": 2})
    alphas: tuple[float, ...] = (0.5, 1.0)
    lam_steps: int = 2
    lam_step: float = 1.0 / 3.0
    theory_points: int = field(default=41, metadata={"min": 3})
    theory_span: float = 1.0
    band: float = 0.01
    lam_range: tuple[float, float] = (1e-5, 10.0)
    n_test: int = 4000
    fit_rtol: float | None = 1e-6

    def check(self) -> None:
        reach = self.lam_steps * self.lam_step
        if self.theory_span < reach:
            raise ValueError(
                f"TunedLamSpec.theory_span must be >= lam_steps * lam_step = {reach:.3g} (the theory curve "
                f"covers the ERM grid) (got {self.theory_span!r})"
            )
        if self.band > MAX_TOL_REL:
            raise ValueError(f"TunedLamSpec.band must be a real number in (0, {MAX_TOL_REL:g}] (got {self.band!r})")
        if len(self.lam_range) != 2 or not self.lam_range[0] < self.lam_range[1]:
            raise ValueError(
                f"TunedLamSpec.lam_range must be a pair (low, high) with 0 < low < high (got {self.lam_range!r})"
            )

    def fit_options(self) -> dict[str, float]:
        """The L-BFGS stopping rule's options (empty: the defaults)."""
        return stopping_rule(self.fit_rtol)

    def offsets(self) -> np.ndarray:
        """``log10(lam/lam*)`` of the ERM grid."""
        return np.arange(-self.lam_steps, self.lam_steps + 1) * self.lam_step

    @classmethod
    def full(cls) -> TunedLamSpec:
        return cls(seeds=8, alphas=(0.5, 1.0, 2.0), lam_steps=3, theory_points=61, n_test=20000, fit_rtol=None)

    @classmethod
    def smoke(cls) -> TunedLamSpec:
        return cls(d=16, seeds=2, alphas=(1.0,), lam_steps=1, theory_points=9, lam_range=(1e-3, 1.0), n_test=500)


def _sig(x: float, digits: int = 6) -> float:
    """``x`` to ``digits`` significant digits (the simulated lam: cache keys that do not hang on the last bits)."""
    return float(f"{x:.{digits}g}")


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def tuned_theory(problem: Problem, lam_range: tuple[float, float], span: float, points: int) -> dict[str, Any]:
    """The tuned point of ``problem`` and the theory curve around it, as a JSON-able dict.

    ``lam_star``, ``err_star``, ``converged``, ``boundary`` and ``message`` of
    :func:`~singlehead.tune` (in ``lam_range``), and ``curve_lam``, ``curve_error`` (``None`` where
    the theory did not converge): the state evolution at ``lam* 10^x`` for ``points`` values of ``x``
    evenly spaced in ``[-span, span]`` and ``x = 0``, in increasing ``lam``.
    """
    t = tune(problem, lam_range=lam_range)
    out: dict[str, Any] = {
        "lam_star": t.lam,
        "err_star": t.test_error,
        "converged": t.converged,
        "boundary": t.boundary,
        "message": t.message,
        "curve_lam": [],
        "curve_error": [],
    }
    if not math.isfinite(t.lam):
        return out
    xs = np.unique(np.append(np.linspace(-span, span, points), 0.0))
    lams = [float(t.lam * 10.0**x) for x in xs]
    curve = theory_curve(problem.replace(lam=t.lam), lams, param="lam")
    out["curve_lam"] = lams
    out["curve_error"] = [float(r.test_error) if r.converged and math.isfinite(r.test_error) else None for r in curve]
    return out


def tuned_lam_grid(spec: TunedLamSpec) -> dict[str, Any]:
    """The base problem of each alpha and the cache name of its theory (the ERM grid follows from ``lam*``:
    :func:`tuned_lam_run`)."""
    base = [Problem(d=spec.d, alpha=a, kappa=1.0, **BASE) for a in spec.alphas]
    names = {
        a: (
            f"tuned-lam-theory-{p.key()}-range{spec.lam_range[0]:g}-{spec.lam_range[1]:g}-span"
            f"{spec.theory_span:g}-points{spec.theory_points}"
        )
        for a, p in zip(spec.alphas, base)
    }
    return {"base": dict(zip(spec.alphas, base)), "names": names}


def _seed_row(values: np.ndarray, theory: float) -> dict[str, Any]:
    """Mean over seeds, its standard error and degrees of freedom, the gap to ``theory`` (NaN values left out)."""
    v = values[np.isfinite(values)]
    k = v.size
    m = float(v.mean()) if k else math.nan
    se = float(v.std(ddof=1) / math.sqrt(k)) if k >= 2 else math.nan
    return {
        "theory": theory,
        "simulation": m,
        "se": se,
        "gap": abs(m - theory),
        "dof": float(k - 1) if k >= 2 else math.nan,
        "n_seeds": int(k),
    }


def tuned_lam_run(ctx: Context, spec: TunedLamSpec, grid: dict[str, Any]) -> FigureRun:
    """Theory (cached in-process values), the ERM grid, the validation picks, the fits there and the checks."""
    tasks = {
        grid["names"][a]: functools.partial(
            tuned_theory, p, tuple(spec.lam_range), spec.theory_span, spec.theory_points
        )
        for a, p in grid["base"].items()
    }
    values = ctx.cached_many(tasks, "theory: tuned lam and its valley")
    th = {a: values[grid["names"][a]] for a in spec.alphas}
    # the ERM grid around each lam*
    offsets = spec.offsets()
    grids = {
        a: [_sig(_num(th[a]["lam_star"]) * 10.0**x) for x in offsets]
        for a in spec.alphas
        if math.isfinite(_num(th[a]["lam_star"]))
    }
    problems = [grid["base"][a].replace(lam=lam) for a, lams in grids.items() for lam in lams]
    sim = records_to_frame(
        ctx.run(
            ctx.sim_jobs(problems, "lbfgs", seeds=spec.seeds, n_test=spec.n_test, **spec.fit_options()),
            "L-BFGS: lam grid around lam*",
        )
    )
    # each seed's pick, and a fit of that seed there
    picks: list[dict[str, Any]] = []
    for a, lams in grids.items():
        s_a = sim[sim.cfg_alpha == a]
        for seed in range(spec.seeds):
            s = s_a[s_a.seed == seed].set_index("cfg_lam").test_error.reindex(lams)
            if not np.isfinite(s.to_numpy(dtype=float)).any():
                continue
            picks.append({"cfg_alpha": a, "seed": seed, "lam_pick": _sig(validation_pick(lams, s.to_numpy(float)))})
    settings = ctx.sim_settings("lbfgs", n_test=spec.n_test, **spec.fit_options())
    jobs = [
        Job("simulation", grid["base"][p["cfg_alpha"]].replace(lam=p["lam_pick"]), p["seed"], settings) for p in picks
    ]
    at_pick = records_to_frame(ctx.run(jobs, "L-BFGS: at the validated lam"))
    pick = pd.DataFrame(picks, columns=["cfg_alpha", "seed", "lam_pick"])
    if len(at_pick):
        pick = pick.merge(at_pick[["cfg_alpha", "seed", "test_error"]], on=["cfg_alpha", "seed"], how="left")
    else:
        pick["test_error"] = np.nan
    rows, curves, halfwidths = [], [], {}
    for a in spec.alphas:
        t = th[a]
        lam_star, err_star = _num(t["lam_star"]), _num(t["err_star"])
        ok = bool(t["converged"]) and t["boundary"] is None and math.isfinite(err_star)
        c_lam = np.asarray(t["curve_lam"], dtype=float)
        c_err = np.asarray([_num(e) for e in t["curve_error"]], dtype=float)
        curves.append(
            pd.DataFrame(
                {"cfg_alpha": a, "cfg_lam": c_lam, "test_error": c_err, "lam_star": lam_star, "err_star": err_star}
            )
        )
        if a not in grids:
            continue
        h = (
            valley_halfwidth(c_lam, c_err, lam_star, err_star, spec.band)
            if ok and np.isfinite(c_err).any()
            else math.nan
        )
        halfwidths[a] = h
        key = {"cfg_alpha": a, "lam_star": lam_star}
        err_reason = (
            f"finite size (d = {spec.d}) and SE quadrature; ERM at the rounded lam* (6 digits), "
            "the error's change there is far below the tolerance"
        )
        at_star = sim[(sim.cfg_alpha == a) & np.isclose(sim.cfg_lam, grids[a][spec.lam_steps], rtol=1e-12)]
        rows.append(
            {
                **key,
                "quantity": "test_error at lam*",
                **_seed_row(at_star.test_error.to_numpy(float), err_star),
                **tol_columns(DEFAULT_ALLOWANCE, DEFAULT_TOL_ABS, err_reason),
                "theory_converged": ok,
            }
        )
        p_a = pick[pick.cfg_alpha == a]
        logs = np.log10(p_a.lam_pick.to_numpy(float))
        if math.isfinite(h):
            tol_h = h
            width = (
                f"flatness of the valley: within {h:.3f} in log10 lam (a factor {10**h:.2f}) of lam* the "
                f"theory's test error stays within {100 * spec.band:g} % of err* (from the theory curve, "
                f"{spec.theory_points} points over ±{spec.theory_span:g} decades); a picked lam inside it is "
                "lam* for the error it gives; no relative part on a log scale"
            )
        else:  # the curve never rises by band within its span (or no theory): the span is the tolerance
            tol_h = spec.theory_span
            width = (
                f"flatness of the valley: the theory's test error stays within {100 * spec.band:g} % of err* over "
                f"the whole curve (±{spec.theory_span:g} decades), taken as the tolerance; no relative part on "
                "a log scale"
            )
        ratios = ", ".join(f"{10 ** (x - math.log10(lam_star)):.2f}" for x in logs)
        cost = np.interp(logs.mean(), np.log10(c_lam), c_err) if len(logs) and np.isfinite(c_err).all() else math.nan
        rows.append(
            {
                **key,
                "quantity": "log10 lam picked by validation",
                **_seed_row(logs, math.log10(lam_star)),
                **tol_columns(0.0, tol_h, width),
                "theory_converged": ok,
                "note": f"picked lam / lam* per seed: {ratios}; theory error at the mean pick: "
                f"{cost:.5g} (err* {err_star:.5g}, +{100 * (cost / err_star - 1):.2f} %)",
            }
        )
        rows.append(
            {
                **key,
                "quantity": "test_error at the validated lam",
                **_seed_row(p_a.test_error.to_numpy(float), err_star),
                **tol_columns(
                    DEFAULT_ALLOWANCE,
                    DEFAULT_TOL_ABS,
                    f"finite size (d = {spec.d}) and SE quadrature; the pick uses the same test set "
                    "(within a grid step, below its noise)",
                ),
                "theory_converged": ok,
            }
        )
    curve = pd.concat(curves, ignore_index=True)
    p0 = next(iter(grid["base"].values()))
    k = spec.lam_steps
    params = problem_params(
        p0,
        ("kappa", 1.0),
        ("d", spec.d),
        ("seeds", spec.seeds),
        ("n_test", spec.n_test),
        ("ERM lam", f"lam*·10^({spec.lam_step:.4g} k), k = -{k}..{k}"),
        ("L-BFGS rtol", "default" if spec.fit_rtol is None else f"{spec.fit_rtol:g}"),
        ("valley band", f"{100 * spec.band:g} %"),
    )
    params.pop("lam")
    table = pd.concat(
        [
            curve.assign(kind="theory"),
            sim.assign(kind="simulation (lam grid)"),
            at_pick.assign(kind="simulation (validated lam)"),
            pick.assign(kind="validation pick"),
        ],
        ignore_index=True,
    )
    return FigureRun(
        table,
        pd.DataFrame(rows),
        params,
        {"curve": curve, "sim": sim, "pick": pick, "theory": th, "halfwidths": halfwidths},
    )


def tuned_lam_plot(spec: TunedLamSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """One panel per alpha: the theory's test error against lam (line) with lam* and its valley marked, the ERM
    error on the grid (mean ± s.e. over seeds), each seed's validation curve and pick."""
    curve, sim, pick = res.data["curve"], res.data["sim"], res.data["pick"]
    n = len(spec.alphas)
    fig, axes = new_figure(1, n, figsize=(4.8 * n, 4.2), squeeze=False)
    for ax, a in zip(axes[0], spec.alphas):
        lam_star, err_star = _num(res.data["theory"][a]["lam_star"]), _num(res.data["theory"][a]["err_star"])
        c = curve[curve.cfg_alpha == a].dropna(subset=["test_error"])
        if math.isfinite(lam_star):  # the curve over the ERM grid and half a step beyond
            reach = (spec.lam_steps + 0.5) * spec.lam_step + 1e-9
            c = c[np.abs(np.log10(c.cfg_lam / lam_star)) <= reach]
        ax.plot(c.cfg_lam, c.test_error, "-", color="k", lw=1.4, label="theory (state evolution)")
        if math.isfinite(lam_star) and math.isfinite(err_star):
            ax.plot([lam_star], [err_star], "*", color="k", ms=11, label=f"lam* = {lam_star:.3g}")
            h = res.data["halfwidths"].get(a, math.nan)
            if math.isfinite(h):
                ax.axvspan(
                    lam_star * 10**-h,
                    lam_star * 10**h,
                    color="0.85",
                    lw=0,
                    label=f"error within {100 * spec.band:g} % of err*",
                )
        s = sim[sim.cfg_alpha == a].dropna(subset=["test_error"])
        for seed, g in s.groupby("seed"):
            g = g.sort_values("cfg_lam")
            ax.plot(
                g.cfg_lam,
                g.test_error,
                "-",
                color="tab:blue",
                lw=0.6,
                alpha=0.35,
                label="validation curve per seed" if seed == s.seed.min() else None,
            )
        m = s.groupby("cfg_lam").test_error
        se = (m.std(ddof=1) / np.sqrt(m.size())).fillna(0.0)
        ax.errorbar(
            m.mean().index,
            m.mean().values,
            yerr=se.values,
            fmt="o",
            mfc="none",
            color="tab:blue",
            capsize=3,
            label="ERM (mean ± s.e.)",
        )
        p = pick[pick.cfg_alpha == a].dropna(subset=["test_error"])
        if len(p):
            ax.plot(p.lam_pick, p.test_error, "v", color="tab:red", ms=6, label="validation pick per seed (ERM there)")
            ax.axvline(10 ** np.log10(p.lam_pick).mean(), color="tab:red", ls=":", lw=1, label="mean pick (geometric)")
        ax.set(xscale="log", xlabel="lam", ylabel="test error per sequence", title=f"alpha = {a:g}")
    axes[0][0].legend(fontsize=6.5, loc="upper center")
    text = textwrap.fill(params_text(res.params), width=int(60 * n) + 40)
    fig.suptitle(f"Weight decay from the theory vs a validation set\n{text}", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def tuned_lam_caption(spec: TunedLamSpec, grid: dict[str, Any], res: FigureRun) -> str:
    hw = res.data["halfwidths"]
    widths = "; ".join(f"alpha = {a:g}: {h:.3f} (a factor {10**h:.2f})" for a, h in hw.items() if math.isfinite(h))
    k = spec.lam_steps
    return (
        f"Black: the state evolution's test error against lam, star at the tuned lam* (singlehead.tune). Blue: "
        f"L-BFGS students at d = {spec.d} on the grid lam*·10^({spec.lam_step:.4g} k), k = -{k}..{k}, mean ± "
        f"s.e. over {spec.seeds} seeds, and each seed's curve (the same data at every lam); a run's error on its "
        f"own {spec.n_test}-sequence test set is its validation error. Red: the lam each seed's curve picks (grid "
        "minimum refined by a parabola in log10 lam) and that seed trained there; dotted: the geometric mean of "
        f"the picks. Grey: the valley, where the predicted error is within {100 * spec.band:g} % of err*; its "
        f"half-width in log10 lam is the tolerance of the picked lam ({widths or 'not found'}). Checks: ERM error at "
        "lam* and at the validated lam against err* (3 %, floor 0.005), mean log10 of the picks against "
        "log10 lam*."
    )


register(
    FigureDef(
        "tuned_lam",
        "Weight decay from the theory vs a validation set",
        TunedLamSpec,
        tuned_lam_grid,
        tuned_lam_run,
        tuned_lam_plot,
        tuned_lam_caption,
    )
)

"""Report figure "multi-head attention": the theory of ``H = 2`` student heads against ERM.

Left, the linear channel, where the theory of several heads is exact (one effective head,
:func:`~singlehead.state_evolution.effective_single_head`): test error vs alpha for ``H0 = 1`` and
``H0 = 2`` teacher heads (lines), L-BFGS fits of two heads at several ``d`` (points), the
interpolation and perfect-recovery thresholds of the effective head (dotted, dash-dotted). Its
agreement rows: the test error at ``d = inf`` per simulated alpha and teacher, extrapolated by
``a + b/d`` as in the finite-size figure.

Middle and right, a softmax channel (seq2lab, ``H = H0 = 2``): the experimental state evolution
(:func:`singlehead.state_evolution.multihead_se.multihead_theory`, sampled prior) on its two symmetric
branches — the unspecialised fixed point and the specialised one, followed down in alpha from the top of
the grid — with its two transition points marked: where the specialised branch's predicted objective
drops below the unspecialised one's, and where the unspecialised point loses stability
(:func:`~singlehead.state_evolution.multihead_se.specialisation_eigenvalue` reaches 1). Against them,
L-BFGS fits of two heads (lowest objective of several starts) at one ``d``: the test error, the
specialisation index, and the per-head overlaps after matching the student heads to the teacher heads
(``head_M``: the mean of its diagonal, student head with its own teacher head, and of its
off-diagonal), each compared with the fixed point of lower predicted objective. Their tolerance is wider
(stated on the rows): the sampled prior's finite-size bias, one ``d``, and a theory that is experimental
(docs: Multi-head attention); their standard error includes the SE's own (prior draws and nodes).
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from singlehead.figures.figspec import Context, FigureDef, FigureRun, new_figure, params_text, problem_params, register
from singlehead.figures.finite_size import fit_note, gaps_from_frame, sim_jobs_per_d
from singlehead.figures.spec import FigureSpec, check_same_length
from singlehead.model.problem import MPTarget, Problem
from singlehead.report.compare import DEFAULT_ALLOWANCE, agreement, extrapolation_p_value, records_to_frame, tol_columns
from singlehead.state_evolution import SEOptions, effective_single_head
from singlehead.state_evolution.multihead_se import (
    multihead_theory,
    specialisation_eigenvalue,
    specialisation_index,
)
from singlehead.thresholds import interpolation_threshold, perfect_recovery_threshold

__all__ = ["MultiheadSpec"]

# per-run arrays kept in the cache records, not in the figure's table
_ARRAYS = ("eigenvalues", "singular_values", "history", "S", "S0", "head_Q", "head_M", "head_Q0", "head_order")
# the softmax part's relative tolerance: the sampled prior's finite-D bias (+2.5 % on the test error at D = 100 for
# one head), one d, and an experimental theory
_SOFTMAX_TOL_REL = 0.08
#: the specialisation index above which a converged specialised-ansatz point is the specialised branch
BRANCH_INDEX = 0.15


@dataclass(frozen=True)
class MultiheadSpec(FigureSpec):
    """Sizes of the multi-head figure.

    Linear channel: ``heads`` student heads of width ``kappa d`` each, teachers of ``teacher_heads`` heads,
    L-BFGS at each ``d in ds`` (``seeds`` per size) at ``alphas_sim``, theory on ``alphas_theory``. Softmax
    channel (seq2lab, ``heads`` student and teacher heads, ``kappa = 1``): the experimental state evolution at
    ``softmax_alphas`` (empty: no softmax part) and on ``transition_alphas`` (the grid the two transition points
    are interpolated on; fewer than two: none), with ``se_sample_dim``, ``se_draws``, ``se_points``,
    ``se_scrambles``, ``se_max_iter`` (:class:`~singlehead.SEOptions`) and the
    specialisation eigenvalue's step ``transition_eps``; L-BFGS at ``softmax_alphas``, ``d = softmax_d``
    (``softmax_seeds`` seeds, ``softmax_starts`` starts each, the lowest objective kept).
    Seed plan (:mod:`singlehead.figures.seeds`): an inconclusive row's points get their seeds doubled up to
    ``max_seeds``, at most ``seed_budget`` runs added to the figure (0: no plan).
    """

    heads: int = 2
    teacher_heads: tuple[int, ...] = (1, 2)
    kappa: float = 0.5
    ds: tuple[int, ...] = (30, 45, 60)
    seeds: tuple[int, ...] = (4, 3, 3)
    alphas_sim: tuple[float, ...] = (0.5, 1.0, 2.0)
    alphas_theory: tuple[float, ...] = (0.1, 0.15, 0.2, 0.3, 0.45, 0.7, 1.0, 1.5, 2.0, 3.0)
    lam: float = 0.01
    n_test: int = 4000
    softmax_alphas: tuple[float, ...] = field(default=(0.5, 2.5), metadata={"empty": True})
    transition_alphas: tuple[float, ...] = field(default=(1.5, 1.75, 2.0, 2.5), metadata={"empty": True})
    transition_eps: float = 0.02
    softmax_d: int = 30
    softmax_seeds: int = 4
    softmax_starts: int = 3
    se_sample_dim: int = 100
    se_draws: int = 4
    se_points: int = 1024
    se_scrambles: int = 4
    se_max_iter: int = 60
    max_seeds: int = 16
    seed_budget: int = field(default=8, metadata={"min": 0})

    def check(self) -> None:
        check_same_length(self, "ds", "seeds")
        if self.heads < 2:
            raise ValueError(f"MultiheadSpec.heads must be an integer >= 2 (got {self.heads})")
        if not 0 < self.transition_eps < 1:
            raise ValueError(f"MultiheadSpec.transition_eps must be in (0, 1) (got {self.transition_eps!r})")
        if self.transition_alphas and not self.softmax_alphas:
            raise ValueError("MultiheadSpec.transition_alphas needs softmax_alphas (the softmax part; got none)")

    @classmethod
    def full(cls) -> MultiheadSpec:
        return cls(
            ds=(40, 60, 80),
            seeds=(6, 4, 4),
            n_test=20000,
            softmax_alphas=(0.5, 1.0, 2.5),
            softmax_d=60,
            softmax_seeds=6,
            softmax_starts=4,
            transition_alphas=(1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5),
            seed_budget=168,
        )

    @classmethod
    def smoke(cls) -> MultiheadSpec:
        return cls(
            ds=(12, 16),
            seeds=(2, 2),
            alphas_sim=(1.0,),
            alphas_theory=(0.5, 1.0, 2.0),
            n_test=300,
            softmax_alphas=(1.0,),
            transition_alphas=(1.0, 2.0),
            softmax_d=12,
            softmax_seeds=2,
            softmax_starts=1,
            se_sample_dim=24,
            se_draws=1,
            se_points=128,
            se_scrambles=2,
            se_max_iter=6,
        )

    def se_options(self) -> SEOptions:
        """The experimental state evolution's settings (each branch sets its ansatz)."""
        return SEOptions(
            sample_dim=self.se_sample_dim,
            sample_draws=self.se_draws,
            n_points=self.se_points,
            n_scrambles=self.se_scrambles,
            max_iter=self.se_max_iter,
        )


def _linear(spec: MultiheadSpec, d: int, alpha: float, h0: int) -> Problem:
    return Problem(
        d=d,
        T=2,
        alpha=alpha,
        channel="linear",
        kappa=spec.kappa,
        noise=0.5,
        lam=spec.lam,
        target=MPTarget(0.5),
        heads=spec.heads,
        teacher_heads=h0,
    )


def _softmax(spec: MultiheadSpec, alpha: float) -> Problem:
    return Problem(
        d=spec.softmax_d,
        T=2,
        alpha=alpha,
        channel="seq2lab",
        kappa=1.0,
        noise=0.5,
        lam=spec.lam,
        target=MPTarget(0.5),
        heads=spec.heads,
        teacher_heads=spec.heads,
    )


def multihead_grid(spec: MultiheadSpec) -> dict[str, Any]:
    """Linear: simulations (every simulated alpha at every d, per teacher) and theory (per teacher); softmax:
    the problems of the experimental SE and of the fits."""
    d = max(spec.ds)
    alphas = sorted(set(spec.alphas_theory) | set(spec.alphas_sim))
    return {
        "sims": [_linear(spec, dd, a, h0) for h0 in spec.teacher_heads for a in spec.alphas_sim for dd in spec.ds],
        "theory": {h0: [_linear(spec, d, a, h0) for a in alphas] for h0 in spec.teacher_heads},
        "softmax": [_softmax(spec, a) for a in spec.softmax_alphas],
    }


def _head(rec: dict[str, Any], key: str = "head_M") -> np.ndarray:
    """A per-head overlap matrix of a record (top level or in its extras): the matched ``head_M`` (``H x H0``)
    by default, or ``head_Q0``."""
    m = rec.get(key, (rec.get("extras") or {}).get(key))
    return np.asarray(m, dtype=float)


def overlap_summary(M: np.ndarray) -> dict[str, float]:
    """``head_M_diag``, ``head_M_offdiag`` (:func:`diag_offdiag`) and ``head_M_mean`` of a square overlap matrix."""
    d, off = diag_offdiag(M)
    return {"head_M_diag": d, "head_M_offdiag": off, "head_M_mean": float(np.mean(M))}


def diag_offdiag(M: np.ndarray) -> tuple[float, float]:
    """Mean diagonal and mean off-diagonal entry of a square ``M`` (``nan`` off the diagonal for one head)."""
    n = M.shape[0]
    off = float((M.sum() - np.trace(M)) / (n * (n - 1))) if n > 1 else math.nan
    return float(np.mean(np.diag(M))), off


def _se_json(r: Any) -> dict[str, Any]:
    """A multi-head SE Result as JSON: errors (``test_error_se``: quadrature and draws), the matched ``head_M`` and
    its draw error, ``head_Q``/``head_Sigma`` (a warm start), objective, specialisation, convergence, timing."""
    ex = r.extras
    return {
        "test_error": r.test_error,
        "train_error": r.train_error,
        "test_error_se": float(ex["test_error_se"]),
        "head_M": np.asarray(ex["head_M"]).tolist(),
        "head_M_draw_se": np.asarray(ex["head_M_draw_se"]).tolist(),
        "head_Q": np.asarray(ex["head_Q"]).tolist(),
        "head_Sigma": np.asarray(ex["head_Sigma"]).tolist(),
        "head_Q0": np.asarray(ex["head_Q0"]).tolist(),
        "specialisation": float(ex["specialisation"]),
        "objective": float(ex["objective"]),
        "objective_se": float(ex["objective_se"]),
        "ansatz": str(ex["ansatz"]),
        "converged": bool(r.converged),
        "iterations": int(r.iterations),
        "runtime_s": float(r.runtime_s),
    }


def _unspecialised_point(problem: Problem, options: SEOptions, eps: float) -> dict[str, Any]:
    """The unspecialised fixed point and its specialisation eigenvalue ``lambda``."""
    e = specialisation_eigenvalue(problem, options.replace(ansatz="unspecialised"), eps=eps)
    return {**_se_json(e["result"]), "lambda": float(e["lambda"])}


def _specialised_branch(problems: list[Problem], options: SEOptions) -> list[dict[str, Any]]:
    """The specialised ansatz followed down in alpha: ``problems`` in decreasing alpha, each solve started at the
    previous fixed point (the first at the ansatz's start, ``M = 0.6 Q0``), so that the branch is kept where it
    coexists with the unspecialised point; it stops after the first point whose index is at most ``BRANCH_INDEX``
    (the list is then shorter than ``problems``)."""
    out, start = [], None
    for p in problems:
        r = multihead_theory(p, options.replace(ansatz="specialised"), start=start)
        j = _se_json(r)
        out.append(j)
        if j["specialisation"] <= BRANCH_INDEX:
            break  # the branch has ended: further down the ansatz only finds the unspecialised point again
        start = tuple(np.asarray(j[k]) for k in ("head_Q", "head_M", "head_Sigma"))
    return out


def _branch_exists(pt: dict[str, Any] | None) -> bool:
    """A specialised-ansatz point counts as the specialised branch when it converged with index above
    ``BRANCH_INDEX`` (below it the ansatz has returned to the unspecialised point)."""
    return pt is not None and bool(pt["converged"]) and pt["specialisation"] > BRANCH_INDEX


def lower_objective(unspec: dict[str, Any], spec: dict[str, Any] | None) -> dict[str, Any]:
    """Of the two symmetric fixed points at one alpha, the one ERM is compared with: the specialised branch where it
    exists and its predicted objective ``L/n`` is the lower, else the unspecialised point."""
    if _branch_exists(spec) and spec["objective"] < unspec["objective"]:
        return spec
    return unspec


def _interpolate(a: tuple[float, float], f: tuple[float, float]) -> float:
    """Where the line through ``(a[0], f[0])``, ``(a[1], f[1])`` crosses zero."""
    return a[0] + (a[1] - a[0]) * f[0] / (f[0] - f[1])


def transitions(
    alphas: list[float], unspec: dict[float, dict[str, Any]], spec: dict[float, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The two transition points of ``H = H0`` on an alpha grid, each by linear interpolation in its bracket.

    ``crossing``: where the specialised branch's predicted objective drops below the unspecialised point's
    (scanned from the top of the grid down, over the alphas where the branch exists); its ``error`` is the
    objectives' quoted errors carried through the bracket's slope. Where the branch ends before the difference
    changes sign, the crossing is at or below the branch's last alpha (``value`` nan, ``bracket`` its grid step).
    ``stability``: where the unspecialised point's specialisation eigenvalue reaches 1 (scanned from the bottom up;
    ``error`` nan: the eigenvalue carries no error estimate of its own). Each: ``value``, ``bracket`` (grid alphas),
    ``error``, ``note``.
    """
    a = sorted(alphas)
    out: dict[str, dict[str, Any]] = {}
    diff = {x: spec[x]["objective"] - unspec[x]["objective"] for x in a if _branch_exists(spec.get(x))}
    cr: dict[str, Any] = {"value": math.nan, "bracket": None, "error": math.nan, "note": "no specialised branch"}
    for hi, lo in zip(a[::-1], a[::-1][1:]):
        if hi not in diff:
            continue
        if diff[hi] >= 0:
            cr = {
                "value": math.nan,
                "bracket": None,
                "error": math.nan,
                "note": "above the grid (the specialised branch is not below the unspecialised point at "
                f"alpha = {hi:g})",
            }
            break
        if lo not in diff:
            cr = {
                "value": math.nan,
                "bracket": (lo, hi),
                "error": math.nan,
                "note": f"the specialised branch ends between alpha = {lo:g} and {hi:g} while still the lower",
            }
            break
        if diff[lo] >= 0:
            v = _interpolate((lo, hi), (diff[lo], diff[hi]))
            slope = (diff[hi] - diff[lo]) / (hi - lo)
            err = math.sqrt(sum(d[x]["objective_se"] ** 2 for d in (spec, unspec) for x in (lo, hi)) / 2) / abs(slope)
            cr = {"value": v, "bracket": (lo, hi), "error": err, "note": ""}
            break
    else:
        if diff:  # no sign change scanned: every branch point below the unspecialised one, or the only one not
            note = (
                "below the grid"
                if diff[min(diff)] < 0
                else "above the grid (the specialised branch is not below "
                f"the unspecialised point at alpha = {min(diff):g})"
            )
            cr = {"value": math.nan, "bracket": None, "error": math.nan, "note": note}
    out["crossing"] = cr
    lam = {x: unspec[x]["lambda"] - 1.0 for x in a}
    st: dict[str, Any] = {
        "value": math.nan,
        "bracket": None,
        "error": math.nan,
        "note": "the eigenvalue stays below 1 on the grid"
        if all(v < 0 for v in lam.values())
        else "the eigenvalue is above 1 at the grid's lowest alpha",
    }
    for lo, hi in zip(a, a[1:]):
        if lam[lo] < 0 <= lam[hi]:
            st = {
                "value": _interpolate((lo, hi), (lam[lo], lam[hi])),
                "bracket": (lo, hi),
                "error": math.nan,
                "note": "",
            }
            break
    out["stability"] = st
    return out


def multihead_run(ctx: Context, spec: MultiheadSpec, grid: dict[str, Any]) -> FigureRun:
    """Linear theory per teacher, linear fits per d and their extrapolation; softmax SE and fits at one d."""
    recs = {h0: ctx.run(ctx.theory_jobs(ps), f"theory: linear, H0 = {h0}") for h0, ps in grid["theory"].items()}
    th = {h0: records_to_frame(r, drop=_ARRAYS) for h0, r in recs.items()}
    sim = records_to_frame(
        ctx.run(
            sim_jobs_per_d(ctx, grid["sims"], dict(zip(spec.ds, spec.seeds)), n_test=spec.n_test),
            "L-BFGS: linear, two heads",
        ),
        drop=_ARRAYS,
    )
    if "cfg_teacher_heads" not in sim:
        sim["cfg_teacher_heads"] = 1
    rows, gaps = [], {}
    for h0 in spec.teacher_heads:
        t_at = th[h0].set_index("cfg_alpha")
        for a in spec.alphas_sim:
            t = float(t_at.loc[a, "test_error"])
            g = gaps_from_frame(sim[(sim.cfg_alpha == a) & (sim.cfg_teacher_heads == h0)], t)
            e = g.extrapolation
            gaps[h0, a] = g
            rows.append(
                {
                    "cfg_channel": "linear",
                    "cfg_teacher_heads": h0,
                    "cfg_alpha": a,
                    "quantity": f"test error at d = inf, linear, H = {spec.heads}, H0 = {h0} (a + b/d on d = "
                    f"{', '.join(str(int(d)) for d in g.d)})",
                    "theory": t,
                    "simulation": t + e.intercept,
                    "se": e.stderr,
                    "gap": abs(e.intercept),
                    "p_zero": extrapolation_p_value(e.intercept, e.stderr),
                    "n_seeds": int(g.n_seeds.sum()),
                    **tol_columns(DEFAULT_ALLOWANCE, 0.005, "terms beyond a + b/d (the theory is exact)"),
                    "theory_converged": bool(t_at.loc[a, "converged"]),
                    "note": fit_note(g),
                }
            )
    agr = [pd.DataFrame(rows)]
    soft = _softmax_part(ctx, spec, grid["softmax"])
    if soft["rows"] is not None:
        agr.append(soft["rows"])
    thresholds = {}
    for h0, ps in grid["theory"].items():
        eff = effective_single_head(ps[0])[0]
        thresholds[h0] = (interpolation_threshold(eff), perfect_recovery_threshold(eff))
    p0 = grid["theory"][spec.teacher_heads[0]][0]
    params = problem_params(
        p0,
        ("kappa (per head)", spec.kappa),
        ("H", spec.heads),
        ("H0", ", ".join(map(str, spec.teacher_heads))),
        ("d", ", ".join(map(str, spec.ds))),
        ("seeds per d", ", ".join(map(str, spec.seeds))),
        ("n_test", spec.n_test),
    )
    if spec.softmax_alphas:
        params["softmax part"] = (
            f"seq2lab, H = H0 = {spec.heads}, kappa = 1, d = {spec.softmax_d}, "
            f"{spec.softmax_seeds} seeds x {spec.softmax_starts} starts; SE: unspecialised and "
            f"specialised ansatz, prior D = {spec.se_sample_dim} x {spec.se_draws} draws, "
            f"{spec.se_scrambles} x {spec.se_points} nodes; transitions on alpha = "
            f"{', '.join(f'{a:g}' for a in spec.transition_alphas) or 'none'}, "
            f"eigenvalue step eps = {spec.transition_eps:g}"
        )
    table = pd.concat(
        [
            sim.assign(kind="simulation linear"),
            *(f.assign(kind=f"theory linear H0={h0}") for h0, f in th.items()),
            soft["table"],
        ],
        ignore_index=True,
    )
    notes = [
        "Linear channel: the theory of several heads is exact (the mean of the heads is one effective head); "
        "its rows extrapolate the fits' test error to d = inf. Softmax channel: the state evolution of several "
        "heads is experimental (sampled prior, two symmetric ansätze, docs: Multi-head attention); its rows "
        "compare one d with a wider declared tolerance against the fixed point of lower predicted objective, "
        "and head_M is matched (student heads reordered to the assignment of largest sum of diagonal overlaps) "
        "in the fits and in the theory alike."
    ]
    tr = soft["transitions"]
    if tr:
        notes.append(
            "Transitions of the softmax part (H = H0): "
            + "; ".join(
                f"{name} {transition_text(tr[key])}"
                for key, name in (
                    ("crossing", "objective crossing (specialised below unspecialised)"),
                    ("stability", "loss of stability of the unspecialised point (eigenvalue 1)"),
                )
            )
            + ". The SE's "
            "fixed points are those of two symmetric ansätze: a fixed point outside them (heads specialised "
            "unequally) is not searched for here."
        )
    return FigureRun(
        table,
        pd.concat(agr, ignore_index=True),
        params,
        {"theory": th, "sim": sim, "gaps": gaps, "thresholds": thresholds, "softmax": soft},
        notes=notes,
    )


def _softmax_part(ctx: Context, spec: MultiheadSpec, problems: list[Problem]) -> dict[str, Any]:
    """The experimental SE (cached in-process values: the unspecialised point with its specialisation eigenvalue at
    every alpha of the softmax and transition grids, the specialised branch followed down them), the transitions,
    and the fits at ``softmax_d`` with their agreement rows (each against the fixed point of lower objective)."""
    if not problems:
        return {
            "se": {},
            "unspec": {},
            "spec": {},
            "transitions": {},
            "sim": pd.DataFrame(),
            "rows": None,
            "table": pd.DataFrame(),
        }
    o = spec.se_options()
    tag = (
        f"multihead_se H={spec.heads} lam={spec.lam} D={o.sample_dim} draws={o.sample_draws} "
        f"nodes={o.n_scrambles}x{o.n_points} max_iter={o.max_iter}"
    )
    alphas = sorted(set(spec.softmax_alphas) | set(spec.transition_alphas))
    at = {a: problems[0].replace(alpha=a) for a in alphas}
    # the specialised branch is followed down to the transition grid's lowest alpha (below the objective crossing
    # it is not the lower point; without a grid, over the softmax alphas)
    lowest = min(spec.transition_alphas) if len(spec.transition_alphas) >= 2 else -math.inf
    down = [at[a] for a in alphas[::-1] if a >= lowest]
    branch_key = f"{tag} specialised branch down alpha={','.join(repr(p.alpha) for p in down)}"
    tasks = {branch_key: lambda: _specialised_branch(down, o)}  # the dearest first: it is one chain
    tasks.update(
        {
            f"{tag} unspecialised eps={spec.transition_eps!r} alpha={a!r}": (
                lambda a=a: _unspecialised_point(at[a], o, spec.transition_eps)
            )
            for a in alphas
        }
    )
    got = ctx.cached_many(tasks, "experimental multi-head SE")
    sp = dict(zip([p.alpha for p in down], got[branch_key]))
    un = {a: got[f"{tag} unspecialised eps={spec.transition_eps!r} alpha={a!r}"] for a in alphas}
    se = {p.alpha: lower_objective(un[p.alpha], sp.get(p.alpha)) for p in problems}
    trans = transitions(list(spec.transition_alphas), un, sp) if len(spec.transition_alphas) >= 2 else {}
    raw = ctx.run(
        ctx.sim_jobs(problems, seeds=spec.softmax_seeds, n_test=spec.n_test, n_starts=spec.softmax_starts),
        "L-BFGS: seq2lab, two heads",
    )
    sim = records_to_frame(raw, drop=_ARRAYS)
    for k, col in pd.DataFrame([overlap_summary(_head(r)) for r in raw]).items():
        sim[k] = col.to_numpy()
    sim["specialisation"] = [specialisation_index(_head(r), _head(r, "head_Q0")) for r in raw]
    # the SE's own error (its prior draws and nodes) joins the seeds' in each row's standard error; for the
    # overlaps, the summary of the entries' draw errors (their mean: the entries taken as fully correlated, an upper
    # bound); one prior draw has no draw error, counted as 0
    th = pd.DataFrame(
        [
            {
                "cfg_alpha": a,
                "test_error": v["test_error"],
                "converged": v["converged"],
                **overlap_summary(np.asarray(v["head_M"])),
                "branch": v["ansatz"],
                "test_error_own_se": v["test_error_se"],
                **{f"{k}_own_se": x for k, x in overlap_summary(np.asarray(v["head_M_draw_se"], dtype=float)).items()},
            }
            for a, v in se.items()
        ]
    )
    reason = (
        f"experimental SE: sampled prior at D = {spec.se_sample_dim} (its finite-D bias), one d = "
        f"{spec.softmax_d} (no extrapolation), and a fixed point of a symmetric ansatz (the lower objective)"
    )
    # at the unspecialised point the matched diagonal exceeds the off-diagonal at finite d by the matching alone
    # (it picks the larger overlaps): its rows compare the mean overlap, which no matching changes
    quantities = {
        "unspecialised": ["test_error", "head_M_mean"],
        "specialised": ["test_error", "head_M_diag", "head_M_offdiag"],
    }
    rows = pd.concat(
        [
            agreement(
                sim[sim.cfg_alpha.isin(th.cfg_alpha[th.branch == b])],
                th[th.branch == b],
                ["cfg_alpha"],
                qs,
                rel=_SOFTMAX_TOL_REL,
                reason=reason,
                tol_abs={"test_error": 0.001, "head_M_diag": 0.02, "head_M_offdiag": 0.02, "head_M_mean": 0.02},
                theory_se={q: f"{q}_own_se" for q in qs},
            )
            for b, qs in quantities.items()
            if (th.branch == b).any()
        ],
        ignore_index=True,
    )
    branch = {a: v["ansatz"] for a, v in se.items()}
    rows["quantity"] = [
        f"seq2lab, H = H0 = {spec.heads}, {branch[a]} point: {q} (s.e. with the SE's own)"
        for a, q in zip(rows.cfg_alpha, rows.quantity)
    ]
    # the point's keys, as the linear rows name theirs (the seed plan matches rows to simulated points by them)
    rows.insert(0, "cfg_teacher_heads", spec.heads)
    rows.insert(0, "cfg_channel", "seq2lab")
    curves = pd.DataFrame(
        [
            {
                "cfg_alpha": a,
                "branch": b,
                "test_error": v["test_error"],
                "test_error_se": v["test_error_se"],
                "objective": v["objective"],
                "specialisation": v["specialisation"],
                "converged": v["converged"],
                "lambda": v.get("lambda", math.nan),
            }
            for b, pts in (("unspecialised", un), ("specialised", sp))
            for a, v in sorted(pts.items())
        ]
    )
    table = pd.concat(
        [sim.assign(kind="simulation seq2lab"), curves.assign(kind="theory seq2lab (experimental SE)")],
        ignore_index=True,
    )
    return {"se": se, "unspec": un, "spec": sp, "transitions": trans, "sim": sim, "rows": rows, "table": table}


def transition_text(t: dict[str, Any]) -> str:
    """A transition point as text: its value with error and bracket, or why there is none."""
    if math.isfinite(t["value"]):
        err = f" +- {t['error']:.2f}" if math.isfinite(t["error"]) else ""
        return (
            f"at alpha = {t['value']:.2f}{err} (bracket {t['bracket'][0]:g}-{t['bracket'][1]:g}, linear interpolation)"
        )
    if t["bracket"] is not None:
        return f"between alpha = {t['bracket'][0]:g} and {t['bracket'][1]:g} ({t['note']})"
    return f"not found ({t['note']})"


def _mark_transitions(ax: Any, tr: dict[str, dict[str, Any]], label: bool) -> None:
    for key, ls, name in (("crossing", "--", "objective crossing"), ("stability", ":", "stability limit")):
        t = tr.get(key)
        if t is None or not math.isfinite(t["value"]):
            continue
        ax.axvline(t["value"], color="0.3", ls=ls, lw=1.2, label=f"SE {name}: {t['value']:.2f}" if label else None)
        if math.isfinite(t["error"]):
            ax.axvspan(t["value"] - t["error"], t["value"] + t["error"], color="0.5", alpha=0.12, lw=0)


def multihead_plot(spec: MultiheadSpec, grid: dict[str, Any], res: FigureRun) -> Figure:
    """Left: linear channel, test error vs alpha per teacher; then seq2lab: test error and specialisation index of
    the two SE branches with the transitions marked, and the fits."""
    soft = res.data["softmax"]
    ncol = 3 if soft["se"] else 1
    fig, axes = new_figure(1, ncol, figsize=(5.5 * ncol, 5.2), squeeze=False)
    ax = axes[0][0]
    th, sim, dmax = res.data["theory"], res.data["sim"], max(spec.ds)
    colors = dict(zip(spec.teacher_heads, ("tab:blue", "tab:red", "tab:green", "tab:purple")))
    for h0, f in th.items():
        f = f.sort_values("cfg_alpha")
        c = colors.get(h0, "k")
        ax.plot(f.cfg_alpha, f.test_error, "-", color=c, label=f"H0 = {h0}: theory (exact)")
        m = (
            sim[(sim.cfg_teacher_heads == h0) & (sim.cfg_d == dmax)]
            .groupby("cfg_alpha")
            .test_error.agg(["mean", "sem"])
        )
        ax.errorbar(
            m.index,
            m["mean"],
            yerr=m["sem"].fillna(0.0),
            fmt="o",
            mfc="none",
            color=c,
            capsize=3,
            label=f"H0 = {h0}: L-BFGS, d = {dmax}",
        )
        ext = [
            (a, float(f.set_index("cfg_alpha").loc[a, "test_error"]) + g.extrapolation.intercept)
            for (hh, a), g in res.data["gaps"].items()
            if hh == h0
        ]
        if ext:
            ax.plot(
                [x for x, _ in ext], [y for _, y in ext], "D", color=c, ms=4, label=f"H0 = {h0}: d = inf extrapolation"
            )
        a_int, a_perf = res.data["thresholds"][h0]
        ax.axvline(a_int, color=c, ls=":", lw=1)
        if a_perf is not None and math.isfinite(a_perf):
            ax.axvline(a_perf, color=c, ls="-.", lw=1)
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="alpha = n/d^2",
        ylabel="test error",
        title=f"linear channel, H = {spec.heads} heads",
    )
    ax.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    if soft["se"]:
        s = soft["sim"].groupby("cfg_alpha")
        branches = (("unspecialised", soft["unspec"], "tab:blue", "o-"), ("specialised", soft["spec"], "tab:red", "s-"))
        for k, (q, ylab) in enumerate((("test_error", "test error"), ("specialisation", "specialisation index"))):
            axk = axes[0][k + 1]
            for name, pts, c, fmt in branches:
                a = sorted(x for x, v in pts.items() if name == "unspecialised" or _branch_exists(v))
                y = [pts[x][q] for x in a]
                if q == "test_error":
                    axk.errorbar(
                        a,
                        y,
                        yerr=[pts[x]["test_error_se"] for x in a],
                        fmt=fmt,
                        color=c,
                        ms=4,
                        capsize=2,
                        label=f"SE, {name} branch",
                    )
                else:
                    axk.plot(a, y, fmt, color=c, ms=4, label=f"SE, {name} branch")
            m = s[q].agg(["mean", "sem", "size"])
            seeds = "/".join(str(int(n)) for n in m["size"])
            axk.errorbar(
                m.index,
                m["mean"],
                yerr=m["sem"].fillna(0.0),
                fmt="D",
                mfc="none",
                color="k",
                capsize=3,
                label=f"L-BFGS, d = {spec.softmax_d} ({seeds} seeds x {spec.softmax_starts} starts)",
            )
            _mark_transitions(axk, soft["transitions"], label=True)
            axk.set(
                xlabel="alpha = n/d^2", ylabel=ylab, title=f"seq2lab, H = H0 = {spec.heads}: {ylab} (experimental SE)"
            )
            if q == "test_error":
                axk.set_yscale("log")
            axk.legend(fontsize=6, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    fig.suptitle("Multi-head attention\n" + textwrap.fill(params_text(res.params), 200), fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    return fig


def multihead_caption(spec: MultiheadSpec, grid: dict[str, Any], res: FigureRun) -> str:
    thr = res.data["thresholds"]
    text = (
        f"Test error (per sequence, noiseless labels) of {spec.heads} tied student heads S_h = W_h W_h^T/sqrt(pd) "
        f"(width kappa d = {spec.kappa:g} d each, weight decay lam d sum_h Tr S_h) on the linear channel, for teachers "
        f"of {' and '.join(map(str, spec.teacher_heads))} heads: lines, the exact theory (the mean of the heads is "
        f"one effective head of width min(1, H kappa) d); circles, L-BFGS at d = {max(spec.ds)}; diamonds, the fits "
        f"extrapolated to d = inf by a + b/d over d = {', '.join(map(str, spec.ds))}. Dotted and dash-dotted: the "
        "interpolation and perfect-recovery thresholds of the effective head (lam -> 0+), "
        + ", ".join(f"H0 = {h0}: {a:.3f} and {p:.3f}" for h0, (a, p) in thr.items())
        + "."
    )
    soft = res.data["softmax"]
    if soft["se"]:
        text += (
            f" Middle and right: seq2lab with H = H0 = {spec.heads} (kappa = 1), test error and specialisation "
            "index (mean diagonal minus mean off-diagonal of the matched head_M, over the same of the teachers' "
            "overlaps: 0 unspecialised, 1 each head its teacher head; at finite d the matching alone makes a "
            "fit's index positive where its heads are unspecialised). Lines: the experimental state evolution's "
            "unspecialised branch and its specialised branch (followed down in alpha while it converges with "
            f"index above {BRANCH_INDEX:g}); diamonds: L-BFGS at d = {spec.softmax_d} (lowest objective of "
            "several starts), compared with the branch of lower predicted objective."
        )
        tr = soft["transitions"]
        if tr:
            text += (
                " Dashed: the objective crossing, " + transition_text(tr["crossing"]) + "; dotted: the "
                "unspecialised point's loss of stability, " + transition_text(tr["stability"]) + " (shaded: "
                "their errors)."
            )
    return text


register(
    FigureDef(
        "multihead",
        "Multi-head attention: exact linear theory and the experimental softmax SE against ERM",
        MultiheadSpec,
        multihead_grid,
        multihead_run,
        multihead_plot,
        multihead_caption,
        presets=("quick", "full", "smoke"),
    )
)

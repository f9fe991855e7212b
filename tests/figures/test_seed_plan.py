"""The seed plan of a figure: inconclusive rows get their seeds doubled within a declared budget, judged again."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pytest

from singlehead.figures.figspec import Context, FigureDef, FigureRun, build, new_figure
from singlehead.figures.seeds import SeedGroup, SeedPlan, plan_round
from singlehead.figures.spec import FigureSpec
from singlehead.model.problem import Problem
from singlehead.report.verdict import AGREES, DEVIATES, EXPLAINED, INCONCLUSIVE
from singlehead.runs.cache import Cache

#: alpha -> (mean, spread) of the fake simulation; theory 1, tolerance 0.1 (absolute) at every point. A seed's value
#: is mean + spread (-1)^seed, so an even number of seeds has exactly the mean and the standard error spread/sqrt(k-1).
POINTS = {
    0.1: (1.0, 0.01),  # agrees at 4 seeds
    0.2: (1.3, 0.15),  # gap 0.3: inconclusive at 4 seeds (Holm p_diff 0.16), deviates at 8 (0.014)
    0.3: (1.1, 0.05),
}  # gap = tolerance: never decided
#: every fake simulation computed, by (alpha, seed)
CALLS: Counter = Counter()


@dataclass(frozen=True)
class _SeedSpec(FigureSpec):
    seeds: int = 4
    max_seeds: int = 16
    seed_budget: int = field(default=64, metadata={"min": 0})
    explained: bool = False


def _grid(spec: _SeedSpec) -> list[Problem]:
    return [Problem(alpha=a) for a in POINTS]


def _simulate(alpha: float, seed: int) -> float:
    CALLS[(alpha, seed)] += 1
    mean, spread = POINTS[alpha]
    return mean + spread * (-1) ** seed


def _run(ctx: Context, spec: _SeedSpec, grid: list[Problem]) -> FigureRun:
    rows, table = [], []
    for p in grid:
        jobs = ctx.seeded_jobs("fake", p, (), spec.seeds)
        vals = [ctx.cached(f"fake-{j.key}", lambda j=j: _simulate(j.problem.alpha, j.seed)) for j in jobs]
        s = pd.Series(vals)
        table += [{"cfg_alpha": p.alpha, "seed": j.seed, "value": v} for j, v in zip(jobs, vals)]
        rows.append(
            {
                "cfg_alpha": p.alpha,
                "quantity": "value",
                "theory": 1.0,
                "simulation": s.mean(),
                "se": s.std(ddof=1) / len(s) ** 0.5,
                "gap": abs(s.mean() - 1.0),
                "dof": len(s) - 1,
                "tol_rel": 0.0,
                "tol_abs": 0.1,
                "tol_reason": "fake",
                "n_seeds": len(s),
                "diagnostic_fails": spec.explained,
                "diagnostic": "fake diagnostic fails",
            }
        )
    return FigureRun(pd.DataFrame(table), pd.DataFrame(rows), {"seeds": spec.seeds})


def _plot(spec: _SeedSpec, grid: Any, res: FigureRun):
    fig, ax = new_figure(1, 1, figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    return fig


FAKE = FigureDef("fake_seeds", "Fake seeds", _SeedSpec, _grid, _run, _plot, lambda spec, grid, res: "fake")


def _build(tmp_path, spec: _SeedSpec):
    CALLS.clear()
    return build(FAKE, Context(Cache(tmp_path / "cache"), progress=False), spec)


def _by_alpha(out) -> dict[float, pd.Series]:
    return {float(r.cfg_alpha): r for _, r in out.agreement.iterrows()}


def test_inconclusive_rows_get_doubled_seeds_until_decided(tmp_path):
    out = _build(tmp_path, _SeedSpec())
    rows = _by_alpha(out)
    # first judgement: 1 agrees, 2 inconclusive; the deviating row is decided at 8 seeds and stops there, the row
    # on its tolerance gets 4 -> 8 -> 16 (the cap)
    assert out.seeds.first[AGREES] == 1 and out.seeds.first[INCONCLUSIVE] == 2
    assert [rows[a].verdict for a in POINTS] == [AGREES, DEVIATES, INCONCLUSIVE]
    assert [int(rows[a].n_seeds) for a in POINTS] == [4, 8, 16]
    assert [int(rows[a].seeds_added) for a in POINTS] == [0, 4, 12]
    assert (out.agreement.seeds_declared == 4).all()
    assert out.seeds.spent == 4 + 4 + 8 and out.seeds.rounds == 2
    assert out.seeds.rows == [("alpha=0.2", 4, 8), ("alpha=0.3", 4, 16)]
    # the new seeds continue the sequence: each seed computed once
    assert sorted(CALLS) == sorted(
        [(0.1, s) for s in range(4)] + [(0.2, s) for s in range(8)] + [(0.3, s) for s in range(16)]
    )
    assert set(CALLS.values()) == {1}
    assert "seed plan" in out.params and "16 added" in out.params["seed plan"]


def test_a_deviation_where_the_diagnostic_fails_is_explained_once_decided(tmp_path):
    out = _build(tmp_path, _SeedSpec(explained=True))
    assert _by_alpha(out)[0.2].verdict == EXPLAINED


def test_the_budget_is_respected_and_a_resumed_run_reruns_no_seed(tmp_path):
    small = _build(tmp_path, _SeedSpec(seed_budget=10))
    rows = _by_alpha(small)
    # round 1 adds 4 + 4 runs; the next doubling of the undecided row (8 more) does not fit in the 2 left
    assert small.seeds.spent == 8 <= 10 and [int(rows[a].n_seeds) for a in POINTS] == [4, 8, 8]
    assert sum(CALLS.values()) == 4 + 8 + 8
    again = _build(tmp_path, _SeedSpec(seed_budget=10))  # the same run, resumed from the cache
    assert sum(CALLS.values()) == 0 and again.seeds.spent == 8
    pd.testing.assert_frame_equal(again.agreement, small.agreement)
    more = _build(tmp_path, _SeedSpec())  # a larger budget computes only the seeds 8 .. 15 of the undecided row
    assert sorted(CALLS) == [(0.3, s) for s in range(8, 16)] and int(_by_alpha(more)[0.3].n_seeds) == 16


def test_no_plan_adds_no_seeds(tmp_path):
    out = _build(tmp_path, _SeedSpec(seed_budget=0))
    assert out.seeds.spent == 0 and out.seeds.rounds == 0 and "seed plan" not in out.params
    assert (out.agreement.seeds_added == 0).all() and sum(CALLS.values()) == 12


def test_plan_round_serves_rows_in_table_order_and_only_eligible_ones():
    groups = {f"g{i}": SeedGroup(f"g{i}", "fake", Problem(alpha=a), 4, 4) for i, a in enumerate((0.1, 0.2, 0.3))}
    judged = pd.DataFrame(
        {
            "cfg_alpha": [0.1, 0.2, 0.3, 0.3],
            "quantity": ["q", "q", "q", "r"],
            "verdict": [INCONCLUSIVE, INCONCLUSIVE, AGREES, INCONCLUSIVE],
            "theory_converged": [False, True, True, True],
            "se": [0.1, 0.1, 0.1, 0.1],
            "n_seeds": [4, 4, 4, 4],
        }
    )
    # alpha = 0.1: theory not converged (more seeds cannot decide it); alpha = 0.3 asked for once by its 2nd row
    assert plan_round(judged, groups, SeedPlan(16, 100), 0) == {"g1": 8, "g2": 8}
    assert plan_round(judged, groups, SeedPlan(16, 100), 96) == {"g1": 8}  # 4 runs left: the first row only
    assert plan_round(judged, groups, SeedPlan(6, 100), 0) == {"g1": 6, "g2": 6}  # the cap
    assert plan_round(judged, groups, SeedPlan(16, 0), 0) == {}
    no_se = judged.assign(se=float("nan"))
    assert plan_round(no_se, groups, SeedPlan(16, 100), 0) == {}


@pytest.mark.parametrize("kw", [{"max_seeds": -1}, {"budget": -2}, {"budget": 1.5}])
def test_seed_plan_rejects_invalid_values(kw):
    with pytest.raises(ValueError, match="SeedPlan"):
        SeedPlan(**kw)

"""Seeds where they decide: a figure's declared plan for adding seeds to its inconclusive checks.

A figure's spec may declare a seed plan (:class:`SeedPlan`, read by :meth:`SeedPlan.of` from the
spec's ``max_seeds`` and ``seed_budget`` fields): at most ``max_seeds`` seeds per simulated point
and at most ``budget`` simulation runs added to the figure in all. After the first judgement of
the figure (:func:`~singlehead.report.verdict.judge`) every ``inconclusive`` row whose simulation
is seed-averaged (``n_seeds > 0`` and a finite ``se``) and whose theory converged gets its seeds
doubled (4 -> 8 -> 16, capped at ``max_seeds``): the new seeds continue the seed sequence
(``declared .. 2 declared - 1``, then on), so the runs already made are reused from the result
cache and an interrupted reproduction resumes without rerunning a seed. The figure is then run
and judged again as a whole, the Holm families recomputed over all its rows, until every row is
decided, no undecided row can get more seeds, or the budget is spent.

The procedure is a fixed plan, declared before any data: the budget, the cap and the doubling
rule are fields of the spec, and which rows receive seeds follows from the verdicts alone. Within
a round the rows are served in the order of the figure's table; a row whose doubling does not
fit in the rest of the budget is passed over (a later, cheaper row may still be served). Only
rows judged inconclusive ask for seeds, but seeds belong to a simulated point (a
:class:`SeedGroup`: one route, problem and set of options): another row of the same point (a
second quantity) is judged on the added seeds too.

A row names its point through its ``cfg_*`` key columns (those before ``quantity``, as
:func:`~singlehead.report.compare.records_to_frame` flattens a problem); it matches every group
whose problem has these values. A row without ``cfg_*`` keys matches no group and gets no seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from singlehead.model.problem import Problem
from singlehead.report.compare import records_to_frame
from singlehead.report.verdict import INCONCLUSIVE, key_columns, row_label

__all__ = ["SeedGroup", "SeedPlan", "SeedReport", "plan_round", "seed_columns", "served_rows"]


@dataclass(frozen=True)
class SeedPlan:
    """A figure's declared seed plan: at most ``max_seeds`` seeds per simulated point, at most ``budget``
    simulation runs added to the figure (``budget = 0``: no seeds are added)."""

    max_seeds: int = 0
    budget: int = 0

    def __post_init__(self) -> None:
        for name in ("max_seeds", "budget"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"SeedPlan.{name} must be an integer >= 0 (got {v!r})")

    @classmethod
    def of(cls, spec: Any) -> SeedPlan:
        """The plan a figure's spec declares through its ``max_seeds`` and ``seed_budget`` fields (none: no plan)."""
        return cls(int(getattr(spec, "max_seeds", 0) or 0), int(getattr(spec, "seed_budget", 0) or 0))

    @property
    def active(self) -> bool:
        return self.budget > 0 and self.max_seeds > 0

    def text(self) -> str:
        """``"up to 16 seeds per point, 48 added runs at most"``."""
        if not self.active:
            return "no seeds added"
        return f"inconclusive rows: seeds doubled up to {self.max_seeds} per point, {self.budget} added runs at most"


@dataclass
class SeedGroup:
    """The seeds of one simulated point: ``route``, ``problem`` and options (``key``: the jobs' key without a
    seed), ``declared`` seeds by the spec and ``granted`` seeds in this round (>= ``declared``)."""

    key: str
    route: str
    problem: Problem
    declared: int
    granted: int

    def point(self) -> dict[str, Any]:
        """The problem flattened into ``cfg_*`` values, as the figure's tables name it."""
        return records_to_frame([{"problem": self.problem.to_dict()}]).iloc[0].to_dict()


@dataclass
class SeedReport:
    """What the seed plan did on one figure: the plan, the runs added, the rounds, the verdict counts of the
    first judgement (``first``, a :func:`~singlehead.report.verdict.tally`), each point that received seeds as
    ``(point, declared seeds, final seeds)`` (:func:`served_rows`) and the wall time of the added rounds."""

    plan: SeedPlan
    spent: int = 0
    rounds: int = 0
    first: dict[str, Any] = field(default_factory=dict)
    rows: list[tuple[str, int, int]] = field(default_factory=list)
    #: wall time of the rounds after the first judgement (runs and judgements), in seconds
    extra_s: float = 0.0

    def text(self) -> str:
        """One line: the plan, the runs added and the points that received seeds."""
        if not self.plan.active:
            return "seed plan: none"
        head = (
            f"seed plan: {self.plan.text()}; {self.spent} of {self.plan.budget} added in {self.rounds} "
            f"round{'s' if self.rounds != 1 else ''} ({self.extra_s:.0f} s)"
        )
        if not self.rows:
            return head
        return head + " (" + "; ".join(f"{lab}: {a} -> {b} seeds" for lab, a, b in self.rows) + ")"


def _same(a: Any, b: Any) -> bool:
    if (
        isinstance(a, (float, int, np.floating, np.integer))
        and isinstance(b, (float, int, np.floating, np.integer))
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b


def _matches(row: pd.Series, keys: list[str], point: dict[str, Any]) -> bool:
    return all(k in point and _same(row[k], point[k]) for k in keys)


def _row_groups(agr: pd.DataFrame, groups: dict[str, SeedGroup]) -> list[list[str]]:
    """The keys of the groups each row matches (through its ``cfg_*`` key columns)."""
    keys = [k for k in key_columns(agr) if k.startswith("cfg_")]
    if not keys:
        return [[] for _ in range(len(agr))]
    points = {g: grp.point() for g, grp in groups.items()}
    return [[g for g, pt in points.items() if _matches(r, keys, pt)] for _, r in agr.iterrows()]


def _eligible(row: pd.Series) -> bool:
    if row.get("verdict") != INCONCLUSIVE or not bool(row.get("theory_converged", True)):
        return False
    n, se = row.get("n_seeds", 0), row.get("se", math.nan)
    try:
        return float(n) > 0 and math.isfinite(float(se))
    except (TypeError, ValueError):
        return False


def plan_round(judged: pd.DataFrame, groups: dict[str, SeedGroup], plan: SeedPlan, spent: int) -> dict[str, int]:
    """The seeds of the next round: ``{group key: new seed count}`` (empty: the plan stops).

    Each eligible row (inconclusive, seed-averaged, converged theory; module docstring) in table
    order asks for the doubling ``min(2 granted, max_seeds)`` of every group it matches that is below
    ``max_seeds``; it is served when the added runs fit in ``plan.budget - spent``, else passed over.
    """
    if not plan.active or judged is None or not len(judged) or "verdict" not in judged:
        return {}
    left = plan.budget - spent
    out: dict[str, int] = {}
    for (_, row), gs in zip(judged.iterrows(), _row_groups(judged, groups)):
        if not _eligible(row):
            continue
        ask = {
            g: min(2 * groups[g].granted, plan.max_seeds)
            for g in gs
            if g not in out and groups[g].granted < plan.max_seeds
        }
        cost = sum(n - groups[g].granted for g, n in ask.items())
        if ask and cost <= left:
            out.update(ask)
            left -= cost
    return out


def seed_columns(judged: pd.DataFrame, groups: dict[str, SeedGroup]) -> pd.DataFrame:
    """``judged`` with ``seeds_declared`` and ``seeds_added`` per row (largest over the row's groups; 0 and the
    row's ``n_seeds`` where it matches none)."""
    out = judged.copy()
    matched = _row_groups(out, groups)
    n = out["n_seeds"].to_numpy() if "n_seeds" in out else np.zeros(len(out), dtype=int)
    out["seeds_declared"] = [
        max((groups[g].declared for g in gs), default=int(k) if k == k else 0) for gs, k in zip(matched, n)
    ]
    out["seeds_added"] = [max((groups[g].granted - groups[g].declared for g in gs), default=0) for gs in matched]
    return out


def served_rows(judged: pd.DataFrame) -> list[tuple[str, int, int]]:
    """``(point, declared, final seeds)`` of each point of ``judged`` (with :func:`seed_columns`) that got seeds, once
    per point (its rows share the seeds), in table order; the point is :func:`~singlehead.report.verdict.row_label`
    without the quantity."""
    if "seeds_added" not in judged:
        return []
    keys = key_columns(judged)
    out: dict[str, tuple[str, int, int]] = {}
    for _, r in judged.iterrows():
        if int(r["seeds_added"]) <= 0:
            continue
        point = row_label(r.drop(labels=["quantity"], errors="ignore"), keys).removesuffix(" · ")
        final = int(r["n_seeds"]) if "n_seeds" in r else int(r["seeds_declared"]) + int(r["seeds_added"])
        prev = out.get(point)
        out[point] = (point, int(r["seeds_declared"]), max(final, prev[2] if prev else 0))
    return list(out.values())
